/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - small helpers shared by the cmocka unit tests.
 *
 *   UZRAM_TEST_SCALE   multiplies the iteration counts of randomized tests
 *                      (the sanitizer builds run them with less than 1);
 *   UZRAM_TEST_CORPUS  a folder made by scripts/corpus.sh
 *                      (make test builds a small one in build/corpus);
 *   UZRAM_TEST_THREADS the write crew's threads (uzram_config.threads) of
 *                      the devices of tests that run with and without
 *                      them; unset, each such test picks;
 *   CMOCKA_TEST_FILTER a glob of the test names to run (tu_run_tests());
 *                      make check-unit T=test_store FILTER='*same*' sets it.
 *
 * And the fixtures the tests share: the mixed corpus of a binary
 * (TU_CORPUS_MIX), and a device opened from a config that fails the test
 * with the library's message (tu_open()).
 */
#ifndef UZRAM_TESTUTIL_H
#define UZRAM_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "uzram.h"

static inline double tu_scale(void)
{
	const char *s = getenv("UZRAM_TEST_SCALE");
	double v = s ? atof(s) : 1.0;

	return v > 0 ? v : 1.0;
}

/* n scaled by UZRAM_TEST_SCALE, at least 1. */
static inline uint64_t tu_scaled(uint64_t n)
{
	double v = (double)n * tu_scale();

	return v < 1 ? 1 : (uint64_t)v;
}

/* UZRAM_TEST_THREADS if set, else def. */
static inline uint32_t tu_threads(uint32_t def)
{
	const char *s = getenv("UZRAM_TEST_THREADS");

	return s && *s ? (uint32_t)atoi(s) : def;
}

/*
 * Read corpus file `name` (e.g. "files.tar") whole, or at most max bytes.
 * Fails the test if it is missing: the corpus is real data, not optional.
 */
static inline void *tu_corpus(const char *name, size_t max, size_t *len)
{
	const char *dir = getenv("UZRAM_TEST_CORPUS");
	char path[4096];
	FILE *f;
	char *buf;
	size_t n;

	if (!dir)
		dir = "build/corpus";
	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("corpus file %s is missing (make build/corpus)", path);
	buf = malloc(max);
	assert_non_null(buf);
	n = fread(buf, 1, max, f);
	fclose(f);
	assert_true(n > 0);
	*len = n;
	return buf;
}

/*
 * The test data most randomized tests use: the first tar_max bytes of
 * files.tar followed by the first core_max bytes of heap-python.core.
 */
static inline uint8_t *tu_corpus_mix(size_t tar_max, size_t core_max,
				     size_t *len)
{
	size_t tlen, clen;
	uint8_t *t = tu_corpus("files.tar", tar_max, &tlen);
	uint8_t *c = tu_corpus("heap-python.core", core_max, &clen);
	uint8_t *mix = malloc(tlen + clen);

	assert_non_null(mix);
	memcpy(mix, t, tlen);
	memcpy(mix + tlen, c, clen);
	free(t);
	free(c);
	*len = tlen + clen;
	return mix;
}

/*
 * The group fixture of a binary whose tests share one mixed corpus: the
 * statics corpus and corpus_len, filled with tu_corpus_mix(tar_max,
 * core_max) by load_corpus() and freed by free_corpus().
 */
#define TU_CORPUS_MIX(tar_max, core_max)				\
	static uint8_t *corpus;						\
	static size_t corpus_len;					\
	static int load_corpus(void **state)				\
	{								\
		(void)state;						\
		corpus = tu_corpus_mix((tar_max), (core_max), &corpus_len); \
		return 0;						\
	}								\
	static int free_corpus(void **state)				\
	{								\
		(void)state;						\
		free(corpus);						\
		return 0;						\
	}

/*
 * Open a device from cfg (made with uzram_config_init()); fails the test,
 * naming what, with the library's message if it cannot.
 */
static inline struct uzram *tu_open(const struct uzram_config *cfg,
				    const char *what)
{
	struct uzram *dev = NULL;
	int r = uzram_open(cfg, &dev);

	if (r)
		fail_msg("uzram_open (%s, size %llu, %s): %d (%s: %s)", what,
			 (unsigned long long)cfg->size,
			 cfg->algorithm ? cfg->algorithm : "default", r,
			 uzram_strerror(r), uzram_last_error());
	assert_non_null(dev);
	return dev;
}

/*
 * cmocka_run_group_tests() with CMOCKA_TEST_FILTER honoured: every unit
 * test binary's main() runs its tests through this.
 */
#define tu_run_tests(tests, setup, teardown)				\
	(tu_apply_filter(), cmocka_run_group_tests(tests, setup, teardown))

static inline void tu_apply_filter(void)
{
	const char *f = getenv("CMOCKA_TEST_FILTER");

	if (f && *f)
		cmocka_set_test_filter(f);
}

/* xorshift64*: a fast, seedable generator for randomized tests. */
static inline uint64_t tu_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

#endif
