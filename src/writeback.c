/*
 * writeback.c - moving clusters to the backing store (zram's writeback)
 * and compacting the backing store.
 *
 * Writeback walks the page table (store.h's slot_next), largest objects
 * first when the run is bounded (zram's post-processing buckets: one walk
 * per size band, raw clusters first, then objects of 3/4, 1/2, 1/4, 1/8 of
 * a cluster and the rest), and gathers qualifying objects into a batch:
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
 * An object that dedup shares between clusters is written once: the first
 * slot of the walk that names it carries its bytes, and the others follow
 * it to that place (struct share_map), each with SLOT_SHARED, their
 * references counted by the dedup index by place (dedup.h). Compaction
 * moves a shared place the same way, once for all its slots. An object
 * that is not shared is taken out of the dedup index before its switch,
 * which refuses it if it became shared meanwhile: it stays for a later
 * walk.
 *
 * So a cluster leaves memory only after its write completed, and a write
 * that fails leaves every cluster of its batch in memory (and is counted
 * in bd_failed_writes); the walk stops at the first failure, and the
 * writes still in flight are waited for and committed as they completed.
 * "Still the object written" compares the state, priority, tag, handle and size and
 * then the bytes: a handle freed and reused for the same slot between the
 * copy and the switch cannot pass for the old object.
 *
 * Compaction takes segments at most half live (those below 3/4 when asked
 * by hand), marks them CLEAN (tier.h), finds their live objects by one walk
 * of the table, copies each through the same batch to head 0 and switches
 * the slot if it still names the old place. Afterwards every segment but
 * the heads is at least half live, so the backing store holds at most
 * about twice the live compressed bytes plus two segments; writeback runs
 * it by itself when the store passes that.
 *
 * Lock rules: the caller of writeback_run() and backing_compact_locked()
 * holds tier->wb_lock; at most one slot lock is held at a time, and none
 * across I/O.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "dedup.h"
#include "error.h"
#include "stats.h"
#include "store.h"
#include "tier.h"
#include "zpool.h"

#define BATCH_ITEMS 256
#define WB_INFLIGHT 4      /* batch writes in flight at once */
#define MAX_VICTIMS 32

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

static uint32_t share_home(uint64_t key, uint32_t icap)
{
	return (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 32) &
	       (icap - 1);
}

/* The entry of key, as its index + 1, or 0. */
static uint32_t share_find(const struct share_map *m, uint64_t key)
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

