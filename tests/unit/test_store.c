/*
 * test_store.c - the semantics of the public API (include/uzram.h), one
 * behaviour per test: a fresh device, partial writes, discard and
 * write_zeroes, block status, page-table chunks, the page states, compaction
 * and every codec. The bad inputs are in test_errors.c.
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

/* Read [off, off + len) into a buffer with guard bytes on either side. */
static void check_read(struct uzram *dev, const uint8_t *ref, uint64_t off,
		       size_t len)
{
	uint8_t *buf = malloc(len + 64);
	size_t i;
	int r;

	assert_non_null(buf);
	memset(buf, 0x5a, len + 64);
	r = uzram_read(dev, buf + 32, len, off);
	if (r)
		fail_msg("uzram_read(%zu @ %llu) = %d", len,
			 (unsigned long long)off, r);
	for (i = 0; i < 32; i++)
		if (buf[i] != 0x5a || buf[32 + len + i] != 0x5a)
			fail_msg("uzram_read(%zu @ %llu) wrote outside buf",
				 len, (unsigned long long)off);
	if (memcmp(buf + 32, ref + off, len))
		fail_msg("uzram_read(%zu @ %llu) returned wrong bytes", len,
			 (unsigned long long)off);
	free(buf);
}

/* The flags of every page, walked with uzram_block_status() page by page. */
static unsigned page_status(struct uzram *dev, uint64_t page)
{
	uint64_t run = 0;
	unsigned flags = ~0u;

	assert_int_equal(uzram_block_status(dev, page * PG, PG, &run, &flags),
			 0);
	assert_int_equal(run, PG);
	return flags;
}

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
		dev_write(dev, ref, tar_page(i), PG, i * PG);
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
		dev_write(dev, ref, tar_page(i), PG, i * PG);
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
	dev_write(dev, ref, tar_page(0), PG, 2 * PG);
	dev_write(dev, ref, tar_page(1), PG, 3 * PG);
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

/*
 * Read 4 pages around each chunk boundary and the ends of the device:
 * reading all of a 192 MiB device is slow under the sanitizers.
 */
static void check_boundaries(struct uzram *dev, const uint8_t *ref,
			     uint64_t chunk)
{
	uint64_t size = uzram_size(dev), b, lo, hi;

	for (b = 0; b <= size; b += chunk) {
		lo = b > 2 * PG ? b - 2 * PG : 0;
		hi = b + 2 * PG < size ? b + 2 * PG : size;
		check_read(dev, ref, lo, hi - lo);
	}
	check_read(dev, ref, size - 4 * PG, 4 * PG);
}

/*
 * A device larger than one chunk of the page table (64 MiB): data on both
 * sides of the chunk boundaries, chunks never written, and zeroing, block
 * status and reads that cross them.
 */
