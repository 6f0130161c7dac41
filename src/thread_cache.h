/*
 * thread_cache.h - per-thread caches: an object a thread makes on its
 * first call that needs it, keeps for its later calls, and frees when it
 * exits.
 *
 * The owner keeps the fast path, a _Thread_local pointer it reads before
 * anything else; this helper is the slow path that the pointer's first
 * setting takes: it creates the pthread key once (any thread, any time)
 * and registers the object, so that the key's destructor frees it when
 * the thread exits. Used by zcomp.c (codec contexts) and thread_cache.c
 * (the store's buffers, store_tls_get()).
 */
#ifndef UZRAM_THREAD_CACHE_H
#define UZRAM_THREAD_CACHE_H

#include <pthread.h>
#include <stdatomic.h>

struct tls_cache {
	void (*destroy)(void *obj);     /* frees an object at thread exit */
	_Atomic int ready;              /* key made, or err set */
	int err;                        /* pthread_key_create()'s error */
	pthread_key_t key;
};

#define TLS_CACHE_INIT(destroy_fn) { .destroy = (destroy_fn) }

/*
 * Register obj as the calling thread's object of cache c, replacing the
 * one registered before (which the caller frees, if it wants to). Returns
 * 0, or a positive error number (from pthread) and registers nothing.
 */
int tls_cache_set(struct tls_cache *c, void *obj);

#endif
