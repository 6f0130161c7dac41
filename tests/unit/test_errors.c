// SPDX-License-Identifier: MIT
/*
 * test_errors.c - what the public API (include/uzram.h) refuses: I/O ranges
 * outside the device, NULL arguments, unknown flags, bad configurations for
 * uzram_open(), the error messages, and writes past the memory limit, set at
 * open or changed on a live device.
 *
 * Each rejected call is checked twice: for its error value, and for leaving
 * every byte of the device as it was, against the reference copy kept by
 * store_check.h. The semantics of the calls that succeed are in
 * test_store.c.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>

#include "store_check.h"

/* A device holding one of each page state, and its reference copy. */
static struct uzram *mixed_device(uint64_t npages, uint8_t **refp)
{
	struct uzram *dev = dev_open(npages * PG, NULL, 0, 0);
	uint8_t *ref = calloc(1, npages * PG);
	uint64_t seed = 5, i;

	assert_non_null(ref);
	for (i = 0; i < npages; i++) {
		switch (i % 5) {
		case 0:
			memcpy(ref + i * PG, data_page(i), PG);
			break;
		case 1:
			fill_same(ref + i * PG, PG, SAME_VALUE + i);
			break;
		case 2:
			fill_rand(ref + i * PG, PG, &seed);
			break;
		case 3:
			memcpy(ref + i * PG, core + (2u << 20) + i * 999, PG);
			break;
		default:
			break;
		}
	}
	assert_int_equal(uzram_write(dev, ref, npages * PG - 3 * PG, 0), 0);
	*refp = ref;
	memset(ref + npages * PG - 3 * PG, 0, 3 * PG);
	check_dev(dev, ref, "mixed device");
	return dev;
}

