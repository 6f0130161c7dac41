// SPDX-License-Identifier: MIT
/*
 * tier_policy.c - the tier run by itself, and its lifetime (tier_open(),
 * tier_close()): idle ages and the background
 * thread that keeps a device with a memory limit inside it.
 *
 * Idle ages. Each slot keeps the device's coarse clock (4-second ticks
 * since open, 8 bits) at its last read or write (core.h's access stamp,
 * set by store.c). An age is now - stamp modulo 256, so to keep old
 * clusters from looking young after a wrap, every walk of the table here
 * saturates ages past AGE_MAX (128 ticks, 512 s): the stamp is moved to
 * now - AGE_MAX. The thread walks every 32 ticks while it runs (below);
 * uzram_mark_idle_age() walks too. With no walk for 256 ticks (a device
 * with no limit), an age wraps: as on a device with no backing store,
 * ages are then exact up to 1020 s only.
 *
 * The policy. The thread ("uzram-tier") has work only while the device
 * has a memory limit: with none it sleeps until uzram_set_mem_limit()
 * sets one, and never wakes otherwise. With one, it wakes every 200 ms,
 * or at once when a writer had to write through to the backing store. If
 * memory holds more than the high watermark of the limit (or a writer
 * found it full), one step:
 *
 *   need = mem_used - low watermark
 *   A    = the highest age such that the objects at least A old hold
 *          need bytes (a histogram of the objects' bytes by age)
 *   1. recompress clusters at least A old with the strongest secondary
 *      algorithm, if the device has one; compact memory. The pool's limit
 *      is raised meanwhile to 1/64 of the limit (at least 64 KiB) above
 *      what it holds (or above the limit), since a new object is stored
 *      before the old one is freed: writers may use that room too, the
 *      only overshoot the policy allows
 *   2. still above the low watermark: write back clusters at least A old,
 *      largest first, until need bytes are out; then any age; compact
 *   3. compact the backing store if it holds more than twice the live
 *      bytes (write-through appends without compacting)
 *
 * Every step is counted (policy_runs, policy_recompressed,
 * policy_written_back in the stats).
 *
 * A writer that needs a new chunk of the slot table while memory is full
 * cannot write through (the slot itself is memory), so it runs a step
 * itself, as the kernel's direct reclaim does (tier_make_room): down to
 * the low watermark or further, until the chunk fits, instead of failing
 * with -ENOSPC while the backing store has room.
 *
 * Lock rules: the thread takes tier->wb_lock for its steps, as
 * uzram_writeback() does, and the slot locks one at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "base/base.h"
#include "core/core.h"
#include "recompress/recompress.h"
#include "tier.h"
#include "zpool/zpool.h"

#define AGING_EVERY 32u      /* ticks between aging walks */
#define WAKE_MS 200

static uint64_t mem_used(struct uzram *dev)
{
	struct zpool_stats zs;

	zpool_stats(dev->pool, &zs);
	return zs.mem_used;
}

/*
 * Walk the table: saturate old ages; with mark, set the idle bit of what
 * is at least min_age ticks old; with hist, add each in-memory object's
 * bytes to hist[age]. Returns the pages marked.
 */
static long age_walk(struct uzram *dev, bool mark, unsigned min_age,
		     uint64_t *hist)
{
	uint32_t now = store_clock(dev);
	struct slot *s;
	long pages = 0;

	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		enum slot_state st = slot_state(s);
		uint32_t f;

		if (st == SLOT_EMPTY)
			continue;
		slot_lock_shared(s);
		slot_age_saturate(s, now);
		f = slot_flags(s);
		st = (enum slot_state)(f & SLOT_STATE_MASK);
		if (mark && st != SLOT_EMPTY && slot_age(f, now) >= min_age) {
			atomic_fetch_or_explicit(&s->flags, SLOT_IDLE,
						 memory_order_relaxed);
			pages += (long)(cluster_len(dev, idx) >> PAGE_SHIFT);
		}
		if (hist && (st == SLOT_OBJ || st == SLOT_HUGE))
			hist[slot_age(f, now)] += slot_size(s);
		slot_unlock_shared(s);
	}
	if (dev->tier)
		dev->tier->last_aging = now;
	return pages;
}

