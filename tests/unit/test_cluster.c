// SPDX-License-Identifier: MIT
/*
 * test_cluster.c - devices whose compression unit (cluster) is larger than
 * a page.
 *
 * The model test sends random reads, writes, discards, write-zeroes (with
 * and without UZRAM_ZERO_NO_HOLE), block-status queries and compactions to
 * devices with 8, 16 and 64 KiB clusters and, in parallel, to a model: a
 * byte array plus what each cluster is:
 *
 *   C_HOLE    never written, or made a hole by a discard or write-zeroes
 *             that covered all of it;
 *   C_STORED  anything else. A partial zeroing never changes the state: a
 *             hole (or a stored zero cluster) is left alone, anything else
 *             is read-modify-written and stays stored.
 *
 * So block status is exact: a hole is HOLE|ZERO, a stored cluster is ZERO
 * when all its bytes are zero and 0 otherwise, and runs end on cluster
 * boundaries. Offsets lean towards cluster and page edges, lengths run from
 * one byte to three clusters, and the device ends with a short cluster of
 * one page, so requests cross cluster boundaries and end at the last byte.
 * The counters at the end must match the model in pages.
 *
 * The other tests: bad cluster sizes and an older config struct at open,
 * -ENOSPC on a partial-cluster write leaving the old bytes, threads writing
 * disjoint bytes of the same clusters at once (no lost update), and a
 * larger cluster compressing real data better than a page, and the codec
 * layer's prefix decoding that partial reads of a cluster use.
 *
 * UZRAM_TEST_SEED=<n> fixes the seed of the model test; a failure prints it.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "uzram.h"
#include "testutil.h"
#include "zcomp/zcomp.h"

#define PG ((uint64_t)UZRAM_PAGE_SIZE)
#define OPS 10000
#define VERIFY_EVERY 2000

enum { C_HOLE, C_STORED };

TU_CORPUS_MIX(4u << 20, 4u << 20)

struct run {
	struct uzram *dev;
	uint64_t cs, size, ncl;
	uint8_t *model, *state, *buf, *got;
	uint64_t seed, rng, op;
	const char *what;
};

static uint64_t rnd(struct run *r, uint64_t n)
{
	return tu_rand(&r->rng) % n;
}

static int all_zero(const uint8_t *p, size_t len)
{
	return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

static uint64_t cl_len(const struct run *r, uint64_t c)
{
	return c + 1 < r->ncl ? r->cs : r->size - c * r->cs;
}

static void fail_op(const struct run *r, const char *why, uint64_t at)
{
	fail_msg("cluster %llu, seed %llu, operation %llu (%s): %s at offset "
		 "%llu; rerun with UZRAM_TEST_SEED=%llu",
		 (unsigned long long)r->cs, (unsigned long long)r->seed,
		 (unsigned long long)r->op, r->what, why,
		 (unsigned long long)at, (unsigned long long)r->seed);
}

/* An offset near a cluster or page edge, or anywhere. */
static uint64_t pick_off(struct run *r)
{
	uint64_t c = rnd(r, r->ncl), in, len = cl_len(r, c);

	switch (rnd(r, 8)) {
	case 0: case 1:
		in = 0;
		break;
	case 2:
		in = len - 1 - rnd(r, 16);
		break;
	case 3:
		in = rnd(r, len / PG) * PG;
		break;
	case 4:
		in = rnd(r, len / PG) * PG + PG - 1 - rnd(r, 8);
		break;
	default:
		in = rnd(r, len);
		break;
	}
	return c * r->cs + in;
}

static uint64_t pick_len(struct run *r, uint64_t off)
{
	uint64_t len;

	switch (rnd(r, 8)) {
	case 0:
		len = 1 + rnd(r, 16);
		break;
	case 1:
		len = PG;
		break;
	case 2:
		len = r->cs;
		break;
	case 3:
		len = r->cs * (1 + rnd(r, 3)) - (off % r->cs);
		break;
	case 4:
		len = r->size - off;
		break;
	default:
		len = 1 + rnd(r, 3 * r->cs);
		break;
	}
	if (len > r->size - off)
		len = r->size - off;
	return len ? len : 1;
}

