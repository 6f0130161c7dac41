// SPDX-License-Identifier: MIT
/*
 * zpool.c - the allocator of compressed objects (zsmalloc's role).
 *
 * Layout
 *
 *   handle table (cells)          region: `nframes` frames of 64 KiB, reserved
 *   one 64-bit cell per handle    once with MAP_NORESERVE; a zspage occupies
 *   +---------------------+       the first `pages` pages of one frame
 *   | 0: never used       |       +---------------------------+--------------+
 *   | h: size:18 | off:46 |-----> |obj|obj|obj|obj|obj|  ...  | untouched    |
 *   | h': next free handle|       +---------------------------+--------------+
 *   +---------------------+       frame f: zspage of class c   (rest of 64 KiB)
 *                                   ^
 *   frame table (one entry per frame, never freed)
 *   +-------------------------------+
 *   | pin | next_free/cls | zs -----+---> struct zspage (the descriptor:
 *   +-------------------------------+     in the zspage's tail if it fits,
 *                                          else malloc'ed) frame, inuse,
 *                                          free_head, owner[objs]: handle in
 *   size class c (one per size)            each object spot, or OBJ_FREE |
 *                                          the next free spot's obj_idx
 *   +-----------------------------------+
 *   | lock, size, pages, objs           |
 *   | group[0..7]: non-full zspages, by |  fullness group = inuse * 8 / objs
 *   |   fullness; group[8]: full ones;  |
 *   |   group[9]: draining (see below)  |
 *   | free_handle: freed handles list   |
 *   +-----------------------------------+
 *
 * Size classes are 16 bytes apart up to 4096, then about 1/64 of the size
 * apart (waste <= 1.6%) up to max_object. Each class picks the zspage length
 * of 1..16 pages that balances tail waste against the cost of its partly
 * filled zspage (see pick_pages()), and neighbouring sizes that get the same
 * (pages, objects per zspage) share one class: 165 classes for objects of
 * up to 4 KiB. Objects never straddle zspages, and a zspage is contiguous,
 * so any object is read in place.
 *
 * A class that has no zspage yet first borrows free spots of bigger classes
 * (up to 1/8 bigger), for at most one zspage's worth of objects, see
 * zp_borrow(): a size that stays rare then costs some rounding instead of a
 * zspage of its own that stays mostly empty, which is what dominates a
 * small or narrow data set. zpool_compact() likewise lends a class's last
 * sparse zspage's objects to a bigger class (compact_lend()). An object
 * moves between classes only there; the frame table records each frame's
 * class for zpool_free().
 *
 * The region never fragments: every frame is alike. An empty zspage's frame
 * goes to a cache of resident frames that any class may take, and its pages
 * go back to the OS only when that cache passes a bound, in batches and
 * with no class lock held (zpool_frame.c). Free-object lists live in the zspage
 * descriptors, so a free touches no object's bytes. A descriptor lives in
 * the tail of its zspage, past the last object, when the tail has room for it
 * (then it costs nothing); otherwise it is malloc'ed. A new zspage's pages
 * are faulted in at once, so mem_used (pages plus metadata) follows RSS.
 *
 * A cell holds the object's size and its byte offset in the region; the
 * class follows from the size. Freed handles go on their class's list
 * (linked through the cells), up to ZP_HANDLE_HOARD; past it, batches go to
 * the pool's spare list. A class with none takes a batch of spare handles,
 * else of never-used ones from an atomic counter: so the handles of a size
 * the data has left serve the sizes it moved to.
 *
 * Reading (zpool_map): load the cell, add one to the pin counter of the
 * frame it points into, then load the cell again; if it changed, the object
 * moved: unpin and retry. A reader never waits, not even for a compaction
 * that is moving that very zspage: it reads the object at its old spot,
 * which compaction copies from but never writes or gives away while pinned.
 * zpool_unmap() unpins the frame of the address zpool_map() returned, as
 * the cell may point elsewhere by then.
 *
 * Why this is enough: compaction copies an object to its new spot, stores
 * the new offset, and after the last move of a zspage does an atomic
 * read-modify-write on its pin counter; it lets stores reuse the zspage's
 * spots, or retires it, only once that counter read zero. Every pin is an
 * atomic RMW of the same counter, so each either comes before compaction's
 * RMW (which then sees it and waits for its unpin) or after it (and then
 * the second load of the cell sees the new offset). Until the pins drain
 * the zspage waits on its class's draining list (group[ZS_DRAINING]),
 * where stores and compaction do not look; zp_compact_auto() and
 * zpool_compact() take it back when they find its counter at zero.
 *
 * Compaction (zpool_compact.c) empties sparse zspages this way;
 * zpool_free() runs a little of it on its own class.
 *
 * Files: this one has objects, handles, pins, store and free;
 * zpool_compact.c compaction; zpool_zspage.c making and retiring zspages
 * and borrowing; zpool_frame.c frames, their pages and the cache of
 * resident frames; zpool_region.c the address space, the size classes and
 * create/destroy; zpool_mem.c the accounting. zpool_impl.h has the
 * structures and the zspage list helpers they share.
 *
 * Lock rules
 *  - class->lock protects the class's group lists, every field of
 *    its zspages (owner arrays, free lists, inuse), its free_handle list,
 *    the cells of its live and freed handles (writers), frame.zs of its
 *    frames, and the data bytes of its zspages against writers: store
 *    copies in and compaction moves objects only with it held. A thread
 *    blocks on one class lock at a time; zp_borrow() (for zpool_store()
 *    and compact_lend()) only try-locks others.
 *    frame.cls of a frame in use names its class and is written
 *    under that class's lock.
 *  - frame.pin is atomic; a reader may pin any frame, even one that is free
 *    or reused by another class, so the frame table is never freed or reset.
 *    Compaction starts on a zspage only when its pin count is zero (a
 *    pinned one would just go to the draining list), and a zspage that
 *    objects left goes back to its group, or is retired, only after its
 *    RMW on the pin count and a zero count seen after it. A zspage on the
 *    draining list is never regrouped or retired by zpool_free().
 *  - The frame stacks, the frame and handle bump counters and the pool-wide
 *    counters (mem_used, cache_pages, ...) are atomics; the one pool-wide
 *    lock on the data path, handles_lock, guards the spare handles' list
 *    and is a leaf: taken with a class lock held (handle_put(),
 *    handle_get()), never the other way, and nothing is taken under it.
 *    Pages are released (zp_cache_trim()) with no class
 *    lock held; in a no-fault pool never by a store or a free
 *    (zp_trim_due()).
 *  - A store that needs a new zspage drops its class lock while it gets
 *    one (zp_zspage_make(): a descriptor and a frame, which may fault
 *    pages in, trim the cache at the limit or wait for a no-fault pool's
 *    refill) and adds it under the lock again, as zsmalloc's zs_malloc()
 *    allocates outside the class lock.
 *  - The caller never frees a handle while it is mapped (zpool.h), so a free
 *    never has to wait for readers.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "zpool_impl.h"

/* ---- handles (class lock held) ---- */

