// SPDX-License-Identifier: MIT
/*
 * wb_batch.c - the batch writes of writeback and of backing store
 * compaction (writeback.c walks the table and feeds them):
 *
 *   slot (shared lock) --copy--> staging --append--> batch buffer, 1 MiB
 *   at most, one contiguous range of the open segment of head 0
 *   batch --one asynchronous write (backing_submit)--> backing store
 *   the walk goes on filling the next batch buffer of a ring of
 *   WB_INFLIGHT, so up to that many writes are in flight; a full ring
 *   waits for its oldest write (backing_wait), then per object of it:
 *        slot (exclusive lock): still the object written?
 *        yes: OBJ/HUGE -> BACKED (other flag bits kept), free the memory
 *        no:  leave it, give the backing space back
 *
 *     ring:  w[0] in flight | w[1] in flight | w[2] filling | w[3] idle
 *
 * So a cluster leaves memory only after its write completed, and a write
 * that fails leaves every cluster of its batch in memory (and is counted
 * in bd_failed_writes). "Still the object written" compares the state,
 * priority, tag, handle and size and then the bytes: a handle freed and
 * reused for the same slot between the copy and the switch cannot pass
 * for the old object.
 *
 * An object that dedup shares between clusters is written once: the first
 * slot of the walk that names it carries its bytes, and the others follow
 * it to that place (struct share_map) as items without bytes, reaped in
 * turn after that write; each gets SLOT_SHARED, and the dedup index counts
 * the place's references (dedup.h). Compaction moves a shared place the
 * same way. An object that is not shared is taken out of the dedup index
 * before its switch, which refuses it if it became shared meanwhile: it
 * stays for a later walk.
 *
 * Lock rules: see tier_impl.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/dedup.h"
#include "core/core.h"
#include "tier.h"
#include "tier_impl.h"
#include "zpool/zpool.h"

static uint32_t share_home(uint64_t key, uint32_t icap)
{
	return (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 32) &
	       (icap - 1);
}

uint32_t share_find(const struct share_map *m, uint64_t key)
{
	uint32_t k;

	if (!m->icap)
		return 0;
	for (uint32_t i = share_home(key, m->icap); (k = m->index[i]);
	     i = (i + 1) & (m->icap - 1))
		if (m->e[k - 1].key == key)
			return k;
	return 0;
}

uint32_t share_add(struct share_map *m, uint64_t key, uint32_t flags,
		   uint32_t size)
{
	uint32_t i;

	if (m->n == m->cap) {
		uint32_t cap = m->cap ? m->cap * 2 : 64;
		struct share *e = realloc(m->e, cap * sizeof *e);

		if (!e)
			return 0;
		m->e = e;
		m->cap = cap;
	}
	if ((m->n + 1) * 2 > m->icap) {
		uint32_t icap = m->icap ? m->icap * 2 : 128;
		uint32_t *index = calloc(icap, sizeof *index);

		if (!index)
			return 0;
		for (uint32_t k = 0; k < m->n; k++) {
			uint32_t j = share_home(m->e[k].key, icap);

			while (index[j])
				j = (j + 1) & (icap - 1);
			index[j] = k + 1;
		}
		free(m->index);
		m->index = index;
		m->icap = icap;
	}
	i = share_home(key, m->icap);
	while (m->index[i])
		i = (i + 1) & (m->icap - 1);
	m->e[m->n] = (struct share){ key, 0, flags, size, SHARE_PENDING };
	m->index[i] = ++m->n;
	return m->n;
}

void share_map_release(struct batch *b)
{
	struct uzram *dev = b->dev;
	struct share_map *m = &b->map;

	for (uint32_t k = 0; k < m->n; k++) {
		const struct share *e = &m->e[k];

		if (!b->from_backing)
			dedup_put(dev, e->flags, (uint32_t)e->key, e->size);
		if (e->state == SHARE_MOVED &&
		    dedup_place_release(dev, e->flags, e->to))
			space_free(dev->tier, e->to, round16(e->size));
	}
	m->n = 0;
	if (m->icap)
		memset(m->index, 0, m->icap * sizeof *m->index);
}

struct batch *batch_new(struct uzram *dev, bool from_backing)
{
	struct batch *b = calloc(1, sizeof *b);

	if (!b)
		return NULL;
	b->dev = dev;
	b->from_backing = from_backing;
	b->stage = malloc(dev->csize);
	b->w[0].buf = malloc(SEG_BYTES);
	if (!b->stage || !b->w[0].buf) {
		free(b->stage);
		free(b->w[0].buf);
		free(b);
		return NULL;
	}
	return b;
}

void batch_free(struct batch *b)
{
	for (unsigned i = 0; i < WB_INFLIGHT; i++)
		free(b->w[i].buf);
	free(b->map.e);
	free(b->map.index);
	free(b->stage);
	free(b);
}

bool wb_limit_charge(struct tier *t, uint64_t pages)
{
	uint64_t left;

	if (!atomic_load(&t->wb_limit_on))
		return true;
	left = atomic_load(&t->wb_limit);
	do {
		if (left < pages)
			return false;
	} while (!atomic_compare_exchange_weak(&t->wb_limit, &left,
					       left - pages));
	return true;
}

void wb_limit_give(struct tier *t, uint64_t pages)
{
	if (atomic_load(&t->wb_limit_on))
		atomic_fetch_add(&t->wb_limit, pages);
}

/*
 * Whether slot s, locked with flags f, still names what the walk saw as
 * it: the same state, priority, tag and object (or place).
 */
