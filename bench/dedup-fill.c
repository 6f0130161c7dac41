// SPDX-License-Identifier: MIT
/*
 * dedup-fill.c - fill a device from a file with N writer threads, with or
 * without dedup, and report the time and the memory it holds; or fill a
 * device without and one with dedup in alternation (an A/B run).
 *
 *	bench-dedup-fill FILE COPIES THREADS DEDUP
 *	bench-dedup-fill --ab FILE THREADS [DEDUP_A DEDUP_B]
 *
 * The device is COPIES times the file's size (rounded up to 1 MiB); copy k
 * goes to offset k * that size, so that copies after the first repeat
 * every cluster of the first at another offset. The file is mapped and
 * faulted in first (not timed). Each thread writes its own contiguous
 * share of each copy in 1 MiB requests, the copies one after the other, as
 * a writer per queue would. Prints one JSON object:
 *	{"bytes": written, "seconds": S, "MBps": M, SAMPLE, "mem": bytes held,
 *	 "mem_used_total": .., "table_bytes": .., "dedup_index_bytes": ..,
 *	 "pages_deduped": .., "compr_data_size": .., "slot_lock_waits": ..,
 *	 "class_lock_waits": .., "class_lock_wait_s": ..}
 * where mem = mem_used_total + table_bytes + dedup_index_bytes, everything
 * the device holds (the figure mem_limit caps), and MB = 10^6 bytes.
 *
 * --ab opens two devices of the file's size, "a" and "b", by default
 * without and with dedup (DEDUP_A and DEDUP_B: 0 0 measures the method's
 * own bias), and writes the file to both in phases of THREADS * 8 MiB: in each
 * phase the threads write their 8 MiB to one device together, wait for
 * each other, then write the same to the other (which device goes first
 * alternates from phase to phase). Both fills thus run in the same seconds
 * of the machine, whose speed drifts with other jobs on it and on the
 * host: two runs in separate processes differ by 10-15% in user time
 * alone, more than the difference being measured. Prints
 *	{"ab": 1, "threads": T, "bytes": per device, "phases": P,
 *	 "dedup_a": 0, "dedup_b": 1, "a": {"seconds": S, SAMPLE}, "b": {...},
 *	 "phase_ratios": [..]}
 * where S sums the phases' wall-clock times and phase_ratios are each
 * phase's throughput on b over a, sorted.
 *
 * SAMPLE is the writer threads' time, summed over them: "cpu_s" = "user_s"
 * (compression, hashing, the index) + "sys_s" (the kernel: mostly
 * populating the allocator's new pages); "run_s" on a CPU, "queue_s"
 * runnable but waiting for one (other jobs' doing), "sleep_s" asleep (a
 * lock, a page fault's wait) and "vcsw" their sleeps
 * (/proc/thread-self/schedstat, getrusage); "busy_s" is how long the fill
 * would have taken had no other job wanted the CPUs (the longest writer's
 * time less its wait for a CPU; in --ab, summed over the phases).
 * Uses the public API only.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uzram.h"

#define REQ (1u << 20)
#define AB_CHUNK (8u << 20)    /* each writer's part of an --ab phase */
#define MAX_THREADS 16

