// SPDX-License-Identifier: MIT
/*
 * test_recompress.c - secondary algorithms and uzram_recompress(): the
 * device shrinks, every byte reads back the same (whole and partial reads,
 * clusters), rewrites of recompressed data are still found unchanged, the
 * huge-only, idle and threshold filters pick what they say, bad arguments are
 * refused, a memory limit stops it without losing data, and it runs
 * alongside writers and readers (under TSan in make test).
 *
 * Every check compares the whole device with a reference copy
 * (store_check.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "store_check.h"

#define NPAGES 2048

/* Bytes from a 16-letter alphabet: lz4 finds no matches, zstd halves it. */
static void fill_nibbles(uint8_t *p, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)('a' + (tu_rand(seed) & 15));
}

/* pages 0..N/2 real data pages, then nibble pages, random, same, holes */
static struct uzram *filled(const char *algo, uint32_t cluster, uint8_t *ref,
			    uint64_t limit)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint64_t seed = 9, p;
	int r;

	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	cfg.algorithm = algo;
	cfg.cluster_size = cluster;
	cfg.mem_limit = limit;
	r = uzram_open(&cfg, &dev);
	if (r)
		fail_msg("uzram_open: %s", uzram_last_error());
	for (p = 0; p < NPAGES / 2; p++)
		dev_write(dev, ref, data_page(p), PG, p * PG);
	for (; p < NPAGES / 2 + 128; p++) {
		uint8_t page[PG];

		fill_nibbles(page, PG, &seed);
		dev_write(dev, ref, page, PG, p * PG);
	}
	for (; p < NPAGES / 2 + 192; p++) {
		uint8_t page[PG];

		fill_rand(page, PG, &seed);
		dev_write(dev, ref, page, PG, p * PG);
	}
	for (; p < NPAGES / 2 + 256; p++) {
		uint8_t page[PG];

		fill_same(page, PG, SAME_VALUE);
		dev_write(dev, ref, page, PG, p * PG);
	}
	return dev;
}

static void test_lz4_to_zstd(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram *dev = filled("lz4", 0, ref, 0);
	struct uzram_stats st0, st;
	long n;

	(void)state;
	st0 = get_stats(dev);
	assert_int_equal(st0.huge_pages, 128 + 64);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	n = uzram_recompress(dev, 1, 0, 0);
	st = get_stats(dev);
	printf("   lz4 %llu -> zstd %llu compressed bytes, %ld pages, huge "
	       "%llu -> %llu\n", (unsigned long long)st0.compr_data_size,
	       (unsigned long long)st.compr_data_size, n,
	       (unsigned long long)st0.huge_pages,
	       (unsigned long long)st.huge_pages);
	/* the 128 nibble pages and some of the real ones, never random ones */
	assert_true(n > 128 && n <= NPAGES / 2 + 128);
	assert_int_equal(st.pages_recompressed, n);
	/* zstd's entropy coder takes each nibble page under 3/4 of a page */
	assert_true(st.compr_data_size + 128 * (PG / 4) <= st0.compr_data_size);
	/* the nibble pages shrink; the random ones stay raw */
	assert_int_equal(st.huge_pages, 64);
	assert_int_equal(st.pages_stored, st0.pages_stored);
	check_dev(dev, ref, "after recompression");
	check_read(dev, ref, 5 * PG + 100, 3000);
	check_read(dev, ref, NPAGES / 2 * PG - 10, 20);

	/* nothing left that shrinks */
	assert_int_equal(uzram_recompress(dev, 1, 0, 0), 0);
	/* compaction after freeing the lz4 objects */
	assert_true(uzram_compact(dev) >= 0);
	assert_true(get_stats(dev).mem_used_total < st0.mem_used_total);

	/* recompressed data written again is found unchanged */
	uint8_t *tmp = malloc(64 * PG);
	assert_non_null(tmp);
	memcpy(tmp, ref, 64 * PG);
	dev_write(dev, ref, tmp, 64 * PG, 0);
	assert_int_equal(get_stats(dev).pages_unchanged, 64);
	/* new data goes in with lz4 again and reads back */
	data_pages_copy(tmp, NPAGES / 2, 64);
	dev_write(dev, ref, tmp, 64 * PG, 0);
	free(tmp);
	check_dev(dev, ref, "rewrites after recompression");
	free(ref);
	uzram_close(dev);
}

