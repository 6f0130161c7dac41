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
 * of 1..16 pages that wastes least (zsmalloc's get_pages_per_zspage), and
 * neighbouring sizes that get the same (pages, objects per zspage) share one
 * class, so fewer classes hold partly empty zspages. Objects never straddle
 * zspages, and a zspage is contiguous, so any object is read in place.
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
 * "compaction is moving this zspage" and makes the CAS wait.
 *
 * Compaction of a class takes its sparsest zspage as source and the fullest
 * other non-full zspage as destination, sets the source's migrate bit, waits
 * for its pins to drain (giving up after a bound, so a thread that holds a
 * mapping while it frees cannot deadlock), copies each live object into the
 * destination, publishes the new offset with a release store, and frees the
 * source once it is empty.
 *
 * Lock rules
 *  - class->lock protects the class's group lists, every field of its
 *    zspages (owner arrays, free lists, inuse), its free_handle list, the
 *    cells of its live and freed handles (writers), frame.zs of its frames,
 *    and the data bytes of its zspages against writers: store copies in and
 *    compaction moves objects only with it held. One class lock at a time.
 *  - frame.pin is atomic; a reader may pin any frame, even one that is free
 *    or reused by another class, so the frame table is never freed or reset.
 *    Compaction moves a zspage's objects only after it set the migrate bit
 *    and saw the pin count at zero.
 *  - The frame stack, the frame and handle bump counters and the pool-wide
 *    counters are atomics; there is no pool-wide lock.
 *  - The caller never frees a handle while it is mapped (zpool.h), so a free
 *    never has to wait for readers.
 */
#include "zpool.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ZP_PAGE_SHIFT 12
#define ZP_PAGE (1u << ZP_PAGE_SHIFT)
#define ZP_FRAME_SHIFT 16
#define ZP_FRAME (1u << ZP_FRAME_SHIFT)
#define ZP_MAX_PAGES (ZP_FRAME / ZP_PAGE)
#define ZP_ALIGN 16u
#define ZP_FINE_LIMIT 4096u          /* classes 16 bytes apart up to here */
#define ZP_MAX_OBJECT ZP_FRAME
#define ZP_MAX_CANDIDATES 512

#define ZP_MAX_FRAMES (1ull << 29)   /* 32 TiB of address space */
#define ZP_MIN_FRAMES 1024ull        /* 64 MiB */
#define ZP_MAX_HANDLES ((1ull << 31) - 1)
#define ZP_MIN_HANDLES (1ull << 16)
#define ZP_HANDLE_BATCH 64u

#define CELL_SIZE_SHIFT 46
#define CELL_OFF_MASK ((1ull << CELL_SIZE_SHIFT) - 1)

#define SLOT_FREE (1u << 31)
#define SLOT_NIL 0xffffu

#define NR_GROUPS 8                  /* non-full groups; NR_GROUPS is full */

#define PIN_MIGRATE (1u << 31)
#define SPIN_LIMIT 256u              /* pause this often, then yield */
#define MIGRATE_GIVE_UP (SPIN_LIMIT + 1024u)
#define AUTO_COMPACT_BUDGET 2u       /* zspages per zpool_free() */

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

struct frame {
	_Atomic uint32_t pin;       /* readers | PIN_MIGRATE */
	_Atomic uint32_t next_free; /* frame stack link: frame + 1, 0 ends */
	struct zspage *zs;          /* NULL while free */
};

struct zspage {
	struct zspage *prev, *next; /* in class->group[group] */
	uint32_t frame;
	uint16_t inuse;
	uint16_t free_head;         /* first free slot or SLOT_NIL */
	uint8_t group;
	uint32_t owner[];           /* handle, or SLOT_FREE | next free slot */
};

struct size_class {
	pthread_mutex_t lock;
	struct zspage *group[NR_GROUPS + 1];
	uint32_t free_handle;       /* 0: none */
	uint32_t size;
	uint32_t pages;
	uint32_t objs;              /* per zspage */
	uint32_t desc_bytes;        /* a descriptor, with malloc's overhead */
	uint64_t zspages;
	_Atomic uint64_t objects;   /* written under lock, read by stats */
	_Atomic uint64_t obj_bytes;
} __attribute__((aligned(64)));

struct zpool {
	/* read by every zpool_map(), never written after create */
	unsigned char *base;
	struct frame *frames;
	_Atomic uint64_t *cells;
	struct size_class *classes;
	uint16_t *size_index;       /* (size + 15) / 16 -> class */
	size_t max_object;
	unsigned nclasses;
	uint64_t nframes;
	uint64_t ncells;
	size_t meta_fixed;

	_Atomic uint64_t frame_stack __attribute__((aligned(64)));
	_Atomic uint64_t frame_bump;
	_Atomic uint64_t handle_bump;

	_Atomic uint64_t mem_used __attribute__((aligned(64)));
	_Atomic uint64_t mem_used_max;
	_Atomic uint64_t limit;
	_Atomic uint64_t pages_compacted;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static inline void backoff(unsigned *spins)
{
	if (++*spins < SPIN_LIMIT)
		cpu_relax();
	else
		sched_yield();
}

static inline void counter_add(_Atomic uint64_t *c, int64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed)
			      + (uint64_t)d, memory_order_relaxed);
}

