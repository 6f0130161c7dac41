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
 *   | pin | next_free | zs ---------+---> struct zspage (the descriptor:
 *   +-------------------------------+     in the zspage's tail if it fits,
 *                                          else malloc'ed) frame, inuse,
 *                                          free_head, owner[objs]: handle in
 *   size class c (one per size)            each slot, or SLOT_FREE | next
 *                                          free slot
 *   +-----------------------------------+
 *   | lock, size, pages, objs           |
 *   | group[0..7]: non-full zspages, by |  fullness group = inuse * 8 / objs
 *   |   fullness; group[8]: full ones   |
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
 * A class that has no zspage yet first borrows free slots of bigger classes
 * (up to 1/8 bigger), for at most one zspage's worth of objects, see
 * borrow(): a size that stays rare then costs some rounding instead of a
 * zspage of its own that stays mostly empty, which is what dominates a
 * small or narrow data set. zpool_compact() likewise lends a class's last
 * sparse zspage's objects to a bigger class (compact_lend()). An object
 * moves between classes only there; the frame table records each frame's
 * class for zpool_free().
 *
 * The region never fragments: frames are handed out from a lock-free stack
 * of freed frames, else from a bump index. An empty zspage's pages go back to
 * the OS with MADV_DONTNEED. Free-object lists live in the zspage
 * descriptors, so a free touches no object's bytes. A descriptor lives in
 * the tail of its zspage, past the last slot, when the tail has room for it
 * (then it costs nothing); otherwise it is malloc'ed. A new zspage's pages
 * are faulted in at once, so mem_used (pages plus metadata) follows RSS.
 *
 * A cell holds the object's size and its byte offset in the region; the
 * class follows from the size. Freed handles go on their class's list
 * (linked through the cells); a class with none takes a batch of never-used
 * handles from an atomic counter.
 *
 * Reading (zpool_map): load the cell, pin the frame it points into with a
 * CAS on the frame's pin counter, then load the cell again; if it changed,
 * the object moved: unpin and retry. The top bit of the pin counter means
 * "compaction is moving this zspage" and makes the CAS wait. Why this is
 * enough: compaction moves objects out of a frame only after its migrate
 * bit is set and it saw zero pins, so a reader whose pin came first keeps
 * the object in place until it unpins; a pin that comes after the move
 * reads the pin word written by the release that ended the move, so the
 * second load of the cell sees the new offset.
 *
 * Compaction of a class takes its sparsest zspage as source and the fullest
 * other non-full zspage as destination, sets the source's migrate bit, waits
 * for its pins to drain (giving up after a bound, so a thread that holds a
 * mapping while it frees cannot deadlock), copies each live object into the
 * destination, publishes the new offset with a release store, and frees the
 * source once it is empty. zpool_compact() does it for every class;
 * zpool_free() does at most AUTO_COMPACT_BUDGET zspages of its own class
 * when that class has over 25% and at least two zspages' worth of free
 * slots, so a writer's latency stays bounded.
 *
 * Files: this one has objects, pins and compaction; zpool_region.c has the
 * address space, the size classes, create/destroy and the accounting.
 *
 * An emptied zspage is kept on its class's spare list (still resident and
 * counted in mem_used) rather than given back at once, while all spares
 * stay within max(64 pages, mem_used / 256): page faults and MADV_DONTNEED
 * are expensive, and a class at a zspage boundary, e.g. the class of
 * incompressible pages under rewrites, would pay both for every object.
 * zpool_compact() gives spares back, and so does a store that hits the
 * limit or the end of the region, before it fails.
 *
 * Lock rules
 *  - class->lock protects the class's group lists and spares, every field of
 *    its zspages (owner arrays, free lists, inuse), its free_handle list,
 *    the cells of its live and freed handles (writers), frame.zs of its
 *    frames, and the data bytes of its zspages against writers: store
 *    copies in and compaction moves objects only with it held. A thread
 *    blocks on one class lock at a time; drain_spares() and borrow() (for
 *    zpool_store() and compact_lend()) only try-lock others.
 *    frame.next_free of a frame in use names its class and is written
 *    under that class's lock.
 *  - frame.pin is atomic; a reader may pin any frame, even one that is free
 *    or reused by another class, so the frame table is never freed or reset.
 *    Compaction moves a zspage's objects only after it set the migrate bit
 *    and saw the pin count at zero.
 *  - The frame stack, the frame and handle bump counters and the pool-wide
 *    counters (mem_used, spare_pages, ...) are atomics; there is no
 *    pool-wide lock.
 *  - The caller never frees a handle while it is mapped (zpool.h), so a free
 *    never has to wait for readers.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "zpool_impl.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23       /* Linux 5.14 */
