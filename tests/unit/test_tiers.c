// SPDX-License-Identifier: MIT
/*
 * test_tiers.c - the second tier: writeback to a backing file in every
 * mode (all, huge, idle, huge_idle, incompressible), page ranges, the
 * per-call and the device's writeback limit, largest objects first; reads
 * (whole and partial), rewrites, partial writes, discards and write-zeroes
 * of written-back clusters; compaction of the backing store after churn;
 * write-through when memory is full; idle ages, and reads that age
 * (uzram_set_swap_reads()); faults (a failing write
 * leaves its clusters in memory, also when it is one of several writes in
 * flight, and a failing read fails that request only) and
 * bad backing stores refused with a clear error; a file written on the
 * blocks under it (UZRAM_BACKING_BLOCKS).
 *
 * Every check compares the whole device with a reference copy
 * (store_check.h). Faults are injected through the backing store's test
 * hook (tier.h); the integration tests inject real ones (nbdkit's error
 * filter, a full file system).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "store_check.h"
#include "core/core.h"
#include "tier/tier.h"

#define NPAGES 1024

static char path[64];

/* A fresh empty backing file; unlinked at once, the device keeps it open. */
static const char *backing_file(void)
{
	int fd;

	snprintf(path, sizeof path, "/tmp/uzram-tier-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	return path;
}

static struct uzram *tier_open_dev(uint64_t size, uint64_t limit,
				   uint32_t cluster)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	int r;

	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.mem_limit = limit;
	cfg.cluster_size = cluster;
	cfg.backing = backing_file();
	r = uzram_open(&cfg, &dev);
	unlink(path);
	if (r)
		fail_msg("uzram_open with backing: %s", uzram_last_error());
	return dev;
}

/*
 * Pages: [0, 512) data pages, [512, 576) random (huge), [576, 640)
 * same-filled, the rest holes.
 */
static void fill(struct uzram *dev, uint8_t *ref)
{
	uint64_t seed = 5, p;
	uint8_t page[PG];

	for (p = 0; p < 512; p++)
		dev_write(dev, ref, data_page(p), PG, p * PG);
	for (; p < 576; p++) {
		fill_rand(page, PG, &seed);
		dev_write(dev, ref, page, PG, p * PG);
	}
	for (; p < 640; p++) {
		fill_same(page, PG, SAME_VALUE + p);
		dev_write(dev, ref, page, PG, p * PG);
	}
}

/* A device with a backing file, filled (fill); *ref its reference copy. */
static struct uzram *filled(uint8_t **ref)
{
	struct uzram *dev = tier_open_dev(NPAGES * PG, 0, 0);

	*ref = calloc(1, NPAGES * PG);
	assert_non_null(*ref);
	fill(dev, *ref);
	return dev;
}

static void done(struct uzram *dev, uint8_t *ref)
{
	uzram_close(dev);
	free(ref);
}

static void check_backed(struct uzram *dev, uint64_t want_pages)
{
	struct uzram_stats st = get_stats(dev);

	assert_int_equal(st.bd_count, want_pages);
	assert_true(st.bd_bytes <= st.bd_count * PG);
	assert_true(st.bd_space >= st.bd_bytes);
	assert_int_equal(st.pages_stored, 640);
	assert_int_equal(st.failed_reads + st.failed_writes, 0);
}

static void test_writeback_all(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	struct uzram_stats st0, st;
	uint64_t want = 0;
	long n;

	(void)state;
	st0 = get_stats(dev);
	for (uint64_t p = 0; p < 512; p++)
		want += lz4_stored_size(data_page(p));
	n = uzram_writeback(dev, 0, 0, UINT64_MAX, 0);
	assert_int_equal(n, 576);
	st = get_stats(dev);
	check_backed(dev, 576);
	/* written as stored: compressed objects, the random pages raw */
	assert_int_equal(st.bd_bytes, st0.compr_data_size);
	assert_int_equal(st.bd_bytes, want + 64 * PG);
	assert_int_equal(st.compr_data_size, 0);
	assert_int_equal(st.huge_pages, 0);
	assert_int_equal(st.same_pages, 64);
	assert_int_equal(st.bd_writes, 576);
	assert_int_equal(st.pages_written_back, 576);
	/* packed: the space is the bytes at 16-byte alignment, in segments */
	assert_true(st.bd_space <= st.bd_bytes + 576 * 16 + 2 * SEG_BYTES);
	printf("   576 pages: %llu bytes compressed, %llu of backing store\n",
	       (unsigned long long)st.bd_bytes,
	       (unsigned long long)st.bd_space);
	check_dev(dev, ref, "all written back");
	for (uint64_t off = 0; off < 640 * PG; off += 3 * PG + 777)
		check_read(dev, ref, off, 1 + off % (2 * PG));
	st = get_stats(dev);
	assert_true(st.bd_reads >= 576);
	/* nothing left to write back */
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), 0);
	done(dev, ref);
}

