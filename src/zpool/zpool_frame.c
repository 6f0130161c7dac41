// SPDX-License-Identifier: MIT
/*
 * zpool_frame.c - frames and the pages behind them.
 *
 * A frame is 64 KiB of the region; a zspage of p pages uses its first p
 * pages. Every frame that holds no zspage is on one of 17 lock-free stacks
 * (Treiber stacks linked through frame.next_free, whose head carries a tag
 * against ABA), by how many of its first pages are resident:
 *
 *   stack[0]   free: nothing resident (never used, or released)
 *   stack[r]   cached: pages 0..r-1 resident and counted in mem_used
 *
 * Why a cache. A page's first touch after it is made resident is slow, and
 * giving pages back (MADV_DONTNEED) takes the mmap lock and flushes the TLB
 * of every CPU running the process: a cost to the writer and an
 * interruption of every reader, each time (bench/notes.md has figures).
 * Under rewrites, memory flows from the classes of the old data to the
 * class of the new: compaction empties zspages of one size while another
 * size needs new ones. The cache lets any class take a frame another one
 * emptied, with no system call when it has enough pages resident:
 *
 *   zp_frame_get(p):   stack[p]       the pages are there
 *                      stack[p+1..16] a frame with r > p keeps its r - p
 *                                    pages as "slack" (resident, counted,
 *                                    unused) while all slack stays within
 *                                    a quarter of the cache's cap
 *                      stack[p-1..1] populate the missing pages only
 *                      stack[0], bump  populate p pages
 *
 * The cached frames' pages are bounded by zp_cache_cap():
 * max(CACHE_MIN_PAGES, mem_used / 256, zp_cache_keep(): the reserve of
 * zpool_reserve.c, a no-fault pool's target). (Slack has a budget of its own:
 * counted with the cache, it would keep the cache over its cap with
 * nothing a trim could release, and every free would then release the
 * frame it had just cached.) Past the cap, the thread that freed calls
 * zp_cache_trim() once it holds no class lock, which gives frames back down
 * to half the cap in batches of RELEASE_BATCH frames with one
 * process_madvise(MADV_DONTNEED) each: one system call and one TLB flush
 * for up to 64 frames. Kernels that refuse MADV_DONTNEED there get one
 * madvise() per frame. zpool_compact() releases the cache and the slack.
 *
 * Not in a no-fault pool (zp_trim_due()): there the threads that store and
 * free serve a swap device, and a release takes the process's mmap lock
 * (madvise() for reading; munlock() and mlock2() of memory locked on fault
 * for writing). The refill thread may hold that lock in a fault while it
 * waits in reclaim for the swap device's writes, and a writer waiting for
 * it stops every reader after it: a queue thread that frees so waited
 * for ever in munlock(), and the device with it (v32 on 6.12, make test
 * of 2026-12-04). There the cache runs past its cap until the refill
 * trims it (zpool_refill()), a few hundred milliseconds later at most.
 *
 * In a pool over a file (a kept store), pages are given back by punching
 * holes in the file (zp_file_punch()), one call per frame.
 *
 * mem_used counts every resident page, whether it holds objects, is slack
 * or is cached, so it stays what RSS sees.
 */
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "zpool_impl.h"

static unsigned char *frame_addr(const struct zpool *pool, uint32_t f)
{
	return pool->base + ((uint64_t)f << ZP_FRAME_SHIFT);
}

/* ---- the stacks ---- */

static int64_t stack_pop(struct zpool *pool, unsigned r)
{
	_Atomic uint64_t *top = &pool->stack[r];
	uint64_t head = atomic_load_explicit(top, memory_order_acquire);

	while ((uint32_t)head) {
		uint32_t f = (uint32_t)head - 1;
		uint32_t next = atomic_load_explicit(&pool->frames[f].next_free,
						     memory_order_relaxed);
		/* the tag in the top half defeats ABA */
		uint64_t nh = (((head >> 32) + 1) << 32) | next;

		if (atomic_compare_exchange_weak_explicit(top, &head, nh,
				memory_order_acquire, memory_order_acquire))
			return f;
	}
	return -1;
}

