// SPDX-License-Identifier: MIT
/*
 * test_states.c - the page states and where they live, through the public
 * API: same-filled pages (kept in the table, no allocator memory), huge
 * pages (random bytes kept raw), every built-in codec at several levels,
 * and the slot table's 64 MiB chunks (data on both sides of a boundary,
 * chunks never written, zeroing and block status across them). Split from
 * test_store.c, with which it shares store_check.h.
 */
#include <errno.h>
#include <stddef.h>

#include "store_check.h"

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
 * A device larger than one chunk of the slot table (64 MiB): data on both
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
	dev_write(dev, ref, data_page(0), PG, chunk - PG);
	fill_rand(buf, 2 * PG, &seed);
	dev_write(dev, ref, buf, 100, 2 * chunk - 50);
	dev_write(dev, ref, data_page(1), 1, size - 1);
	check_boundaries(dev, ref, chunk);
	st = get_stats(dev);
	/*
	 * Chunks 0, 1, 2 and 3 were written; each costs 16 bytes a page, the
	 * last one (3 pages) one page of table.
	 */
	assert_int_equal(st.table_bytes - st0.table_bytes,
			 3 * (chunk / PG) * 16 + PG);
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
	dev_write(dev, ref, data_page(2), PG, 3 * chunk + PG);
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
		dev_write(dev, ref, data_page(i), PG, (4 + i) * PG);
	check_dev(dev, ref, "huge pages rewritten");
	st = get_stats(dev);
	assert_int_equal(st.huge_pages, 8);
	assert_true(st.compr_data_size < 16 * PG);
	/* A partial write of random bytes into a huge page keeps it huge. */
	fill_rand(buf, 100, &seed);
	dev_write(dev, ref, buf, 100, 15 * PG + 10);
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
			data_pages_copy(ref, 0, 192);
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
		cmocka_unit_test(test_table_chunks),
		cmocka_unit_test(test_same_filled),
		cmocka_unit_test(test_huge),
		cmocka_unit_test(test_every_algorithm),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
