// SPDX-License-Identifier: MIT
/*
 * backend_lz4.c - LZ4 (liblz4) in its fast mode; the level is LZ4's
 * acceleration (1, the default, is LZ4_compress_default()'s).
 *
 * Without a dictionary, LZ4_compress_fast() keeps its hash table on the
 * stack and LZ4_decompress_safe() needs no state, so there is no context
 * at all. The library works on int sizes; larger buffers are refused
 * before any cast.
 *
 * With a dictionary, each cluster is still compressed on its own, as one
 * block whose history is the dictionary. Loading a dictionary hashes all of
 * it, which costs more than compressing a page, so it is done once: the
 * prepared dictionary holds an LZ4_stream_t that LZ4_loadDict() filled,
 * and each call copies that state (16 KiB) into the thread's own working
 * stream before LZ4_compress_fast_continue(), the use lz4.h names next to
 * LZ4_attach_dictionary() (which the shared library does not export).
 * Decoding needs no state: LZ4_decompress_safe_usingDict(). LZ4 looks back
 * 64 KiB at most, so only a dictionary's last 64 KiB are kept.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>

#include "zcomp_backend.h"

#define LZ4_WINDOW (64 * 1024)
/* LZ4's own cap on acceleration (LZ4_ACCELERATION_MAX in lz4.c) */
#define LZ4_ACCEL_MAX 65537

struct lz4_dict {
	LZ4_stream_t state;     /* after LZ4_loadDict(), never changed */
	int len;
	char buf[];             /* the dictionary's last len bytes */
};

static int lz4_dict_create(int level, const void *buf, size_t len,
			   void **out)
{
	struct lz4_dict *d;

	(void)level;
	if (len > LZ4_WINDOW) {
		buf = (const char *)buf + (len - LZ4_WINDOW);
		len = LZ4_WINDOW;
	}
	d = aligned_alloc(_Alignof(LZ4_stream_t),
			  (sizeof(*d) + len + _Alignof(LZ4_stream_t) - 1) &
				  ~(_Alignof(LZ4_stream_t) - 1));
	if (!d)
		return -ENOMEM;
	memcpy(d->buf, buf, len);
	d->len = (int)len;
	LZ4_initStream(&d->state, sizeof(d->state));
	LZ4_loadDict(&d->state, d->buf, d->len);
	*out = d;
	return 0;
}

static void lz4_dict_destroy(void *dict)
{
	free(dict);
}

static void *lz4_cctx_create(int level)
{
	(void)level;
	return aligned_alloc(_Alignof(LZ4_stream_t), sizeof(LZ4_stream_t));
}

static void lz4_cctx_destroy(void *ctx)
{
	free(ctx);
}

static int lz4_min_level(void)
{
	return 1;
}

/* The level is LZ4's acceleration, as the kernel's zram takes it. */
static int lz4_max_level(void)
{
	return LZ4_ACCEL_MAX;
}

static int lz4_compress(void *ctx, int level, const void *dict,
			const void *src, size_t src_len, void *dst,
			size_t dst_cap)
{
	const struct lz4_dict *d = dict;
	int n;

	if (src_len > LZ4_MAX_INPUT_SIZE)
		return -E2BIG;
	if (dst_cap > INT_MAX)
		dst_cap = INT_MAX;
	if (d) {
		memcpy(ctx, &d->state, sizeof(d->state));
		n = LZ4_compress_fast_continue(ctx, src, dst, (int)src_len,
					       (int)dst_cap, level);
	} else {
		n = LZ4_compress_fast(src, dst, (int)src_len, (int)dst_cap,
				      level);
	}
	return n > 0 ? n : -E2BIG;
}

int zcomp_lz4_decompress(void *ctx, const void *dict, const void *src,
			 size_t src_len, void *dst, size_t dst_len)
{
	const struct lz4_dict *d = dict;
	int n;

	(void)ctx;
	if (src_len > INT_MAX || dst_len > INT_MAX)
		return -EIO;
	if (d)
		n = LZ4_decompress_safe_usingDict(src, dst, (int)src_len,
						  (int)dst_len, d->buf, d->len);
	else
		n = LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len);
	return n == (int)dst_len ? 0 : -EIO;
}

/* LZ4 decodes in order and can stop after the bytes asked for. */
int zcomp_lz4_decompress_prefix(void *ctx, const void *dict, const void *src,
				size_t src_len, void *dst, size_t want,
				size_t dst_len)
{
	const struct lz4_dict *d = dict;
	int n;

	(void)ctx;
	if (src_len > INT_MAX || dst_len > INT_MAX || want > dst_len)
		return -EIO;
	if (d)
		n = LZ4_decompress_safe_partial_usingDict(src, dst,
				(int)src_len, (int)want, (int)dst_len, d->buf,
				d->len);
	else
		n = LZ4_decompress_safe_partial(src, dst, (int)src_len,
						(int)want, (int)dst_len);
	return n >= (int)want ? 0 : -EIO;
}

/*
 * Levels 1 (the default, LZ4_compress_default()'s) to LZ4_ACCEL_MAX are
 * LZ4's acceleration, as the kernel's zram takes its lz4 level: the higher,
 * the faster and the larger (doc/benchmarks-notes.md has figures). A fast
 * first codec (uzram_config.fast_algorithm) may take a higher one.
 */
const struct zcomp_backend zcomp_backend_lz4 = {
	.name = "lz4",
	.default_level = 1,
	.min_level = lz4_min_level,
	.max_level = lz4_max_level,
	.cctx_create = lz4_cctx_create,
	.cctx_destroy = lz4_cctx_destroy,
	.cctx_dict_only = true,
	.dict_create = lz4_dict_create,
	.dict_destroy = lz4_dict_destroy,
	.compress = lz4_compress,
	.decompress = zcomp_lz4_decompress,
	.decompress_prefix = zcomp_lz4_decompress_prefix,
};