static void stack_push(struct zpool *pool, unsigned r, uint32_t f)
{
	_Atomic uint64_t *top = &pool->stack[r];
	uint64_t head = atomic_load_explicit(top, memory_order_relaxed);
	uint64_t nh;

	do {
		atomic_store_explicit(&pool->frames[f].next_free, (uint32_t)head,
				      memory_order_release);
		nh = (((head >> 32) + 1) << 32) | (f + 1);
	} while (!atomic_compare_exchange_weak_explicit(top, &head, nh,
			memory_order_release, memory_order_relaxed));
}

/* Frame f, with nothing resident, is free (zpool_adopt.c). */
void zp_frame_free_push(struct zpool *pool, uint32_t f)
{
	stack_push(pool, 0, f);
}

/* A frame with nothing resident: a released one, else a new one; or -1. */
static int64_t frame_new(struct zpool *pool)
{
	int64_t f = stack_pop(pool, 0);
	uint64_t b;

	if (f >= 0)
		return f;
	b = atomic_load_explicit(&pool->frame_bump, memory_order_relaxed);
	do {
		if (b >= pool->nframes)
			return -1;
	} while (!atomic_compare_exchange_weak_explicit(&pool->frame_bump, &b,
			b + 1, memory_order_relaxed, memory_order_relaxed));
	zp_mem_add(pool, zp_table_bytes(b + 1, sizeof(struct frame)) -
		zp_table_bytes(b, sizeof(struct frame)));
	return (int64_t)b;
}

/* ---- pages ---- */

/*
 * Make pages [from, to) of frame f resident now, so that mem_used is what
 * RSS sees. One madvise costs a fraction of the page faults it saves. Older
 * kernels lack it (EINVAL): touch the pages instead.
 */
static int pages_populate(struct zpool *pool, uint32_t f, uint32_t from,
			  uint32_t to)
{
	unsigned char *p = frame_addr(pool, f) + ((size_t)from << PAGE_SHIFT);
	size_t len = (size_t)(to - from) << PAGE_SHIFT;

	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return 0;
	if (errno != EINVAL) {
		madvise(p, len, MADV_DONTNEED);
		return -ENOMEM;
	}
	for (size_t i = 0; i < len; i += PAGE)
		((volatile unsigned char *)p)[i] = 0;
	return 0;
}

/*
 * Make pages [from, to) of frame f, which nothing else uses, resident by
 * writing to them: for the refill thread (zpool_reserve.c), which may wait
 * in reclaim there. MADV_POPULATE_WRITE would hold the mmap lock (read)
 * all that time, and a writer queued behind it (a malloc growing its
 * arena with mprotect) would then stop every queue thread's madvise (v42
 * on 6.12 hung so); a page fault holds only its mapping's lock since
 * Linux 6.4 (per-VMA locks).
 */
static void pages_touch(struct zpool *pool, uint32_t f, uint32_t from,
			uint32_t to)
{
	volatile unsigned char *p = frame_addr(pool, f);

	for (size_t i = (size_t)from << PAGE_SHIFT; i < (size_t)to << PAGE_SHIFT; i += PAGE)
		p[i] = 0;
}

/*
 * Give `len` bytes of the region at `off` back, in a pool over a file
 * (zpool_create_file()): MADV_DONTNEED on a shared mapping only unmaps the
 * pages, the file keeps them; a hole frees them, whatever maps them, locked
 * or not.
 */
void zp_file_punch(struct zpool *pool, uint64_t off, uint64_t len)
{
	fallocate(pool->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		  (off_t)(pool->region_off + off), (off_t)len);
}

/*
 * Give pages [from, to) of frame f back. The kernel refuses MADV_DONTNEED
 * on locked memory (EINVAL), and a program may have locked ours. It can
 * only have locked it on fault (mlockall(MCL_ONFAULT), as `uzram serve
 * --swap` does): locking the region outright would make all of its
 * reservation resident, far more than RAM. So the range is unlocked,
 * dropped and locked on fault again: the pages leave, what faults in later
 * stays locked as before, and the mapping's pieces merge back. (Telling
 * the two apart from smaps' VmFlags would not do: "lf" is there only
 * since Linux 6.2, and on 6.1 the swap test's server kept 20 MB it had
 * freed.) Nobody else touches a frame while it is released.
 */
