/* SPDX-License-Identifier: MIT */
/*
 * zpool_impl.h - what the allocator's files share; private to them:
 *   zpool.c          objects: store, free, map, handles
 *   zpool_compact.c  compaction
 *   zpool_zspage.c   making and retiring zspages, borrowing between classes
 *   zpool_reserve.c  the reserve, and the refill of the no-fault pool
 *   zpool_adopt.c    taking over a pool a killed process left in a file
 *   zpool_frame.c    frames: the free stack, the cache of resident frames,
 *                    populating and releasing pages; a no-fault pool's
 *                    takes and waits
 *   zpool_region.c   the address space, size classes, create/destroy
 *   zpool_mem.c      accounting of mem_used against the limit
 * Each file uses only those below it in this list.
 * The layout and the lock rules are described at the top of zpool.c.
 */
#ifndef UZRAM_ZPOOL_IMPL_H
#define UZRAM_ZPOOL_IMPL_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "zpool.h"

#define ZP_FRAME_SHIFT 16
#define ZP_FRAME (1u << ZP_FRAME_SHIFT)
#define ZP_MAX_PAGES (ZP_FRAME / PAGE)
#define ZP_ALIGN 16u
#define ZP_FINE_LIMIT 4096u          /* classes 16 bytes apart up to here */
#define ZP_MAX_OBJECT ZP_FRAME
#define ZP_MAX_CANDIDATES 512
#define BORROW_WASTE 8u              /* 64ths of the size, see zp_borrow() */
#define PICK_OBJS 512u               /* see pick_pages() */

#define ZP_MAX_FRAMES (1ull << 29)   /* 32 TiB of address space */
#define ZP_MIN_FRAMES 1024ull        /* 64 MiB */
#define ZP_SPARE_FRAMES 64ull        /* reserved past the worst case, for the cache */
#define ZP_MAX_HANDLES ((1ull << 31) - 1)
#define ZP_MIN_HANDLES (1ull << 16)
#define ZP_HANDLE_BATCH 64u

#define CELL_SIZE_SHIFT 46
#define CELL_OFF_MASK ((1ull << CELL_SIZE_SHIFT) - 1)

#define OBJ_FREE (1u << 31)
#define OBJ_NIL 0xffffu

#define NR_GROUPS 8                  /* non-full groups; NR_GROUPS is full */
#define ZS_DRAINING (NR_GROUPS + 1)  /* moved out, stale readers remain */

#define SPIN_LIMIT 256u              /* pause this often, then yield */
#define MIGRATE_PATIENCE (SPIN_LIMIT + 1024u)
#define AUTO_COMPACT_BUDGET 2u       /* zspages per zpool_free() */
#define AUTO_COMPACT_PATIENCE (SPIN_LIMIT + 16u)
#define CACHE_MIN_PAGES 64u          /* see zp_cache_cap() */
#define CACHE_SHARE_SHIFT 8          /* cache up to mem_used / 256 */
#define SLACK_SHARE_SHIFT 2          /* slack up to a quarter of that */
#define RELEASE_BATCH 64u            /* frames per process_madvise() */

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

struct frame {
	_Atomic uint32_t pin;       /* readers */
	union {
		/* free or cached: stack link, frame + 1, 0 ends */
		_Atomic uint32_t next_free;
		/* in use: the index of the class that owns the zspage */
		_Atomic uint32_t cls;
	};
	struct zspage *zs;          /* NULL while free */
};

struct zspage {
	uint32_t prev, next;        /* in class->group[group], frame + 1 */
	uint32_t frame;
	uint16_t inuse;
	uint16_t free_head;         /* first free spot's obj_idx, or OBJ_NIL */
	uint8_t group;
	uint8_t resident;           /* pages of the frame resident, >= pages
				     * of the class; see zpool_frame.c */
	uint8_t stocked;            /* malloc'ed at desc_max bytes, for the
				     * descriptor stock (zpool_reserve.c) */
	uint32_t owner[];           /* handle, or OBJ_FREE | next free's */
};

