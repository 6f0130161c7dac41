// SPDX-License-Identifier: MIT
/*
 * test_unchanged.c - rewrites of data a device already holds. The store
 * keeps 16 bits of each cluster's XXH3 hash in its slot; a whole-cluster
 * write whose hash bits match is compared byte for byte with the stored
 * cluster and, if equal, stores nothing (stats.pages_unchanged). A partial
 * write compares the bytes it would change.
 *
 * Each test checks the counter and the contents (against a reference copy,
 * store_check.h), and that an unchanged rewrite allocates nothing: compressed
 * size and allocator memory stay put, and it succeeds even with the memory
 * limit reached. The hash bits are only a filter: two different pages whose
 * bits collide must still both be stored (test_tag_collision), which is what
 * fails if the byte check is ever dropped.
 */
#include <errno.h>
#include <stddef.h>

#include <xxhash.h>

#include "store_check.h"

#define NPAGES 64

/* The 16 hash bits the store keeps (the top ones of XXH3_64bits). */
static unsigned tag_of(const uint8_t *p, size_t len)
{
	return (unsigned)(XXH3_64bits(p, len) >> 48);
}

static void test_rewrite_pages(void **state)
{
	struct uzram *dev = dev_open(NPAGES * PG, "lz4", 0, 0);
	uint8_t *ref = calloc(NPAGES, PG), *buf = malloc(4 * PG);
	struct uzram_stats st0, st;
	uint64_t seed = 7;

	(void)state;
	assert_non_null(ref);
	assert_non_null(buf);
	/* compressed, huge and same-filled pages, then all of them again */
	memcpy(buf, data_page(0), PG);
	memcpy(buf + PG, data_page(1), PG);
	fill_rand(buf + 2 * PG, PG, &seed);
	fill_same(buf + 3 * PG, PG, SAME_VALUE);
	dev_write(dev, ref, buf, 4 * PG, 8 * PG);
	st0 = get_stats(dev);
	assert_int_equal(st0.pages_unchanged, 0);
	assert_int_equal(st0.huge_pages, 1);
	assert_int_equal(st0.same_pages, 1);

	dev_write(dev, ref, buf, 4 * PG, 8 * PG);
	st = get_stats(dev);
	assert_int_equal(st.pages_unchanged, 4);
	assert_int_equal(st.compr_data_size, st0.compr_data_size);
	assert_int_equal(st.mem_used_total, st0.mem_used_total);
	assert_int_equal(st.pages_stored, 4);
	check_dev(dev, ref, "identical rewrite");

	/* one byte changed in the last byte of the second page only */
	buf[2 * PG - 1] ^= 0x40;
	dev_write(dev, ref, buf, 4 * PG, 8 * PG);
	st = get_stats(dev);
	assert_int_equal(st.pages_unchanged, 4 + 3);
	check_dev(dev, ref, "rewrite with one changed byte");

	/* the same bytes one page further on are new there */
	dev_write(dev, ref, buf, 4 * PG, 9 * PG);
	st = get_stats(dev);
	assert_int_equal(st.pages_unchanged, 4 + 3);
	check_dev(dev, ref, "shifted rewrite");

	free(buf);
	free(ref);
	uzram_close(dev);
}

static void test_tag_collision(void **state)
{
	struct uzram *dev = dev_open(NPAGES * PG, "lz4", 0, 0);
	uint8_t *ref = calloc(NPAGES, PG), *p = malloc(PG), *q = malloc(PG);
	struct uzram_stats st;
	uint64_t n;

	(void)state;
	assert_non_null(ref);
	assert_non_null(p);
	assert_non_null(q);
	memcpy(p, data_page(3), PG);
	memcpy(q, p, PG);
	/* vary q's last 8 bytes until its 16 bits equal p's: ~65536 tries */
	for (n = 1; n < (1u << 24); n++) {
		memcpy(q + PG - 8, &n, 8);
		if (memcmp(p, q, PG) && tag_of(q, PG) == tag_of(p, PG))
			break;
	}
	assert_true(n < (1u << 24));

	dev_write(dev, ref, p, PG, 5 * PG);
	dev_write(dev, ref, q, PG, 5 * PG);
	st = get_stats(dev);
	assert_int_equal(st.pages_unchanged, 0);
	check_dev(dev, ref, "a different page with the same hash bits");
	dev_write(dev, ref, q, PG, 5 * PG);
	assert_int_equal(get_stats(dev).pages_unchanged, 1);
	check_dev(dev, ref, "the colliding page rewritten");

	free(q);
	free(p);
	free(ref);
	uzram_close(dev);
}

