// SPDX-License-Identifier: MIT
/*
 * zpool_mem.c - the pool's memory accounting (atomic, no lock needed).
 *
 * mem_used counts what the pool makes resident: the pages of zspages and
 * of the cache of resident frames (zpool_frame.c), descriptors with
 * malloc's chunk overhead (those that do not live in their zspage), the
 * touched prefix of the frame table and of the cells (both only grow at
 * their bump index), and the fixed structures. The limit is checked only
 * when a zspage is made, by reserving its bytes with a CAS, so concurrent
 * classes never overshoot it together.
 */
#include "zpool_impl.h"

/* ---- memory accounting ---- */

void zp_mem_note_max(struct zpool *pool)
{
	uint64_t cur = atomic_load_explicit(&pool->mem_used, memory_order_relaxed);
	uint64_t max = atomic_load_explicit(&pool->mem_used_max, memory_order_relaxed);

	while (cur > max && !atomic_compare_exchange_weak_explicit(&pool->mem_used_max,
			&max, cur, memory_order_relaxed, memory_order_relaxed))
		;
}

void zp_mem_add(struct zpool *pool, uint64_t n)
{
	atomic_fetch_add_explicit(&pool->mem_used, n, memory_order_relaxed);
	zp_mem_note_max(pool);
}

void zp_mem_sub(struct zpool *pool, uint64_t n)
{
	atomic_fetch_sub_explicit(&pool->mem_used, n, memory_order_relaxed);
}

/* Add n to mem_used unless that passes the limit. */
bool zp_mem_reserve(struct zpool *pool, uint64_t n)
{
	uint64_t limit = atomic_load_explicit(&pool->limit, memory_order_relaxed);
	uint64_t cur = atomic_load_explicit(&pool->mem_used, memory_order_relaxed);

	do {
		if (limit && cur + n > limit)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&pool->mem_used, &cur,
			cur + n, memory_order_relaxed, memory_order_relaxed));
	return true;
}

/* Bytes of an array of `count` entries of `unit` bytes, in touched pages. */
uint64_t zp_table_bytes(uint64_t count, size_t unit)
{
	return (count * unit + PAGE - 1) & ~(uint64_t)(PAGE - 1);
}