struct size_class {
	pthread_mutex_t lock;
	struct zspage *group[ZS_DRAINING + 1];
	struct frame *frames;       /* the pool's, to follow list links */
	uint32_t free_handle;       /* 0: none */
	uint32_t nfree_handles;     /* on free_handle's list */
	uint32_t size;
	uint32_t pages;
	uint32_t objs;              /* per zspage */
	uint32_t desc_bytes;        /* a malloc'ed descriptor, with malloc's
				     * overhead; 0 when it is in the tail */
	uint32_t desc_off;          /* 0, or where in the zspage the
				     * descriptor lives (see classes_init) */
	uint32_t borrowed;          /* objects stored in bigger classes */
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

	/*
	 * stack[0]: free frames, nothing resident; stack[r]: cached frames
	 * with their first r pages resident (zpool_frame.c)
	 */
	_Atomic uint64_t stack[ZP_MAX_PAGES + 1] __attribute__((aligned(64)));
	_Atomic uint64_t frame_bump;
	_Atomic uint64_t handle_bump;
	/*
	 * Freed handles past a class's hoard (handle_put()): a list through
	 * their cells, so that the handles one class freed serve the others
	 * (the data of a device changes size); handles_lock is a leaf, taken
	 * with a class lock held.
	 */
	pthread_mutex_t handles_lock;
	uint32_t spare_handle;         /* 0: none */
	_Atomic int pidfd;          /* for batched releases; -1: none */
	int fd;                     /* zpool_create_file()'s file, or -1 */
	uint64_t frames_off;        /* where the frame table, */
	uint64_t cells_off;         /* the cells */
	uint64_t region_off;        /* and the region are in it */
	uint64_t adopt_frames;      /* adoption: frames below the highest
				     * claimed, + 1 (zpool_adopt.c) */
	uint64_t adopt_handles;     /* the same for handles */
	int pid;                    /* the process that opened pidfd */

	_Atomic uint64_t mem_used __attribute__((aligned(64)));
	_Atomic uint64_t mem_used_max;
	_Atomic uint64_t limit;
	_Atomic uint64_t pages_compacted;
	_Atomic uint64_t cache_pages;  /* pages of cached frames */
	_Atomic uint64_t slack_pages;  /* resident pages past their zspage */
	_Atomic uint64_t releases;     /* release batches, for tests */
	_Atomic uint64_t reserve_pages; /* the cache keeps this many
					 * (zpool_reserve.c) */

	/*
	 * The no-fault pool (zpool_set_pool()): while nofault is set, stores
	 * take cached frames only (zpool_frame.c) and a refill thread makes
	 * them (zpool_refill(), zpool_reserve.c). pool_lock guards the
	 * waiters count and orders the two condition variables' wake-ups;
	 * the rest are atomics.
	 */
	_Atomic bool nofault;
	_Atomic uint64_t pool_min, pool_max;  /* bounds of pool_target, pages */
	_Atomic uint64_t pool_target;  /* the refill fills up to this; half
					* of it is the low watermark */
	_Atomic uint32_t pool_wait_ms; /* a store's wait for the refill */
	pthread_mutex_t pool_lock;
	pthread_cond_t refill_cv;      /* the refill thread waits here */
	pthread_cond_t filled_cv;      /* stores wait here for frames */
	unsigned pool_waiters;         /* stores waiting now (pool_lock) */
	_Atomic uint64_t pool_want[ZP_MAX_PAGES + 1]; /* frames of each
					* length taken or missed since the
					* last refill */
	_Atomic uint64_t pool_short[ZP_MAX_PAGES + 1]; /* stores of each
					* length that found none, since the
					* last refill */
	_Atomic uint64_t pool_waits;   /* stores that waited for the refill */
	_Atomic uint64_t pool_misses;  /* stores that failed: none came */
	_Atomic uint64_t pool_wait_ns; /* their waits' time, in total */
	_Atomic uint64_t pool_made;    /* pages the refill made resident */
	bool pool_sync;                /* pool_lock, condvars, handles_lock
					* initialized */
	/*
	 * The descriptor stock (zpool_reserve.c): descriptors of desc_max
	 * bytes that the refill made and touched, for the classes whose
	 * zspage's tail cannot hold theirs; a list through each block's
	 * first word, under pool_lock.
	 */
	void *desc_stock;
	unsigned desc_count;
	size_t desc_max;               /* 0: no class mallocs one */
};

