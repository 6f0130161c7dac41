/*
 * writeback.c - moving clusters to the backing store (zram's writeback)
 * and compacting the backing store.
 *
 * Writeback walks the page table (core.h's slot_next), largest objects
 * first when the run is bounded (zram's post-processing buckets: one walk
 * per size band, raw clusters first, then objects of 3/4, 1/2, 1/4, 1/8 of
 * a cluster and the rest), and gathers qualifying objects into batch
 * writes (wb_batch.c), a ring of up to WB_INFLIGHT writes in flight. The
 * walk stops at the first failed write, and the writes still in flight
 * are waited for and committed as they completed. A shared object (dedup)
 * is written once for all the clusters of the walk that name it.
 *
 * Compaction takes segments at most half live (those below 3/4 when asked
 * by hand), marks them CLEAN (tier.h), finds their live objects by one walk
 * of the table, copies each through the same batch to head 0 and switches
 * the slot if it still names the old place; a shared place moves once.
 * Afterwards every segment but the heads is at least half live, so the
 * backing store holds at most about twice the live compressed bytes plus
 * two segments; writeback runs it by itself when the store passes that.
 *
 * Lock rules: the caller of writeback_run() and backing_compact_locked()
 * holds tier->wb_lock; at most one slot lock is held at a time, and none
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

#define MAX_VICTIMS 32

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
		if (!wb_limit_take(dev->tier, pages))
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

/* Victims: FULL segments live at most max bytes, made CLEAN. */
static unsigned pick_victims(struct space *sp, uint32_t max, uint64_t *v)
{
	unsigned n = 0;

	pthread_mutex_lock(&sp->lock);
	for (uint64_t i = 0; i < sp->nsegs && n < MAX_VICTIMS; i++) {
		if (sp->state[i] == SEG_FULL && sp->live[i] <= max) {
			sp->state[i] = SEG_CLEAN;
			v[n++] = i;
		}
	}
	pthread_mutex_unlock(&sp->lock);
	return n;
}

static void release_victims(struct tier *t, const uint64_t *v, unsigned n)
{
	struct space *sp = &t->sp;

	pthread_mutex_lock(&sp->lock);
	for (unsigned i = 0; i < n; i++) {
		sp->state[v[i]] = SEG_FULL;
		if (!sp->live[v[i]]) {
			backing_discard(t->b, SEG_BYTES, v[i] << SEG_SHIFT);
			sp->state[v[i]] = SEG_FREE;
			sp->used--;
		}
	}
	pthread_mutex_unlock(&sp->lock);
}

static bool is_victim(const uint64_t *v, unsigned n, uint64_t seg)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == seg)
			return true;
	return false;
}

/* Move the live objects of the victims; 0 or a negative errno. */
static int move_victims(struct batch *b, const uint64_t *v, unsigned nv)
{
	struct uzram *dev = b->dev;
	struct slot *s;
	int ret = 0, fret;

	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		uint32_t f, size, share = 0;
		uint64_t val;

		if (slot_state(s) != SLOT_BACKED)
			continue;
		slot_lock_shared(s);
		f = slot_flags(s);
		val = s->val;
		size = backed_size(val);
		slot_unlock_shared(s);
		if ((f & SLOT_STATE_MASK) != SLOT_BACKED ||
		    !is_victim(v, nv, backed_off(val) >> SEG_SHIFT) ||
		    size > dev->csize)
			continue;
		/* a shared place: one copy, which its slots follow */
		if (f & SLOT_SHARED) {
			share = share_find(&b->map, backed_off(val));
			if (share) {
				ret = batch_alias(b, s, f, val, size, 0, share);
				if (ret)
					break;
				continue;
			}
			share = share_add(&b->map, backed_off(val), f, size);
			if (!share)
				continue;
		}
		/* a CLEAN segment is not reused: the bytes stay even if the
		 * slot lets go of them now */
		ret = backing_pread(dev->tier->b, b->stage, size,
				    backed_off(val));
		if (ret) {
			stats_inc(&dev->stats.bd_failed_reads);
			break;
		}
		ret = batch_add(b, s, f, val, size, 0, share);
		if (ret)
			break;
	}
	fret = batch_drain(b);
	share_map_release(b);
	return ret ? ret : fret;
}

long backing_compact_locked(struct uzram *dev, bool all)
{
	struct tier *t = dev->tier;
	uint64_t v[MAX_VICTIMS], before = space_used(&t->sp), after;
	struct batch *b = batch_new(dev, true);
	unsigned nv;
	int ret = 0;

	if (!b)
		return -ENOMEM;
	/* until nothing qualifies, or a pass frees nothing (objects that
	 * cannot move: corrupt slots, failing reads) */
	for (uint64_t used = before, prev = UINT64_MAX; !ret && used < prev;
	     prev = used, used = space_used(&t->sp)) {
		nv = pick_victims(&t->sp, all ? SEG_BYTES * 3 / 4 : SEG_BYTES / 2,
				  v);
		if (!nv)
			break;
		ret = move_victims(b, v, nv);
		release_victims(t, v, nv);
	}
	batch_free(b);
	after = space_used(&t->sp);
	if (ret)
		return ret;
	return before > after ? (long)(before - after) : 0;
}

bool backing_needs_compaction(struct uzram *dev)
{
	int64_t live = atomic_load(&dev->stats.bd_bytes) -
		       atomic_load(&dev->stats.bd_dedup_bytes);

	return space_used(&dev->tier->sp) >
	       2 * (uint64_t)(live > 0 ? live : 0) + 4 * SEG_BYTES;
}

/* 0 if dev has a tier; else the error for the call named what. */
static int need_tier(struct uzram *dev, const char *what)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "%s: NULL device", what);
	if (!dev->tier)
		return uzram_set_error(-ENODEV, "%s: the device has no backing "
				       "store", what);
	return 0;
}

UZRAM_API long uzram_writeback(struct uzram *dev, unsigned flags,
			       uint64_t first_page, uint64_t last_page,
			       uint64_t max_pages)
{
	struct wb_params p = { .flags = flags, .max_pages = max_pages };
	long ret = need_tier(dev, "writeback");

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
	int ret = need_tier(dev, "set_writeback_limit");

	if (ret)
		return ret;
	atomic_store(&dev->tier->wb_limit, pages);
	atomic_store(&dev->tier->wb_limit_on, enable != 0);
	return 0;
}

UZRAM_API long uzram_backing_compact(struct uzram *dev)
{
	long ret = need_tier(dev, "backing_compact");

	if (ret)
		return ret;
	pthread_mutex_lock(&dev->tier->wb_lock);
	ret = backing_compact_locked(dev, true);
	pthread_mutex_unlock(&dev->tier->wb_lock);
	if (ret < 0)
		return uzram_set_error((int)ret, "backing_compact: %s",
				       uzram_strerror((int)ret));
	return ret;
}
