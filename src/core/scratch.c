// SPDX-License-Identifier: MIT
/*
 * scratch.c - the store's per-thread buffers (store_scratch_get(),
 * core.h), which the store, the save, dedup and recompression share: one
 * compressed and one plain buffer of a cluster each, grown when a device
 * with bigger clusters asks, and freed when the thread exits.
 */
#include <stdlib.h>

#include "core.h"

static _Thread_local struct store_scratch *mine;

static void scratch_free(void *p)
{
	free(p);
}

static struct thread_cache scratch_cache = THREAD_CACHE_INIT(scratch_free);

struct store_scratch *store_scratch_get(size_t cap)
{
	struct store_scratch *t = mine, *old = t;
	size_t head = (sizeof *t + 63) & ~(size_t)63;

	if (__builtin_expect(t != NULL && t->cap >= cap, 1))
		return t;
	t = aligned_alloc(64, head + 2 * cap);
	if (!t)
		return NULL;
	if (thread_cache_set(&scratch_cache, t)) {
		free(t);
		return NULL;
	}
	t->cap = cap;
	t->cbuf = (unsigned char *)t + head;
	t->plain = t->cbuf + cap;
	mine = t;
	free(old);
	return t;
}