static void test_filters(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram *dev = filled("lz4", 0, ref, 0);
	struct uzram_stats st0, st;
	long n;

	(void)state;
	st0 = get_stats(dev);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	/* huge only: the 128 nibble pages, never the random ones or a
	 * compressed page */
	n = uzram_recompress(dev, 1, UZRAM_RECOMP_HUGE, 0);
	assert_int_equal(st0.huge_pages, 128 + 64);
	assert_int_equal(n, 128);
	st = get_stats(dev);
	assert_int_equal(st.huge_pages, st0.huge_pages - (uint64_t)n);
	assert_int_equal(st.pages_recompressed, n);
	check_dev(dev, ref, "huge only");
	/* a threshold above every lz4 object of the corpus: none */
	assert_int_equal(uzram_recompress(dev, 1, 0, PG), 0);
	/* a second, stronger algorithm takes what the first made */
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 19), 2);
	assert_true(uzram_recompress(dev, 2, 0, 0) > 0);
	check_dev(dev, ref, "priority 2 over 1 and 0");
	free(ref);
	uzram_close(dev);
}

static void test_clusters(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram *dev = filled("lz4", 16384, ref, 0);
	long n;

	(void)state;
	assert_int_equal(uzram_add_recomp_algorithm(dev, "deflate", 0), 1);
	n = uzram_recompress(dev, 1, 0, 0);
	assert_true(n > 0 && n % 4 == 0);
	check_dev(dev, ref, "16K clusters recompressed");
	check_read(dev, ref, 3 * PG + 17, PG);
	check_read(dev, ref, 4 * PG - 1, 2);
	free(ref);
	uzram_close(dev);
}

static void test_bad_args(void **state)
{
	struct uzram *dev = dev_open(16 * PG, "lz4", 0, 0);

	(void)state;
	assert_int_equal(uzram_recompress(NULL, 1, 0, 0), -EINVAL);
	assert_int_equal(uzram_recompress(dev, 1, 0, 0), -EINVAL);
	assert_int_equal(uzram_add_recomp_algorithm(NULL, "zstd", 0), -EINVAL);
	assert_int_equal(uzram_add_recomp_algorithm(dev, NULL, 0), -EINVAL);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "brotli", 0), -ENOENT);
	assert_non_null(strstr(uzram_last_error(), "zstd"));
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 99), -EINVAL);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	assert_int_equal(uzram_recompress(dev, 0, 0, 0), -EINVAL);
	assert_int_equal(uzram_recompress(dev, 2, 0, 0), -EINVAL);
	assert_int_equal(uzram_recompress(dev, 4, 0, 0), -EINVAL);
	assert_int_equal(uzram_recompress(dev, 1, 4, 0), -EINVAL);
	assert_int_equal(uzram_mark_idle(NULL), -EINVAL);
	assert_int_equal(uzram_mark_idle(dev), 0);             /* empty */
	assert_int_equal(uzram_add_recomp_algorithm(dev, "deflate", 0), 2);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "lz4hc", 0), 3);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 1), -ENOSPC);
	assert_int_equal(uzram_recompress(dev, 3, 0, 0), 0);   /* empty */
	uzram_close(dev);
}

/* With the limit reached, a new object cannot be stored: stop, lose nothing. */
static void test_at_limit(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram *dev = filled("lz4", 0, ref, 0);
	struct uzram_stats st = get_stats(dev);
	long n;

	(void)state;
	assert_int_equal(uzram_set_mem_limit(dev, st.mem_used_total), 0);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	n = uzram_recompress(dev, 1, 0, 0);
	/* the zspages it empties let some objects in before it runs out */
	assert_true(n == -ENOSPC || n >= 0);
	check_dev(dev, ref, "recompression at the limit");
	assert_true(get_stats(dev).mem_used_total <= st.mem_used_total);
	free(ref);
	uzram_close(dev);
}

/*
 * Idle tracking: after uzram_mark_idle(), what is read, rewritten or
 * rewritten unchanged is no longer idle, and UZRAM_RECOMP_IDLE takes only
 * the rest; a plain recompress then takes what was used.
 */
/*
 * The reference for a filtered pass: how many of the given page ranges of
 * ref a fresh lz4 device holding only those pages re-encodes smaller with
 * zstd. The codecs are deterministic, so a pass over the same bytes must
 * take exactly as many, whatever the corpus holds.
 */
static long shrinking(const uint8_t *ref, const uint64_t (*ranges)[2],
		      size_t nr)
{
	struct uzram *dev = dev_open(NPAGES * PG, "lz4", 0, 0);
	long n;

	for (size_t i = 0; i < nr; i++)
		assert_int_equal(uzram_write(dev, ref + ranges[i][0] * PG,
					     (ranges[i][1] - ranges[i][0]) * PG,
					     ranges[i][0] * PG), 0);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	n = uzram_recompress(dev, 1, 0, 0);
	uzram_close(dev);
	return n;
}

