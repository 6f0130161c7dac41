// SPDX-License-Identifier: MIT
/*
 * recompress.c - re-encoding stored clusters with a secondary algorithm, as
 * zram's recompress: write with a fast codec, shrink later with a strong
 * one (lz4 then zstd, say).
 *
 * uzram_recompress() walks the slot table chunk by chunk, skipping chunks
 * never written, once per band of object sizes, largest first (core.h's
 * pp_band(), zram's post-processing buckets), so that a run stopped by the
 * memory limit has re-encoded the largest objects. For each cluster that
 * qualifies (an object made by a lower priority, at least `threshold`
 * bytes, huge if asked, old enough for the tier's policy), it takes the slot
 * lock exclusively, decodes the object with the codec that made it,
 * encodes it with the new one, and if the result is smaller stores it and
 * swaps it in with the new priority in the slot's flags; the old object is
 * freed after the unlock. Holding the lock across the whole step, as a
 * partial write does, is what makes it safe to run alongside writers: the
 * slot cannot change between the decode and the swap, so no rewrite is
 * ever overwritten by older bytes. Readers of that one cluster wait for
 * the step (tens of microseconds with zstd); everyone else goes on.
 *
 * A huge cluster that does not shrink stays raw and takes the priority that
 * failed in its flags (a raw object needs no codec): it is then not tried
 * again by that priority or a lower one, as zram marks such a page
 * incompressible, and writeback's "incompressible" type picks it.
 *
 * An object that dedup shares between clusters (dedup.c) is re-encoded
 * once, the first time the walk meets one of its slots. The walk keeps
 * {old handle -> new object} in a bounded map (struct remap; when it is
 * full, the band is walked again for the rest) and switches every later
 * slot it meets that still names the old object, each under its own lock,
 * dropping that slot's reference to the old object, which is freed with
 * its last. A slot the walk does not reach (one that took the old object
 * behind the walk's position) keeps it alive by its reference, so
 * correctness never depends on reaching every slot; the next run takes it.
 * Each switched slot counts in pages_recompressed. Writeback does not do
 * this: it leaves a shared object in memory (writeback.c).
 *
 * The tag bits are kept: the bytes are the same; so is the idle bit. The
 * counters follow the object's size and state (a huge cluster that
 * shrinks is no longer huge).
 *
 * The same walk re-encodes, for dict.c, the objects a priority made in the
 * codec bank it has left when its dictionary changed (core.h): those are
 * kept whatever their new size, so that the old bank empties.
 *
 * Idle tracking, as zram's idle file: uzram_mark_idle() sets the idle bit
 * of every stored cluster; a read or a write of the cluster clears it
 * (slot_touch(), store.c), so that a later uzram_recompress() with
 * UZRAM_RECOMP_IDLE takes only what nobody used since the mark.
 *
 * Lock rules: as store.c; one slot lock at a time, the allocator and codec
 * called under it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "dedup/dedup.h"
#include "base/base.h"
#include "recompress.h"
#include "core/core.h"
#include "zcomp/zcomp.h"
#include "zpool/zpool.h"

/* What recompress_one() did: nothing to do, re-encoded, or no smaller. */
enum step { STEP_SKIPPED, STEP_DONE, STEP_NO_GAIN };

/*
 * Whether a pass takes a cluster whose slot has flags f and an object of
 * size bytes, when its priority's codecs are in bank cur. The one test,
 * made without the lock to skip clusters fast (size unknown: pass
 * UINT32_MAX) and again under it.
 */
static bool pass_selects(const struct recomp_pass *p, uint32_t f,
			 uint32_t size, unsigned cur, uint32_t now)
{
	enum slot_state state = (enum slot_state)(f & SLOT_STATE_MASK);

	if (p->reencode)
		return state == SLOT_OBJ && slot_prio(f) == p->prio &&
		       slot_bank(f) != cur;
	return slot_selected(f, p->flags & UZRAM_RECOMP_HUGE,
			     p->flags & UZRAM_RECOMP_IDLE, p->min_age, now) &&
	       slot_prio(f) < p->prio && size >= p->threshold;
}

