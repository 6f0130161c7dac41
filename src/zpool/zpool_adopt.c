// SPDX-License-Identifier: MIT
/*
 * zpool_adopt.c - taking over a pool that another process left in a file
 * (zpool_create_file(); the kept store of src/device/keep.c, whose design
 * is doc/keep.md).
 *
 * What the file holds and what it means after a kill at any instant:
 *
 *   cells       size:18 | offset:46 of every live handle: exact. A cell is
 *               stored once the object's bytes are in place, and compaction
 *               stores it once the copy is whole, so a cell names whole bytes.
 *   frame.cls   the class of every frame that holds a live object: exact,
 *               written before the frame's first object.
 *   frame.pin   stale (killed readers): zeroed.
 *   frame.zs    a pointer of the dead process: zeroed, rebuilt.
 *   the rest    descriptors in zspage tails, free lists, free handles'
 *               links: stale, rebuilt.
 *
 * The caller names the live objects (zpool_adopt_object(): the slots'
 * handles); everything else is free:
 *
 *   begin   zero frame.zs and frame.pin where the frame table has pages
 *   object  check the cell against its frame's class, make the zspage's
 *           descriptor on the frame's first object, mark the spot
 *   end     each zspage: free list, fullness group, counters; each frame
 *           below the highest used that holds none: back in the cache
 *           with the first pages the file still has of it (the dead
 *           server's cache and reserve), the rest punched, or, with
 *           none, on the free stack; handles below the highest used that name no spot: on
 *           the classes' free lists; holes punched past both; mem_used;
 *           the pages left mapped into this process (populate())
 *
 * Adoption writes only what it recomputes from what it does not write (the
 * cells of live handles, frame.cls of used frames), so a kill during it
 * leaves a file the next adoption takes the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zpool_impl.h"

#ifndef SEEK_DATA
#define SEEK_DATA 3
#define SEEK_HOLE 4
#endif

static void punch(const struct zpool *pool, uint64_t off, uint64_t len)
{
	if (len)
		fallocate(pool->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)off, (off_t)len);
}

static uint64_t page_up(uint64_t n)
{
	return (n + PAGE - 1) & ~(uint64_t)(PAGE - 1);
}

/*
 * Map into this process the pages the file has in [off, off + len), which
 * addr maps: they are locked then if the process locks what it faults in
 * (serve --swap), and are not left to reclaim unmapped, which could write
 * them to the very swap device this process serves.
 */
static void populate(const struct zpool *pool, uint64_t off, uint64_t len,
		     void *start)
{
	unsigned char *addr = start;
	off_t at = (off_t)off;

	for (;;) {
		off_t data = lseek(pool->fd, at, SEEK_DATA), hole;

		if (data < 0 || (uint64_t)data >= off + len)
			return;
		hole = lseek(pool->fd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > off + len)
			hole = (off_t)(off + len);
		madvise(addr + ((uint64_t)data - off), (size_t)(hole - data),
			MADV_POPULATE_WRITE);
		at = hole;
	}
}

