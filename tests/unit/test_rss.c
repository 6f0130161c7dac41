// SPDX-License-Identifier: MIT
/*
 * test_rss.c - mem_used_total tells the truth: it agrees with the growth of
 * the process's resident set (/proc/self/statm) within 5%.
 *
 *   rss0  baseline: corpus loaded, our buffers touched, the codec context
 *         and scratch page of this thread already made by a warm-up device
 *   rss1  after writing WRITE_MB of real data (the python core image and
 *         up to TAR_MB of files.tar, whole MiB; the core makes up what a
 *         smaller tar lacks) into a device of exactly that size
 *   rss2  after discarding every other page and uzram_compact()
 *
 * At rss1 and rss2, (rss - rss0 - table_bytes) must be within 5% of
 * mem_used_total, plus SLACK. The device is as large as the data written,
 * two whole 64 MiB chunks of slot table, so every page of the table is
 * touched and table_bytes is what it costs.
 * SLACK covers what neither figure sees exactly: the kernel counts whole
 * pages of the table and of malloc'd allocator metadata, and glibc keeps
 * freed small chunks in its arenas instead of returning them to the OS.
 *
 * A second test checks that holes cost nothing even when read, mapped
 * with block status or discarded. A third that memory locked by the
 * program (mlockall on fault, as `uzram serve --swap` does) still leaves
 * when the data goes, and that what comes back is locked again.
 *
 * Under AddressSanitizer or ThreadSanitizer every byte the allocator touches
 * also touches shadow memory, so RSS no longer measures the allocator; the
 * test is skipped there (it runs in the plain build of make test).
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uzram.h"
#include "testutil.h"

#define PG ((uint64_t)UZRAM_PAGE_SIZE)
#define CORE_MB 120u
#define TAR_MB 8u
#define WRITE_MB (CORE_MB + TAR_MB)
#define SLACK (512u << 10)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

/* Resident bytes, or 0 if /proc/self/statm cannot be read. */
static uint64_t rss_bytes(void)
{
	unsigned long long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");
	int n;

	if (!f)
		return 0;
	n = fscanf(f, "%llu %llu", &size, &resident);
	fclose(f);
	if (n != 2)
		return 0;
	return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void check_close(const char *when, uint64_t rss_growth,
			const struct uzram_stats *st)
{
	uint64_t mem = st->mem_used_total;
	double grown = (double)rss_growth - (double)st->table_bytes;
	double diff = grown - (double)mem;

	printf("   %s: RSS grew %.1f MiB, minus table %.2f MiB = %.2f MiB; "
	       "mem_used_total %.2f MiB (%+.2f%%); compr_data_size %.2f MiB\n",
	       when, (double)rss_growth / 1048576.0,
	       (double)st->table_bytes / 1048576.0, grown / 1048576.0,
	       (double)mem / 1048576.0, mem ? 100.0 * diff / (double)mem : 0.0,
	       (double)st->compr_data_size / 1048576.0);
	if (diff < 0)
		diff = -diff;
	if (diff > 0.05 * (double)mem + SLACK)
		fail_msg("%s: RSS growth %.0f bytes (without the table) is not "
			 "within 5%% of mem_used_total %llu", when, grown,
			 (unsigned long long)mem);
}

/* RSS says nothing under a sanitizer (shadow memory) or without procfs. */
static void skip_unless_rss_measurable(void)
{
#ifdef UNDER_SANITIZER
	printf("   skipped: sanitizer shadow memory is part of RSS\n");
	skip();
#endif
	if (!rss_bytes()) {
		printf("   skipped: /proc/self/statm is unreadable\n");
		skip();
	}
}

static void test_rss(void **state)
{
	const uint64_t size = (uint64_t)WRITE_MB << 20;
	struct uzram_stats st1, st2;
	struct uzram_config cfg;
	uint64_t rss0, rss1, rss2, off, p, core_end;
	struct uzram *dev = NULL;
	size_t core_len, tar_len;
	uint8_t *core, *tar, *buf;

	(void)state;
	skip_unless_rss_measurable();
	core = tu_corpus("heap-python.core", (size_t)WRITE_MB << 20, &core_len);
	tar = tu_corpus("files.tar", (size_t)TAR_MB << 20, &tar_len);
	/* The tar's whole MiB, the core before them. */
	tar_len &= ~(size_t)((1u << 20) - 1);
	core_end = size - tar_len;
	if (core_len < core_end)
		fail_msg("corpus too small: core %zu bytes, %llu needed beside "
			 "%zu of tar", core_len, (unsigned long long)core_end,
			 tar_len);
	buf = malloc(1u << 20);
	assert_non_null(buf);
	memset(buf, 1, 1u << 20);

	/* Warm-up: this thread's codec context and scratch page. */
	uzram_config_init(&cfg);
	cfg.size = 16 * PG;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	assert_int_equal(uzram_write(dev, core, 3 * PG, 100), 0);
	assert_int_equal(uzram_read(dev, buf, 3 * PG, 50), 0);
	uzram_close(dev);

	rss0 = rss_bytes();
	cfg.size = size;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	for (off = 0; off < core_end; off += 1u << 20)
		assert_int_equal(uzram_write(dev, core + off, 1u << 20, off), 0);
	for (off = 0; off < tar_len; off += 1u << 20)
		assert_int_equal(uzram_write(dev, tar + off, 1u << 20,
					     core_end + off), 0);
	rss1 = rss_bytes();
	assert_int_equal(uzram_stats(dev, &st1, sizeof(st1)), 0);
	assert_int_equal(st1.pages_stored, size / PG);
	if (st1.mem_used_total < (8u << 20))
		fail_msg("only %llu bytes in use: too little to measure",
			 (unsigned long long)st1.mem_used_total);
	check_close("after writing", rss1 - rss0, &st1);

	/* Every byte is there. */
	for (off = 0; off < size; off += 1u << 20) {
		assert_int_equal(uzram_read(dev, buf, 1u << 20, off), 0);
		if (memcmp(buf, off < core_end ? core + off :
			   tar + off - core_end, 1u << 20))
			fail_msg("data differs in the MiB at %llu",
				 (unsigned long long)off);
	}

	/* Half the pages go: the memory, and RSS with it, must follow. */
	for (p = 0; p < size / PG; p += 2)
		assert_int_equal(uzram_discard(dev, PG, p * PG), 0);
	assert_true(uzram_compact(dev) >= 0);
	rss2 = rss_bytes();
	assert_int_equal(uzram_stats(dev, &st2, sizeof(st2)), 0);
	assert_int_equal(st2.pages_stored, size / PG / 2);
	check_close("after discarding half and compacting", rss2 - rss0, &st2);
	printf("   RSS fell %.2f MiB, mem_used_total fell %.2f MiB\n",
	       ((double)rss1 - (double)rss2) / 1048576.0,
	       ((double)st1.mem_used_total - (double)st2.mem_used_total) /
	       1048576.0);
	if (st2.mem_used_total > st1.mem_used_total * 3 / 5)
		fail_msg("half the pages discarded, but mem_used_total only "
			 "fell from %llu to %llu",
			 (unsigned long long)st1.mem_used_total,
			 (unsigned long long)st2.mem_used_total);
	uzram_close(dev);
	free(core);
	free(tar);
	free(buf);
}

/*
 * Holes cost no memory, and neither does looking at them: reading a
 * never-written range, asking for its block status, or discarding it must
 * not make the slot table resident (mkfs discards a whole device first, and
 * an NBD client maps a whole export with block status).
 */
static void test_holes_cost_nothing(void **state)
{
	const uint64_t size = 16ull << 30;
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint64_t rss0, off, run;
	unsigned flags;
	uint8_t *buf;

	(void)state;
	skip_unless_rss_measurable();
	buf = malloc(1u << 20);
	assert_non_null(buf);
	memset(buf, 1, 1u << 20);
	uzram_config_init(&cfg);
	cfg.size = size;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	/* This thread's buffers exist already, or are made here. */
	assert_int_equal(uzram_read(dev, buf, 100, 10), 0);
	rss0 = rss_bytes();

	for (off = 0; off < (1ull << 30); off += 1u << 20)
		assert_int_equal(uzram_read(dev, buf, 1u << 20, off), 0);
	printf("   reading 1 GiB of holes: RSS %+lld KiB\n",
	       ((long long)rss_bytes() - (long long)rss0) / 1024);
	assert_int_equal(uzram_block_status(dev, 0, size, &run, &flags), 0);
	assert_int_equal(run, size);
	assert_int_equal(flags, UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	printf("   and block status of all 16 GiB: RSS %+lld KiB\n",
	       ((long long)rss_bytes() - (long long)rss0) / 1024);
	assert_int_equal(uzram_discard(dev, size, 0), 0);
	printf("   and discarding all 16 GiB: RSS %+lld KiB\n",
	       ((long long)rss_bytes() - (long long)rss0) / 1024);
	if (rss_bytes() > rss0 + (256u << 10))
		fail_msg("looking at holes made %llu KiB resident (the page "
			 "table is %llu KiB)",
			 (unsigned long long)(rss_bytes() - rss0) / 1024,
			 (unsigned long long)(size / PG * 16 / 1024));
	uzram_close(dev);
	free(buf);
}

/*
 * A field of /proc/self/smaps_rollup in bytes, or 0: "Locked" is the
 * resident pages of locked mappings (VmLck would count the mappings' whole
 * size, resident or not).
 */
static uint64_t rollup_bytes(const char *field)
{
	char line[256];
	unsigned long long kb = 0;
	size_t n = strlen(field);
	FILE *f = fopen("/proc/self/smaps_rollup", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			sscanf(line + n + 1, "%llu", &kb);
			break;
		}
	fclose(f);
	return (uint64_t)kb << 10;
}

/*
 * The locked resident bytes of the anonymous mappings alone (smaps'
 * Locked: of each mapping without a file). Locked: is a locked mapping's
 * Pss, so the libraries' share of it moves with how many other processes
 * map the same pages (a make test runs many beside this one): the pool is
 * anonymous, and its pages are this process's alone.
 */
static uint64_t locked_anon_bytes(void)
{
	char line[512];
	unsigned long long kb, sum = 0;
	bool anon = false;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		int path = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi,
			   &path) == 2 && path > 0)
			anon = line[path] != '/';
		else if (anon && sscanf(line, "Locked: %llu", &kb) == 1)
			sum += kb;
	}
	fclose(f);
	return (uint64_t)sum << 10;
}

