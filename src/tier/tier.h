/* SPDX-License-Identifier: MIT */
/*
 * tier.h - the second tier of a device (src/tier/): the backing store
 * (backing.c), the space on it (tier.c), the tier's lifetime and its
 * policy thread (tier_policy.c), and writeback with the backing store's
 * compaction (writeback.c, wb_batch.c, whose internals are tier_impl.h's).
 * Private to the library.
 *
 * The store calls none of these by name: the device installs the tier's
 * hooks (struct store_hooks, core.h; device_tier_open()). Each block
 * below names the file that defines it.
 */
#ifndef UZRAM_TIER_H
#define UZRAM_TIER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>

#include "core/core.h"

/*
 * backing.c: the backing store of a device's second tier: one open
 * target, a regular file, a block device or an NBD export, behind a small
 * table of operations (backing.c). Private to the library.
 *
 * Every operation is positional and thread-safe; none keeps state between
 * calls but the target itself. Errors are negative errnos: -EIO for a
 * failed transfer (including a vanished NBD server), -ENOSPC when the file
 * system under a file is full.
 *
 * Writes can also be asynchronous, so that writeback keeps several in
 * flight: backing_submit() starts one and backing_wait() ends it. A file
 * or a block device hands them to a small pool of writer threads (started
 * at the first submit); an NBD export sends them with libnbd's aio calls
 * on the handle the synchronous calls share, and backing_wait() drives the
 * handle until the write's reply came.
 */

struct backing;

/*
 * One asynchronous write. The caller fills buf, len and off and keeps the
 * struct and buf untouched from backing_submit() to backing_wait().
 */
struct backing_aio {
	const void *buf;
	size_t len;
	uint64_t off;
	/* private to backing.c */
	int ret;
	bool failed;                  /* a fault injected (fail_writes) */
	bool done;                    /* the writer pool's, under its lock */
	int64_t cookie;               /* nbd */
	struct backing_aio *next;     /* the writer pool's queue */
};

struct backing_ops {
	int (*pread)(struct backing *b, void *buf, size_t len, uint64_t off);
	int (*pwrite)(struct backing *b, const void *buf, size_t len,
		      uint64_t off);
	/* Give the space of a range back (a hole, a trim); may do nothing. */
	void (*discard)(struct backing *b, uint64_t len, uint64_t off);
	/* Start a write: 0, or a negative errno and nothing in flight. */
	int (*submit)(struct backing *b, struct backing_aio *io);
	/* Wait for a submitted write: its result. */
	int (*wait)(struct backing *b, struct backing_aio *io);
	void (*close)(struct backing *b);
};

struct backing {
	const struct backing_ops *ops;
	uint64_t capacity;   /* bytes the tier may use */
	const char *kind;    /* "file", "block device", "nbd" */
	/*
	 * Tests only: the next fail_reads reads, or fail_writes writes after
	 * pass_writes more that succeed, fail with -EIO (an asynchronous one
	 * at its wait, as a real failure would).
	 */
	_Atomic int fail_reads, fail_writes, pass_writes;
};

/*
 * Open target: "nbd://..." or "nbd+unix://..." through libnbd, else a path
 * (a block device, or a regular file, created if missing, which must be
 * empty: the tier owns it). want is the capacity a file may grow to; a
 * block device or an export offers its size. flags: UZRAM_BACKING_BLOCKS
 * allocates a file's want bytes at once and writes them on the blocks
 * under it (backing_blocks.c). Returns 0 and *out, or a negative errno
 * with the message set (uzram_set_error).
 */
int backing_open(const char *target, uint64_t want, uint64_t flags,
		 struct backing **out);
void backing_close(struct backing *b);          /* NULL is accepted */

int backing_pread(struct backing *b, void *buf, size_t len, uint64_t off);
int backing_pwrite(struct backing *b, const void *buf, size_t len,
		   uint64_t off);

/*
 * Start an asynchronous write of io->len bytes at io->off from io->buf:
 * 0, and backing_wait() must follow; or a negative errno (nothing in
 * flight, no wait). Safe from any thread; a given io is waited for by
 * the thread that submitted it.
 */
int backing_submit(struct backing *b, struct backing_aio *io);
/* Wait for a write started by backing_submit(): 0 or a negative errno. */
int backing_wait(struct backing *b, struct backing_aio *io);

/*
 * backing_blocks.c: a regular file used as the kernel uses a swap file:
 * allocated whole, mapped, and written on its block device with O_DIRECT,
 * never through its file system. blockmap_open() takes the open, empty
 * file fd (the caller keeps it) and its size to allocate; 0 and *out, or
 * a negative errno with the error set and the file empty again. The reads
 * and writes are positional and thread-safe, as struct backing_ops'.
 */
struct blockmap;

int blockmap_open(int fd, const char *path, uint64_t size,
		  struct blockmap **out);
int blockmap_pread(struct blockmap *m, void *buf, size_t len, uint64_t off);
int blockmap_pwrite(struct blockmap *m, const void *buf, size_t len,
		    uint64_t off);