static void test_modes(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	uint8_t buf[PG];

	(void)state;
	/* huge: the 64 random pages only */
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_HUGE, 0, UINT64_MAX, 0),
			 64);
	check_backed(dev, 64);
	check_dev(dev, ref, "huge");
	/* idle: marked, then pages 0..99 read: the other 412 data pages */
	assert_true(uzram_mark_idle(dev) >= 576);
	for (uint64_t p = 0; p < 100; p++)
		assert_int_equal(uzram_read(dev, buf, PG, p * PG), 0);
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_IDLE, 0, UINT64_MAX, 0),
			 412);
	check_backed(dev, 64 + 412);
	check_dev(dev, ref, "idle");
	done(dev, ref);

	/* huge_idle: only the random pages not read since the mark */
	dev = filled(&ref);
	assert_true(uzram_mark_idle(dev) > 0);
	for (uint64_t p = 512; p < 532; p++)
		assert_int_equal(uzram_read(dev, buf, PG, p * PG), 0);
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_HUGE | UZRAM_WB_IDLE, 0,
					 UINT64_MAX, 0), 44);
	check_backed(dev, 44);
	check_dev(dev, ref, "huge_idle");
	done(dev, ref);
}

static void test_incompressible(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	uint64_t seed = 77;
	uint8_t page[PG];

	(void)state;
	/* none tried yet: nothing is incompressible */
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_INCOMPRESSIBLE, 0,
					 UINT64_MAX, 0), 0);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	assert_true(uzram_recompress(dev, 1, UZRAM_RECOMP_HUGE, 0) >= 0);
	/* a huge page written after the attempt was not tried */
	fill_rand(page, PG, &seed);
	dev_write(dev, ref, page, PG, 700 * PG);
	/* zstd cannot shrink random bytes: those 64 are incompressible */
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_INCOMPRESSIBLE, 0,
					 UINT64_MAX, 0), 64);
	check_dev(dev, ref, "incompressible");
	/* the next recompression does not retry them, nor the new one twice */
	assert_int_equal(uzram_recompress(dev, 1, UZRAM_RECOMP_HUGE, 0), 0);
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_INCOMPRESSIBLE, 0,
					 UINT64_MAX, 0), 1);
	check_dev(dev, ref, "incompressible, again");
	done(dev, ref);
}

static void test_ranges_and_limits(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	struct uzram_stats st;

	(void)state;
	/* pages 100..199; then 600..700 holds only same-filled pages */
	assert_int_equal(uzram_writeback(dev, 0, 100, 199, 0), 100);
	assert_int_equal(uzram_writeback(dev, 0, 600, 700, 0), 0);
	assert_int_equal(uzram_writeback(dev, 0, 100, 199, 0), 0);
	check_dev(dev, ref, "range");
	/* a per-call limit takes the largest first: the raw pages */
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 40), 40);
	st = get_stats(dev);
	assert_int_equal(st.bd_count, 140);
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_HUGE, 0, UINT64_MAX, 0),
			 24);
	/* the device's limit, counted down, then off */
	assert_int_equal(uzram_set_writeback_limit(dev, 1, 30), 0);
	assert_int_equal(get_stats(dev).bd_wb_limit, 30);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), 30);
	assert_int_equal(get_stats(dev).bd_wb_limit, 0);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), 0);
	assert_int_equal(uzram_set_writeback_limit(dev, 0, 0), 0);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0),
			 576 - 100 - 64 - 30);
	check_backed(dev, 576);
	check_dev(dev, ref, "limits");
	done(dev, ref);
}

/* Largest first: with a limit, the objects taken are the largest. */
static void test_largest_first(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	uint64_t sizes[512], cut, taken;
	struct uzram_stats st;

	(void)state;
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_HUGE, 0, UINT64_MAX, 0),
			 64);
	for (int p = 0; p < 512; p++)
		sizes[p] = lz4_stored_size(data_page((size_t)p));
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 100), 100);
	st = get_stats(dev);
	taken = st.bd_bytes - 64 * PG;
	/* no band of smaller objects was taken before a larger one: at
	 * least the 100 largest objects' share of the top band */
	cut = 0;
	for (int p = 0; p < 512; p++)
		if (sizes[p] >= PG / 2)
			cut++;
	if (cut >= 100)
		assert_true(taken >= 100 * PG / 2);
	else
		assert_true(taken >= cut * PG / 2);
	check_dev(dev, ref, "largest first");
	done(dev, ref);
}

