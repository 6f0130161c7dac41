// SPDX-License-Identifier: MIT
/*
 * zcomp.c - the codec layer: pick a backend by name, and give every thread
 * its own compression and decompression contexts.
 *
 * A struct zcomp is only (backend, level) and is shared freely between
 * threads. The contexts live in a per-thread cache, created on first use:
 *
 *   thread-local `mine` -> struct zcomp_thread (one per thread, calloc'ed once)
 *     c[0..ZCOMP_CSLOTS-1]  compression contexts, most recently used first:
 *         { backend, level, ctx } ... { NULL }
 *     d[0..NR_BACKENDS-1]   decompression contexts, one per backend
 *
 * Compression contexts are keyed by (backend, level) because zstd and
 * libdeflate fix the level when the context is built; lz4hc's state serves
 * every level, so its key uses level 0. A thread rarely needs more than one
 * or two keys; if it uses more than ZCOMP_CSLOTS, the least recently used
 * context is freed (only this thread can be using it, so that is safe).
 *
 * Lifetime: the first call in a thread allocates struct zcomp_thread and
 * registers it with a pthread key whose destructor frees every context when
 * the thread exits. After that, a call does a short linear scan, no lock, no
 * allocation, no system call (libzstd may still resize its own workspace
 * when input sizes change; see backend_zstd.c). Nothing here is ever shared
 * between threads, so nothing needs a lock and decompression never waits.
 *
 * Codecs that need no context (lz4 both ways, lz4hc to decompress) skip
 * the cache entirely: lz4 decompression, the hot read path, is one indirect
 * call to LZ4_decompress_safe(). lz4 with a dictionary needs a working
 * stream to compress, and gets one from the same cache.
 *
 * A struct zcomp may carry a dictionary, prepared once by its backend
 * (zcomp_create_dict()) and then only read, by any thread: the contexts
 * stay keyed by (backend, level), and each call hands them the dictionary
 * (or none). Objects made with a dictionary decode only with it.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "zcomp.h"
#include "base/base.h"
#include "zcomp_backend.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The order here is the order zcomp_known() lists them in. */
static const struct zcomp_backend *const backends[] = {
	&zcomp_backend_lz4,
	&zcomp_backend_lz4hc,
	&zcomp_backend_zstd,
	&zcomp_backend_deflate,
};

#define NR_BACKENDS ARRAY_SIZE(backends)
#define ZCOMP_CSLOTS 8

struct zcomp {
	const struct zcomp_backend *b;
	unsigned int idx; /* index in backends[], for the d[] cache */
	int level;        /* effective level, never 0 unless min..max has 0 */
	int ckey;         /* level part of the compression-cache key */
	void *dict;       /* the backend's prepared dictionary, or NULL */
	size_t dict_len;
	unsigned char *dict_buf; /* its bytes, as given */
};

struct zcomp_cslot {
	const struct zcomp_backend *b; /* NULL: empty, and so are the next */
	int level;
	void *ctx;
};

struct zcomp_thread {
	struct zcomp_cslot c[ZCOMP_CSLOTS];
	void *d[NR_BACKENDS];
};

static _Thread_local struct zcomp_thread *mine;

static void thread_free(void *arg)
{
	struct zcomp_thread *t = arg;

	for (size_t i = 0; i < ZCOMP_CSLOTS && t->c[i].b; i++)
		t->c[i].b->cctx_destroy(t->c[i].ctx);
	for (size_t i = 0; i < NR_BACKENDS; i++)
		if (t->d[i])
			backends[i]->dctx_destroy(t->d[i]);
	free(t);
	mine = NULL;
}

static struct thread_cache ctx_cache = THREAD_CACHE_INIT(thread_free);

/* This thread's cache, made on first use. NULL when out of memory. */
static struct zcomp_thread *thread_get(void)
{
	struct zcomp_thread *t = mine;

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (thread_cache_set(&ctx_cache, t)) {
		free(t);
		return NULL;
	}
	mine = t;
	return t;
}