static bool item_same(const struct wb_item *it, const struct slot *s,
		      uint32_t f)
{
	const uint32_t keep = SLOT_STATE_MASK | SLOT_PRIO_MASK |
			      (0xffffu << SLOT_TAG_SHIFT);

	return !((f ^ it->flags) & keep) && s->val == it->val;
}

/* Count cluster it moved from memory to the backing store. */
static void count_written_back(struct uzram *dev, const struct wb_item *it)
{
	stats_add(&dev->stats.compr_data_size, -(int64_t)it->size);
	if ((it->flags & SLOT_STATE_MASK) == SLOT_HUGE)
		stats_add(&dev->stats.huge_pages, -(int64_t)it->pages);
	stats_add(&dev->stats.bd_count, it->pages);
	stats_add(&dev->stats.bd_bytes, it->size);
	if (!it->alias)
		stats_addu(&dev->stats.bd_writes, it->pages);
	stats_addu(&dev->stats.wb_pages, it->pages);
}

/* Switch one written object's slot, if it still holds what was copied. */
static bool commit_one(struct batch *b, const struct wbuf *w,
		       const struct wb_item *it)
{
	struct uzram *dev = b->dev;
	struct slot *s = it->s;
	uint32_t f;
	bool same;

	slot_lock(s);
	f = slot_flags(s);
	same = item_same(it, s, f);
	if (same && !b->from_backing) {
		const void *obj = zpool_map(dev->pool, slot_handle(s));

		same = !memcmp(obj, w->buf + (it->boff - w->start), it->size);
		zpool_unmap(dev->pool, obj);
	}
	/* shared since the walk looked: a later walk takes it (wb_share()) */
	if (same && !b->from_backing)
		same = dedup_detach(dev, f, slot_handle(s));
	if (same) {
		s->val = backed_val(it->boff, it->size);
		slot_set_flags(s, (f & ~(SLOT_STATE_MASK | SLOT_SHARED)) |
				  SLOT_BACKED);
	}
	slot_unlock(s);
	if (!same) {
		space_free(dev->tier, it->boff, round16(it->size));
		return false;
	}
	if (b->from_backing) {
		space_free(dev->tier, backed_off(it->val), round16(it->size));
		stats_addu(&dev->stats.bd_compacted, it->size);
		return true;
	}
	zpool_free(dev->pool, (uint32_t)it->val);
	count_written_back(dev, it);
	return true;
}

/*
 * Switch a slot of the shared object of entry e, which is now at e->to,
 * if it still names the object as it did in the walk; the new place gets
 * its reference first, then the old object loses one.
 */
static bool commit_shared(struct batch *b, const struct wb_item *it,
			  const struct share *e)
{
	struct uzram *dev = b->dev;
	struct slot *s = it->s;
	uint32_t f;
	bool same;

	slot_lock(s);
	f = slot_flags(s);
	same = item_same(it, s, f) && dedup_place_get(dev, f, e->to, it->size);
	if (same) {
		s->val = backed_val(e->to, it->size);
		slot_set_flags(s, (f & ~SLOT_STATE_MASK) | SLOT_BACKED |
				  SLOT_SHARED);
	}
	slot_unlock(s);
	if (!same)
		return false;
	if (b->from_backing) {
		if (dedup_place_put(dev, f, backed_off(it->val), it->size))
			space_free(dev->tier, backed_off(it->val),
				   round16(it->size));
		if (!it->alias)
			stats_addu(&dev->stats.bd_compacted, it->size);
		return true;
	}
	/* never the last reference: the walk holds the object */
	dedup_put(dev, f, (uint32_t)it->val, it->size);
	count_written_back(dev, it);
	return true;
}

/*
 * The write of the bytes of shared entry e to boff ended with ret: on
 * success the walk holds the new place until it ends. Whether the slots
 * naming e may switch to it.
 */
static bool share_written(struct batch *b, struct share *e, uint64_t boff,
			  int ret)
{
	if (!ret && dedup_place_hold(b->dev, e->flags, boff)) {
		e->to = boff;
		e->state = SHARE_MOVED;
		return true;
	}
	space_free(b->dev->tier, boff, round16(e->size));
	e->state = SHARE_FAILED;
	return false;
}

