// SPDX-License-Identifier: MIT
/*
 * writeback.c - moving clusters to the backing store (zram's writeback).
 *
 * Writeback walks the slot table (core.h's slot_next), largest objects
 * first when the run is bounded (zram's post-processing buckets: one walk
 * per size band, raw clusters first, then objects of 3/4, 1/2, 1/4, 1/8 of
 * a cluster and the rest), and gathers qualifying objects into batch
 * writes (wb_batch.c), a ring of up to WB_INFLIGHT writes in flight. The
 * walk stops at the first failed write, and the writes still in flight
 * are waited for and committed as they completed. A shared object (dedup)
 * is written once for all the clusters of the walk that name it.
 *
 * Lock rules: the caller of writeback_run() holds tier->wb_lock; at most one slot lock is held at a time, and none
 * across I/O.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "dedup/dedup.h"
#include "base/base.h"
#include "core/core.h"
#include "tier.h"
#include "tier_impl.h"
#include "zpool/zpool.h"

static bool wb_match(uint32_t f, const struct wb_params *p, uint32_t now)
{
	if ((p->flags & UZRAM_WB_INCOMPRESSIBLE) && !slot_prio(f))
		return false;
	return slot_selected(f, p->flags & (UZRAM_WB_HUGE |
					    UZRAM_WB_INCOMPRESSIBLE),
			     p->flags & UZRAM_WB_IDLE, p->min_age, now);
}

static bool wb_done(const struct batch *b, const struct wb_params *p)
{
	return (p->max_pages && b->pages + b->pending_pages >= p->max_pages) ||
	       (p->free_bytes && b->freed + b->pending_bytes >= p->free_bytes);
}

/*
 * Whether the walk takes slot s (flags f, locked shared), which names
 * object handle: yes, with *share 0 if it is not shared; if it is, the
 * entry of the object in the walk's map + 1, and *alias if an earlier slot
 * carries its bytes. No if the object is shared and its write failed, or
 * if there is no memory for the entry (it stays; a later walk takes it).
 */
static bool wb_share(struct batch *b, uint32_t f, uint32_t handle,
		     uint32_t size, uint32_t *share, bool *alias)
{
	*share = share_find(&b->map, handle);
	*alias = *share != 0;
	if (*alias)
		return b->map.e[*share - 1].state != SHARE_FAILED;
	if (!dedup_hold(b->dev, f, handle))
		return true;
	*share = share_add(&b->map, handle, f, size);
	if (!*share)
		dedup_put(b->dev, f, handle, size);
	return *share != 0;
}

/* One walk over band [lo, hi); stops early when done. */
static int wb_walk(struct batch *b, const struct wb_params *p, uint32_t lo,
		   uint32_t hi, uint32_t now)
{
	struct uzram *dev = b->dev;
	struct slot *s;
	int ret;

	for (uint64_t idx = p->first; (s = slot_next(dev, &idx)) &&
				      idx <= p->last; idx++) {
		uint32_t f, size, share, pages = (uint32_t)(cluster_len(dev, idx) >> PAGE_SHIFT);
		uint64_t val;
		bool alias;

		if (wb_done(b, p))
			return 0;
		if (!wb_match(slot_flags(s), p, now))
			continue;
		slot_lock_shared(s);
		f = slot_flags(s);
		size = slot_size(s);
		val = s->val;
		if (!wb_match(f, p, now) || size < lo || size >= hi ||
		    !wb_share(b, f, slot_handle(s), size, &share, &alias)) {
			slot_unlock_shared(s);
			continue;
		}
		if (!alias) {
			const void *obj = zpool_map(dev->pool, slot_handle(s));

			memcpy(b->stage, obj, size);
			zpool_unmap(dev->pool, obj);
		}
		slot_unlock_shared(s);
		if (!wb_limit_charge(dev->tier, pages))
			return 1;
		ret = alias ? batch_alias(b, s, f, val, size, pages, share) :
		      batch_add(b, s, f, val, size, pages, share);
		if (ret) {
			wb_limit_give(dev->tier, pages);
			return ret;
		}
	}
	return 0;
}

long writeback_run(struct uzram *dev, const struct wb_params *p)
{
	struct tier *t = dev->tier;
	uint32_t now = store_clock(dev), lo, hi;
	int nbands = p->max_pages || p->free_bytes ||
		     atomic_load(&t->wb_limit_on) ? PP_BANDS : 1;
	struct batch *b = batch_new(dev, false);
	int ret = 0, fret;
	long pages;

	if (!b)
		return -ENOMEM;
	for (int k = 0; k < nbands && !ret && !wb_done(b, p); k++) {
		pp_band(dev->csize, k, nbands, &lo, &hi);
		ret = wb_walk(b, p, lo, hi, now);
	}
	fret = batch_drain(b);
	share_map_release(b);
	if (ret >= 0 && fret)
		ret = fret;
	pages = (long)b->pages;
	batch_free(b);
	return ret < 0 ? ret : pages;
}


UZRAM_API long uzram_writeback(struct uzram *dev, unsigned flags,
			       uint64_t first_page, uint64_t last_page,
			       uint64_t max_pages)
{
	struct wb_params p = { .flags = flags, .max_pages = max_pages };
	long ret = tier_need(dev, "writeback");

	if (ret)
		return ret;
	if (flags & ~(UZRAM_WB_HUGE | UZRAM_WB_IDLE | UZRAM_WB_INCOMPRESSIBLE))
		return uzram_set_error(-EINVAL, "writeback: unknown flags %#x",
				       flags);
	if (first_page > last_page || first_page >= dev->size >> PAGE_SHIFT)
		return uzram_set_error(-EINVAL, "writeback: pages %llu-%llu are "
				       "not a range of the device's %llu",
				       (unsigned long long)first_page,
				       (unsigned long long)last_page,
				       (unsigned long long)(dev->size >> PAGE_SHIFT));
	p.first = (first_page << PAGE_SHIFT) >> dev->cshift;
	p.last = last_page >= dev->size >> PAGE_SHIFT ? dev->nclusters - 1 :
		 (last_page << PAGE_SHIFT) >> dev->cshift;
	pthread_mutex_lock(&dev->tier->wb_lock);
	ret = writeback_run(dev, &p);
	if (ret >= 0 && backing_needs_compaction(dev)) {
		long c = backing_compact_locked(dev, false);

		if (c < 0)
			ret = c;
	}
	pthread_mutex_unlock(&dev->tier->wb_lock);
	if (ret < 0)
		return uzram_set_error((int)ret, "writeback: %s",
				       ret == -ENOSPC ? "the backing store is full" :
				       ret == -EIO ? "a write to the backing store failed" :
				       uzram_strerror((int)ret));
	return ret;
}

UZRAM_API int uzram_set_writeback_limit(struct uzram *dev, int enable,
					uint64_t pages)
{
	int ret = tier_need(dev, "set_writeback_limit");

	if (ret)
		return ret;
	atomic_store(&dev->tier->wb_limit, pages);
	atomic_store(&dev->tier->wb_limit_on, enable != 0);
	return 0;
}
