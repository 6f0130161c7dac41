// SPDX-License-Identifier: MIT
/*
 * test_zcomp.c - the codec layer (src/zcomp/: zcomp.c and backend_*.c) on
 * real data.
 *
 * Pages come from the test corpus: files.tar (binaries, headers, docs) and
 * heap-python.core (a process image, like swapped-out anonymous memory).
 * Every backend is round-tripped at every level it has (a spread for zstd),
 * on single pages and on 16 and 64 KiB clusters; then the error paths:
 * output that does not fit, corrupt, truncated and padded input, wrong
 * output sizes, unknown names and levels; and several threads sharing the
 * same handles. Buffers are allocated at their exact sizes so that ASan
 * catches any access outside them.
 */
#include <errno.h>
#include <pthread.h>

#include <zstd.h>

#include "testutil.h"
#include "zcomp/zcomp.h"

#define PAGE 4096u

static const char *const names[] = { "lz4", "lz4hc", "zstd", "deflate" };
#define NR_NAMES (sizeof(names) / sizeof(names[0]))

static unsigned char *tar, *core;
static size_t tar_len, core_len;

/*
 * The units of each size that LZ4 halves, found once per source and size
 * by candidates() (the level tests ask for them many times).
 */
#define NR_SIZES 3
static const size_t unit_sizes[NR_SIZES] = { PAGE, 16384, 65536 };
static size_t *cand[2][NR_SIZES], nr_cand[2][NR_SIZES];

static int corpus_setup(void **state)
{
	(void)state;
	tar = tu_corpus("files.tar", 32u << 20, &tar_len);
	core = tu_corpus("heap-python.core", 32u << 20, &core_len);
	return tar_len >= PAGE && core_len >= (1u << 20) ? 0 : -1;
}

static int corpus_teardown(void **state)
{
	(void)state;
	free(tar);
	free(core);
	for (size_t k = 0; k < 2; k++)
		for (size_t s = 0; s < NR_SIZES; s++)
			free(cand[k][s]);
	return 0;
}

static struct zcomp *make(const char *name, int level)
{
	struct zcomp *zc = NULL;

	assert_int_equal(zcomp_create(name, level, &zc), 0);
	assert_non_null(zc);
	return zc;
}

/*
 * Compress len bytes with dst_cap == len, as the store does, check the
 * round trip, and return the stored size (len if it did not compress).
 */
static size_t roundtrip(const struct zcomp *zc, const unsigned char *src,
			size_t len)
{
	unsigned char *c = malloc(len), *d = malloc(len);
	int n;

	assert_non_null(c);
	assert_non_null(d);
	n = zcomp_compress(zc, src, len, c, len);
	if (n == -E2BIG) {
		free(c);
		free(d);
		return len;
	}
	assert_true(n > 0);
	assert_true((size_t)n <= len);
	memset(d, 0x5a, len);
	assert_int_equal(zcomp_decompress(zc, c, (size_t)n, d, len), 0);
	assert_memory_equal(d, src, len);
	free(c);
	free(d);
	return (size_t)n;
}

/*
 * The units of size bytes of source k (0 the tar, 1 the core) whose 4 KiB
 * pages LZ4 compresses, one by one, to less than half in all; *found says
 * how many.
 */
static const size_t *candidates(size_t k, size_t size, size_t *found)
{
	const unsigned char *buf = k ? core : tar;
	size_t len = k ? core_len : tar_len, s = 0, units = len / size;
	struct zcomp *lz4;
	unsigned char c[PAGE];

	while (unit_sizes[s] != size)
		assert_true(++s < NR_SIZES);
	if (cand[k][s]) {
		*found = nr_cand[k][s];
		return cand[k][s];
	}
	lz4 = make("lz4", 0);
	cand[k][s] = malloc((units ? units : 1) * sizeof(**cand));
	assert_non_null(cand[k][s]);
	for (size_t u = 0; u < units; u++) {
		size_t total = 0;

		for (size_t off = 0; off < size; off += PAGE) {
			int r = zcomp_compress(lz4, buf + u * size + off, PAGE,
					       c, sizeof(c));
			total += r > 0 ? (size_t)r : PAGE;
		}
		if (total < size / 2)
			cand[k][s][nr_cand[k][s]++] = u;
	}
	zcomp_destroy(lz4);
	*found = nr_cand[k][s];
	return cand[k][s];
}

