// SPDX-License-Identifier: MIT
/*
 * clock.c - the device's coarse clock and the slots' idle ages, which
 * the store's paths stamp and the tier's policy, write-back and
 * recompression read. The scheme (4-second ticks, 8-bit stamps saturated
 * at AGE_MAX) is described at the top of tier_policy.c.
 */
#include <time.h>

#include "core.h"

uint32_t store_clock(const struct uzram *dev)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)((ts.tv_sec - atomic_load_explicit(&dev->clock0,
			   memory_order_relaxed)) >> TICK_SHIFT) & 0xffu;
}

void slot_age_saturate(struct slot *s, uint32_t now)
{
	uint32_t f = atomic_load_explicit(&s->flags, memory_order_relaxed);
	uint32_t want;

	while (slot_age(f, now) > AGE_MAX) {
		want = (f & ~SLOT_STAMP_MASK) |
		       ((now - AGE_MAX) & 0xffu) << SLOT_STAMP_SHIFT;
		if (atomic_compare_exchange_weak_explicit(&s->flags, &f, want,
				memory_order_relaxed, memory_order_relaxed))
			return;
	}
}