/* A thread's seconds, and the times it gave up the CPU (slept). */
struct sched_sample {
	double wall;                 /* in all */
	double run, queue;           /* on a CPU; runnable, waiting for one */
	double user, sys;            /* on a CPU, in user space; in the kernel */
	long vcsw;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct sched_sample thread_sched(void)
{
	struct sched_sample sm = { .wall = now() };
	unsigned long long r = 0, q = 0;
	struct rusage ru;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	if (f && fscanf(f, "%llu %llu", &r, &q) == 2) {
		sm.run = (double)r / 1e9;
		sm.queue = (double)q / 1e9;
	}
	if (f)
		fclose(f);
	getrusage(RUSAGE_THREAD, &ru);
	sm.user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
	sm.sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	sm.vcsw = ru.ru_nvcsw;
	return sm;
}

/* *sum += b - a */
static void sample_add_diff(struct sched_sample *sum,
			    const struct sched_sample *a,
			    const struct sched_sample *b)
{
	sum->wall += b->wall - a->wall;
	sum->run += b->run - a->run;
	sum->queue += b->queue - a->queue;
	sum->user += b->user - a->user;
	sum->sys += b->sys - a->sys;
	sum->vcsw += b->vcsw - a->vcsw;
}

/* The JSON fields of a sum over threads; busy as in the top comment. */
static void sample_print(const struct sched_sample *s, double busy)
{
	/* the clocks' granularity can take a few microseconds below 0 */
	double sleep = s->wall - s->run - s->queue;

	printf("\"cpu_s\": %.4f, \"user_s\": %.4f, \"sys_s\": %.4f, "
	       "\"run_s\": %.4f, \"queue_s\": %.4f, \"sleep_s\": %.4f, "
	       "\"vcsw\": %ld, \"busy_s\": %.4f", s->user + s->sys, s->user,
	       s->sys, s->run, s->queue, sleep > 0 ? sleep : 0, s->vcsw, busy);
}

/* data[lo, hi) to dev at base + lo, in 1 MiB requests. */
static int write_range(struct uzram *dev, const unsigned char *data,
		       uint64_t lo, uint64_t hi, uint64_t base)
{
	int err = 0;

	for (uint64_t off = lo; off < hi && !err; off += REQ)
		err = uzram_write(dev, data + off,
				  hi - off < REQ ? (size_t)(hi - off) : REQ,
				  base + off);
	return err;
}

/*
 * The file, mapped and faulted in before the clock starts: its pages are
 * the page cache's, so a run neither copies it nor pays the first touch
 * of 512 MiB of fresh memory, which varies from run to run on a VM.
 */
static void *map_file(const char *path, uint64_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat sb;
	void *p = MAP_FAILED;

	if (fd >= 0 && !fstat(fd, &sb) && sb.st_size > 0)
		p = mmap(NULL, (size_t)sb.st_size, PROT_READ,
			 MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (fd >= 0)
		close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, "bench-dedup-fill: cannot map %s\n", path);
		return NULL;
	}
	*len = (uint64_t)sb.st_size;
	return p;
}

static struct uzram *dev_open(uint64_t size, uint32_t dedup)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;

	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.dedup = dedup;
	if (uzram_open(&cfg, &dev)) {
		fprintf(stderr, "bench-dedup-fill: %s\n", uzram_last_error());
		return NULL;
	}
	return dev;
}

/* ---- one device, COPIES times the file ---- */

struct job {
	struct uzram *dev;
	const unsigned char *data;
	uint64_t span, lo, hi;       /* this thread's share [lo, hi) */
	unsigned copies;
	int err;
	struct sched_sample used;
};

static void *fill_writer(void *arg)
{
	struct job *j = arg;
	struct sched_sample a = thread_sched(), b;

	for (unsigned k = 0; k < j->copies && !j->err; k++)
		j->err = write_range(j->dev, j->data, j->lo, j->hi, k * j->span);
	b = thread_sched();
	sample_add_diff(&j->used, &a, &b);
	return NULL;
}