/* A new pending entry; its index + 1, or 0: no memory. */
static uint32_t share_add(struct share_map *m, uint64_t key, uint32_t flags,
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

/* The walk is over: let go of what it held, and empty the map. */
static void share_map_release(struct batch *b)
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

static struct batch *batch_new(struct uzram *dev, bool from_backing)
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

static void batch_free(struct batch *b)
{
	for (unsigned i = 0; i < WB_INFLIGHT; i++)
		free(b->w[i].buf);
	free(b->map.e);
	free(b->map.index);
	free(b->stage);
	free(b);
}

static bool wb_limit_take(struct tier *t, uint64_t pages)
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

static void wb_limit_give(struct tier *t, uint64_t pages)
{
	if (atomic_load(&t->wb_limit_on))
		atomic_fetch_add(&t->wb_limit, pages);
}

/* Switch one written object's slot, if it still holds what was copied. */
static bool commit_one(struct batch *b, const struct wbuf *w,
		       const struct wb_item *it)
{
	struct uzram *dev = b->dev;
	struct slot *s = it->s;
	const uint32_t keep = SLOT_STATE_MASK | SLOT_PRIO_MASK |
			      (0xffffu << SLOT_TAG_SHIFT);
	uint32_t f;
	bool same;

	slot_lock(s);
	f = slot_flags(s);
	if (b->from_backing)
		same = (f & SLOT_STATE_MASK) == SLOT_BACKED;
	else
		same = !((f ^ it->flags) & keep);
	same = same && s->val == it->val;
	if (same && !b->from_backing) {
		const void *obj = zpool_map(dev->pool, slot_handle(s));

		same = !memcmp(obj, w->buf + (it->boff - w->start), it->size);
		zpool_unmap(dev->pool, obj);
	}
	/* a shared object stays in memory (dedup.c) */
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
	stats_add(&dev->stats.compr_data_size, -(int64_t)it->size);
	if ((it->flags & SLOT_STATE_MASK) == SLOT_HUGE)
		stats_add(&dev->stats.huge_pages, -(int64_t)it->pages);
	stats_add(&dev->stats.bd_count, it->pages);
	stats_add(&dev->stats.bd_bytes, it->size);
	stats_addu(&dev->stats.bd_writes, it->pages);
	stats_addu(&dev->stats.wb_pages, it->pages);
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
	const uint32_t keep = SLOT_STATE_MASK | SLOT_PRIO_MASK |
			      (0xffffu << SLOT_TAG_SHIFT);
	uint32_t f;
	bool same;

	slot_lock(s);
	f = slot_flags(s);
	same = !((f ^ it->flags) & keep) && s->val == it->val &&
	       dedup_place_get(dev, f, e->to, it->size);
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
	stats_add(&dev->stats.compr_data_size, -(int64_t)it->size);
	if ((it->flags & SLOT_STATE_MASK) == SLOT_HUGE)
		stats_add(&dev->stats.huge_pages, -(int64_t)it->pages);
	stats_add(&dev->stats.bd_count, it->pages);
	stats_add(&dev->stats.bd_bytes, it->size);
	if (!it->alias)
		stats_addu(&dev->stats.bd_writes, it->pages);
	stats_addu(&dev->stats.wb_pages, it->pages);
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

/* Send what is gathered and wait for every write: 0 or the first error. */
static int batch_drain(struct batch *b)
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

/*
 * Append the staged object that slot s held as (flags, val); share: its
 * entry in the map + 1, if it is the first slot of a shared object.
 */
static int batch_add(struct batch *b, struct slot *s, uint32_t flags,
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

/* Append slot s, which names the shared object of entry share - 1. */
static int batch_alias(struct batch *b, struct slot *s, uint32_t flags,
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

static bool wb_match(uint32_t f, const struct wb_params *p, uint32_t now)
{
	if ((p->flags & UZRAM_WB_INCOMPRESSIBLE) && !slot_prio(f))
		return false;
	return slot_selected(f, p->flags & (UZRAM_WB_HUGE |
					    UZRAM_WB_INCOMPRESSIBLE),
			     p->flags & UZRAM_WB_IDLE, p->min_age, now);
}

static bool wb_done(const struct batch *b, const struct wb_params *p)
{
	return (p->max_pages && b->pages + b->pending_pages >= p->max_pages) ||
	       (p->free_bytes && b->freed + b->pending_bytes >= p->free_bytes);
}

/*
 * Whether the walk takes slot s (flags f, locked shared), which names
 * object handle: yes, with *share 0 if it is not shared; if it is, the
 * entry of the object in the walk's map + 1, and *alias if an earlier slot
 * carries its bytes. No if the object is shared and its write failed, or
 * if there is no memory for the entry (it stays; a later walk takes it).
 */
static bool wb_share(struct batch *b, uint32_t f, uint32_t handle,
		     uint32_t size, uint32_t *share, bool *alias)
{
	*share = share_find(&b->map, handle);
	*alias = *share != 0;
	if (*alias)
		return b->map.e[*share - 1].state != SHARE_FAILED;
	if (!dedup_hold(b->dev, f, handle))
		return true;
	*share = share_add(&b->map, handle, f, size);
	if (!*share)
		dedup_put(b->dev, f, handle, size);
	return *share != 0;
}

/* One walk over band [lo, hi); stops early when done. */
static int wb_walk(struct batch *b, const struct wb_params *p, uint32_t lo,
		   uint32_t hi, uint32_t now)
{
	struct uzram *dev = b->dev;
	struct slot *s;
	int ret;

	for (uint64_t idx = p->first; (s = slot_next(dev, &idx)) &&
				      idx <= p->last; idx++) {
		uint32_t f, size, share, pages = (uint32_t)(cluster_len(dev, idx) >> PAGE_SHIFT);
		uint64_t val;
		bool alias;

		if (wb_done(b, p))
			return 0;
		if (!wb_match(slot_flags(s), p, now))
			continue;
		slot_lock_shared(s);
		f = slot_flags(s);
		size = slot_size(s);
		val = s->val;
		if (!wb_match(f, p, now) || size < lo || size >= hi ||
		    !wb_share(b, f, slot_handle(s), size, &share, &alias)) {
			slot_unlock_shared(s);
			continue;
		}
		if (!alias) {
			const void *obj = zpool_map(dev->pool, slot_handle(s));

			memcpy(b->stage, obj, size);
			zpool_unmap(dev->pool, obj);
		}
		slot_unlock_shared(s);
		if (!wb_limit_take(dev->tier, pages))
			return 1;
		ret = alias ? batch_alias(b, s, f, val, size, pages, share) :
		      batch_add(b, s, f, val, size, pages, share);
		if (ret) {
			wb_limit_give(dev->tier, pages);
			return ret;
		}
	}
	return 0;
}

long writeback_run(struct uzram *dev, const struct wb_params *p)
{
	struct tier *t = dev->tier;
	uint32_t now = tier_clock(dev), lo, hi;
	int nbands = p->max_pages || p->free_bytes ||
		     atomic_load(&t->wb_limit_on) ? PP_BANDS : 1;
	struct batch *b = batch_new(dev, false);
	int ret = 0, fret;
	long pages;

	if (!b)
		return -ENOMEM;
	for (int k = 0; k < nbands && !ret && !wb_done(b, p); k++) {
		pp_band(dev->csize, k, nbands, &lo, &hi);
		ret = wb_walk(b, p, lo, hi, now);
	}
	fret = batch_drain(b);
	share_map_release(b);
	if (ret >= 0 && fret)
		ret = fret;
	pages = (long)b->pages;
	batch_free(b);
	return ret < 0 ? ret : pages;
}

/* Victims: FULL segments live at most max bytes, made CLEAN. */
static unsigned pick_victims(struct space *sp, uint32_t max, uint64_t *v)
{
	unsigned n = 0;

	pthread_mutex_lock(&sp->lock);
	for (uint64_t i = 0; i < sp->nsegs && n < MAX_VICTIMS; i++) {
		if (sp->state[i] == SEG_FULL && sp->live[i] <= max) {
			sp->state[i] = SEG_CLEAN;
			v[n++] = i;
		}
	}
	pthread_mutex_unlock(&sp->lock);
	return n;
}

static void release_victims(struct tier *t, const uint64_t *v, unsigned n)
{
	struct space *sp = &t->sp;

	pthread_mutex_lock(&sp->lock);
	for (unsigned i = 0; i < n; i++) {
		sp->state[v[i]] = SEG_FULL;
		if (!sp->live[v[i]]) {
			backing_discard(t->b, SEG_BYTES, v[i] << SEG_SHIFT);
			sp->state[v[i]] = SEG_FREE;
			sp->used--;
		}
	}
	pthread_mutex_unlock(&sp->lock);
}

static bool is_victim(const uint64_t *v, unsigned n, uint64_t seg)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == seg)
			return true;
	return false;
}

/* Move the live objects of the victims; 0 or a negative errno. */
static int move_victims(struct batch *b, const uint64_t *v, unsigned nv)
{
	struct uzram *dev = b->dev;
	struct slot *s;
	int ret = 0, fret;

	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		uint32_t f, size, share = 0;
		uint64_t val;

		if (slot_state(s) != SLOT_BACKED)
			continue;
		slot_lock_shared(s);
		f = slot_flags(s);
		val = s->val;
		size = backed_size(val);
		slot_unlock_shared(s);
		if ((f & SLOT_STATE_MASK) != SLOT_BACKED ||
		    !is_victim(v, nv, backed_off(val) >> SEG_SHIFT) ||
		    size > dev->csize)
			continue;
		/* a shared place: one copy, which its slots follow */
		if (f & SLOT_SHARED) {
			share = share_find(&b->map, backed_off(val));
			if (share) {
				ret = batch_alias(b, s, f, val, size, 0, share);
				if (ret)
					break;
				continue;
			}
			share = share_add(&b->map, backed_off(val), f, size);
			if (!share)
				continue;
		}
		/* a CLEAN segment is not reused: the bytes stay even if the
		 * slot lets go of them now */
		ret = backing_pread(dev->tier->b, b->stage, size,
				    backed_off(val));
		if (ret) {
			stats_inc(&dev->stats.bd_failed_reads);
			break;
		}
		ret = batch_add(b, s, f, val, size, 0, share);
		if (ret)
			break;
	}
	fret = batch_drain(b);
	share_map_release(b);
	return ret ? ret : fret;
}

long backing_compact_locked(struct uzram *dev, bool all)
{
	struct tier *t = dev->tier;
	uint64_t v[MAX_VICTIMS], before = space_used(&t->sp), after;
	struct batch *b = batch_new(dev, true);
	unsigned nv;
	int ret = 0;

	if (!b)
		return -ENOMEM;
	/* until nothing qualifies, or a pass frees nothing (objects that
	 * cannot move: corrupt slots, failing reads) */
	for (uint64_t used = before, prev = UINT64_MAX; !ret && used < prev;
	     prev = used, used = space_used(&t->sp)) {
		nv = pick_victims(&t->sp, all ? SEG_BYTES * 3 / 4 : SEG_BYTES / 2,
				  v);
		if (!nv)
			break;
		ret = move_victims(b, v, nv);
		release_victims(t, v, nv);
	}
	batch_free(b);
	after = space_used(&t->sp);
	if (ret)
		return ret;
	return before > after ? (long)(before - after) : 0;
}

bool backing_needs_compaction(struct uzram *dev)
{
	int64_t live = atomic_load(&dev->stats.bd_bytes) -
		       atomic_load(&dev->stats.bd_dedup_bytes);

	return space_used(&dev->tier->sp) >
	       2 * (uint64_t)(live > 0 ? live : 0) + 4 * SEG_BYTES;
}

/* 0 if dev has a tier; else the error for the call named what. */
static int need_tier(struct uzram *dev, const char *what)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "%s: NULL device", what);
	if (!dev->tier)
		return uzram_set_error(-ENODEV, "%s: the device has no backing "
				       "store", what);
	return 0;
}

