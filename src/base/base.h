/* SPDX-License-Identifier: MIT */
/*
 * base.h - the bottom layer of the library (src/base/): what every other
 * subsystem uses and that uses none of them. The page's size, the
 * per-thread error message (error.c), the lock-wait counters
 * (lockstat.c), the spin-then-yield wait (inline), the per-thread
 * cache key (thread_cache.c) and the start of its threads (thread_start.c). Private to the library.
 *
 * Each block below names the file that defines it.
 */
#ifndef UZRAM_BASE_H
#define UZRAM_BASE_H

#include <stdint.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "uzram.h"

/*
 * The page: the unit the device's size, its clusters, the slot
 * table and the allocator's zspages are counted in. One definition for
 * the whole library; it matches the public UZRAM_PAGE_SIZE.
 */

#define PAGE_SHIFT 12
#define PAGE UZRAM_PAGE_SIZE
#define PAGE_MASK ((uint64_t)PAGE - 1)

_Static_assert(PAGE == 1u << PAGE_SHIFT, "PAGE_SHIFT and UZRAM_PAGE_SIZE differ");

/* madvise()'s populate, for the headers of a libc older than Linux 5.14 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/*
 * error.c: the library's per-thread error message.
 *
 * Functions that return a negative errno also record, with uzram_set_error(),
 * a message saying what failed and on which input; uzram_last_error() hands
 * it to the caller. The buffer is thread-local, so no lock is involved.
 */

/* Record a message for the calling thread and return err (a -errno). */
int uzram_set_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * lockstat.c: how often the locks of the I/O path made a thread wait,
 * and for how long, as zram's debug_stat and the lock figures its
 * decompression-stream patches were judged by. Private to the library.
 *
 * Only waits are counted: a lock taken at once costs nothing here, so the
 * fast paths stay as they were. A thread that has to wait reads the clock
 * before and after and adds to its own counters (lockstat.c), so that even
 * a waiting reader writes no cache line another thread writes; the figures
 * are summed over every thread, live or exited, when read. They are the
 * process's: every device of the process counts in them.
 */

enum lock_kind {
	LOCK_SLOT,         /* a slot's lock, exclusive (writers) */
	LOCK_SLOT_SHARED,  /* a slot's lock, shared (readers) */
	LOCK_CLASS,        /* an allocator size class's mutex */
	LOCK_FRAME,        /* compaction, for a frame's pins to drain */
	LOCK_KINDS
};

struct lock_counts {
	uint64_t waits[LOCK_KINDS];
	uint64_t wait_ns[LOCK_KINDS];
};

/* The clock, in ns, when a wait starts. */
uint64_t lockstat_begin(void);

/* Count a wait of kind k that started at t0 (lockstat_begin()). */
void lockstat_end(enum lock_kind k, uint64_t t0);

/* The sums over every thread of the process so far. */
void lockstat_sum(struct lock_counts *out);

/* pthread_mutex_lock(), counting a wait if the mutex was taken. */
static inline void lockstat_mutex_lock(pthread_mutex_t *m, enum lock_kind k)
{
	uint64_t t0;

	if (__builtin_expect(!pthread_mutex_trylock(m), 1))
		return;
	t0 = lockstat_begin();
	pthread_mutex_lock(m);
	lockstat_end(k, t0);
}

/*
 * The spin wait (inline, in this header): waiting for another thread's
 * short critical section, the one spin-then-yield backoff of the slot
 * locks (core.h) and the allocator's pins and migrations (zpool/).
 */

/* Tell the CPU this is a spin-wait loop (no-op where it has no hint). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/*
 * One more round of a wait: a CPU pause for the first `limit` rounds
 * (counted in *spins, which the caller starts at 0), then a yield of the
 * CPU, so that a waiter on a descheduled holder lets it run.
 */
static inline void spin_backoff(unsigned *spins, unsigned limit)
{
	if (++*spins < limit)
		cpu_relax();
	else
		sched_yield();
}

/*
 * thread_start.c: start a thread of the library running fn(arg), with
 * every signal blocked (they are the program's), named name (NULL: not
 * named). 0, or a negative errno from pthread_create().
 */
int thread_start(pthread_t *th, void *(*fn)(void *), void *arg,
		 const char *name);

/*
 * thread_cache.c: per-thread caches: an object a thread makes on its
 * first call that needs it, keeps for its later calls, and frees when it
 * exits.
 *
 * The owner keeps the fast path, a _Thread_local pointer it reads before
 * anything else; this helper is the slow path that the pointer's first
 * setting takes: it creates the pthread key once (any thread, any time)
 * and registers the object, so that the key's destructor frees it when
 * the thread exits. Used by zcomp.c (codec contexts) and scratch.c
 * (the store's buffers, store_scratch_get()).
 */

struct thread_cache {
	void (*destroy)(void *obj);     /* frees an object at thread exit */
	_Atomic int ready;              /* key made, or err set */
	int err;                        /* pthread_key_create()'s error */
	pthread_key_t key;
};

#define THREAD_CACHE_INIT(destroy_fn) { .destroy = (destroy_fn) }

/*
 * Register obj as the calling thread's object of cache c, replacing the
 * one registered before (which the caller frees, if it wants to). Returns
 * 0, or a positive error number (from pthread) and registers nothing.
 */
int thread_cache_set(struct thread_cache *c, void *obj);

#endif
