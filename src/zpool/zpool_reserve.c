// SPDX-License-Identifier: MIT
/*
 * zpool_reserve.c - a reserve of resident frames, for a device whose
 * stores must not wait for the kernel (swap: see uzram_reserve()).
 *
 * The reserve is frames populated here and pushed on the cache's stacks,
 * and a floor under the cache's cap (zp_cache_cap()) so that frees never
 * trim the cache below it. A store takes a cached frame (zp_frame_get()):
 * one of its own zspage length without a system call; a longer one keeps
 * the rest as slack. Which lengths the data will need is not known here,
 * so every zspage length the size classes use gets an equal share of the
 * pages: the reserve serves the data in full only when its classes spread
 * like that, and past a length's share its stores allocate as without a
 * reserve (doc/block-device.md says so).
 *
 * Frames are all taken before any is given to the cache, or a take would
 * pop the frame just given back.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "zpool_impl.h"

/* Which zspage lengths the size classes use: used[p] for p pages. */
static unsigned lengths_used(const struct zpool *pool, bool used[ZP_MAX_PAGES + 1])
{
	unsigned n = 0;

	memset(used, 0, (ZP_MAX_PAGES + 1) * sizeof(used[0]));
	for (unsigned i = 0; i < pool->nclasses; i++) {
		uint32_t p = pool->classes[i].pages;

		if (p && p <= ZP_MAX_PAGES && !used[p]) {
			used[p] = true;
			n++;
		}
	}
	return n;
}

int zpool_reserve(struct zpool *pool, uint64_t bytes)
{
	uint64_t want = bytes >> PAGE_SHIFT, have, share, made = 0;
	uint32_t *fr, res;
	uint8_t *len;
	bool used[ZP_MAX_PAGES + 1];
	uint64_t n = 0, max;
	unsigned nlen;
	int err = 0;

	atomic_store_explicit(&pool->reserve_pages, want, memory_order_relaxed);
	have = atomic_load_explicit(&pool->cache_pages, memory_order_relaxed);
	if (want <= have)
		return 0;
	nlen = lengths_used(pool, used);
	if (!nlen)
		return 0;
	share = (want - have) / nlen + 1;
	max = (want - have) + nlen;
	fr = malloc((size_t)max * sizeof(*fr));
	len = malloc((size_t)max);
	if (!fr || !len) {
		free(fr);
		free(len);
		return -ENOMEM;
	}
	/* each length in use gets an equal share of the pages */
	for (uint32_t p = 1; p <= ZP_MAX_PAGES && !err; p++) {
		if (!used[p])
			continue;
		for (uint64_t got = 0; got < share && !err; got += p) {
			err = zp_frame_get(pool, p, &fr[n], &res);
			if (err)
				break;
			len[n++] = (uint8_t)res;
			made += res;
		}
	}
	for (uint64_t i = 0; i < n; i++)
		zp_frame_give(pool, fr[i], len[i], len[i]);
	free(fr);
	free(len);
	if (err)
		atomic_store_explicit(&pool->reserve_pages, have + made,
				      memory_order_relaxed);
	return err;
}

uint64_t zpool_reserved(const struct zpool *pool)
{
	return atomic_load_explicit(&pool->reserve_pages,
				    memory_order_relaxed) << PAGE_SHIFT;
}