/*
 * n units of size bytes that LZ4 halves (candidates()), spread evenly over
 * those of source k, the tar (0) or the core (1): real data picked by the
 * property the tests need, whatever files the corpus holds. A corpus whose
 * tar has fewer (compressed documentation, media) gives all it has and the
 * core the rest, so the test still runs on n units of that kind; it fails
 * only if both sources together have fewer than n. Returns how many came
 * from source k.
 */
static size_t pick(size_t k, size_t size, size_t n, const unsigned char **out)
{
	size_t got = 0, from_k = 0;

	for (size_t j = 0; j < 2 && got < n; j++) {
		size_t src = j ? 1 - k : k, found;
		const size_t *at = candidates(src, size, &found);
		const unsigned char *buf = src ? core : tar;
		size_t take = found < n - got ? found : n - got;

		for (size_t i = 0; i < take; i++)
			out[got + i] = buf + at[i * found / take] * size;
		got += take;
		if (!j)
			from_k = take;
	}
	if (got < n)
		fail_msg("the corpus has %zu units of %zu bytes that LZ4 halves "
			 "in its tar and core; the test needs %zu", got, size, n);
	return from_k;
}

/* A page that LZ4 halves, from source k (or the other one, pick()). */
static const unsigned char *compressible_page(size_t k)
{
	const unsigned char *page;

	pick(k, PAGE, 1, &page);
	return page;
}

/*
 * On pages LZ4 halves, every codec and level must shrink every page, and
 * save at least half the bytes LZ4 saves on the set (LZ4 rather than an
 * entropy coder as the reference, since lz4 and zstd's negative levels
 * code literals raw); a zero page must become tiny.
 */
static void check_level(const char *name, int level)
{
	static const unsigned char zero[PAGE];
	struct zcomp *zc = make(name, level), *ref = make("lz4", 0);
	const size_t n = tu_scaled(96) < 64 ? 64 : tu_scaled(96);
	const unsigned char **pages = malloc(n * sizeof(*pages));
	unsigned char c[PAGE];

	assert_non_null(pages);
	for (size_t k = 0; k < 2; k++) {
		size_t total = 0, lz4_total = 0, from_k = pick(k, PAGE, n, pages);

		for (size_t i = 0; i < n; i++) {
			size_t got = roundtrip(zc, pages[i], PAGE);
			int r = zcomp_compress(ref, pages[i], PAGE, c, sizeof(c));

			assert_true(r > 0);
			if (got >= PAGE)
				fail_msg("%s level %d: page %zu of %s did not "
					 "shrink (lz4: %d)", name, level,
					 i, (i < from_k ? k : 1 - k) ? "core" :
					 "tar", r);
			total += got;
			lz4_total += (size_t)r;
		}
		if ((n * PAGE - total) * 2 < n * PAGE - lz4_total)
			fail_msg("%s level %d: %s pages (%zu of %zu from it) "
				 "took %zu bytes, lz4 %zu of %zu", name, level,
				 k ? "core" : "tar", from_k, n, total,
				 lz4_total, n * PAGE);
	}
	assert_true(roundtrip(zc, zero, PAGE) < 64);
	free(pages);
	zcomp_destroy(ref);
	zcomp_destroy(zc);
}

static void test_lz4_levels(void **state)
{
	(void)state;
	check_level("lz4", 0);
	check_level("lz4", 1);
	check_level("lz4", 8);   /* an acceleration: the fast first codec's */
}

static void test_lz4hc_levels(void **state)
{
	(void)state;
	for (int level = 0; level <= 12; level++)
		check_level("lz4hc", level);
}

static void test_deflate_levels(void **state)
{
	(void)state;
	for (int level = 0; level <= 12; level++)
		check_level("deflate", level);
}

/*
 * Below about -20 zstd skips so much input that a few pages LZ4 halves stay
 * raw (3 of 2048 tar pages at -50), so the extremes are only round-tripped,
 * in test_names_levels.
 */
