/*
 * backend_lz4.c - LZ4 (liblz4) in its default, fastest mode.
 *
 * LZ4_compress_default() keeps its hash table on the stack and
 * LZ4_decompress_safe() needs no state, so this backend has no contexts at
 * all. The library works on int sizes; larger buffers are refused before
 * any cast.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>

#include <lz4.h>

#include "zcomp_backend.h"

static int lz4_level(void)
{
	return 1;
}

static int lz4_compress(void *ctx, int level, const void *src, size_t src_len,
			void *dst, size_t dst_cap)
{
	int n;

	(void)ctx;
	(void)level;
	if (src_len > LZ4_MAX_INPUT_SIZE)
		return -E2BIG;
	if (dst_cap > INT_MAX)
		dst_cap = INT_MAX;
	n = LZ4_compress_default(src, dst, (int)src_len, (int)dst_cap);
	return n > 0 ? n : -E2BIG;
}

int zcomp_lz4_decompress(void *ctx, const void *src, size_t src_len,
			 void *dst, size_t dst_len)
{
	(void)ctx;
	if (src_len > INT_MAX || dst_len > INT_MAX)
		return -EIO;
	if (LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len) !=
	    (int)dst_len)
		return -EIO;
	return 0;
}

/* LZ4 decodes in order and can stop after the bytes asked for. */
int zcomp_lz4_decompress_prefix(void *ctx, const void *src, size_t src_len,
				void *dst, size_t want, size_t dst_len)
{
	(void)ctx;
	if (src_len > INT_MAX || dst_len > INT_MAX || want > dst_len)
		return -EIO;
	if (LZ4_decompress_safe_partial(src, dst, (int)src_len, (int)want,
					(int)dst_len) < (int)want)
		return -EIO;
	return 0;
}

/* One level: LZ4_compress_default() has no level to choose. */
const struct zcomp_backend zcomp_backend_lz4 = {
	.name = "lz4",
	.default_level = 1,
	.min_level = lz4_level,
	.max_level = lz4_level,
	.compress = lz4_compress,
	.decompress = zcomp_lz4_decompress,
	.decompress_prefix = zcomp_lz4_decompress_prefix,
};