/* This thread's compression context for zc, made on first use. */
static void *cctx_get(const struct zcomp *zc)
{
	struct zcomp_thread *t = thread_get();
	struct zcomp_cslot s;
	size_t i;

	if (!t)
		return NULL;
	for (i = 0; i < ZCOMP_CSLOTS && t->c[i].b; i++) {
		if (t->c[i].b != zc->b || t->c[i].level != zc->ckey)
			continue;
		if (i == 0)
			return t->c[0].ctx;
		s = t->c[i];
		memmove(&t->c[1], &t->c[0], i * sizeof(s));
		t->c[0] = s;
		return s.ctx;
	}

	s.b = zc->b;
	s.level = zc->ckey;
	s.ctx = zc->b->cctx_create(zc->level);
	if (!s.ctx)
		return NULL;
	if (i == ZCOMP_CSLOTS) {
		i--;
		t->c[i].b->cctx_destroy(t->c[i].ctx);
	}
	memmove(&t->c[1], &t->c[0], i * sizeof(s));
	t->c[0] = s;
	return s.ctx;
}

/* This thread's decompression context for zc, made on first use. */
static void *dctx_get(const struct zcomp *zc)
{
	struct zcomp_thread *t = thread_get();

	if (!t)
		return NULL;
	if (!t->d[zc->idx])
		t->d[zc->idx] = zc->b->dctx_create();
	return t->d[zc->idx];
}

int zcomp_create(const char *name, int level, struct zcomp **out)
{
	return zcomp_create_dict(name, level, NULL, 0, out);
}

int zcomp_create_dict(const char *name, int level, const void *dict,
		      size_t dict_len, struct zcomp **out)
{
	const struct zcomp_backend *b = NULL;
	struct zcomp *zc;
	unsigned int idx;
	int ret;

	if (!name || !out || (dict_len && !dict))
		return -EINVAL;
	for (idx = 0; idx < NR_BACKENDS; idx++) {
		if (!strcmp(backends[idx]->name, name)) {
			b = backends[idx];
			break;
		}
	}
	if (!b)
		return -ENOENT;
	if (level == 0)
		level = b->default_level;
	if (level < b->min_level() || level > b->max_level())
		return -EINVAL;
	if (dict_len && !b->dict_create)
		return -EOPNOTSUPP;
	if (dict_len && (dict_len < ZCOMP_DICT_MIN || dict_len > ZCOMP_DICT_MAX))
		return -ERANGE;

	zc = calloc(1, sizeof(*zc));
	if (!zc)
		return -ENOMEM;
	zc->b = b;
	zc->idx = idx;
	zc->level = level;
	zc->ckey = b->cctx_per_level ? level : 0;
	if (dict_len) {
		zc->dict_buf = malloc(dict_len);
		if (!zc->dict_buf) {
			zcomp_destroy(zc);
			return -ENOMEM;
		}
		memcpy(zc->dict_buf, dict, dict_len);
		zc->dict_len = dict_len;
		ret = b->dict_create(level, dict, dict_len, &zc->dict);
		if (ret) {
			zcomp_destroy(zc);
			return ret;
		}
	}
	*out = zc;
	return 0;
}

void zcomp_destroy(struct zcomp *zc)
{
	if (!zc)
		return;
	if (zc->dict)
		zc->b->dict_destroy(zc->dict);
	free(zc->dict_buf);
	free(zc);
}

const void *zcomp_dict(const struct zcomp *zc, size_t *len)
{
	*len = zc->dict_len;
	return zc->dict_buf;
}

const char *zcomp_name(const struct zcomp *zc)
{
	return zc->b->name;
}

int zcomp_level(const struct zcomp *zc)
{
	return zc->level;
}

int zcomp_compress(const struct zcomp *zc, const void *src, size_t src_len,
		   void *dst, size_t dst_cap)
{
	void *ctx = NULL;

	assert(zc && src && dst);
	if (zc->b->cctx_create && (zc->dict || !zc->b->cctx_dict_only)) {
		ctx = cctx_get(zc);
		if (!ctx)
			return -ENOMEM;
	}
	return zc->b->compress(ctx, zc->level, zc->dict, src, src_len, dst,
			       dst_cap);
}

