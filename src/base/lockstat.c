// SPDX-License-Identifier: MIT
/*
 * lockstat.c - per-thread counters of lock waits (base.h).
 *
 * A thread's first wait gives it a block of counters, linked on a list
 * that lockstat_sum() walks. Only the owner writes a block (relaxed
 * atomics, so that a concurrent sum reads whole values); at the thread's
 * exit the block's figures move to `gone` and the block is freed.
 *
 *   blocks -> [thread A] -> [thread B] -> NULL     gone: exited threads
 *
 * Lock rule: list_lock protects the list's links and `gone`; a block's
 * counters are written without it by their thread only.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base.h"

struct lock_block {
	_Atomic uint64_t waits[LOCK_KINDS];
	_Atomic uint64_t wait_ns[LOCK_KINDS];
	struct lock_block *next, **prevp;
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lock_block *blocks;
static struct lock_counts gone;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int key_err;
static _Thread_local struct lock_block *mine;

static void block_retire(void *p)
{
	struct lock_block *b = p;

	pthread_mutex_lock(&list_lock);
	for (int k = 0; k < LOCK_KINDS; k++) {
		gone.waits[k] += atomic_load_explicit(&b->waits[k],
						      memory_order_relaxed);
		gone.wait_ns[k] += atomic_load_explicit(&b->wait_ns[k],
							memory_order_relaxed);
	}
	*b->prevp = b->next;
	if (b->next)
		b->next->prevp = b->prevp;
	pthread_mutex_unlock(&list_lock);
	mine = NULL;
	free(b);
}

static void key_init(void)
{
	key_err = pthread_key_create(&key, block_retire);
}

/* This thread's block, made on its first wait; NULL without memory. */
static struct lock_block *block_get(void)
{
	struct lock_block *b = mine;

	if (b)
		return b;
	pthread_once(&key_once, key_init);
	b = calloc(1, sizeof *b);
	if (key_err || !b || pthread_setspecific(key, b)) {
		free(b);
		return NULL;
	}
	pthread_mutex_lock(&list_lock);
	b->next = blocks;
	b->prevp = &blocks;
	if (blocks)
		blocks->prevp = &b->next;
	blocks = b;
	pthread_mutex_unlock(&list_lock);
	mine = b;
	return b;
}

uint64_t lockstat_begin(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add(_Atomic uint64_t *c, uint64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed)
			      + d, memory_order_relaxed);
}

void lockstat_end(enum lock_kind k, uint64_t t0)
{
	struct lock_block *b = block_get();

	if (!b)
		return;
	/* the time first: whoever sees the wait counted sees its time */
	add(&b->wait_ns[k], lockstat_begin() - t0);
	atomic_store_explicit(&b->waits[k], atomic_load_explicit(&b->waits[k],
			      memory_order_relaxed) + 1, memory_order_release);
}

void lockstat_sum(struct lock_counts *out)
{
	pthread_mutex_lock(&list_lock);
	*out = gone;
	for (struct lock_block *b = blocks; b; b = b->next)
		for (int k = 0; k < LOCK_KINDS; k++) {
			out->waits[k] += atomic_load_explicit(&b->waits[k],
							memory_order_acquire);
			out->wait_ns[k] += atomic_load_explicit(&b->wait_ns[k],
							memory_order_relaxed);
		}
	pthread_mutex_unlock(&list_lock);
}
