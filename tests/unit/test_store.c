// SPDX-License-Identifier: MIT
/*
 * test_store.c - the semantics of the public API (include/uzram.h), one
 * behaviour per test: a fresh device, partial writes, discard and
 * write_zeroes, block status, a corpus round trip, the stats prefix and
 * compaction. The page states, page-table chunks and every codec are in
 * test_states.c, the bad inputs in test_errors.c, clusters larger than a
 * page in test_cluster.c.
 *
 * Each test keeps a plain reference copy of the device and compares the
 * whole device with it after every change (store_check.h), so a call that
 * "succeeds" but touches the wrong bytes fails as surely as one that returns
 * an error.
 *
 * The page states are driven on purpose: same-filled pages (a repeated
 * 8-byte value, zeros included), huge pages (random bytes do not compress),
 * compressed pages (real data from the test corpus, tu_corpus()) and holes.
 */
#include <errno.h>
#include <stddef.h>

#include "store_check.h"

static void test_version(void **state)
{
	char want[32];

	(void)state;
	assert_int_equal(uzram_version_number(), UZRAM_VERSION_NUMBER);
	snprintf(want, sizeof(want), "%d.%d.%d", UZRAM_VERSION_MAJOR,
		 UZRAM_VERSION_MINOR, UZRAM_VERSION_PATCH);
	assert_string_equal(uzram_version_string(), want);
}

static void test_config_init(void **state)
{
	struct uzram_config cfg;

	(void)state;
	memset(&cfg, 0xff, sizeof(cfg));
	uzram_config_init(&cfg);
	assert_int_equal(cfg.struct_size, sizeof(cfg));
	assert_int_equal(cfg.size, 0);
	assert_non_null(cfg.algorithm);
	assert_string_equal(cfg.algorithm, "lz4");
	assert_int_equal(cfg.level, 0);
	assert_int_equal(cfg.mem_limit, 0);
}