static inline void counter_add(_Atomic uint64_t *c, int64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed)
			      + (uint64_t)d, memory_order_relaxed);
}

/* zpool_reserve.c: a new zspage's malloc'ed descriptor, and its end */
int zp_desc_get(struct zpool *pool, const struct size_class *c,
		struct zspage **out);
void zp_desc_put(struct zpool *pool, struct zspage *zs);
void zp_desc_stock_free(struct zpool *pool);

/* zpool_mem.c: accounting (atomic, no lock needed) */
void zp_mem_note_max(struct zpool *pool);
void zp_mem_add(struct zpool *pool, uint64_t n);
void zp_mem_sub(struct zpool *pool, uint64_t n);
bool zp_mem_reserve(struct zpool *pool, uint64_t n);
uint64_t zp_table_bytes(uint64_t count, size_t unit);

/* zpool_frame.c: frames and their pages; lock-free */
int zp_frame_get(struct zpool *pool, uint32_t pages, uint32_t *frame,
		 uint32_t *resident);
void zp_frame_give(struct zpool *pool, uint32_t frame, uint32_t pages,
		   uint32_t resident);
uint64_t zp_cache_trim(struct zpool *pool, uint64_t target);
bool zp_cache_over(struct zpool *pool);
bool zp_trim_due(struct zpool *pool);
void zp_deadline(struct timespec *t, unsigned ms);
void zp_deadline_from(struct timespec *t, unsigned ms);
void zp_wait_done(struct zpool *pool, const struct timespec *start);
uint64_t zp_cache_cap(struct zpool *pool);
uint64_t zp_cache_keep(const struct zpool *pool);
uint32_t zp_frame_shrink(struct zpool *pool, uint32_t frame, uint32_t pages,
			 uint32_t resident);
void zp_frames_init(struct zpool *pool);
void zp_file_punch(struct zpool *pool, uint64_t off, uint64_t len);
void zp_frame_free_push(struct zpool *pool, uint32_t frame);
void zp_frames_fini(struct zpool *pool);
/* a frame made resident now, whatever the pool's mode (may fault) */
enum { FRAME_FREE_ONLY = 1u << 0, FRAME_TOUCH = 1u << 1 };
int zp_frame_make(struct zpool *pool, uint32_t pages, unsigned how,
		  uint32_t *frame, uint32_t *resident);
uint64_t zp_pool_low(const struct zpool *pool);
int zp_pool_sync_init(struct zpool *pool);

/* zpool_zspage.c: zspages and borrowing (class lock held, but _make) */
int zp_zspage_make(struct zpool *pool, const struct size_class *c,
		   struct zspage **out);
void zp_zspage_add(struct zpool *pool, struct size_class *c, struct zspage *zs);
void zp_zspage_retire(struct zpool *pool, struct size_class *c,
		      struct zspage *zs);
struct size_class *zp_borrow(struct zpool *pool, struct size_class *c,
			     size_t size, uint64_t need);

/* zpool_compact.c (class lock held) */
void zp_compact_auto(struct zpool *pool, struct size_class *c);
/*
 * Defined only by unit tests (the library leaves it NULL): called by
 * compaction after each object it moved out of a zspage that still holds
 * `left` objects, with the class lock held.
 */
void zp_test_moved(struct zpool *pool, unsigned left)
	__attribute__((weak, visibility("hidden")));

/* ---- zspage lists: fullness groups (class lock held) ---- */

static inline uint64_t free_objs(const struct size_class *c)
{
	return c->zspages * c->objs -
	       atomic_load_explicit(&c->objects, memory_order_relaxed);
}

static inline unsigned group_of(const struct size_class *c, unsigned inuse)
{
	return inuse >= c->objs ? NR_GROUPS : inuse * NR_GROUPS / c->objs;
}

/* A list link is a frame number + 1, half a pointer; 0 ends the list. */
static inline struct zspage *zs_at(const struct size_class *c, uint32_t link)
{
	return link ? c->frames[link - 1].zs : NULL;
}