/* Every rejected I/O call: the right error, and no byte changed. */
static void test_bad_io(void **state)
{
	const uint64_t npages = 32, size = npages * PG;
	struct uzram_stats st0, st;
	uint8_t *ref, *buf;
	struct uzram *dev;
	uint64_t run, bad_range = 0;
	unsigned flags;
	size_t i;
	static const struct {
		uint64_t off, len;
	} ranges[] = {
		{ 32 * PG - 10, 11 }, { 32 * PG, 1 }, { 32 * PG + 1, 0 },
		{ 32 * PG - 4096, 8192 }, { 0, 32 * PG + 1 },
		{ UINT64_MAX - 10, 100 }, { UINT64_MAX, 1 },
		{ 4096, SIZE_MAX }, { UINT64_MAX - 4095, 4096 },
		{ 1ull << 63, 1ull << 63 },
	};

	(void)state;
	dev = mixed_device(npages, &ref);
	buf = malloc(2 * PG);
	assert_non_null(buf);
	memset(buf, 0x3c, 2 * PG);
	st0 = get_stats(dev);

	for (i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		uint64_t off = ranges[i].off;
		size_t len = (size_t)ranges[i].len;

		assert_int_equal(uzram_write(dev, buf, len, off), -ERANGE);
		assert_int_equal(uzram_read(dev, buf, len, off), -ERANGE);
		assert_int_equal(uzram_discard(dev, len, off), -ERANGE);
		assert_int_equal(uzram_write_zeroes(dev, len, off, 0),
				 -ERANGE);
		assert_int_equal(uzram_write_zeroes(dev, len, off,
						    UZRAM_ZERO_NO_HOLE),
				 -ERANGE);
		bad_range += 5;
		if (len) {
			assert_int_equal(uzram_block_status(dev, off, len,
							    &run, &flags),
					 -ERANGE);
		}
		check_dev(dev, ref, "after an out-of-range request");
		st = get_stats(dev);
		/* block_status may count its rejections too. */
		if (st.invalid_io - st0.invalid_io < bad_range ||
		    st.invalid_io - st0.invalid_io > bad_range + i + 1)
			fail_msg("range %zu: invalid_io rose by %llu, want "
				 "%llu", i,
				 (unsigned long long)(st.invalid_io -
						      st0.invalid_io),
				 (unsigned long long)bad_range);
	}
	st = get_stats(dev);
	assert_int_equal(st.failed_writes, st0.failed_writes);
	assert_int_equal(st.pages_stored, st0.pages_stored);
	assert_int_equal(st.compr_data_size, st0.compr_data_size);

	/* The last valid byte and an empty request at the very end. */
	assert_int_equal(uzram_read(dev, buf, 1, size - 1), 0);
	assert_int_equal(buf[0], ref[size - 1]);
	assert_int_equal(uzram_read(dev, buf, 0, size), 0);
	assert_int_equal(uzram_write(dev, buf, 0, size), 0);
	assert_int_equal(uzram_discard(dev, 0, size), 0);

	/* NULL arguments. */
	assert_int_equal(uzram_read(NULL, buf, 10, 0), -EINVAL);
	assert_int_equal(uzram_read(dev, NULL, 10, 0), -EINVAL);
	assert_int_equal(uzram_write(NULL, buf, 10, 0), -EINVAL);
	assert_int_equal(uzram_write(dev, NULL, 10, 0), -EINVAL);
	assert_int_equal(uzram_write(dev, NULL, PG, PG), -EINVAL);
	assert_int_equal(uzram_discard(NULL, PG, 0), -EINVAL);
	assert_int_equal(uzram_write_zeroes(NULL, PG, 0, 0), -EINVAL);
	assert_int_equal(uzram_block_status(NULL, 0, PG, &run, &flags),
			 -EINVAL);
	assert_int_equal(uzram_block_status(dev, 0, PG, NULL, &flags),
			 -EINVAL);
	assert_int_equal(uzram_block_status(dev, 0, PG, &run, NULL), -EINVAL);
	assert_int_equal(uzram_block_status(dev, 0, 0, &run, &flags), -EINVAL);
	assert_int_equal(uzram_stats(NULL, &st, sizeof(st)), -EINVAL);
	assert_int_equal(uzram_stats(dev, NULL, sizeof(st)), -EINVAL);
	assert_int_equal(uzram_compact(NULL), -EINVAL);
	check_dev(dev, ref, "after NULL arguments");

	/* Unknown write_zeroes flags, on ranges that hold data. */
	assert_int_equal(uzram_write_zeroes(dev, 2 * PG, 0, 1u << 1), -EINVAL);
	assert_int_equal(uzram_write_zeroes(dev, PG, PG, 0x80000000u),
			 -EINVAL);
	assert_int_equal(uzram_write_zeroes(dev, 10, 5,
					    UZRAM_ZERO_NO_HOLE | (1u << 7)),
			 -EINVAL);
	assert_int_equal(uzram_write_zeroes(dev, size, 0, ~0u), -EINVAL);
	check_dev(dev, ref, "after unknown write_zeroes flags");
	st = get_stats(dev);
	assert_int_equal(st.pages_stored, st0.pages_stored);
	assert_int_equal(st.same_pages, st0.same_pages);
	assert_int_equal(st.huge_pages, st0.huge_pages);
	assert_int_equal(st.compr_data_size, st0.compr_data_size);
	assert_int_equal(st.failed_writes, st0.failed_writes);
	assert_int_equal(st.failed_reads, 0);
	uzram_close(dev);
	free(ref);
	free(buf);
}

static void *last_error_thread(void *arg)
{
	const char **out = arg;

	out[0] = uzram_last_error();
	return NULL;
}

static void expect_open_error(struct uzram_config *cfg, int want,
			      const char *what)
{
	struct uzram *dev = NULL;
	int r = uzram_open(cfg, &dev);

	if (r != want) {
		uzram_close(r == 0 ? dev : NULL);
		fail_msg("%s: uzram_open returned %d, want %d", what, r, want);
	}
	assert_non_null(uzram_last_error());
	assert_true(uzram_last_error()[0] != '\0');
}