int zcomp_prepare(const struct zcomp *zc, void *buf, size_t len, void *tmp,
		  size_t cap)
{
	int n = zcomp_compress(zc, buf, len, tmp, cap);

	if (n > 0)
		return zcomp_decompress(zc, tmp, (size_t)n, buf, len);
	if (n != -E2BIG)
		return n;
	/* nothing to decode, but the context all the same */
	return zc->b->dctx_create && !dctx_get(zc) ? -ENOMEM : 0;
}

int zcomp_decompress(const struct zcomp *zc, const void *src, size_t src_len,
		     void *dst, size_t dst_len)
{
	void *ctx = NULL;

	assert(zc && src && dst);
	if (zc->b->dctx_create) {
		ctx = dctx_get(zc);
		if (!ctx)
			return -ENOMEM;
	}
	return zc->b->decompress(ctx, zc->dict, src, src_len, dst, dst_len);
}

int zcomp_decompress_prefix(const struct zcomp *zc, const void *src,
			    size_t src_len, void *dst, size_t want,
			    size_t dst_len)
{
	void *ctx = NULL;

	assert(zc && src && dst && want <= dst_len);
	if (!zc->b->decompress_prefix || want == dst_len)
		return zcomp_decompress(zc, src, src_len, dst, dst_len);
	if (zc->b->dctx_create) {
		ctx = dctx_get(zc);
		if (!ctx)
			return -ENOMEM;
	}
	return zc->b->decompress_prefix(ctx, zc->dict, src, src_len, dst, want,
					dst_len);
}

static char known[64];

static void known_init(void)
{
	size_t n = 0;

	for (size_t i = 0; i < NR_BACKENDS; i++) {
		size_t len = strlen(backends[i]->name);

		assert(n + len + 2 <= sizeof(known));
		if (i)
			known[n++] = ' ';
		memcpy(known + n, backends[i]->name, len);
		n += len;
	}
	known[n] = '\0';
}

int zcomp_level_range(const char *name, int *min, int *max)
{
	for (size_t i = 0; i < NR_BACKENDS; i++)
		if (!strcmp(backends[i]->name, name)) {
			*min = backends[i]->min_level();
			*max = backends[i]->max_level();
			return 0;
		}
	return -ENOENT;
}

const char *zcomp_known(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, known_init);
	return known;
}

/* Explain a zcomp_create_dict() failure for `what`; returns err. */
int codec_error(const char *what, const char *algorithm, int level,
		size_t dict_size, int err)
{
	int min, max;

	switch (err) {
	case -ENOENT:
		return uzram_set_error(err, "%s: unknown algorithm '%s' "
				       "(known: %s)", what, algorithm,
				       zcomp_known());
	case -EINVAL:
		if (zcomp_level_range(algorithm, &min, &max) == 0 &&
		    level != 0 && (level < min || level > max))
			return min == max ?
				uzram_set_error(err, "%s: level %d: %s has one "
						"level, %d (or 0, its default)",
						what, level, algorithm, min) :
				uzram_set_error(err, "%s: level %d is outside "
						"%s's levels, %d to %d (or 0, "
						"its default)", what, level,
						algorithm, min, max);
		return uzram_set_error(err, "%s: %s at level %d: %s", what,
				       algorithm, level, dict_size ?
				       "the dictionary is not one the codec "
				       "accepts" : "the codec refused it");
	case -EOPNOTSUPP:
		return uzram_set_error(err, "%s: %s takes no dictionary (lz4 "
				       "and zstd do)", what, algorithm);
	case -ERANGE:   /* zcomp's word for a size out of range */
		return uzram_set_error(-EINVAL, "%s: a dictionary of %zu bytes "
				       "is outside %u..%u bytes", what,
				       dict_size, ZCOMP_DICT_MIN, ZCOMP_DICT_MAX);
	default:
		return uzram_set_error(err, "%s: %s at level %d: %s", what,
				       algorithm, level, uzram_strerror(err));
	}
}