/*
 * Locked memory goes back too. The kernel refuses MADV_DONTNEED on locked
 * pages, so a pool under mlockall once kept every page it had ever used
 * while mem_used_total said they were gone. Here: lock on fault, write
 * LOCK_MB of data, discard all of it and compact; RSS and the locked
 * resident pages must fall
 * with mem_used_total; writing it again must lock what it takes again.
 */
#define LOCK_MB 32u
static void test_locked_memory_given_back(void **state)
{
	const uint64_t size = (uint64_t)LOCK_MB << 20;
	struct uzram_stats st1, st2;
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint64_t rss0, rss1, rss2, lck1 = 0, lck2 = 0, lck3, off;

	if (!rollup_bytes("Rss")) {
		printf("   skipped: /proc/self/smaps_rollup is unreadable\n");
		skip();
	}
	size_t len;
	uint8_t *core, *buf;

	(void)state;
	skip_unless_rss_measurable();
	core = tu_corpus("heap-python.core", 1u << 20, &len);
	if (len < 64 * PG)
		fail_msg("corpus too small: %zu bytes", len);
	len -= len % PG;
	buf = malloc(1u << 20);
	assert_non_null(buf);
	/* 1 MiB of corpus pages, each stamped with its page number */
	uzram_config_init(&cfg);
	cfg.size = size;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0) {
		printf("   skipped: mlockall: %s\n", strerror(errno));
		uzram_close(dev);
		free(core);
		free(buf);
		skip();
	}
	assert_int_equal(uzram_read(dev, buf, 1u << 20, 0), 0);
	rss0 = rss_bytes();
	for (int round = 0; round < 2; round++) {
		for (off = 0; off < size; off += 1u << 20) {
			for (uint64_t p = 0; p < (1u << 20) / PG; p++) {
				uint64_t page = (off / PG) + p;

				memcpy(buf + p * PG, core + (page * PG) % len, PG);
				memcpy(buf + p * PG, &page, sizeof page);
			}
			assert_int_equal(uzram_write(dev, buf, 1u << 20, off), 0);
		}
		if (round == 1)
			break;
		rss1 = rss_bytes();
		lck1 = locked_anon_bytes();
		assert_int_equal(uzram_stats(dev, &st1, sizeof st1), 0);
		check_close("locked, after writing", rss1 - rss0, &st1);
		assert_int_equal(uzram_discard(dev, size, 0), 0);
		assert_true(uzram_compact(dev) >= 0);
		rss2 = rss_bytes();
		lck2 = locked_anon_bytes();
		assert_int_equal(uzram_stats(dev, &st2, sizeof st2), 0);
		printf("   locked: RSS %.2f -> %.2f MiB, locked %.2f -> %.2f MiB, "
		       "mem_used_total %.2f -> %.2f MiB\n",
		       (double)(rss1 - rss0) / 1048576.0,
		       ((double)rss2 - (double)rss0) / 1048576.0,
		       (double)lck1 / 1048576.0, (double)lck2 / 1048576.0,
		       (double)st1.mem_used_total / 1048576.0,
		       (double)st2.mem_used_total / 1048576.0);
		check_close("locked, after discarding all and compacting",
			    rss2 > rss0 ? rss2 - rss0 : 0, &st2);
		if (lck1 - lck2 < (st1.mem_used_total - st2.mem_used_total) * 9 / 10)
			fail_msg("mem_used_total fell by %llu bytes, locked memory "
				 "only by %llu",
				 (unsigned long long)(st1.mem_used_total -
						      st2.mem_used_total),
				 (unsigned long long)(lck1 - lck2));
	}
	lck3 = locked_anon_bytes();
	printf("   written again: locked %.2f MiB\n", (double)lck3 / 1048576.0);
	if (lck3 < lck2 + (lck1 - lck2) * 9 / 10)
		fail_msg("written again, locked memory is %llu bytes, was %llu "
			 "the first time: what faulted in is not locked",
			 (unsigned long long)lck3, (unsigned long long)lck1);
	for (off = 0; off < size; off += PG) {
		uint64_t page;

		assert_int_equal(uzram_read(dev, buf, PG, off), 0);
		memcpy(&page, buf, sizeof page);
		assert_int_equal(page, off / PG);
	}
	munlockall();
	uzram_close(dev);
	free(core);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rss),
		cmocka_unit_test(test_holes_cost_nothing),
		cmocka_unit_test(test_locked_memory_given_back),
	};

	return tu_run_tests(tests, NULL, NULL);
}
