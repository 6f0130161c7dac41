// SPDX-License-Identifier: MIT
/*
 * dedup.c - identical clusters stored once (cfg.dedup), as the two zram
 * dedup RFC series (2017, 2018) did for pages: a content hash finds a
 * stored object with the same bytes, a byte compare confirms it, and the
 * write takes a reference to that object instead of storing a new one.
 *
 * The index costs bytes for every object, shared or not, so it is lean:
 * an open-addressing table of 8-byte entries, split into 64 shards that
 * each have their own lock, so that two writers of different data almost
 * never meet (1 in 64), and never wait for anything device-wide.
 *
 *   XXH3 of the cluster (computed once by the write path):
 *   63         48 47        32 31                           0
 *   +-----------+-----------+------------------------------+
 *   | tag (16)  | key low   |  (not kept)                  |
 *   +-----------+-----------+------------------------------+
 *    |  \__ 10 bits: home position in the shard, scaled to its size
 *    \_____ 6 bits: shard
 *
 *   shard i:  lock | ent[cap]: {key: hash bits 63..32, handle} or 0
 *                  | refs[rcap]: {handle, references} of shared objects
 *                  | places[pcap]: shared places on the backing store
 *                    (dedup_place.c)
 *
 * The home position depends on the tag alone (the top 16 bits of the key),
 * because the tag is all that a slot keeps of the hash (core.h): freeing
 * an object finds its entry from the slot's tag and the handle, with no
 * hash to recompute. Positions are the tag scaled to the table, so the
 * table can grow by a quarter at a time (not doubling: the slack is memory
 * every object pays), kept between 64% and 80% full; linear probing, and
 * deletion by shifting back, which keeps every run free of holes. A
 * lookup compares 32 bits of hash, and only a match is decoded and
 * compared byte for byte: a hash alone never decides.
 *
 * References: an object named by one slot is in ent[] only; the second
 * reference adds it to refs[] with a count of 2. The last reference takes
 * it out of both and frees it, under the shard lock, so a writer that found
 * it (also under the lock) cannot take a reference to a freed object.
 * A slot that took its reference through the index carries SLOT_SHARED;
 * the slot that stored the object does not (nothing finds it from the
 * index), so only refs[] says whether an object is shared.
 *
 * Only whole clusters made by the device's own codec (priority 0) are
 * indexed, and a candidate is decoded with the codec now current: an
 * object made before a dictionary change fails to compare and is not
 * shared. An image's objects are decoded and hashed as they are loaded,
 * and indexed. Objects the index does not hold (written through to the
 * tier, recompressed) are only never found; freeing one finds no entry and
 * frees it.
 *
 * Composition: compaction moves objects under stable handles, so the index
 * does not follow it. Recompression and writeback replace an unshared
 * object under the slot lock: they first take it out of the index
 * (dedup_detach()), which refuses a shared object. The slots naming a
 * shared object are not known from the object, so the walks find them
 * themselves. Recompression re-encodes the object once and switches each
 * slot of the walk that names it (recompress.c), holding a reference to
 * the old and the new object for the whole walk (dedup_replace()) so that
 * neither handle is reused under its map; the index entry moves to the new
 * object when the device's codec (priority 0) made it, else leaves.
 * Writeback holds the object (dedup_hold()), writes it once and switches
 * each slot of the walk that names it to that place (wb_batch.c); the
 * shard counts the place's references too, in places[], keyed by offset
 * (dedup_place.c), and a SLOT_BACKED slot with SLOT_SHARED names a counted
 * place (the first slot too, unlike an object in memory). An image keeps
 * the sharing: the save writes a shared object's (or place's) bytes once,
 * holding it until the save ends so that its handle (or place) is not
 * reused under the records that name it (struct dedup_saved,
 * dedup_place.c), and the loader takes one reference per shared record
 * (image-format.md).
 *
 * Lock rules: a shard's lock protects its three tables; it is taken after a
 * slot lock (never before one), and under it only the allocator's map
 * and the codec's decode are called, which take no store lock. A growing
 * ent[] is allocated and zeroed with the lock dropped (ent_reserve()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dedup.h"
#include "dedup_impl.h"
#include "core/core.h"
#include "zcomp/zcomp.h"
#include "zpool/zpool.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define ENT_MIN 16u

int dedup_create(struct uzram *dev)
{
	struct dedup *d = aligned_alloc(64, sizeof *d);

	if (!d)
		return -ENOMEM;
	memset(d, 0, sizeof *d);
	for (unsigned i = 0; i < NSHARDS; i++)
		pthread_mutex_init(&d->shard[i].lock, NULL);
	atomic_store_explicit(&dev->index_bytes, sizeof *d,
			      memory_order_relaxed);
	dev->dedup = d;
	return 0;
}

void dedup_destroy(struct dedup *d)
{
	if (!d)
		return;
	for (unsigned i = 0; i < NSHARDS; i++) {
		free(d->shard[i].ent);
		free(d->shard[i].refs);
		free(d->shard[i].places);
		pthread_mutex_destroy(&d->shard[i].lock);
	}
	free(d);
}



/* ---- ent[]: the index by hash ---- */