/* Up to ZP_HANDLE_BATCH spare handles onto c's empty list; false: none. */
static bool handles_unspare(struct zpool *pool, struct size_class *c)
{
	uint32_t first, last = 0;
	unsigned n = 0;

	pthread_mutex_lock(&pool->handles_lock);
	first = pool->spare_handle;
	for (uint32_t h = first; h && n < ZP_HANDLE_BATCH; n++) {
		last = h;
		h = (uint32_t)atomic_load_explicit(&pool->cells[h],
						   memory_order_relaxed);
	}
	if (n) {
		pool->spare_handle = (uint32_t)atomic_load_explicit(
			&pool->cells[last], memory_order_relaxed);
		atomic_store_explicit(&pool->cells[last], 0, memory_order_relaxed);
	}
	pthread_mutex_unlock(&pool->handles_lock);
	c->free_handle = n ? first : 0;
	c->nfree_handles = n;
	return n;
}

/*
 * A handle for c: one it freed, else a batch of spare ones (freed by other
 * classes), else a batch of never-used ones from the atomic counter.
 */
static int handle_get(struct zpool *pool, struct size_class *c, uint32_t *out)
{
	if (!c->free_handle && !handles_unspare(pool, c)) {
		uint64_t cur = atomic_load_explicit(&pool->handle_bump,
						    memory_order_relaxed);
		uint64_t n;

		do {
			if (cur >= pool->ncells)
				return -ENOSPC;
			n = pool->ncells - cur;
			if (n > ZP_HANDLE_BATCH)
				n = ZP_HANDLE_BATCH;
		} while (!atomic_compare_exchange_weak_explicit(&pool->handle_bump,
				&cur, cur + n, memory_order_relaxed,
				memory_order_relaxed));
		zp_mem_add(pool, zp_table_bytes(cur + n, sizeof(pool->cells[0])) -
			zp_table_bytes(cur, sizeof(pool->cells[0])));
		for (uint64_t i = cur; i < cur + n; i++)
			atomic_store_explicit(&pool->cells[i],
					      i + 1 < cur + n ? i + 1 : 0,
					      memory_order_relaxed);
		c->free_handle = (uint32_t)cur;
		c->nfree_handles = (uint32_t)n;
	}
	*out = handle_pop(pool, c);
	return 0;
}