static void test_churn_and_compaction(void **state)
{
	uint8_t *ref = calloc(1, NPAGES * 4 * PG);
	struct uzram *dev = tier_open_dev(NPAGES * 4 * PG, 0, 0);
	struct uzram_stats st;
	uint64_t seed = 3;
	uint8_t page[PG];
	long freed;

	(void)state;
	/* 4096 data pages written back, then churned round by round */
	for (uint64_t p = 0; p < NPAGES * 4; p++)
		dev_write(dev, ref, data_page(p % 2048), PG, p * PG);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), NPAGES * 4);
	for (int round = 0; round < 6; round++) {
		for (int i = 0; i < 1500; i++) {
			uint64_t p = tu_rand(&seed) % (NPAGES * 4);

			switch (tu_rand(&seed) % 4) {
			case 0:
				assert_int_equal(uzram_discard(dev, PG, p * PG), 0);
				memset(ref + p * PG, 0, PG);
				break;
			case 1:
				memcpy(page, ref + p * PG, PG);
				page[tu_rand(&seed) % PG] ^= 0x5a;
				dev_write(dev, ref, page, PG, p * PG);
				break;
			case 2:
				/* a partial write into a backed cluster */
				dev_write(dev, ref, "tier", 4, p * PG + 100);
				break;
			default:
				dev_write(dev, ref, data_page(tu_rand(&seed) % 2048),
					  PG, p * PG);
				break;
			}
		}
		assert_true(uzram_writeback(dev, 0, 0, UINT64_MAX, 0) >= 0);
		check_dev(dev, ref, "churn");
	}
	st = get_stats(dev);
	/* writeback keeps it within twice the live bytes by itself */
	assert_true(st.bd_space <= 2 * st.bd_bytes + 4 * SEG_BYTES);
	freed = uzram_backing_compact(dev);
	assert_true(freed >= 0);
	st = get_stats(dev);
	printf("   after churn: %llu live bytes in %llu bytes of backing "
	       "store (%.2fx), compaction freed %ld, moved %llu\n",
	       (unsigned long long)st.bd_bytes, (unsigned long long)st.bd_space,
	       (double)st.bd_space / (double)st.bd_bytes, freed,
	       (unsigned long long)st.bd_compacted);
	assert_true(st.bd_space * 3 <= st.bd_bytes * 4 + 3 * 3 * SEG_BYTES);
	check_dev(dev, ref, "compacted");
	/* everything discarded: nothing live, only the open heads held */
	assert_int_equal(uzram_discard(dev, NPAGES * 4 * PG, 0), 0);
	st = get_stats(dev);
	assert_int_equal(st.bd_count, 0);
	assert_int_equal(st.bd_bytes, 0);
	assert_true(st.bd_space <= TIER_HEADS * SEG_BYTES);
	done(dev, ref);
}

static void test_write_through(void **state)
{
	const uint64_t npages = 4096, limit = 512u << 10;
	uint8_t *ref = calloc(1, npages * PG);
	struct uzram *dev = tier_open_dev(npages * PG, limit, 0);
	struct uzram_stats st;

	(void)state;
	/* 16 MiB of data into a device allowed 512 KiB of memory */
	for (uint64_t p = 0; p < npages; p++)
		dev_write(dev, ref, data_page(p % 2048), PG, p * PG);
	st = get_stats(dev);
	printf("   %llu pages through, %llu written back by the policy in "
	       "%llu runs; mem_used_max %llu for a limit of %llu\n",
	       (unsigned long long)st.pages_written_through,
	       (unsigned long long)st.policy_written_back,
	       (unsigned long long)st.policy_runs,
	       (unsigned long long)st.mem_used_max,
	       (unsigned long long)limit);
	assert_int_equal(st.failed_writes, 0);
	assert_true(st.pages_written_through + st.policy_written_back > 0);
	assert_true(st.mem_used_max <= limit + ZSPAGE_MAX);
	assert_int_equal(st.pages_stored, npages);
	check_dev(dev, ref, "write-through");
	done(dev, ref);
}

/*
 * Memory full when a write needs a new chunk of the slot table: the writer
 * makes room itself. Watermarks of 100% and 99% keep the policy thread
 * idle (the pool, capped at the limit minus the table, never passes 99%),
 * so only the writer's own step can free the chunk's 256 KiB.
 */