static void test_partial(void **state)
{
	struct uzram *dev = dev_open(NPAGES * PG, "zstd", 0, 0);
	uint8_t *ref = calloc(NPAGES, PG), buf[300];
	struct uzram_stats st0, st;

	(void)state;
	assert_non_null(ref);
	dev_write(dev, ref, data_page(5), PG, 2 * PG);
	dev_write(dev, ref, data_page(6), PG, 3 * PG);
	st0 = get_stats(dev);

	/* 300 bytes across the boundary of two pages, as they are */
	memcpy(buf, ref + 3 * PG - 100, sizeof buf);
	dev_write(dev, ref, buf, sizeof buf, 3 * PG - 100);
	st = get_stats(dev);
	assert_int_equal(st.pages_unchanged, 2);
	assert_int_equal(st.compr_data_size, st0.compr_data_size);
	check_dev(dev, ref, "partial identical rewrite");

	/* the same with a change in the second page's part */
	buf[250] ^= 1;
	dev_write(dev, ref, buf, sizeof buf, 3 * PG - 100);
	assert_int_equal(get_stats(dev).pages_unchanged, 3);
	check_dev(dev, ref, "partial rewrite changing one page");

	/* zeroing bytes of a data page that were just written as zeros */
	memset(buf, 0, sizeof buf);
	dev_write(dev, ref, buf, 100, 2 * PG + 40);
	assert_int_equal(get_stats(dev).pages_unchanged, 3);
	assert_int_equal(uzram_write_zeroes(dev, 100, 2 * PG + 40, 0), 0);
	assert_int_equal(get_stats(dev).pages_unchanged, 4);
	check_dev(dev, ref, "zeroing zeros");

	free(ref);
	uzram_close(dev);
}

static void test_clusters(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram_stats st;

	(void)state;
	assert_non_null(ref);
	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	cfg.cluster_size = 16384;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	uint8_t *buf = malloc(8 * PG);
	assert_non_null(buf);
	data_pages_copy(buf, 64, 8);
	dev_write(dev, ref, buf, 8 * PG, 4 * PG);
	dev_write(dev, ref, buf, 8 * PG, 4 * PG);
	free(buf);
	st = get_stats(dev);
	assert_int_equal(st.pages_unchanged, 8);
	/* one page inside a cluster, unchanged: the cluster's 4 pages */
	dev_write(dev, ref, ref + 5 * PG, PG, 5 * PG);
	assert_int_equal(get_stats(dev).pages_unchanged, 12);
	check_dev(dev, ref, "cluster rewrites");
	free(ref);
	uzram_close(dev);
}

/* At the memory limit, rewriting what is stored still succeeds. */
static void test_at_limit(void **state)
{
	struct uzram *dev = dev_open(1024 * PG, "lz4", 0, 256 * 1024);
	uint8_t *ref = calloc(1024, PG);
	uint64_t p;

	(void)state;
	assert_non_null(ref);
	/* random pages are kept raw: the limit is reached in ~64 of them */
	p = fill_to_limit(dev, ref, 1024, 11);
	assert_true(p > 8);
	check_dev(dev, ref, "filled to the limit");
	assert_int_equal(uzram_write(dev, ref, p * PG, 0), 0);
	assert_int_equal(get_stats(dev).pages_unchanged, p);
	check_dev(dev, ref, "rewritten at the limit");
	free(ref);
	uzram_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rewrite_pages),
		cmocka_unit_test(test_tag_collision),
		cmocka_unit_test(test_partial),
		cmocka_unit_test(test_clusters),
		cmocka_unit_test(test_at_limit),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
