/*
 * stats.h - the device's counters, modelled on zram's mm_stat and io_stat.
 *
 * The store updates them with relaxed atomic adds after each state change;
 * the read path touches none of them unless a read fails, so concurrent
 * readers never share a written cache line here. A snapshot is therefore
 * not a single instant: each counter is exact, their sum is approximate
 * while writes are in flight (as with zram's sysfs files).
 */
#ifndef UZRAM_STATS_H
#define UZRAM_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "uzram.h"

struct zpool;

struct stats {
	_Atomic int64_t pages_stored;    /* slots that are not holes */
	_Atomic int64_t compr_data_size;
	_Atomic int64_t same_pages;
	_Atomic int64_t huge_pages;
	_Atomic int64_t pages_unchanged;
	_Atomic int64_t pages_recompressed;
	_Atomic uint64_t failed_reads;
	_Atomic uint64_t failed_writes;
	_Atomic uint64_t invalid_io;
	/* the tier (tier.h) */
	_Atomic int64_t bd_count;        /* pages on the backing store */
	_Atomic int64_t bd_bytes;        /* bytes of their objects */
	_Atomic uint64_t bd_reads, bd_writes;   /* pages */
	_Atomic uint64_t bd_failed_reads, bd_failed_writes;
	_Atomic uint64_t bd_compacted;
	_Atomic uint64_t wb_pages, wt_pages;
	_Atomic uint64_t policy_runs, policy_recomp, policy_wb;
	/* dedup (dedup.c): references past an object's first */
	_Atomic int64_t dedup_pages;     /* pages they name */
	_Atomic int64_t dedup_bytes;     /* bytes of the objects they name */
	_Atomic int64_t bd_dedup_bytes;  /* the same, on the backing store */
};

static inline void stats_addu(_Atomic uint64_t *c, uint64_t delta)
{
	atomic_fetch_add_explicit(c, delta, memory_order_relaxed);
}

static inline void stats_add(_Atomic int64_t *c, int64_t delta)
{
	if (delta)
		atomic_fetch_add_explicit(c, delta, memory_order_relaxed);
}

static inline void stats_inc(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/*
 * Fill a public snapshot from the counters and the allocator's figures;
 * the tier's own figures are added by device.c.
 */
void stats_snapshot(const struct stats *st, struct zpool *pool,
		    uint64_t disksize, uint64_t mem_limit, uint64_t table_bytes,
		    struct uzram_stats *out);

/*
 * Add dedup's counters, taking the bytes it saved out of compr_data_size
 * (in memory) and bd_bytes (on the backing store).
 */
void stats_dedup(const struct stats *st, struct uzram_stats *out);

#endif