/*
 * The shared objects one walk has re-encoded: old handle -> the new object
 * and what a slot naming the old one becomes. The walk holds a reference
 * to both (dedup_replace()) until it ends, so neither handle is reused
 * under the map. Bounded: once it is 3/4 full, further shared objects wait
 * for another walk of the band, made at once while walks make progress.
 */
#define REMAP_CAP 4096u   /* a power of two */

struct remap_ent {
	uint32_t old, new;     /* handles; old 0: empty */
	uint32_t tag_flags;    /* the flags of a slot naming old: its tag */
	uint32_t old_size, new_size;
	uint32_t bits;         /* the new state, priority and bank */
};

struct remap {
	uint32_t n;
	bool full;             /* a shared object found no room */
	struct remap_ent e[REMAP_CAP];
};

static struct remap_ent *remap_at(struct remap *m, uint32_t handle)
{
	uint32_t i = (handle * UINT32_C(0x9e3779b1)) & (REMAP_CAP - 1);

	while (m->e[i].old && m->e[i].old != handle)
		i = (i + 1) & (REMAP_CAP - 1);
	return &m->e[i];
}

/* Room for one more entry in *mp, made at the first; false: none. */
static bool remap_room(struct remap **mp)
{
	if (!*mp)
		*mp = calloc(1, sizeof **mp);
	if (!*mp)
		return false;
	if (((*mp)->n + 1) * 4 > REMAP_CAP * 3)
		(*mp)->full = true;
	return !(*mp)->full;
}

/* The end of a walk: drop its references to the old and new objects. */
static void remap_release(struct uzram *dev, struct remap *m)
{
	for (uint32_t i = 0; m && i < REMAP_CAP; i++) {
		struct remap_ent *e = &m->e[i];

		if (!e->old)
			continue;
		dedup_put(dev, e->tag_flags, e->new, e->new_size);
		dedup_put(dev, e->tag_flags, e->old, e->old_size);
	}
	free(m);
}

/* What a step changed, for the counters and the free after the unlock. */
struct step_out {
	uint32_t new_size;
	enum slot_state new_state;
	bool shared;           /* the old object is shared: dedup_put() it */
};

/*
 * Slot s (flags f) names the old object of e: name the new one instead,
 * taking a reference to it; the caller drops the one to the old.
 */
static int remap_slot(struct uzram *dev, struct slot *s, uint32_t f,
		      const struct remap_ent *e, struct step_out *o)
{
	if (!dedup_share(dev, e->tag_flags, e->new))
		return STEP_SKIPPED;
	s->val = (uint64_t)e->new_size << 32 | e->new;
	slot_set_flags(s, (f & ~(SLOT_STATE_MASK | SLOT_PRIO_MASK |
				 SLOT_BANK)) | e->bits);
	o->new_size = e->new_size;
	o->new_state = (enum slot_state)(e->bits & SLOT_STATE_MASK);
	o->shared = true;
	return STEP_DONE;
}

/*
 * Encode the cluster of slot s (flags f, old_size bytes, len plain bytes)
 * with the pass's codec to, in bank *bank, into *data and *clen. A
 * recompression keeps the result only if it is smaller; a re-encode keeps
 * it whatever its size (raw if it does not compress: *new_state), so that
 * no object is left in the bank it leaves. Returns a step or a negative
 * errno.
 */
static int encode(struct uzram *dev, struct slot *s,
		  const struct recomp_pass *p, const struct zcomp *to,
		  uint32_t f, uint32_t old_size, size_t len,
		  struct store_scratch *t, const void **data, int *clen,
		  enum slot_state *new_state, uint32_t *bank)
{
	uint32_t cap;
	int ret = slot_decode(dev, s, t->plain, len);

