// SPDX-License-Identifier: MIT
/*
 * crew.c - the optional write crew (uzram_config.threads): a large
 * write's clusters compressed on several cores at once.
 *
 * The kernel's zram compresses a bio's pages one after another in the
 * caller's context; so does uzram with no pool. A 1 MiB write is 256
 * independent clusters, though, and most of its cost is per cluster: the
 * compression, and on a VM the first touch of the allocator's fresh
 * memory (about 5 us a page on some hypervisors, which page faults on
 * other threads pay in parallel). So a caller with a pool posts its
 * request as a job and works on it itself, while free threads of the pool
 * join it; each claims the next index with one atomic add:
 *
 *   caller ---- post job ---> jobs: [job A] -> [job B] -> NULL
 *     |                           ^  (FIFO; a job leaves the list when
 *     | fn(arg, i) for i =        |   its last index is claimed)
 *     |   next++ < n              |
 *     v                        thread 1..n: take the first job, run it
 *   unlink the job, wait until no thread is in it, return
 *
 * Each thread first makes its codec contexts (on_start: the device's
 * store_thread_prepare()), and crew_create() returns once all have, so
 * no job of theirs allocates them.
 *
 * The caller never waits for a thread to start: if the pool is busy, it
 * does the whole job alone, so a pool can only add throughput. A job lives
 * on its caller's stack; the caller returns only after unlinking it and
 * seeing its count of helping threads drop to zero, both under the lock,
 * so no thread can touch it afterwards.
 *
 * Lock rule: w->lock protects the job list, each job's helpers and err,
 * the writes of its failed, w->stop and w->starting. A job's next, and
 * the reads of failed that stop claiming, are atomic, outside the lock.
 * fn and on_start are called without the lock.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "uzram.h"
#include "core.h"

struct job {
	size_t n;
	_Atomic size_t next;         /* the next index to claim */
	_Atomic size_t failed;       /* the lowest index that failed, or n */
	int (*fn)(void *arg, size_t i);
	void *arg;
	int err;                     /* its error */
	unsigned helpers;            /* pool threads inside the job */
	bool linked;                 /* on the list */
	struct job *link;
};

struct crew {
	int (*on_start)(void *arg);
	void *start_arg;
	pthread_mutex_t lock;
	pthread_cond_t work;    /* a job was posted, or the pool stops */
	pthread_cond_t left;    /* a thread left a job, or ended its start */
	struct job *head, **tail;
	bool stop;
	unsigned n;
	unsigned starting;      /* threads not yet through on_start */
	pthread_t tid[];
};

static void job_unlink(struct crew *w, struct job *job)
{
	struct job **p = &w->head;

	if (!job->linked)
		return;
	while (*p != job)
		p = &(*p)->link;
	*p = job->link;
	if (w->tail == &job->link)
		w->tail = p;
	job->linked = false;
}

/*
 * Indexes are claimed in increasing order, and one past a failure is not
 * run: so every index below the lowest failure has run, and succeeded.
 */
static void job_run(struct crew *w, struct job *job)
{
	for (;;) {
		size_t i = atomic_fetch_add_explicit(&job->next, 1,
						     memory_order_relaxed);
		int err;

		if (i >= job->n ||
		    i > atomic_load_explicit(&job->failed, memory_order_relaxed))
			return;
		err = job->fn(job->arg, i);
		if (!err)
			continue;
		pthread_mutex_lock(&w->lock);
		if (i < atomic_load_explicit(&job->failed, memory_order_relaxed)) {
			atomic_store_explicit(&job->failed, i,
					      memory_order_relaxed);
			job->err = err;
		}
		pthread_mutex_unlock(&w->lock);
	}
}

static void *crew_main(void *arg)
{
	struct crew *w = arg;

	if (w->on_start)
		(void)w->on_start(w->start_arg);
	pthread_mutex_lock(&w->lock);
	if (--w->starting == 0)
		pthread_cond_broadcast(&w->left);
	while (!w->stop) {
		struct job *job = w->head;

		if (!job) {
			pthread_cond_wait(&w->work, &w->lock);
			continue;
		}
		job->helpers++;
		pthread_mutex_unlock(&w->lock);
		job_run(w, job);
		pthread_mutex_lock(&w->lock);
		/* every index is claimed now: the next thread skips the job */
		job_unlink(w, job);
		if (--job->helpers == 0)
			pthread_cond_broadcast(&w->left);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int crew_for(struct crew *w, size_t n, int (*fn)(void *arg, size_t i),
		void *arg, size_t *failed)
{
	struct job job = { .n = n, .failed = n, .fn = fn, .arg = arg,
			   .linked = true };

	if (!w || n < 2) {
		for (size_t i = 0; i < n; i++) {
			int err = fn(arg, i);

			if (err) {
				*failed = i;
				return err;
			}
		}
		return 0;
	}
	pthread_mutex_lock(&w->lock);
	*w->tail = &job;
	w->tail = &job.link;
	pthread_cond_broadcast(&w->work);
	pthread_mutex_unlock(&w->lock);

	job_run(w, &job);

	pthread_mutex_lock(&w->lock);
	job_unlink(w, &job);
	while (job.helpers)
		pthread_cond_wait(&w->left, &w->lock);
	pthread_mutex_unlock(&w->lock);
	*failed = job.failed;
	return job.err;
}

static void crew_stop(struct crew *w, unsigned started)
{
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->work);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(w->tid[i], NULL);
}

int crew_create(unsigned n, int (*on_start)(void *arg), void *arg,
		struct crew **wp)
{
	sigset_t all, old;
	struct crew *w;
	int err = 0;
	unsigned i;

	if (n == 0 || n > UZRAM_MAX_THREADS)
		return -EINVAL;
	w = calloc(1, sizeof *w + n * sizeof w->tid[0]);
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->left, NULL);
	w->tail = &w->head;
	w->n = n;
	w->on_start = on_start;
	w->start_arg = arg;
	w->starting = n;
	/* the caller's signals are its own: the threads block them all */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < n && !err; i++)
		err = -pthread_create(&w->tid[i], NULL, crew_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		crew_stop(w, i - 1);
		w->n = 0;
		crew_destroy(w);
		return err;
	}
	/* ready when crew_create() returns: no thread makes its start later */
	pthread_mutex_lock(&w->lock);
	while (w->starting)
		pthread_cond_wait(&w->left, &w->lock);
	pthread_mutex_unlock(&w->lock);
	*wp = w;
	return 0;
}

void crew_destroy(struct crew *w)
{
	if (!w)
		return;
	if (w->n)
		crew_stop(w, w->n);
	pthread_cond_destroy(&w->left);
	pthread_cond_destroy(&w->work);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