static void test_bad_open(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	char names[256], *name, *save = NULL;
	const char *msg, *in_thread = "x";
	/* One level past the highest each codec accepts. */
	static const struct {
		const char *algo;
		int level;
		const char *what;
	} over[] = {
		{ "zstd", 23, "zstd level 23" },
		{ "deflate", 13, "deflate level 13" },
		{ "lz4hc", 13, "lz4hc level 13" },
		{ "lz4", 65538, "lz4 level 65538" },
	};
	pthread_t th;
	size_t i;

	(void)state;
	/* A thread that never failed has an empty message. */
	assert_int_equal(pthread_create(&th, NULL, last_error_thread,
					&in_thread), 0);
	pthread_join(th, NULL);
	assert_non_null(in_thread);
	assert_string_equal(in_thread, "");

	uzram_config_init(&cfg);
	cfg.size = 16 * PG;
	assert_int_equal(uzram_open(NULL, &dev), -EINVAL);
	assert_int_equal(uzram_open(&cfg, NULL), -EINVAL);

	cfg.algorithm = "lz5";
	expect_open_error(&cfg, -ENOENT, "unknown algorithm");
	msg = uzram_last_error();
	snprintf(names, sizeof(names), "%s", uzram_algorithms());
	for (name = strtok_r(names, " ", &save); name;
	     name = strtok_r(NULL, " ", &save))
		if (!strstr(msg, name))
			fail_msg("last error \"%s\" does not list \"%s\"", msg,
				 name);
	assert_non_null(strstr(msg, "lz4"));
	assert_non_null(strstr(msg, "zstd"));
	cfg.algorithm = "";
	expect_open_error(&cfg, -ENOENT, "empty algorithm");
	cfg.algorithm = "LZ4 ";
	expect_open_error(&cfg, -ENOENT, "algorithm with a space");
	cfg.algorithm = NULL;
	{
		struct uzram *d = NULL;
		int r = uzram_open(&cfg, &d);

		/* NULL may mean the default or be rejected, never a crash. */
		assert_true(r == 0 || r == -EINVAL || r == -ENOENT);
		uzram_close(r == 0 ? d : NULL);
	}

	snprintf(names, sizeof(names), "%s", uzram_algorithms());
	for (name = strtok_r(names, " ", &save); name;
	     name = strtok_r(NULL, " ", &save)) {
		uzram_config_init(&cfg);
		cfg.size = 16 * PG;
		cfg.algorithm = name;
		cfg.level = INT_MAX;
		expect_open_error(&cfg, -EINVAL, "level INT_MAX");
		cfg.level = INT_MIN;
		expect_open_error(&cfg, -EINVAL, "level INT_MIN");
		cfg.level = 1000;     /* lz4's levels are accelerations */
		if (strcmp(name, "lz4"))
			expect_open_error(&cfg, -EINVAL, "level 1000");
	}
	uzram_config_init(&cfg);
	cfg.size = 16 * PG;
	for (i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
		cfg.algorithm = over[i].algo;
		cfg.level = over[i].level;
		expect_open_error(&cfg, -EINVAL, over[i].what);
		/* the message gives the range: the highest level is one less */
		snprintf(names, sizeof names, "%d (or 0, its default)",
			 over[i].level - 1);
		if (!strstr(uzram_last_error(), names))
			fail_msg("%s: the message does not end in '%s': %s",
				 over[i].what, names, uzram_last_error());
	}

	uzram_config_init(&cfg);
	cfg.size = 0;
	expect_open_error(&cfg, -EINVAL, "size 0");
	cfg.size = UINT64_MAX;
	{
		struct uzram *d = NULL;
		int r = uzram_open(&cfg, &d);

		if (r == 0) {
			uzram_close(d);
			fail_msg("a device of UINT64_MAX bytes was opened");
		}
		assert_true(r == -EINVAL || r == -ENOMEM);
	}
	cfg.size = 16 * PG;
	cfg.struct_size = 0;
	expect_open_error(&cfg, -EINVAL, "struct_size 0");
	cfg.struct_size = 1;
	expect_open_error(&cfg, -EINVAL, "struct_size 1");
	cfg.struct_size = sizeof(cfg) - 1;
	expect_open_error(&cfg, -EINVAL, "struct_size sizeof - 1");
	cfg.struct_size = SIZE_MAX;
	expect_open_error(&cfg, -EINVAL, "struct_size SIZE_MAX");
	cfg.struct_size = sizeof(cfg);
	dev = NULL;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	assert_non_null(dev);
	uzram_close(dev);
	uzram_close(NULL);
}