	if (ret)
		return ret;
	/* worth it only if smaller than now, and than the raw limit */
	cap = old_size - 1 < HUGE_LIMIT(len) ? old_size - 1 : HUGE_LIMIT(len);
	if (p->reencode || (p->promote && (f & SLOT_STATE_MASK) == SLOT_OBJ))
		cap = HUGE_LIMIT(len);
	*data = t->cbuf;
	*new_state = SLOT_OBJ;
	*clen = zcomp_compress(to, t->plain, len, t->cbuf, cap);
	if (*clen == -E2BIG && (p->reencode || (p->promote &&
				(f & SLOT_STATE_MASK) == SLOT_OBJ))) {
		*data = t->plain;
		*clen = (int)len;
		*new_state = SLOT_HUGE;
		*bank = 0;
	} else if (*clen == -E2BIG) {
		if ((f & SLOT_STATE_MASK) == SLOT_HUGE) /* see the top */
			slot_set_flags(s, (f & ~SLOT_PRIO_MASK) |
					  p->prio << SLOT_PRIO_SHIFT);
		return STEP_NO_GAIN;
	} else if (*clen < 0) {
		return *clen;
	}
	return STEP_DONE;
}

/*
 * The new object (handle, clen bytes, bits) of slot s (flags f), which
 * names old_handle: swap it in. A shared old object gets an entry in *mp
 * for the walk's other slots naming it. Returns a step.
 */
static int swap_in(struct uzram *dev, struct slot *s, uint32_t f,
		   uint32_t old_handle, uint32_t old_size, uint32_t handle,
		   int clen, uint32_t bits, bool shared, bool index_new,
		   struct remap *m, struct step_out *o)
{
	struct remap_ent *e;

	if (shared) {
		if (!dedup_replace(dev, f, old_handle, old_size, handle,
				   index_new)) {
			zpool_free(dev->pool, handle);
			return STEP_SKIPPED;
		}
		e = remap_at(m, old_handle);
		*e = (struct remap_ent){ old_handle, handle, f, old_size,
					 (uint32_t)clen, bits };
		m->n++;
		return remap_slot(dev, s, f, e, o);
	}
	if (!dedup_detach(dev, f, old_handle)) {
		/* shared since we looked: the next walk takes it */
		zpool_free(dev->pool, handle);
		return STEP_SKIPPED;
	}
	s->val = (uint64_t)clen << 32 | handle;
	slot_set_flags(s, (f & ~(SLOT_STATE_MASK | SLOT_PRIO_MASK | SLOT_BANK |
				 SLOT_SHARED)) | bits);
	o->new_size = (uint32_t)clen;
	o->new_state = (enum slot_state)(bits & SLOT_STATE_MASK);
	return STEP_DONE;
}

/*
 * For p->copy: store the new object (data, clen bytes) with slot s
 * unlocked, and lock it again. The caller holds the lock exclusively, and
 * holds it again on return. STEP_DONE if the slot still names old_handle
 * with the flags f had (state, priority, bank) and the same bytes: the
 * same data, even if the handle was freed and reused meanwhile. Else
 * STEP_SKIPPED, the new object freed; or a negative errno.
 */
static int store_unlocked(struct uzram *dev, struct slot *s,
			  const struct recomp_pass *p, uint32_t f,
			  uint32_t old_handle, uint32_t old_size,
			  const void *data, int clen, uint32_t *handle)
{
	const uint32_t keep = SLOT_STATE_MASK | SLOT_PRIO_MASK | SLOT_BANK;
	const unsigned char *obj = zpool_map(dev->pool, old_handle);
	bool same;
	int ret;

	memcpy(p->copy, obj, old_size);
	zpool_unmap(dev->pool, obj);
	slot_unlock(s);
	ret = zpool_store(dev->pool, data, (size_t)clen, handle);
	slot_lock(s);
	if (ret)
		return ret;
	same = (slot_flags(s) & keep) == (f & keep) &&
	       slot_handle(s) == old_handle && slot_size(s) == old_size;
	if (same) {
		obj = zpool_map(dev->pool, old_handle);
		same = !memcmp(obj, p->copy, old_size);
		zpool_unmap(dev->pool, obj);
	}
	if (same)
		return STEP_DONE;
	zpool_free(dev->pool, *handle);
	return STEP_SKIPPED;
}

int recompress_warm(struct uzram *dev, unsigned prio)
{
	struct store_scratch *t = store_scratch_get(dev->csize);
	const struct zcomp *zc = comp_at(dev, prio, NULL);
	int n;

	if (!t || !zc)
		return -ENOMEM;
	memset(t->plain, 0, dev->csize);
	n = zcomp_compress(zc, t->plain, dev->csize, t->cbuf,
			   HUGE_LIMIT(dev->csize));
	return n < 0 && n != -E2BIG ? n : 0;
}