static void test_table_room(void **state)
{
	const uint64_t size = 128u << 20, limit = 1u << 20;
	uint8_t *ref = calloc(1, size);
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	struct uzram_stats st;
	int r;

	(void)state;
	assert_non_null(ref);
	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.mem_limit = limit;
	cfg.high_watermark = 100;
	cfg.low_watermark = 99;
	cfg.backing = backing_file();
	r = uzram_open(&cfg, &dev);
	unlink(path);
	if (r)
		fail_msg("uzram_open with backing: %s", uzram_last_error());
	for (uint64_t p = 0; p < 2048; p++)
		dev_write(dev, ref, data_page(p), PG, p * PG);
	st = get_stats(dev);
	assert_true(st.pages_written_through > 0);
	assert_int_equal(st.policy_written_back, 0);
	/* the first page of the second chunk (64 MiB of 4 KiB clusters) */
	dev_write(dev, ref, data_page(0), PG, 64u << 20);
	st = get_stats(dev);
	assert_true(st.policy_written_back > 0);
	assert_int_equal(st.failed_writes, 0);
	assert_true(st.mem_used_total <= limit);
	check_dev(dev, ref, "a new chunk with memory full");
	uzram_close(dev);
	free(ref);
}

/*
 * A limit lowered under what the device holds: the policy moves it out,
 * recompressing first when the device has a secondary algorithm.
 */
static void lower_limit(const char *recomp)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	struct uzram_stats st = get_stats(dev);
	const uint64_t limit = st.mem_used_total / 2;

	if (recomp)
		assert_int_equal(uzram_add_recomp_algorithm(dev, recomp, 0), 1);
	assert_int_equal(uzram_set_mem_limit(dev, limit), 0);
	/*
	 * a wait of at most 30 s, not a timing: the thread is woken at once.
	 * A step counts the pages it wrote back once its writeback returns,
	 * after their memory was freed: wait for the count too.
	 */
	for (int i = 0; i < 1500; i++) {
		st = get_stats(dev);
		if (st.mem_used_total <= limit / 100 * 90 &&
		    st.policy_written_back > 0)
			break;
		usleep(20000);
	}
	if (st.mem_used_total > limit / 100 * 90)
		fail_msg("mem_used_total %llu stays above 90%% of the lowered "
			 "limit %llu", (unsigned long long)st.mem_used_total,
			 (unsigned long long)limit);
	assert_true(st.policy_runs > 0);
	assert_true(st.policy_written_back > 0);
	if (recomp)
		assert_true(st.policy_recompressed > 0);
	assert_int_equal(st.policy_recompressed, st.pages_recompressed);
	check_dev(dev, ref, "after the policy");
	done(dev, ref);
}

static void test_lower_limit(void **state)
{
	(void)state;
	lower_limit(NULL);
	lower_limit("zstd");
}

static void test_idle_ages(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	uint8_t buf[PG];

	(void)state;
	/* just written: nothing is 8 s old, everything is 0 s old */
	assert_int_equal(uzram_mark_idle_age(dev, 8), 0);
	assert_int_equal(uzram_mark_idle_age(dev, 0), 640);
	/* the device's clock moved on by 100 s (private: its origin) */
	dev->clock0 -= 100;
	for (uint64_t p = 0; p < 50; p++)
		assert_int_equal(uzram_read(dev, buf, PG, p * PG), 0);
	dev_write(dev, ref, data_page(0), PG, 60 * PG);   /* unchanged */
	dev_write(dev, ref, data_page(1), PG, 61 * PG);   /* new data */
	/* reading cleared the idle bits; the marks go by age */
	assert_int_equal(uzram_mark_idle_age(dev, 60), 640 - 52);
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_IDLE, 0, 99, 0),
			 100 - 52);
	/*
	 * 1300 s later, walked every 400 s (within the 8 minutes promised),
	 * past the wrap of the 8-bit stamp: ages saturate at 512 s, not wrap
	 */
	for (int i = 0; i < 3; i++) {
		dev->clock0 -= 400;
		assert_int_equal(uzram_mark_idle_age(dev, 400), 640);
	}
	assert_int_equal(uzram_mark_idle_age(dev, 508), 640);
	assert_int_equal(uzram_mark_idle_age(dev, 600), 640);
	check_dev(dev, ref, "idle ages");
	done(dev, ref);
}

/* Pages of [first, last] whose cluster is on the backing store. */
static uint64_t backed_in(struct uzram *dev, uint64_t first, uint64_t last)
{
	uint64_t n = 0;

	for (uint64_t p = first; p <= last; p++) {
		struct slot *s = slot_peek(dev, p);

		n += s && slot_state(s) == SLOT_BACKED;
	}
	return n;
}

/*
 * uzram_set_swap_reads(): a read makes its clusters idle and old, so
 * writeback of idle clusters and the policy take them first; writes, and
 * reads once it is off, make them young again. Under zram's rule the
 * policy would take the huge pages first (the largest, all as young).
 */
