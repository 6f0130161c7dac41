/*
 * slot.h - one entry of the page table and its lock.
 *
 * Every cluster of the device (the unit of compression: one page by
 * default, up to 16; see store.c) has a 16-byte slot, as every page has its
 * zram_table_entry in zram:
 *
 *   0            4            8                              16
 *   +------------+------------+-------------------------------+
 *   | lock       | flags      | val                           |
 *   +------------+------------+-------------------------------+
 *
 *   lock   bit 31: held for writing; bits 0..30: readers holding it
 *   flags  bits 0..2   state (enum slot_state)
 *          bits 3..4   priority: which codec of the device made the object
 *                      (0: primary; 1..3: recompression's, store.c)
 *          bit  5      idle: set by uzram_mark_idle(), cleared by the
 *                      next read or write of the cluster (recompress.c)
 *          bit  6      shared (dedup): the object is named by several
 *                      slots; its references are counted by the dedup
 *                      index, keyed by handle (SLOT_OBJ, _HUGE: not set
 *                      on the slot that stored it) or by place (SLOT_BACKED:
 *                      set on every slot naming it), and it is freed
 *                      through the index
 *          bit  7      place: which of its priority's two codec places
 *                      made the object (SLOT_OBJ); a priority changes its
 *                      dictionary by filling the place its objects do not
 *                      use (dict.c)
 *          bits 8..15  access stamp: the device's coarse clock (a tick
 *                      of several seconds) at the last read or write, for
 *                      idle ages (tier_clock.c, tier_policy.c)
 *          bits 16..31 tag (SLOT_OBJ, _HUGE, _BACKED): 16 bits of the XXH3
 *                      hash of the cluster's bytes, so that a rewrite can
 *                      tell almost always, without decoding, that the data
 *                      changed (store.c)
 *   val    SLOT_SAME:        the repeated 8-byte value
 *          SLOT_OBJ, _HUGE:  allocator handle (low 32 bits) and object
 *                            size in bytes (high 32 bits: a 64 KiB
 *                            cluster kept raw fits)
 *          SLOT_BACKED (4):  the object's place on the backing store:
 *                            offset in 16-byte units (low 44 bits, so
 *                            256 TiB) and size in bytes (high 20 bits);
 *                            an object whose size is the cluster's length
 *                            is raw, any other is compressed by its
 *                            priority's codec, as in memory
 *
 * This one format serves every layer that keeps or moves a cluster: the
 * write and read paths, recompression, an image (which records each
 * slot's state, priority, idle bit, stamp and tag with its object's bytes),
 * writeback (OBJ or HUGE becomes BACKED, keeping the other bits) and dedup
 * (the shared bit), dictionaries (the place bit). States 5..7 are free.
 *
 * Lock rules: flags and val are written only with the lock held
 * exclusively, except for the idle bit and the access stamp, which are
 * changed with an atomic OR, AND or compare-and-swap under the shared lock
 * (no writer can be inside then, and those who share the lock only ever
 * change those bits); val is read only with
 * the lock held. flags is atomic so
 * that a reader may look at the state without the lock: a hole needs no
 * lock to read as zeros, and taking one would write to (and so fault in)
 * a page-table page that nothing else has touched. A reader holds the
 * lock shared for as long as it uses the object the slot names, so a writer
 * that swaps in a new object under the exclusive lock may free the old one
 * once it has unlocked: no reader can still be looking at it.
 *
 * Readers of one cluster do not wait for each other. A writer sets the write
 * bit first and then waits for the readers already inside to leave; new
 * readers back off while the bit is set, so writers are not starved.
 */
#ifndef UZRAM_SLOT_H
#define UZRAM_SLOT_H

#include <stdatomic.h>
#include <stdint.h>

#include "lockstat.h"
#include "spin.h"

enum slot_state {
	SLOT_EMPTY = 0, /* never written, or discarded: reads as zeros */
	SLOT_SAME = 1,  /* one 8-byte value repeated over the cluster */
	SLOT_OBJ = 2,   /* a compressed object in the allocator */
	SLOT_HUGE = 3,  /* the cluster kept raw in the allocator */
	SLOT_BACKED = 4, /* the object on the backing store (tier.h) */
};

