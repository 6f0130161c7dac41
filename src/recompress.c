/*
 * recompress.c - re-encoding stored clusters with a secondary algorithm, as
 * zram's recompress: write with a fast codec, shrink later with a strong
 * one (lz4 then zstd, say).
 *
 * uzram_recompress() walks the page table chunk by chunk, skipping chunks
 * never written, once per band of object sizes, largest first (store.h's
 * pp_band(), zram's post-processing buckets), so that a run stopped by the
 * memory limit has re-encoded the largest objects. For each cluster that
 * qualifies (an object made by a lower
 * priority, at least `threshold` bytes, huge if asked), it takes the slot
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
 * The tag bits are kept: the bytes are the same; so is the idle bit. The
 * counters follow the object's size and state (a huge cluster that
 * shrinks is no longer huge).
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

#include "uzram.h"
#include "error.h"
#include "slot.h"
#include "stats.h"
#include "store.h"
#include "tier.h"
#include "zcomp.h"
#include "zpool.h"

/* What recompress_one() did: nothing to do, re-encoded, or no smaller. */
enum step { STEP_SKIPPED, STEP_DONE, STEP_NO_GAIN };

/*
 * Recompress cluster idx if it qualifies; the caller checked, without the
 * lock, that it probably does. Returns a step or a negative errno.
 */
static int recompress_one(struct uzram *dev, struct slot *s, uint64_t idx,
			  unsigned prio, unsigned flags, uint32_t threshold,
			  uint32_t below, struct store_tls *t)
{
	const struct zcomp *to = comp_at(dev, prio);
	size_t len = unit_len(dev, idx);
	uint32_t f, old_size, old_handle, handle = 0, cap;
	enum slot_state state;
	int ret, clen = 0;

	slot_lock(s);
	f = slot_flags(s);
	state = (enum slot_state)(f & SLOT_STATE_MASK);
	old_size = slot_size(s);
	old_handle = slot_handle(s);
	ret = STEP_SKIPPED;
	if ((state != SLOT_OBJ && state != SLOT_HUGE) || slot_prio(f) >= prio ||
	    ((flags & UZRAM_RECOMP_HUGE) && state != SLOT_HUGE) ||
	    ((flags & UZRAM_RECOMP_IDLE) && !(f & SLOT_IDLE)) ||
	    old_size < threshold || old_size >= below)
		goto out;

	ret = slot_decode(dev, s, t->unit, len);
	if (ret)
		goto out;

	/* worth it only if smaller than now, and than the raw limit */
	cap = old_size - 1 < HUGE_LIMIT(len) ? old_size - 1 : HUGE_LIMIT(len);
	clen = zcomp_compress(to, t->unit, len, t->cbuf, cap);
	if (clen == -E2BIG) {
		/* a raw cluster needs no codec: its priority bits record the
		 * strongest one that failed to shrink it (incompressible) */
		if (state == SLOT_HUGE)
			slot_set_flags(s, (f & ~SLOT_PRIO_MASK) |
					  prio << SLOT_PRIO_SHIFT);
		ret = STEP_NO_GAIN;
		goto out;
	}
	if (clen < 0) {
		ret = clen;
		goto out;
	}
	ret = zpool_store(dev->pool, t->cbuf, (size_t)clen, &handle);
	if (ret)
		goto out;
	s->val = (uint64_t)clen << 32 | handle;
	slot_set_flags(s, (f & ~(SLOT_STATE_MASK | SLOT_PRIO_MASK)) | SLOT_OBJ |
			  prio << SLOT_PRIO_SHIFT);
	ret = STEP_DONE;
out:
	slot_unlock(s);
	if (ret == STEP_DONE) {
		zpool_free(dev->pool, old_handle);
		stats_add(&dev->stats.compr_data_size,
			  (int64_t)clen - (int64_t)old_size);
		if (state == SLOT_HUGE)
			stats_add(&dev->stats.huge_pages,
				  -(int64_t)(len >> PAGE_SHIFT));
		stats_add(&dev->stats.pages_recompressed,
			  (int64_t)(len >> PAGE_SHIFT));
	}
	return ret;
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
			pages += (long)(unit_len(dev, idx) >> PAGE_SHIFT);
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
	uint32_t now;
	struct store_tls *t;
	struct slot *s;
	long pages = 0;
	int err = 0;

	if (!dev)
		return uzram_set_error(-EINVAL, "recompress: NULL device");
	if (prio < 1 || prio > UZRAM_MAX_RECOMP || !comp_at(dev, (unsigned)prio))
		return uzram_set_error(-EINVAL, "recompress: no secondary "
				       "algorithm of priority %d", prio);
	if (flags & ~(UZRAM_RECOMP_HUGE | UZRAM_RECOMP_IDLE))
		return uzram_set_error(-EINVAL, "recompress: unknown flags %#x",
				       flags);
	t = store_tls_get(dev->csize);
	if (!t)
		return uzram_set_error(-ENOMEM, "recompress: out of memory");

	now = tier_clock(dev);
	for (int k = 0; k < PP_BANDS; k++) {
		uint32_t lo, hi;

		pp_band(dev->csize, k, PP_BANDS, &lo, &hi);
		if (hi <= threshold)
			break;
		for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
			uint32_t f = slot_flags(s);
			int r;

			if (((f & SLOT_STATE_MASK) != SLOT_OBJ &&
			     (f & SLOT_STATE_MASK) != SLOT_HUGE) ||
			    slot_prio(f) >= (unsigned)prio ||
			    (min_age && slot_age(f, now) < min_age))
				continue;
			r = recompress_one(dev, s, idx, (unsigned)prio, flags,
					   lo > threshold ? lo : threshold, hi,
					   t);
			if (r == STEP_DONE)
				pages += (long)(unit_len(dev, idx) >> PAGE_SHIFT);
			else if (r == -EIO)
				err = -EIO;    /* corrupt: leave it, go on */
			else if (r < 0)
				return uzram_set_error(r, "recompress at "
					"cluster %llu: %s",
					(unsigned long long)idx,
					uzram_strerror(r));
		}
	}
	if (err) {
		stats_inc(&dev->stats.failed_reads);
		return uzram_set_error(err, "recompress: a stored object is "
				       "corrupt; %ld pages re-encoded", pages);
	}
	return pages;
}
