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
 *   | pin | next_free | zs ---------+---> struct zspage (malloc'ed metadata)
 *   +-------------------------------+     frame, inuse, free_head,
 *                                          owner[objs]: handle in each slot,
 *   size class c (one per size)            or SLOT_FREE | next free slot
 *   +-----------------------------------+
 *   | lock, size, pages, objs           |
 *   | group[0..7]: non-full zspages, by |  fullness group = inuse * 8 / objs
 *   |   fullness; group[8]: full ones   |
 *   | free_handle: freed handles list   |
 *   +-----------------------------------+
 *
 * Size classes are 16 bytes apart up to 4096, then about 1/64 of the size
 * apart (waste <= 1.6%) up to max_object. Each class picks the zspage length
 * of 1..16 pages that wastes least (zsmalloc's get_pages_per_zspage), or a
 * shorter one that wastes at most 1% more, and neighbouring sizes that get
 * the same (pages, objects per zspage) share one class, so fewer and cheaper
 * partly filled zspages exist. Objects never straddle zspages, and a zspage
 * is contiguous, so any object is read in place.
 *
 * The region never fragments: frames are handed out from a lock-free stack
 * of freed frames, else from a bump index. An empty zspage's pages go back to
 * the OS with MADV_DONTNEED. Free-object lists live in the zspage
 * descriptors, so a free never touches the data pages. A new zspage's pages
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
 * An emptied zspage is kept as its class's one spare (still resident and
 * counted in mem_used) rather than given back at once: page faults and
 * MADV_DONTNEED are expensive, and a class at a zspage boundary, e.g. the
 * class of incompressible pages under overwrites, would pay both for every
 * object. zpool_compact() gives spares back, and so does a store that hits
 * the limit or the end of the region, before it fails.
 *
 * Lock rules
 *  - class->lock protects the class's group lists and spare, every field of
 *    its zspages (owner arrays, free lists, inuse), its free_handle list,
 *    the cells of its live and freed handles (writers), frame.zs of its
 *    frames, and the data bytes of its zspages against writers: store
 *    copies in and compaction moves objects only with it held. A thread
 *    blocks on one class lock at a time; drain_spares() only try-locks.
 *  - frame.pin is atomic; a reader may pin any frame, even one that is free
 *    or reused by another class, so the frame table is never freed or reset.
 *    Compaction moves a zspage's objects only after it set the migrate bit
 *    and saw the pin count at zero.
 *  - The frame stack, the frame and handle bump counters and the pool-wide
 *    counters are atomics; there is no pool-wide lock.
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

static void group_del(struct size_class *c, struct zspage *zs)
{
	if (zs->prev)
		zs->prev->next = zs->next;
	else
		c->group[zs->group] = zs->next;
	if (zs->next)
		zs->next->prev = zs->prev;
}

static void group_add(struct size_class *c, struct zspage *zs, unsigned g)
{
	zs->group = (uint8_t)g;
	zs->prev = NULL;
	zs->next = c->group[g];
	if (zs->next)
		zs->next->prev = zs;
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
			zs = zs->next;
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
	unsigned char *p;
	struct zspage *zs;
	int64_t f;

	if (!zp_mem_reserve(pool, bytes))
		return -ENOSPC;
	zs = malloc(sizeof(*zs) + c->objs * sizeof(zs->owner[0]));
	if (!zs) {
		zp_mem_sub(pool, bytes);
		return -ENOMEM;
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
	zs->frame = (uint32_t)f;
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
	madvise(pool->base + ((uint64_t)f << ZP_FRAME_SHIFT),
		(size_t)c->pages << ZP_PAGE_SHIFT, MADV_DONTNEED);
	free(zs);
	zp_mem_sub(pool, (uint64_t)c->pages * ZP_PAGE + c->desc_bytes);
	zp_frame_put(pool, f);
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
		if (c->spare) {
			zspage_free(pool, c, c->spare);
			c->spare = NULL;
			n++;
		}
		pthread_mutex_unlock(&c->lock);
	}
	return n;
}

static int zspage_new(struct zpool *pool, struct size_class *c,
		      struct zspage **out)
{
	struct zspage *zs = c->spare;
	int err = 0;

	if (zs) {
		c->spare = NULL;
	} else {
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

/*
 * A zspage became empty: keep it as the class's spare if it has none, so
 * that a class hovering at a zspage boundary does not fault pages in and
 * madvise them away over and over (both cost tens of microseconds or more).
 */
static void zspage_retire(struct zpool *pool, struct size_class *c,
			  struct zspage *zs, bool keep)
{
	group_del(c, zs);
	c->zspages--;
	if (keep && !c->spare)
		c->spare = zs;
	else
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

static void move_object(struct zpool *pool, struct size_class *c,
			struct zspage *src, uint32_t slot, struct zspage *dst)
{
	uint32_t h = src->owner[slot];
	_Atomic uint64_t *cellp = &pool->cells[h];
	uint64_t cell = atomic_load_explicit(cellp, memory_order_relaxed);
	uint64_t from = ((uint64_t)src->frame << ZP_FRAME_SHIFT) + slot * c->size;
	uint64_t to = ((uint64_t)dst->frame << ZP_FRAME_SHIFT) +
		      slot_alloc(dst, h) * c->size;

	assert((cell & CELL_OFF_MASK) == from);
	memcpy(pool->base + to, pool->base + from, cell >> CELL_SIZE_SHIFT);
	atomic_store_explicit(cellp, (cell & ~CELL_OFF_MASK) | to,
			      memory_order_release);
	slot_free(src, slot);
	regroup(c, dst);
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
			move_object(pool, c, src, i, dst);
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

long zpool_compact(struct zpool *pool)
{
	long freed = 0;

	for (unsigned i = 0; i < pool->nclasses; i++) {
		struct size_class *c = &pool->classes[i];

		pthread_mutex_lock(&c->lock);
		freed += compact_class(pool, c, ~0u, MIGRATE_PATIENCE);
		if (c->spare) {
			zspage_free(pool, c, c->spare);
			c->spare = NULL;
			freed += c->pages;
			atomic_fetch_add_explicit(&pool->pages_compacted, c->pages,
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
	struct size_class *c;
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

void zpool_free(struct zpool *pool, uint32_t handle)
{
	_Atomic uint64_t *cellp = &pool->cells[handle];
	uint64_t cell = atomic_load_explicit(cellp, memory_order_relaxed);
	uint64_t size = cell >> CELL_SIZE_SHIFT;
	struct size_class *c;
	struct zspage *zs;
	uint64_t off;
	uint32_t slot;

	assert(handle && handle < pool->ncells && size);
	c = class_of(pool, size);
	pthread_mutex_lock(&c->lock);
	/* compaction may have moved it before we took the lock */
	off = atomic_load_explicit(cellp, memory_order_relaxed) & CELL_OFF_MASK;
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
