/* SPDX-License-Identifier: MIT */
/*
 * zcomp_backend.h - what one codec provides to the codec layer (zcomp.c).
 *
 * Private to zcomp.c and the backend_<name>.c files of src/zcomp/. A
 * backend is a table of functions over one compression library; it holds
 * no state of its own. zcomp.c owns the contexts: it creates them lazily, once per thread
 * and per (backend, level), keeps them in thread-local storage and destroys
 * them when the thread exits. A backend therefore never locks anything, and
 * its compress/decompress functions must not allocate once the context
 * exists.
 *
 * To add a codec: write backend_<name>.c defining one
 * `const struct zcomp_backend zcomp_backend_<name>` and add it to the
 * backends[] table in zcomp.c.
 */
#ifndef UZRAM_ZCOMP_BACKEND_H
#define UZRAM_ZCOMP_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

struct zcomp_backend {
	const char *name;

	/*
	 * Accepted levels are min_level()..max_level() (functions because
	 * zstd only knows its range at run time); 0 always selects
	 * default_level, which must lie inside that range.
	 */
	int default_level;
	int (*min_level)(void);
	int (*max_level)(void);

	/*
	 * true if a compression context is bound to one level (zstd and
	 * libdeflate set the level when they build it); false if one context
	 * serves every level (lz4hc), so a thread keeps only one.
	 */
	bool cctx_per_level;

	/*
	 * Per-thread contexts. A NULL create means the codec needs none and
	 * compress/decompress get ctx == NULL. create returns NULL only when
	 * out of memory; destroy accepts what create returned.
	 */
	void *(*cctx_create)(int level);
	void (*cctx_destroy)(void *ctx);
	void *(*dctx_create)(void);
	void (*dctx_destroy)(void *ctx);

	/*
	 * Optional (NULL: the codec takes no dictionary). Prepare len bytes of
	 * dictionary for compressing at `level` and for decoding, into *out:
	 * read-only once made, shared by every thread, and passed to compress
	 * and decompress as `dict`. Returns 0, -EINVAL (the bytes are not a
	 * dictionary the codec accepts) or -ENOMEM.
	 */
	int (*dict_create)(int level, const void *buf, size_t len, void **out);
	void (*dict_destroy)(void *dict);
	/* true if compression needs a context only with a dictionary (lz4) */
	bool cctx_dict_only;

	/*
	 * Returns the compressed length (> 0), or -E2BIG when the output does
	 * not fit in dst_cap (or the input is beyond what the codec takes),
	 * or -ENOMEM. dict is NULL or what dict_create made.
	 */
	int (*compress)(void *ctx, int level, const void *dict, const void *src,
			size_t src_len, void *dst, size_t dst_cap);

	/*
	 * Returns 0 only if src decodes to exactly dst_len bytes; -EIO for
	 * anything else (a dictionary other than the one the stream was made
	 * with decodes to wrong bytes or fails). Must stay inside src and dst
	 * whatever src holds.
	 */
	int (*decompress)(void *ctx, const void *dict, const void *src,
			  size_t src_len, void *dst, size_t dst_len);

	/*
	 * Optional (NULL: zcomp decodes whole). Decode at least the first
	 * `want` bytes of a stream of dst_len bytes and stop as soon as it
	 * can. Returns 0, or -EIO if the first `want` bytes cannot be decoded.
	 * Must stay inside src and dst whatever src holds.
	 */
	int (*decompress_prefix)(void *ctx, const void *dict, const void *src,
				 size_t src_len, void *dst, size_t want,
				 size_t dst_len);
};

extern const struct zcomp_backend zcomp_backend_lz4;
/* LZ4 block decoding, shared by lz4 and lz4hc (whose output is plain LZ4). */
int zcomp_lz4_decompress(void *ctx, const void *dict, const void *src,
			 size_t src_len, void *dst, size_t dst_len);
int zcomp_lz4_decompress_prefix(void *ctx, const void *dict, const void *src,
				size_t src_len, void *dst, size_t want,
				size_t dst_len);
extern const struct zcomp_backend zcomp_backend_lz4hc;
extern const struct zcomp_backend zcomp_backend_zstd;
extern const struct zcomp_backend zcomp_backend_deflate;

#endif