static void test_table_chunks(void **state)
{
	const uint64_t chunk = 64u << 20, size = 3 * chunk + 3 * PG;
	const uint64_t npages = size / PG;
	struct uzram_stats st0, st;
	uint64_t off, run, p, q, seed = 17;
	unsigned flags, *want;
	struct uzram *dev;
	uint8_t *ref, *buf;

	(void)state;
	dev = dev_open(size - 7, NULL, 0, 0);
	assert_int_equal(uzram_size(dev), size);
	st0 = get_stats(dev);
	ref = calloc(1, size);
	buf = malloc(2 * PG);
	want = malloc(npages * sizeof(*want));
	assert_non_null(ref);
	assert_non_null(buf);
	assert_non_null(want);
	dev_write(dev, ref, tar_page(0), PG, chunk - PG);
	fill_rand(buf, 2 * PG, &seed);
	dev_write(dev, ref, buf, 100, 2 * chunk - 50);
	dev_write(dev, ref, tar_page(1), 1, size - 1);
	check_boundaries(dev, ref, chunk);
	st = get_stats(dev);
	/* Chunks 0, 1, 2 and 3 were written; each costs 16 bytes a page. */
	assert_int_equal(st.table_bytes - st0.table_bytes,
			 4 * (chunk / PG) * 16);
	assert_int_equal(st.pages_stored, 4);

	/* Zeroing across boundaries and over a whole untouched chunk. */
	assert_int_equal(uzram_discard(dev, chunk + 200, chunk - 100), 0);
	memset(ref + chunk - 100, 0, chunk + 200);
	assert_int_equal(uzram_write_zeroes(dev, chunk, 2 * chunk - 80,
					    UZRAM_ZERO_NO_HOLE), 0);
	memset(ref + 2 * chunk - 80, 0, chunk);
	check_boundaries(dev, ref, chunk);
	/*
	 * Stored: the data pages at chunk - PG and size - 1, and the zero
	 * pages [2 * chunk, 3 * chunk - PG). The holes zeroed in part at
	 * 2 * chunk - PG and 3 * chunk - PG may have become zero pages.
	 */
	st = get_stats(dev);
	if (st.pages_stored < 2 + chunk / PG - 1 ||
	    st.pages_stored > 2 + chunk / PG + 1)
		fail_msg("%llu pages stored", (unsigned long long)st.pages_stored);
	check_read(dev, ref, chunk - 10, 20);
	check_read(dev, ref, 2 * chunk - 3 * PG - 1, 6 * PG + 2);

	/* Every page's status, and maximal runs found by walking. */
	for (p = 0; p < npages; p++)
		want[p] = UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO;
	for (p = 2 * chunk / PG; p < 3 * chunk / PG - 1; p++)
		want[p] = UZRAM_STATUS_ZERO;
	want[chunk / PG - 1] = 0;
	want[npages - 1] = 0;
	want[2 * chunk / PG - 1] = ~0u;    /* either */
	want[3 * chunk / PG - 1] = ~0u;
	for (off = 0; off < size; off += run) {
		assert_int_equal(uzram_block_status(dev, off, size - off, &run,
						    &flags), 0);
		for (p = off / PG; p * PG < off + run; p++)
			if (want[p] != flags && (want[p] != ~0u || !flags))
				fail_msg("run %llu @ %llu: flags %u, page %llu "
					 "has %u", (unsigned long long)run,
					 (unsigned long long)off, flags,
					 (unsigned long long)p, want[p]);
		q = (off + run) / PG;
		if (q < npages && want[q] == flags)
			fail_msg("run @ %llu stops at page %llu of equal status",
				 (unsigned long long)off,
				 (unsigned long long)q);
	}
	assert_int_equal(uzram_discard(dev, size, 0), 0);
	assert_int_equal(get_stats(dev).pages_stored, 0);
	assert_int_equal(uzram_block_status(dev, 0, size, &run, &flags), 0);
	assert_int_equal(run, size);
	uzram_close(dev);

	/* Only the last chunk written: runs of holes skip unmade chunks. */
	dev = dev_open(size, NULL, 0, 0);
	memset(ref, 0, size);
	dev_write(dev, ref, tar_page(2), PG, 3 * chunk + PG);
	for (off = 0; off < 3 * chunk; off += chunk / 2 + 7 * PG + 3) {
		assert_int_equal(uzram_block_status(dev, off, size - off, &run,
						    &flags), 0);
		assert_int_equal(flags, UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
		assert_int_equal(run, 3 * chunk + PG - off);
	}
	assert_int_equal(uzram_block_status(dev, 3 * chunk + PG - 1, 2,
					    &run, &flags), 0);
	assert_int_equal(run, 1);
	check_read(dev, ref, 3 * chunk - 9, PG + 20);
	check_boundaries(dev, ref, chunk);
	assert_int_equal(uzram_discard(dev, 3 * chunk + 2 * PG - 1, 1), 0);
	assert_int_equal(get_stats(dev).pages_stored, 0);
	assert_int_equal(uzram_block_status(dev, 0, size, &run, &flags), 0);
	assert_int_equal(run, size);
	uzram_close(dev);
	free(ref);
	free(buf);
	free(want);
}

/* Same-filled pages live in the table: counted, and no allocator memory. */
static void test_same_filled(void **state)
{
	const uint64_t npages = 64, size = npages * PG;
	struct uzram_stats st0, st;
	struct uzram *dev;
	uint8_t *ref, *buf;
	uint64_t v;
	size_t i;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	ref = calloc(1, size);
	buf = malloc(16 * PG);
	assert_non_null(ref);
	assert_non_null(buf);
	st0 = get_stats(dev);

	fill_same(buf, 16 * PG, SAME_VALUE);
	dev_write(dev, ref, buf, 16 * PG, 0);
	memset(buf, 0, PG);
	dev_write(dev, ref, buf, PG, 16 * PG);
	memset(buf, 0xff, PG);
	dev_write(dev, ref, buf, PG, 17 * PG);
	for (i = 0; i < 4; i++) {
		fill_same(buf, PG, 0x0101010101010101ull * (i + 2) + i);
		dev_write(dev, ref, buf, PG, (18 + i) * PG);
	}
	check_dev(dev, ref, "same-filled pages");
	st = get_stats(dev);
	assert_int_equal(st.same_pages, 22);
	assert_int_equal(st.pages_stored, 22);
	assert_int_equal(st.orig_data_size, 22 * PG);
	assert_int_equal(st.compr_data_size, 0);
	assert_int_equal(st.huge_pages, 0);
	assert_int_equal(st.mem_used_total, st0.mem_used_total);
	assert_int_equal(page_status(dev, 0), 0);
	assert_int_equal(page_status(dev, 16), UZRAM_STATUS_ZERO);
	/* Partial reads of a pattern start at the right byte of the value. */
	for (i = 0; i < 16; i++)
		check_read(dev, ref, (i % 3) * PG + i * 5 + 1, 3 + i * 7);
	check_read(dev, ref, 15 * PG + 4093, PG + 6);
	check_read(dev, ref, 17 * PG + 7, 2 * PG - 3);

	/*
	 * Pages that are almost same-filled must not be taken for it: one
	 * byte off at the start, the end, the middle; a 16-byte period.
	 */
	for (i = 0; i < 4; i++) {
		fill_same(buf, PG, SAME_VALUE);
		if (i == 0)
			buf[0] ^= 1;
		else if (i == 1)
			buf[PG - 1] ^= 0x80;
		else if (i == 2)
			buf[2049] ^= 4;
		else
			for (v = 0; v < PG; v += 16)
				buf[v] = 0x11;
		dev_write(dev, ref, buf, PG, (24 + i) * PG);
	}
	check_dev(dev, ref, "nearly same-filled pages");
	st = get_stats(dev);
	assert_int_equal(st.same_pages, 22);
	assert_int_equal(st.pages_stored, 26);
	assert_true(st.compr_data_size > 0);

	/* A partial write breaks the pattern, a whole-page one restores it. */
	buf[0] = 0x77;
	dev_write(dev, ref, buf, 1, 3 * PG + 100);
	check_dev(dev, ref, "partial write into a same-filled page");
	assert_int_equal(get_stats(dev).same_pages, 21);
	fill_same(buf, 8, SAME_VALUE);
	dev_write(dev, ref, buf + 100 % 8, 1, 3 * PG + 100);
	check_dev(dev, ref, "partial write restoring the pattern");
	assert_int_equal(get_stats(dev).same_pages, 22);
	fill_same(buf, PG, 0x1234);
	dev_write(dev, ref, buf, PG, 5 * PG);
	check_dev(dev, ref, "same-filled page rewritten with another value");
	assert_int_equal(get_stats(dev).same_pages, 22);
	assert_int_equal(uzram_discard(dev, 8 * PG, 0), 0);
	memset(ref, 0, 8 * PG);
	check_dev(dev, ref, "same-filled pages discarded");
	st = get_stats(dev);
	assert_int_equal(st.same_pages, 14);
	assert_int_equal(st.pages_stored, 18);
	uzram_close(dev);
	free(ref);
	free(buf);
}

/* Random bytes do not compress: kept raw, counted as huge. */
static void test_huge(void **state)
{
	const uint64_t npages = 32, size = npages * PG;
	struct uzram_stats st;
	struct uzram *dev;
	uint64_t seed = 99;
	uint8_t *ref, *buf;
	size_t i;

	(void)state;
	dev = dev_open(size, NULL, 0, 0);
	ref = calloc(1, size);
	buf = malloc(16 * PG);
	assert_non_null(ref);
	assert_non_null(buf);
	fill_rand(buf, 16 * PG, &seed);
	dev_write(dev, ref, buf, 16 * PG, 4 * PG);
	check_dev(dev, ref, "huge pages");
	st = get_stats(dev);
	assert_int_equal(st.huge_pages, 16);
	assert_int_equal(st.same_pages, 0);
	assert_int_equal(st.pages_stored, 16);
	assert_int_equal(st.compr_data_size, 16 * PG);
	assert_true(st.mem_used_total >= 16 * PG);
	for (i = 4; i < 20; i++)
		assert_int_equal(page_status(dev, i), 0);

	/* Rewritten with compressible data: no longer huge. */
	for (i = 0; i < 8; i++)
		dev_write(dev, ref, tar_page(i), PG, (4 + i) * PG);
	check_dev(dev, ref, "huge pages rewritten");
	st = get_stats(dev);
	assert_int_equal(st.huge_pages, 8);
	assert_true(st.compr_data_size < 16 * PG);
	/* A partial write into a huge page keeps it huge and right. */
	dev_write(dev, ref, tar, 100, 15 * PG + 10);
	check_dev(dev, ref, "partial write into a huge page");
	assert_int_equal(get_stats(dev).huge_pages, 8);
	assert_int_equal(uzram_discard(dev, 4 * PG, 16 * PG), 0);
	memset(ref + 16 * PG, 0, 4 * PG);
	check_dev(dev, ref, "huge pages discarded");
	assert_int_equal(get_stats(dev).huge_pages, 4);
	uzram_close(dev);
	free(ref);
	free(buf);
}

/* Real data: round trip, compression, and stats that agree. */
static void test_corpus_roundtrip(void **state)
{
	const uint64_t size = 12u << 20;
	struct uzram_stats st;
	struct uzram *dev;
	uint8_t *ref;
	uint64_t stored, i, same = 0;

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
	if (st.compr_data_size >= st.orig_data_size / 2)
		fail_msg("real data barely compresses: %llu -> %llu bytes",
			 (unsigned long long)st.orig_data_size,
			 (unsigned long long)st.compr_data_size);
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
	assert_int_equal(uzram_write(dev, tar_page(0), PG, PG), 0);
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

/* The highest level of the codecs we know; others run at 0 and 1 only. */
static int max_level(const char *name)
{
	if (!strcmp(name, "lz4hc"))
		return 12;
	if (!strcmp(name, "zstd"))
		return 19;
	if (!strcmp(name, "deflate"))
		return 12;
	return 1;
}

/* Every built-in codec, at its default, lowest and a high level. */
static void test_every_algorithm(void **state)
{
	const uint64_t size = 256 * PG;
	char names[256], *name, *save = NULL;
	struct uzram_stats st;
	uint64_t seed = 11;
	struct uzram *dev;
	uint8_t *ref;
	int count = 0, levels[3];
	size_t l;

	(void)state;
	ref = malloc(size);
	assert_non_null(ref);
	snprintf(names, sizeof(names), "%s", uzram_algorithms());
	for (name = strtok_r(names, " ", &save); name;
	     name = strtok_r(NULL, " ", &save)) {
		count++;
		levels[0] = 0;
		levels[1] = 1;
		levels[2] = max_level(name);
		for (l = 0; l < 3; l++) {
			dev = dev_open(size, name, levels[l], 0);
			memcpy(ref, tar + (1u << 20), 128 * PG);
			memcpy(ref + 128 * PG, core + (10u << 20), 64 * PG);
			fill_same(ref + 192 * PG, 16 * PG, SAME_VALUE);
			fill_rand(ref + 208 * PG, 16 * PG, &seed);
			memset(ref + 224 * PG, 0, 32 * PG);
			assert_int_equal(uzram_write(dev, ref, size, 0), 0);
			check_dev(dev, ref, name);
			check_read(dev, ref, 100 * PG + 77, 3 * PG + 11);
			dev_write(dev, ref, tar + 3 * PG, 5000, 150 * PG + 3);
			check_dev(dev, ref, name);
			st = get_stats(dev);
			assert_int_equal(st.pages_stored, 256);
			if (st.same_pages < 16 + 32)
				fail_msg("%s: %llu same pages", name,
					 (unsigned long long)st.same_pages);
			assert_true(st.huge_pages >= 16);
			if (st.compr_data_size - 16 * PG >= 192 * PG * 3 / 4)
				fail_msg("%s level %d: %llu bytes for 192 "
					 "pages of real data", name,
					 levels[l],
					 (unsigned long long)st.compr_data_size);
			uzram_close(dev);
		}
	}
	if (count < 4)
		fail_msg("only %d algorithms: \"%s\"", count,
			 uzram_algorithms());
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
		cmocka_unit_test(test_table_chunks),
		cmocka_unit_test(test_same_filled),
		cmocka_unit_test(test_huge),
		cmocka_unit_test(test_corpus_roundtrip),
		cmocka_unit_test(test_stats_prefix),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_algorithm_copied),
		cmocka_unit_test(test_every_algorithm),
	};

	return cmocka_run_group_tests(tests, load_corpus, free_corpus);
}
