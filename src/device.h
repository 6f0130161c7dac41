/*
 * device.h - the device structure and its lifetime (device.c), shared by
 * every part of the library that works on a device; the cluster I/O on it
 * is store.h's. Private to the library.
 *
 * The table of slots is a directory of chunks of CHUNK_SLOTS slots each,
 * made on first write (store.c explains why). Everything here but
 * chunks_used, mem_limit, the directory's entries and the save's two fields
 * is set by uzram_open() and then only read; the stats are relaxed atomic
 * counters (stats.h).
 */
#ifndef UZRAM_DEVICE_H
#define UZRAM_DEVICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uzram.h"
#include "page.h"
#include "slot.h"
#include "stats.h"

struct dedup;
struct image_save;
struct image_lock;
struct zcomp;
struct zcomp_retired;
struct zpool;
struct workers;

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
	/*
	 * The codecs, comp[prio][place]: prio 0 is the device's algorithm,
	 * 1..3 the secondary ones for recompression (NULL until added). Each
	 * priority has two places so that its dictionary can change while
	 * objects made with the previous one are still stored: a slot names
	 * its codec by its priority and place bits (slot.h), and cur[prio] is
	 * the place new objects of that priority take. A place is filled only
	 * while no object names it, under dict_lock (dict.c), and the codec
	 * it held is kept on the retired list until close, as a writer may
	 * still be compressing with it (it then finds its codec stale under
	 * the slot lock and starts again).
	 */
	struct zcomp *_Atomic comp[UZRAM_MAX_RECOMP + 1][2];
	_Atomic unsigned cur[UZRAM_MAX_RECOMP + 1];
	pthread_mutex_t dict_lock;
	struct zcomp_retired *retired;
	struct zpool *pool;
	struct stats stats;
	struct tier *tier;     /* the second tier (tier.h), or NULL */
	struct workers *workers; /* cfg.threads' pool (workers.h), or NULL */
	_Atomic int64_t clock0; /* CLOCK_MONOTONIC_COARSE seconds at open
				 * (atomic only so tests may move it) */
	/*
	 * A save in progress (image_save.c), or NULL; save_users counts the
	 * writers that may be looking at it (image_save_enter()).
	 */
	struct image_save *_Atomic save;
	_Atomic uint64_t save_users;
	/* the lock on the device's image (image_lock.c), or NULL */
	struct image_lock *_Atomic image_lock;
	struct dedup *dedup;   /* the index of dedup.c, NULL when off */
	_Atomic uint64_t index_bytes; /* what that index holds (dedup.c) */
};

/*
 * Create an empty device from a checked copy of the config (device.c);
 * uzram_open() without an image, and the image loader, both use it.
 */
int device_create(const struct uzram_config *c, struct uzram **devp);

/* dict.c: free the codecs taken out of their places, at close */
void dict_retired_free(struct uzram *dev);
/*
 * Bytes chunk i of the table can ever touch: all of it, except for the
 * device's last chunk, which holds only the clusters left (in whole pages).
 */
static inline uint64_t chunk_bytes(const struct uzram *dev, uint64_t i)
{
	uint64_t slots = dev->nclusters - i * CHUNK_SLOTS;

	if (slots >= CHUNK_SLOTS)
		return CHUNK_BYTES;
	return (slots * sizeof(struct slot) + PAGE_MASK) & ~PAGE_MASK;
}

/* Bytes of the page table alone: the directory and the chunks made so far. */
static inline uint64_t table_bytes_only(struct uzram *dev)
{
	uint64_t used = atomic_load_explicit(&dev->chunks_used,
					     memory_order_relaxed);
	uint64_t last = dev->nchunks - 1;
	uint64_t bytes = dev->nchunks * sizeof(*dev->dir);

	if (used && atomic_load_explicit(&dev->dir[last], memory_order_relaxed))
		return bytes + (used - 1) * CHUNK_BYTES + chunk_bytes(dev, last);
	return bytes + used * CHUNK_BYTES;
}

/*
 * Bytes of the page table: the directory and the chunks made so far, and
 * the dedup index (dedup.c), which is counted with it.
 */
static inline uint64_t table_bytes(struct uzram *dev)
{
	return atomic_load_explicit(&dev->index_bytes, memory_order_relaxed) +
	       table_bytes_only(dev);
}

/*
 * Whether `more` bytes of table (or dedup index) keep the allocator and
 * the table within mem_limit (mem_limit.c).
 */
bool mem_fits(struct uzram *dev, uint64_t more);

/*
 * Give the allocator what mem_limit leaves after the table (mem_limit.c);
 * called when either changes.
 */
void table_limit_apply(struct uzram *dev);

/* Bytes in cluster idx: the cluster size, except maybe for the last one. */
static inline size_t cluster_len(const struct uzram *dev, uint64_t idx)
{
	uint64_t start = idx << dev->cshift;

	return dev->size - start < dev->csize ? (size_t)(dev->size - start)
					       : dev->csize;
}

/*
 * The codec new objects of a priority take (0 the device's, 1..3
 * recompression's), and its place for their slot's flags.
 */
static inline const struct zcomp *comp_at(struct uzram *dev, unsigned prio,
					  uint32_t *place_flag)
{
	unsigned place = atomic_load_explicit(&dev->cur[prio],
					      memory_order_acquire);

	if (place_flag)
		*place_flag = place ? SLOT_PLACE : 0;
	return atomic_load_explicit(&dev->comp[prio][place],
				    memory_order_acquire);
}

/* The codec that made the object of a slot with these flags. */
static inline const struct zcomp *comp_of(struct uzram *dev, uint32_t flags)
{
	return atomic_load_explicit(&dev->comp[slot_prio(flags)][slot_place(flags)],
				    memory_order_acquire);
}

#endif