static void test_strerror(void **state)
{
	static const int errs[] = {
		-EINVAL, -ERANGE, -ENOSPC, -ENOMEM, -EIO, -ENOENT,
	};
	const char *msg[6];
	size_t i, j;

	(void)state;
	for (i = 0; i < 6; i++) {
		msg[i] = uzram_strerror(errs[i]);
		assert_non_null(msg[i]);
		assert_true(strlen(msg[i]) > 0);
		for (j = 0; j < i; j++)
			if (strcmp(msg[i], msg[j]) == 0)
				fail_msg("errors %d and %d share message "
					 "\"%s\"", errs[i], errs[j], msg[i]);
	}
	assert_non_null(uzram_strerror(0));
	assert_non_null(uzram_strerror(-12345));
	assert_non_null(uzram_strerror(INT_MIN));
	assert_non_null(uzram_strerror(12));
}

/*
 * The memory limit: incompressible writes fail with -ENOSPC; the page that
 * failed and every later page of the request keep their old bytes, earlier
 * pages are written; memory stays under the limit; same-filled pages still
 * fit; discarding gives room back.
 */
static void test_mem_limit(void **state)
{
	const uint64_t npages = 1024, size = npages * PG, limit = 512u << 10;
	uint64_t seed = 3, p, q = 0, failures = 0, i;
	uint8_t *ref, *req, *chk;
	struct uzram_stats st;
	struct uzram *dev;
	int r;

	(void)state;
	dev = dev_open(size, NULL, 0, limit);
	ref = malloc(size);
	req = malloc(4 * PG);
	chk = malloc(PG);
	assert_non_null(ref);
	assert_non_null(req);
	assert_non_null(chk);
	/* Known old bytes everywhere, at no memory cost. */
	for (p = 0; p < npages; p++)
		fill_same(ref + p * PG, PG, SAME_VALUE ^ (p * 0x100010001ull));
	assert_int_equal(uzram_write(dev, ref, size, 0), 0);
	st = get_stats(dev);
	assert_int_equal(st.mem_limit, limit);
	assert_int_equal(st.same_pages, npages);

	for (p = 0; p < npages; p += 4) {
		fill_rand(req, 4 * PG, &seed);
		r = uzram_write(dev, req, 4 * PG, p * PG);
		if (r == 0) {
			memcpy(ref + p * PG, req, 4 * PG);
			continue;
		}
		assert_int_equal(r, -ENOSPC);
		failures++;
		/* A prefix of the request is written, the rest is old. */
		for (q = 0; q < 4; q++) {
			assert_int_equal(uzram_read(dev, chk, PG,
						    (p + q) * PG), 0);
			if (memcmp(chk, req + q * PG, PG))
				break;
		}
		memcpy(ref + p * PG, req, q * PG);
		break;
	}
	if (!failures)
		fail_msg("%llu pages of random data fit under a limit of %llu",
			 (unsigned long long)npages, (unsigned long long)limit);
	check_dev(dev, ref, "after the first -ENOSPC");
	st = get_stats(dev);
	assert_int_equal(st.failed_writes, 1);
	if (st.mem_used_total > limit + ZSPAGE_MAX ||
	    st.mem_used_max > limit + ZSPAGE_MAX)
		fail_msg("mem_used_total %llu, max %llu over limit %llu",
			 (unsigned long long)st.mem_used_total,
			 (unsigned long long)st.mem_used_max,
			 (unsigned long long)limit);
	/* The slot table (one 256 KiB chunk here) counts in the limit. */
	if (p < (limit - st.table_bytes) / PG * 3 / 4)
		fail_msg("only %llu pages fit under a limit of %llu with a "
			 "table of %llu", (unsigned long long)p,
			 (unsigned long long)limit,
			 (unsigned long long)st.table_bytes);

	/* More single pages: each either fits or fails cleanly. */
	for (i = p + 4; i < p + 64 && i < npages; i++) {
		fill_rand(req, PG, &seed);
		r = uzram_write(dev, req, PG, i * PG);
		if (r == 0) {
			memcpy(ref + i * PG, req, PG);
			continue;
		}
		assert_int_equal(r, -ENOSPC);
		failures++;
	}
	/* Rewrites of stored huge pages, whole and partial. */
	for (i = 0; i < 8; i++) {
		fill_rand(req, PG, &seed);
		r = uzram_write(dev, req, PG, i * PG);
		assert_true(r == 0 || r == -ENOSPC);
		if (r == 0)
			memcpy(ref + i * PG, req, PG);
		else
			failures++;
		r = uzram_write(dev, req, 100, i * PG + 1000);
		assert_true(r == 0 || r == -ENOSPC);
		if (r == 0)
			memcpy(ref + i * PG + 1000, req, 100);
		else
			failures++;
	}
	/*
	 * Zeroing part of a huge page needs a new object: it may fail like a
	 * write, page by page and in order, leaving the failing page intact.
	 */
	for (i = 8; i < 16; i++) {
		r = i % 2 ? uzram_discard(dev, PG + 100, i * PG + 50) :
		    uzram_write_zeroes(dev, PG + 100, i * PG + 50,
				       UZRAM_ZERO_NO_HOLE);
		assert_true(r == 0 || r == -ENOSPC);
		if (r) {
			failures++;
			/* The first page failed, or only the second did. */
			assert_int_equal(uzram_read(dev, chk, PG, i * PG), 0);
			if (memcmp(chk, ref + i * PG, PG))
				memset(ref + i * PG + 50, 0, PG - 50);
		} else {
			memset(ref + i * PG + 50, 0, PG + 100);
		}
		check_dev(dev, ref, "after zeroing part of huge pages");
	}
	check_dev(dev, ref, "after writes into a full device");
	st = get_stats(dev);
	assert_int_equal(st.failed_writes, failures);
	assert_true(st.mem_used_total <= limit + ZSPAGE_MAX);
	assert_true(st.mem_used_max <= limit + ZSPAGE_MAX);

	/* Same-filled and zero pages cost nothing and still fit. */
	fill_same(req, PG, 0x5555);
	dev_write(dev, ref, req, PG, (npages - 1) * PG);
	assert_int_equal(uzram_write_zeroes(dev, 2 * PG, (npages - 4) * PG,
					    UZRAM_ZERO_NO_HOLE), 0);
	memset(ref + (npages - 4) * PG, 0, 2 * PG);
	check_dev(dev, ref, "same-filled writes into a full device");

	/* Discarding gives room back. */
	assert_int_equal(uzram_discard(dev, 64 * PG, 0), 0);
	memset(ref, 0, 64 * PG);
	for (i = 0; i < 8; i++) {
		fill_rand(req, PG, &seed);
		r = uzram_write(dev, req, PG, (64 + i) * PG);
		if (r)
			fail_msg("write %llu after a discard: %d",
				 (unsigned long long)i, r);
		memcpy(ref + (64 + i) * PG, req, PG);
	}
	check_dev(dev, ref, "writes after a discard");
	assert_int_equal(get_stats(dev).failed_writes, failures);
	uzram_close(dev);
	free(ref);
	free(req);
	free(chk);
}