static void make_data(struct run *r, uint8_t *buf, uint64_t len, uint64_t off)
{
	uint64_t v, i;

	switch (rnd(r, 6)) {
	case 0: case 1:
		memcpy(buf, corpus + rnd(r, corpus_len - len), len);
		r->what = "write corpus";
		break;
	case 2:
		v = rnd(r, 2) ? 0x0101010101010101ull * rnd(r, 256)
			      : tu_rand(&r->rng);
		for (i = 0; i < len; i++)
			buf[i] = (uint8_t)(v >> (8 * ((off + i) % 8)));
		r->what = "write same-filled";
		break;
	case 3:
		memset(buf, 0, len);
		r->what = "write zeros";
		break;
	case 4:
		for (i = 0; i < len; i++)
			buf[i] = (uint8_t)tu_rand(&r->rng);
		r->what = "write random";
		break;
	default:
		memcpy(buf, corpus + rnd(r, corpus_len - len), len);
		buf[rnd(r, len)] ^= 0x5a;
		r->what = "write corpus with a change";
		break;
	}
}

static void check_bytes(const struct run *r, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (r->got[i] != r->model[off + i])
			fail_op(r, "read differs from the model", off + i);
}

static void verify_all(struct run *r)
{
	const char *what = r->what;

	r->what = "verify";
	for (uint64_t off = 0; off < r->size; off += 3 * r->cs) {
		uint64_t n = r->size - off < 3 * r->cs ? r->size - off : 3 * r->cs;

		assert_int_equal(uzram_read(r->dev, r->got, n, off), 0);
		check_bytes(r, off, n);
	}
	r->what = what;
}

static unsigned model_status(const struct run *r, uint64_t c)
{
	if (r->state[c] == C_HOLE)
		return UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO;
	return all_zero(r->model + c * r->cs, cl_len(r, c)) ?
	       UZRAM_STATUS_ZERO : 0;
}

static void check_status(struct run *r, uint64_t off, uint64_t len)
{
	uint64_t run = 0, end, c;
	unsigned flags = ~0u;

	r->what = "block_status";
	assert_int_equal(uzram_block_status(r->dev, off, len, &run, &flags), 0);
	if (run == 0 || run > len)
		fail_op(r, "run length out of range", off);
	end = off + run;
	if (end != off + len && end % r->cs)
		fail_op(r, "run does not end on a cluster boundary", end);
	for (c = off / r->cs; c * r->cs < end; c++)
		if (model_status(r, c) != flags)
			fail_op(r, "status differs from the model", c * r->cs);
	if (end < off + len && model_status(r, end / r->cs) == flags)
		fail_op(r, "run stops before a cluster of the same status", end);
}

/* Zero [off, off + len) in the model; whole clusters take `whole`. */
static void model_zero(struct run *r, uint64_t off, uint64_t len, int whole)
{
	memset(r->model + off, 0, len);
	for (uint64_t c = off / r->cs; c * r->cs < off + len; c++)
		if (c * r->cs >= off &&
		    c * r->cs + cl_len(r, c) <= off + len)
			r->state[c] = (uint8_t)whole;
}

static void one_op(struct run *r)
{
	uint64_t off = pick_off(r), len = pick_len(r, off);
	unsigned k = (unsigned)rnd(r, 16);

	if (k < 6) {
		make_data(r, r->buf, len, off);
		assert_int_equal(uzram_write(r->dev, r->buf, len, off), 0);
		memcpy(r->model + off, r->buf, len);
		for (uint64_t c = off / r->cs; c * r->cs < off + len; c++)
			r->state[c] = C_STORED;
	} else if (k < 10) {
		r->what = "read";
		assert_int_equal(uzram_read(r->dev, r->got, len, off), 0);
		check_bytes(r, off, len);
	} else if (k < 12) {
		r->what = "discard";
		assert_int_equal(uzram_discard(r->dev, len, off), 0);
		model_zero(r, off, len, C_HOLE);
	} else if (k < 13) {
		r->what = "write_zeroes";
		assert_int_equal(uzram_write_zeroes(r->dev, len, off, 0), 0);
		model_zero(r, off, len, C_HOLE);
	} else if (k < 14) {
		r->what = "write_zeroes NO_HOLE";
		assert_int_equal(uzram_write_zeroes(r->dev, len, off,
						    UZRAM_ZERO_NO_HOLE), 0);
		model_zero(r, off, len, C_STORED);
	} else if (k < 15) {
		check_status(r, off, len);
	} else {
		r->what = "compact";
		assert_true(uzram_compact(r->dev) >= 0);
	}
}

