// SPDX-License-Identifier: MIT
/*
 * reserve.c - uzram_reserve(): the allocator's memory made resident before
 * it is needed (see uzram.h). Only the allocator holds a reserve; the page
 * table's chunks are allocated as the device fills (mem_limit covers both).
 */
#include <errno.h>

#include "core/core.h"
#include "base/base.h"
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