#endif

/* ---- fullness groups (class lock held) ---- */

static unsigned group_of(const struct size_class *c, unsigned inuse)
{
	return inuse >= c->objs ? NR_GROUPS : inuse * NR_GROUPS / c->objs;
}

/* A list link is a frame number + 1, half a pointer; 0 ends the list. */
static struct zspage *zs_at(const struct size_class *c, uint32_t link)
{
	return link ? c->frames[link - 1].zs : NULL;
}

static void group_del(struct size_class *c, struct zspage *zs)
{
	struct zspage *prev = zs_at(c, zs->prev), *next = zs_at(c, zs->next);

	if (prev)
		prev->next = zs->next;
	else
		c->group[zs->group] = next;
	if (next)
		next->prev = zs->prev;
}

static void group_add(struct size_class *c, struct zspage *zs, unsigned g)
{
	struct zspage *next = c->group[g];

	zs->group = (uint8_t)g;
	zs->prev = 0;
	zs->next = next ? next->frame + 1 : 0;
	if (next)
		next->prev = zs->frame + 1;
	c->group[g] = zs;
}

static void regroup(struct size_class *c, struct zspage *zs)
{
	unsigned g = group_of(c, zs->inuse);

	if (g != zs->group) {
		group_del(c, zs);
		group_add(c, zs, g);
	}
}

/* The fullest non-full zspage other than `not`, or NULL. */
static struct zspage *fullest(const struct size_class *c, const struct zspage *not)
{
	for (int g = NR_GROUPS - 1; g >= 0; g--) {
		struct zspage *zs = c->group[g];

		if (zs && zs == not)
			zs = zs_at(c, zs->next);
		if (zs)
			return zs;
	}
	return NULL;
}

static struct zspage *sparsest(const struct size_class *c)
{
	for (unsigned g = 0; g < NR_GROUPS; g++)
		if (c->group[g])
			return c->group[g];
	return NULL;
}

/* ---- zspages (class lock held) ---- */

static int zspage_alloc(struct zpool *pool, struct size_class *c,
			struct zspage **out)
{
	uint64_t bytes = (uint64_t)c->pages * ZP_PAGE + c->desc_bytes;
	struct zspage *zs = NULL;
	unsigned char *p;
	int64_t f;

	if (!zp_mem_reserve(pool, bytes))
		return -ENOSPC;
	if (!c->desc_off) {
		zs = malloc(sizeof(*zs) + c->objs * sizeof(zs->owner[0]));
		if (!zs) {
			zp_mem_sub(pool, bytes);
			return -ENOMEM;
		}
	}
	f = zp_frame_get(pool);
	if (f < 0) {
		free(zs);
		zp_mem_sub(pool, bytes);
		return -ENOSPC;
	}
	/*
	 * Make the pages resident now, so that mem_used is what RSS sees.
	 * One madvise costs a fraction of the page faults it saves (1 against
	 * 20 microseconds a page on the VM this was measured on). Older
	 * kernels lack it (EINVAL): touch the pages instead.
	 */
	p = pool->base + ((uint64_t)f << ZP_FRAME_SHIFT);
	if (madvise(p, (size_t)c->pages << ZP_PAGE_SHIFT, MADV_POPULATE_WRITE)) {
		if (errno != EINVAL) {
			madvise(p, (size_t)c->pages << ZP_PAGE_SHIFT, MADV_DONTNEED);
			zp_frame_put(pool, (uint32_t)f);
			free(zs);
			zp_mem_sub(pool, bytes);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < c->pages; i++)
			((volatile unsigned char *)p)[(size_t)i << ZP_PAGE_SHIFT] = 0;
	}
	if (c->desc_off)
		zs = (struct zspage *)(void *)(p + c->desc_off);
	zs->frame = (uint32_t)f;
	/* the frame's owner, for zpool_free(); see frame_class() */
	atomic_store_explicit(&pool->frames[f].next_free,
			      (uint32_t)(c - pool->classes), memory_order_release);
	zs->inuse = 0;
	zs->free_head = 0;
	for (uint32_t i = 0; i < c->objs; i++)
		zs->owner[i] = SLOT_FREE | (i + 1 < c->objs ? i + 1 : SLOT_NIL);
	pool->frames[f].zs = zs;
	zp_mem_note_max(pool);
	*out = zs;
	return 0;
}

/* Give an empty zspage that is on no list back to the OS. */
static void zspage_free(struct zpool *pool, struct size_class *c,
			struct zspage *zs)
{
	uint32_t f = zs->frame;