/* The calling thread's bounce buffer made now: 0 or -ENOMEM. */
int blockmap_thread_prepare(void);
/*
 * Whether the file fd holds nothing written through its file system: all
 * of it unwritten extents or holes, as a file on its blocks is that a
 * server left when it died (it reads as zeros). Such a file is taken
 * over; any other that is not empty is not the tier's to overwrite.
 */
bool blockmap_left_over(int fd, const char *path);
void blockmap_close(struct blockmap *m);        /* NULL is accepted */

/*
 * backing_guard.c: the file immutable while the tier uses it, as the
 * kernel's S_SWAPFILE guards a swap file. blockmap_guard() says whether
 * fd is guarded now (not without CAP_LINUX_IMMUTABLE); blockmap_unguard()
 * ends it. blockmap_take_guarded() is for a file open() refused with
 * EPERM: one a dead server left guarded is opened for writing, its guard
 * off (an fd; blockmap_left_over() still decides whether it is taken
 * over); any other is refused (-errno, the error set) and left as it is.
 */
bool blockmap_guard(int fd);
void blockmap_unguard(int fd);
int blockmap_take_guarded(const char *path);

/*
 * Make the calling thread ready to move bytes to and from b with no
 * allocation on the way (a file on its blocks: its bounce buffer); 0 or
 * -ENOMEM. Nothing to do for the other kinds.
 */
int backing_thread_prepare(struct backing *b);

static inline void backing_discard(struct backing *b, uint64_t len,
				   uint64_t off)
{
	b->ops->discard(b, len, off);
}

/*
 * tier.c: the second tier of a device: the backing store, the space on
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

struct uzram;

#define SEG_SHIFT 20
#define SEG_BYTES (UINT64_C(1) << SEG_SHIFT)
#define TIER_HEADS 2
#define HEAD_WB 0
#define HEAD_THROUGH 1

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

/*
 * Open the tier of dev on target (flags: uzram_config.backing_flags, for
 * backing_open()) with watermarks high and low (percent of mem_limit; 0:
 * the defaults). 0, or a negative errno with the error set;
 * either way tier_close() undoes what was done. The caller then installs
 * the tier's hooks (device_tier_open(), device/device.c) and starts the
 * policy thread with tier_policy_start().
 */
int tier_open(struct uzram *dev, const char *target, uint64_t flags,
	      unsigned high, unsigned low);
void tier_close(struct uzram *dev);

/* Reserve len bytes (a multiple of 16) on a head: 0 and *off, or -ENOSPC. */
int space_alloc(struct space *sp, unsigned head, uint32_t len, uint64_t *off);
/* Give back len bytes at off (from space_alloc); frees emptied segments. */
void space_free(struct tier *t, uint64_t off, uint32_t len);
/* Bytes held: segments not free. */
uint64_t space_used(struct space *sp);
/* 0 if dev (not NULL) has a tier; else the error for the call named what. */
int tier_need(struct uzram *dev, const char *what);
/* space_free() of dev's tier: the store's backed_free hook. */
void tier_free(struct uzram *dev, uint64_t off, uint32_t len);
/* backing_thread_prepare() of dev's tier, if it has one: 0 or -ENOMEM. */
int tier_thread_prepare(struct uzram *dev);

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

/* tier_policy.c: the policy thread, started once the hooks are in, stopped
 * by tier_close(). */
int tier_policy_start(struct uzram *dev);
void tier_policy_stop(struct uzram *dev);
/* Wake the policy thread: memory is full. */
void tier_kick(struct tier *t);

/* Move clusters out until memory is below low; the policy's step. */
void tier_policy_step(struct uzram *dev);
/*
 * The same, run by a writer that needs need bytes of memory under the
 * limit and cannot write through (a chunk of the slot table): until memory
 * is under the low watermark and need bytes under the limit, or nothing
 * more can go. The caller holds no slot lock.
 */
void tier_make_room(struct uzram *dev, uint64_t need);

/*
 * writeback.c: the internals of uzram_writeback(), for the policy too:
 * clusters in [first, last] matching flags, stamps at least min_age ticks
 * old, until max_pages pages or free_bytes bytes of memory were moved (0:
 * no bound). The caller holds wb_lock. Pages moved, or a negative errno.
 */
struct wb_params {
	unsigned flags;
	uint64_t first, last;        /* clusters */
	uint64_t max_pages;
	uint64_t free_bytes;
	unsigned min_age;            /* ticks; 0: any */
};
long writeback_run(struct uzram *dev, const struct wb_params *p);

/*
 * backing_compact.c: compact the backing store (the caller holds wb_lock):
 * segments at most half live, or below 3/4 with all. Bytes freed, or a
 * negative errno.
 */
long backing_compact_locked(struct uzram *dev, bool all);
/* Whether the backing store holds more than about twice the live bytes. */
bool backing_needs_compaction(struct uzram *dev);

#endif