/*
 * The limit changed on a live device (uzram_set_mem_limit), as zram's
 * mem_limit: lowered under what the device holds, writes needing memory
 * fail and keep the old bytes while unchanged rewrites, same-filled pages
 * and discards go on; raised or removed, writes work again. And
 * uzram_reset_mem_used_max() restarts the high-water mark.
 */
static void test_runtime_limit(void **state)
{
	const uint64_t npages = 4096, half = npages / 2;
	struct uzram *dev = dev_open(npages * PG, "lz4", 0, 0);
	uint8_t *ref = calloc(npages, PG), page[PG];
	struct uzram_stats st, st0;
	uint64_t seed = 3, p;
	int r = 0;

	(void)state;
	assert_non_null(ref);
	dev_write(dev, ref, tar, half * PG, 0);
	st0 = get_stats(dev);
	assert_int_equal(uzram_set_mem_limit(dev, st0.mem_used_total / 2), 0);
	st = get_stats(dev);
	assert_int_equal(st.mem_limit, st0.mem_used_total / 2);

	/* random pages need new memory: refused, nothing changed */
	for (p = half; p < half + 64 && !r; p++) {
		fill_rand(page, PG, &seed);
		r = uzram_write(dev, page, PG, p * PG);
		if (!r)
			memcpy(ref + p * PG, page, PG);
	}
	assert_int_equal(r, -ENOSPC);
	assert_true(get_stats(dev).failed_writes >= 1);
	check_dev(dev, ref, "writes over a lowered limit");

	/* what needs no new memory still works */
	assert_int_equal(uzram_write(dev, ref, 64 * PG, 0), 0);
	fill_same(page, PG, SAME_VALUE);
	dev_write(dev, ref, page, PG, (npages - 1) * PG);
	assert_int_equal(uzram_discard(dev, (half - 64) * PG, 64 * PG), 0);
	memset(ref + 64 * PG, 0, (half - 64) * PG);
	check_dev(dev, ref, "rewrite, same-filled page and discard over the limit");

	/* under the limit again after compaction: new data is taken */
	assert_true(uzram_compact(dev) >= 0);
	st = get_stats(dev);
	assert_true(st.mem_used_total <= st.mem_limit);
	fill_rand(page, PG, &seed);
	dev_write(dev, ref, page, PG, (half + 100) * PG);

	/* no limit */
	assert_int_equal(uzram_set_mem_limit(dev, 0), 0);
	dev_write(dev, ref, core, half * PG - PG, half * PG);
	assert_int_equal(get_stats(dev).mem_limit, 0);
	check_dev(dev, ref, "limit removed");

	/* the high-water mark restarts from the current use */
	assert_int_equal(uzram_discard(dev, npages * PG, 0), 0);
	memset(ref, 0, npages * PG);
	st = get_stats(dev);
	assert_true(st.mem_used_max > st.mem_used_total);
	assert_int_equal(uzram_reset_mem_used_max(dev), 0);
	st = get_stats(dev);
	assert_int_equal(st.mem_used_max, st.mem_used_total);
	check_dev(dev, ref, "after reset_mem_used_max");

	assert_int_equal(uzram_set_mem_limit(NULL, 1), -EINVAL);
	assert_int_equal(uzram_reset_mem_used_max(NULL), -EINVAL);
	free(ref);
	uzram_close(dev);
}