static void pages_release(struct zpool *pool, uint32_t f, uint32_t from,
			  uint32_t to)
{
	unsigned char *p = frame_addr(pool, f) + ((size_t)from << PAGE_SHIFT);
	size_t len = (size_t)(to - from) << PAGE_SHIFT;

	if (pool->fd >= 0) {
		zp_file_punch(pool, (uint64_t)(p - pool->base), len);
		return;
	}
	if (!madvise(p, len, MADV_DONTNEED) || errno != EINVAL)
		return;
	if (munlock(p, len) < 0)
		return;
	madvise(p, len, MADV_DONTNEED);
	mlock2(p, len, MLOCK_ONFAULT);
}

/*
 * Release whole frames, n <= RELEASE_BATCH, `pages` resident pages each:
 * one process_madvise() for all when the kernel takes MADV_DONTNEED there
 * and we are still the process that opened the pidfd (after a fork, the
 * child gets madvise()). Then put them on the free stack.
 */
static void frames_release(struct zpool *pool, const uint32_t *fr,
			   const uint8_t *pages, unsigned n)
{
	struct iovec iov[RELEASE_BATCH];
	int pidfd = atomic_load_explicit(&pool->pidfd, memory_order_relaxed);
	size_t total = 0;

	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = frame_addr(pool, fr[i]);
		iov[i].iov_len = (size_t)pages[i] << PAGE_SHIFT;
		total += iov[i].iov_len;
	}
	if (pidfd >= 0 && getpid() == pool->pid && pool->fd < 0) {
		long done = syscall(SYS_process_madvise, pidfd, iov, (size_t)n,
				    MADV_DONTNEED, 0u);

		if (done < 0 && (errno == EINVAL || errno == ENOSYS ||
				 errno == EPERM || errno == EBADF))
			atomic_store_explicit(&pool->pidfd, -1,
					      memory_order_relaxed);
		if (done != (long)total)
			pidfd = -1;
	} else {
		pidfd = -1;
	}
	/* not done in one call: each frame, which is harmless twice */
	if (pidfd < 0)
		for (unsigned i = 0; i < n; i++)
			pages_release(pool, fr[i], 0, pages[i]);
	atomic_fetch_add_explicit(&pool->releases, 1, memory_order_relaxed);
	zp_mem_sub(pool, total);
	for (unsigned i = 0; i < n; i++)
		stack_push(pool, 0, fr[i]);
}

/* ---- the cache ---- */

/*
 * What the cache keeps whatever its cap: the reserve of zpool_reserve.c,
 * and in a no-fault pool its refill target.
 */
uint64_t zp_cache_keep(const struct zpool *pool)
{
	uint64_t keep = atomic_load_explicit(&pool->reserve_pages,
					     memory_order_relaxed);
	uint64_t target = atomic_load_explicit(&pool->pool_target,
					       memory_order_relaxed);

	if (atomic_load_explicit(&pool->nofault, memory_order_relaxed) &&
	    target > keep)
		keep = target;
	return keep;
}

uint64_t zp_cache_cap(struct zpool *pool)
{
	uint64_t cap = atomic_load_explicit(&pool->mem_used,
					    memory_order_relaxed) >>
		       (PAGE_SHIFT + CACHE_SHARE_SHIFT);
	uint64_t keep = zp_cache_keep(pool);

	if (cap < keep)
		cap = keep;
	return cap < CACHE_MIN_PAGES ? CACHE_MIN_PAGES : cap;
}

bool zp_cache_over(struct zpool *pool)
{
	return atomic_load_explicit(&pool->cache_pages, memory_order_relaxed) >
	       zp_cache_cap(pool);
}

/* Whether a store or a free should trim the cache now (see the top). */
bool zp_trim_due(struct zpool *pool)
{
	return !atomic_load_explicit(&pool->nofault, memory_order_relaxed) &&
	       zp_cache_over(pool);
}

static void cache_sub(struct zpool *pool, uint64_t pages)
{
	atomic_fetch_sub_explicit(&pool->cache_pages, pages, memory_order_relaxed);
}

/* Whether `more` pages of slack fit its budget. */
static bool slack_fits(struct zpool *pool, uint64_t more)
{
	return atomic_load_explicit(&pool->slack_pages, memory_order_relaxed) +
	       more <= zp_cache_cap(pool) >> SLACK_SHARE_SHIFT;
}