/* ---- memory accounting ---- */

static void mem_note_max(struct zpool *pool)
{
	uint64_t cur = atomic_load_explicit(&pool->mem_used, memory_order_relaxed);
	uint64_t max = atomic_load_explicit(&pool->mem_used_max, memory_order_relaxed);

	while (cur > max && !atomic_compare_exchange_weak_explicit(&pool->mem_used_max,
			&max, cur, memory_order_relaxed, memory_order_relaxed))
		;
}

static void mem_add(struct zpool *pool, uint64_t n)
{
	atomic_fetch_add_explicit(&pool->mem_used, n, memory_order_relaxed);
	mem_note_max(pool);
}

static void mem_sub(struct zpool *pool, uint64_t n)
{
	atomic_fetch_sub_explicit(&pool->mem_used, n, memory_order_relaxed);
}

/* Add n to mem_used unless that passes the limit. */
static bool mem_reserve(struct zpool *pool, uint64_t n)
{
	uint64_t limit = atomic_load_explicit(&pool->limit, memory_order_relaxed);
	uint64_t cur = atomic_load_explicit(&pool->mem_used, memory_order_relaxed);

	do {
		if (limit && cur + n > limit)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&pool->mem_used, &cur,
			cur + n, memory_order_relaxed, memory_order_relaxed));
	return true;
}

/* Bytes of an array of `count` entries of `unit` bytes, in touched pages. */
static uint64_t table_pages(uint64_t count, size_t unit)
{
	return (count * unit + ZP_PAGE - 1) & ~(uint64_t)(ZP_PAGE - 1);
}

/* ---- address space ---- */

/* Map *count units, halving *count on failure down to min. */
static void *reserve(uint64_t *count, uint64_t min, size_t unit)
{
	for (;;) {
		size_t len = (size_t)(*count * unit);
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p != MAP_FAILED) {
			/* huge pages would make RSS jump by 2 MiB at a time */
			madvise(p, len, MADV_NOHUGEPAGE);
			return p;
		}
		if (*count / 2 < min)
			return NULL;
		*count /= 2;
	}
}