/* Commit item it of a write that returned ret; whether its slot moved. */
static bool item_reap(struct batch *b, const struct wbuf *w,
		      const struct wb_item *it, int ret)
{
	struct share *e = it->share ? &b->map.e[it->share - 1] : NULL;

	if (!e) {
		if (!ret)
			return commit_one(b, w, it);
		space_free(b->dev->tier, it->boff, round16(it->size));
		return false;
	}
	if (!it->alias)
		share_written(b, e, it->boff, ret);
	return !ret && e->state == SHARE_MOVED && commit_shared(b, it, e);
}

/*
 * End batch write w, whose write returned ret: switch its slots, or, if
 * the write failed, leave every one in memory and give its space back.
 */
static void wbuf_reap(struct batch *b, struct wbuf *w, int ret)
{
	struct tier *t = b->dev->tier;

	for (unsigned i = 0; i < w->n; i++) {
		const struct wb_item *it = &w->it[i];

		b->pending_pages -= it->pages;
		b->pending_bytes -= it->alias ? 0 : it->size;
		if (item_reap(b, w, it, ret)) {
			b->pages += it->pages;
			b->freed += it->alias ? 0 : it->size;
		} else {
			wb_limit_give(t, it->pages);
		}
	}
	if (ret) {
		stats_inc(&b->dev->stats.bd_failed_writes);
		if (!b->err)
			b->err = ret;
	}
	w->n = 0;
	w->fill = 0;
	w->busy = false;
}

static void wbuf_wait(struct batch *b, struct wbuf *w)
{
	if (w->busy)
		wbuf_reap(b, w, w->fill ? backing_wait(b->dev->tier->b,
						       &w->io) : 0);
}

/*
 * Send the batch being filled and move on to the next one of the ring,
 * waiting for it if it is still in flight. 0, or the first failed write.
 */
static int batch_submit(struct batch *b)
{
	struct wbuf *w = &b->w[b->cur];
	int ret;

	if (w->n) {
		/* items without bytes only: nothing to write, reaped in turn */
		w->io.buf = w->buf;
		w->io.len = w->fill;
		w->io.off = w->start;
		ret = w->fill ? backing_submit(b->dev->tier->b, &w->io) : 0;
		if (ret)
			wbuf_reap(b, w, ret);
		else
			w->busy = true;
		b->cur = (b->cur + 1) % WB_INFLIGHT;
		wbuf_wait(b, &b->w[b->cur]);
	}
	return b->err;
}

int batch_drain(struct batch *b)
{
	int ret = batch_submit(b);

	for (unsigned i = 1; i <= WB_INFLIGHT; i++)
		wbuf_wait(b, &b->w[(b->cur + i) % WB_INFLIGHT]);
	return ret ? ret : b->err;
}

/* Room for one more item in the batch being filled: it, or NULL. */
static struct wbuf *batch_room(struct batch *b, int *ret)
{
	*ret = 0;
	if (b->w[b->cur].n == BATCH_ITEMS)
		*ret = batch_submit(b);
	return *ret ? NULL : &b->w[b->cur];
}

int batch_add(struct batch *b, struct slot *s, uint32_t flags,
	      uint64_t val, uint32_t size, uint32_t pages,
	      uint32_t share)
{
	uint32_t len = round16(size);
	struct wbuf *w;
	uint64_t off;
	int ret;

	w = batch_room(b, &ret);
	if (!w)
		return ret;
	ret = space_alloc(&b->dev->tier->sp, HEAD_WB, len, &off);
	if (ret)
		return ret;
	if (w->fill && (off != w->start + w->fill ||
			w->fill + len > SEG_BYTES)) {
		ret = batch_submit(b);
		w = &b->w[b->cur];
	}
	if (!ret && !w->buf && !(w->buf = malloc(SEG_BYTES)))
		ret = -ENOMEM;
	if (ret) {
		space_free(b->dev->tier, off, len);
		return ret;
	}
	if (!w->fill)
		w->start = off;
	memcpy(w->buf + w->fill, b->stage, size);
	memset(w->buf + w->fill + size, 0, len - size);
	w->fill += len;
	w->it[w->n++] = (struct wb_item){ s, flags, val, off, size, pages,
					  share, false };
	b->pending_pages += pages;
	b->pending_bytes += size;
	return 0;
}

int batch_alias(struct batch *b, struct slot *s, uint32_t flags,
		uint64_t val, uint32_t size, uint32_t pages,
		uint32_t share)
{
	struct wbuf *w;
	int ret;

	w = batch_room(b, &ret);
	if (!w)
		return ret;
	w->it[w->n++] = (struct wb_item){ s, flags, val, 0, size, pages,
					  share, true };
	b->pending_pages += pages;
	return 0;
}
