/*
 * zpool_impl.h - what zpool.c (objects, pins, compaction) and zpool_region.c
 * (address space, size classes, accounting) share. Private to those two.
 * The layout and the lock rules are described at the top of zpool.c.
 */
#ifndef UZRAM_ZPOOL_IMPL_H
#define UZRAM_ZPOOL_IMPL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zpool.h"

#define ZP_PAGE_SHIFT 12
#define ZP_PAGE (1u << ZP_PAGE_SHIFT)
#define ZP_FRAME_SHIFT 16
#define ZP_FRAME (1u << ZP_FRAME_SHIFT)
#define ZP_MAX_PAGES (ZP_FRAME / ZP_PAGE)
#define ZP_ALIGN 16u
#define ZP_FINE_LIMIT 4096u          /* classes 16 bytes apart up to here */
#define ZP_MAX_OBJECT ZP_FRAME
#define ZP_MAX_CANDIDATES 512
#define BORROW_WASTE 8u              /* 64ths of the size, see borrow() */
#define PICK_OBJS 512u               /* see pick_pages() */

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
#define MIGRATE_PATIENCE (SPIN_LIMIT + 1024u)
#define AUTO_COMPACT_BUDGET 2u       /* zspages per zpool_free() */
#define AUTO_COMPACT_PATIENCE (SPIN_LIMIT + 16u)
#define SPARE_MIN_PAGES 64u          /* see spare_keep() */
#define SPARE_SHARE_SHIFT 8          /* spares up to mem_used / 256 */

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

struct frame {
	_Atomic uint32_t pin;       /* readers | PIN_MIGRATE */
	_Atomic uint32_t next_free; /* free: frame stack link, frame + 1,
				     * 0 ends; in use: the class's index */
	struct zspage *zs;          /* NULL while free */
};

struct zspage {
	uint32_t prev, next;        /* in class->group[group], frame + 1 */
	uint32_t frame;
	uint16_t inuse;
	uint16_t free_head;         /* first free slot or SLOT_NIL */
	uint8_t group;
	uint32_t owner[];           /* handle, or SLOT_FREE | next free slot */
};

struct size_class {
	pthread_mutex_t lock;
	struct zspage *group[NR_GROUPS + 1];
	struct zspage *spare;       /* empty zspages kept for reuse, linked
				     * by ->next; see spare_keep() */
	struct frame *frames;       /* the pool's, to follow list links */
	uint32_t free_handle;       /* 0: none */
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

	_Atomic uint64_t frame_stack __attribute__((aligned(64)));
	_Atomic uint64_t frame_bump;
	_Atomic uint64_t handle_bump;

	_Atomic uint64_t mem_used __attribute__((aligned(64)));
	_Atomic uint64_t mem_used_max;
	_Atomic uint64_t limit;
	_Atomic uint64_t pages_compacted;
	_Atomic uint64_t spare_pages;  /* in all classes' spare lists */
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

/* zpool_region.c: accounting (atomic, no lock needed) */
void zp_mem_note_max(struct zpool *pool);
void zp_mem_add(struct zpool *pool, uint64_t n);
void zp_mem_sub(struct zpool *pool, uint64_t n);
bool zp_mem_reserve(struct zpool *pool, uint64_t n);
uint64_t zp_table_bytes(uint64_t count, size_t unit);

/* zpool_region.c: frames, lock-free; -1 when the region is full */
int64_t zp_frame_get(struct zpool *pool);
void zp_frame_put(struct zpool *pool, uint32_t f);

#endif
