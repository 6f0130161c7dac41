/* SPDX-License-Identifier: MIT */
/*
 * tier_impl.h - the batch writes of writeback and backing store compaction
 * (wb_batch.c), for the walks of writeback.c. Private to the library.
 *
 * A walk appends objects (batch_add()) or clusters that follow a shared
 * object written earlier in the walk (batch_alias()); the batch writes
 * them to head 0 of the backing store and switches each slot that still
 * holds what the walk saw. batch_drain() waits for every write; then
 * share_map_release() lets go of what the walk held.
 *
 * Lock rules: one walk at a time per device (the caller holds
 * tier->wb_lock); the batch takes each slot lock alone, never across I/O.
 */
#ifndef UZRAM_WB_BATCH_H
#define UZRAM_WB_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "tier.h"

struct slot;
struct tier;
struct uzram;

#define BATCH_ITEMS 256
#define WB_INFLIGHT 4      /* batch writes in flight at once */

struct wb_item {
	struct slot *s;
	uint32_t flags;    /* as copied */
	uint64_t val;
	uint64_t boff;     /* its new place */
	uint32_t size;
	uint32_t pages;
	uint32_t share;    /* a shared object: its entry in the map, + 1 */
	bool alias;        /* no bytes: the first of its object carries them */
};

/*
 * The shared objects one walk moves: for writeback, objects in memory that
 * dedup shares, keyed by handle; for compaction, shared places, keyed by
 * offset. The first slot of the walk that names one carries its bytes to
 * the new place; the others follow without bytes, as items of a later
 * batch (or the same), so that they are reaped after that write. The walk
 * holds each object (dedup_hold(): a handle is not reused under the map;
 * a victim segment is not reused before the walk ends) and each new place
 * (dedup_place_hold()), and lets go when it ends (share_map_release()).
 */
enum share_state { SHARE_PENDING, SHARE_MOVED, SHARE_FAILED };

struct share {
	uint64_t key;
	uint64_t to;               /* the new place, once MOVED */
	uint32_t flags;            /* of a slot naming it: its tag */
	uint32_t size;
	enum share_state state;
};

struct share_map {
	struct share *e;           /* items name entries by their index */
	uint32_t n, cap;
	uint32_t *index;           /* entry index + 1, by key; 0: empty */
	uint32_t icap;             /* 0 or a power of two, at most half full */
};

/* One batch write: a contiguous range of head 0 and the objects in it. */
struct wbuf {
	unsigned char *buf;        /* SEG_BYTES, allocated at first use */
	uint64_t start;
	size_t fill;
	unsigned n;
	bool busy;                 /* submitted, not yet reaped */
	struct backing_aio io;
	struct wb_item it[BATCH_ITEMS];
};

/*
 * A ring of WB_INFLIGHT batch writes: w[cur] is being filled, the others
 * are in flight or idle; the one after cur is the oldest in flight, so a
 * full ring waits for it before filling it again.
 */
struct batch {
	struct uzram *dev;
	bool from_backing;         /* compaction: the source is a place */
	unsigned char *stage;      /* one object */
	unsigned cur;
	int err;                   /* the first failed write */
	uint64_t pages, freed;     /* moved so far */
	uint64_t pending_pages, pending_bytes;   /* gathered, not reaped */
	struct share_map map;
	struct wbuf w[WB_INFLIGHT];
};

struct batch *batch_new(struct uzram *dev, bool from_backing);
void batch_free(struct batch *b);

/*
 * Append the object now in b->stage, which slot s held as (flags, val),
 * size bytes for pages pages; share: its entry in b->map + 1 if it is the
 * first slot of a shared object, else 0. 0 or a negative errno (the first
 * failed write, or -ENOSPC).
 */
int batch_add(struct batch *b, struct slot *s, uint32_t flags, uint64_t val,
	      uint32_t size, uint32_t pages, uint32_t share);
/* Append slot s, which names the shared object of entry share - 1. */
int batch_alias(struct batch *b, struct slot *s, uint32_t flags, uint64_t val,
		uint32_t size, uint32_t pages, uint32_t share);
/* Send what is gathered and wait for every write: 0 or the first error. */
int batch_drain(struct batch *b);

/* The entry of key in m, as its index + 1, or 0. */
uint32_t share_find(const struct share_map *m, uint64_t key);
/* A new pending entry; its index + 1, or 0: no memory. */
uint32_t share_add(struct share_map *m, uint64_t key, uint32_t flags,
		   uint32_t size);
/* The walk is over (drained): let go of what it held, empty the map. */
void share_map_release(struct batch *b);

/* The writeback limit (uzram_set_writeback_limit()): charge pages, or give them back. */
bool wb_limit_charge(struct tier *t, uint64_t pages);
void wb_limit_give(struct tier *t, uint64_t pages);

#endif