static uint32_t ent_home(uint32_t tag, uint32_t cap)
{
	return (uint32_t)(((uint64_t)(tag & ((1u << HOME_BITS) - 1)) * cap) >>
			  HOME_BITS);
}

static uint32_t ent_tag(uint64_t e)
{
	return (uint32_t)(e >> 48);
}

static void ent_place(uint64_t *ent, uint32_t cap, uint64_t e)
{
	uint32_t i = ent_home(ent_tag(e), cap);

	while (ent[i])
		i = i + 1 == cap ? 0 : i + 1;
	ent[i] = e;
}

/* Empty ent[i] and shift back the entries after it that may move. */
static void ent_delete(struct shard *sh, uint32_t i)
{
	uint32_t cap = sh->cap, j = i;

	sh->ent[i] = 0;
	for (;;) {
		uint64_t e;
		uint32_t h;

		j = j + 1 == cap ? 0 : j + 1;
		e = sh->ent[j];
		if (!e)
			break;
		h = ent_home(ent_tag(e), cap);
		if ((j - h + cap) % cap >= (j - i + cap) % cap) {
			sh->ent[i] = e;
			sh->ent[j] = 0;
			i = j;
		}
	}
	sh->n--;
}

/* Take handle (of an object whose slot tag is tag) out of ent[], if in. */
static void ent_remove(struct shard *sh, uint32_t tag, uint32_t handle)
{
	uint64_t e;

	if (!sh->cap)
		return;
	for (uint32_t i = ent_home(tag, sh->cap); (e = sh->ent[i]);
	     i = i + 1 == sh->cap ? 0 : i + 1) {
		if ((uint32_t)e == handle && ent_tag(e) == tag) {
			ent_delete(sh, i);
			return;
		}
	}
}

/*
 * Room for one more entry in sh, whose lock the caller holds: grow by a
 * quarter past 80% full. The new table is allocated and zeroed with the
 * lock dropped, so that the other writers of the shard never wait for the
 * allocator or for the first touch of its pages (bench/notes.md); the lock
 * is taken again to rehash, and the check repeated, since another writer
 * may have grown the table meanwhile. The old table goes to *old, for the
 * caller to free after the unlock.
 */
static bool ent_reserve(struct uzram *dev, struct shard *sh, uint64_t **old)
{
	while ((uint64_t)(sh->n + 1) * 5 > (uint64_t)sh->cap * 4) {
		uint32_t was = sh->cap, cap = was ? was + was / 4 : ENT_MIN;
		uint64_t *ent;

		/* core.h's table_bytes() counts the index with the slot table */
		if (!mem_fits(dev, (uint64_t)cap * sizeof *ent))
			return false;
		pthread_mutex_unlock(&sh->lock);
		/* not calloc(): fresh pages would be touched under the lock */
		ent = malloc(cap * sizeof *ent);
		if (ent)
			memset(ent, 0, cap * sizeof *ent);
		pthread_mutex_lock(&sh->lock);
		if (!ent)
			return false;
		if (sh->cap != was) {
			free(ent);
			continue;
		}
		for (uint32_t i = 0; i < was; i++)
			if (sh->ent[i])
				ent_place(ent, cap, sh->ent[i]);
		free(*old);
		*old = sh->ent;
		atomic_fetch_add_explicit(&dev->index_bytes,
					  (uint64_t)(cap - was) * sizeof *ent,
					  memory_order_relaxed);
		sh->ent = ent;
		sh->cap = cap;
		table_limit_apply(dev);
	}
	return true;
}

