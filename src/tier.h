/*
 * tier.h - the second tier of a device: the backing store, the space on
 * it (segments, tier.c), writeback (writeback.c) and the policy thread
 * with idle ages (tier_policy.c). Private to the library.
 *
 * Space on the backing store is a log of 1 MiB segments:
 *
 *   backing store  | seg 0 | seg 1 | seg 2 | seg 3 | ...
 *                    FULL    OPEN    FREE    CLEAN
 *   a segment:     [obj|obj|obj|pad|obj ... fill ...        ]
 *                   objects appended at 16-byte alignment
 *
 * Two heads append: head 0 for writeback and compaction (which hold
 * tier->wb_lock, so only one appends at a time), head 1 for write-through
 * from any writer. A head takes the lowest free segment, so a file grows
 * only as far as it must. Each segment counts its live bytes, space
 * reserved for a write in flight included, so a segment cannot be reused
 * under a write; one whose live bytes fall to 0 is free again (and its
 * bytes given back to the target). Compaction marks its victims CLEAN so
 * that they are neither freed nor reused while their objects move, then
 * frees them.
 *
 * Lock rules: space->lock guards the segment table and the heads; it is
 * taken under a slot lock (never the reverse) and held for no I/O except
 * the discard of a freed segment. wb_lock serialises writeback, compaction
 * and the policy's steps; it is taken with no slot lock held.
 */
#ifndef UZRAM_TIER_H
#define UZRAM_TIER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "backing.h"
#include "slot.h"

struct uzram;

#define SEG_SHIFT 20
#define SEG_BYTES (UINT64_C(1) << SEG_SHIFT)
#define TIER_HEADS 2
#define HEAD_WB 0
#define HEAD_THROUGH 1

/* SLOT_BACKED's val: 16-byte units in the low 44 bits, size above. */
#define BACKED_OFF_BITS 44

static inline uint64_t backed_val(uint64_t off, uint32_t size)
{
	return (uint64_t)size << BACKED_OFF_BITS | off >> 4;
}

static inline uint64_t backed_off(uint64_t val)
{
	return (val & ((UINT64_C(1) << BACKED_OFF_BITS) - 1)) << 4;
}

static inline uint32_t backed_size(uint64_t val)
{
	return (uint32_t)(val >> BACKED_OFF_BITS);
}

static inline uint32_t round16(uint32_t n)
{
	return (n + 15) & ~UINT32_C(15);
}

enum seg_state { SEG_FREE, SEG_OPEN, SEG_FULL, SEG_CLEAN };

struct space {
	pthread_mutex_t lock;
	uint64_t nsegs;
	uint32_t *live;           /* live (and reserved) bytes per segment */
	uint8_t *state;           /* enum seg_state */
	uint64_t head[TIER_HEADS];  /* the open segment of each head ... */
	uint32_t fill[TIER_HEADS];  /* ... and the bytes appended to it */
	bool open[TIER_HEADS];
	uint64_t used;            /* segments not FREE */
};

struct tier {
	struct backing *b;
	struct space sp;
	pthread_mutex_t wb_lock;
	_Atomic bool wb_limit_on;
	_Atomic uint64_t wb_limit;   /* pages left while wb_limit_on */
	/* the policy (tier_policy.c) */
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;        /* guards stop and kick with cond */
	pthread_cond_t cond;
	bool stop, kick;
	unsigned high, low;          /* watermarks, percent of mem_limit */
	_Atomic uint32_t last_aging; /* the clock at the last aging walk */
};

int tier_open(struct uzram *dev, const char *target, unsigned high,
	      unsigned low);
void tier_close(struct uzram *dev);

/* Reserve len bytes (a multiple of 16) on a head: 0 and *off, or -ENOSPC. */
int space_alloc(struct space *sp, unsigned head, uint32_t len, uint64_t *off);
/* Give back len bytes at off (from space_alloc); frees emptied segments. */
void space_free(struct tier *t, uint64_t off, uint32_t len);
/* Bytes held: segments not free. */
uint64_t space_used(struct space *sp);

/*
 * Read the backed cluster that slot s names into dst (len bytes). The
 * caller holds the slot lock; scratch holds at least len bytes.
 * 0 or -EIO (counted).
 */