static void test_swap_reads(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	uint8_t buf[PG];

	(void)state;
	assert_int_equal(uzram_set_swap_reads(NULL, 1), -EINVAL);
	assert_int_equal(uzram_set_swap_reads(dev, 1), 0);
	for (uint64_t p = 0; p < 50; p++)
		assert_int_equal(uzram_read(dev, buf, PG, p * PG), 0);
	memcpy(buf, ref + 10 * PG, PG);
	dev_write(dev, ref, buf, PG, 10 * PG);            /* unchanged */
	dev_write(dev, ref, data_page(1), PG, 11 * PG);   /* new data */
	assert_int_equal(uzram_set_swap_reads(dev, 0), 0);
	assert_int_equal(uzram_read(dev, buf, PG, 12 * PG), 0);
	/* nothing was written or read 8 s ago but the 47 swap-ins */
	assert_int_equal(uzram_mark_idle_age(dev, 8), 47);
	assert_int_equal(uzram_mark_idle_age(dev, 508), 47);
	assert_int_equal(uzram_writeback(dev, UZRAM_WB_IDLE, 0, UINT64_MAX, 0),
			 47);
	assert_int_equal(backed_in(dev, 0, 49), 47);
	assert_int_equal(backed_in(dev, 10, 12), 0);
	check_dev(dev, ref, "swap reads, writeback of idle clusters");
	done(dev, ref);
}

/*
 * The policy, on a device whose reads are swap-ins: of the clusters read
 * (pages 0-255, compressed data) and those written and not read since (the
 * rest, with the 64 huge ones, the largest), it writes back read ones
 * only, as long as they hold what it must move out. The limit is set so
 * that it must move out about a quarter of their bytes (high watermark
 * 90%, low 89%: need = mem_used - 89% of the limit).
 */
static void test_swap_reads_policy(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	struct uzram_stats st;
	uint64_t cooled = 0, limit;
	uint8_t *ref, buf[PG];

	(void)state;
	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	cfg.backing = backing_file();
	cfg.high_watermark = 90;
	cfg.low_watermark = 89;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	unlink(path);
	ref = calloc(1, NPAGES * PG);
	assert_non_null(ref);
	fill(dev, ref);
	assert_int_equal(uzram_set_swap_reads(dev, 1), 0);
	for (uint64_t p = 0; p < 256; p++) {
		assert_int_equal(uzram_read(dev, buf, PG, p * PG), 0);
		cooled += lz4_stored_size(ref + p * PG);
	}
	st = get_stats(dev);
	limit = (st.mem_used_total - cooled / 4) / 90 * 100;
	assert_int_equal(uzram_set_mem_limit(dev, limit), 0);
	/* a wait of at most 30 s, not a timing: the thread is woken at once */
	for (int i = 0; i < 1500; i++) {
		st = get_stats(dev);
		if (st.policy_written_back > 0 &&
		    st.mem_used_total <= limit / 100 * 90)
			break;
		usleep(20000);
	}
	assert_true(st.policy_written_back > 0);
	assert_int_equal(backed_in(dev, 0, 255), st.bd_count);
	assert_true(st.bd_count < 256);
	check_dev(dev, ref, "swap reads, the policy");
	done(dev, ref);
}

static void test_faults(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	struct uzram_stats st0, st;
	uint8_t buf[PG];
	long n;

	(void)state;
	st0 = get_stats(dev);
	/*
	 * a failing write: its clusters stay in memory. 576 pages make at
	 * least three batch writes, all in flight before the first one fails
	 * (at its wait), so the others may complete.
	 */
	atomic_store(&dev->tier->b->fail_writes, 1);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), -EIO);
	assert_non_null(strstr(uzram_last_error(), "backing store"));
	st = get_stats(dev);
	assert_int_equal(st.bd_failed_writes, 1);
	assert_true(st.bd_count < 576);
	assert_int_equal(st.compr_data_size + st.bd_bytes, st0.compr_data_size);
	check_dev(dev, ref, "failed writeback");
	/* then it works: what stayed goes out */
	n = 576 - (long)st.bd_count;
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), n);
	assert_int_equal(get_stats(dev).bd_count, 576);
	/* a failing read: that request only, the data stays */
	atomic_store(&dev->tier->b->fail_reads, 1);
	assert_int_equal(uzram_read(dev, buf, PG, 7 * PG), -EIO);
	st = get_stats(dev);
	assert_int_equal(st.bd_failed_reads, 1);
	assert_int_equal(st.failed_reads, 1);
	assert_int_equal(st.bd_count, 576);
	check_dev(dev, ref, "after a failed read");
	/* a partial write that cannot read the backed cluster changes nothing */
	atomic_store(&dev->tier->b->fail_reads, 1);
	assert_int_equal(uzram_write(dev, "x", 1, 8 * PG + 5), -EIO);
	check_dev(dev, ref, "after a failed merge");
	done(dev, ref);
}

