// SPDX-License-Identifier: MIT
/*
 * backend_deflate.c - raw DEFLATE (RFC 1951) with libdeflate, levels 1..12
 * (default 6; 10..12 use its near-optimal parser).
 *
 * Raw deflate has no header and no checksum, which suits 4 KiB pages: the
 * store knows each object's length and size. A libdeflate_compressor is
 * built for one level, so a thread keeps one per level it uses; one
 * libdeflate_decompressor per thread decodes everything.
 *
 * libdeflate_deflate_decompress_ex() reports how much input it used and how
 * much output it made; both must match exactly, so trailing bytes or a
 * short stream are errors rather than silently accepted. libdeflate takes
 * no dictionary.
 */
#include <errno.h>

#include <libdeflate.h>

#include "zcomp_backend.h"

static int deflate_min_level(void)
{
	return 1;
}

static int deflate_max_level(void)
{
	return 12;
}

static void *deflate_cctx_create(int level)
{
	return libdeflate_alloc_compressor(level);
}

static void deflate_cctx_destroy(void *ctx)
{
	libdeflate_free_compressor(ctx);
}

static void *deflate_dctx_create(void)
{
	return libdeflate_alloc_decompressor();
}

static void deflate_dctx_destroy(void *ctx)
{
	libdeflate_free_decompressor(ctx);
}

static int deflate_compress(void *ctx, int level, const void *dict,
			    const void *src, size_t src_len, void *dst,
			    size_t dst_cap)
{
	size_t n;

	(void)level;
	(void)dict;
	n = libdeflate_deflate_compress(ctx, src, src_len, dst, dst_cap);
	if (n == 0 || n > (size_t)0x7fffffff)
		return -E2BIG;
	return (int)n;
}

static int deflate_decompress(void *ctx, const void *dict, const void *src,
			      size_t src_len, void *dst, size_t dst_len)
{
	size_t in_used, out_made;

	(void)dict;
	if (libdeflate_deflate_decompress_ex(ctx, src, src_len, dst, dst_len,
					     &in_used, &out_made) !=
	    LIBDEFLATE_SUCCESS)
		return -EIO;
	if (in_used != src_len || out_made != dst_len)
		return -EIO;
	return 0;
}

const struct zcomp_backend zcomp_backend_deflate = {
	.name = "deflate",
	.default_level = 6,
	.min_level = deflate_min_level,
	.max_level = deflate_max_level,
	.cctx_per_level = true,
	.cctx_create = deflate_cctx_create,
	.cctx_destroy = deflate_cctx_destroy,
	.dctx_create = deflate_dctx_create,
	.dctx_destroy = deflate_dctx_destroy,
	.compress = deflate_compress,
	.decompress = deflate_decompress,
};