/*
 * Release cached frames, the fullest first, until the cache holds at most
 * `target` pages (a target under the reserve of zpool_reserve.c is the
 * reserve, but for 0) or is empty. Returns the pages released.
 */
uint64_t zp_cache_trim(struct zpool *pool, uint64_t target)
{
	uint32_t fr[RELEASE_BATCH];
	uint8_t pages[RELEASE_BATCH];
	uint64_t released = 0, keep;
	unsigned n = 0;

	/* the reserve stays, but for a store that needs its memory (0) */
	keep = zp_cache_keep(pool);
	if (target && target < keep)
		target = keep;

	for (unsigned r = ZP_MAX_PAGES; r > 0; r--) {
		int64_t f;

		while (atomic_load_explicit(&pool->cache_pages,
					    memory_order_relaxed) > target &&
		       (f = stack_pop(pool, r)) >= 0) {
			cache_sub(pool, r);
			released += r;
			fr[n] = (uint32_t)f;
			pages[n++] = (uint8_t)r;
			if (n == RELEASE_BATCH) {
				frames_release(pool, fr, pages, n);
				n = 0;
			}
		}
	}
	if (n)
		frames_release(pool, fr, pages, n);
	return released;
}

/*
 * A cached frame of at least `pages` resident pages, or -1; a longer one
 * only while its extra pages fit the slack budget, unless `any` (a
 * no-fault pool, whose frames are all resident already): else a trim
 * releases such frames in a batch, where releasing the extra pages here
 * would cost a system call and a TLB flush alone.
 */
static int64_t frame_cached(struct zpool *pool, uint32_t pages, bool any,
			    uint32_t *resident)
{
	for (uint32_t r = pages; r <= ZP_MAX_PAGES; r++) {
		int64_t f;

		if (r > pages && !any && !slack_fits(pool, r - pages))
			break;
		f = stack_pop(pool, r);
		if (f < 0)
			continue;
		cache_sub(pool, r);
		atomic_fetch_add_explicit(&pool->slack_pages, r - pages,
					  memory_order_relaxed);
		*resident = r;
		return f;
	}
	return -1;
}

/*
 * A frame made resident here: from a partly resident cached one (unless
 * FRAME_FREE_ONLY) or a free one; the part of zp_frame_get() that faults.
 * The refill (zpool_reserve.c) fills its target with free frames only,
 * leaving the cached ones to the stores of their own length, and serves a
 * waiting store from any; it touches the pages (FRAME_TOUCH, see
 * pages_touch()). Same returns as zp_frame_get().
 */
int zp_frame_make(struct zpool *pool, uint32_t pages, unsigned how,
		  uint32_t *frame, uint32_t *resident)
{
	bool touch = how & FRAME_TOUCH;
	uint64_t bytes;
	int64_t f;
	int err;

	for (uint32_t r = how & FRAME_FREE_ONLY ? 0 : pages - 1; r > 0; r--) {
		f = stack_pop(pool, r);
		if (f < 0)
			continue;
		bytes = (uint64_t)(pages - r) << PAGE_SHIFT;
		if (!zp_mem_reserve(pool, bytes)) {
			stack_push(pool, r, (uint32_t)f);
			break;
		}
		err = 0;
		if (touch)
			pages_touch(pool, (uint32_t)f, r, pages);
		else
			err = pages_populate(pool, (uint32_t)f, r, pages);
		cache_sub(pool, r);
		if (err) {
			uint32_t one = (uint32_t)f;
			uint8_t had = (uint8_t)r;

			zp_mem_sub(pool, bytes);
			frames_release(pool, &one, &had, 1);
			return err;
		}
		zp_mem_note_max(pool);
		*frame = (uint32_t)f;
		*resident = pages;
		return 0;
	}
	bytes = (uint64_t)pages << PAGE_SHIFT;
	if (!zp_mem_reserve(pool, bytes)) {
		/* the cache is memory too: give it back and try once more */
		zp_cache_trim(pool, 0);
		if (!zp_mem_reserve(pool, bytes))
			return -ENOSPC;
	}
	f = frame_new(pool);
	if (f < 0) {
		zp_cache_trim(pool, 0);
		f = frame_new(pool);
	}
	if (f < 0) {
		zp_mem_sub(pool, bytes);
		return -ENOSPC;
	}
	err = 0;
	if (touch)
		pages_touch(pool, (uint32_t)f, 0, pages);
	else
		err = pages_populate(pool, (uint32_t)f, 0, pages);
	if (err) {
		stack_push(pool, 0, (uint32_t)f);
		zp_mem_sub(pool, bytes);
		return err;
	}
	zp_mem_note_max(pool);
	*frame = (uint32_t)f;
	*resident = pages;
	return 0;
}