	assert(zs->inuse == 0);
	pool->frames[f].zs = NULL;
	if (!c->desc_off)
		free(zs);
	/* this also drops a descriptor that lives in the zspage's tail */
	madvise(pool->base + ((uint64_t)f << ZP_FRAME_SHIFT),
		(size_t)c->pages << ZP_PAGE_SHIFT, MADV_DONTNEED);
	zp_mem_sub(pool, (uint64_t)c->pages * ZP_PAGE + c->desc_bytes);
	zp_frame_put(pool, f);
}

/* Take the first of c's spare zspages off its list, or NULL. */
static struct zspage *spare_take(struct zpool *pool, struct size_class *c)
{
	struct zspage *zs = c->spare;

	if (zs) {
		c->spare = zs_at(c, zs->next);
		atomic_fetch_sub_explicit(&pool->spare_pages, c->pages,
					  memory_order_relaxed);
	}
	return zs;
}

/* Give all of c's spare zspages back to the OS; returns the pages freed. */
static unsigned spare_drop(struct zpool *pool, struct size_class *c)
{
	struct zspage *zs;
	unsigned pages = 0;

	while ((zs = spare_take(pool, c))) {
		zspage_free(pool, c, zs);
		pages += c->pages;
	}
	return pages;
}

/*
 * Keep an emptied zspage, pages resident and counted in mem_used, for the
 * class's next zspage, if all the spares of the pool stay within
 * max(SPARE_MIN_PAGES, mem_used / 256): a class hovering at a zspage
 * boundary, e.g. incompressible pages under rewrites from several threads,
 * then neither faults pages in nor madvises them away (both cost tens of
 * microseconds or more) for every object, and the memory this holds is
 * bounded and small next to what the pool holds. False if it is full.
 */
static bool spare_keep(struct zpool *pool, struct size_class *c,
		       struct zspage *zs)
{
	uint64_t max = atomic_load_explicit(&pool->mem_used,
					    memory_order_relaxed) >>
		       (ZP_PAGE_SHIFT + SPARE_SHARE_SHIFT);

	if (max < SPARE_MIN_PAGES)
		max = SPARE_MIN_PAGES;
	if (atomic_fetch_add_explicit(&pool->spare_pages, c->pages,
				      memory_order_relaxed) + c->pages > max) {
		atomic_fetch_sub_explicit(&pool->spare_pages, c->pages,
					  memory_order_relaxed);
		return false;
	}
	zs->next = c->spare ? c->spare->frame + 1 : 0;
	c->spare = zs;
	return true;
}

/*
 * Free the spare zspages of the other classes, to make room under the limit
 * or in the region. Try-locks only: we hold our own class's lock.
 */
static unsigned drain_spares(struct zpool *pool, const struct size_class *self)
{
	unsigned n = 0;

	for (unsigned i = 0; i < pool->nclasses; i++) {
		struct size_class *c = &pool->classes[i];

		if (c == self || pthread_mutex_trylock(&c->lock))
			continue;
		n += spare_drop(pool, c);
		pthread_mutex_unlock(&c->lock);
	}
	return n;
}

static int zspage_new(struct zpool *pool, struct size_class *c,
		      struct zspage **out)
{
	struct zspage *zs = spare_take(pool, c);
	int err = 0;

	if (!zs) {
		err = zspage_alloc(pool, c, &zs);
		if (err == -ENOSPC && drain_spares(pool, c))
			err = zspage_alloc(pool, c, &zs);
		if (err)
			return err;
	}
	group_add(c, zs, 0);
	c->zspages++;
	*out = zs;
	return 0;
}

/* A zspage became empty: keep it as a spare (see spare_keep()) or free it. */
static void zspage_retire(struct zpool *pool, struct size_class *c,
			  struct zspage *zs, bool keep)
{
	group_del(c, zs);
	c->zspages--;
	if (!keep || !spare_keep(pool, c, zs))
		zspage_free(pool, c, zs);
}

static uint32_t slot_alloc(struct zspage *zs, uint32_t handle)
{
	uint32_t slot = zs->free_head;

	assert(slot != SLOT_NIL && (zs->owner[slot] & SLOT_FREE));
	zs->free_head = (uint16_t)(zs->owner[slot] & SLOT_NIL);
	zs->owner[slot] = handle;
	zs->inuse++;
	return slot;
}

static void slot_free(struct zspage *zs, uint32_t slot)
{
	zs->owner[slot] = SLOT_FREE | zs->free_head;
	zs->free_head = (uint16_t)slot;
	zs->inuse--;
}

/* ---- handles (class lock held) ---- */

