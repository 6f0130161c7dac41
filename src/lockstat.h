/*
 * lockstat.h - how often the locks of the I/O path made a thread wait,
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
#ifndef UZRAM_LOCKSTAT_H
#define UZRAM_LOCKSTAT_H

#include <pthread.h>
#include <stdint.h>

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

#endif
