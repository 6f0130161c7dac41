// SPDX-License-Identifier: MIT
/*
 * scratch.c - the store's per-thread buffers (store_scratch_get(),
 * core.h), which the store, the save, dedup and recompression share: one
 * compressed and one plain buffer of a cluster each, grown when a device
 * with bigger clusters asks, and freed when the thread exits. And
 * store_thread_prepare(): a thread's buffers and codec contexts made
 * before its first request (uzram_thread_prepare()).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "core.h"
#include "zcomp/zcomp.h"

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

/*
 * A cluster that exercises a codec as a page of memory does: text-like
 * bytes that compress, then noise that does not (so the codec's literal
 * and match buffers both see use).
 */
static void page_like(unsigned char *p, size_t len)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < len / 2; i++)
		p[i] = (unsigned char)("swap page "[i % 10] + (i >> 9));
	for (size_t i = len / 2; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

int store_thread_prepare(struct uzram *dev)
{
	struct store_scratch *t = store_scratch_get(dev->csize);
	int r;

	if (!t)
		return -ENOMEM;
	for (unsigned prio = 0; prio <= UZRAM_MAX_RECOMP; prio++) {
		for (unsigned bank = 0; bank < 2; bank++) {
			/* a codec once set stays until close (retired list) */
			const struct zcomp *zc = atomic_load_explicit(
				&dev->comp[prio][bank], memory_order_acquire);

			if (!zc)
				continue;
			page_like(t->plain, dev->csize);
			r = zcomp_prepare(zc, t->plain, dev->csize, t->cbuf,
					  dev->csize);
			if (r)
				return r;
		}
	}
	return 0;
}