/* ---- refs[]: the reference counts of shared objects ---- */

static uint32_t ref_home(uint32_t handle, uint32_t rcap)
{
	return (handle * UINT32_C(0x9e3779b1)) & (rcap - 1);
}

/* The index of handle's entry in refs[], or UINT32_MAX. */
uint32_t dedup_ref_find(const struct shard *sh, uint32_t handle)
{
	uint64_t r;

	if (!sh->rcap)
		return UINT32_MAX;
	for (uint32_t i = ref_home(handle, sh->rcap); (r = sh->refs[i]);
	     i = (i + 1) & (sh->rcap - 1))
		if ((uint32_t)(r >> 32) == handle)
			return i;
	return UINT32_MAX;
}

static void ref_place(uint64_t *refs, uint32_t rcap, uint64_t r)
{
	uint32_t i = ref_home((uint32_t)(r >> 32), rcap);

	while (refs[i])
		i = (i + 1) & (rcap - 1);
	refs[i] = r;
}

static void ref_delete(struct shard *sh, uint32_t i)
{
	uint32_t mask = sh->rcap - 1, j = i;

	sh->refs[i] = 0;
	for (;;) {
		uint64_t r;
		uint32_t h;

		j = (j + 1) & mask;
		r = sh->refs[j];
		if (!r)
			break;
		h = ref_home((uint32_t)(r >> 32), sh->rcap);
		if (((j - h) & mask) >= ((j - i) & mask)) {
			sh->refs[i] = r;
			sh->refs[j] = 0;
			i = j;
		}
	}
	sh->rn--;
}

/*
 * One more reference to handle. A dedup hit needs no memory from the
 * allocator, so the limit does not apply here: refs[] holds 8 bytes per
 * shared object at 3/8..3/4 full, less than each share saves. False: no
 * memory.
 */
bool dedup_ref_get(struct uzram *dev, struct shard *sh, uint32_t handle)
{
	uint32_t i = dedup_ref_find(sh, handle);

	if (i != UINT32_MAX) {
		sh->refs[i]++;
		return true;
	}
	if ((sh->rn + 1) * 4 > sh->rcap * 3) {
		uint32_t rcap = sh->rcap ? sh->rcap * 2 : 16;
		uint64_t *refs = calloc(rcap, sizeof *refs);

		if (!refs)
			return false;
		for (uint32_t k = 0; k < sh->rcap; k++)
			if (sh->refs[k])
				ref_place(refs, rcap, sh->refs[k]);
		free(sh->refs);
		atomic_fetch_add_explicit(&dev->index_bytes,
					  (uint64_t)(rcap - sh->rcap) * sizeof *refs,
					  memory_order_relaxed);
		sh->refs = refs;
		sh->rcap = rcap;
	}
	ref_place(sh->refs, sh->rcap, (uint64_t)handle << 32 | 2);
	sh->rn++;
	return true;
}

/* ---- the store's calls ---- */

/*
 * Count a reference past an object's first taken (sign 1) or dropped, of
 * an object in memory (bytes: dedup_bytes) or on the backing store.
 */
void dedup_count_in(struct uzram *dev, _Atomic int64_t *bytes,
		    uint32_t size, int64_t sign)
{
	stats_add(&dev->stats.dedup_pages,
		  sign * (int64_t)(dev->csize >> PAGE_SHIFT));
	stats_add(bytes, sign * (int64_t)size);
}

void dedup_ref_count(struct uzram *dev, uint32_t size, int64_t sign)
{
	dedup_count_in(dev, &dev->stats.dedup_bytes, size, sign);
}

