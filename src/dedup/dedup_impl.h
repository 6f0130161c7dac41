/* SPDX-License-Identifier: MIT */
/*
 * dedup_impl.h - what the files of the dedup index share (dedup.c: the
 * index and the references of objects in memory; dedup_place.c: the
 * references of shared places on the backing store, and a save's map of
 * the shared objects it wrote). Private to them; the design is at the top
 * of dedup.c.
 *
 * Lock rules: a shard's lock guards its three tables (dedup.c).
 */
#ifndef UZRAM_DEDUP_IMPL_H
#define UZRAM_DEDUP_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct uzram;

#define SHARD_BITS 6
#define HOME_BITS (16 - SHARD_BITS)
#define NSHARDS (1u << SHARD_BITS)

/* A shared object on the backing store, keyed by its place. */
struct place {
	uint64_t key;        /* its offset in 16-byte units, + 1; 0: empty */
	uint32_t refs;       /* slots naming it */
	uint32_t holds;      /* walks and saves holding it */
};

struct shard {
	pthread_mutex_t lock;
	uint64_t *ent;       /* key << 32 | handle; 0 is empty */
	uint32_t cap, n;
	uint64_t *refs;      /* handle << 32 | references (>= 2); 0 empty */
	uint32_t rcap, rn;   /* rcap: 0 or a power of two */
	struct place *places;  /* shared objects on the backing store */
	uint32_t pcap, pn;     /* pcap: 0 or a power of two */
} __attribute__((aligned(64)));

struct dedup {
	struct shard shard[NSHARDS];
};

/* The shard of the objects whose slot tag is tag. */
static inline struct shard *shard_of(struct dedup *d, uint32_t tag)
{
	return &d->shard[tag >> HOME_BITS];
}

/* The index of handle's entry in sh->refs[], or UINT32_MAX; lock held. */
uint32_t dedup_ref_find(const struct shard *sh, uint32_t handle);
/* One more reference to handle, in memory; lock held. False: no memory. */
bool dedup_ref_get(struct uzram *dev, struct shard *sh, uint32_t handle);
/*
 * Count a reference past an object's first taken (sign 1) or dropped,
 * of size bytes: dedup_ref_count() for an object in memory,
 * dedup_count_in() with the counter of the bytes for another place.
 */
void dedup_ref_count(struct uzram *dev, uint32_t size, int64_t sign);
void dedup_count_in(struct uzram *dev, _Atomic int64_t *bytes, uint32_t size,
		    int64_t sign);

#endif