UZRAM_API long uzram_writeback(struct uzram *dev, unsigned flags,
			       uint64_t first_page, uint64_t last_page,
			       uint64_t max_pages)
{
	struct wb_params p = { .flags = flags, .max_pages = max_pages };
	long ret = need_tier(dev, "writeback");

	if (ret)
		return ret;
	if (flags & ~(UZRAM_WB_HUGE | UZRAM_WB_IDLE | UZRAM_WB_INCOMPRESSIBLE))
		return uzram_set_error(-EINVAL, "writeback: unknown flags %#x",
				       flags);
	if (first_page > last_page || first_page >= dev->size >> PAGE_SHIFT)
		return uzram_set_error(-EINVAL, "writeback: pages %llu-%llu are "
				       "not a range of the device's %llu",
				       (unsigned long long)first_page,
				       (unsigned long long)last_page,
				       (unsigned long long)(dev->size >> PAGE_SHIFT));
	p.first = (first_page << PAGE_SHIFT) >> dev->cshift;
	p.last = last_page >= dev->size >> PAGE_SHIFT ? dev->nclusters - 1 :
		 (last_page << PAGE_SHIFT) >> dev->cshift;
	pthread_mutex_lock(&dev->tier->wb_lock);
	ret = writeback_run(dev, &p);
	if (ret >= 0 && backing_needs_compaction(dev)) {
		long c = backing_compact_locked(dev, false);

		if (c < 0)
			ret = c;
	}
	pthread_mutex_unlock(&dev->tier->wb_lock);
	if (ret < 0)
		return uzram_set_error((int)ret, "writeback: %s",
				       ret == -ENOSPC ? "the backing store is full" :
				       ret == -EIO ? "a write to the backing store failed" :
				       uzram_strerror((int)ret));
	return ret;
}

UZRAM_API int uzram_set_writeback_limit(struct uzram *dev, int enable,
					uint64_t pages)
{
	int ret = need_tier(dev, "set_writeback_limit");

	if (ret)
		return ret;
	atomic_store(&dev->tier->wb_limit, pages);
	atomic_store(&dev->tier->wb_limit_on, enable != 0);
	return 0;
}

UZRAM_API long uzram_backing_compact(struct uzram *dev)
{
	long ret = need_tier(dev, "backing_compact");

	if (ret)
		return ret;
	pthread_mutex_lock(&dev->tier->wb_lock);
	ret = backing_compact_locked(dev, true);
	pthread_mutex_unlock(&dev->tier->wb_lock);
	if (ret < 0)
		return uzram_set_error((int)ret, "backing_compact: %s",
				       uzram_strerror((int)ret));
	return ret;
}
