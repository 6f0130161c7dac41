// SPDX-License-Identifier: MIT
/*
 * dedup_place.c - the dedup index's references to shared places on the
 * backing store, and the map by which a save writes each shared object
 * once (dedup.h).
 *
 * A shared object that writeback moved is at one place, named by every
 * slot that shared it, each with SLOT_SHARED (wb_batch.c). Its entry in
 * places[] of the shard of the slots' tag counts the slots naming it and
 * the walks and saves holding it; the place is given back when both are
 * 0, by whoever took the last:
 *
 *   places[]: {offset / 16 + 1, refs: slots, holds: walks and saves}
 *
 *   writeback: hold (after its write) -> get per slot switched -> release
 *   a slot rewritten, discarded, moved by compaction: put
 *
 * An image keeps the sharing (image-format.md): a save's struct
 * dedup_saved maps each shared object it wrote, in memory (by handle) or
 * on the backing store (by place), to the cluster whose record holds its
 * bytes, and holds it until the save ends, so that neither handle nor
 * place is reused under the records that name it.
 *
 * Lock rules: the shard's lock guards places[], as its other tables
 * (dedup.c); a struct dedup_saved belongs to its saving thread.
 */
#include <errno.h>
#include <stdlib.h>

#include "dedup.h"
#include "dedup_impl.h"
#include "core/core.h"

static uint32_t place_home(uint64_t key, uint32_t pcap)
{
	return (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 40) &
	       (pcap - 1);
}

static struct place *place_find(struct shard *sh, uint64_t off)
{
	uint64_t key = (off >> 4) + 1;

	if (!sh->pcap)
		return NULL;
	for (uint32_t i = place_home(key, sh->pcap); sh->places[i].key;
	     i = (i + 1) & (sh->pcap - 1))
		if (sh->places[i].key == key)
			return &sh->places[i];
	return NULL;
}

static void place_set(struct place *places, uint32_t pcap, struct place p)
{
	uint32_t i = place_home(p.key, pcap);

	while (places[i].key)
		i = (i + 1) & (pcap - 1);
	places[i] = p;
}

/* A new entry for off, held once; NULL: no memory. */
static struct place *place_add(struct uzram *dev, struct shard *sh,
			       uint64_t off)
{
	if ((sh->pn + 1) * 4 > sh->pcap * 3) {
		uint32_t pcap = sh->pcap ? sh->pcap * 2 : 16;
		struct place *places = calloc(pcap, sizeof *places);

		if (!places)
			return NULL;
		for (uint32_t k = 0; k < sh->pcap; k++)
			if (sh->places[k].key)
				place_set(places, pcap, sh->places[k]);
		free(sh->places);
		atomic_fetch_add_explicit(&dev->index_bytes,
					  (uint64_t)(pcap - sh->pcap) *
					  sizeof *places, memory_order_relaxed);
		sh->places = places;
		sh->pcap = pcap;
	}
	place_set(sh->places, sh->pcap,
		  (struct place){ .key = (off >> 4) + 1, .holds = 1 });
	sh->pn++;
	return place_find(sh, off);
}

/* Take out p if nothing names or holds it; whether it went. */
static bool place_drop_unused(struct shard *sh, struct place *p)
{
	uint32_t mask = sh->pcap - 1, i = (uint32_t)(p - sh->places), j = i;

	if (p->refs || p->holds)
		return false;
	p->key = 0;
	for (;;) {
		struct place q;
		uint32_t h;

		j = (j + 1) & mask;
		q = sh->places[j];
		if (!q.key)
			break;
		h = place_home(q.key, sh->pcap);
		if (((j - h) & mask) >= ((j - i) & mask)) {
			sh->places[i] = q;
			sh->places[j].key = 0;
			i = j;
		}
	}
	sh->pn--;
	return true;
}

bool dedup_place_hold(struct uzram *dev, uint32_t flags, uint64_t off)
{
	struct shard *sh = shard_of(dev->dedup, slot_tag(flags));
	struct place *p;

	pthread_mutex_lock(&sh->lock);
	p = place_find(sh, off);
	if (p)
		p->holds++;
	else
		p = place_add(dev, sh, off);
	pthread_mutex_unlock(&sh->lock);
	return p != NULL;
}

bool dedup_place_release(struct uzram *dev, uint32_t flags, uint64_t off)
{
	struct shard *sh = shard_of(dev->dedup, slot_tag(flags));
	struct place *p;
	bool last = false;

	pthread_mutex_lock(&sh->lock);
	p = place_find(sh, off);
	if (p) {
		p->holds--;
		last = place_drop_unused(sh, p);
	}
	pthread_mutex_unlock(&sh->lock);
	return last;
}

bool dedup_place_get(struct uzram *dev, uint32_t flags, uint64_t off,
		     uint32_t size)
{
	struct shard *sh = shard_of(dev->dedup, slot_tag(flags));
	struct place *p;
	bool past_first = false;

	pthread_mutex_lock(&sh->lock);
	p = place_find(sh, off);
	if (p)
		past_first = ++p->refs > 1;
	pthread_mutex_unlock(&sh->lock);
	if (past_first)
		dedup_count_in(dev, &dev->stats.bd_dedup_bytes, size, 1);
	return p != NULL;
}

