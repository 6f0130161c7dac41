/* SPDX-License-Identifier: MIT */
/*
 * core.h - the core of the library (src/core/): the device structure, the
 * slot table and its slots, the store (cluster reads and writes), the
 * contents a slot holds and their accounting, the memory limit, the
 * coarse clock, the counters and the write crew. Private to the library.
 *
 * The core calls only base/, zpool/ and zcomp/. It reaches the layers
 * above it (the tier, dedup, a save in progress) through the hooks below
 * (struct store_hooks, struct save_hooks), which those layers' owners
 * install: src/LAYERS lists who may call whom.
 *
 * Each block below names the file that defines it.
 */
#ifndef UZRAM_CORE_H
#define UZRAM_CORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "uzram.h"
#include "base/base.h"

/*
 * The slot (inline, in this header): one entry of the slot table and its
 * lock.
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
 *          bit  7      bank: which of its priority's two codec banks
 *                      made the object (SLOT_OBJ); a priority changes its
 *                      dictionary by filling the bank its objects do not
 *                      use (dict.c)
 *          bits 8..15  access stamp: the device's coarse clock (a tick
 *                      of several seconds) at the last read or write, for
 *                      idle ages (clock.c, tier_policy.c)
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
 * (the shared bit), dictionaries (the bank bit). States 5..7 are free.
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

enum slot_state {
	SLOT_EMPTY = 0, /* never written, or discarded: reads as zeros */
	SLOT_SAME = 1,  /* one 8-byte value repeated over the cluster */
	SLOT_OBJ = 2,   /* a compressed object in the allocator */
	SLOT_HUGE = 3,  /* the cluster kept raw in the allocator */
	SLOT_BACKED = 4, /* the object on the backing store (tier/tier.h) */
};

#define SLOT_STATE_MASK 0x7u
#define SLOT_PRIO_SHIFT 3
#define SLOT_PRIO_MASK (0x3u << SLOT_PRIO_SHIFT)
#define SLOT_IDLE (1u << 5)
#define SLOT_SHARED (1u << 6)
#define SLOT_BANK (1u << 7)
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

/* Waits are counted (base.h); taking a free lock costs nothing more. */
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