/*
 * Re-encode cluster idx if the pass takes it and its object's size is in
 * [lo, hi) (the band of the walk), or if it names a shared object the walk
 * has re-encoded already (*mp). Returns a step or a negative errno.
 */
static int recompress_one(struct uzram *dev, struct slot *s, uint64_t idx,
			  const struct recomp_pass *p, uint32_t lo, uint32_t hi,
			  uint32_t now, struct store_scratch *t, struct remap **mp)
{
	size_t len = cluster_len(dev, idx);
	uint32_t f, old_size, old_handle, handle = 0, bank;
	const struct zcomp *to;
	enum slot_state state, new_state = SLOT_OBJ;
	struct step_out o = { 0 };
	struct remap_ent *e;
	const void *data = NULL;
	bool shared;
	int ret, clen = 0;

	slot_lock(s);
	to = comp_at(dev, p->prio, &bank);
	f = slot_flags(s);
	state = (enum slot_state)(f & SLOT_STATE_MASK);
	old_size = slot_size(s);
	old_handle = slot_handle(s);
	ret = STEP_SKIPPED;
	if (*mp && (state == SLOT_OBJ || state == SLOT_HUGE) &&
	    (e = remap_at(*mp, old_handle))->old) {
		ret = remap_slot(dev, s, f, e, &o);
		goto out;
	}
	if (!pass_selects(p, f, old_size, bank ? 1 : 0, now) ||
	    old_size < lo || old_size >= hi)
		goto out;
	shared = dedup_shared(dev, f, old_handle);
	if (shared && (p->copy || !remap_room(mp)))
		goto out;     /* the next walk takes it */
	ret = encode(dev, s, p, to, f, old_size, len, t, &data, &clen,
		     &new_state, &bank);
	if (ret != STEP_DONE)
		goto out;
	if (p->copy) {
		ret = store_unlocked(dev, s, p, f, old_handle, old_size, data,
				     clen, &handle);
		if (ret != STEP_DONE)
			goto out;
	} else if ((ret = zpool_store(dev->pool, data, (size_t)clen,
				      &handle))) {
		goto out;
	}
	/* a re-encode of priority 0 is made by the codec dedup_find() uses */
	ret = swap_in(dev, s, f, old_handle, old_size, handle, clen,
		      new_state | p->prio << SLOT_PRIO_SHIFT | bank, shared,
		      p->prio == 0, *mp, &o);
out:
	slot_unlock(s);
	if (ret == STEP_DONE) {
		int64_t pages = (int64_t)(len >> PAGE_SHIFT);

		if (o.shared)
			dedup_put(dev, f, old_handle, old_size);
		else
			zpool_free(dev->pool, old_handle);
		stats_add(&dev->stats.compr_data_size,
			  (int64_t)o.new_size - (int64_t)old_size);
		stats_add(&dev->stats.huge_pages,
			  (o.new_state == SLOT_HUGE ? pages : 0) -
			  (state == SLOT_HUGE ? pages : 0));
		stats_add(&dev->stats.pages_recompressed, pages);
	}
	return ret;
}

/*
 * One walk of the table, over the objects of sizes [lo, hi); *again: its
 * map of shared objects was full; *stop: p->pace stopped it.
 */