/*
 * The tid of the tier's thread (named uzram-tier) that is not `other`, or
 * -1: a device left open by a failed test has one too.
 */
static long tier_tid(long other)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	char name[300], line[64];
	long tid = -1;

	assert_non_null(d);
	while (tid < 0 && (e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.' || atol(e->d_name) == other)
			continue;
		snprintf(name, sizeof name, "/proc/self/task/%s/comm", e->d_name);
		f = fopen(name, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof line, f) && !strcmp(line, "uzram-tier\n"))
			tid = atol(e->d_name);
		fclose(f);
	}
	closedir(d);
	return tid;
}

/* The voluntary context switches of thread tid: its wakeups; -1 if gone. */
static long wakeups(long tid)
{
	char name[64], line[128];
	FILE *f;
	long n = -1;

	snprintf(name, sizeof name, "/proc/self/task/%ld/status", tid);
	f = fopen(name, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		sscanf(line, "voluntary_ctxt_switches: %ld", &n);
	fclose(f);
	return n;
}

/* With no memory limit the policy thread sleeps; a limit wakes it. */
static void test_policy_sleeps(void **state)
{
	long old = tier_tid(-1), tid, before, after;
	struct uzram *dev = tier_open_dev(NPAGES * PG, 0, 0);

	(void)state;
	tid = tier_tid(old);
	assert_true(tid > 0);
	/*
	 * Until it has gone to sleep: its start may switch once or twice,
	 * and on a busy machine it may wait for a CPU (no switch counted)
	 * for a while before it does, so it must stay put for 3 looks in a
	 * row (within 30 s: a policy thread that never sleeps is this test's
	 * failure, or an earlier failed test's device left open).
	 */
	after = wakeups(tid);
	for (int still = 0, looks = 0; still < 3; looks++) {
		if (looks == 300)
			fail_msg("the policy thread %ld never went to sleep", tid);
		before = after;
		assert_true(before >= 0);
		usleep(100 * 1000);
		after = wakeups(tid);
		still = after == before ? still + 1 : 0;
	}
	usleep(700 * 1000);     /* 3 wakeups of a device with a limit */
	assert_int_equal(wakeups(tid), before);
	assert_int_equal(get_stats(dev).policy_runs, 0);
	assert_int_equal(uzram_set_mem_limit(dev, 64 << 20), 0);
	for (int i = 0; i < 100 && after == before; i++) {
		usleep(100 * 1000);
		after = wakeups(tid);
	}
	assert_true(after > before);
	uzram_close(dev);
	/* joined; the kernel may show the task for a moment after the join */
	for (int i = 0; i < 200 && wakeups(tid) != -1; i++)
		usleep(10 * 1000);
	assert_int_equal(wakeups(tid), -1);
}

/* The second of several batch writes in flight fails: the others commit. */
static void test_fault_in_flight(void **state)
{
	uint8_t *ref;
	struct uzram *dev = filled(&ref);
	struct uzram_stats st0, st;
	long n;

	(void)state;
	st0 = get_stats(dev);
	atomic_store(&dev->tier->b->pass_writes, 1);
	atomic_store(&dev->tier->b->fail_writes, 1);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), -EIO);
	st = get_stats(dev);
	assert_int_equal(st.bd_failed_writes, 1);
	assert_true(st.bd_count > 0 && st.bd_count < 576);
	assert_int_equal(st.compr_data_size + st.bd_bytes, st0.compr_data_size);
	assert_int_equal(st.bd_writes, st.bd_count);
	check_dev(dev, ref, "a failed write among writes in flight");
	n = 576 - (long)st.bd_count;
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), n);
	check_backed(dev, 576);
	check_dev(dev, ref, "written back after the failure");
	done(dev, ref);
}

/* Random pages from off until a chunk would not fit, at most `max` bytes. */
static void fill_until_full(struct uzram *dev, uint64_t off, uint64_t max,
			    uint64_t seed)
{
	uint8_t page[PG];

	for (uint64_t end = off + max; off < end && mem_fits(dev, CHUNK_BYTES);
	     off += PG) {
		for (size_t i = 0; i < PG; i += 8) {
			uint64_t v = tu_rand(&seed);

			memcpy(page + i, &v, 8);
		}
		assert_int_equal(uzram_write(dev, page, PG, off), 0);
	}
}