/* pages_stored and same_pages count the pages of clusters, exactly. */
static void check_counters(struct run *r)
{
	struct uzram_stats st;
	uint64_t stored = 0, same = 0;

	assert_int_equal(uzram_stats(r->dev, &st, sizeof st), 0);
	for (uint64_t c = 0; c < r->ncl; c++) {
		const uint8_t *p = r->model + c * r->cs;
		uint64_t n = cl_len(r, c);

		if (r->state[c] == C_HOLE)
			continue;
		stored += n / PG;
		if (!memcmp(p, p + 8, n - 8))
			same += n / PG;
	}
	assert_int_equal(st.pages_stored, stored);
	assert_int_equal(st.orig_data_size, stored * PG);
	assert_int_equal(st.same_pages, same);
}

static void model_run(uint32_t cs, const char *algo, uint64_t seed)
{
	struct uzram_config cfg;
	struct run r = { .cs = cs, .seed = seed, .rng = seed | 1 };
	uint64_t ops = tu_scaled(OPS);

	print_message("cluster %u %s seed %llu\n", cs, algo,
		      (unsigned long long)seed);
	uzram_config_init(&cfg);
	/* 37 clusters and a last one of a single page. */
	cfg.size = 37ull * cs + PG - 5;
	cfg.algorithm = algo;
	cfg.cluster_size = cs;
	assert_int_equal(uzram_open(&cfg, &r.dev), 0);
	assert_int_equal(uzram_cluster_size(r.dev), cs);
	r.size = uzram_size(r.dev);
	assert_int_equal(r.size, 37ull * cs + PG);
	r.ncl = (r.size + cs - 1) / cs;
	r.model = calloc(1, r.size);
	r.state = calloc(1, r.ncl);
	r.buf = malloc(r.size);
	r.got = malloc(r.size);
	assert_true(r.model && r.state && r.buf && r.got);

	check_status(&r, 0, r.size);
	for (r.op = 0; r.op < ops; r.op++) {
		one_op(&r);
		if (r.op % VERIFY_EVERY == VERIFY_EVERY - 1)
			verify_all(&r);
	}
	verify_all(&r);
	check_status(&r, 0, r.size);
	check_counters(&r);
	uzram_close(r.dev);
	free(r.model);
	free(r.state);
	free(r.buf);
	free(r.got);
}

static uint64_t seed_for(uint64_t fixed)
{
	const char *s = getenv("UZRAM_TEST_SEED");

	return s ? strtoull(s, NULL, 0) : fixed;
}

static void test_model_8k(void **state)
{
	(void)state;
	model_run(8192, "lz4", seed_for(1));
	model_run(8192, "zstd", seed_for((uint64_t)time(NULL)));
}

static void test_model_16k(void **state)
{
	(void)state;
	model_run(16384, "lz4", seed_for(2));
	model_run(16384, "deflate", seed_for(3));
}

static void test_model_64k(void **state)
{
	(void)state;
	model_run(65536, "lz4", seed_for(4));
	model_run(65536, "zstd", seed_for((uint64_t)time(NULL) + 1));
}

static void expect_open(uint32_t cs, int want)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	int ret;

	uzram_config_init(&cfg);
	cfg.size = 1u << 20;
	cfg.cluster_size = cs;
	ret = uzram_open(&cfg, &dev);
	if (ret != want)
		fail_msg("cluster size %u: uzram_open returned %d, want %d",
			 cs, ret, want);
	if (ret) {
		assert_null(dev);
		assert_non_null(strstr(uzram_last_error(), "cluster size"));
		return;
	}
	assert_int_equal(uzram_cluster_size(dev), cs ? cs : PG);
	uzram_close(dev);
}