static int run_fill(const unsigned char *data, uint64_t len, unsigned copies,
		    unsigned threads, uint32_t dedup)
{
	uint64_t span = (len + REQ - 1) / REQ * REQ;
	uint64_t share = (len / REQ + threads - 1) / threads * REQ;
	struct uzram *dev = dev_open(span * copies, dedup);
	struct sched_sample sum = { 0 };
	struct job jobs[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	struct uzram_stats st;
	double t0, t, busy = 0;
	int err = 0;

	if (!dev)
		return 1;
	for (unsigned i = 0; i < threads; i++)
		jobs[i] = (struct job){ .dev = dev, .data = data, .span = span,
					.copies = copies,
					.lo = i * share < len ? i * share : len,
					.hi = (i + 1) * share < len ?
					      (i + 1) * share : len };
	t0 = now();
	for (unsigned i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, fill_writer, &jobs[i]);
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		err = jobs[i].err ? jobs[i].err : err;
		sample_add_diff(&sum, &(struct sched_sample){ 0 }, &jobs[i].used);
		if (jobs[i].used.wall - jobs[i].used.queue > busy)
			busy = jobs[i].used.wall - jobs[i].used.queue;
	}
	t = now() - t0;
	if (err) {
		fprintf(stderr, "bench-dedup-fill: write: %s\n",
			uzram_last_error());
		return 1;
	}
	uzram_stats(dev, &st, sizeof st);
	printf("{\"bytes\": %llu, \"seconds\": %.4f, \"MBps\": %.1f, ",
	       (unsigned long long)(len * copies), t,
	       (double)(len * copies) / t / 1e6);
	sample_print(&sum, busy);
	printf(", \"mem\": %llu, \"mem_used_total\": %llu, \"table_bytes\": %llu, "
	       "\"dedup_index_bytes\": %llu, \"pages_deduped\": %llu, "
	       "\"compr_data_size\": %llu, \"slot_lock_waits\": %llu, "
	       "\"class_lock_waits\": %llu, \"class_lock_wait_s\": %.4f}\n",
	       (unsigned long long)(st.mem_used_total + st.table_bytes +
				    st.dedup_index_bytes),
	       (unsigned long long)st.mem_used_total,
	       (unsigned long long)st.table_bytes,
	       (unsigned long long)st.dedup_index_bytes,
	       (unsigned long long)st.pages_deduped,
	       (unsigned long long)st.compr_data_size,
	       (unsigned long long)st.slot_lock_waits,
	       (unsigned long long)st.class_lock_waits,
	       (double)st.class_lock_wait_ns / 1e9);
	uzram_close(dev);
	return 0;
}

/* ---- --ab: two devices, filled in alternation ---- */

struct ab {
	struct uzram *dev[2];        /* "a" and "b" */
	uint32_t dedup[2];
	const unsigned char *data;
	uint64_t len;
	unsigned threads, phases;
	pthread_barrier_t bar;
	double *wall;                /* [phase * 2 + mode], by thread 0 */
	double *busy;                /* [(phase * 2 + mode) * threads + i] */
	int err;                     /* the first failure, by any thread */
};

struct ab_job {
	struct ab *ab;
	unsigned i;
	struct sched_sample used[2];
};