/*
 * A write that needs a new chunk of the slot table (every 16384 clusters:
 * 64 MiB of 4 KiB clusters) while memory is full: the tier makes room for
 * the chunk, and the room must still be there when the chunk is made,
 * although other writers store in the meantime. Here the "other writers"
 * are made certain: the make_room hook is wrapped, and the wrapper fills
 * the allocator again right after the tier has made room, as writers on
 * other threads did under nbdcopy (one copy of 72 MiB in two, into serve
 * --mem-limit 4M --backing, failed with -ENOSPC at the second chunk
 * before the chunk's room was held out of the allocator).
 */
static void (*real_make_room)(struct uzram *dev, uint64_t need);
static bool refilling;

static void make_room_then_refill(struct uzram *dev, uint64_t need)
{
	real_make_room(dev, need);
	if (refilling)
		return;
	refilling = true;
	/*
	 * Random pages into the first chunk until the new chunk would not
	 * fit (at most 4 MiB of them, more than the tier freed): where the
	 * chunk's room is held, they cannot take it, and this ends by count.
	 */
	fill_until_full(dev, 0, 4u << 20, 7);
	refilling = false;
}

static void test_new_chunk_room_kept(void **state)
{
	const uint64_t chunk_span = (uint64_t)CHUNK_SLOTS * PG;
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint8_t page[PG], got[PG];

	(void)state;
	uzram_config_init(&cfg);
	cfg.size = 2 * chunk_span;
	cfg.mem_limit = 4 << 20;
	cfg.backing = backing_file();
	/* the policy thread stays out of it: only the writers make room */
	cfg.high_watermark = 100;
	cfg.low_watermark = 75;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	unlink(path);
	fill_until_full(dev, 0, 8u << 20, 11);
	assert_false(mem_fits(dev, CHUNK_BYTES));
	real_make_room = dev->hooks.make_room;
	dev->hooks.make_room = make_room_then_refill;
	memset(page, 0x5a, PG);
	page[0] = 1;
	if (uzram_write(dev, page, PG, chunk_span))
		fail_msg("the first write into the second chunk: %s",
			 uzram_last_error());
	dev->hooks.make_room = real_make_room;
	assert_int_equal(uzram_read(dev, got, PG, chunk_span), 0);
	assert_memory_equal(got, page, PG);
	assert_true(get_stats(dev).mem_used_max <= 4 << 20);
	uzram_close(dev);
}

static void test_bad_backing(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	char dir[] = "/tmp/uzram-tier-dir-XXXXXX";
	char file[96];
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	uzram_config_init(&cfg);
	cfg.size = 1 << 20;
	/* a file with data in it is not overwritten */
	snprintf(file, sizeof file, "%s/data", dir);
	fd = open(file, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep", 4), 4);
	close(fd);
	cfg.backing = file;
	assert_int_equal(uzram_open(&cfg, &dev), -EEXIST);
	assert_null(dev);
	assert_non_null(strstr(uzram_last_error(), "not empty"));
	{
		char b[8] = { 0 };

		fd = open(file, O_RDONLY);
		assert_int_equal(read(fd, b, sizeof b), 4);
		close(fd);
		assert_string_equal(b, "keep");
	}
	unlink(file);
	/* a directory, a missing folder, a closed NBD socket */
	cfg.backing = dir;
	assert_int_equal(uzram_open(&cfg, &dev), -EISDIR);
	snprintf(file, sizeof file, "%s/no/such", dir);
	cfg.backing = file;
	assert_int_equal(uzram_open(&cfg, &dev), -ENOENT);
	snprintf(file, sizeof file, "nbd+unix:///?socket=%s/none.sock", dir);
	cfg.backing = file;
	assert_int_equal(uzram_open(&cfg, &dev), -EIO);
	assert_non_null(strstr(uzram_last_error(), "backing store"));
	/* bad watermarks */
	cfg.backing = backing_file();
	cfg.high_watermark = 50;
	cfg.low_watermark = 60;
	assert_int_equal(uzram_open(&cfg, &dev), -EINVAL);
	unlink(path);
	rmdir(dir);
	/* no backing store, bad flags, bad ranges */
	cfg.backing = NULL;
	cfg.high_watermark = cfg.low_watermark = 0;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), -ENODEV);
	assert_int_equal(uzram_backing_compact(dev), -ENODEV);
	assert_int_equal(uzram_set_writeback_limit(dev, 1, 1), -ENODEV);
	uzram_close(dev);
	dev = tier_open_dev(1 << 20, 0, 0);
	assert_int_equal(uzram_writeback(dev, 8, 0, UINT64_MAX, 0), -EINVAL);
	assert_int_equal(uzram_writeback(dev, 0, 5, 4, 0), -EINVAL);
	assert_int_equal(uzram_writeback(dev, 0, 256, UINT64_MAX, 0), -EINVAL);
	assert_int_equal(uzram_writeback(NULL, 0, 0, 1, 0), -EINVAL);
	uzram_close(dev);
}

