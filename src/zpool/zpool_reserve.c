// SPDX-License-Identifier: MIT
/*
 * zpool_reserve.c - a reserve of resident frames, for a device whose
 * stores must not wait for the kernel (swap: see uzram_reserve()).
 *
 * The reserve is frames populated here and pushed on the cache's stacks,
 * and a floor under the cache's cap (zp_cache_cap()) so that frees never
 * trim the cache below it. A store takes a cached frame (zp_frame_get()):
 * one of its own zspage length without a system call; a longer one keeps
 * the rest as slack. Which lengths the data will need is not known here,
 * so every zspage length the size classes use gets an equal share of the
 * pages: the reserve serves the data in full only when its classes spread
 * like that, and past a length's share its stores allocate as without a
 * reserve (doc/block-device.md says so).
 *
 * Frames are all taken before any is given to the cache, or a take would
 * pop the frame just given back.
 *
 * The no-fault pool (zpool_set_refill()) goes further, as the kernel's
 * mempools do for its I/O path: stores never make memory resident at all.
 * They take cached frames only (zpool_frame.c, pool_take()), and a refill
 * thread of the caller's, which may fault and wait in reclaim, keeps the
 * cache filled:
 *
 *      stores (queue threads)                 refill thread
 *      take a cached frame of their length    zpool_refill(): waits on
 *        (longer: within the slack budget)      refill_cv, then makes a
 *        cache < target / 2: wake ------------> frame of each length a
 *        none: wake, wait pool_wait_ms          store found none of, and
 *          on filled_cv <---------------------  frames (zp_frame_make())
 *          still none: any longer one, else     up to the target, by the
 *          -ENOSPC, nothing faulted in          lengths stores took since
 *          (pool_misses)                        the last refill
 *
 * The target adapts to the rate of takes: it doubles (up to the maximum)
 * after a refill during which a store had to wait, and comes down by an
 * eighth (to the minimum) after each TARGET_DECAY_S seconds without one.
 * The refill also makes the next CELLS_AHEAD handle cells resident, which
 * stores touch as they take never-used handles, and it, not the frees,
 * gives a cache past its cap back to the system (zpool_frame.c says why).
 *
 * And it keeps a stock of zspage descriptors for the classes whose
 * zspage's tail cannot hold theirs (zpool_zspage.c): a store's new zspage
 * otherwise mallocs one, and a malloc that reaches a page of the heap not
 * yet touched faults in the store's thread (v44 on 7.3 stood still so, a
 * queue thread's "page allocation stall" in malloc while the refill's own
 * fault waited in reclaim). Stocked descriptors are all desc_max bytes,
 * malloc'ed and written by the refill; a store takes one, and an ended
 * zspage's goes back while the stock is under DESC_STOCK. With the stock
 * empty a store waits for the refill as for a frame, then fails with
 * -ENOSPC: it never mallocs (it did until 2026-12-04, and v44 on 6.12
 * stood still 300 s in CI and here with a queue thread in _int_malloc on a
 * fresh heap page, in reclaim behind kswapd, whose bios that queue held).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zpool_impl.h"

/* Which zspage lengths the size classes use: used[p] for p pages. */
static unsigned lengths_used(const struct zpool *pool, bool used[ZP_MAX_PAGES + 1])
{
	unsigned n = 0;

	memset(used, 0, (ZP_MAX_PAGES + 1) * sizeof(used[0]));
	for (unsigned i = 0; i < pool->nclasses; i++) {
		uint32_t p = pool->classes[i].pages;

		if (p && p <= ZP_MAX_PAGES && !used[p]) {
			used[p] = true;
			n++;
		}
	}
	return n;
}

int zpool_reserve(struct zpool *pool, uint64_t bytes)
{
	uint64_t want = bytes >> PAGE_SHIFT, have, share, made = 0;
	uint32_t *fr, res;
	uint8_t *len;
	bool used[ZP_MAX_PAGES + 1];
	uint64_t n = 0, max;
	unsigned nlen;
	int err = 0;

	atomic_store_explicit(&pool->reserve_pages, want, memory_order_relaxed);
	have = atomic_load_explicit(&pool->cache_pages, memory_order_relaxed);
	if (want <= have)
		return 0;
	nlen = lengths_used(pool, used);
	if (!nlen)
		return 0;
	share = (want - have) / nlen + 1;
	max = (want - have) + nlen;
	fr = malloc((size_t)max * sizeof(*fr));
	len = malloc((size_t)max);
	if (!fr || !len) {
		free(fr);
		free(len);
		return -ENOMEM;
	}
	/* each length in use gets an equal share of the pages */
	for (uint32_t p = 1; p <= ZP_MAX_PAGES && !err; p++) {
		if (!used[p])
			continue;
		for (uint64_t got = 0; got < share && !err; got += p) {
			err = zp_frame_get(pool, p, &fr[n], &res);
			if (err)
				break;
			len[n++] = (uint8_t)res;
			made += res;
		}
	}
	for (uint64_t i = 0; i < n; i++)
		zp_frame_give(pool, fr[i], len[i], len[i]);
	free(fr);
	free(len);
	if (err)
		atomic_store_explicit(&pool->reserve_pages, have + made,
				      memory_order_relaxed);
	return err;
}