static void test_config(void **state)
{
	static const uint32_t bad[] = {
		1, 512, 2048, 4095, 4097, 12288, 65535, 131072, 1u << 31,
		UINT32_MAX,
	};
	struct uzram_config cfg;
	struct uzram *dev = NULL;

	(void)state;
	uzram_config_init(&cfg);
	assert_int_equal(cfg.cluster_size, PG);
	for (uint32_t cs = 4096; cs <= 65536; cs *= 2)
		expect_open(cs, 0);
	expect_open(0, 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect_open(bad[i], -EINVAL);
	assert_int_equal(uzram_cluster_size(NULL), 0);

	/* A caller built before cluster_size existed gets one page. */
	cfg.size = 1u << 20;
	cfg.cluster_size = 12345;
	cfg.struct_size = offsetof(struct uzram_config, mem_limit) +
			  sizeof(cfg.mem_limit);
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	assert_int_equal(uzram_cluster_size(dev), PG);
	uzram_close(dev);
}

/*
 * With the limit reached, a partial write into a stored cluster needs a
 * new object and fails with -ENOSPC; the cluster keeps its old bytes and
 * the rest of the device is untouched.
 */
static void test_enospc_partial(void **state)
{
	const uint64_t cs = 65536, size = 32 * cs;
	struct uzram_config cfg;
	struct uzram_stats st;
	struct uzram *dev;
	uint8_t *ref = calloc(1, size), *got = malloc(size), patch[100];
	uint64_t rng = 42, off;
	int ret = 0;

	(void)state;
	assert_true(ref && got);
	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.cluster_size = (uint32_t)cs;
	cfg.mem_limit = 8 * cs;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	for (uint64_t i = 0; i < size; i++)
		ref[i] = (uint8_t)tu_rand(&rng);
	for (off = 0; off < size; off += cs) {
		ret = uzram_write(dev, ref + off, cs, off);
		if (ret)
			break;
	}
	assert_int_equal(ret, -ENOSPC);
	assert_true(off >= 3 * cs);
	memset(ref + off, 0, size - off);

	memset(patch, 0xab, sizeof patch);
	ret = uzram_write(dev, patch, sizeof patch, cs + 1000);
	assert_int_equal(ret, -ENOSPC);
	ret = uzram_discard(dev, 4096, 4096);
	assert_int_equal(ret, -ENOSPC);
	assert_int_equal(uzram_read(dev, got, size, 0), 0);
	assert_memory_equal(got, ref, size);
	assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
	assert_true(st.failed_writes >= 3);
	assert_int_equal(st.pages_stored, off / PG);
	assert_int_equal(st.huge_pages, off / PG);

	/* Whole clusters given back make room for the partial write. */
	assert_int_equal(uzram_discard(dev, 2 * cs, off - 2 * cs), 0);
	memset(ref + off - 2 * cs, 0, 2 * cs);
	assert_int_equal(uzram_write(dev, patch, sizeof patch, cs + 1000), 0);
	memcpy(ref + cs + 1000, patch, sizeof patch);
	assert_int_equal(uzram_read(dev, got, size, 0), 0);
	assert_memory_equal(got, ref, size);
	uzram_close(dev);
	free(ref);
	free(got);
}

#define NTHREADS 4
#define STRIPE 256

struct writer {
	pthread_t th;
	struct uzram *dev;
	uint64_t size, ops, rng;
	unsigned id;
	uint8_t *model;   /* shared; each thread writes only its stripes */
	int err;
};

/*
 * Thread id owns the bytes whose STRIPE-sized stripe number is id modulo
 * NTHREADS, so every cluster is written by all threads at once, each
 * with partial writes. After each write it reads its bytes back.
 */
static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t buf[STRIPE], got[STRIPE];

	for (uint64_t i = 0; i < w->ops && !w->err; i++) {
		uint64_t stripe = tu_rand(&w->rng) % (w->size / STRIPE / NTHREADS);
		uint64_t off = (stripe * NTHREADS + w->id) * STRIPE;
		uint64_t in = tu_rand(&w->rng) % STRIPE;
		uint64_t n = 1 + tu_rand(&w->rng) % (STRIPE - in);
		uint8_t v = (uint8_t)tu_rand(&w->rng);

		memset(buf, v, n);
		if (tu_rand(&w->rng) % 4 == 0)
			buf[0] ^= 0x33;
		if (uzram_write(w->dev, buf, n, off + in)) {
			w->err = 1;
			break;
		}
		memcpy(w->model + off + in, buf, n);
		if (uzram_read(w->dev, got, n, off + in) ||
		    memcmp(got, buf, n))
			w->err = 2;
	}
	return NULL;
}