static inline unsigned slot_bank(uint32_t flags)
{
	return (flags & SLOT_BANK) ? 1 : 0;
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

/*
 * clock.c: the device's coarse clock and the slots' idle ages.
 */
/* The device's coarse clock: 4-second ticks since open, mod 256. */
#define TICK_SHIFT 2
#define AGE_MAX 128u
uint32_t store_clock(const struct uzram *dev);
/* store_clock(), and on a device with a re-encoder also the foreground I/O
 * it paces itself by (dev->io_ms, reencode.c). */
uint32_t store_clock_io(struct uzram *dev);
/* CLOCK_MONOTONIC_COARSE in milliseconds, the unit of dev->io_ms. */
int64_t store_coarse_ms(void);

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
 * Set a slot's access stamp to tick `stamp` and its idle bit to `idle`,
 * writing the slot only when something changes. The caller holds the lock
 * shared (or exclusively); the stamp and idle bits are the only bits that
 * those sharing the lock change, always with a compare-and-swap.
 */
static inline void slot_set_age(struct slot *s, uint32_t stamp, bool idle)
{
	uint32_t f = atomic_load_explicit(&s->flags, memory_order_relaxed);
	uint32_t want;

	do {
		want = (f & ~(SLOT_STAMP_MASK | SLOT_IDLE)) |
		       (stamp & 0xffu) << SLOT_STAMP_SHIFT |
		       (idle ? SLOT_IDLE : 0);
		if (want == f)
			return;
	} while (!atomic_compare_exchange_weak_explicit(&s->flags, &f, want,
			memory_order_relaxed, memory_order_relaxed));
}

/* Record an access at tick now: stamp it, clear the idle bit. */
static inline void slot_touch_at(struct slot *s, uint32_t now)
{
	slot_set_age(s, now, false);
}

/*
 * Record a read at tick now on a device whose reads are swap-ins
 * (uzram_set_swap_reads(), clock.c): the cluster becomes idle and as old
 * as an age can be, the first the tier and the re-encoder take.
 */
static inline void slot_cool_at(struct slot *s, uint32_t now)
{
	slot_set_age(s, now - AGE_MAX, true);
}

/* Saturate ages past AGE_MAX so the 8-bit stamp never wraps; shared lock. */
void slot_age_saturate(struct slot *s, uint32_t now);

/*
 * stats.c: the device's counters, modelled on zram's mm_stat and io_stat.
 *
 * The store updates them with relaxed atomic adds after each state change;
 * the read path touches none of them unless a read fails, so concurrent
 * readers never share a written cache line here. A snapshot is therefore
 * not a single instant: each counter is exact, their sum is approximate
 * while writes are in flight (as with zram's sysfs files).
 */

struct zpool;

struct stats {
	_Atomic int64_t pages_stored;    /* slots that are not holes */
	_Atomic int64_t compr_data_size;
	_Atomic int64_t same_pages;
	_Atomic int64_t huge_pages;
	_Atomic int64_t pages_unchanged;
	_Atomic int64_t pages_recompressed;
	_Atomic uint64_t failed_reads;
	_Atomic uint64_t failed_writes;
	_Atomic uint64_t invalid_io;
	/* the tier (tier/tier.h) */
	_Atomic int64_t bd_count;        /* pages on the backing store */
	_Atomic int64_t bd_bytes;        /* bytes of their objects */
	_Atomic uint64_t bd_reads, bd_writes;   /* pages */
	_Atomic uint64_t bd_failed_reads, bd_failed_writes;
	_Atomic uint64_t bd_compacted;
	_Atomic uint64_t wb_pages, wt_pages;
	_Atomic uint64_t policy_runs, policy_recomp, policy_wb;
	/* dedup (dedup.c): references past an object's first */
	_Atomic int64_t dedup_pages;     /* pages they name */
	_Atomic int64_t dedup_bytes;     /* bytes of the objects they name */
	_Atomic int64_t bd_dedup_bytes;  /* the same, on the backing store */
};

static inline void stats_addu(_Atomic uint64_t *c, uint64_t delta)
{
	atomic_fetch_add_explicit(c, delta, memory_order_relaxed);
}

static inline void stats_add(_Atomic int64_t *c, int64_t delta)
{
	if (delta)
		atomic_fetch_add_explicit(c, delta, memory_order_relaxed);
}

static inline void stats_inc(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/*
 * Fill a public snapshot from the counters and the allocator's figures;
 * the tier's own figures are added by device.c.
 */
void stats_snapshot(const struct stats *st, struct zpool *pool,
		    uint64_t disksize, uint64_t mem_limit, uint64_t table_bytes,
		    struct uzram_stats *out);

/*
 * Add dedup's counters, taking the bytes it saved out of compr_data_size
 * (in memory) and bd_bytes (on the backing store).
 */
void stats_dedup(const struct stats *st, struct uzram_stats *out);

/*
 * struct uzram: the device, made and closed by device/device.c, shared by
 * every part of the library that works on a device; the cluster I/O on it
 * is the store's (store.c).
 *
 * The table of slots is a directory of chunks of CHUNK_SLOTS slots each,
 * made on first write (store.c explains why). Everything here but
 * chunks_used, mem_limit, the directory's entries and the save's two fields
 * is set by uzram_open() and then only read; the stats are relaxed atomic
 * counters (stats.c).
 */

struct dedup;
struct image_save;
struct zcomp;
struct zcomp_retired;
struct zpool;
struct crew;
struct image_lock;

#define CLUSTER_MIN_SHIFT PAGE_SHIFT
#define CLUSTER_MAX_SHIFT 16

/* Handles are 32-bit: at most one object per page for 2^32 pages. */
#define MAX_PAGES (UZRAM_SIZE_MAX / UZRAM_PAGE_SIZE)

#define CHUNK_SHIFT 14
#define CHUNK_SLOTS (UINT64_C(1) << CHUNK_SHIFT)
#define CHUNK_BYTES (CHUNK_SLOTS * sizeof(struct slot))

/*
 * The store's calls into the layers above it (src/LAYERS). The store names
 * none of them: the device (device/device.c) fills in the members of each
 * layer that is on, before the device is handed out or that layer's
 * thread starts; a member the store finds NULL is a layer that is off.
 * Set once, then only read, without a lock.
 */
struct content;
struct store_scratch;

struct store_hooks {
	/* the tier (tier/tier.c, tier_policy.c): NULL without a backing store */
	void (*make_room)(struct uzram *dev, uint64_t need);
	int (*backed_read)(struct uzram *dev, const struct slot *s,
			   unsigned char *dst, size_t len,
			   unsigned char *scratch);
	int (*write_through)(struct uzram *dev, const void *obj,
			     uint32_t size, size_t len, uint64_t *val);
	void (*backed_free)(struct uzram *dev, uint64_t off, uint32_t len);
	/*
	 * dedup (dedup/dedup.c, dedup_place.c): NULL with dedup off.
	 * share_same: if a stored cluster holds src, take a reference to it
	 * into *c and return true. remember: index the new content c under
	 * hash. drop_object: give back one reference to a stored object,
	 * freeing it with the last. drop_backed: the same for a shared
	 * cluster in the backing store; true when that was the last, and the
	 * caller frees its space.
	 */
	bool (*share_same)(struct uzram *dev, const unsigned char *src,
			   size_t len, uint64_t hash, struct store_scratch *t,
			   struct content *c);
	void (*remember)(struct uzram *dev, const struct content *c,
			 uint64_t hash);
	void (*drop_object)(struct uzram *dev, uint32_t flags, uint32_t handle,
			    uint32_t size);
	bool (*drop_backed)(struct uzram *dev, uint32_t flags, uint64_t off,
			    uint32_t size);
};

/*
 * A save's copy-on-write hook (image/image_save.c): a save stores it in
 * dev->save_hooks (release) before it publishes dev->save, and a writer
 * that finds dev->save set (acquire) calls enter() and, if that returns a
 * save, hand_over() with the cluster's old contents (store.c's
 * cluster_swap_unlock()).
 */
struct image_save;

struct save_hooks {
	struct image_save *(*enter)(struct uzram *dev, uint64_t idx);
	void (*hand_over)(struct uzram *dev, struct image_save *sv,
			  uint64_t idx, const struct content *old, size_t len);
};

struct uzram {
	struct slot *_Atomic *dir;
	/*
	 * A kept store's slot table (device/keep.c), mapped from its file:
	 * chunk i is at table_map + i * CHUNK_SLOTS, and slot_get() publishes
	 * that address in dir instead of mapping a chunk. NULL otherwise.
	 */
	struct slot *table_map;
	struct uzram_keep_info keep;   /* device/keep.c, then only read */
	uint64_t nchunks;
	_Atomic uint64_t chunks_used;
	/* bytes of chunks being made: held out of the allocator (store.c) */
	_Atomic uint64_t table_pending;
	uint64_t nclusters;
	uint64_t size;
	_Atomic uint64_t mem_limit; /* as last set; the pool enforces it */
	unsigned cshift;       /* log2 of the cluster size */
	size_t csize;          /* bytes in a cluster */
	/*
	 * The codecs, comp[prio][bank]: prio 0 is the device's algorithm,
	 * 1..3 the secondary ones for recompression (NULL until added). Each
	 * priority has two banks so that its dictionary can change while
	 * objects made with the previous one are still stored: a slot names
	 * its codec by its priority and bank bits (above), and cur[prio] is
	 * the bank new objects of that priority take. A bank is filled only
	 * while no object names it, under dict_lock (dict.c), and the codec
	 * it held is kept on the retired list until close, as a writer may
	 * still be compressing with it (it then finds its codec stale under
	 * the slot lock and starts again).
	 */
	struct zcomp *_Atomic comp[UZRAM_MAX_RECOMP + 1][2];
	_Atomic unsigned cur[UZRAM_MAX_RECOMP + 1];
	pthread_mutex_t dict_lock;
	struct zcomp_retired *retired;
	struct zpool *pool;
	struct stats stats;
	struct tier *tier;     /* the second tier (tier/tier.h), or NULL */
	struct crew *crew;    /* cfg.threads' pool (core.h), or NULL */
	_Atomic int64_t clock0; /* CLOCK_MONOTONIC_COARSE seconds at open
				 * (atomic only so tests may move it) */
	_Atomic bool swap_reads; /* a read makes its clusters old and idle,
				  * not young, and writes are not compared
				  * (uzram_set_swap_reads(), store.c) */
	/*
	 * Run at the start of each uzram_write() and uzram_write_zeroes()
	 * (uzram_set_write_hook(), store.c): the argument is stored before
	 * the function (release), read after it (acquire).
	 */
	void (*_Atomic write_hook)(void *arg);
	void *_Atomic write_hook_arg;
	/*
	 * A save in progress (image_save.c), or NULL; save_users counts the
	 * writers that may be looking at it (save_hooks below).
	 */
	struct image_save *_Atomic save;
	_Atomic uint64_t save_users;
	const struct save_hooks *_Atomic save_hooks; /* set by the first save */
	/* the lock on the device's image (device/image_lock.c), or NULL */
	struct image_lock *_Atomic image_lock;
	struct dedup *dedup;   /* the index of dedup.c, NULL when off */
	_Atomic uint64_t index_bytes; /* what that index holds (dedup.c) */
	struct store_hooks hooks; /* the layers above the store (above) */
	/*
	 * The re-encoding thread of cfg.fast_algorithm
	 * (recompress/reencode.c), or NULL; while there is one, writes
	 * counts uzram_write() calls, its sign that writes arrive (on a
	 * cache line of its own, away from what readers load).
	 */
	struct reencoder *reenc;
	_Alignas(64) _Atomic uint64_t writes;
	/*
	 * With a re-encoder: when the last uzram_read() or uzram_write()
	 * came (store_coarse_ms()), written only when it changes (once per
	 * coarse tick at most), so readers on other threads share a line
	 * that stays clean; reencode.c naps while it is recent.
	 */
	_Alignas(64) _Atomic int64_t io_ms;
};

/*
 * Bytes chunk i of the table can ever touch: all of it, except for the
 * device's last chunk, which holds only the clusters left (in whole pages).
 */
static inline uint64_t chunk_bytes(const struct uzram *dev, uint64_t i)
{
	uint64_t slots = dev->nclusters - i * CHUNK_SLOTS;

	if (slots >= CHUNK_SLOTS)
		return CHUNK_BYTES;
	return (slots * sizeof(struct slot) + PAGE_MASK) & ~PAGE_MASK;
}

/* Bytes of the slot table alone: the directory and the chunks made so far. */
static inline uint64_t table_bytes_only(struct uzram *dev)
{
	uint64_t used = atomic_load_explicit(&dev->chunks_used,
					     memory_order_relaxed);
	uint64_t last = dev->nchunks - 1;
	uint64_t bytes = dev->nchunks * sizeof(*dev->dir);

	if (used && atomic_load_explicit(&dev->dir[last], memory_order_relaxed))
		return bytes + (used - 1) * CHUNK_BYTES + chunk_bytes(dev, last);
	return bytes + used * CHUNK_BYTES;
}

/*
 * Bytes of the slot table: the directory and the chunks made so far, and
 * the dedup index (dedup.c), which is counted with it.
 */
static inline uint64_t table_bytes(struct uzram *dev)
{
	return atomic_load_explicit(&dev->index_bytes, memory_order_relaxed) +
	       table_bytes_only(dev);
}

/*
 * Whether `more` bytes of table (or dedup index) keep the allocator and
 * the table within mem_limit (mem_limit.c).
 */
bool mem_fits(struct uzram *dev, uint64_t more);

/*
 * Give the allocator what mem_limit leaves after the table and the chunks
 * being made (mem_limit.c); called when any of them changes.
 */
void table_limit_apply(struct uzram *dev);

/* Bytes in cluster idx: the cluster size, except maybe for the last one. */
static inline size_t cluster_len(const struct uzram *dev, uint64_t idx)
{
	uint64_t start = idx << dev->cshift;

	return dev->size - start < dev->csize ? (size_t)(dev->size - start)
					       : dev->csize;
}

/*
 * The codec new objects of a priority take (0 the device's, 1..3
 * recompression's), and its bank for their slot's flags.
 */
static inline const struct zcomp *comp_at(struct uzram *dev, unsigned prio,
					  uint32_t *bank_flag)
{
	unsigned bank = atomic_load_explicit(&dev->cur[prio],
					      memory_order_acquire);

	if (bank_flag)
		*bank_flag = bank ? SLOT_BANK : 0;
	return atomic_load_explicit(&dev->comp[prio][bank],
				    memory_order_acquire);
}

/* The codec that made the object of a slot with these flags. */
static inline const struct zcomp *comp_of(struct uzram *dev, uint32_t flags)
{
	return atomic_load_explicit(&dev->comp[slot_prio(flags)][slot_bank(flags)],
				    memory_order_acquire);
}

/*
 * store.c, content.c, scratch.c, mem_limit.c: cluster I/O on a device
 * (struct uzram, above): the one reader of a slot, the contents a slot
 * holds and their accounting (content.c), the store's per-thread buffers
 * (scratch.c), and walks over the table.
 */

struct zcomp;

/* The contents of a slot, outside the table. */
struct content {
	uint32_t flags;
	uint64_t val;
	int bank;      /* the codec bank of prio 0 that made the object
			 * (struct uzram), or -1 if none did: see store.c's
			 * cluster_commit() */
	const struct zcomp *codec; /* the codec that was in that bank */
};

/*
 * Units whose compressed form is larger than this are kept raw: they would
 * save less than 1/64 of the cluster and still cost a decompression per read.
 * The allocator packs objects at 16-byte granularity, so anything below the
 * limit really occupies about its own size.
 */
#define HUGE_LIMIT(len) ((len) - (len) / 64)

/*
 * Per-thread buffers of cap bytes each, allocated on a thread's first
 * request that needs them, grown (at most once per cluster size, up to
 * 64 KiB) when a device with larger clusters first needs them, and freed
 * when the thread exits: never per request.
 */
struct store_scratch {
	size_t cap;
	unsigned char *cbuf;  /* compressor output */
	unsigned char *plain;  /* read-modify-write, partial reads */
};

/* This thread's buffers, holding at least cap bytes each; NULL: no memory. */
struct store_scratch *store_scratch_get(size_t cap);

/*
 * This thread's buffers and codec contexts for dev, made now rather than
 * at its first request (uzram_thread_prepare()). 0, -ENOMEM or -EIO.
 */
int store_thread_prepare(struct uzram *dev);

/*
 * Read [uoff, uoff + n) of the cluster of len bytes that a slot names into
 * dst, whatever its state, with the codec that made it: the one reader.
 * A whole cluster (n == len) is decoded straight into dst; a part of a
 * compressed or backed one is decoded into the thread's scratch (by
 * codecs that decode in order, only up to uoff + n) and copied out. The
 * caller holds the slot lock, shared or exclusive. 0, -EIO (corrupt) or
 * -ENOMEM.
 */
int slot_read(struct uzram *dev, const struct slot *s, size_t len,
	      size_t uoff, size_t n, unsigned char *dst);

/* Decode the whole cluster of len bytes that a slot names into dst. */
static inline int slot_decode(struct uzram *dev, const struct slot *s,
			      unsigned char *dst, size_t len)
{
	return slot_read(dev, s, len, 0, len, dst);
}

/*
 * table.c: the slot of cluster idx, creating its chunk if needed; NULL
 * with *err -ENOSPC (the chunk would pass the memory limit) or -ENOMEM.
 */
struct slot *slot_get(struct uzram *dev, uint64_t idx, int *err);
/*
 * Make every chunk of the table now and resident (table.c says for what);
 * 0, -ENOSPC (mem_limit cannot hold the table) or -ENOMEM.
 */
int table_make_all(struct uzram *dev);

/* Count contents that hold (sign 1) or held (sign -1) a cluster of len bytes. */
void content_account(struct uzram *dev, const struct content *c,
		     int64_t sign, size_t len);

/*
 * Give back what the old contents of a cluster of len bytes held: free the
 * object, count it out. Called once no slot names it.
 */
void content_release(struct uzram *dev, const struct content *old,
		     size_t len);

/* Free what contents hold, in the allocator or on the backing store. */
void content_free(struct uzram *dev, const struct content *c);

/* The slot of cluster idx, or NULL while its chunk has never been written. */
static inline struct slot *slot_peek(struct uzram *dev, uint64_t idx)
{
	struct slot *chunk = atomic_load_explicit(&dev->dir[idx >> CHUNK_SHIFT],
						  memory_order_acquire);

	return chunk ? &chunk[idx & (CHUNK_SLOTS - 1)] : NULL;
}

/*
 * For walks over the whole table: the first slot at or after cluster *idx
 * whose chunk was ever written, with *idx moved to it; NULL past the end.
 */
static inline struct slot *slot_next(struct uzram *dev, uint64_t *idx)
{
	while (*idx < dev->nclusters) {
		struct slot *s = slot_peek(dev, *idx);

		if (s)
			return s;
		*idx = (*idx | (CHUNK_SLOTS - 1)) + 1;
	}
	return NULL;
}

/*
 * Largest first, as zram's post-processing buckets: recompression and
 * writeback walk the table once per band of object sizes, band k holding
 * sizes in [*lo, *hi): raw clusters, then objects from 3/4, 1/2, 1/4 and
 * 1/8 of a cluster, then the rest. With nbands 1, one band of every size.
 */
#define PP_BANDS 6
static inline void pp_band(size_t csize, int k, int nbands, uint32_t *lo,
			   uint32_t *hi)
{
	const uint32_t lows[PP_BANDS] = {
		(uint32_t)HUGE_LIMIT(csize) + 1, (uint32_t)(csize * 3 / 4),
		(uint32_t)(csize / 2), (uint32_t)(csize / 4),
		(uint32_t)(csize / 8), 0,
	};

	*lo = nbands == 1 ? 0 : lows[k];
	*hi = nbands == 1 || k == 0 ? UINT32_MAX : lows[k - 1];
}

/*
 * crew.c: the write crew, an optional pool of threads that share a large
 * request's clusters with the calling thread.
 */

struct crew;

/*
 * Start n threads (1..UZRAM_MAX_THREADS) and store the pool in *wp. Each
 * thread first calls on_start(arg), if given, whose failure it ignores
 * (the thread then makes what failed at its first job).
 * 0, or a negative errno with nothing started.
 */
int crew_create(unsigned n, int (*on_start)(void *arg), void *arg,
		struct crew **wp);

/* Stop and join the threads; NULL is accepted. No job may be running. */
void crew_destroy(struct crew *w);

/*
 * Call fn(arg, i) for every i in [0, n): on the calling thread and on
 * those of the pool's threads that are free, each i exactly once, in no
 * particular order; returns once every call has returned. Several threads
 * may run jobs at once; the pool's threads serve them in turn.
 *
 * Returns 0, or the error of the failed call with the lowest i, with that
 * i in *failed: every call below it was made and succeeded; calls above it
 * may or may not have been made.
 */
int crew_for(struct crew *w, size_t n, int (*fn)(void *arg, size_t i),
		void *arg, size_t *failed);

#endif
