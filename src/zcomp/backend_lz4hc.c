// SPDX-License-Identifier: MIT
/*
 * backend_lz4hc.c - LZ4 high compression (liblz4's lz4hc), levels 1..12.
 *
 * The output is plain LZ4, so it decompresses with LZ4_decompress_safe()
 * and no context. Compression needs an LZ4_streamHC_t state (about 256 KiB);
 * LZ4_compress_HC_extStateHC() resets it on every call and takes the level
 * as an argument, so one state per thread serves every level. No
 * dictionary: loading one costs as much as compressing a page, and a
 * prepared state to copy instead would be 256 KiB per call.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <lz4.h>
#include <lz4hc.h>

#include "zcomp_backend.h"

static int lz4hc_min_level(void)
{
	return 1;
}

static int lz4hc_max_level(void)
{
	return LZ4HC_CLEVEL_MAX;
}

static void *lz4hc_cctx_create(int level)
{
	(void)level;
	/* malloc's alignment is enough for LZ4_streamHC_t. */
	return malloc((size_t)LZ4_sizeofStateHC());
}

static void lz4hc_cctx_destroy(void *ctx)
{
	free(ctx);
}

static int lz4hc_compress(void *ctx, int level, const void *dict,
			  const void *src, size_t src_len, void *dst,
			  size_t dst_cap)
{
	int n;

	(void)dict;
	if (src_len > LZ4_MAX_INPUT_SIZE)
		return -E2BIG;
	if (dst_cap > INT_MAX)
		dst_cap = INT_MAX;
	n = LZ4_compress_HC_extStateHC(ctx, src, dst, (int)src_len,
				       (int)dst_cap, level);
	return n > 0 ? n : -E2BIG;
}

const struct zcomp_backend zcomp_backend_lz4hc = {
	.name = "lz4hc",
	.default_level = LZ4HC_CLEVEL_DEFAULT,
	.min_level = lz4hc_min_level,
	.max_level = lz4hc_max_level,
	.cctx_per_level = false,
	.cctx_create = lz4hc_cctx_create,
	.cctx_destroy = lz4hc_cctx_destroy,
	.compress = lz4hc_compress,
	.decompress = zcomp_lz4_decompress,
	.decompress_prefix = zcomp_lz4_decompress_prefix,
};
