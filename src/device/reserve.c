// SPDX-License-Identifier: MIT
/*
 * reserve.c - uzram_reserve(): the allocator's memory made resident before
 * it is needed (see uzram.h). Only the allocator holds a reserve; the page
 * table's chunks are allocated as the device fills (mem_limit covers both),
 * but in the no-fault mode, which makes them all at once.
 * uzram_set_refill(), uzram_refill(): the no-fault pool on top of it
 * (src/zpool/zpool_reserve.c). uzram_thread_prepare(): what a thread that
 * serves such a device would allocate at its first request, made before
 * (src/core/scratch.c).
 */
#include <errno.h>

#include "core/core.h"
#include "base/base.h"
#include "tier/tier.h"
#include "zpool/zpool.h"

int uzram_reserve(struct uzram *dev, uint64_t bytes)
{
	int r;

	if (!dev)
		return -EINVAL;
	r = zpool_reserve(dev->pool, bytes);
	if (r == -ENOSPC)
		return uzram_set_error(r, "reserve of %llu bytes: the memory limit "
				       "or the allocator's space came first",
				       (unsigned long long)bytes);
	if (r)
		return uzram_set_error(r, "reserve of %llu bytes: out of memory",
				       (unsigned long long)bytes);
	return 0;
}

UZRAM_API int uzram_set_refill(struct uzram *dev, uint64_t min, uint64_t max,
			       unsigned wait_ms)
{
	int r;

	if (!dev)
		return uzram_set_error(-EINVAL, "set_refill: NULL device");
	/* the table first: a write must not make a chunk of it either */
	if (min && (r = table_make_all(dev)))
		return uzram_set_error(r, "set_refill: the slot table of %llu "
				       "bytes: %s", (unsigned long long)
				       table_bytes_only(dev), r == -ENOSPC ?
				       "the memory limit came first" :
				       "out of memory");
	if (zpool_set_refill(dev->pool, min, max, wait_ms))
		return uzram_set_error(-EINVAL, "set_refill: a minimum of %llu "
				       "bytes past the maximum, %llu",
				       (unsigned long long)min,
				       (unsigned long long)max);
	return 0;
}

UZRAM_API long long uzram_refill(struct uzram *dev, unsigned timeout_ms)
{
	long r;

	if (!dev)
		return uzram_set_error(-EINVAL, "refill: NULL device");
	r = zpool_refill(dev->pool, timeout_ms);
	if (r == -EINVAL)
		return uzram_set_error(-EINVAL, "refill: the no-fault pool is off");
	if (r < 0)
		return uzram_set_error((int)r, "refill: %s", r == -ENOSPC ?
				       "the memory limit or the allocator's "
				       "space came first" : "out of memory");
	return (long long)r << PAGE_SHIFT;
}

UZRAM_API int uzram_thread_prepare(struct uzram *dev)
{
	int r;

	if (!dev)
		return uzram_set_error(-EINVAL, "thread_prepare: NULL device");
	r = store_thread_prepare(dev);
	if (!r)
		r = tier_thread_prepare(dev);
	if (r)
		return uzram_set_error(r, "thread_prepare: %s",
				       r == -ENOMEM ? "out of memory" :
				       "a codec failed to decode its own output");
	return 0;
}