int tier_read(struct uzram *dev, const struct slot *s, unsigned char *dst,
	      size_t len, unsigned char *scratch);

/*
 * Write-through: put an object of size bytes (raw if size == len) on the
 * backing store because memory is full; fills *val. 0, or -ENOSPC (both
 * tiers full) or -EIO, counted.
 */
int tier_write_through(struct uzram *dev, const void *obj, uint32_t size,
		       size_t len, uint64_t *val);

/* The policy thread: started by tier_open(), stopped by tier_close(). */
int tier_policy_start(struct uzram *dev);
void tier_policy_stop(struct uzram *dev);
/* Wake the policy thread: memory is full. */
void tier_kick(struct tier *t);

/* Move clusters out until memory is below low; the policy's step. */
void tier_policy_step(struct uzram *dev);
/*
 * The same, run by a writer that needs need bytes of memory under the
 * limit and cannot write through (a chunk of the page table): until memory
 * is under the low watermark and need bytes under the limit, or nothing
 * more can go. The caller holds no slot lock.
 */
void tier_make_room(struct uzram *dev, uint64_t need);

/*
 * The internals of uzram_writeback(), for the policy too: clusters in
 * [first, last] matching flags, stamps at least min_age ticks old,
 * until max_pages pages or free_bytes bytes of memory were moved (0: no
 * bound). The caller holds wb_lock. Pages moved, or a negative errno.
 */
struct wb_params {
	unsigned flags;
	uint64_t first, last;        /* clusters */
	uint64_t max_pages;
	uint64_t free_bytes;
	unsigned min_age;            /* ticks; 0: any */
};
long writeback_run(struct uzram *dev, const struct wb_params *p);
long backing_compact_locked(struct uzram *dev, bool all);
/* Whether the backing store holds more than about twice the live bytes. */
bool backing_needs_compaction(struct uzram *dev);
/* uzram_recompress() of clusters at least min_age ticks old (recompress.c). */
long recompress_run(struct uzram *dev, int prio, unsigned flags,
		    uint32_t threshold, unsigned min_age);

/* The device's coarse clock: 4-second ticks since open, mod 256. */
#define TICK_SHIFT 2
#define AGE_MAX 128u
uint32_t tier_clock(const struct uzram *dev);

static inline unsigned slot_age(uint32_t flags, uint32_t now)
{
	return (now - ((flags & SLOT_STAMP_MASK) >> SLOT_STAMP_SHIFT)) & 0xffu;
}

/*
 * Whether a walk that re-encodes or moves objects takes a cluster whose
 * slot has flags f: an object in memory (SLOT_OBJ or SLOT_HUGE), and raw
 * if huge is asked, idle-marked if idle is, at least min_age ticks old if
 * min_age is set. The selection recompress.c and writeback.c share, each
 * adding its own conditions.
 */
static inline bool slot_selected(uint32_t f, bool huge, bool idle,
				 unsigned min_age, uint32_t now)
{
	enum slot_state state = (enum slot_state)(f & SLOT_STATE_MASK);

	return (state == SLOT_OBJ || state == SLOT_HUGE) &&
	       (!huge || state == SLOT_HUGE) &&
	       (!idle || (f & SLOT_IDLE)) &&
	       (!min_age || slot_age(f, now) >= min_age);
}

/*
 * Record an access at tick now: set the stamp, clear the idle bit. Writes
 * the slot only when something changes. The caller holds the lock shared
 * (or exclusively); the stamp and idle bits are the only bits that those
 * sharing the lock change, always with a compare-and-swap.
 */
static inline void slot_touch_at(struct slot *s, uint32_t now)
{
	uint32_t f = atomic_load_explicit(&s->flags, memory_order_relaxed);
	uint32_t want;

	do {
		want = (f & ~(SLOT_STAMP_MASK | SLOT_IDLE)) |
		       (now << SLOT_STAMP_SHIFT);
		if (want == f)
			return;
	} while (!atomic_compare_exchange_weak_explicit(&s->flags, &f, want,
			memory_order_relaxed, memory_order_relaxed));
}

/* Saturate ages past AGE_MAX so the 8-bit stamp never wraps; shared lock. */
void slot_age_saturate(struct slot *s, uint32_t now);

#endif