static int handle_get(struct zpool *pool, struct size_class *c, uint32_t *out)
{
	uint32_t h;

	if (!c->free_handle) {
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
	}
	h = c->free_handle;
	c->free_handle = (uint32_t)atomic_load_explicit(&pool->cells[h],
							memory_order_relaxed);
	*out = h;
	return 0;
}

static void handle_put(struct zpool *pool, struct size_class *c, uint32_t h)
{
	atomic_store_explicit(&pool->cells[h], c->free_handle, memory_order_relaxed);
	c->free_handle = h;
}

/* ---- pins ---- */

static inline void pin_get(_Atomic uint32_t *pin)
{
	uint32_t v = atomic_load_explicit(pin, memory_order_relaxed);
	unsigned spins = 0;

	for (;;) {
		if (likely(!(v & PIN_MIGRATE))) {
			if (likely(atomic_compare_exchange_weak_explicit(pin, &v,
					v + 1, memory_order_acquire,
					memory_order_relaxed)))
				return;
			continue;
		}
		backoff(&spins);
		v = atomic_load_explicit(pin, memory_order_relaxed);
	}
}

const void *zpool_map(struct zpool *pool, uint32_t handle)
{
	_Atomic uint64_t *cellp = &pool->cells[handle];

	for (;;) {
		uint64_t cell = atomic_load_explicit(cellp, memory_order_acquire);
		uint64_t off = cell & CELL_OFF_MASK;
		_Atomic uint32_t *pin = &pool->frames[off >> ZP_FRAME_SHIFT].pin;

		assert(cell >> CELL_SIZE_SHIFT);
		pin_get(pin);
		if (likely(atomic_load_explicit(cellp, memory_order_acquire) == cell))
			return pool->base + off;
		atomic_fetch_sub_explicit(pin, 1, memory_order_release);
	}
}

void zpool_unmap(struct zpool *pool, uint32_t handle)
{
	/* the cell cannot change while its frame is pinned */
	uint64_t cell = atomic_load_explicit(&pool->cells[handle],
					     memory_order_relaxed);

	atomic_fetch_sub_explicit(&pool->frames[(cell & CELL_OFF_MASK) >>
						 ZP_FRAME_SHIFT].pin,
				  1, memory_order_release);
}

/* ---- compaction (class lock held) ---- */

static uint64_t free_slots(const struct size_class *c)
{
	return c->zspages * c->objs -
	       atomic_load_explicit(&c->objects, memory_order_relaxed);
}

/* At least one zspage could be emptied by moving objects around. */
static bool can_compact(const struct size_class *c)
{
	return c->objs > 1 && free_slots(c) >= c->objs;
}

/* The class wastes over 25% of its slots, and two zspages or more. */
static bool should_compact(const struct size_class *c)
{
	uint64_t f = free_slots(c);

	return c->objs > 1 && f >= 2ull * c->objs && f * 4 > c->zspages * c->objs;
}

/*
 * Return a class bigger than c (locked) that has `need` free slots and
 * wastes at most BORROW_WASTE / 64 of size per object, locked, or NULL.
 * A rare size then fills the free slots of its neighbours instead of
 * opening a zspage of its own that would stay mostly empty. Try-locks
 * only: c's lock is held.
 */
static struct size_class *borrow(struct zpool *pool, struct size_class *c,
				 size_t size, uint64_t need)
{
	const struct size_class *end = pool->classes + pool->nclasses;
	size_t max = size + size * BORROW_WASTE / 64;

	for (struct size_class *n = c + 1; n < end && n->size <= max; n++) {
		if (pthread_mutex_trylock(&n->lock))
			continue;
		if (free_slots(n) >= need && fullest(n, NULL))
			return n;
		pthread_mutex_unlock(&n->lock);
	}
	return NULL;
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
		backoff(&spins);
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
			struct zspage *src, uint32_t slot,
			struct size_class *dc, struct zspage *dst)
{
	uint32_t h = src->owner[slot];
	_Atomic uint64_t *cellp = &pool->cells[h];
	uint64_t cell = atomic_load_explicit(cellp, memory_order_relaxed);
	uint64_t size = cell >> CELL_SIZE_SHIFT;
	uint64_t from = ((uint64_t)src->frame << ZP_FRAME_SHIFT) + slot * sc->size;
	uint64_t to = ((uint64_t)dst->frame << ZP_FRAME_SHIFT) +
		      slot_alloc(dst, h) * dc->size;

