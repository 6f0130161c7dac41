// SPDX-License-Identifier: MIT
/*
 * clock.c - the device's coarse clock and the slots' idle ages, which
 * the store's paths stamp and the tier's policy, write-back and
 * recompression read. The scheme (4-second ticks, 8-bit stamps saturated
 * at AGE_MAX) is described at the top of tier_policy.c. On a device with a
 * re-encoder, reads and writes also note the time of the last I/O here
 * (store_clock_io()), by which the re-encoder paces itself (reencode.c).
 *
 * A read makes its clusters young, as in zram, except on a device whose
 * reads are swap-ins (uzram_set_swap_reads()): there it makes them old.
 * The kernel frees most swap slots right after the swap-in that read them
 * (on a write fault, or once swap is half full) and tells only in-kernel
 * drivers (swap_slot_free_notify); a ublk or NBD device hears of a freed
 * slot only when its whole 1 MiB swap cluster is free (doc/block-device.md,
 * "What the kernel tells a swap device of freed slots"). So a cluster
 * read by a swap-in is most likely a dead copy, and a cluster written and
 * not read since most likely a page the kernel will want back: the tier
 * writes back, and the re-encoder packs, the first kind first. A page the
 * kernel does keep in swap after reading it (a read fault under half
 * full, a readahead page never used) costs one read of the backing store
 * if it is swapped in again.
 */
#include <errno.h>
#include <time.h>

#include "uzram.h"
#include "base/base.h"
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

UZRAM_API int uzram_set_swap_reads(struct uzram *dev, int on)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "set_swap_reads: NULL device");
	atomic_store_explicit(&dev->swap_reads, on != 0, memory_order_relaxed);
	return 0;
}