static inline void group_del(struct size_class *c, struct zspage *zs)
{
	struct zspage *prev = zs_at(c, zs->prev), *next = zs_at(c, zs->next);

	if (prev)
		prev->next = zs->next;
	else
		c->group[zs->group] = next;
	if (next)
		next->prev = zs->prev;
}

static inline void group_add(struct size_class *c, struct zspage *zs, unsigned g)
{
	struct zspage *next = c->group[g];

	zs->group = (uint8_t)g;
	zs->prev = 0;
	zs->next = next ? next->frame + 1 : 0;
	if (next)
		next->prev = zs->frame + 1;
	c->group[g] = zs;
}

static inline void regroup(struct size_class *c, struct zspage *zs)
{
	unsigned g = group_of(c, zs->inuse);

	if (g != zs->group && zs->group != ZS_DRAINING) {
		group_del(c, zs);
		group_add(c, zs, g);
	}
}

/* The fullest non-full zspage other than `not`, or NULL. */
static inline struct zspage *fullest(const struct size_class *c, const struct zspage *not)
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

static inline struct zspage *sparsest(const struct size_class *c)
{
	for (unsigned g = 0; g < NR_GROUPS; g++)
		if (c->group[g])
			return c->group[g];
	return NULL;
}

/* ---- object spots and handles (class lock held) ---- */

static inline uint32_t obj_alloc(struct zspage *zs, uint32_t handle)
{
	uint32_t obj_idx = zs->free_head;

	assert(obj_idx != OBJ_NIL && (zs->owner[obj_idx] & OBJ_FREE));
	zs->free_head = (uint16_t)(zs->owner[obj_idx] & OBJ_NIL);
	zs->owner[obj_idx] = handle;
	zs->inuse++;
	return obj_idx;
}

static inline void obj_free(struct zspage *zs, uint32_t obj_idx)
{
	zs->owner[obj_idx] = OBJ_FREE | zs->free_head;
	zs->free_head = (uint16_t)obj_idx;
	zs->inuse--;
}

/*
 * A class keeps up to ZP_HANDLE_HOARD freed handles for its own stores;
 * past that, ZP_HANDLE_BATCH of them go to the pool's spare list, where a
 * class with none takes them before it takes never-used ones (zpool.c).
 */
#define ZP_HANDLE_HOARD (4 * ZP_HANDLE_BATCH)

/* Walk n - 1 links on from h through the cells: the nth handle of a list. */
static inline uint32_t handle_nth(struct zpool *pool, uint32_t h, unsigned n)
{
	while (--n)
		h = (uint32_t)atomic_load_explicit(&pool->cells[h],
						   memory_order_relaxed);
	return h;
}

/* ZP_HANDLE_BATCH of c's freed handles onto the pool's spare list. */
static inline void handles_spare(struct zpool *pool, struct size_class *c)
{
	uint32_t first = c->free_handle;
	uint32_t last = handle_nth(pool, first, ZP_HANDLE_BATCH);

	c->free_handle = (uint32_t)atomic_load_explicit(&pool->cells[last],
							memory_order_relaxed);
	c->nfree_handles -= ZP_HANDLE_BATCH;
	pthread_mutex_lock(&pool->handles_lock);
	atomic_store_explicit(&pool->cells[last], pool->spare_handle,
			      memory_order_relaxed);
	pool->spare_handle = first;
	pthread_mutex_unlock(&pool->handles_lock);
}

static inline void handle_put(struct zpool *pool, struct size_class *c, uint32_t h)
{
	atomic_store_explicit(&pool->cells[h], c->free_handle, memory_order_relaxed);
	c->free_handle = h;
	if (++c->nfree_handles > ZP_HANDLE_HOARD)
		handles_spare(pool, c);
}

/* The head of c's freed handles, taken off its list (there is one). */
static inline uint32_t handle_pop(struct zpool *pool, struct size_class *c)
{
	uint32_t h = c->free_handle;

	c->free_handle = (uint32_t)atomic_load_explicit(&pool->cells[h],
							memory_order_relaxed);
	c->nfree_handles--;
	return h;
}

#endif