	assert((cell & CELL_OFF_MASK) == from && size <= dc->size);
	memcpy(pool->base + to, pool->base + from, size);
	atomic_store_explicit(cellp, (cell & ~CELL_OFF_MASK) | to,
			      memory_order_release);
	slot_free(src, slot);
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
			if (src->owner[i] & SLOT_FREE)
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
		zspage_retire(pool, c, src, false);
		freed += c->pages;
	}
	if (freed)
		atomic_fetch_add_explicit(&pool->pages_compacted, (uint64_t)freed,
					  memory_order_relaxed);
	return freed;
}

/*
 * After compact_class(), c has at most one non-full zspage. Move its
 * objects into free slots of a bigger class, as zpool_store() would have
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
	n = borrow(pool, c, c->size, src->inuse);
	if (!n)
		return 0;
	if ((uint64_t)src->inuse * (n->size - c->size) >=
	    (uint64_t)c->pages * ZP_PAGE ||
	    !migrate_begin(pool, src, MIGRATE_PATIENCE)) {
		pthread_mutex_unlock(&n->lock);
		return 0;
	}
	frame = src->frame;
	for (uint32_t i = 0; i < c->objs && src->inuse; i++) {
		if (src->owner[i] & SLOT_FREE)
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
	zspage_retire(pool, c, src, false);
	atomic_fetch_add_explicit(&pool->pages_compacted, c->pages,
				  memory_order_relaxed);
	return c->pages;
}

long zpool_compact(struct zpool *pool)
{
	long freed = 0;

	for (unsigned i = 0; i < pool->nclasses; i++) {
		struct size_class *c = &pool->classes[i];

		pthread_mutex_lock(&c->lock);
		freed += compact_class(pool, c, ~0u, MIGRATE_PATIENCE);
		freed += compact_lend(pool, c);
		if (c->spare) {
			unsigned pages = spare_drop(pool, c);

			freed += pages;
			atomic_fetch_add_explicit(&pool->pages_compacted, pages,
						  memory_order_relaxed);
		}
		pthread_mutex_unlock(&c->lock);
	}
	return freed;
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
	uint32_t h, slot;
	uint64_t off;
	int err;

	if (!size || size > pool->max_object)
		return -EINVAL;
	c = class_of(pool, size);
	pthread_mutex_lock(&c->lock);
	zs = fullest(c, NULL);
	if (!zs && !c->zspages && !c->spare && c->borrowed < c->objs &&
	    (n = borrow(pool, c, size, 1))) {
		c->borrowed++;
		pthread_mutex_unlock(&c->lock);
		c = n;
		zs = fullest(c, NULL);
	}
	if (!zs) {
		err = zspage_new(pool, c, &zs);
		if (err)
			goto out;
		created = true;
	}
	err = handle_get(pool, c, &h);
	if (err) {
		if (created)
			zspage_retire(pool, c, zs, false);
		goto out;
	}
	slot = slot_alloc(zs, h);
	regroup(c, zs);
	off = ((uint64_t)zs->frame << ZP_FRAME_SHIFT) + slot * c->size;
	memcpy(pool->base + off, data, size);
	atomic_store_explicit(&pool->cells[h],
			      ((uint64_t)size << CELL_SIZE_SHIFT) | off,
			      memory_order_release);
	counter_add(&c->objects, 1);
	counter_add(&c->obj_bytes, (int64_t)size);
	*handle = h;
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

static inline uint32_t frame_class(const struct zpool *pool, uint64_t cell)
{
	return atomic_load_explicit(&pool->frames[(cell & CELL_OFF_MASK) >>
						  ZP_FRAME_SHIFT].next_free,
				    memory_order_acquire);
}

/*
 * Lock the class an object lives in, which borrow() may have made bigger
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

		pthread_mutex_lock(&c->lock);
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
	uint32_t slot;

	assert(handle && handle < pool->ncells);
	c = class_lock(pool, cellp, &cell);
	size = cell >> CELL_SIZE_SHIFT;
	assert(size);
	off = cell & CELL_OFF_MASK;
	zs = pool->frames[off >> ZP_FRAME_SHIFT].zs;
	slot = (uint32_t)((off & (ZP_FRAME - 1)) / c->size);
	assert(zs && zs->owner[slot] == handle);
	slot_free(zs, slot);
	handle_put(pool, c, handle);
	counter_add(&c->objects, -1);
	counter_add(&c->obj_bytes, -(int64_t)size);
	if (!zs->inuse)
		zspage_retire(pool, c, zs, true);
	else
		regroup(c, zs);
	if (should_compact(c))
		compact_class(pool, c, AUTO_COMPACT_BUDGET, AUTO_COMPACT_PATIENCE);
	pthread_mutex_unlock(&c->lock);
}