/* Whether the object (handle, size) decodes to the len bytes src. */
static bool obj_equal(struct uzram *dev, const struct zcomp *zc,
		      uint32_t handle, uint32_t size,
		      const unsigned char *src, size_t len, unsigned char *buf)
{
	const unsigned char *obj = zpool_map(dev->pool, handle);
	bool same;

	if (size == len)
		same = !memcmp(obj, src, len);
	else
		same = size < len && !zcomp_decompress(zc, obj, size, buf, len) &&
		       !memcmp(buf, src, len);
	zpool_unmap(dev->pool, obj);
	return same;
}

bool dedup_find(struct uzram *dev, const unsigned char *src, size_t len,
		uint64_t hash, struct store_scratch *t, struct content *c)
{
	uint32_t key = (uint32_t)(hash >> 32), tag = key >> 16, bank_flag;
	struct shard *sh = shard_of(dev->dedup, tag);
	const struct zcomp *zc = comp_at(dev, 0, &bank_flag);
	uint32_t handle = 0, size = 0;
	uint64_t e;

	pthread_mutex_lock(&sh->lock);
	for (uint32_t i = sh->cap ? ent_home(tag, sh->cap) : 0;
	     sh->cap && (e = sh->ent[i]); i = i + 1 == sh->cap ? 0 : i + 1) {
		if ((uint32_t)(e >> 32) != key)
			continue;
		size = zpool_obj_size(dev->pool, (uint32_t)e);
		/* not into t->plain: a partial write's cluster is there */
		if (obj_equal(dev, zc, (uint32_t)e, size, src, len, t->cbuf) &&
		    dedup_ref_get(dev, sh, (uint32_t)e)) {
			handle = (uint32_t)e;
			break;
		}
	}
	pthread_mutex_unlock(&sh->lock);
	if (!handle)
		return false;
	if (size == len) {
		c->flags = SLOT_HUGE;
		c->bank = -1;
	} else {
		c->flags = SLOT_OBJ | bank_flag;
		c->bank = bank_flag ? 1 : 0;
	}
	c->flags |= SLOT_SHARED | tag << SLOT_TAG_SHIFT;
	c->val = (uint64_t)size << 32 | handle;
	c->codec = zc;
	dedup_ref_count(dev, size, 1);
	return true;
}

void dedup_insert(struct uzram *dev, const struct content *c, uint64_t hash)
{
	enum slot_state state = (enum slot_state)(c->flags & SLOT_STATE_MASK);
	uint32_t key = (uint32_t)(hash >> 32);
	uint64_t *old = NULL;
	struct shard *sh;

	if (state != SLOT_OBJ && state != SLOT_HUGE)
		return;
	sh = shard_of(dev->dedup, key >> 16);
	pthread_mutex_lock(&sh->lock);
	if (ent_reserve(dev, sh, &old)) {
		ent_place(sh->ent, sh->cap, (uint64_t)key << 32 | (uint32_t)c->val);
		sh->n++;
	}
	pthread_mutex_unlock(&sh->lock);
	free(old);
}

void dedup_put(struct uzram *dev, uint32_t flags, uint32_t handle,
	       uint32_t size)
{
	struct shard *sh;
	uint32_t i;
	bool last = true;

	if (!dev->dedup) {
		zpool_free(dev->pool, handle);
		return;
	}
	sh = shard_of(dev->dedup, slot_tag(flags));
	pthread_mutex_lock(&sh->lock);
	i = dedup_ref_find(sh, handle);
	if (i != UINT32_MAX) {
		last = false;
		if ((uint32_t)sh->refs[i] > 2)
			sh->refs[i]--;
		else
			ref_delete(sh, i);
	} else {
		ent_remove(sh, slot_tag(flags), handle);
	}
	pthread_mutex_unlock(&sh->lock);
	if (last) {
		zpool_free(dev->pool, handle);
		return;
	}
	dedup_ref_count(dev, size, -1);
}