static void test_zstd_levels(void **state)
{
	static const int levels[] = { -20, -5, -1, 0, 1, 3, 9, 19 };

	(void)state;
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		check_level("zstd", levels[i]);
}

/*
 * Clusters of 16 and 64 KiB round-trip and compress better than the same
 * bytes cut into 4 KiB pages (the reason to have clusters).
 */
static void test_clusters(void **state)
{
	static const size_t sizes[] = { 16384, 65536 };
	const unsigned char *units[8];
	const size_t n = 8;

	(void)state;
	for (size_t b = 0; b < NR_NAMES; b++) {
		struct zcomp *zc = make(names[b], 0);

		for (size_t s = 0; s < 2; s++) {
			size_t whole = 0, paged = 0;

			pick(0, sizes[s], n, units);
			for (size_t i = 0; i < n; i++) {
				whole += roundtrip(zc, units[i], sizes[s]);
				for (size_t off = 0; off < sizes[s]; off += PAGE)
					paged += roundtrip(zc, units[i] + off,
							   PAGE);
			}
			if (whole >= paged)
				fail_msg("%s: %zu-byte clusters: %zu bytes, "
					 "as pages %zu, of %zu", names[b],
					 sizes[s], whole, paged, n * sizes[s]);
		}
		zcomp_destroy(zc);
	}
}

static void fill_random(unsigned char *p, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = tu_rand(seed);

		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* -E2BIG whenever the output cannot fit; nothing written past dst_cap. */
static void test_e2big(void **state)
{
	static const size_t caps[] = { PAGE - 1, PAGE / 2, 64, 1 };
	unsigned char rnd[PAGE], big[PAGE + 1024];
	uint64_t seed = 0x1234;

	(void)state;
	fill_random(rnd, sizeof(rnd), &seed);
	for (size_t b = 0; b < NR_NAMES; b++) {
		struct zcomp *zc = make(names[b], 0);
		const unsigned char *page = compressible_page(0);
		int n;

		for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
			unsigned char *dst = malloc(caps[c]);

			assert_non_null(dst);
			assert_int_equal(zcomp_compress(zc, rnd, PAGE, dst,
							caps[c]), -E2BIG);
			free(dst);
		}
		/* With room to spare random data is either raw-ish or E2BIG. */
		n = zcomp_compress(zc, rnd, PAGE, big, sizeof(big));
		assert_true(n > (int)PAGE - 64 || n == -E2BIG);

		/* One byte short of a real compressed page: -E2BIG. */
		n = zcomp_compress(zc, page, PAGE, big, PAGE);
		assert_true(n > 1 && n < (int)PAGE);
		{
			unsigned char *dst = malloc((size_t)n - 1);

			assert_non_null(dst);
			assert_int_equal(zcomp_compress(zc, page, PAGE, dst,
							(size_t)n - 1), -E2BIG);
			free(dst);
		}
		zcomp_destroy(zc);
	}
}

/* Decompress src[0..len) into exactly dst_len bytes in its own buffers. */
static int decode(const struct zcomp *zc, const unsigned char *src,
		  size_t len, size_t dst_len)
{
	unsigned char *s = malloc(len ? len : 1), *d = malloc(dst_len ? dst_len : 1);
	int rc;

	assert_non_null(s);
	assert_non_null(d);
	memcpy(s, src, len);
	rc = zcomp_decompress(zc, s, len, d, dst_len);
	free(s);
	free(d);
	return rc;
}

/*
 * Corrupt input never crashes and never decodes to a wrong size: flipped
 * bytes give 0 or -EIO (a codec without checksum may decode a flipped
 * literal), truncated or padded input gives -EIO, and so does asking for
 * any size other than the real one.
 */
