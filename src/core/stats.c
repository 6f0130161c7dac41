// SPDX-License-Identifier: MIT
/*
 * stats.c - turning the store's counters and the allocator's figures into
 * the public struct uzram_stats.
 */
#include "core.h"
#include "zpool/zpool.h"

static uint64_t nonneg(const _Atomic int64_t *c)
{
	int64_t v = atomic_load_explicit(c, memory_order_relaxed);

	return v > 0 ? (uint64_t)v : 0;
}

void stats_snapshot(const struct stats *st, struct zpool *pool,
		    uint64_t disksize, uint64_t mem_limit, uint64_t table_bytes,
		    struct uzram_stats *out)
{
	struct zpool_stats zs;

	zpool_stats(pool, &zs);
	out->disksize = disksize;
	out->pages_stored = nonneg(&st->pages_stored);
	out->orig_data_size = out->pages_stored * UZRAM_PAGE_SIZE;
	out->compr_data_size = nonneg(&st->compr_data_size);
	out->mem_used_total = zs.mem_used;
	out->mem_limit = mem_limit;
	out->mem_used_max = zs.mem_used_max;
	out->same_pages = nonneg(&st->same_pages);
	out->pages_compacted = zs.pages_compacted;
	out->huge_pages = nonneg(&st->huge_pages);
	out->failed_reads = atomic_load_explicit(&st->failed_reads,
						 memory_order_relaxed);
	out->failed_writes = atomic_load_explicit(&st->failed_writes,
						  memory_order_relaxed);
	out->invalid_io = atomic_load_explicit(&st->invalid_io,
					       memory_order_relaxed);
	out->table_bytes = table_bytes;
	out->pages_unchanged = nonneg(&st->pages_unchanged);
	out->pages_recompressed = nonneg(&st->pages_recompressed);
	out->bd_count = nonneg(&st->bd_count);
	out->bd_bytes = nonneg(&st->bd_bytes);
#define LOAD(f) atomic_load_explicit(&st->f, memory_order_relaxed)
	out->bd_reads = LOAD(bd_reads);
	out->bd_writes = LOAD(bd_writes);
	out->bd_failed_reads = LOAD(bd_failed_reads);
	out->bd_failed_writes = LOAD(bd_failed_writes);
	out->bd_compacted = LOAD(bd_compacted);
	out->pages_written_back = LOAD(wb_pages);
	out->pages_written_through = LOAD(wt_pages);
	out->policy_runs = LOAD(policy_runs);
	out->policy_recompressed = LOAD(policy_recomp);
	out->policy_written_back = LOAD(policy_wb);
#undef LOAD
}

void stats_dedup(const struct stats *st, struct uzram_stats *out)
{
	uint64_t mem = nonneg(&st->dedup_bytes), bd = nonneg(&st->bd_dedup_bytes);

	out->pages_deduped = nonneg(&st->dedup_pages);
	out->dedup_bytes_saved = mem + bd;
	out->compr_data_size -= out->compr_data_size > mem ?
				mem : out->compr_data_size;
	out->bd_bytes -= out->bd_bytes > bd ? bd : out->bd_bytes;
}