static void *ab_writer(void *arg)
{
	struct ab_job *j = arg;
	struct ab *ab = j->ab;

	for (unsigned p = 0; p < ab->phases; p++)
		for (unsigned k = 0; k < 2; k++) {
			unsigned m = (p + k) % 2, slot = p * 2 + m;
			uint64_t lo = ((uint64_t)p * ab->threads + j->i) * AB_CHUNK;
			uint64_t hi = lo + AB_CHUNK;
			struct sched_sample a, b;
			double t0;
			int err = 0;

			lo = lo < ab->len ? lo : ab->len;
			hi = hi < ab->len ? hi : ab->len;
			pthread_barrier_wait(&ab->bar);
			t0 = now();
			a = thread_sched();
			if (!__atomic_load_n(&ab->err, __ATOMIC_RELAXED))
				err = write_range(ab->dev[m], ab->data, lo, hi, 0);
			b = thread_sched();
			if (err)
				__atomic_store_n(&ab->err, err, __ATOMIC_RELAXED);
			sample_add_diff(&j->used[m], &a, &b);
			ab->busy[slot * ab->threads + j->i] =
				(b.wall - a.wall) - (b.queue - a.queue);
			pthread_barrier_wait(&ab->bar);
			if (j->i == 0)
				ab->wall[slot] = now() - t0;
		}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The JSON of a finished --ab run. */
static void ab_print(const struct ab *ab, const struct ab_job *jobs)
{
	double *ratio = calloc(ab->phases, sizeof *ratio);

	printf("{\"ab\": 1, \"threads\": %u, \"bytes\": %llu, \"phases\": %u, "
	       "\"dedup_a\": %u, \"dedup_b\": %u", ab->threads,
	       (unsigned long long)ab->len, ab->phases, ab->dedup[0],
	       ab->dedup[1]);
	for (unsigned m = 0; m < 2; m++) {
		struct sched_sample sum = { 0 };
		double wall = 0, busy = 0;

		for (unsigned p = 0; p < ab->phases; p++) {
			double most = 0;

			wall += ab->wall[p * 2 + m];
			for (unsigned i = 0; i < ab->threads; i++)
				if (ab->busy[(p * 2 + m) * ab->threads + i] > most)
					most = ab->busy[(p * 2 + m) * ab->threads + i];
			busy += most;
		}
		for (unsigned i = 0; i < ab->threads; i++)
			sample_add_diff(&sum, &(struct sched_sample){ 0 },
					&jobs[i].used[m]);
		printf(", \"%s\": {\"seconds\": %.4f, ", m ? "b" : "a", wall);
		sample_print(&sum, busy);
		printf("}");
	}
	for (unsigned p = 0; ratio && p < ab->phases; p++)
		ratio[p] = ab->wall[p * 2] / ab->wall[p * 2 + 1];
	if (ratio)
		qsort(ratio, ab->phases, sizeof ratio[0], cmp_double);
	printf(", \"phase_ratios\": [");
	for (unsigned p = 0; ratio && p < ab->phases; p++)
		printf("%s%.4f", p ? ", " : "", ratio[p]);
	printf("]}\n");
	free(ratio);
}

static int run_ab(const unsigned char *data, uint64_t len, unsigned threads,
		  uint32_t dedup_a, uint32_t dedup_b)
{
	struct ab ab = { .data = data, .len = len, .threads = threads,
			 .dedup = { dedup_a, dedup_b } };
	struct ab_job jobs[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	int ret = 1;

	ab.phases = (unsigned)((len + (uint64_t)threads * AB_CHUNK - 1) /
			       ((uint64_t)threads * AB_CHUNK));
	ab.wall = calloc(ab.phases * 2, sizeof *ab.wall);
	ab.busy = calloc((size_t)ab.phases * 2 * threads, sizeof *ab.busy);
	ab.dev[0] = dev_open((len + REQ - 1) / REQ * REQ, dedup_a);
	ab.dev[1] = ab.dev[0] ? dev_open((len + REQ - 1) / REQ * REQ, dedup_b) :
				NULL;
	if (!ab.wall || !ab.busy || !ab.dev[1])
		goto out;
	pthread_barrier_init(&ab.bar, NULL, threads);
	for (unsigned i = 0; i < threads; i++) {
		jobs[i] = (struct ab_job){ .ab = &ab, .i = i };
		pthread_create(&th[i], NULL, ab_writer, &jobs[i]);
	}
	for (unsigned i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&ab.bar);
	if (ab.err) {
		fprintf(stderr, "bench-dedup-fill: write: %s\n",
			uzram_last_error());
		goto out;
	}
	ab_print(&ab, jobs);
	ret = 0;
out:
	uzram_close(ab.dev[1]);
	uzram_close(ab.dev[0]);
	free(ab.busy);
	free(ab.wall);
	return ret;
}

int main(int argc, char **argv)
{
	bool ab = (argc == 4 || argc == 6) && !strcmp(argv[1], "--ab");
	unsigned copies = 0, threads = 0;
	uint64_t flen, len;
	void *map;
	int ret;

	if (ab || argc == 5)
		threads = (unsigned)atoi(argv[3]);
	if (argc == 5)
		copies = (unsigned)atoi(argv[2]);
	if ((!ab && copies < 1) || threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "usage: bench-dedup-fill FILE COPIES THREADS "
			"DEDUP(0|1)\n       bench-dedup-fill --ab FILE THREADS "
			"[DEDUP_A DEDUP_B]\n");
		return 2;
	}
	map = map_file(argv[ab ? 2 : 1], &flen);
	if (!map)
		return 1;
	len = flen & ~(uint64_t)(UZRAM_PAGE_SIZE - 1);
	ret = ab ? run_ab(map, len, threads, argc == 6 ? (uint32_t)atoi(argv[4]) : 0,
			  argc == 6 ? (uint32_t)atoi(argv[5]) : 1) :
		   run_fill(map, len, copies, threads, (uint32_t)atoi(argv[4]));
	munmap(map, (size_t)flen);
	return ret;
}