static void test_corrupt(void **state)
{
	static const size_t wrong[] = { 0, 1, PAGE / 2, PAGE - 1, PAGE + 1,
					2 * PAGE };
	const unsigned long iters = tu_scaled(3000);
	uint64_t seed = 0xc0ffee;

	(void)state;
	for (size_t b = 0; b < NR_NAMES; b++) {
		struct zcomp *zc = make(names[b], 0);
		const unsigned char *pages[] = { compressible_page(0),
						 core + (core_len / 2 & ~(size_t)(PAGE - 1)) };

		for (size_t pg = 0; pg < 2; pg++) {
			unsigned char c[PAGE + 16], bad[PAGE + 16];
			unsigned long eio = 0;
			int n = zcomp_compress(zc, pages[pg], PAGE, c, PAGE);

			assert_true(n > 0);
			assert_int_equal(decode(zc, c, (size_t)n, PAGE), 0);
			for (size_t w = 0; w < sizeof(wrong) / sizeof(wrong[0]); w++)
				assert_int_equal(decode(zc, c, (size_t)n,
							wrong[w]), -EIO);
			for (size_t len = 0; len < (size_t)n; len++)
				assert_int_equal(decode(zc, c, len, PAGE), -EIO);
			for (size_t extra = 1; extra <= 16; extra++) {
				memcpy(bad, c, (size_t)n);
				fill_random(bad + n, extra, &seed);
				assert_int_equal(decode(zc, bad, (size_t)n + extra,
							PAGE), -EIO);
			}
			for (unsigned long it = 0; it < iters; it++) {
				unsigned flips = 1 + tu_rand(&seed) % 4;
				int rc;

				memcpy(bad, c, (size_t)n);
				while (flips--) {
					uint64_t r = tu_rand(&seed);

					bad[r % (size_t)n] ^= (unsigned char)(1 + (r >> 32) % 255);
				}
				rc = decode(zc, bad, (size_t)n, PAGE);
				assert_true(rc == 0 || rc == -EIO);
				eio += rc == -EIO;
			}
			assert_true(eio > 0);
		}
		/* Garbage of any length. */
		for (unsigned long it = 0; it < iters / 4; it++) {
			unsigned char junk[PAGE];
			size_t len = tu_rand(&seed) % (PAGE + 1);
			int rc;

			fill_random(junk, len, &seed);
			rc = decode(zc, junk, len, PAGE);
			assert_true(rc == 0 || rc == -EIO);
		}
		zcomp_destroy(zc);
	}
}

static void test_names_levels(void **state)
{
	static const struct {
		const char *name;
		int level, rc, effective;
	} cases[] = {
		{ "lz4", 0, 0, 1 },      { "lz4", 1, 0, 1 },
		/* lz4's level is its acceleration, as the kernel's zram */
		{ "lz4", 8, 0, 8 },      { "lz4", 65537, 0, 65537 },
		{ "lz4", 65538, -EINVAL, 0 }, { "lz4", -1, -EINVAL, 0 },
		{ "lz4hc", 0, 0, 9 },    { "lz4hc", 1, 0, 1 },
		{ "lz4hc", 12, 0, 12 },  { "lz4hc", 13, -EINVAL, 0 },
		{ "lz4hc", -1, -EINVAL, 0 },
		{ "zstd", 0, 0, 3 },     { "zstd", -1, 0, -1 },
		{ "zstd", 19, 0, 19 },
		{ "deflate", 0, 0, 6 },  { "deflate", 1, 0, 1 },
		{ "deflate", 12, 0, 12 }, { "deflate", 13, -EINVAL, 0 },
		{ "deflate", -1, -EINVAL, 0 },
		{ "lzo", 0, -ENOENT, 0 }, { "", 0, -ENOENT, 0 },
		{ "LZ4", 0, -ENOENT, 0 }, { "lz4 ", 0, -ENOENT, 0 },
	};
	struct zcomp *zc = NULL;

	(void)state;
	assert_string_equal(zcomp_known(), "lz4 lz4hc zstd deflate");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		zc = NULL;
		assert_int_equal(zcomp_create(cases[i].name, cases[i].level,
					      &zc), cases[i].rc);
		if (cases[i].rc) {
			assert_null(zc);
			continue;
		}
		assert_string_equal(zcomp_name(zc), cases[i].name);
		assert_int_equal(zcomp_level(zc), cases[i].effective);
		zcomp_destroy(zc);
	}
	/* zstd's range is the library's own. */
	assert_int_equal(zcomp_create("zstd", ZSTD_maxCLevel(), &zc), 0);
	zcomp_destroy(zc);
	assert_int_equal(zcomp_create("zstd", ZSTD_minCLevel(), &zc), 0);
	assert_int_equal(roundtrip(zc, compressible_page(0), PAGE) <= PAGE, 1);
	zcomp_destroy(zc);
	zc = NULL;
	assert_int_equal(zcomp_create("zstd", ZSTD_maxCLevel() + 1, &zc),
			 -EINVAL);
	assert_int_equal(zcomp_create("zstd", ZSTD_minCLevel() - 1, &zc),
			 -EINVAL);
	assert_int_equal(zcomp_create(NULL, 0, &zc), -EINVAL);
	assert_int_equal(zcomp_create("lz4", 0, NULL), -EINVAL);
	assert_null(zc);
	zcomp_destroy(NULL);
}

