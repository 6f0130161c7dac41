// SPDX-License-Identifier: MIT
/*
 * reencode.c - write fast, re-encode later (uzram_config.fast_algorithm,
 * issue 30 item 2): a device whose writers compress with a fast codec
 * (priority 0) and whose own thread ("uzram-reenc") re-encodes what they
 * stored with the configured algorithm (priority 1) once it is idle.
 *
 *   writer:  uzram_write -> fast codec (lz4) -> slot, prio 0     (store.c)
 *                                                 |
 *   thread:  every 100 ms (1 s with an age), a    v
 *            recompress_pass(prio 1, promote) -> slot, prio 1   (recompress.c)
 *            over clusters idle >= min_age ticks
 *
 * The re-encode is recompress.c's step, so everything it guarantees holds:
 * each cluster is decoded, encoded and swapped under its slot lock, which
 * a writer takes to commit; a write that lands before the step is what the
 * step decodes, and one that lands after replaces the step's object. No
 * write is ever overwritten by older bytes, and a read sees the old object
 * or the new one, both the newest data (tests/unit/test_reencode.c checks
 * it against a model under concurrent writers, readers and this thread).
 * The pass "promotes" (struct recomp_pass): it keeps the new object even
 * where it is no smaller than the fast one, so that no cluster is tried
 * again and again; a cluster the final codec cannot shrink below the raw
 * limit is kept raw, marked with priority 1, as recompress.c marks huge
 * ones.
 *
 * Pacing, so that the thread does not compete with the foreground: after
 * each cluster it re-encodes, if uzram_write() was called since its last
 * look (dev->writes), or uzram_read() or uzram_write() within the last
 * QUIET_MS (dev->io_ms, store.c), it naps PACE_US, so while I/O arrives it
 * takes at most one cluster per nap (a few percent of a core with zstd on
 * 4 KiB); once the device has been quiet for QUIET_MS it runs flat out.
 * Reads count as well, and the gaps between writes: a file written and
 * then read back at once (a FUSE file system's 1 MiB writes come a few ms
 * apart, its reads 128 KiB at a time) had its clusters re-encoded between
 * the writes and during the read, on the CPU the I/O needed (BENCHMARKS.md,
 * the fs section, "the re-encoder against the foreground"). A walk that found nothing is not
 * repeated until a write arrives or, with an age, the clock ticks.
 *
 * Memory: the new object is stored before the old one is freed, one
 * cluster at a time, so the thread holds at most one extra object. It is
 * stored with the slot unlocked (recomp_pass.copy): a write to the
 * cluster, which under swap may be what frees the memory the store waits
 * for, never waits for the store (doc/block-device.md's rule for swap;
 * swap with a fast codec still stalls in tests/vm/v43, an open problem);
 * the slot is then locked again and checked to hold the same bytes
 * before the swap. With a memory limit
 * the pool cannot fit it in, the step fails with ENOSPC, changes nothing,
 * and the next pass tries again. Its buffers and zstd context are made at
 * its start, never under a lock; it allocates nothing else. Once a run of
 * passes has re-encoded everything due, it compacts the pool, as the freed
 * fast objects leave holes in their zspages.
 *
 * Lock rules: r->lock guards stop, asked, clean and hurry and pairs with
 * r->cond (the thread's naps and sleeps) and r->done (waiters); the thread
 * holds no slot lock while it takes r->lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "uzram.h"
#include "base/base.h"
#include "core/core.h"
#include "recompress.h"
#include "zpool/zpool.h"

#define PACE_US 1000         /* the nap after a cluster while writes arrive */
#define IDLE_MS 100          /* between walks, with no age */
#define IDLE_AGE_MS 1000     /* between walks, with an age */
#define QUIET_MS 100         /* I/O this recent: nap after each cluster */

struct reencoder {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;      /* wakes the thread: stop, a waiter */
	pthread_cond_t done;      /* wakes waiters: a clean pass */
	bool stop;
	unsigned hurry;           /* waiters: no pacing meanwhile */
	uint64_t asked;           /* the last waiter's ticket */
	uint64_t clean;           /* the ticket of the last clean pass */
	struct recomp_pass pass;  /* prio 1, promote, min_age, copy */
	uint64_t seen;            /* dev->writes at the last look (thread) */
};

static struct timespec deadline(uint64_t us)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(us / 1000000);
	ts.tv_nsec += (long)(us % 1000000) * 1000;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static uint64_t writes_now(struct uzram *dev)
{
	return atomic_load_explicit(&dev->writes, memory_order_relaxed);
}