/* A fresh device: the size rounds up, everything reads as zeros, one hole. */
static void test_fresh_device(void **state)
{
	struct uzram *dev;
	struct uzram_stats st;
	uint8_t *ref;
	uint64_t run;
	unsigned flags;

	(void)state;
	dev = dev_open(19 * PG - 100, NULL, 0, 0);
	assert_int_equal(uzram_size(dev), 19 * PG);
	ref = calloc(1, 19 * PG);
	assert_non_null(ref);
	check_dev(dev, ref, "fresh device");
	check_read(dev, ref, 19 * PG - 1, 1);
	assert_int_equal(uzram_block_status(dev, 0, 19 * PG, &run, &flags), 0);
	assert_int_equal(run, 19 * PG);
	assert_int_equal(flags, UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	st = get_stats(dev);
	assert_int_equal(st.disksize, 19 * PG);
	assert_int_equal(st.pages_stored, 0);
	assert_int_equal(st.orig_data_size, 0);
	assert_int_equal(st.compr_data_size, 0);
	assert_int_equal(st.same_pages, 0);
	assert_int_equal(st.huge_pages, 0);
	assert_int_equal(st.failed_reads, 0);
	assert_int_equal(st.failed_writes, 0);
	assert_int_equal(st.invalid_io, 0);
	assert_int_equal(st.mem_limit, 0);
	/* A fresh table is only its directory; a write creates a chunk. */
	assert_true(st.table_bytes > 0 && st.table_bytes < 4096);
	/* Reading holes allocates nothing. */
	assert_int_equal(get_stats(dev).mem_used_total, st.mem_used_total);
	assert_int_equal(get_stats(dev).table_bytes, st.table_bytes);
	uzram_close(dev);
	free(ref);
}

/*
 * Writes at odd offsets and lengths, across page boundaries, at the first
 * and the last byte: each must read-modify-write only its own bytes.
 */
static void test_partial_writes(void **state)
{
	static const struct {
		uint64_t off, len;
	} cases[] = {
		{ 0, 1 }, { 1, 1 }, { PG - 1, 2 }, { PG - 3, PG + 6 },
		{ 2 * PG + 5, 3 * PG }, { 19 * PG - 1, 1 },
		{ 19 * PG - PG - 7, PG + 7 }, { 5 * PG, PG }, { 7 * PG + 100, 1 },
		{ 7 * PG + 100, 0 }, { 19 * PG, 0 }, { 3 * PG + 8, 8 },
		{ 9 * PG + 4095, 4097 }, { 0, 19 * PG }, { 12 * PG - 1, 1 },
		{ 11 * PG + 1, PG - 2 }, { 14 * PG + 17, 3 * PG + 1 },
	};
	const uint64_t size = 19 * PG;
	uint8_t *ref, *buf;
	uint64_t seed = 42, off, len;
	struct uzram *dev;
	size_t i, kind, n;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	ref = calloc(1, size);
	buf = malloc(size);
	assert_non_null(ref);
	assert_non_null(buf);
	for (kind = 0; kind < 4; kind++) {
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			off = cases[i].off;
			len = cases[i].len;
			switch (kind) {
			case 0:
				memcpy(buf, core + (8u << 20) + off * 3, len);
				break;
			case 1:
				fill_rand(buf, len, &seed);
				break;
			case 2:
				memcpy(buf, tar + off, len);
				break;
			default:
				memset(buf, 0, len);
				break;
			}
			dev_write(dev, ref, buf, len, off);
			check_dev(dev, ref, "after a partial write");
			if (len)
				check_read(dev, ref, off, len);
		}
	}
	/* Random small writes, and random reads with guard bytes. */
	for (i = 0; i < 3000; i++) {
		off = tu_rand(&seed) % size;
		len = 1 + tu_rand(&seed) % (i % 2 ? 64 : 2 * PG);
		if (off + len > size)
			len = size - off;
		n = tu_rand(&seed) % 3;
		if (n == 0)
			memcpy(buf, tar + off, len);
		else if (n == 1)
			fill_rand(buf, len, &seed);
		else
			memset(buf, (int)(i & 0xff), len);
		dev_write(dev, ref, buf, len, off);
		off = tu_rand(&seed) % size;
		len = 1 + tu_rand(&seed) % (3 * PG);
		if (off + len > size)
			len = size - off;
		check_read(dev, ref, off, len);
		if (i % 100 == 0)
			check_dev(dev, ref, "random partial writes");
	}
	check_dev(dev, ref, "random partial writes");
	uzram_close(dev);
	free(ref);
	free(buf);
}

