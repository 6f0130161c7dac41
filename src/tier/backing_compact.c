// SPDX-License-Identifier: MIT
/*
 * backing_compact.c - the backing store's compaction (uzram_backing_compact(),
 * and writeback's when the store holds too much dead space). Not the
 * allocator's compaction (zpool/zpool_compact.c): this one moves objects
 * between segments of the backing store.
 *
 * It takes segments at most half live (those below 3/4 when asked
 * by hand), marks them CLEAN (tier.h), finds their live objects by one walk
 * of the table, copies each through the same batch to head 0 and switches
 * the slot if it still names the old place; a shared place moves once.
 * Afterwards every segment but the heads is at least half live, so the
 * backing store holds at most about twice the live compressed bytes plus
 * two segments; writeback runs it by itself when the store passes that.
 *
 * Lock rules: the caller of backing_compact_locked() holds tier->wb_lock;
 * at most one slot lock is held at a time, and none across I/O.
 */
#include <errno.h>
#include <stdlib.h>

#include "uzram.h"
#include "base/base.h"
#include "core/core.h"
#include "tier.h"
#include "tier_impl.h"

#define MAX_VICTIMS 32

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

UZRAM_API long uzram_backing_compact(struct uzram *dev)
{
	long ret = tier_need(dev, "backing_compact");

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