/* The pass's hook (recompress.h): nap while I/O arrives; false: stop. */
static bool reenc_pace(struct uzram *dev, bool worked)
{
	struct reencoder *r = dev->reenc;
	uint64_t w = writes_now(dev);
	int64_t quiet = store_coarse_ms() -
			atomic_load_explicit(&dev->io_ms, memory_order_relaxed);
	bool busy = w != r->seen || quiet < QUIET_MS, go;

	pthread_mutex_lock(&r->lock);
	if (worked && busy && !r->hurry && !r->stop) {
		struct timespec ts = deadline(PACE_US);

		r->seen = w;
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	go = !r->stop;
	pthread_mutex_unlock(&r->lock);
	return go;
}

static void *reenc_main(void *arg)
{
	struct uzram *dev = arg;
	struct reencoder *r = dev->reenc;
	uint64_t idle_us = r->pass.min_age ? IDLE_AGE_MS * 1000 : IDLE_MS * 1000;
	uint64_t last_w = UINT64_MAX;
	uint32_t last_tick = UINT32_MAX;
	bool again = false, failed = false, moved = false;

	/* its buffers and codec context now, not under a slot lock */
	(void)recompress_warm(dev, r->pass.prio);

	for (;;) {
		uint64_t ticket, w;
		uint32_t tick;
		long n;

		pthread_mutex_lock(&r->lock);
		if (!again && !r->stop && (r->asked == r->clean || failed)) {
			struct timespec ts = deadline(idle_us);

			pthread_cond_timedwait(&r->cond, &r->lock, &ts);
		}
		if (r->stop) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		ticket = r->asked;
		pthread_mutex_unlock(&r->lock);
		w = writes_now(dev);
		tick = store_clock(dev);
		/* nothing can have become due since the last clean walk */
		if (!again && ticket == r->clean && w == last_w &&
		    (!r->pass.min_age || tick == last_tick))
			continue;
		n = recompress_pass(dev, &r->pass);
		again = n > 0;
		moved |= again;
		failed = n < 0;   /* no memory, say: try again after a sleep */
		if (n != 0)
			continue;
		if (moved)        /* the old objects left holes: fill them */
			zpool_compact(dev->pool);
		moved = false;
		last_w = w;
		last_tick = tick;
		pthread_mutex_lock(&r->lock);
		if (writes_now(dev) == w && r->clean < ticket) {
			r->clean = ticket;
			pthread_cond_broadcast(&r->done);
		}
		pthread_mutex_unlock(&r->lock);
	}
}

int reencode_start(struct uzram *dev, uint32_t age_seconds)
{
	struct reencoder *r = calloc(1, sizeof *r);
	uint64_t ticks = ((uint64_t)age_seconds + (1u << TICK_SHIFT) - 1) >>
			 TICK_SHIFT;
	int ret;

	if (!r)
		return uzram_set_error(-ENOMEM, "open: out of memory");
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_cond_init(&r->done, NULL);
	r->pass = (struct recomp_pass){
		.prio = 1, .promote = true, .pace = reenc_pace,
		.min_age = (unsigned)(ticks > AGE_MAX ? AGE_MAX : ticks),
		.copy = malloc(dev->csize),
	};
	if (!r->pass.copy) {
		free(r);
		return uzram_set_error(-ENOMEM, "open: out of memory");
	}
	dev->reenc = r;
	ret = thread_start(&r->thread, reenc_main, dev, "uzram-reenc");
	if (ret) {
		dev->reenc = NULL;
		pthread_cond_destroy(&r->done);
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
		free(r->pass.copy);
		free(r);
		return uzram_set_error(ret, "open: cannot start the "
				       "re-encoding thread");
	}
	return 0;
}

void reencode_stop(struct uzram *dev)
{
	struct reencoder *r = dev->reenc;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	dev->reenc = NULL;
	pthread_cond_destroy(&r->done);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r->pass.copy);
	free(r);
}

UZRAM_API int uzram_reencode_wait(struct uzram *dev, uint32_t timeout_ms)
{
	struct reencoder *r = dev ? dev->reenc : NULL;
	struct timespec ts = deadline((uint64_t)timeout_ms * 1000);
	uint64_t ticket;
	int ret = 0;

	if (!r)
		return uzram_set_error(-EINVAL, "reencode_wait: %s",
				       dev ? "the device has no fast algorithm" :
				       "NULL device");
	pthread_mutex_lock(&r->lock);
	ticket = ++r->asked;
	r->hurry++;
	pthread_cond_broadcast(&r->cond);
	while (r->clean < ticket && !r->stop && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&r->done, &r->lock, &ts);
	r->hurry--;
	ret = r->clean >= ticket ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&r->lock);
	if (ret)
		return uzram_set_error(ret, "reencode_wait: not done after %lu ms",
				       (unsigned long)timeout_ms);
	return 0;
}