/* The bytes of the file open as fd. */
static uint64_t file_size(int fd)
{
	struct stat sb;

	assert_int_equal(fstat(fd, &sb), 0);
	return (uint64_t)sb.st_size;
}

/*
 * UZRAM_BACKING_BLOCKS: refused on tmpfs (no block device of its own),
 * the file left empty; not read from a config of the layout before it;
 * and where the test can (root, /tmp on a block device), the file
 * allocated whole at open, everything written back on its blocks, read
 * back whole and in pieces, half of it written over and written back
 * again, the file emptied at close. t73 runs it on ext4 with 4 KiB and
 * 1 KiB blocks, from several connections.
 */
static void test_backing_blocks(void **state)
{
	char shm[] = "/dev/shm/uzram-tier-XXXXXX";
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint8_t *ref;
	int fd, r;

	(void)state;
	fd = mkstemp(shm);
	assert_true(fd >= 0);
	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	cfg.backing = shm;
	cfg.backing_flags = UZRAM_BACKING_BLOCKS;
	assert_int_equal(uzram_open(&cfg, &dev), -EOPNOTSUPP);
	assert_null(dev);
	assert_non_null(strstr(uzram_last_error(),
			       "no block device of its own"));
	assert_int_equal(file_size(fd), 0);
	cfg.struct_size = offsetof(struct uzram_config, backing_flags);
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	uzram_close(dev);
	close(fd);
	unlink(shm);

	cfg.struct_size = sizeof cfg;
	cfg.backing = backing_file();
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	r = uzram_open(&cfg, &dev);
	unlink(path);
	if (r == -EACCES || r == -EPERM || r == -EOPNOTSUPP || r == -ENODEV) {
		printf("   not on the blocks here: %s\n", uzram_last_error());
		close(fd);
		skip();
	}
	assert_int_equal(r, 0);
	assert_true(file_size(fd) >= NPAGES * PG);
	ref = calloc(1, NPAGES * PG);
	assert_non_null(ref);
	fill(dev, ref);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), 576);
	check_backed(dev, 576);
	check_dev(dev, ref, "written back on the blocks");
	for (uint64_t off = 0; off < 640 * PG; off += 3 * PG + 777)
		check_read(dev, ref, off, 1 + off % (2 * PG));
	for (uint64_t p = 0; p < 256; p++)
		dev_write(dev, ref, data_page(p + 300), PG, p * PG);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), 256);
	check_dev(dev, ref, "written over, written back again");
	done(dev, ref);
	assert_int_equal(file_size(fd), 0);
	close(fd);
}

/* Clusters of 16 KiB: backed objects of whole clusters, partial reads. */
static void test_clusters(void **state)
{
	uint8_t *ref = calloc(1, NPAGES * PG);
	struct uzram *dev = tier_open_dev(NPAGES * PG - 3 * PG, 0, 16384);

	(void)state;
	for (uint64_t p = 0; p + 3 < NPAGES; p++)
		dev_write(dev, ref, data_page(p % 1000), PG, p * PG);
	assert_int_equal(uzram_writeback(dev, 0, 0, UINT64_MAX, 0), NPAGES - 3);
	check_dev(dev, ref, "clusters");
	for (uint64_t off = 1; off < (NPAGES - 3) * PG; off += 5 * PG + 999)
		check_read(dev, ref, off, 1 + off % (3 * PG));
	dev_write(dev, ref, "edge", 4, 16384 - 2);
	check_dev(dev, ref, "clusters, partial write");
	done(dev, ref);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writeback_all),
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_incompressible),
		cmocka_unit_test(test_ranges_and_limits),
		cmocka_unit_test(test_largest_first),
		cmocka_unit_test(test_churn_and_compaction),
		cmocka_unit_test(test_write_through),
		cmocka_unit_test(test_table_room),
		cmocka_unit_test(test_lower_limit),
		cmocka_unit_test(test_idle_ages),
		cmocka_unit_test(test_swap_reads),
		cmocka_unit_test(test_swap_reads_policy),
		cmocka_unit_test(test_faults),
		cmocka_unit_test(test_policy_sleeps),
		cmocka_unit_test(test_fault_in_flight),
		cmocka_unit_test(test_new_chunk_room_kept),
		cmocka_unit_test(test_bad_backing),
		cmocka_unit_test(test_backing_blocks),
		cmocka_unit_test(test_clusters),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
