// SPDX-License-Identifier: MIT
/*
 * zpool_zspage.c - making and retiring zspages, and borrowing free spots of
 * bigger classes; below both zpool.c (store, free) and zpool_compact.c.
 *
 * The layout, the borrowing policy and the lock rules are described at the
 * top of zpool.c. Every function here runs with the class lock held, but
 * zp_zspage_make(), which runs with none.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "zpool_impl.h"

/* ---- zspages ---- */

/*
 * A new zspage for class c, with no lock held (c's layout only is read):
 * its descriptor and a frame with its pages resident, every object free.
 * It belongs to nobody until zp_zspage_add(). As zsmalloc's zs_malloc()
 * allocates a zspage outside the class lock: the frame may take a while
 * (pages faulting in, or in a no-fault pool the refill thread's next
 * frame, up to pool_wait_ms), and the class's other stores and frees go on
 * meanwhile.
 */
int zp_zspage_make(struct zpool *pool, const struct size_class *c,
		   struct zspage **out)
{
	struct zspage *zs = NULL;
	uint32_t f, resident;
	int err;

	if (!c->desc_off) {
		if (!zp_mem_reserve(pool, c->desc_bytes))
			return -ENOSPC;
		err = zp_desc_get(pool, c, &zs);
		if (err) {
			zp_mem_sub(pool, c->desc_bytes);
			return err;
		}
	}
	err = zp_frame_get(pool, c->pages, &f, &resident);
	if (err) {
		if (zs) {
			zp_desc_put(pool, zs);
			zp_mem_sub(pool, c->desc_bytes);
		}
		return err;
	}
	/* a descriptor may have grown mem_used without new pages */
	zp_mem_note_max(pool);
	if (c->desc_off) {
		zs = (struct zspage *)(void *)(pool->base +
			((uint64_t)f << ZP_FRAME_SHIFT) + c->desc_off);
		zs->stocked = 0;
	}
	zs->frame = f;
	zs->resident = (uint8_t)resident;
	zs->inuse = 0;
	zs->free_head = 0;
	for (uint32_t i = 0; i < c->objs; i++)
		zs->owner[i] = OBJ_FREE | (i + 1 < c->objs ? i + 1 : OBJ_NIL);
	*out = zs;
	return 0;
}

/* A zspage of zp_zspage_make() joins class c (class lock held). */
void zp_zspage_add(struct zpool *pool, struct size_class *c, struct zspage *zs)
{
	uint32_t f = zs->frame;

	/* the frame's owner, for zpool_free(); see frame_class() */
	atomic_store_explicit(&pool->frames[f].cls,
			      (uint32_t)(c - pool->classes), memory_order_release);
	pool->frames[f].zs = zs;
	group_add(c, zs, 0);
	c->zspages++;
}

/*
 * An empty zspage leaves its class: its frame goes to the cache of
 * resident frames (zpool_frame.c), from which any class may take it.
 */
void zp_zspage_retire(struct zpool *pool, struct size_class *c,
		      struct zspage *zs)
{
	uint32_t f = zs->frame, resident = zs->resident;

	assert(zs->inuse == 0);
	group_del(c, zs);
	c->zspages--;
	pool->frames[f].zs = NULL;
	if (!c->desc_off) {
		zp_desc_put(pool, zs);
		zp_mem_sub(pool, c->desc_bytes);
	}
	/* a descriptor in the zspage's tail goes with the frame */
	zp_frame_give(pool, f, c->pages, resident);
}

/*
 * Return a class bigger than c (locked) that has `need` free spots and
 * wastes at most BORROW_WASTE / 64 of size per object, locked, or NULL.
 * A rare size then fills the free spots of its neighbours instead of
 * opening a zspage of its own that would stay mostly empty. Try-locks
 * only: c's lock is held.
 */
struct size_class *zp_borrow(struct zpool *pool, struct size_class *c,
			     size_t size, uint64_t need)
{
	const struct size_class *end = pool->classes + pool->nclasses;
	size_t max = size + size * BORROW_WASTE / 64;

	for (struct size_class *n = c + 1; n < end && n->size <= max; n++) {
		if (pthread_mutex_trylock(&n->lock))
			continue;
		if (free_objs(n) >= need && fullest(n, NULL))
			return n;
		pthread_mutex_unlock(&n->lock);
	}
	return NULL;
}