UZRAM_API long uzram_mark_idle_age(struct uzram *dev, uint32_t seconds)
{
	uint64_t ticks;

	if (!dev)
		return uzram_set_error(-EINVAL, "mark_idle_age: NULL device");
	ticks = ((uint64_t)seconds + (1u << TICK_SHIFT) - 1) >> TICK_SHIFT;
	if (ticks > AGE_MAX)
		ticks = AGE_MAX;
	return age_walk(dev, true, (unsigned)ticks, NULL);
}

/* The highest age whose objects and older ones hold need bytes. */
static unsigned cold_age(struct uzram *dev, uint64_t need)
{
	uint64_t hist[256] = { 0 }, sum = 0;
	unsigned a;

	age_walk(dev, false, 0, hist);
	for (a = AGE_MAX; a > 0; a--) {
		sum += hist[a];
		if (sum >= need)
			break;
	}
	return a;
}

static int strongest_recomp(struct uzram *dev)
{
	for (int prio = UZRAM_MAX_RECOMP; prio > 0; prio--)
		if (comp_at(dev, (unsigned)prio, NULL))
			return prio;
	return 0;
}

/* One step: move clusters out until memory holds at most low bytes. */
static void policy_step(struct uzram *dev, uint64_t low)
{
	struct tier *t = dev->tier;
	uint64_t limit = atomic_load(&dev->mem_limit), used;
	struct wb_params p = { .last = dev->nclusters - 1 };
	int prio = strongest_recomp(dev);
	long n;

	if (!limit || mem_used(dev) <= low)
		return;
	pthread_mutex_lock(&t->wb_lock);
	/* another step may have made the room meanwhile */
	used = mem_used(dev);
	if (used <= low) {
		pthread_mutex_unlock(&t->wb_lock);
		return;
	}
	stats_inc(&dev->stats.policy_runs);
	p.min_age = cold_age(dev, used - low);
	if (prio) {
		/* room for each new object before its old one is freed */
		int64_t before = atomic_load(&dev->stats.pages_recompressed);
		uint64_t room = limit / 64 > (64u << 10) ? limit / 64 : 64u << 10;

		zpool_set_limit(dev->pool, (used > limit ? used : limit) + room);
		(void)recompress_run(dev, prio, 0, 0, p.min_age);
		table_limit_apply(dev);
		stats_addu(&dev->stats.policy_recomp, (uint64_t)
			   (atomic_load(&dev->stats.pages_recompressed) - before));
		zpool_compact(dev->pool);
		used = mem_used(dev);
	}
	for (int pass = 0; pass < 2 && used > low; pass++) {
		p.free_bytes = used - low;
		n = writeback_run(dev, &p);
		if (n > 0)
			stats_addu(&dev->stats.policy_wb, (uint64_t)n);
		zpool_compact(dev->pool);
		used = mem_used(dev);
		if (n < 0)
			break;
		p.min_age = 0;
	}
	/* write-through does not compact the store; this does */
	if (backing_needs_compaction(dev))
		(void)backing_compact_locked(dev, false);
	pthread_mutex_unlock(&t->wb_lock);
}

void tier_policy_step(struct uzram *dev)
{
	policy_step(dev, atomic_load(&dev->mem_limit) / 100 * dev->tier->low);
}

void tier_make_room(struct uzram *dev, uint64_t need)
{
	uint64_t limit = atomic_load(&dev->mem_limit);
	uint64_t low = limit / 100 * dev->tier->low;

	if (limit > need && limit - need < low)
		low = limit - need;
	/* a step frees about what it aims at, not exactly: repeat while it gains */
	for (uint64_t used = mem_used(dev), prev = UINT64_MAX;
	     used > low && used < prev; prev = used, used = mem_used(dev))
		policy_step(dev, low);
}