uint64_t zpool_reserved(const struct zpool *pool)
{
	return atomic_load_explicit(&pool->reserve_pages,
				    memory_order_relaxed) << PAGE_SHIFT;
}

/* ---- the no-fault pool ---- */

#define TARGET_DECAY_S 10
#define CELLS_AHEAD 8192u            /* 64 KiB of handle cells */
#define DESC_STOCK 128u              /* descriptors kept made */

/* The largest malloc'ed descriptor of any class, or 0 if none is. */
static size_t desc_max(const struct zpool *pool)
{
	size_t max = 0;

	for (unsigned i = 0; i < pool->nclasses; i++) {
		const struct size_class *c = &pool->classes[i];
		size_t n = sizeof(struct zspage) + c->objs * sizeof(uint32_t);

		if (!c->desc_off && n > max)
			max = n;
	}
	return max;
}

/*
 * A stocked descriptor, as pool_take() takes a frame: the refill woken
 * under half the stock; none: wait for it up to pool_wait_ms (no class
 * lock held), then -ENOSPC, nothing malloc'ed. Counted in pool_waits and
 * pool_misses.
 */
static int desc_take(struct zpool *pool, struct zspage **out)
{
	uint32_t ms = atomic_load_explicit(&pool->pool_wait_ms, memory_order_relaxed);
	struct zspage *zs;
	struct timespec start, until;
	bool waiting = false;
	int rc = 0;

	pthread_mutex_lock(&pool->pool_lock);
	while (!(zs = pool->desc_stock) && rc != ETIMEDOUT) {
		if (!waiting) {
			waiting = true;
			pool->pool_waiters++;
			atomic_fetch_add_explicit(&pool->pool_waits, 1, memory_order_relaxed);
			clock_gettime(CLOCK_MONOTONIC, &start);
			until = start;
			zp_deadline_from(&until, ms);
		}
		pthread_cond_signal(&pool->refill_cv);
		rc = pthread_cond_timedwait(&pool->filled_cv, &pool->pool_lock, &until);
	}
	if (waiting) {
		pool->pool_waiters--;
		zp_wait_done(pool, &start);
	}
	if (zs) {
		pool->desc_stock = *(void **)(void *)zs;
		pool->desc_count--;
	}
	if (pool->desc_count < DESC_STOCK / 2)
		pthread_cond_signal(&pool->refill_cv);
	pthread_mutex_unlock(&pool->pool_lock);
	if (!zs) {
		atomic_fetch_add_explicit(&pool->pool_misses, 1, memory_order_relaxed);
		return -ENOSPC;
	}
	zs->stocked = 1;
	*out = zs;
	return 0;
}

int zp_desc_get(struct zpool *pool, const struct size_class *c,
		struct zspage **out)
{
	struct zspage *zs;

	if (atomic_load_explicit(&pool->nofault, memory_order_acquire) &&
	    pool->desc_max)
		return desc_take(pool, out);
	zs = malloc(sizeof(*zs) + c->objs * sizeof(zs->owner[0]));
	if (!zs)
		return -ENOMEM;
	zs->stocked = 0;
	*out = zs;
	return 0;
}

void zp_desc_put(struct zpool *pool, struct zspage *zs)
{
	if (zs->stocked &&
	    atomic_load_explicit(&pool->nofault, memory_order_acquire)) {
		pthread_mutex_lock(&pool->pool_lock);
		if (pool->desc_count < DESC_STOCK) {
			*(void **)(void *)zs = pool->desc_stock;
			pool->desc_stock = zs;
			pool->desc_count++;
			zs = NULL;
		}
		pthread_mutex_unlock(&pool->pool_lock);
	}
	free(zs);
}

