// SPDX-License-Identifier: MIT
/*
 * backend_zstd.c - Zstandard (libzstd), levels ZSTD_minCLevel() (negative,
 * fastest) to ZSTD_maxCLevel(); level 0 selects ZSTD_CLEVEL_DEFAULT.
 *
 * Every page is one frame, and a frame's header costs bytes that matter on
 * a 4 KiB input. The store already knows each object's length and its
 * uncompressed size, and checks nothing with a checksum, so each context is
 * built once with everything optional turned off:
 *
 *   ZSTD_f_zstd1_magicless  no 4-byte magic number (same format on the DCtx)
 *   checksumFlag 0          no 4-byte content checksum
 *   dictIDFlag 0            no dictionary ID
 *   contentSizeFlag 0       no content size field
 *
 * The format parameter is in zstd's "experimental" section, which needs
 * ZSTD_STATIC_LINKING_ONLY; it has been in every release since 1.3.x and
 * works with the shared library, as the parameter is just a number passed
 * to ZSTD_CCtx_setParameter().
 *
 * Contexts: one ZSTD_CCtx per thread and level (the level is one of the
 * parameters set once), one ZSTD_DCtx per thread. ZSTD_compress2() is
 * one-shot and reuses the context's workspace, which libzstd sizes from the
 * input size: a thread that only compresses 4 KiB pages allocates nothing
 * after its first call, but one that alternates pages with 64 KiB clusters
 * sees libzstd resize that workspace now and then. Decompression is
 * explained at zstd_decompress().
 *
 * Dictionaries: a prepared dictionary is a ZSTD_CDict, made once for its
 * level, and a ZSTD_DDict, both read-only and shared by every thread. Each
 * call references one on the thread's context (ZSTD_CCtx_refCDict() is a
 * pointer store; NULL takes it off again), so the contexts stay one per
 * thread and level whether or not a dictionary is used. A buffer that
 * starts with zstd's dictionary magic must be a valid trained dictionary;
 * any other bytes are taken as raw content, as libzstd does.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "zcomp_backend.h"

static void zstd_cctx_destroy(void *ctx)
{
	ZSTD_freeCCtx(ctx);
}

static void *zstd_cctx_create(int level)
{
	static const int params[][2] = {
		{ ZSTD_c_format, ZSTD_f_zstd1_magicless },
		{ ZSTD_c_checksumFlag, 0 },
		{ ZSTD_c_dictIDFlag, 0 },
		{ ZSTD_c_contentSizeFlag, 0 },
	};
	ZSTD_CCtx *c = ZSTD_createCCtx();

	if (!c)
		return NULL;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel,
						level)))
		goto fail;
	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
		if (ZSTD_isError(ZSTD_CCtx_setParameter(c, params[i][0],
							params[i][1])))
			goto fail;
	return c;
fail:
	ZSTD_freeCCtx(c);
	return NULL;
}

static void zstd_dctx_destroy(void *ctx)
{
	ZSTD_freeDCtx(ctx);
}

static void *zstd_dctx_create(void)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();

	if (d && ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_format,
						     ZSTD_f_zstd1_magicless))) {
		ZSTD_freeDCtx(d);
		d = NULL;
	}
	return d;
}

struct zstd_dict {
	ZSTD_CDict *c;
	ZSTD_DDict *d;
};

static void zstd_dict_destroy(void *dict)
{
	struct zstd_dict *zd = dict;

	ZSTD_freeCDict(zd->c);
	ZSTD_freeDDict(zd->d);
	free(zd);
}

static int zstd_dict_create(int level, const void *buf, size_t len,
			    void **out)
{
	struct zstd_dict *zd = calloc(1, sizeof(*zd));
	bool trained = len >= 4 && ZSTD_getDictID_fromDict(buf, len) != 0;

	if (!zd)
		return -ENOMEM;
	zd->c = ZSTD_createCDict(buf, len, level);
	zd->d = ZSTD_createDDict(buf, len);
	if (!zd->c || !zd->d) {
		zstd_dict_destroy(zd);
		/* libzstd says no with NULL both for bad tables and no memory */
		return trained ? -EINVAL : -ENOMEM;
	}
	*out = zd;
	return 0;
}

static int zstd_compress(void *ctx, int level, const void *dict,
			 const void *src, size_t src_len, void *dst,
			 size_t dst_cap)
{
	const struct zstd_dict *zd = dict;
	size_t n;

	(void)level;
	/* a call that stopped half-way (dst too small) leaves a session open */
	if (ZSTD_isError(ZSTD_CCtx_reset(ctx, ZSTD_reset_session_only)) ||
	    ZSTD_isError(ZSTD_CCtx_refCDict(ctx, zd ? zd->c : NULL)))
		return -ENOMEM;
	n = ZSTD_compress2(ctx, dst, dst_cap, src, src_len);
	if (ZSTD_isError(n)) {
		if (ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
			return -ENOMEM;
		/* dstSize_tooSmall, or an input beyond zstd's limits. */
		return -E2BIG;
	}
	if (n > (size_t)0x7fffffff)
		return -E2BIG;
	return (int)n;
}

/*
 * Decode with the bufferless API (ZSTD_decompressBegin/_Continue) rather
 * than ZSTD_decompressDCtx(): the one-shot call loops over concatenated
 * frames, and in libzstd 1.5.4 that loop reads a 4-byte "skippable frame"
 * magic whenever at least one byte is left after a magicless frame, so 1 to
 * 3 trailing bytes make it read past src (valgrind shows it), and a frame
 * could even be mistaken for a skippable one (facebook/zstd#3594). Here the
 * library says how many bytes it needs next and we never hand it more than
 * src holds; one frame must use all of src and fill all of dst. The output
 * goes straight into dst, so nothing is allocated.
 */
static int zstd_decompress(void *ctx, const void *dict, const void *src,
			   size_t src_len, void *dst, size_t dst_len)
{
	const struct zstd_dict *zd = dict;
	const char *ip = src;
	char *op = dst;
	size_t want, n;

	if (ZSTD_isError(zd ? ZSTD_decompressBegin_usingDDict(ctx, zd->d)
			    : ZSTD_decompressBegin(ctx)))
		return -EIO;
	while ((want = ZSTD_nextSrcSizeToDecompress(ctx)) != 0) {
		if (want > src_len)
			return -EIO;
		n = ZSTD_decompressContinue(ctx, op, dst_len, ip, want);
		if (ZSTD_isError(n))
			return -EIO;
		ip += want;
		src_len -= want;
		op += n;
		dst_len -= n;
	}
	return src_len == 0 && dst_len == 0 ? 0 : -EIO;
}

const struct zcomp_backend zcomp_backend_zstd = {
	.name = "zstd",
	.default_level = ZSTD_CLEVEL_DEFAULT,
	.min_level = ZSTD_minCLevel,
	.max_level = ZSTD_maxCLevel,
	.cctx_per_level = true,
	.cctx_create = zstd_cctx_create,
	.cctx_destroy = zstd_cctx_destroy,
	.dctx_create = zstd_dctx_create,
	.dctx_destroy = zstd_dctx_destroy,
	.dict_create = zstd_dict_create,
	.dict_destroy = zstd_dict_destroy,
	.compress = zstd_compress,
	.decompress = zstd_decompress,
};