static int64_t frame_get(struct zpool *pool)
{
	uint64_t head = atomic_load_explicit(&pool->frame_stack, memory_order_acquire);
	uint64_t b;

	while ((uint32_t)head) {
		uint32_t f = (uint32_t)head - 1;
		uint32_t next = atomic_load_explicit(&pool->frames[f].next_free,
						     memory_order_relaxed);
		/* the tag in the top half defeats ABA */
		uint64_t nh = (((head >> 32) + 1) << 32) | next;

		if (atomic_compare_exchange_weak_explicit(&pool->frame_stack, &head,
				nh, memory_order_acquire, memory_order_acquire))
			return f;
	}
	b = atomic_load_explicit(&pool->frame_bump, memory_order_relaxed);
	do {
		if (b >= pool->nframes)
			return -1;
	} while (!atomic_compare_exchange_weak_explicit(&pool->frame_bump, &b,
			b + 1, memory_order_relaxed, memory_order_relaxed));
	mem_add(pool, table_pages(b + 1, sizeof(struct frame)) -
		table_pages(b, sizeof(struct frame)));
	return (int64_t)b;
}

static void frame_put(struct zpool *pool, uint32_t f)
{
	uint64_t head = atomic_load_explicit(&pool->frame_stack, memory_order_relaxed);
	uint64_t nh;

	do {
		atomic_store_explicit(&pool->frames[f].next_free, (uint32_t)head,
				      memory_order_relaxed);
		nh = (((head >> 32) + 1) << 32) | (f + 1);
	} while (!atomic_compare_exchange_weak_explicit(&pool->frame_stack, &head,
			nh, memory_order_release, memory_order_relaxed));
}

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

static int zspage_new(struct zpool *pool, struct size_class *c,
		      struct zspage **out)
{
	uint64_t bytes = (uint64_t)c->pages * ZP_PAGE + c->desc_bytes;
	volatile unsigned char *p;
	struct zspage *zs;
	int64_t f;

	if (!mem_reserve(pool, bytes))
		return -ENOSPC;
	zs = malloc(sizeof(*zs) + c->objs * sizeof(zs->owner[0]));
	if (!zs) {
		mem_sub(pool, bytes);
		return -ENOMEM;
	}
	f = frame_get(pool);
	if (f < 0) {
		free(zs);
		mem_sub(pool, bytes);
		return -ENOSPC;
	}
	zs->frame = (uint32_t)f;
	zs->inuse = 0;
	zs->free_head = 0;
	for (uint32_t i = 0; i < c->objs; i++)
		zs->owner[i] = SLOT_FREE | (i + 1 < c->objs ? i + 1 : SLOT_NIL);
	/* fault the pages in now, so that mem_used is what RSS sees */
	p = pool->base + ((uint64_t)f << ZP_FRAME_SHIFT);
	for (uint32_t i = 0; i < c->pages; i++)
		p[(size_t)i << ZP_PAGE_SHIFT] = 0;
	pool->frames[f].zs = zs;
	group_add(c, zs, 0);
	c->zspages++;
	mem_note_max(pool);
	*out = zs;
	return 0;
}

static void zspage_release(struct zpool *pool, struct size_class *c,
			   struct zspage *zs)
{
	uint32_t f = zs->frame;