int zpool_adopt_begin(struct zpool *pool)
{
	uint64_t end = pool->frames_off + pool->nframes * sizeof(struct frame);
	off_t at = (off_t)pool->frames_off;

	if (pool->fd < 0)
		return -EINVAL;
	/* only the frame table's pages that exist: reading a hole makes one */
	for (;;) {
		off_t data = lseek(pool->fd, at, SEEK_DATA), hole;

		if (data < 0 || (uint64_t)data >= end)
			break;
		hole = lseek(pool->fd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		for (uint64_t f = ((uint64_t)data - pool->frames_off) /
				  sizeof(struct frame);
		     f < ((uint64_t)hole - pool->frames_off) / sizeof(struct frame);
		     f++) {
			pool->frames[f].zs = NULL;
			atomic_store_explicit(&pool->frames[f].pin, 0,
					      memory_order_relaxed);
		}
		at = hole;
	}
	pool->adopt_frames = 0;
	pool->adopt_handles = 1;
	return 0;
}

/* A descriptor for class c's zspage in frame f, every spot free. */
static struct zspage *zspage_make(struct zpool *pool, struct size_class *c,
				  uint32_t f)
{
	struct zspage *zs;

	if (c->desc_off)
		zs = (struct zspage *)(void *)(pool->base +
			((uint64_t)f << ZP_FRAME_SHIFT) + c->desc_off);
	else
		zs = malloc(sizeof(*zs) + c->objs * sizeof(zs->owner[0]));
	if (!zs)
		return NULL;
	zs->frame = f;
	zs->resident = (uint8_t)c->pages;
	zs->stocked = 0;
	zs->inuse = 0;
	zs->free_head = OBJ_NIL;
	zs->prev = zs->next = 0;
	zs->group = 0;
	for (uint32_t i = 0; i < c->objs; i++)
		zs->owner[i] = OBJ_FREE | OBJ_NIL;
	pool->frames[f].zs = zs;
	return zs;
}

int zpool_adopt_object(struct zpool *pool, uint32_t h, uint32_t size)
{
	uint64_t cell, off, in;
	struct size_class *c;
	struct zspage *zs;
	uint32_t f, cls, idx;

	if (!h || h >= pool->ncells || !size || size > pool->max_object)
		return -EUCLEAN;
	cell = atomic_load_explicit(&pool->cells[h], memory_order_relaxed);
	off = cell & CELL_OFF_MASK;
	if (cell >> CELL_SIZE_SHIFT != size ||
	    off >> ZP_FRAME_SHIFT >= pool->nframes)
		return -EUCLEAN;
	f = (uint32_t)(off >> ZP_FRAME_SHIFT);
	cls = atomic_load_explicit(&pool->frames[f].cls, memory_order_relaxed);
	if (cls >= pool->nclasses)
		return -EUCLEAN;
	c = &pool->classes[cls];
	in = off & (ZP_FRAME - 1);
	idx = (uint32_t)(in / c->size);
	if (in % c->size || idx >= c->objs || size > c->size)
		return -EUCLEAN;
	zs = pool->frames[f].zs;
	if (zs && !(zs->owner[idx] & OBJ_FREE))
		return -EUCLEAN;          /* the spot is someone else's */
	if (!zs && !(zs = zspage_make(pool, c, f)))
		return -ENOMEM;
	zs->owner[idx] = h;
	zs->inuse++;
	counter_add(&c->objects, 1);
	counter_add(&c->obj_bytes, size);
	if (f + 1u > pool->adopt_frames)
		pool->adopt_frames = f + 1u;
	if (h + 1u > pool->adopt_handles)
		pool->adopt_handles = h + 1u;
	return 0;
}

/* A used frame's zspage joins its class; returns the bytes it holds. */
static uint64_t zspage_join(struct zpool *pool, struct zspage *zs)
{
	struct size_class *c = &pool->classes[atomic_load_explicit(
		&pool->frames[zs->frame].cls, memory_order_relaxed)];

	for (uint32_t i = c->objs; i-- > 0;) {
		if (zs->owner[i] & OBJ_FREE) {
			zs->owner[i] = OBJ_FREE | zs->free_head;
			zs->free_head = (uint16_t)i;
		}
	}
	group_add(c, zs, group_of(c, zs->inuse));
	c->zspages++;
	/* the frame's pages past its zspage hold nothing any more */
	punch(pool, pool->region_off + ((uint64_t)zs->frame << ZP_FRAME_SHIFT) +
	      ((uint64_t)c->pages << PAGE_SHIFT),
	      ZP_FRAME - ((uint64_t)c->pages << PAGE_SHIFT));
	return ((uint64_t)c->pages << PAGE_SHIFT) + c->desc_bytes;
}

/* Whether handle h names a spot that zpool_adopt_object() claimed for it. */
static bool handle_live(const struct zpool *pool, uint32_t h)
{
	uint64_t cell = atomic_load_explicit(&pool->cells[h], memory_order_relaxed);
	uint64_t off = cell & CELL_OFF_MASK, f = off >> ZP_FRAME_SHIFT;
	const struct zspage *zs;
	const struct size_class *c;

	if (!(cell >> CELL_SIZE_SHIFT) || f >= pool->adopt_frames ||
	    !(zs = pool->frames[f].zs))
		return false;
	c = &pool->classes[atomic_load_explicit(&pool->frames[f].cls,
						memory_order_relaxed)];
	return zs->owner[(off & (ZP_FRAME - 1)) / c->size] == h;
}

/*
 * How many of free frame f's first pages the file holds (0 for a frame
 * that is used: its zspage is not free).
 */
static uint32_t resident_prefix(const struct zpool *pool, uint64_t f)
{
	off_t start = (off_t)(pool->region_off + (f << ZP_FRAME_SHIFT)), hole;

	if (pool->frames[f].zs || lseek(pool->fd, start, SEEK_DATA) != start)
		return 0;
	hole = lseek(pool->fd, start, SEEK_HOLE);
	if (hole < start || hole - start > (off_t)ZP_FRAME)
		hole = start + (off_t)ZP_FRAME;
	return (uint32_t)((hole - start) >> PAGE_SHIFT);
}

/*
 * A free frame whose first pages the file still holds (the dead server's
 * cache, its reserve of serve --swap's above all) goes back to the cache
 * with them, its other pages punched: the reserve outlives the server.
 * A new server takes the device over while memory is short and swap
 * waits for it; without those pages, its first stores allocate then,
 * and can wait for ever (tests/vm/v44: the queue threads in
 * throttle_direct_reclaim). The pages cached; 0 for a frame left free.
 */
static uint64_t frame_recache(struct zpool *pool, uint64_t f)
{
	uint32_t r = resident_prefix(pool, f);

	if (!r)
		return 0;
	punch(pool, pool->region_off + (f << ZP_FRAME_SHIFT) +
	      ((uint64_t)r << PAGE_SHIFT), ZP_FRAME - ((uint64_t)r << PAGE_SHIFT));
	zp_frame_give(pool, (uint32_t)f, r, r);
	return r;
}

/*
 * One past the last frame the region has pages of, at least nf (one past
 * the last used): the dead server's cached frames may lie past its used
 * ones (a reserve is taken at the start, but the first frames are used).
 */
static uint64_t frames_top(const struct zpool *pool, uint64_t nf)
{
	uint64_t end = pool->region_off + (pool->nframes << ZP_FRAME_SHIFT);
	off_t at = (off_t)(pool->region_off + (nf << ZP_FRAME_SHIFT));
	uint64_t top = nf;

	for (;;) {
		off_t data = lseek(pool->fd, at, SEEK_DATA), hole;

		if (data < 0 || (uint64_t)data >= end)
			return top;
		hole = lseek(pool->fd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		top = ((uint64_t)hole - pool->region_off + ZP_FRAME - 1) >>
		      ZP_FRAME_SHIFT;
		at = hole;
	}
}

int zpool_adopt_end(struct zpool *pool)
{
	uint64_t nf = frames_top(pool, pool->adopt_frames);
	uint64_t nh = pool->adopt_handles;
	uint64_t bytes = 0, run = 0, cut, cached = 0, r;
	unsigned next = 0;

	for (uint64_t f = nf; f-- > 0;) {
		struct zspage *zs = pool->frames[f].zs;

		if (zs) {
			bytes += zspage_join(pool, zs);
			continue;
		}
		if ((r = frame_recache(pool, f))) {
			cached += r;
			continue;
		}
		zp_frame_free_push(pool, (uint32_t)f);
		/* punch runs of free frames in one call each */
		run++;
		if (f == 0 || pool->frames[f - 1].zs ||
		    resident_prefix(pool, f - 1)) {
			punch(pool, pool->region_off + (f << ZP_FRAME_SHIFT),
			      run << ZP_FRAME_SHIFT);
			run = 0;
		}
	}
	punch(pool, pool->region_off + (nf << ZP_FRAME_SHIFT),
	      (pool->nframes - nf) << ZP_FRAME_SHIFT);
	/* frames past the last used: as never used */
	cut = page_up(nf * sizeof(struct frame)) / sizeof(struct frame);
	for (uint64_t f = nf; f < cut && f < pool->nframes; f++) {
		atomic_store_explicit(&pool->frames[f].next_free, 0,
				      memory_order_relaxed);
		pool->frames[f].zs = NULL;
	}
	punch(pool, pool->frames_off + cut * sizeof(struct frame),
	      pool->nframes > cut ? (pool->nframes - cut) * sizeof(struct frame) : 0);
	atomic_store_explicit(&pool->frame_bump, nf, memory_order_relaxed);

	/* handles that name nothing: dealt out to the classes' free lists */
	for (uint64_t h = nh; h-- > 1;) {
		if (handle_live(pool, (uint32_t)h))
			continue;
		handle_put(pool, &pool->classes[next], (uint32_t)h);
		next = (next + 1) % pool->nclasses;
	}
	cut = page_up(nh * sizeof(pool->cells[0])) / sizeof(pool->cells[0]);
	punch(pool, pool->cells_off + cut * sizeof(pool->cells[0]),
	      pool->ncells > cut ? (pool->ncells - cut) * sizeof(pool->cells[0]) : 0);
	atomic_store_explicit(&pool->handle_bump, nh, memory_order_relaxed);

	populate(pool, pool->cells_off, pool->ncells * sizeof(pool->cells[0]),
		 (void *)(uintptr_t)pool->cells);
	populate(pool, pool->region_off, pool->nframes << ZP_FRAME_SHIFT,
		 pool->base);
	atomic_store_explicit(&pool->mem_used, pool->meta_fixed +
			      zp_table_bytes(nh, sizeof(pool->cells[0])) +
			      zp_table_bytes(nf, sizeof(struct frame)) + bytes +
			      (cached << PAGE_SHIFT), memory_order_relaxed);
	/* the cache kept is the reserve: frees do not trim it away */
	if (cached > atomic_load_explicit(&pool->reserve_pages,
					  memory_order_relaxed))
		atomic_store_explicit(&pool->reserve_pages, cached,
				      memory_order_relaxed);
	zpool_reset_max(pool);
	return 0;
}