/* Fill the descriptor stock; the refill thread's, which may fault. */
static void desc_stock_fill(struct zpool *pool)
{
	for (;;) {
		void *p;

		pthread_mutex_lock(&pool->pool_lock);
		if (pool->desc_count >= DESC_STOCK) {
			pthread_mutex_unlock(&pool->pool_lock);
			return;
		}
		pthread_mutex_unlock(&pool->pool_lock);
		p = malloc(pool->desc_max);
		if (!p)
			return;
		memset(p, 0, pool->desc_max); /* resident now, not in a store */
		pthread_mutex_lock(&pool->pool_lock);
		*(void **)p = pool->desc_stock;
		pool->desc_stock = p;
		pool->desc_count++;
		if (pool->pool_waiters)
			pthread_cond_broadcast(&pool->filled_cv);
		pthread_mutex_unlock(&pool->pool_lock);
	}
}

void zp_desc_stock_free(struct zpool *pool)
{
	while (pool->desc_stock) {
		void *p = pool->desc_stock;

		pool->desc_stock = *(void **)p;
		free(p);
	}
	pool->desc_count = 0;
}

int zpool_set_refill(struct zpool *pool, uint64_t min, uint64_t max,
		     unsigned wait_ms)
{
	if (min > max)
		return -EINVAL;
	min >>= PAGE_SHIFT;
	max >>= PAGE_SHIFT;
	if (!min) {
		atomic_store_explicit(&pool->nofault, false, memory_order_release);
		return 0;
	}
	atomic_store_explicit(&pool->pool_min, min, memory_order_relaxed);
	atomic_store_explicit(&pool->pool_max, max, memory_order_relaxed);
	atomic_store_explicit(&pool->pool_target, min, memory_order_relaxed);
	atomic_store_explicit(&pool->pool_wait_ms, wait_ms, memory_order_relaxed);
	pool->desc_max = desc_max(pool);
	atomic_store_explicit(&pool->nofault, true, memory_order_release);
	return 0;
}

/*
 * The cells stores will touch next (zpool.c's handle_get()), resident
 * now: an atomic add of 0 to one cell a page writes, and so faults the
 * page in, without changing what a store may be writing there. Not
 * MADV_POPULATE_WRITE: see zpool_frame.c's pages_touch().
 */
static void cells_ahead(struct zpool *pool)
{
	uint64_t b = atomic_load_explicit(&pool->handle_bump, memory_order_relaxed);
	uint64_t e = b + CELLS_AHEAD < pool->ncells ? b + CELLS_AHEAD : pool->ncells;
	const uint64_t per_page = PAGE / sizeof(pool->cells[0]);

	for (uint64_t i = b; i < e; i += per_page)
		atomic_fetch_add_explicit(&pool->cells[i], 0, memory_order_relaxed);
}

/* The target from the waits since the last call (see the top). */
static uint64_t target_adapt(struct zpool *pool)
{
	static _Thread_local uint64_t seen;
	static _Thread_local time_t changed;
	uint64_t waits = atomic_load_explicit(&pool->pool_waits, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&pool->pool_target, memory_order_relaxed);
	uint64_t min = atomic_load_explicit(&pool->pool_min, memory_order_relaxed);
	uint64_t max = atomic_load_explicit(&pool->pool_max, memory_order_relaxed);
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (waits != seen) {
		t = t * 2 < max ? t * 2 : max;
		changed = now.tv_sec;
	} else if (now.tv_sec - changed >= TARGET_DECAY_S) {
		t -= t / 8;
		changed = now.tv_sec;
	}
	seen = waits;
	t = t < min ? min : t;
	atomic_store_explicit(&pool->pool_target, t, memory_order_relaxed);
	return t;
}

/* Whether a store found no frame of its length since the last refill. */
static bool short_pending(struct zpool *pool)
{
	for (unsigned p = 1; p <= ZP_MAX_PAGES; p++)
		if (atomic_load_explicit(&pool->pool_short[p], memory_order_relaxed))
			return true;
	return false;
}

/*
 * Wait up to ms for the cache to fall under the low watermark or a store
 * to find none of its length. Not merely for a store to be waiting: one
 * woken for the frame just made is still counted until it runs, and a
 * refill that returned at once for it, with nothing to make, spun at
 * SCHED_RR beside the very thread it waited for.
 */
static void refill_wait(struct zpool *pool, unsigned ms)
{
	struct timespec until;

	zp_deadline(&until, ms);
	pthread_mutex_lock(&pool->pool_lock);
	while (!short_pending(pool) &&
	       atomic_load_explicit(&pool->cache_pages, memory_order_relaxed) >=
	       zp_pool_low(pool) &&
	       (!pool->desc_max || pool->desc_count >= DESC_STOCK / 2) &&
	       pthread_cond_timedwait(&pool->refill_cv, &pool->pool_lock, &until) == 0)
		;
	pthread_mutex_unlock(&pool->pool_lock);
}