static void test_discard(void **state)
{
	const uint64_t npages = 32, size = npages * PG;
	struct uzram_stats st, st0;
	struct uzram *dev;
	uint8_t *ref;
	uint64_t i;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	st0 = get_stats(dev);
	ref = calloc(1, size);
	assert_non_null(ref);
	for (i = 0; i < npages; i++)
		dev_write(dev, ref, data_page(i), PG, i * PG);
	st = get_stats(dev);
	assert_int_equal(st.pages_stored, npages);
	assert_int_equal(st.orig_data_size, size);
	assert_int_equal(st.same_pages, 0);
	assert_true(st.compr_data_size > 0);

	/* A whole page becomes a hole. */
	assert_int_equal(uzram_discard(dev, PG, 2 * PG), 0);
	memset(ref + 2 * PG, 0, PG);
	check_dev(dev, ref, "discard of page 2");
	assert_int_equal(page_status(dev, 2),
			 UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	assert_int_equal(get_stats(dev).pages_stored, npages - 1);

	/* Unaligned: pages 6 and 7 become holes, 5 and 8 are zeroed in part. */
	assert_int_equal(uzram_discard(dev, 3 * PG - 50, 5 * PG + 100), 0);
	memset(ref + 5 * PG + 100, 0, 3 * PG - 50);
	check_dev(dev, ref, "unaligned discard");
	assert_int_equal(page_status(dev, 6),
			 UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	assert_int_equal(page_status(dev, 7),
			 UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	assert_int_equal(page_status(dev, 5), 0);
	assert_int_equal(page_status(dev, 8), 0);
	assert_int_equal(get_stats(dev).pages_stored, npages - 3);

	/* Inside one page, at its last byte, and an empty range. */
	assert_int_equal(uzram_discard(dev, 10, 10 * PG + 10), 0);
	memset(ref + 10 * PG + 10, 0, 10);
	assert_int_equal(uzram_discard(dev, 1, size - 1), 0);
	ref[size - 1] = 0;
	assert_int_equal(uzram_discard(dev, 0, 12 * PG), 0);
	assert_int_equal(uzram_discard(dev, 0, size), 0);
	check_dev(dev, ref, "small discards");
	assert_int_equal(get_stats(dev).pages_stored, npages - 3);

	/* Discarding a hole again changes nothing. */
	assert_int_equal(uzram_discard(dev, PG, 2 * PG), 0);
	assert_int_equal(get_stats(dev).pages_stored, npages - 3);

	/* Everything: no page stored, and the memory goes back. */
	assert_int_equal(uzram_discard(dev, size, 0), 0);
	memset(ref, 0, size);
	check_dev(dev, ref, "discard of the whole device");
	assert_true(uzram_compact(dev) >= 0);
	st = get_stats(dev);
	assert_int_equal(st.pages_stored, 0);
	assert_int_equal(st.orig_data_size, 0);
	assert_int_equal(st.compr_data_size, 0);
	assert_int_equal(st.same_pages, 0);
	assert_int_equal(st.huge_pages, 0);
	if (st.mem_used_total > st0.mem_used_total + ZSPAGE_MAX)
		fail_msg("empty device still holds %llu bytes (fresh: %llu)",
			 (unsigned long long)st.mem_used_total,
			 (unsigned long long)st0.mem_used_total);
	for (i = 0; i < npages; i++)
		assert_int_equal(page_status(dev, i),
				 UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	uzram_close(dev);
	free(ref);
}

static void test_write_zeroes(void **state)
{
	const uint64_t npages = 16, size = npages * PG;
	struct uzram_stats st, prev;
	struct uzram *dev;
	uint8_t *ref;
	uint64_t i, run;
	unsigned flags;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	ref = calloc(1, size);
	assert_non_null(ref);

	/* On a hole, NO_HOLE makes a stored zero page. */
	assert_int_equal(uzram_write_zeroes(dev, PG, 3 * PG,
					    UZRAM_ZERO_NO_HOLE), 0);
	assert_int_equal(page_status(dev, 3), UZRAM_STATUS_ZERO);
	st = get_stats(dev);
	assert_int_equal(st.pages_stored, 1);
	assert_int_equal(st.same_pages, 1);
	assert_int_equal(st.compr_data_size, 0);

	for (i = 0; i < npages; i++)
		dev_write(dev, ref, data_page(i), PG, i * PG);
	prev = get_stats(dev);
	assert_int_equal(prev.pages_stored, npages);
	assert_int_equal(prev.same_pages, 0);

	/* Without the flag whole pages become holes. */
	assert_int_equal(uzram_write_zeroes(dev, 2 * PG, PG, 0), 0);
	memset(ref + PG, 0, 2 * PG);
	check_dev(dev, ref, "write_zeroes");
	assert_int_equal(uzram_block_status(dev, PG, 2 * PG, &run, &flags), 0);
	assert_int_equal(run, 2 * PG);
	assert_int_equal(flags, UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	st = get_stats(dev);
	assert_int_equal(st.pages_stored, npages - 2);
	assert_true(st.compr_data_size < prev.compr_data_size);

	/* With it they stay allocated as zero pages that cost no object. */
	prev = st;
	assert_int_equal(uzram_write_zeroes(dev, 2 * PG, 4 * PG,
					    UZRAM_ZERO_NO_HOLE), 0);
	memset(ref + 4 * PG, 0, 2 * PG);
	check_dev(dev, ref, "write_zeroes NO_HOLE");
	assert_int_equal(uzram_block_status(dev, 4 * PG, 2 * PG, &run, &flags),
			 0);
	assert_int_equal(run, 2 * PG);
	assert_int_equal(flags, UZRAM_STATUS_ZERO);
	st = get_stats(dev);
	assert_int_equal(st.pages_stored, prev.pages_stored);
	assert_int_equal(st.same_pages, 2);
	assert_true(st.compr_data_size < prev.compr_data_size);

	/* Unaligned, both ways: ends zeroed in place, middle by the flag. */
	assert_int_equal(uzram_write_zeroes(dev, 2 * PG + 2, 8 * PG + 7,
					    UZRAM_ZERO_NO_HOLE), 0);
	memset(ref + 8 * PG + 7, 0, 2 * PG + 2);
	assert_int_equal(uzram_write_zeroes(dev, 2 * PG + 2, 11 * PG + 7, 0),
			 0);
	memset(ref + 11 * PG + 7, 0, 2 * PG + 2);
	check_dev(dev, ref, "unaligned write_zeroes");
	assert_int_equal(page_status(dev, 8), 0);
	assert_int_equal(page_status(dev, 9), UZRAM_STATUS_ZERO);
	assert_int_equal(page_status(dev, 10), 0);
	assert_int_equal(page_status(dev, 11), 0);
	assert_int_equal(page_status(dev, 12),
			 UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	assert_int_equal(page_status(dev, 13), 0);
	assert_int_equal(uzram_write_zeroes(dev, 0, 5, 0), 0);

	/* The whole device, first kept, then punched. */
	assert_int_equal(uzram_write_zeroes(dev, size, 0, UZRAM_ZERO_NO_HOLE),
			 0);
	memset(ref, 0, size);
	check_dev(dev, ref, "write_zeroes NO_HOLE of the whole device");
	st = get_stats(dev);
	assert_int_equal(st.pages_stored, npages);
	assert_int_equal(st.same_pages, npages);
	assert_int_equal(st.compr_data_size, 0);
	assert_int_equal(st.huge_pages, 0);
	assert_int_equal(uzram_block_status(dev, 0, size, &run, &flags), 0);
	assert_int_equal(run, size);
	assert_int_equal(flags, UZRAM_STATUS_ZERO);
	assert_int_equal(uzram_write_zeroes(dev, size, 0, 0), 0);
	check_dev(dev, ref, "write_zeroes of the whole device");
	st = get_stats(dev);
	assert_int_equal(st.pages_stored, 0);
	assert_int_equal(st.same_pages, 0);
	assert_int_equal(uzram_block_status(dev, 0, size, &run, &flags), 0);
	assert_int_equal(run, size);
	assert_int_equal(flags, UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	uzram_close(dev);
	free(ref);
}

/*
 * Pages: 0 hole, 1 zero (NO_HOLE), 2-3 data, 4 hole, 5 written zeros,
 * 6 same-filled non-zero, 7 hole, 8-9 random (huge), 10.. holes.
 */
static void test_block_status(void **state)
{
	const uint64_t npages = 16, size = npages * PG;
	static const unsigned want[16] = {
		3, 2, 0, 0, 3, 2, 0, 3, 0, 0, 3, 3, 3, 3, 3, 3,
	};
	uint64_t seed = 7, run, off, end, p, start;
	struct uzram *dev;
	uint8_t *ref, *buf;
	unsigned flags;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	ref = calloc(1, size);
	buf = malloc(2 * PG);
	assert_non_null(ref);
	assert_non_null(buf);
	assert_int_equal(uzram_write_zeroes(dev, PG, PG, UZRAM_ZERO_NO_HOLE),
			 0);
	dev_write(dev, ref, data_page(0), PG, 2 * PG);
	dev_write(dev, ref, data_page(1), PG, 3 * PG);
	memset(buf, 0, PG);
	dev_write(dev, ref, buf, PG, 5 * PG);
	fill_same(buf, PG, SAME_VALUE);
	dev_write(dev, ref, buf, PG, 6 * PG);
	fill_rand(buf, 2 * PG, &seed);
	dev_write(dev, ref, buf, 2 * PG, 8 * PG);
	check_dev(dev, ref, "block_status layout");

	/* Every page, then maximal runs from each page start. */
	for (p = 0; p < npages; p++)
		if (page_status(dev, p) != want[p])
			fail_msg("page %llu: flags %u, want %u",
				 (unsigned long long)p, page_status(dev, p),
				 want[p]);
	assert_int_equal(uzram_block_status(dev, 0, size, &run, &flags), 0);
	assert_int_equal(run, PG);
	assert_int_equal(flags, UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	assert_int_equal(uzram_block_status(dev, 2 * PG, size - 2 * PG, &run,
					    &flags), 0);
	assert_int_equal(flags, 0);
	assert_int_equal(run, 2 * PG);
	assert_int_equal(uzram_block_status(dev, 10 * PG, 6 * PG, &run,
					    &flags), 0);
	assert_int_equal(run, 6 * PG);
	assert_int_equal(flags, UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);

	/* Clipped to the range at both ends. */
	assert_int_equal(uzram_block_status(dev, 2 * PG + 100, 5000, &run,
					    &flags), 0);
	assert_int_equal(run, 5000);
	assert_int_equal(flags, 0);
	assert_int_equal(uzram_block_status(dev, 2 * PG + 100, 10000, &run,
					    &flags), 0);
	assert_int_equal(run, 2 * PG - 100);
	assert_int_equal(flags, 0);
	assert_int_equal(uzram_block_status(dev, 10 * PG + 1, 1, &run, &flags),
			 0);
	assert_int_equal(run, 1);
	assert_int_equal(flags, UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
	assert_int_equal(uzram_block_status(dev, size - 1, 1, &run, &flags),
			 0);
	assert_int_equal(run, 1);

	/*
	 * Walk the device from odd offsets: runs tile the range without
	 * gaps, end at page boundaries (or the range end), and each byte's
	 * flags are those of its page.
	 */
	for (start = 0; start < 3 * PG; start += 777) {
		end = size - (start % 1000);
		for (off = start; off < end; off += run) {
			assert_int_equal(uzram_block_status(dev, off,
							    end - off, &run,
							    &flags), 0);
			assert_true(run > 0 && run <= end - off);
			if ((off + run) % PG && off + run != end)
				fail_msg("run %llu @ %llu ends inside a page",
					 (unsigned long long)run,
					 (unsigned long long)off);
			for (p = off / PG; p * PG < off + run; p++)
				if (want[p] != flags)
					fail_msg("run @ %llu: flags %u, page "
						 "%llu has %u",
						 (unsigned long long)off,
						 flags, (unsigned long long)p,
						 want[p]);
		}
	}
	uzram_close(dev);
	free(ref);
	free(buf);
}


/* Real data: round trip, and stats that agree with liblz4 on the same pages. */
static void test_corpus_roundtrip(void **state)
{
	const uint64_t size = 12u << 20;
	struct uzram_stats st;
	struct uzram *dev;
	uint8_t *ref;
	uint64_t stored, i, same = 0, want = 0;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	ref = calloc(1, size);
	assert_non_null(ref);
	dev_write(dev, ref, tar, 4u << 20, 0);
	dev_write(dev, ref, core + (12u << 20), 4u << 20, 4u << 20);
	dev_write(dev, ref, core + (1u << 20) + 5, (1u << 20) + 123,
		  (8u << 20) + 123);
	check_dev(dev, ref, "corpus round trip");
	stored = (8u << 20) / PG + (1u << 20) / PG + 1;
	for (i = 0; i < stored; i++)
		same += is_same_filled(ref + i * PG);
	st = get_stats(dev);
	assert_int_equal(st.disksize, size);
	assert_int_equal(st.pages_stored, stored);
	assert_int_equal(st.orig_data_size, st.pages_stored * PG);
	assert_int_equal(st.same_pages, same);
	/* exactly what liblz4 makes of the same pages, alone */
	for (i = 0; i < stored; i++)
		if (!is_same_filled(ref + i * PG))
			want += lz4_stored_size(ref + i * PG);
	assert_int_equal(st.compr_data_size, want);
	assert_true(st.compr_data_size <= (st.pages_stored - st.same_pages) * PG);
	assert_true(st.mem_used_total >= st.compr_data_size);
	assert_true(st.mem_used_max >= st.mem_used_total);
	assert_true(st.huge_pages <= st.pages_stored - st.same_pages);
	assert_int_equal(st.failed_writes, 0);
	assert_int_equal(st.failed_reads, 0);
	assert_int_equal(st.invalid_io, 0);
	check_read(dev, ref, (4u << 20) - 3, 10);
	check_read(dev, ref, (8u << 20) + 100, 5 * PG);
	uzram_close(dev);
	free(ref);
}

/* A smaller st_size gets a prefix and nothing past it. */
static void test_stats_prefix(void **state)
{
	struct uzram_stats full, part;
	struct uzram *dev;
	uint8_t *p;
	size_t i, cut = offsetof(struct uzram_stats, same_pages);

	(void)state;
	dev = dev_open(16 * PG, NULL, 0, 0);
	assert_int_equal(uzram_write(dev, data_page(0), PG, PG), 0);
	full = get_stats(dev);
	memset(&part, 0xee, sizeof(part));
	assert_int_equal(uzram_stats(dev, &part, cut), 0);
	assert_memory_equal(&part, &full, cut);
	p = (uint8_t *)&part;
	for (i = cut; i < sizeof(part); i++)
		assert_int_equal(p[i], 0xee);
	uzram_close(dev);
}

/*
 * Compaction after churn: returns a count, keeps every byte, and leaves the
 * device using about what a fresh device holding the same pages uses.
 */
static void test_compact(void **state)
{
	const uint64_t npages = 2048, size = npages * PG;
	struct uzram_stats full, churned, st, fresh;
	struct uzram *dev, *dev2;
	uint8_t *ref, *ref2;
	uint64_t i;
	long n;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	dev2 = dev_open(size, NULL, 0, 0);
	ref = calloc(1, size);
	ref2 = calloc(1, size);
	assert_non_null(ref);
	assert_non_null(ref2);
	dev_write(dev, ref, tar, size, 0);
	n = uzram_compact(dev);
	assert_true(n >= 0);
	check_dev(dev, ref, "compaction of a full device");
	full = get_stats(dev);
	/* Drop three pages of every four: sparse zspages everywhere. */
	for (i = 0; i < npages; i++) {
		if (i % 4 == 0) {
			dev_write(dev2, ref2, tar + i * PG, PG, i * PG);
			continue;
		}
		assert_int_equal(uzram_discard(dev, PG, i * PG), 0);
		memset(ref + i * PG, 0, PG);
	}
	churned = get_stats(dev);
	/* Freeing that much passed the threshold: compaction ran by itself. */
	if (churned.pages_compacted <= full.pages_compacted)
		fail_msg("no automatic compaction after freeing 3/4 of %llu "
			 "pages", (unsigned long long)npages);
	n = uzram_compact(dev);
	assert_true(n >= 0);
	check_dev(dev, ref, "compaction after churn");
	st = get_stats(dev);
	fresh = get_stats(dev2);
	assert_true(st.mem_used_total <= churned.mem_used_total);
	assert_true(st.mem_used_total < full.mem_used_total);
	assert_true(st.pages_compacted >= full.pages_compacted + (uint64_t)n);
	assert_int_equal(st.pages_stored, churned.pages_stored);
	assert_int_equal(st.compr_data_size, churned.compr_data_size);
	assert_int_equal(st.compr_data_size, fresh.compr_data_size);
	if (st.mem_used_total > fresh.mem_used_total * 21 / 20 + 2 * ZSPAGE_MAX)
		fail_msg("after compaction %llu bytes, a fresh device with the "
			 "same pages %llu", (unsigned long long)st.mem_used_total,
			 (unsigned long long)fresh.mem_used_total);
	assert_true(uzram_compact(dev) >= 0);
	check_dev(dev, ref, "second compaction");
	assert_true(uzram_compact(NULL) == -EINVAL);
	uzram_close(dev);
	uzram_close(dev2);
	free(ref);
	free(ref2);
}

/*
 * A swap device (uzram_set_swap_reads()) stores every write: the kernel
 * writes out only pages that changed, so no write is compared with what
 * its cluster holds. Elsewhere, and with dedup, a rewrite of the same
 * bytes stores nothing (pages_unchanged). Either way the data reads back.
 */
static void test_swap_writes_not_compared(void **state)
{
	const uint64_t n = 16, size = n * PG;
	struct uzram_config cfg;
	struct uzram *dev, *dd;
	uint8_t *ref, *ref2;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.dedup = 1;
	dd = tu_open(&cfg, "dedup");
	ref = calloc(1, size);
	ref2 = calloc(1, size);
	assert_non_null(ref);
	assert_non_null(ref2);
	dev_write(dev, ref, tar, size, 0);
	dev_write(dev, ref, tar, size, 0);
	assert_int_equal(get_stats(dev).pages_unchanged, n);

	assert_int_equal(uzram_set_swap_reads(dev, 1), 0);
	dev_write(dev, ref, tar, size, 0);
	assert_int_equal(get_stats(dev).pages_unchanged, n);
	check_dev(dev, ref, "rewritten on a swap device");
	dev_write(dev, ref, core, size, 0);     /* other bytes, then back */
	dev_write(dev, ref, tar, size, 0);
	memset(ref2, 0x5a, PG);                 /* a same-filled page */
	dev_write(dev, ref, ref2, PG, 3 * PG);
	dev_write(dev, ref, ref2, PG, 3 * PG);
	assert_int_equal(get_stats(dev).pages_unchanged, n);
	check_dev(dev, ref, "written again on a swap device");

	/* off again: the clusters written without a tag are stored once
	 * more (but same-filled ones, whichever the corpus has), and
	 * compared from then on */
	assert_int_equal(uzram_set_swap_reads(dev, 0), 0);
	memcpy(ref2, ref, size);
	uint64_t same = 0;
	for (uint64_t i = 0; i < n; i++)
		same += !memcmp(ref2 + i * PG, ref2 + i * PG + 8, PG - 8);
	assert_true(same >= 1); /* page 3 */
	dev_write(dev, ref, ref2, size, 0);
	assert_int_equal(get_stats(dev).pages_unchanged, n + same);
	dev_write(dev, ref, ref2, size, 0);
	assert_int_equal(get_stats(dev).pages_unchanged, 2 * n + same);
	check_dev(dev, ref, "after swap mode");

	/* dedup hashes every write anyway: compared */
	memset(ref2, 0, size);
	assert_int_equal(uzram_set_swap_reads(dd, 1), 0);
	dev_write(dd, ref2, tar, size, 0);
	dev_write(dd, ref2, tar, size, 0);
	assert_int_equal(get_stats(dd).pages_unchanged, n);
	check_dev(dd, ref2, "dedup on a swap device");
	uzram_close(dev);
	uzram_close(dd);
	free(ref);
	free(ref2);
}

/*
 * The write hook (uzram_set_write_hook()) runs before each write and
 * write_zeroes, and not before a read or a discard: a hook that discards
 * what an owner queued (swapfree/: the slots the kernel freed) drops the
 * old data of a cluster that a write then fills, never the new.
 */
struct hook_queue {
	struct uzram *dev;
	uint64_t off[4];
	unsigned n, runs;
};

static void hook_drain(void *arg)
{
	struct hook_queue *q = arg;

	q->runs++;
	for (unsigned i = 0; i < q->n; i++)
		assert_int_equal(uzram_discard(q->dev, PG, q->off[i]), 0);
	q->n = 0;
}

static void test_write_hook(void **state)
{
	const uint64_t n = 8, size = n * PG;
	struct uzram *dev = dev_open(size, NULL, 0, 0);
	struct hook_queue q = { .dev = dev };
	uint8_t *ref = calloc(1, size), buf[PG];

	(void)state;
	assert_non_null(ref);
	dev_write(dev, ref, tar, size, 0);
	assert_int_equal(uzram_set_write_hook(NULL, hook_drain, &q), -EINVAL);
	assert_int_equal(uzram_set_write_hook(dev, hook_drain, &q), 0);

	/* cluster 3 freed, then written again: the new bytes stay */
	q.off[q.n++] = 3 * PG;
	dev_write(dev, ref, core, PG, 3 * PG);
	assert_int_equal(q.runs, 1);
	assert_int_equal(q.n, 0);
	check_dev(dev, ref, "a freed cluster written again");

	/* clusters 1 and 6 freed, another written: those two read zeros */
	q.off[q.n++] = 1 * PG;
	q.off[q.n++] = 6 * PG;
	dev_write(dev, ref, core + PG, PG, 4 * PG);
	memset(ref + 1 * PG, 0, PG);
	memset(ref + 6 * PG, 0, PG);
	check_dev(dev, ref, "freed clusters dropped before a write");

	/* reads and discards do not run it; write_zeroes does */
	q.off[q.n++] = 2 * PG;
	assert_int_equal(uzram_read(dev, buf, PG, 2 * PG), 0);
	assert_int_equal(uzram_discard(dev, PG, 7 * PG), 0);
	memset(ref + 7 * PG, 0, PG);
	assert_int_equal(q.runs, 2);
	assert_int_equal(q.n, 1);
	assert_int_equal(uzram_write_zeroes(dev, PG, 0, UZRAM_ZERO_NO_HOLE), 0);
	memset(ref, 0, PG);
	memset(ref + 2 * PG, 0, PG);
	assert_int_equal(q.runs, 3);
	check_dev(dev, ref, "after write_zeroes");

	/* removed: a write runs nothing */
	assert_int_equal(uzram_set_write_hook(dev, NULL, NULL), 0);
	q.off[q.n++] = 5 * PG;
	dev_write(dev, ref, tar, PG, 0);
	assert_int_equal(q.runs, 3);
	check_dev(dev, ref, "hook removed");
	uzram_close(dev);
	free(ref);
}

/* The algorithm string is copied: the caller's buffer may change. */
static void test_algorithm_copied(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	char name[16] = "zstd";
	uint8_t *ref;

	(void)state;
	uzram_config_init(&cfg);
	cfg.size = 64 * PG;
	cfg.algorithm = name;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	memset(name, 'x', sizeof(name) - 1);
	ref = calloc(1, 64 * PG);
	assert_non_null(ref);
	dev_write(dev, ref, core + (6u << 20), 64 * PG, 0);
	check_dev(dev, ref, "after the name buffer changed");
	uzram_close(dev);
	free(ref);
}


int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_config_init),
		cmocka_unit_test(test_fresh_device),
		cmocka_unit_test(test_partial_writes),
		cmocka_unit_test(test_discard),
		cmocka_unit_test(test_write_zeroes),
		cmocka_unit_test(test_block_status),
		cmocka_unit_test(test_corpus_roundtrip),
		cmocka_unit_test(test_stats_prefix),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_algorithm_copied),
		cmocka_unit_test(test_swap_writes_not_compared),
		cmocka_unit_test(test_write_hook),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
