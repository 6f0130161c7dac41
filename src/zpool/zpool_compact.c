// SPDX-License-Identifier: MIT
/*
 * zpool_compact.c - compaction: moving objects out of sparse zspages so
 * that they can be emptied, and borrowing between classes.
 *
 * Compaction of a class takes its sparsest zspage as source and the fullest
 * other non-full zspage as destination, waits a bounded time for the
 * source to have no pins, copies each live object into the destination and
 * publishes the new offset with a release store, while readers go on
 * reading the old spots. Then it waits, again a bounded time (so a thread
 * that holds a mapping while it frees cannot deadlock), for the readers of
 * the old spots to unpin, and retires the source once it is empty; its
 * frame goes to the cache of resident frames (zpool_frame.c), where the
 * next zspage of any class finds it. A source whose readers stay goes to
 * the class's draining list instead, and the next compaction of the class
 * that finds it unpinned retires it (or regroups it, if the destinations
 * ran out before it was empty).
 * zpool_compact() does it for every class and then gives the cache back to
 * the OS; zpool_free() does at most AUTO_COMPACT_BUDGET zspages of its own
 * class when that class has over 25% and at least two zspages' worth of
 * free spots, so a writer's latency stays bounded.
 *
 * The pin protocol that makes moving safe under lock-free readers is
 * described at the top of zpool.c, and so are the lock rules.
 */
#include <assert.h>
#include <string.h>

#include "base/base.h"
#include "zpool_impl.h"

/* ---- (class lock held) ---- */

/* At least one zspage could be emptied by moving objects around. */
static bool can_compact(const struct size_class *c)
{
	return c->objs > 1 && free_objs(c) >= c->objs;
}

/* The class wastes over 25% of its spots, and two zspages or more. */
static bool should_compact(const struct size_class *c)
{
	uint64_t f = free_objs(c);

	return c->objs > 1 && f >= 2ull * c->objs && f * 4 > c->zspages * c->objs;
}

/*
 * Wait, backing off at most `patience` times, until no reader pins the
 * frame; false if some still do. The fetch_add orders the moves published
 * before it against every pin: a pin that comes later sees the new cells,
 * and one that came earlier is counted here.
 */
static bool pins_drain(struct zpool *pool, uint32_t frame, unsigned patience)
{
	_Atomic uint32_t *pin = &pool->frames[frame].pin;
	uint32_t v = atomic_fetch_add_explicit(pin, 0, memory_order_acq_rel);
	unsigned spins = 0;
	uint64_t t0 = 0;

	while (v) {
		if (spins >= patience)
			break;
		if (!t0)
			t0 = lockstat_begin();
		spin_backoff(&spins, SPIN_LIMIT);
		v = atomic_load_explicit(pin, memory_order_acquire);
	}
	if (t0)
		lockstat_end(LOCK_FRAME, t0);
	return !v;
}

/*
 * The objects have left src's spots (all, or some if the destinations ran
 * out). A reader may still read one there: src goes back to its group, or
 * is retired, only once its pins drained; until then it waits in the
 * draining list, where no store and no compaction picks it. Returns the
 * pages freed.
 */
static long moved_out(struct zpool *pool, struct size_class *c,
		      struct zspage *src, unsigned patience)
{
	if (!pins_drain(pool, src->frame, patience)) {
		group_del(c, src);
		group_add(c, src, ZS_DRAINING);
		return 0;
	}
	if (src->inuse) {
		regroup(c, src);
		return 0;
	}
	zp_zspage_retire(pool, c, src);
	return c->pages;
}

/* Take back the draining zspages whose readers have gone. */
static long drained(struct zpool *pool, struct size_class *c)
{
	struct zspage *zs = c->group[ZS_DRAINING], *next;
	long freed = 0;

	for (; zs; zs = next) {
		next = zs_at(c, zs->next);
		if (atomic_load_explicit(&pool->frames[zs->frame].pin,
					 memory_order_acquire))
			continue;
		if (!zs->inuse) {
			zp_zspage_retire(pool, c, zs);
			freed += c->pages;
			continue;
		}
		group_del(c, zs);
		group_add(c, zs, group_of(c, zs->inuse));
	}
	return freed;
}

static void note_compacted(struct zpool *pool, long pages)
{
	if (pages)
		atomic_fetch_add_explicit(&pool->pages_compacted, (uint64_t)pages,
					  memory_order_relaxed);
}

/* Move an object from class sc to a zspage of class dc (both locked). */
static void move_object(struct zpool *pool, struct size_class *sc,
			struct zspage *src, uint32_t obj_idx,
			struct size_class *dc, struct zspage *dst)
{
	uint32_t h = src->owner[obj_idx];
	_Atomic uint64_t *cellp = &pool->cells[h];
	uint64_t cell = atomic_load_explicit(cellp, memory_order_relaxed);
	uint64_t size = cell >> CELL_SIZE_SHIFT;
	uint64_t from = ((uint64_t)src->frame << ZP_FRAME_SHIFT) + obj_idx * sc->size;
	uint64_t to = ((uint64_t)dst->frame << ZP_FRAME_SHIFT) +
		      obj_alloc(dst, h) * dc->size;