/*
 * Threads share the handles (as the store's readers and writers do), each
 * compresses and decompresses on its own contexts, and all decode the same
 * shared objects. One thread also cycles through every deflate level, so its
 * context cache evicts while the others run. New threads are started twice
 * so contexts are made and freed at thread exit repeatedly.
 */
#define NR_THREADS 4

struct shared_obj {
	unsigned char c[PAGE];
	size_t len;
	const unsigned char *orig;
};

static struct zcomp *thr_zc[NR_NAMES];
static struct shared_obj thr_obj[NR_NAMES];

struct thr_arg {
	unsigned id;
	unsigned long iters;
	unsigned long errors;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (a->id + 1);
	unsigned char c[PAGE], d[PAGE];

	for (unsigned long i = 0; i < a->iters; i++) {
		size_t b = (a->id + i) % NR_NAMES;
		const struct zcomp *zc = thr_zc[b];
		struct zcomp *own = NULL;
		const unsigned char *page =
			tu_rand(&seed) & 1 ?
			tar + tu_rand(&seed) % (tar_len / PAGE) * PAGE :
			core + tu_rand(&seed) % ((1u << 20) / PAGE) * PAGE;
		int n;

		if (a->id == 0 && zcomp_create("deflate", 1 + (int)(i % 12),
					       &own) == 0)
			zc = own;
		n = zcomp_compress(zc, page, PAGE, c, sizeof(c));
		if (n > 0) {
			if (zcomp_decompress(zc, c, (size_t)n, d, PAGE) ||
			    memcmp(d, page, PAGE))
				a->errors++;
		} else if (n != -E2BIG) {
			a->errors++;
		}
		zcomp_destroy(own);

		if (zcomp_decompress(thr_zc[b], thr_obj[b].c, thr_obj[b].len,
				     d, PAGE) ||
		    memcmp(d, thr_obj[b].orig, PAGE))
			a->errors++;
	}
	return NULL;
}

static void test_threads(void **state)
{
	pthread_t th[NR_THREADS];
	struct thr_arg args[NR_THREADS];

	(void)state;
	for (size_t b = 0; b < NR_NAMES; b++) {
		int n;

		thr_zc[b] = make(names[b], 0);
		thr_obj[b].orig = compressible_page(1);
		n = zcomp_compress(thr_zc[b], thr_obj[b].orig, PAGE,
				   thr_obj[b].c, PAGE);
		assert_true(n > 0);
		thr_obj[b].len = (size_t)n;
	}
	for (int round = 0; round < 2; round++) {
		for (unsigned t = 0; t < NR_THREADS; t++) {
			args[t] = (struct thr_arg){ t, tu_scaled(400), 0 };
			assert_int_equal(pthread_create(&th[t], NULL, thr_main,
							&args[t]), 0);
		}
		for (unsigned t = 0; t < NR_THREADS; t++) {
			assert_int_equal(pthread_join(th[t], NULL), 0);
			assert_int_equal(args[t].errors, 0);
		}
	}
	for (size_t b = 0; b < NR_NAMES; b++)
		zcomp_destroy(thr_zc[b]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_levels),
		cmocka_unit_test(test_lz4_levels),
		cmocka_unit_test(test_lz4hc_levels),
		cmocka_unit_test(test_deflate_levels),
		cmocka_unit_test(test_zstd_levels),
		cmocka_unit_test(test_clusters),
		cmocka_unit_test(test_e2big),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_threads),
	};

	return tu_run_tests(tests, corpus_setup, corpus_teardown);
}
