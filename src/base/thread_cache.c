// SPDX-License-Identifier: MIT
/*
 * thread_cache.c - per-thread caches (base.h): the key that frees a
 * thread's object when the thread exits, made on first use.
 */
#include "base.h"

/* Serializes key creation, which happens once per cache per process. */
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;

int thread_cache_set(struct thread_cache *c, void *obj)
{
	if (!atomic_load_explicit(&c->ready, memory_order_acquire)) {
		pthread_mutex_lock(&key_lock);
		if (!atomic_load_explicit(&c->ready, memory_order_relaxed)) {
			c->err = pthread_key_create(&c->key, c->destroy);
			atomic_store_explicit(&c->ready, 1,
					      memory_order_release);
		}
		pthread_mutex_unlock(&key_lock);
	}
	if (c->err)
		return c->err;
	return pthread_setspecific(c->key, obj);
}