	assert(zs->inuse == 0);
	group_del(c, zs);
	c->zspages--;
	pool->frames[f].zs = NULL;
	madvise(pool->base + ((uint64_t)f << ZP_FRAME_SHIFT),
		(size_t)c->pages << ZP_PAGE_SHIFT, MADV_DONTNEED);
	free(zs);
	mem_sub(pool, (uint64_t)c->pages * ZP_PAGE + c->desc_bytes);
	frame_put(pool, f);
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
		mem_add(pool, table_pages(cur + n, sizeof(pool->cells[0])) -
			table_pages(cur, sizeof(pool->cells[0])));
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

/* Stop new pins of zs and wait for the current ones; false if they stay. */
static bool migrate_begin(struct zpool *pool, const struct zspage *zs)
{
	_Atomic uint32_t *pin = &pool->frames[zs->frame].pin;
	uint32_t v = atomic_fetch_or_explicit(pin, PIN_MIGRATE, memory_order_acq_rel);
	unsigned spins = 0;

	while (v & ~PIN_MIGRATE) {
		if (spins >= MIGRATE_GIVE_UP) {
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

/* Empty up to `budget` sparse zspages of c; returns the pages freed. */
static long compact_class(struct zpool *pool, struct size_class *c,
			  unsigned budget)
{
	long freed = 0;

	while (budget-- && can_compact(c)) {
		struct zspage *src = sparsest(c);
		struct zspage *dst = fullest(c, src);
		uint32_t frame;

		if (!src || !dst || !migrate_begin(pool, src))
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
		zspage_release(pool, c, src);
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
		freed += compact_class(pool, c, ~0u);
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
			zspage_release(pool, c, zs);
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
		zspage_release(pool, c, zs);
	else
		regroup(c, zs);
	if (should_compact(c))
		compact_class(pool, c, AUTO_COMPACT_BUDGET);
	pthread_mutex_unlock(&c->lock);
}

/* ---- create and destroy ---- */

/* The zspage length (pages) that wastes least for objects of `size`. */
static uint32_t pick_pages(uint32_t size, uint32_t *objs)
{
	uint32_t best = 0, best_pct = 0;

	for (uint32_t p = 1; p <= ZP_MAX_PAGES; p++) {
		uint32_t span = p * ZP_PAGE;
		uint32_t pct;

		if (span < size)
			continue;
		pct = span / size * size * 100 / span;
		if (pct > best_pct) {
			best_pct = pct;
			best = p;
		}
	}
	*objs = best * ZP_PAGE / size;
	return best;
}

static int classes_init(struct zpool *pool)
{
	uint32_t cand[ZP_MAX_CANDIDATES], map[ZP_MAX_CANDIDATES];
	uint32_t size[ZP_MAX_CANDIDATES], pages[ZP_MAX_CANDIDATES];
	uint32_t objs[ZP_MAX_CANDIDATES];
	uint32_t max = (uint32_t)pool->max_object, n = 0, k = 0, s;
	size_t nidx = max / ZP_ALIGN + 1;
	uint16_t *idx;

	for (s = ZP_ALIGN; s <= max && s <= ZP_FINE_LIMIT; s += ZP_ALIGN)
		cand[n++] = s;
	for (s = cand[n - 1]; s < max;) {
		uint32_t step = (s / 64) & ~(ZP_ALIGN - 1);

		s += step > ZP_ALIGN ? step : ZP_ALIGN;
		cand[n++] = s < max ? s : max;
		assert(n < ZP_MAX_CANDIDATES);
	}
	/* from the top: a size whose zspages look like the next class's joins it */
	for (uint32_t i = n; i-- > 0;) {
		uint32_t o, p = pick_pages(cand[i], &o);

		if (!k || pages[k - 1] != p || objs[k - 1] != o) {
			size[k] = cand[i];
			pages[k] = p;
			objs[k] = o;
			k++;
		}
		map[i] = k - 1;
	}
	pool->classes = aligned_alloc(64, k * sizeof(*pool->classes));
	idx = calloc(nidx, sizeof(*idx));
	if (!pool->classes || !idx) {
		free(idx);
		return -ENOMEM;
	}
	memset(pool->classes, 0, k * sizeof(*pool->classes));
	for (uint32_t i = 0; i < k; i++) {
		struct size_class *c = &pool->classes[i];
		uint32_t j = k - 1 - i;
		size_t desc = sizeof(struct zspage) + objs[j] * sizeof(uint32_t);

		c->size = size[j];
		c->pages = pages[j];
		c->objs = objs[j];
		/* glibc: an 8-byte chunk header, rounded to 16 */
		c->desc_bytes = (uint32_t)((desc + 8 + 15) & ~(size_t)15);
		pthread_mutex_init(&c->lock, NULL);
		pool->nclasses++;
	}
	for (uint32_t u = 1, j = 0; u < nidx; u++) {
		while (cand[j] < u * ZP_ALIGN)
			j++;
		idx[u] = (uint16_t)(k - 1 - map[j]);
	}
	pool->size_index = idx;
	pool->meta_fixed += k * sizeof(*pool->classes) + nidx * sizeof(*idx);
	return 0;
}

int zpool_create(uint64_t capacity, size_t max_object, struct zpool **out)
{
	struct zpool *pool;
	uint64_t nframes, ncells;
	int err = -ENOMEM;

	if (!out || !capacity || !max_object || max_object % ZP_ALIGN ||
	    max_object > ZP_MAX_OBJECT)
		return -EINVAL;
	pool = aligned_alloc(64, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	memset(pool, 0, sizeof(*pool));
	pool->max_object = max_object;
	pool->meta_fixed = sizeof(*pool);
	err = classes_init(pool);
	if (err)
		goto fail;
	err = -ENOMEM;

	/*
	 * Worst case without compaction: every object of 16 bytes or more
	 * alone in its zspage, plus slack for each class's partial zspage.
	 */
	nframes = capacity / ZP_ALIGN + 2ull * pool->nclasses + 64;
	if (nframes > ZP_MAX_FRAMES)
		nframes = ZP_MAX_FRAMES;
	pool->base = reserve(&nframes, ZP_MIN_FRAMES, ZP_FRAME);
	if (!pool->base)
		goto fail;
	pool->nframes = nframes;
	pool->frames = reserve(&nframes, nframes, sizeof(struct frame));
	if (!pool->frames)
		goto fail;

	ncells = capacity / ZP_ALIGN + ZP_MIN_HANDLES;
	if (ncells > ZP_MAX_HANDLES)
		ncells = ZP_MAX_HANDLES;
	pool->cells = reserve(&ncells, ZP_MIN_HANDLES, sizeof(pool->cells[0]));
	if (!pool->cells)
		goto fail;
	pool->ncells = ncells;
	pool->handle_bump = 1;       /* handle 0 is never valid */

	pool->mem_used = pool->meta_fixed + table_pages(1, sizeof(pool->cells[0]));
	pool->mem_used_max = pool->mem_used;
	*out = pool;
	return 0;
fail:
	zpool_destroy(pool);
	return err;
}

void zpool_destroy(struct zpool *pool)
{
	if (!pool)
		return;
	for (unsigned i = 0; i < pool->nclasses; i++) {
		struct size_class *c = &pool->classes[i];

		for (unsigned g = 0; g <= NR_GROUPS; g++) {
			while (c->group[g]) {
				struct zspage *zs = c->group[g];

				c->group[g] = zs->next;
				free(zs);
			}
		}
		pthread_mutex_destroy(&c->lock);
	}
	if (pool->cells)
		munmap(pool->cells, pool->ncells * sizeof(pool->cells[0]));
	if (pool->frames)
		munmap(pool->frames, pool->nframes * sizeof(struct frame));
	if (pool->base)
		munmap(pool->base, pool->nframes << ZP_FRAME_SHIFT);
	free(pool->classes);
	free(pool->size_index);
	free(pool);
}

void zpool_set_limit(struct zpool *pool, uint64_t bytes)
{
	atomic_store_explicit(&pool->limit, bytes, memory_order_relaxed);
}

void zpool_stats(struct zpool *pool, struct zpool_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < pool->nclasses; i++) {
		const struct size_class *c = &pool->classes[i];

		st->objects += atomic_load_explicit(&c->objects, memory_order_relaxed);
		st->obj_bytes += atomic_load_explicit(&c->obj_bytes,
						      memory_order_relaxed);
	}
	st->mem_used = atomic_load_explicit(&pool->mem_used, memory_order_relaxed);
	st->mem_used_max = atomic_load_explicit(&pool->mem_used_max,
						memory_order_relaxed);
	st->pages_compacted = atomic_load_explicit(&pool->pages_compacted,
						   memory_order_relaxed);
}
