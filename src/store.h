/*
 * store.h - the device structure, shared by the I/O path (store.c) and the
 * device's lifetime and configuration (device.c). Private to the library.
 *
 * The table of slots is a directory of chunks of CHUNK_SLOTS slots each,
 * made on first write (store.c explains why). Everything here but
 * chunks_used, mem_limit, the directory's entries and the save's two fields
 * is set by uzram_open() and then only read; the stats are relaxed atomic
 * counters (stats.h).
 */
#ifndef UZRAM_STORE_H
#define UZRAM_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uzram.h"
#include "slot.h"
#include "stats.h"

struct image_save;
struct zcomp;
struct zcomp_retired;
struct zpool;
struct workers;

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
};

/* The contents of a slot, outside the table. */
struct content {
	uint32_t flags;
	uint64_t val;
	int place;      /* the codec place of prio 0 that made the object
			 * (above), or -1 if none did: see store.c's
			 * unit_commit() */
	const struct zcomp *codec; /* the codec that was in that place */
};

/*
 * Units whose compressed form is larger than this are kept raw: they would
 * save less than 1/64 of the unit and still cost a decompression per read.
 * The allocator packs objects at 16-byte granularity, so anything below the
 * limit really occupies about its own size.
 */
#define HUGE_LIMIT(len) ((len) - (len) / 64)

/*
 * Per-thread buffers of cap bytes each, allocated on a thread's first
 * request that needs them, grown (at most once per cluster size, up to
 * 64 KiB) when a device with larger clusters first needs them, and freed
 * when the thread exits: never per request.
 */
struct store_tls {
	size_t cap;
	unsigned char *cbuf;  /* compressor output */
	unsigned char *unit;  /* read-modify-write, partial reads */
};

/* This thread's buffers, holding at least cap bytes each; NULL: no memory. */
struct store_tls *store_tls_get(size_t cap);

/*
 * Decode the unit of len bytes that a slot names into dst, whatever its
 * state, with the codec that made it. The caller holds the slot lock,
 * shared or exclusive. 0, -EIO (corrupt) or -ENOMEM.
 */
int slot_decode(struct uzram *dev, const struct slot *s, unsigned char *dst,
		size_t len);

/*
 * The slot of cluster idx, creating its chunk if needed; NULL with *err
 * -ENOSPC (the chunk would pass the memory limit) or -ENOMEM.
 */
struct slot *slot_get(struct uzram *dev, uint64_t idx, int *err);

/* Count contents that hold (sign 1) or held (sign -1) a unit of len bytes. */
void content_account(struct uzram *dev, const struct content *c,
		     int64_t sign, size_t len);

/*
 * Give back what the old contents of a unit of len bytes held: free the
 * object, count it out. Called once no slot names it.
 */
void content_release(struct uzram *dev, const struct content *old,
		     size_t len);

/*
 * Create an empty device from a checked copy of the config (device.c);
 * uzram_open() without an image, and the image loader, both use it.
 */
int device_create(const struct uzram_config *c, struct uzram **devp);

/* device.c: explain a zcomp_create_dict() failure for `what`; returns err */
int codec_error(const char *what, const char *algorithm, int level,
		size_t dict_size, int err);
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

/* Bytes of the page table: the directory and the chunks made so far. */
static inline uint64_t table_bytes(struct uzram *dev)
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
 * Give the allocator what mem_limit leaves after the table (device.c);
 * called when either changes.
 */
void table_limit_apply(struct uzram *dev);

/* Bytes in cluster idx: the cluster size, except maybe for the last one. */
static inline size_t unit_len(const struct uzram *dev, uint64_t idx)
{
	uint64_t start = idx << dev->cshift;

	return dev->size - start < dev->csize ? (size_t)(dev->size - start)
					       : dev->csize;
}

/* The slot of cluster idx, or NULL while its chunk has never been written. */
static inline struct slot *slot_peek(struct uzram *dev, uint64_t idx)
{
	struct slot *chunk = atomic_load_explicit(&dev->dir[idx >> CHUNK_SHIFT],
						  memory_order_acquire);

	return chunk ? &chunk[idx & (CHUNK_SLOTS - 1)] : NULL;
}

/*
 * For walks over the whole table: the first slot at or after cluster *idx
 * whose chunk was ever written, with *idx moved to it; NULL past the end.
 */
static inline struct slot *slot_next(struct uzram *dev, uint64_t *idx)
{
	while (*idx < dev->nclusters) {
		struct slot *s = slot_peek(dev, *idx);

		if (s)
			return s;
		*idx = (*idx | (CHUNK_SLOTS - 1)) + 1;
	}
	return NULL;
}

/*
 * Largest first, as zram's post-processing buckets: recompression and
 * writeback walk the table once per band of object sizes, band k holding
 * sizes in [*lo, *hi): raw clusters, then objects from 3/4, 1/2, 1/4 and
 * 1/8 of a cluster, then the rest. With nbands 1, one band of every size.
 */
#define PP_BANDS 6
static inline void pp_band(size_t csize, int k, int nbands, uint32_t *lo,
			   uint32_t *hi)
{
	const uint32_t lows[PP_BANDS] = {
		(uint32_t)HUGE_LIMIT(csize) + 1, (uint32_t)(csize * 3 / 4),
		(uint32_t)(csize / 2), (uint32_t)(csize / 4),
		(uint32_t)(csize / 8), 0,
	};

	*lo = nbands == 1 ? 0 : lows[k];
	*hi = nbands == 1 || k == 0 ? UINT32_MAX : lows[k - 1];
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