static void test_idle(void **state)
{
	static const uint64_t untouched[][2] = { { 200, 450 }, { 451, 512 } };
	static const uint64_t used[][2] = { { 0, 200 }, { 450, 451 } };
	uint8_t *ref = calloc(NPAGES, PG), *tmp = malloc(50 * PG), buf[300];
	struct uzram *dev = dev_open(NPAGES * PG, "lz4", 0, 0);
	long marked, n_idle, n_rest;
	uint64_t p;

	(void)state;
	assert_true(ref && tmp);
	for (p = 0; p < 512; p++)
		dev_write(dev, ref, data_page(p), PG, p * PG);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	marked = uzram_mark_idle(dev);
	assert_int_equal(marked, (long)get_stats(dev).pages_stored);
	check_read(dev, ref, 0, 100 * PG);                    /* read */
	assert_int_equal(uzram_read(dev, buf, sizeof buf, 450 * PG + 7), 0);
	data_pages_copy(tmp, 600, 50);
	dev_write(dev, ref, tmp, 50 * PG, 100 * PG);          /* new data */
	memcpy(tmp, ref + 150 * PG, 50 * PG);
	dev_write(dev, ref, tmp, 50 * PG, 150 * PG);          /* unchanged */
	n_idle = uzram_recompress(dev, 1, UZRAM_RECOMP_IDLE, 0);
	printf("   %ld pages marked idle, %ld idle ones re-encoded\n", marked,
	       n_idle);
	/* exactly those of the 311 untouched pages that shrink */
	assert_int_equal(n_idle, shrinking(ref, untouched, 2));
	assert_true(n_idle > 0);
	n_rest = uzram_recompress(dev, 1, 0, 0);
	assert_int_equal(n_rest, shrinking(ref, used, 2));
	assert_true(n_rest > 0);
	check_dev(dev, ref, "idle recompression");
	/* marking again covers everything stored, recompressed or not */
	assert_int_equal(uzram_mark_idle(dev), (long)get_stats(dev).pages_stored);
	free(tmp);
	free(ref);
	uzram_close(dev);
}

static struct uzram *cdev;
static atomic_bool cstop;
static _Atomic int cfail;

struct cworker {
	int id;
	uint64_t seed;
	uint8_t *ref;
};

/* Writes and checks its own quarter of the device. */
static void *cwrite(void *arg)
{
	struct cworker *w = arg;
	const uint64_t base = (uint64_t)w->id * (NPAGES / 4), n = NPAGES / 4;
	uint8_t page[PG], got[PG];

	for (int k = 0; k < 4000 && !atomic_load(&cfail); k++) {
		uint64_t p = tu_rand(&w->seed) % n;

		if (tu_rand(&w->seed) % 2) {
			memcpy(page, tar + (tu_rand(&w->seed) % 1024) * PG, PG);
			if (uzram_write(cdev, page, PG, (base + p) * PG))
				atomic_store(&cfail, 1);
			memcpy(w->ref + p * PG, page, PG);
		} else if (uzram_read(cdev, got, PG, (base + p) * PG) ||
			   memcmp(got, w->ref + p * PG, PG)) {
			atomic_store(&cfail, 2);
		}
	}
	return NULL;
}

static void *crecompress(void *arg)
{
	long *total = arg;

	while (!atomic_load(&cstop)) {
		long n = uzram_recompress(cdev, 1, 0, 0);

		if (n < 0)
			atomic_store(&cfail, 3);
		else
			*total += n;
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct cworker w[2];
	pthread_t tw[2], tr;
	long total = 0;

	(void)state;
	cdev = dev_open(NPAGES * PG, "lz4", 0, 0);
	atomic_store(&cstop, false);
	atomic_store(&cfail, 0);
	assert_int_equal(uzram_add_recomp_algorithm(cdev, "zstd", 0), 1);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct cworker){ .id = i, .seed = 77 + (uint64_t)i,
					 .ref = calloc(NPAGES / 4, PG) };
		assert_non_null(w[i].ref);
	}
	assert_int_equal(pthread_create(&tr, NULL, crecompress, &total), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&tw[i], NULL, cwrite, &w[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(tw[i], NULL);
	atomic_store(&cstop, true);
	pthread_join(tr, NULL);
	assert_int_equal(atomic_load(&cfail), 0);
	printf("   %ld pages recompressed while 2 threads wrote and read\n",
	       total);
	assert_true(total > 0);
	for (int i = 0; i < 2; i++) {
		uint8_t *buf = malloc(NPAGES / 4 * PG);

		assert_non_null(buf);
		assert_int_equal(uzram_read(cdev, buf, NPAGES / 4 * PG,
					    (uint64_t)i * (NPAGES / 4) * PG), 0);
		assert_memory_equal(buf, w[i].ref, NPAGES / 4 * PG);
		free(buf);
		free(w[i].ref);
	}
	uzram_close(cdev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz4_to_zstd),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_clusters),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_at_limit),
		cmocka_unit_test(test_idle),
		cmocka_unit_test(test_concurrent),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