	assert((cell & CELL_OFF_MASK) == from && size <= dc->size);
	memcpy(pool->base + to, pool->base + from, size);
	atomic_store_explicit(cellp, (cell & ~CELL_OFF_MASK) | to,
			      memory_order_release);
	obj_free(src, obj_idx);
	regroup(dc, dst);
	if (sc != dc) {
		counter_add(&sc->objects, -1);
		counter_add(&sc->obj_bytes, -(int64_t)size);
		counter_add(&dc->objects, 1);
		counter_add(&dc->obj_bytes, (int64_t)size);
	}
}

/*
 * Empty up to `budget` sparse zspages of c; returns the pages freed. The
 * opportunistic compaction of zpool_free() waits less for readers.
 */
static long compact_class(struct zpool *pool, struct size_class *c,
			  unsigned budget, unsigned patience)
{
	long freed = 0;

	while (budget-- && can_compact(c)) {
		struct zspage *src = sparsest(c);
		struct zspage *dst = fullest(c, src);
		uint32_t inuse;

		/* a pinned source would only wait in the draining list */
		if (!src || !dst || !pins_drain(pool, src->frame, patience))
			break;
		for (uint32_t i = 0; i < c->objs && src->inuse; i++) {
			if (src->owner[i] & OBJ_FREE)
				continue;
			if (!dst && !(dst = fullest(c, src)))
				break;
			move_object(pool, c, src, i, c, dst);
			if (dst->inuse == c->objs)
				dst = NULL;
			if (zp_test_moved)
				zp_test_moved(pool, src->inuse);
		}
		inuse = src->inuse;
		freed += moved_out(pool, c, src, patience);
		if (inuse)
			break;
	}
	note_compacted(pool, freed);
	return freed;
}

/*
 * After compact_class(), c has at most one non-full zspage. Move its
 * objects into free spots of a bigger class, as zpool_store() would have
 * borrowed them, when the rounding that costs is less than the zspage
 * (which makes a compacted pool as small as one filled afresh with the
 * same objects). Returns the pages freed.
 */
static long compact_lend(struct zpool *pool, struct size_class *c)
{
	struct zspage *src = sparsest(c), *dst = NULL;
	struct size_class *n;
	long freed;

	if (!src || fullest(c, src))
		return 0;
	n = zp_borrow(pool, c, c->size, src->inuse);
	if (!n)
		return 0;
	if ((uint64_t)src->inuse * (n->size - c->size) >=
	    (uint64_t)c->pages * PAGE ||
	    !pins_drain(pool, src->frame, MIGRATE_PATIENCE)) {
		pthread_mutex_unlock(&n->lock);
		return 0;
	}
	for (uint32_t i = 0; i < c->objs && src->inuse; i++) {
		if (src->owner[i] & OBJ_FREE)
			continue;
		if (!dst && !(dst = fullest(n, NULL)))
			break;
		move_object(pool, c, src, i, n, dst);
		if (dst->inuse == n->objs)
			dst = NULL;
		/*
		 * The object's handle will be freed into n's list: give c one
		 * of n's in return, or c would take new handles for good.
		 */
		if (n->free_handle)
			handle_put(pool, c, handle_pop(pool, n));
	}
	pthread_mutex_unlock(&n->lock);
	freed = moved_out(pool, c, src, MIGRATE_PATIENCE);
	note_compacted(pool, freed);
	return freed;
}

void zp_compact_auto(struct zpool *pool, struct size_class *c)
{
	if (unlikely(c->group[ZS_DRAINING]))
		note_compacted(pool, drained(pool, c));
	if (should_compact(c))
		compact_class(pool, c, AUTO_COMPACT_BUDGET, AUTO_COMPACT_PATIENCE);
}

/* Give back the slack of c's zspages (see zpool_frame.c). */
static long class_shrink(struct zpool *pool, struct size_class *c)
{
	long pages = 0;

	for (unsigned g = 0; g <= NR_GROUPS; g++)
		for (struct zspage *zs = c->group[g]; zs; zs = zs_at(c, zs->next))
			if (zs->resident > c->pages) {
				pages += zs->resident - c->pages;
				zs->resident = (uint8_t)zp_frame_shrink(pool,
					zs->frame, c->pages, zs->resident);
			}
	return pages;
}

/*
 * Compact every class, then give back every resident page that holds no
 * zspage page: the cache and the slack. Returns the pages given back.
 *
 * Not in a no-fault pool: there giving pages back is the refill thread's
 * alone (zpool_frame.c says why), and the slack stays until its zspage
 * leaves and the refill trims the cache. Shrinking a zspage's slack here
 * is a munlock() under the class lock in a locked process: v32 on 6.12
 * hung with the compactor in munlock() behind the refill's fault in
 * reclaim, and a queue thread's store waiting for that class lock.
 */
long zpool_compact(struct zpool *pool)
{
	bool nofault = atomic_load_explicit(&pool->nofault, memory_order_acquire);
	long freed = 0;

	for (unsigned i = 0; i < pool->nclasses; i++) {
		struct size_class *c = &pool->classes[i];

		lockstat_mutex_lock(&c->lock, LOCK_CLASS);
		note_compacted(pool, drained(pool, c));
		compact_class(pool, c, ~0u, MIGRATE_PATIENCE);
		compact_lend(pool, c);
		if (!nofault)
			freed += class_shrink(pool, c);
		pthread_mutex_unlock(&c->lock);
	}
	if (nofault)
		return freed;
	/* all of the cache but the reserve and the no-fault pool's target */
	return freed + (long)zp_cache_trim(pool, zp_cache_keep(pool));
}