bool dedup_detach(struct uzram *dev, uint32_t flags, uint32_t handle)
{
	struct shard *sh;
	bool shared;

	if (!dev->dedup)
		return true;
	sh = shard_of(dev->dedup, slot_tag(flags));
	pthread_mutex_lock(&sh->lock);
	shared = dedup_ref_find(sh, handle) != UINT32_MAX;
	if (!shared)
		ent_remove(sh, slot_tag(flags), handle);
	pthread_mutex_unlock(&sh->lock);
	return !shared;
}

bool dedup_shared(struct uzram *dev, uint32_t flags, uint32_t handle)
{
	struct shard *sh;
	bool shared;

	if (!dev->dedup)
		return false;
	sh = shard_of(dev->dedup, slot_tag(flags));
	pthread_mutex_lock(&sh->lock);
	shared = dedup_ref_find(sh, handle) != UINT32_MAX;
	pthread_mutex_unlock(&sh->lock);
	return shared;
}

bool dedup_hold(struct uzram *dev, uint32_t flags, uint32_t handle)
{
	struct shard *sh;
	uint32_t i;

	if (!dev->dedup)
		return false;
	sh = shard_of(dev->dedup, slot_tag(flags));
	pthread_mutex_lock(&sh->lock);
	i = dedup_ref_find(sh, handle);
	if (i != UINT32_MAX)
		sh->refs[i]++;
	pthread_mutex_unlock(&sh->lock);
	if (i == UINT32_MAX)
		return false;
	dedup_ref_count(dev, zpool_obj_size(dev->pool, handle), 1);
	return true;
}

bool dedup_replace(struct uzram *dev, uint32_t flags, uint32_t old,
		   uint32_t old_size, uint32_t new, bool index_new)
{
	uint32_t tag = slot_tag(flags);
	struct shard *sh = shard_of(dev->dedup, tag);
	bool ok;
	uint64_t e;

	pthread_mutex_lock(&sh->lock);
	ok = dedup_ref_get(dev, sh, old);
	for (uint32_t i = sh->cap ? ent_home(tag, sh->cap) : 0;
	     ok && sh->cap && (e = sh->ent[i]);
	     i = i + 1 == sh->cap ? 0 : i + 1) {
		if ((uint32_t)e != old || ent_tag(e) != tag)
			continue;
		/* same bytes, same key: the entry keeps its place */
		if (index_new)
			sh->ent[i] = (e & ~(uint64_t)UINT32_MAX) | new;
		else
			ent_delete(sh, i);
		break;
	}
	pthread_mutex_unlock(&sh->lock);
	if (ok)
		dedup_ref_count(dev, old_size, 1);
	return ok;
}

void dedup_insert_loaded(struct uzram *dev, const struct content *c,
			 size_t len)
{
	uint32_t size = (uint32_t)(c->val >> 32), handle = (uint32_t)c->val;
	struct store_scratch *t = store_scratch_get(dev->csize);
	const struct zcomp *zc = comp_at(dev, 0, NULL);
	const unsigned char *obj;
	uint64_t hash;
	int ret = 0;

	if (!t || len != dev->csize || slot_prio(c->flags) ||
	    comp_of(dev, c->flags) != zc)
		return;
	obj = zpool_map(dev->pool, handle);
	if (size == len)
		memcpy(t->plain, obj, len);
	else
		ret = zcomp_decompress(zc, obj, size, t->plain, len);
	zpool_unmap(dev->pool, obj);
	hash = XXH3_64bits(t->plain, len);
	if (!ret && (uint32_t)(hash >> 48) == slot_tag(c->flags))
		dedup_insert(dev, c, hash);
}

bool dedup_share(struct uzram *dev, uint32_t flags, uint32_t handle)
{
	struct shard *sh = shard_of(dev->dedup, slot_tag(flags));
	bool ok;

	pthread_mutex_lock(&sh->lock);
	ok = dedup_ref_get(dev, sh, handle);
	pthread_mutex_unlock(&sh->lock);
	if (ok)
		dedup_ref_count(dev, zpool_obj_size(dev->pool, handle), 1);
	return ok;
}
