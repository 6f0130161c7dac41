/*
 * store.h - cluster I/O on a device (struct uzram, device.h): the one
 * reader of a slot, the contents a slot holds and their accounting, the
 * store's per-thread buffers, and walks over the table. Private to the
 * library.
 */
#ifndef UZRAM_STORE_H
#define UZRAM_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uzram.h"
#include "device.h"
#include "page.h"
#include "slot.h"

struct zcomp;

/* The contents of a slot, outside the table. */
struct content {
	uint32_t flags;
	uint64_t val;
	int place;      /* the codec place of prio 0 that made the object
			 * (device.h), or -1 if none did: see store.c's
			 * cluster_commit() */
	const struct zcomp *codec; /* the codec that was in that place */
};

/*
 * Units whose compressed form is larger than this are kept raw: they would
 * save less than 1/64 of the cluster and still cost a decompression per read.
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
	unsigned char *plain;  /* read-modify-write, partial reads */
};

/* This thread's buffers, holding at least cap bytes each; NULL: no memory. */
struct store_tls *store_tls_get(size_t cap);

/*
 * Read [uoff, uoff + n) of the cluster of len bytes that a slot names into
 * dst, whatever its state, with the codec that made it: the one reader.
 * A whole cluster (n == len) is decoded straight into dst; a part of a
 * compressed or backed one is decoded into the thread's scratch (by
 * codecs that decode in order, only up to uoff + n) and copied out. The
 * caller holds the slot lock, shared or exclusive. 0, -EIO (corrupt) or
 * -ENOMEM.
 */
int slot_read(struct uzram *dev, const struct slot *s, size_t len,
	      size_t uoff, size_t n, unsigned char *dst);

/* Decode the whole cluster of len bytes that a slot names into dst. */
static inline int slot_decode(struct uzram *dev, const struct slot *s,
			      unsigned char *dst, size_t len)
{
	return slot_read(dev, s, len, 0, len, dst);
}

/*
 * The slot of cluster idx, creating its chunk if needed; NULL with *err
 * -ENOSPC (the chunk would pass the memory limit) or -ENOMEM.
 */
struct slot *slot_get(struct uzram *dev, uint64_t idx, int *err);

/* Count contents that hold (sign 1) or held (sign -1) a cluster of len bytes. */
void content_account(struct uzram *dev, const struct content *c,
		     int64_t sign, size_t len);

/*
 * Give back what the old contents of a cluster of len bytes held: free the
 * object, count it out. Called once no slot names it.
 */
void content_release(struct uzram *dev, const struct content *old,
		     size_t len);

/* Free what contents hold, in the allocator or on the backing store. */
void content_free(struct uzram *dev, const struct content *c);

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

#endif