/*
 * The slot table counts in the limit: zeroing a large device with NO_HOLE
 * needs table chunks (16 bytes a page) and no allocator memory; under a
 * tiny limit it fails with -ENOSPC once the table would pass the limit,
 * instead of growing it without bound, and data beyond the failure point
 * keeps its bytes.
 */
static void test_table_limit(void **state)
{
	const uint64_t size = 16ull << 30, limit = 1u << 20;
	uint8_t data[PG], chk[PG];
	struct uzram_stats st;
	struct uzram *dev;
	uint64_t seed = 7;

	(void)state;
	dev = dev_open(size, NULL, 0, limit);
	fill_rand(data, PG, &seed);
	assert_int_equal(uzram_write(dev, data, PG, size - PG), 0);
	for (uint64_t off = 0; off < size; off += 1ull << 32) {
		uint64_t len = size - off < (1ull << 32) ? size - off : 1ull << 32;
		int r = uzram_write_zeroes(dev, len, off, UZRAM_ZERO_NO_HOLE);

		assert_int_equal(r, -ENOSPC);
	}
	st = get_stats(dev);
	if (st.table_bytes + st.mem_used_total > limit)
		fail_msg("table %llu + memory %llu over the limit %llu",
			 (unsigned long long)st.table_bytes,
			 (unsigned long long)st.mem_used_total,
			 (unsigned long long)limit);
	assert_int_equal(uzram_read(dev, chk, PG, size - PG), 0);
	assert_memory_equal(chk, data, PG);
	/* Without a limit the same zeroing succeeds. */
	assert_int_equal(uzram_set_mem_limit(dev, 0), 0);
	assert_int_equal(uzram_write_zeroes(dev, 1u << 30, 0,
					    UZRAM_ZERO_NO_HOLE), 0);
	uzram_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_io),
		cmocka_unit_test(test_bad_open),
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_mem_limit),
		cmocka_unit_test(test_runtime_limit),
		cmocka_unit_test(test_table_limit),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