/* ---- the no-fault pool's side of a store (see zpool_reserve.c) ---- */

/* pool_lock and its condition variables (on CLOCK_MONOTONIC): 0 or -ENOMEM */
int zp_pool_sync_init(struct zpool *pool)
{
	pthread_condattr_t ca;
	int e;

	if (pthread_condattr_init(&ca))
		return -ENOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	e = pthread_mutex_init(&pool->pool_lock, NULL);
	if (!e && (e = pthread_cond_init(&pool->refill_cv, &ca)))
		pthread_mutex_destroy(&pool->pool_lock);
	if (!e && (e = pthread_cond_init(&pool->filled_cv, &ca))) {
		pthread_cond_destroy(&pool->refill_cv);
		pthread_mutex_destroy(&pool->pool_lock);
	}
	if (!e && (e = pthread_mutex_init(&pool->handles_lock, NULL))) {
		pthread_cond_destroy(&pool->filled_cv);
		pthread_cond_destroy(&pool->refill_cv);
		pthread_mutex_destroy(&pool->pool_lock);
	}
	pthread_condattr_destroy(&ca);
	pool->pool_sync = !e;
	return e ? -ENOMEM : 0;
}

/* *t = CLOCK_MONOTONIC's now + ms, for the pool's timed waits. */
void zp_deadline(struct timespec *t, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	zp_deadline_from(t, ms);
}