/* ---- pins ---- */

const void *zpool_map(struct zpool *pool, uint32_t handle)
{
	_Atomic uint64_t *cellp = &pool->cells[handle];

	for (;;) {
		uint64_t cell = atomic_load_explicit(cellp, memory_order_acquire);
		uint64_t off = cell & CELL_OFF_MASK;
		_Atomic uint32_t *pin = &pool->frames[off >> ZP_FRAME_SHIFT].pin;

		assert(cell >> CELL_SIZE_SHIFT);
		atomic_fetch_add_explicit(pin, 1, memory_order_acquire);
		if (likely(atomic_load_explicit(cellp, memory_order_acquire) == cell))
			return pool->base + off;
		atomic_fetch_sub_explicit(pin, 1, memory_order_release);
	}
}

uint32_t zpool_obj_size(struct zpool *pool, uint32_t handle)
{
	/* compaction moves the object, never changes its size */
	return (uint32_t)(atomic_load_explicit(&pool->cells[handle],
					       memory_order_acquire) >>
			  CELL_SIZE_SHIFT);
}

void zpool_unmap(struct zpool *pool, const void *obj)
{
	/* the pinned frame is the one mapped: the cell may point elsewhere now */
	atomic_fetch_sub_explicit(&pool->frames[(uint64_t)((const unsigned char *)obj -
						 pool->base) >> ZP_FRAME_SHIFT].pin,
				  1, memory_order_release);
}

/* ---- store and free ---- */

static inline struct size_class *class_of(const struct zpool *pool, size_t size)
{
	return &pool->classes[pool->size_index[(size + ZP_ALIGN - 1) / ZP_ALIGN]];
}

