/*
 * zpool_reserve.c - a reserve of resident frames, for a device whose
 * stores must not wait for the kernel (swap: see uzram_reserve()).
 *
 * The reserve is frames of ZP_MAX_PAGES pages, populated here and pushed
 * on the cache's fullest stack, and a floor under the cache's cap
 * (zp_cache_cap()) so that frees never trim the cache below it. A store
 * takes a cached frame (zp_frame_take()); a zspage shorter than the
 * frame keeps the rest as slack, which compaction and zp_frame_shrink()
 * give back, so a reserve serves best with the process's memory locked
 * (mlockall), where those releases leave the pages resident.
 *
 * Frames are all taken before any is given to the cache, or a take would
 * pop the frame just given back.
 */
#include <errno.h>
#include <stdlib.h>

#include "zpool_impl.h"

int zpool_reserve(struct zpool *pool, uint64_t bytes)
{
	const uint64_t frame = (uint64_t)ZP_MAX_PAGES << PAGE_SHIFT;
	uint64_t want = (bytes + frame - 1) / frame;
	uint64_t have = atomic_load_explicit(&pool->cache_pages,
					     memory_order_relaxed) / ZP_MAX_PAGES;
	uint32_t *fr, res;
	uint64_t n = 0;
	int err = 0;

	atomic_store_explicit(&pool->reserve_pages, bytes >> PAGE_SHIFT,
			      memory_order_relaxed);
	if (want <= have)
		return 0;
	fr = malloc((size_t)(want - have) * sizeof(*fr));
	if (!fr)
		return -ENOMEM;
	while (n < want - have) {
		err = zp_frame_take(pool, ZP_MAX_PAGES, &fr[n], &res);
		if (err)
			break;
		n++;
	}
	for (uint64_t i = 0; i < n; i++)
		zp_frame_give(pool, fr[i], ZP_MAX_PAGES, ZP_MAX_PAGES);
	free(fr);
	if (err)
		atomic_store_explicit(&pool->reserve_pages,
				      (have + n) * ZP_MAX_PAGES,
				      memory_order_relaxed);
	return err;
}