#define SLOT_STATE_MASK 0x7u
#define SLOT_PRIO_SHIFT 3
#define SLOT_PRIO_MASK (0x3u << SLOT_PRIO_SHIFT)
#define SLOT_IDLE (1u << 5)
#define SLOT_SHARED (1u << 6)
#define SLOT_PLACE (1u << 7)
#define SLOT_STAMP_SHIFT 8
#define SLOT_STAMP_MASK (0xffu << SLOT_STAMP_SHIFT)
#define SLOT_TAG_SHIFT 16
#define SLOT_WRITER (1u << 31)
#define SLOT_SPIN_LIMIT 64u  /* lock waits pause this often, then yield */

struct slot {
	_Atomic uint32_t lock;
	_Atomic uint32_t flags;
	uint64_t val;
};

/* Waits are counted (lockstat.h); taking a free lock costs nothing more. */
static inline void slot_lock_shared(struct slot *s)
{
	unsigned spins = 0;
	uint64_t t0 = 0;

	for (;;) {
		uint32_t v = atomic_fetch_add_explicit(&s->lock, 1,
						       memory_order_acquire);
		if (!(v & SLOT_WRITER)) {
			if (__builtin_expect(t0 != 0, 0))
				lockstat_end(LOCK_SLOT_SHARED, t0);
			return;
		}
		if (!t0)
			t0 = lockstat_begin();
		atomic_fetch_sub_explicit(&s->lock, 1, memory_order_relaxed);
		while (atomic_load_explicit(&s->lock, memory_order_relaxed) &
		       SLOT_WRITER)
			spin_backoff(&spins, SLOT_SPIN_LIMIT);
	}
}

static inline void slot_unlock_shared(struct slot *s)
{
	atomic_fetch_sub_explicit(&s->lock, 1, memory_order_release);
}

static inline void slot_lock(struct slot *s)
{
	unsigned spins = 0;
	uint64_t t0 = 0;

	while (atomic_fetch_or_explicit(&s->lock, SLOT_WRITER,
					memory_order_acquire) & SLOT_WRITER) {
		if (!t0)
			t0 = lockstat_begin();
		spin_backoff(&spins, SLOT_SPIN_LIMIT);
	}
	while (atomic_load_explicit(&s->lock, memory_order_acquire) !=
	       SLOT_WRITER) {
		if (!t0)
			t0 = lockstat_begin();
		spin_backoff(&spins, SLOT_SPIN_LIMIT);
	}
	if (__builtin_expect(t0 != 0, 0))
		lockstat_end(LOCK_SLOT, t0);
}

static inline void slot_unlock(struct slot *s)
{
	atomic_fetch_and_explicit(&s->lock, ~SLOT_WRITER, memory_order_release);
}

static inline uint32_t slot_flags(const struct slot *s)
{
	return atomic_load_explicit(&s->flags, memory_order_acquire);
}

static inline void slot_set_flags(struct slot *s, uint32_t flags)
{
	atomic_store_explicit(&s->flags, flags, memory_order_release);
}

static inline enum slot_state slot_state(const struct slot *s)
{
	return (enum slot_state)(slot_flags(s) & SLOT_STATE_MASK);
}

/*
 * The cluster is being used: clear its idle bit. Only a store when the bit
 * is set, so readers do not write to the slot between two idle marks.
 * The caller holds the lock, shared or exclusive.
 */
static inline void slot_touch(struct slot *s)
{
	if (atomic_load_explicit(&s->flags, memory_order_relaxed) & SLOT_IDLE)
		atomic_fetch_and_explicit(&s->flags, ~SLOT_IDLE,
					  memory_order_relaxed);
}

static inline unsigned slot_prio(uint32_t flags)
{
	return (flags & SLOT_PRIO_MASK) >> SLOT_PRIO_SHIFT;
}

static inline unsigned slot_place(uint32_t flags)
{
	return (flags & SLOT_PLACE) ? 1 : 0;
}

static inline uint32_t slot_tag(uint32_t flags)
{
	return flags >> SLOT_TAG_SHIFT;
}

static inline uint32_t slot_handle(const struct slot *s)
{
	return (uint32_t)s->val;
}

static inline uint32_t slot_size(const struct slot *s)
{
	return (uint32_t)(s->val >> 32);
}

#endif
