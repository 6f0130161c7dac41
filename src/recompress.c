/*
 * recompress.c - re-encoding stored clusters with a secondary algorithm, as
 * zram's recompress: write with a fast codec, shrink later with a strong
 * one (lz4 then zstd, say).
 *
 * uzram_recompress() walks the page table chunk by chunk, skipping chunks
 * never written, once per band of object sizes, largest first (store.h's
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
 * An object that dedup shares between clusters is left as it is (dedup.c).
 *
 * The tag bits are kept: the bytes are the same; so is the idle bit. The
 * counters follow the object's size and state (a huge cluster that
 * shrinks is no longer huge).
 *
 * The same walk re-encodes, for dict.c, the objects a priority made in the
 * codec place it has left when its dictionary changed (slot.h): those are
 * kept whatever their new size, so that the old place empties.
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

#include "uzram.h"
#include "dedup.h"
#include "error.h"
#include "recompress.h"
#include "slot.h"
#include "stats.h"
#include "store.h"
#include "tier.h"
#include "zcomp.h"
#include "zpool.h"

/* What recompress_one() did: nothing to do, re-encoded, or no smaller. */
enum step { STEP_SKIPPED, STEP_DONE, STEP_NO_GAIN };

/*
 * Whether a pass takes a cluster whose slot has flags f and an object of
 * size bytes, when its priority's codecs are in place cur. The one test,
 * made without the lock to skip clusters fast (size unknown: pass
 * UINT32_MAX) and again under it.
 */
static bool pass_takes(const struct recomp_pass *p, uint32_t f, uint32_t size,
		       unsigned cur, uint32_t now)
{
	enum slot_state state = (enum slot_state)(f & SLOT_STATE_MASK);

	if (p->reencode)
		return state == SLOT_OBJ && slot_prio(f) == p->prio &&
		       slot_place(f) != cur;
	return slot_selected(f, p->flags & UZRAM_RECOMP_HUGE,
			     p->flags & UZRAM_RECOMP_IDLE, p->min_age, now) &&
	       slot_prio(f) < p->prio && size >= p->threshold;
}

/*
 * Re-encode cluster idx if the pass takes it and its object's size is in
 * [lo, hi) (the band of the walk). A recompression keeps the new object
 * only if it is smaller; a re-encode keeps it whatever its size (raw if it
 * does not compress), so that no object is left in the place it leaves.
 * Returns a step or a negative errno.
 */
static int recompress_one(struct uzram *dev, struct slot *s, uint64_t idx,
			  const struct recomp_pass *p, uint32_t lo, uint32_t hi,
			  uint32_t now, struct store_tls *t)
{
	size_t len = cluster_len(dev, idx);
	uint32_t f, old_size, old_handle, handle = 0, cap, place;
	const struct zcomp *to;
	enum slot_state state, new_state = SLOT_OBJ;
	const void *data = t->cbuf;
	int ret, clen = 0;

	slot_lock(s);
	to = comp_at(dev, p->prio, &place);
	f = slot_flags(s);
	state = (enum slot_state)(f & SLOT_STATE_MASK);
	old_size = slot_size(s);
	old_handle = slot_handle(s);
	ret = STEP_SKIPPED;
	if (!pass_takes(p, f, old_size, place ? 1 : 0, now) ||
	    old_size < lo || old_size >= hi)
		goto out;

	ret = slot_decode(dev, s, t->plain, len);
	if (ret)
		goto out;

	/* worth it only if smaller than now, and than the raw limit */
	cap = old_size - 1 < HUGE_LIMIT(len) ? old_size - 1 : HUGE_LIMIT(len);
	if (p->reencode)
		cap = HUGE_LIMIT(len);
	clen = zcomp_compress(to, t->plain, len, t->cbuf, cap);
	if (clen == -E2BIG && p->reencode) {
		data = t->plain;
		clen = (int)len;
		new_state = SLOT_HUGE;
		place = 0;
	} else if (clen == -E2BIG) {
		if (state == SLOT_HUGE)   /* incompressible: see the top */
			slot_set_flags(s, (f & ~SLOT_PRIO_MASK) |
					  p->prio << SLOT_PRIO_SHIFT);
		ret = STEP_NO_GAIN;
		goto out;
	} else if (clen < 0) {
		ret = clen;
		goto out;
	}
	ret = zpool_store(dev->pool, data, (size_t)clen, &handle);
	if (ret)
		goto out;
	if (!dedup_detach(dev, f, old_handle)) {
		/* shared: see dedup.c */
		zpool_free(dev->pool, handle);
		ret = STEP_SKIPPED;
		goto out;
	}
	s->val = (uint64_t)clen << 32 | handle;
	slot_set_flags(s, (f & ~(SLOT_STATE_MASK | SLOT_PRIO_MASK | SLOT_PLACE |
				 SLOT_SHARED)) |
			  new_state | p->prio << SLOT_PRIO_SHIFT | place);
	ret = STEP_DONE;
out:
	slot_unlock(s);
	if (ret == STEP_DONE) {
		int64_t pages = (int64_t)(len >> PAGE_SHIFT);

		zpool_free(dev->pool, old_handle);
		stats_add(&dev->stats.compr_data_size,
			  (int64_t)clen - (int64_t)old_size);
		stats_add(&dev->stats.huge_pages,
			  (new_state == SLOT_HUGE ? pages : 0) -
			  (state == SLOT_HUGE ? pages : 0));
		stats_add(&dev->stats.pages_recompressed, pages);
	}
	return ret;
}

/* One walk of the table, over the objects of sizes [lo, hi). */
static long pass_band(struct uzram *dev, const struct recomp_pass *p,
		      uint32_t lo, uint32_t hi, struct store_tls *t, int *err)
{
	uint32_t now = tier_clock(dev);
	struct slot *s;
	long pages = 0;

	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		unsigned cur = atomic_load_explicit(&dev->cur[p->prio],
						    memory_order_relaxed);
		int r;

		if (!pass_takes(p, slot_flags(s), UINT32_MAX, cur, now))
			continue;
		r = recompress_one(dev, s, idx, p, lo, hi, now, t);
		if (r == STEP_DONE)
			pages += (long)(cluster_len(dev, idx) >> PAGE_SHIFT);
		else if (r == -EIO)
			*err = -EIO;    /* corrupt: leave it, go on */
		else if (r < 0)
			return uzram_set_error(r, "recompress at cluster %llu: "
					       "%s", (unsigned long long)idx,
					       uzram_strerror(r));
	}
	return pages;
}

long recompress_pass(struct uzram *dev, const struct recomp_pass *p)
{
	struct store_tls *t = store_tls_get(dev->csize);
	/* a re-encode must take everything: one walk, no bands */
	int nbands = p->reencode ? 1 : PP_BANDS, err = 0;
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
