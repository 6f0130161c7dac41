// SPDX-License-Identifier: MIT
/*
 * mem_limit.c - one limit over the allocator and the slot table.
 *
 * mem_limit (cfg.mem_limit, uzram_set_mem_limit()) caps what the device
 * holds: the allocator's memory, and the slot table's chunks and the dedup
 * index, which live outside the allocator (core.h's table_bytes()). The
 * allocator enforces its share by itself (zpool_set_limit()); the table and
 * the index ask mem_fits() before they grow, and give the allocator its
 * new share after. Below the store, dedup.c, device.c and the tier's policy,
 * which all change one side or the other; it calls only the allocator.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "zpool/zpool.h"

bool mem_fits(struct uzram *dev, uint64_t more)
{
	uint64_t limit = atomic_load_explicit(&dev->mem_limit,
					      memory_order_relaxed);
	struct zpool_stats zs;

	if (!limit)
		return true;
	zpool_stats(dev->pool, &zs);
	return zs.mem_used + table_bytes(dev) + more <= limit;
}

/*
 * Two threads racing here (a new chunk and a new limit) may leave the
 * older figure for a moment; the next chunk or limit change corrects it.
 */
void table_limit_apply(struct uzram *dev)
{
	uint64_t limit = atomic_load_explicit(&dev->mem_limit,
					      memory_order_relaxed);
	uint64_t table = table_bytes(dev) +
			 atomic_load_explicit(&dev->table_pending,
					      memory_order_relaxed);

	/* 0 would mean "no limit" to the pool: 1 byte lets nothing in */
	zpool_set_limit(dev->pool, !limit ? 0 : limit > table ? limit - table : 1);
}
