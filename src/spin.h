/*
 * spin.h - waiting for another thread's short critical section: the one
 * spin-then-yield backoff of the slot locks (slot.h) and the allocator's
 * pins and migrations (zpool*.c).
 */
#ifndef UZRAM_SPIN_H
#define UZRAM_SPIN_H

#include <sched.h>

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

#endif