int zpool_store(struct zpool *pool, const void *data, size_t size,
		uint32_t *handle)
{
	struct size_class *c, *n;
	struct zspage *zs;
	bool created = false;
	uint32_t h, obj_idx;
	uint64_t off;
	int err;

	if (!size || size > pool->max_object)
		return -EINVAL;
	c = class_of(pool, size);
	lockstat_mutex_lock(&c->lock, LOCK_CLASS);
	zs = fullest(c, NULL);
	if (!zs && !c->zspages && c->borrowed < c->objs &&
	    (n = zp_borrow(pool, c, size, 1))) {
		c->borrowed++;
		pthread_mutex_unlock(&c->lock);
		c = n;
		zs = fullest(c, NULL);
	}
	if (!zs) {
		/*
		 * Made with the lock dropped (zp_zspage_make()); another store
		 * may add a zspage to c meanwhile, and this one still takes
		 * its own, as zsmalloc's does: at most one spare zspage a
		 * racing thread, which the stores after fill first
		 * (fullest()).
		 */
		pthread_mutex_unlock(&c->lock);
		err = zp_zspage_make(pool, c, &zs);
		lockstat_mutex_lock(&c->lock, LOCK_CLASS);
		if (err)
			goto out;
		zp_zspage_add(pool, c, zs);
		created = true;
	}
	err = handle_get(pool, c, &h);
	if (err) {
		if (created)
			zp_zspage_retire(pool, c, zs);
		goto out;
	}
	obj_idx = obj_alloc(zs, h);
	regroup(c, zs);
	off = ((uint64_t)zs->frame << ZP_FRAME_SHIFT) + obj_idx * c->size;
	memcpy(pool->base + off, data, size);
	atomic_store_explicit(&pool->cells[h],
			      ((uint64_t)size << CELL_SIZE_SHIFT) | off,
			      memory_order_release);
	counter_add(&c->objects, 1);
	counter_add(&c->obj_bytes, (int64_t)size);
	*handle = h;
out:
	pthread_mutex_unlock(&c->lock);
	if (unlikely(created && err) && zp_trim_due(pool))
		zp_cache_trim(pool, zp_cache_cap(pool) / 2);
	return err;
}

static inline uint32_t frame_class(const struct zpool *pool, uint64_t cell)
{
	return atomic_load_explicit(&pool->frames[(cell & CELL_OFF_MASK) >>
						  ZP_FRAME_SHIFT].cls,
				    memory_order_acquire);
}

/*
 * Lock the class an object lives in, which zp_borrow() may have made bigger
 * than its size's. Read unlocked, the owner of the cell's frame may be
 * stale: compaction may have moved the object and the frame may have gone
 * to another class. Under a class lock the object cannot leave that class's
 * frames and their owner fields do not change, and the lock orders us after
 * any reuse of the frame we saw, so a match under the lock is the truth.
 * A frame on the free stack holds a link that may look like a class index;
 * the owner field is written with release after the object left the frame,
 * so reading the cell again then shows the move.
 */
static struct size_class *class_lock(struct zpool *pool,
				     _Atomic uint64_t *cellp, uint64_t *cell)
{
	for (;;) {
		uint32_t i = frame_class(pool, atomic_load_explicit(cellp,
							memory_order_acquire));
		struct size_class *c = &pool->classes[i < pool->nclasses ? i : 0];

		lockstat_mutex_lock(&c->lock, LOCK_CLASS);
		*cell = atomic_load_explicit(cellp, memory_order_relaxed);
		if (frame_class(pool, *cell) == (uint32_t)(c - pool->classes) &&
		    atomic_load_explicit(cellp, memory_order_relaxed) == *cell)
			return c;
		pthread_mutex_unlock(&c->lock);
	}
}

void zpool_free(struct zpool *pool, uint32_t handle)
{
	_Atomic uint64_t *cellp = &pool->cells[handle];
	struct size_class *c;
	struct zspage *zs;
	uint64_t cell, off, size;
	uint32_t obj_idx;

	assert(handle && handle < pool->ncells);
	c = class_lock(pool, cellp, &cell);
	size = cell >> CELL_SIZE_SHIFT;
	assert(size);
	off = cell & CELL_OFF_MASK;
	zs = pool->frames[off >> ZP_FRAME_SHIFT].zs;
	obj_idx = (uint32_t)((off & (ZP_FRAME - 1)) / c->size);
	assert(zs && zs->owner[obj_idx] == handle);
	obj_free(zs, obj_idx);
	handle_put(pool, c, handle);
	counter_add(&c->objects, -1);
	counter_add(&c->obj_bytes, -(int64_t)size);
	if (zs->group == ZS_DRAINING)
		;    /* zp_compact_auto() takes it back once unpinned */
	else if (!zs->inuse)
		zp_zspage_retire(pool, c, zs);
	else
		regroup(c, zs);
	zp_compact_auto(pool, c);
	pthread_mutex_unlock(&c->lock);
	/* releases, when due, happen with no class lock held */
	if (zp_trim_due(pool))
		zp_cache_trim(pool, zp_cache_cap(pool) / 2);
}
