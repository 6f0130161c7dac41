/*
 * store.h - the device structure, shared by the I/O path (store.c) and the
 * device's lifetime and configuration (device.c). Private to the library.
 *
 * The table of slots is a directory of chunks of CHUNK_SLOTS slots each,
 * made on first write (store.c explains why). Everything here but
 * chunks_used, mem_limit and the directory's entries is set by uzram_open()
 * and then only read; the stats are relaxed atomic counters (stats.h).
 */
#ifndef UZRAM_STORE_H
#define UZRAM_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "uzram.h"
#include "slot.h"
#include "stats.h"

struct zcomp;
struct zpool;

#define PAGE UZRAM_PAGE_SIZE
#define PAGE_SHIFT 12
#define PAGE_MASK ((uint64_t)PAGE - 1)

#define CLUSTER_MIN_SHIFT PAGE_SHIFT
#define CLUSTER_MAX_SHIFT 16

/* Handles are 32-bit: at most one object per page for 2^32 pages. */
#define MAX_PAGES (UINT64_C(1) << 32)

#define CHUNK_SHIFT 14
#define CHUNK_SLOTS (UINT64_C(1) << CHUNK_SHIFT)
#define CHUNK_BYTES (CHUNK_SLOTS * sizeof(struct slot))

struct uzram {
	struct slot *_Atomic *dir;
	uint64_t nchunks;
	_Atomic uint64_t chunks_used;
	uint64_t nclusters;
	uint64_t size;
	_Atomic uint64_t mem_limit; /* as last set; the pool enforces it */
	unsigned cshift;       /* log2 of the cluster size */
	size_t csize;          /* bytes in a cluster */
	struct zcomp *comp;
	struct zpool *pool;
	struct stats stats;
};

#endif