/* *t += ms: the deadline of a wait that began at *t. */
void zp_deadline_from(struct timespec *t, unsigned ms)
{
	t->tv_sec += ms / 1000;
	t->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

/* A store's wait for the refill, begun at *start, ended: its time counted. */
void zp_wait_done(struct zpool *pool, const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	atomic_fetch_add_explicit(&pool->pool_wait_ns,
				  (uint64_t)((now.tv_sec - start->tv_sec) * 1000000000LL +
					     (now.tv_nsec - start->tv_nsec)),
				  memory_order_relaxed);
}

/* The low watermark: under it, a take wakes the refill thread. */
uint64_t zp_pool_low(const struct zpool *pool)
{
	return atomic_load_explicit(&pool->pool_target, memory_order_relaxed) / 2;
}

static void pool_wake_refill(struct zpool *pool)
{
	pthread_mutex_lock(&pool->pool_lock);
	pthread_cond_signal(&pool->refill_cv);
	pthread_mutex_unlock(&pool->pool_lock);
}

/*
 * A cached frame for a store in a no-fault pool: of its own length, or a
 * longer one while the slack fits its budget, as outside the mode. None
 * there: wake the refill thread, which makes one of this length, and wait
 * for it up to pool_wait_ms (with no class lock held, zp_zspage_make():
 * the class's other stores go on); when the wait runs out, any longer
 * frame; then fail with
 * -ENOSPC, having faulted nothing in. Counted in pool_waits and
 * pool_misses. Until 2026-12-04 a store took any longer frame at once, and
 * the slack stays resident while its zspage lives (compaction does not
 * shrink it in this mode, zpool_compact.c): v32 with lz4 peaked at 265-269
 * MB so, 248-249 MB with the budget (BENCHMARKS.md), and bench/pool-mem.c
 * with a 1 MiB target held 29 MB more than without the pool, 1 MB with it.
 */
static int pool_take(struct zpool *pool, uint32_t pages, uint32_t *frame,
		     uint32_t *resident)
{
	uint32_t ms = atomic_load_explicit(&pool->pool_wait_ms, memory_order_relaxed);
	struct timespec start, until;
	int64_t f;
	int rc = 0;

	atomic_fetch_add_explicit(&pool->pool_want[pages], 1, memory_order_relaxed);
	f = frame_cached(pool, pages, false, resident);
	if (f >= 0) {
		if (atomic_load_explicit(&pool->cache_pages, memory_order_relaxed) <
		    zp_pool_low(pool)) {
			pool_wake_refill(pool);
		} else if (!(uint32_t)atomic_load_explicit(&pool->stack[pages],
							   memory_order_relaxed)) {
			/* the last of its length: the refill makes more now,
			 * before the next store of it finds none and waits */
			atomic_fetch_add_explicit(&pool->pool_short[pages], 1,
						  memory_order_relaxed);
			pool_wake_refill(pool);
		}
		*frame = (uint32_t)f;
		return 0;
	}
	atomic_fetch_add_explicit(&pool->pool_waits, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&pool->pool_short[pages], 1, memory_order_relaxed);
	clock_gettime(CLOCK_MONOTONIC, &start);
	until = start;
	zp_deadline_from(&until, ms);
	pthread_mutex_lock(&pool->pool_lock);
	pool->pool_waiters++;
	pthread_cond_signal(&pool->refill_cv);
	/*
	 * The refill pushes, then broadcasts under pool_lock: no lost
	 * wake-up. Woken with none left for us (another store took it, or
	 * the frame was of another length), ask again.
	 */
	for (bool woken = false;; woken = true) {
		f = frame_cached(pool, pages, rc == ETIMEDOUT, resident);
		if (f >= 0 || rc == ETIMEDOUT)
			break;
		if (woken) {
			atomic_fetch_add_explicit(&pool->pool_short[pages], 1,
						  memory_order_relaxed);
			pthread_cond_signal(&pool->refill_cv);
		}
		rc = pthread_cond_timedwait(&pool->filled_cv, &pool->pool_lock, &until);
	}
	pool->pool_waiters--;
	pthread_mutex_unlock(&pool->pool_lock);
	zp_wait_done(pool, &start);
	if (f < 0) {
		atomic_fetch_add_explicit(&pool->pool_misses, 1, memory_order_relaxed);
		return -ENOSPC;
	}
	*frame = (uint32_t)f;
	return 0;
}

/*
 * A frame for a zspage of `pages` pages, with at least those resident and
 * counted in mem_used; *resident gets how many are. Returns 0, -ENOSPC (the
 * limit, or the region is full, even after emptying the cache; in a
 * no-fault pool, no cached frame came in time) or -ENOMEM.
 */
int zp_frame_get(struct zpool *pool, uint32_t pages, uint32_t *frame,
		 uint32_t *resident)
{
	int64_t f;

	if (atomic_load_explicit(&pool->nofault, memory_order_acquire))
		return pool_take(pool, pages, frame, resident);
	f = frame_cached(pool, pages, false, resident);
	if (f >= 0) {
		*frame = (uint32_t)f;
		return 0;
	}
	return zp_frame_make(pool, pages, 0, frame, resident);
}

/*
 * Give back the slack of a frame whose zspage uses `pages` of its
 * `resident` pages; returns the pages resident now (`pages`).
 */
uint32_t zp_frame_shrink(struct zpool *pool, uint32_t frame, uint32_t pages,
			 uint32_t resident)
{
	if (resident > pages) {
		pages_release(pool, frame, pages, resident);
		atomic_fetch_sub_explicit(&pool->slack_pages, resident - pages,
					  memory_order_relaxed);
		zp_mem_sub(pool, (uint64_t)(resident - pages) << PAGE_SHIFT);
	}
	return pages;
}

/*
 * A zspage of `pages` pages left frame `frame`, which has `resident` pages
 * resident: cache it. The caller checks zp_cache_over() once it holds no
 * class lock, and trims.
 */
void zp_frame_give(struct zpool *pool, uint32_t frame, uint32_t pages,
		   uint32_t resident)
{
	atomic_fetch_sub_explicit(&pool->slack_pages, resident - pages,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&pool->cache_pages, resident,
				  memory_order_relaxed);
	stack_push(pool, resident, frame);
}

void zp_frames_init(struct zpool *pool)
{
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0u);

	/* pidfds are close-on-exec */
	pool->pid = getpid();
	atomic_store_explicit(&pool->pidfd, fd >= 0 ? fd : -1,
			      memory_order_relaxed);
}

void zp_frames_fini(struct zpool *pool)
{
	int fd = atomic_load_explicit(&pool->pidfd, memory_order_relaxed);

	if (fd >= 0)
		close(fd);
}
