/*
 * zpool_compact.c - compaction: moving objects out of sparse zspages so
 * that they can be emptied, and borrowing between classes.
 *
 * Compaction of a class takes its sparsest zspage as source and the fullest
 * other non-full zspage as destination, sets the source's migrate bit, waits
 * for its pins to drain (giving up after a bound, so a thread that holds a
 * mapping while it frees cannot deadlock), copies each live object into the
 * destination, publishes the new offset with a release store, and retires
 * the source once it is empty; its frame goes to the cache of resident
 * frames (zpool_frame.c), where the next zspage of any class finds it.
 * zpool_compact() does it for every class and then gives the cache back to
 * the OS; zpool_free() does at most AUTO_COMPACT_BUDGET zspages of its own
 * class when that class has over 25% and at least two zspages' worth of
 * free places, so a writer's latency stays bounded.
 *
 * The pin protocol that makes moving safe under lock-free readers is
 * described at the top of zpool.c, and so are the lock rules.
 */
#include <assert.h>
#include <string.h>

#include "lockstat.h"
#include "zpool_impl.h"

/* ---- (class lock held) ---- */

/* At least one zspage could be emptied by moving objects around. */
static bool can_compact(const struct size_class *c)
{
	return c->objs > 1 && free_objs(c) >= c->objs;
}

/* The class wastes over 25% of its places, and two zspages or more. */
static bool should_compact(const struct size_class *c)
{
	uint64_t f = free_objs(c);

	return c->objs > 1 && f >= 2ull * c->objs && f * 4 > c->zspages * c->objs;
}

/*
 * Stop new pins of zs and wait for the current ones, backing off at most
 * `patience` times; false if they stay.
 */
static bool migrate_begin(struct zpool *pool, const struct zspage *zs,
			  unsigned patience)
{
	_Atomic uint32_t *pin = &pool->frames[zs->frame].pin;
	uint32_t v = atomic_fetch_or_explicit(pin, PIN_MIGRATE, memory_order_acq_rel);
	unsigned spins = 0;

	while (v & ~PIN_MIGRATE) {
		if (spins >= patience) {
			atomic_fetch_and_explicit(pin, ~PIN_MIGRATE,
						  memory_order_release);
			return false;
		}
		spin_backoff(&spins, SPIN_LIMIT);
		v = atomic_load_explicit(pin, memory_order_acquire);
	}
	return true;
}

static void migrate_end(struct zpool *pool, uint32_t frame)
{
	atomic_fetch_and_explicit(&pool->frames[frame].pin, ~PIN_MIGRATE,
				  memory_order_release);
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
		uint32_t frame;

		if (!src || !dst || !migrate_begin(pool, src, patience))
			break;
		frame = src->frame;
		for (uint32_t i = 0; i < c->objs && src->inuse; i++) {
			if (src->owner[i] & OBJ_FREE)
				continue;
			if (!dst && !(dst = fullest(c, src)))
				break;
			move_object(pool, c, src, i, c, dst);
			if (dst->inuse == c->objs)
				dst = NULL;
		}
		/* stale readers of the old offsets retry once this is clear */
		migrate_end(pool, frame);
		if (src->inuse) {
			regroup(c, src);
			break;
		}
		zp_zspage_retire(pool, c, src);
		freed += c->pages;
	}
	if (freed)
		atomic_fetch_add_explicit(&pool->pages_compacted, (uint64_t)freed,
					  memory_order_relaxed);
	return freed;
}

/*
 * After compact_class(), c has at most one non-full zspage. Move its
 * objects into free places of a bigger class, as zpool_store() would have
 * borrowed them, when the rounding that costs is less than the zspage
 * (which makes a compacted pool as small as one filled afresh with the
 * same objects). Returns the pages freed.
 */
static long compact_lend(struct zpool *pool, struct size_class *c)
{
	struct zspage *src = sparsest(c), *dst = NULL;
	struct size_class *n;
	uint32_t frame;

	if (!src || fullest(c, src))
		return 0;
	n = zp_borrow(pool, c, c->size, src->inuse);
	if (!n)
		return 0;
	if ((uint64_t)src->inuse * (n->size - c->size) >=
	    (uint64_t)c->pages * PAGE ||
	    !migrate_begin(pool, src, MIGRATE_PATIENCE)) {
		pthread_mutex_unlock(&n->lock);
		return 0;
	}
	frame = src->frame;
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
		if (n->free_handle) {
			uint32_t h = n->free_handle;

			n->free_handle = (uint32_t)atomic_load_explicit(
				&pool->cells[h], memory_order_relaxed);
			handle_put(pool, c, h);
		}
	}
	migrate_end(pool, frame);
	pthread_mutex_unlock(&n->lock);
	if (src->inuse) {
		regroup(c, src);
		return 0;
	}
	zp_zspage_retire(pool, c, src);
	atomic_fetch_add_explicit(&pool->pages_compacted, c->pages,
				  memory_order_relaxed);
	return c->pages;
}

void zp_compact_auto(struct zpool *pool, struct size_class *c)
{
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
 */
long zpool_compact(struct zpool *pool)
{
	long freed = 0;

	for (unsigned i = 0; i < pool->nclasses; i++) {
		struct size_class *c = &pool->classes[i];

		lockstat_mutex_lock(&c->lock, LOCK_CLASS);
		compact_class(pool, c, ~0u, MIGRATE_PATIENCE);
		compact_lend(pool, c);
		freed += class_shrink(pool, c);
		pthread_mutex_unlock(&c->lock);
	}
	return freed + (long)zp_cache_trim(pool, 0);
}