static void *policy_main(void *arg)
{
	struct uzram *dev = arg;
	struct tier *t = dev->tier;
	uint64_t limit;
	bool kicked;

	/* without it, the first write-back makes its buffer */
	(void)tier_thread_prepare(dev);
	for (;;) {
		struct timespec ts;

		pthread_mutex_lock(&t->lock);
		if (!t->stop && !t->kick && !atomic_load(&dev->mem_limit)) {
			/* nothing to keep in: sleep until a limit is set */
			pthread_cond_wait(&t->cond, &t->lock);
		} else if (!t->stop && !t->kick) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += WAKE_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&t->cond, &t->lock, &ts);
		}
		kicked = t->kick;
		t->kick = false;
		if (t->stop) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		pthread_mutex_unlock(&t->lock);
		if (((store_clock(dev) - t->last_aging) & 0xffu) >= AGING_EVERY)
			age_walk(dev, false, 0, NULL);
		limit = atomic_load(&dev->mem_limit);
		if (limit && (kicked || mem_used(dev) > limit / 100 * t->high))
			tier_policy_step(dev);
	}
}

int tier_policy_start(struct uzram *dev)
{
	struct tier *t = dev->tier;
	int ret;

	t->last_aging = store_clock(dev);
	ret = thread_start(&t->thread, policy_main, dev, "uzram-tier");
	if (ret)
		return uzram_set_error(ret, "backing store: cannot start the "
				       "tier's thread");
	t->running = true;
	return 0;
}

void tier_policy_stop(struct uzram *dev)
{
	struct tier *t = dev->tier;

	if (!t->running)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	t->running = false;
}

int tier_open(struct uzram *dev, const char *target, uint64_t flags,
	      unsigned high, unsigned low)
{
	struct tier *t = calloc(1, sizeof *t);
	struct space *sp;
	int ret;

	if (!t)
		return uzram_set_error(-ENOMEM, "backing store: out of memory");
	dev->tier = t;
	pthread_mutex_init(&t->wb_lock, NULL);
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	pthread_mutex_init(&t->sp.lock, NULL);
	t->high = high ? high : 90;
	t->low = low ? low : t->high > 10 ? t->high - 10 : t->high / 2;
	if (t->high > 100 || t->low >= t->high)
		return uzram_set_error(-EINVAL, "open: watermarks %u%% (low) "
				       "and %u%% (high) of the memory limit are "
				       "not in order", t->low, t->high);
	/* a file: room for every cluster raw, and a spare segment per head
	 * and for compaction */
	ret = backing_open(target, ((dev->size + SEG_BYTES - 1) & ~(SEG_BYTES - 1)) +
			   (TIER_HEADS + 2) * SEG_BYTES, flags, &t->b);
	if (ret)
		return ret;
	sp = &t->sp;
	sp->nsegs = t->b->capacity >> SEG_SHIFT;
	if (sp->nsegs > (UINT64_C(1) << (BACKED_OFF_BITS + 4 - SEG_SHIFT)))
		sp->nsegs = UINT64_C(1) << (BACKED_OFF_BITS + 4 - SEG_SHIFT);
	if (sp->nsegs < TIER_HEADS + 1)
		return uzram_set_error(-ENOSPC, "backing store %s has %llu "
				       "bytes; the tier needs at least %llu",
				       target, (unsigned long long)t->b->capacity,
				       (unsigned long long)((TIER_HEADS + 1) *
							    SEG_BYTES));
	sp->live = calloc(sp->nsegs, sizeof *sp->live);
	sp->state = calloc(sp->nsegs, sizeof *sp->state);
	if (!sp->live || !sp->state)
		return uzram_set_error(-ENOMEM, "backing store: out of memory");
	return 0;
}

void tier_close(struct uzram *dev)
{
	struct tier *t = dev->tier;

	if (!t)
		return;
	tier_policy_stop(dev);
	backing_close(t->b);
	free(t->sp.live);
	free(t->sp.state);
	pthread_mutex_destroy(&t->sp.lock);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->wb_lock);
	free(t);
	dev->tier = NULL;
}