/* Frames of each length to make for `need` pages, by the takes' lengths. */
static void refill_quota(struct zpool *pool, uint64_t need,
			 uint64_t quota[ZP_MAX_PAGES + 1])
{
	bool used[ZP_MAX_PAGES + 1];
	uint64_t w[ZP_MAX_PAGES + 1], sum = 0;

	lengths_used(pool, used);
	for (unsigned p = 1; p <= ZP_MAX_PAGES; p++) {
		w[p] = atomic_exchange_explicit(&pool->pool_want[p], 0,
						memory_order_relaxed);
		sum += w[p] * p;
	}
	if (!sum)       /* no take yet: every length in use alike */
		for (unsigned p = 1; p <= ZP_MAX_PAGES; p++) {
			w[p] = used[p];
			sum += w[p] * p;
		}
	quota[0] = 0;
	for (unsigned p = 1; p <= ZP_MAX_PAGES; p++)
		quota[p] = sum ? (need * w[p] + sum - 1) / sum : 0;
}

/* Wake the stores waiting for frames. */
static void refill_wake(struct zpool *pool)
{
	pthread_mutex_lock(&pool->pool_lock);
	if (pool->pool_waiters)
		pthread_cond_broadcast(&pool->filled_cv);
	pthread_mutex_unlock(&pool->pool_lock);
}

/*
 * A frame of each length a store found none of, whatever the cache holds:
 * a cache at its target may hold only other lengths (the reserve's
 * shares, what frees left), and a store takes only its own or longer. A
 * cached shorter frame is grown for it first, which costs no more memory
 * than it adds. The pages made.
 */
static uint64_t refill_short(struct zpool *pool, int *err)
{
	uint64_t made = 0;

	for (unsigned p = ZP_MAX_PAGES; p > 0 && !*err; p--) {
		uint32_t f, res;

		if (!atomic_exchange_explicit(&pool->pool_short[p], 0,
					      memory_order_relaxed))
			continue;
		*err = zp_frame_make(pool, p, FRAME_TOUCH, &f, &res);
		if (*err)
			break;
		zp_frame_give(pool, f, res, res);
		made += res;
		refill_wake(pool);
	}
	return made;
}

long zpool_refill(struct zpool *pool, unsigned timeout_ms)
{
	uint64_t quota[ZP_MAX_PAGES + 1], target, cached, made = 0;
	bool more = true;
	int err = 0;

	if (!atomic_load_explicit(&pool->nofault, memory_order_acquire))
		return -EINVAL;
	refill_wait(pool, timeout_ms);
	if (zp_cache_over(pool))
		zp_cache_trim(pool, zp_cache_cap(pool) / 2);
	cells_ahead(pool);
	if (pool->desc_max)
		desc_stock_fill(pool);
	made = refill_short(pool, &err);
	target = target_adapt(pool);
	cached = atomic_load_explicit(&pool->cache_pages, memory_order_relaxed);
	if (err || cached >= target) {
		atomic_fetch_add_explicit(&pool->pool_made, made, memory_order_relaxed);
		return made ? (long)made : err;
	}
	refill_quota(pool, target - cached, quota);
	/* a frame of each length in turn, so that a waiting store soon has its */
	while (more && !err &&
	       atomic_load_explicit(&pool->cache_pages, memory_order_relaxed) < target) {
		more = false;
		for (unsigned p = 1; p <= ZP_MAX_PAGES && !err; p++) {
			uint32_t f, res;

			if (!quota[p])
				continue;
			quota[p]--;
			more = true;
			err = zp_frame_make(pool, p, FRAME_FREE_ONLY | FRAME_TOUCH, &f, &res);
			if (err)
				break;
			zp_frame_give(pool, f, res, res);
			made += res;
			refill_wake(pool);
		}
	}
	atomic_fetch_add_explicit(&pool->pool_made, made, memory_order_relaxed);
	return made ? (long)made : err;
}

void zpool_refill_stats(const struct zpool *pool, struct zpool_refill_stats *st)
{
	st->waits = atomic_load_explicit(&pool->pool_waits, memory_order_relaxed);
	st->misses = atomic_load_explicit(&pool->pool_misses, memory_order_relaxed);
	st->wait_ns = atomic_load_explicit(&pool->pool_wait_ns, memory_order_relaxed);
	st->made = atomic_load_explicit(&pool->pool_made, memory_order_relaxed) << PAGE_SHIFT;
	st->target = atomic_load_explicit(&pool->nofault, memory_order_relaxed) ?
		atomic_load_explicit(&pool->pool_target, memory_order_relaxed) << PAGE_SHIFT : 0;
	st->cached = atomic_load_explicit(&pool->cache_pages, memory_order_relaxed) << PAGE_SHIFT;
}
