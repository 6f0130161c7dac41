/*
 * workers.h - an optional pool of threads that share a large request's
 * clusters with the calling thread (workers.c). Private to the library.
 */
#ifndef UZRAM_WORKERS_H
#define UZRAM_WORKERS_H

#include <stddef.h>

struct workers;

/*
 * Start n threads (1..UZRAM_MAX_THREADS) and store the pool in *wp.
 * 0, or a negative errno with nothing started.
 */
int workers_create(unsigned n, struct workers **wp);

/* Stop and join the threads; NULL is accepted. No job may be running. */
void workers_destroy(struct workers *w);

/*
 * Call fn(arg, i) for every i in [0, n): on the calling thread and on
 * those of the pool's threads that are free, each i exactly once, in no
 * particular order; returns once every call has returned. Several threads
 * may run jobs at once; the pool's threads serve them in turn.
 *
 * Returns 0, or the error of the failed call with the lowest i, with that
 * i in *failed: every call below it was made and succeeded; calls above it
 * may or may not have been made.
 */
int workers_for(struct workers *w, size_t n, int (*fn)(void *arg, size_t i),
		void *arg, size_t *failed);

#endif