bool dedup_place_put(struct uzram *dev, uint32_t flags, uint64_t off,
		     uint32_t size)
{
	struct shard *sh = shard_of(dev->dedup, slot_tag(flags));
	struct place *p;
	bool past_first = false, last = true;

	pthread_mutex_lock(&sh->lock);
	p = place_find(sh, off);
	if (p) {   /* no entry: a slot that was alone after all */
		past_first = p->refs > 1;
		p->refs -= p->refs > 0;
		last = place_drop_unused(sh, p);
	}
	pthread_mutex_unlock(&sh->lock);
	if (past_first)
		dedup_count_in(dev, &dev->stats.bd_dedup_bytes, size, -1);
	return last;
}

/* ---- the shared objects a save wrote ---- */

/* key: an object's handle, or SAVED_PLACE | a place's offset; 0: empty */
#define SAVED_PLACE (UINT64_C(1) << 63)

struct saved {
	uint64_t key;
	uint32_t flags, size;
	uint64_t idx;
};

struct dedup_saved {
	uint32_t cap, n;               /* cap: a power of two */
	struct saved e[];
};

static struct saved *saved_at(struct dedup_saved *sv, uint64_t key)
{
	uint32_t i = (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 32) &
		     (sv->cap - 1);

	while (sv->e[i].key && sv->e[i].key != key)
		i = (i + 1) & (sv->cap - 1);
	return &sv->e[i];
}

/* Room for one more entry in *svp; false: no memory. */
static bool saved_reserve(struct dedup_saved **svp)
{
	struct dedup_saved *sv = *svp, *nsv;
	uint32_t cap = sv ? sv->cap * 2 : 64;

	if (sv && (sv->n + 1) * 4 <= sv->cap * 3)
		return true;
	nsv = calloc(1, sizeof *nsv + cap * sizeof nsv->e[0]);
	if (!nsv)
		return false;
	nsv->cap = cap;
	for (uint32_t i = 0; sv && i < sv->cap; i++)
		if (sv->e[i].key) {
			*saved_at(nsv, sv->e[i].key) = sv->e[i];
			nsv->n++;
		}
	free(sv);
	*svp = nsv;
	return true;
}

int dedup_saved_find(struct uzram *dev, struct dedup_saved **svp,
		     uint32_t flags, uint32_t handle, uint32_t size,
		     uint64_t idx, uint64_t *first)
{
	struct shard *sh;
	struct saved *e;
	bool shared;

	if (!dev->dedup)
		return 0;
	if (*svp && (e = saved_at(*svp, handle))->key) {
		*first = e->idx;
		return 1;
	}
	if (!saved_reserve(svp))
		return -ENOMEM;
	sh = shard_of(dev->dedup, slot_tag(flags));
	pthread_mutex_lock(&sh->lock);
	shared = dedup_ref_find(sh, handle) != UINT32_MAX;
	/*
	 * The save's own reference keeps the handle from being reused. It
	 * counts in pages_deduped while the save runs, as any other: the
	 * count is the references past each object's first, whichever goes
	 * last.
	 */
	if (shared && !dedup_ref_get(dev, sh, handle)) {
		pthread_mutex_unlock(&sh->lock);
		return -ENOMEM;
	}
	pthread_mutex_unlock(&sh->lock);
	if (shared) {
		*saved_at(*svp, handle) = (struct saved){ handle, flags, size, idx };
		(*svp)->n++;
		dedup_ref_count(dev, size, 1);
	}
	return 0;
}

int dedup_saved_find_place(struct uzram *dev, struct dedup_saved **svp,
			   uint32_t flags, uint64_t off, uint32_t size,
			   uint64_t idx, uint64_t *first)
{
	uint64_t key = SAVED_PLACE | off;
	struct saved *e;

	if (!dev->dedup || !(flags & SLOT_SHARED))
		return 0;
	if (*svp && (e = saved_at(*svp, key))->key) {
		*first = e->idx;
		return 1;
	}
	if (!saved_reserve(svp) || !dedup_place_hold(dev, flags, off))
		return -ENOMEM;
	*saved_at(*svp, key) = (struct saved){ key, flags, size, idx };
	(*svp)->n++;
	return 0;
}

void dedup_saved_free(struct uzram *dev, struct dedup_saved *sv)
{
	for (uint32_t i = 0; sv && i < sv->cap; i++) {
		const struct saved *e = &sv->e[i];

		if (!e->key)
			continue;
		if (!(e->key & SAVED_PLACE))
			dedup_put(dev, e->flags, (uint32_t)e->key, e->size);
		else if (dedup_place_release(dev, e->flags,
					     e->key & ~SAVED_PLACE))
			dev->hooks.backed_free(dev, e->key & ~SAVED_PLACE,
				   round16(e->size));
	}
	free(sv);
}
