/* SPDX-License-Identifier: MIT */
/*
 * zcomp.h - the codec layer: one compressor/decompressor selected by name,
 * with contexts that belong to the calling thread.
 *
 * The store never sees a codec library. It asks zcomp to turn a cluster
 * (one page or several) into bytes and back. Each backend lives in its
 * own backend_<name>.c and registers one struct zcomp_backend in the table in
 * zcomp.c: adding a codec is adding one file and one table entry.
 *
 * Contexts: compression and decompression contexts are created lazily, once
 * per thread and per (backend, level), and kept in thread-local storage until
 * the thread exits. No call here takes a lock or allocates on the steady
 * state path; the first call in a thread may allocate its context.
 */
#ifndef UZRAM_ZCOMP_H
#define UZRAM_ZCOMP_H

#include <stddef.h>

struct zcomp;

/*
 * Select the codec `name` at `level` (0: the codec's default).
 * Returns 0 and stores the handle in *out, or:
 *   -ENOENT  unknown name (zcomp_known() lists the known ones);
 *   -EINVAL  level out of the codec's range;
 *   -ENOMEM.
 */
int zcomp_create(const char *name, int level, struct zcomp **out);

/*
 * The same with a dictionary of dict_len bytes (copied), for codecs that
 * take one (lz4 and zstd; lz4 uses the last 64 KiB). dict_len 0 is
 * zcomp_create(). Errors as zcomp_create(), and:
 *   -EOPNOTSUPP  the codec takes no dictionary;
 *   -ERANGE      dict_len is outside ZCOMP_DICT_MIN..ZCOMP_DICT_MAX;
 *   -EINVAL      the bytes are a zstd dictionary that libzstd refuses.
 */
#define ZCOMP_DICT_MIN 256
#define ZCOMP_DICT_MAX (1u << 20)
int zcomp_create_dict(const char *name, int level, const void *dict,
		      size_t dict_len, struct zcomp **out);

/* The dictionary's bytes and length (*len 0 and NULL: none). */
const void *zcomp_dict(const struct zcomp *zc, size_t *len);
void zcomp_destroy(struct zcomp *zc);            /* NULL is accepted */
const char *zcomp_name(const struct zcomp *zc);
int zcomp_level(const struct zcomp *zc);         /* the effective level */

/*
 * Compress src_len bytes into dst, which holds dst_cap bytes.
 * Returns the compressed length (> 0), or:
 *   -E2BIG   the output would not fit in dst_cap (the data does not
 *            compress well enough: the caller stores it raw);
 *   -ENOMEM  this thread's context could not be created.
 * Thread-safe; uses the calling thread's context.
 */
int zcomp_compress(const struct zcomp *zc, const void *src, size_t src_len,
		   void *dst, size_t dst_cap);

/*
 * Decompress src_len bytes from src into exactly dst_len bytes at dst.
 * Never reads outside src or writes outside dst, whatever src holds.
 * Returns 0, or:
 *   -EIO     src is corrupt or does not decode to exactly dst_len bytes;
 *   -ENOMEM  this thread's context could not be created.
 * Thread-safe; never waits for another thread.
 */
int zcomp_decompress(const struct zcomp *zc, const void *src, size_t src_len,
		     void *dst, size_t dst_len);

/*
 * Like zcomp_decompress(), but only the first `want` bytes of dst need to
 * be right: codecs that decode in order (lz4, lz4hc) stop there, the others
 * decode all dst_len bytes. Returns 0, -EIO or -ENOMEM; a corrupt stream
 * may go unnoticed when the damage lies past `want`.
 */
int zcomp_decompress_prefix(const struct zcomp *zc, const void *src,
			    size_t src_len, void *dst, size_t want,
			    size_t dst_len);

/*
 * Make this thread's contexts for zc now, as its first zcomp_compress()
 * and zcomp_decompress() would (a context's work space included, which
 * some codecs size at the first call): compress len bytes of buf into tmp
 * (cap bytes), then decode them back into buf. 0, or -ENOMEM, or -EIO
 * (the codec failed to decode its own output).
 */
int zcomp_prepare(const struct zcomp *zc, void *buf, size_t len, void *tmp,
		  size_t cap);

/* Known codec names separated by single spaces: "lz4 lz4hc zstd deflate". */
const char *zcomp_known(void);

/* The levels codec name accepts, min..max (0, the default, as well); 0 or
 * -ENOENT. */
int zcomp_level_range(const char *name, int *min, int *max);

/* zcomp.c, for the callers of zcomp_create_dict(): */
/*
 * Record why zcomp_create_dict() (or zcomp_create()) failed with err for
 * `what` (the call's name), on algorithm at level with a dictionary of
 * dict_size bytes (0: none); returns the errno the caller should return.
 */
int codec_error(const char *what, const char *algorithm, int level,
		size_t dict_size, int err);

#endif
