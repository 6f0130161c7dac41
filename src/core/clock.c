// SPDX-License-Identifier: MIT
/*
 * clock.c - the device's coarse clock and the slots' idle ages, which
 * the store's paths stamp and the tier's policy, write-back and
 * recompression read. The scheme (4-second ticks, 8-bit stamps saturated
 * at AGE_MAX) is described at the top of tier_policy.c. On a device with a
 * re-encoder, reads and writes also note the time of the last I/O here
 * (store_clock_io()), by which the re-encoder paces itself (reencode.c).
 */
#include <time.h>

#include "core.h"

static uint32_t ticks_at(const struct uzram *dev, const struct timespec *ts)
{
	return (uint32_t)((ts->tv_sec - atomic_load_explicit(&dev->clock0,
			   memory_order_relaxed)) >> TICK_SHIFT) & 0xffu;
}

static int64_t ms_at(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

uint32_t store_clock(const struct uzram *dev)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ticks_at(dev, &ts);
}

int64_t store_coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ms_at(&ts);
}

uint32_t store_clock_io(struct uzram *dev)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	if (dev->reenc) {
		int64_t ms = ms_at(&ts);

		/* a store only when the coarse clock moved: the line stays
		 * shared between readers in between */
		if (atomic_load_explicit(&dev->io_ms, memory_order_relaxed) != ms)
			atomic_store_explicit(&dev->io_ms, ms,
					      memory_order_relaxed);
	}
	return ticks_at(dev, &ts);
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