static long walk(struct uzram *dev, const struct recomp_pass *p, uint32_t lo,
		 uint32_t hi, struct store_scratch *t, int *err, bool *again,
		 bool *stop)
{
	uint32_t now = store_clock(dev);
	struct remap *m = NULL;
	struct slot *s;
	long pages = 0;

	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		unsigned cur = atomic_load_explicit(&dev->cur[p->prio],
						    memory_order_relaxed);
		uint32_t f = slot_flags(s);
		int r;

		if (p->pace && !(idx & 4095) && !p->pace(dev, false))
			*stop = true;
		if (*stop)
			break;
		if (!pass_selects(p, f, UINT32_MAX, cur, now) &&
		    !(m && m->n && slot_prio(f) < p->prio + p->reencode &&
		      ((f & SLOT_STATE_MASK) == SLOT_OBJ ||
		       (f & SLOT_STATE_MASK) == SLOT_HUGE)))
			continue;
		r = recompress_one(dev, s, idx, p, lo, hi, now, t, &m);
		if (p->pace && r != STEP_SKIPPED && !p->pace(dev, true))
			*stop = true;
		if (r == STEP_DONE)
			pages += (long)(cluster_len(dev, idx) >> PAGE_SHIFT);
		else if (r == -EIO)
			*err = -EIO;    /* corrupt: leave it, go on */
		else if (r < 0) {
			remap_release(dev, m);
			return uzram_set_error(r, "recompress at cluster %llu: "
					       "%s", (unsigned long long)idx,
					       uzram_strerror(r));
		}
	}
	*again = m && m->full;
	remap_release(dev, m);
	return pages;
}

/* Walks of the band until one leaves no shared object for lack of room. */
static long pass_band(struct uzram *dev, const struct recomp_pass *p,
		      uint32_t lo, uint32_t hi, struct store_scratch *t, int *err)
{
	long pages = 0, n;
	bool again, stop = false;

	do {
		n = walk(dev, p, lo, hi, t, err, &again, &stop);
		if (n < 0)
			return n;
		pages += n;
	} while (again && n > 0 && !stop);
	return pages;
}

long recompress_pass(struct uzram *dev, const struct recomp_pass *p)
{
	struct store_scratch *t = store_scratch_get(dev->csize);
	/* a re-encode must take everything: one walk, no bands */
	int nbands = p->reencode || p->promote ? 1 : PP_BANDS, err = 0;
	long pages = 0;

	if (!t)
		return uzram_set_error(-ENOMEM, "recompress: out of memory");
	for (int k = 0; k < nbands; k++) {
		uint32_t lo, hi;
		long n;

		pp_band(dev->csize, k, nbands, &lo, &hi);
		if (hi <= p->threshold)
			break;
		n = pass_band(dev, p, lo > p->threshold ? lo : p->threshold, hi,
			      t, &err);
		if (n < 0)
			return n;
		pages += n;
	}
	if (err) {
		stats_inc(&dev->stats.failed_reads);
		return uzram_set_error(err, "recompress: a stored object is "
				       "corrupt; %ld pages re-encoded", pages);
	}
	return pages;
}

UZRAM_API long uzram_mark_idle(struct uzram *dev)
{
	struct slot *s;
	long pages = 0;

	if (!dev)
		return uzram_set_error(-EINVAL, "mark_idle: NULL device");
	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		if (slot_state(s) == SLOT_EMPTY)
			continue;
		slot_lock_shared(s);
		if (slot_state(s) != SLOT_EMPTY) {
			atomic_fetch_or_explicit(&s->flags, SLOT_IDLE,
						 memory_order_relaxed);
			pages += (long)(cluster_len(dev, idx) >> PAGE_SHIFT);
		}
		slot_unlock_shared(s);
	}
	return pages;
}

UZRAM_API long uzram_recompress(struct uzram *dev, int prio, unsigned flags,
				uint32_t threshold)
{
	return recompress_run(dev, prio, flags, threshold, 0);
}

long recompress_run(struct uzram *dev, int prio, unsigned flags,
		    uint32_t threshold, unsigned min_age)
{
	struct recomp_pass p = {
		.flags = flags, .threshold = threshold, .min_age = min_age,
	};

	if (!dev)
		return uzram_set_error(-EINVAL, "recompress: NULL device");
	if (prio < 1 || prio > UZRAM_MAX_RECOMP ||
	    !comp_at(dev, (unsigned)prio, NULL))
		return uzram_set_error(-EINVAL, "recompress: no secondary "
				       "algorithm of priority %d", prio);
	if (flags & ~(UZRAM_RECOMP_HUGE | UZRAM_RECOMP_IDLE))
		return uzram_set_error(-EINVAL, "recompress: unknown flags %#x",
				       flags);
	p.prio = (unsigned)prio;
	return recompress_pass(dev, &p);
}