static void test_threads_same_cluster(void **state)
{
	const uint64_t size = 4 * 16384;
	struct uzram_config cfg;
	struct writer w[NTHREADS];
	struct uzram *dev;
	uint8_t *model = calloc(1, size), *got = malloc(size);

	(void)state;
	assert_true(model && got);
	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.cluster_size = 16384;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	for (unsigned i = 0; i < NTHREADS; i++) {
		w[i] = (struct writer){ .dev = dev, .size = size,
					.ops = tu_scaled(20000),
					.rng = 1000 + i, .id = i,
					.model = model };
		assert_int_equal(pthread_create(&w[i].th, NULL, writer_main,
						&w[i]), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(w[i].th, NULL), 0);
		assert_int_equal(w[i].err, 0);
	}
	assert_int_equal(uzram_read(dev, got, size, 0), 0);
	assert_memory_equal(got, model, size);
	uzram_close(dev);
	free(model);
	free(got);
}

/* Real data takes fewer compressed bytes in 64 KiB clusters than in pages. */
static void test_ratio(void **state)
{
	uint64_t compr[2];
	const uint32_t cs[2] = { 4096, 65536 };
	uint8_t *got = malloc(corpus_len);

	(void)state;
	assert_non_null(got);
	for (int i = 0; i < 2; i++) {
		struct uzram_config cfg;
		struct uzram_stats st;
		struct uzram *dev;

		uzram_config_init(&cfg);
		cfg.size = corpus_len;
		cfg.cluster_size = cs[i];
		assert_int_equal(uzram_open(&cfg, &dev), 0);
		assert_int_equal(uzram_write(dev, corpus, corpus_len, 0), 0);
		assert_int_equal(uzram_read(dev, got, corpus_len, 0), 0);
		assert_memory_equal(got, corpus, corpus_len);
		assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
		assert_int_equal(st.orig_data_size, uzram_size(dev));
		compr[i] = st.compr_data_size;
		uzram_close(dev);
	}
	print_message("compressed bytes: %llu in 4 KiB, %llu in 64 KiB\n",
		      (unsigned long long)compr[0],
		      (unsigned long long)compr[1]);
	assert_true(compr[1] < compr[0]);
	free(got);
}

/*
 * zcomp_decompress_prefix() gets the first `want` bytes right for every
 * codec, and stays inside its buffers (ASan) on truncated or damaged input.
 */
static void test_decompress_prefix(void **state)
{
	static const char *const names[] = { "lz4", "lz4hc", "zstd", "deflate" };
	static const size_t wants[] = { 1, 4096, 30001, 65535, 65536 };
	const size_t len = 65536;
	uint8_t *cbuf = malloc(2 * len), *dst = malloc(len);
	const uint8_t *src = corpus + (1u << 20);
	uint64_t rng = 7;

	(void)state;
	assert_true(cbuf && dst);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		struct zcomp *zc;
		int clen;

		assert_int_equal(zcomp_create(names[i], 0, &zc), 0);
		clen = zcomp_compress(zc, src, len, cbuf, 2 * len);
		assert_true(clen > 0);
		for (size_t w = 0; w < sizeof wants / sizeof wants[0]; w++) {
			memset(dst, 0xee, len);
			assert_int_equal(zcomp_decompress_prefix(zc, cbuf,
					 (size_t)clen, dst, wants[w], len), 0);
			assert_memory_equal(dst, src, wants[w]);
			/* Damaged input: any answer but a wrong success. */
			if (zcomp_decompress_prefix(zc, cbuf, (size_t)clen / 2,
						    dst, wants[w], len) == 0)
				assert_memory_equal(dst, src, wants[w]);
			cbuf[tu_rand(&rng) % (size_t)clen] ^= 0x40;
			(void)zcomp_decompress_prefix(zc, cbuf, (size_t)clen,
						      dst, wants[w], len);
			clen = zcomp_compress(zc, src, len, cbuf, 2 * len);
		}
		zcomp_destroy(zc);
	}
	free(cbuf);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_model_8k),
		cmocka_unit_test(test_model_16k),
		cmocka_unit_test(test_model_64k),
		cmocka_unit_test(test_enospc_partial),
		cmocka_unit_test(test_threads_same_cluster),
		cmocka_unit_test(test_ratio),
		cmocka_unit_test(test_decompress_prefix),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
