/*
 * thread_cache.c - per-thread caches (thread_cache.h): the key that frees
 * a thread's object when the thread exits, made on first use; and the
 * store's per-thread buffers (store_tls_get(), store.h), which store.c,
 * image_save.c and recompress.c share.
 */
#include <stdlib.h>

#include "store.h"
#include "thread_cache.h"

/* Serializes key creation, which happens once per cache per process. */
static pthread_mutex_t tls_lock = PTHREAD_MUTEX_INITIALIZER;

int tls_cache_set(struct tls_cache *c, void *obj)
{
	if (!atomic_load_explicit(&c->ready, memory_order_acquire)) {
		pthread_mutex_lock(&tls_lock);
		if (!atomic_load_explicit(&c->ready, memory_order_relaxed)) {
			c->err = pthread_key_create(&c->key, c->destroy);
			atomic_store_explicit(&c->ready, 1,
					      memory_order_release);
		}
		pthread_mutex_unlock(&tls_lock);
	}
	if (c->err)
		return c->err;
	return pthread_setspecific(c->key, obj);
}

static _Thread_local struct store_tls *tls;

static void tls_free(void *p)
{
	free(p);
}

static struct tls_cache tls_cache = TLS_CACHE_INIT(tls_free);

struct store_tls *store_tls_get(size_t cap)
{
	struct store_tls *t = tls, *old = t;
	size_t head = (sizeof *t + 63) & ~(size_t)63;

	if (__builtin_expect(t != NULL && t->cap >= cap, 1))
		return t;
	t = aligned_alloc(64, head + 2 * cap);
	if (!t)
		return NULL;
	if (tls_cache_set(&tls_cache, t)) {
		free(t);
		return NULL;
	}
	t->cap = cap;
	t->cbuf = (unsigned char *)t + head;
	t->plain = t->cbuf + cap;
	tls = t;
	free(old);
	return t;
}
