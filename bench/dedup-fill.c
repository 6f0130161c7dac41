/*
 * dedup-fill.c - fill a device from a file with N writer threads, with or
 * without dedup, and report the time and the memory it holds.
 *
 *	bench-dedup-fill FILE COPIES THREADS DEDUP
 *
 * The device is COPIES times the file's size (rounded up to 1 MiB); copy k
 * goes to offset k * that size, so that copies after the first repeat
 * every cluster of the first at another offset. The file is mapped and
 * faulted in first (not timed). Each thread writes its own contiguous
 * share of each copy in 1 MiB requests, the copies one after the other, as
 * a writer per queue would. Prints one JSON object:
 *	{"bytes": written, "seconds": S, "MBps": M, "cpu_s": C, "user_s": U,
 *	 "sys_s": K, "run_s": R, "queue_s": Q, "sleep_s": Z, "vcsw": V,
 *	 "busy_s": B, "mem": bytes held,
 *	 "mem_used_total": .., "table_bytes": .., "dedup_index_bytes": ..,
 *	 "pages_deduped": .., "compr_data_size": .., "slot_lock_waits": ..,
 *	 "class_lock_waits": .., "class_lock_wait_s": ..}
 * where mem = mem_used_total + table_bytes + dedup_index_bytes, everything
 * the device holds (the figure mem_limit caps), C the CPU seconds (user and
 * system, all threads) the writes took, which other jobs on the machine
 * disturb less than S, and MB = 10^6 bytes. R, Q and Z split the writer
 * threads' seconds, summed over them, into on a CPU, runnable but waiting
 * for one (other jobs' doing), and asleep (a lock, a page fault's wait);
 * V counts their sleeps. B, the longest of the writers' R + Z, is how
 * long the fill would have taken had no other job wanted the CPUs. U and K
 * split the writers' CPU time into user space (compression, hashing, the
 * index) and the kernel (mostly populating the allocator's new pages).
 * Uses the public API only.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* A thread's seconds, and the times it gave up the CPU (slept). */
struct sched_sample {
	double run, queue;           /* on a CPU; runnable, waiting for one */
	double user, sys;            /* on a CPU, in user space; in the kernel */
	long vcsw;
};

struct job {
	struct uzram *dev;
	const unsigned char *data;
	uint64_t len, span, lo, hi;  /* this thread's share [lo, hi) */
	unsigned copies;
	int err;
	double wall;                 /* this thread's seconds in all */
	struct sched_sample used;    /* and how it spent them */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/*
 * This thread's time on a CPU and waiting on a run queue
 * (/proc/thread-self/schedstat), its user and system time and voluntary
 * context switches: what tells a writer that slept (a lock, a page
 * fault's I/O) from one that other jobs kept off the CPU, and its own
 * work from the kernel's (page population, which varies on a VM).
 */
static struct sched_sample thread_sched(void)
{
	struct sched_sample sm = { 0 };
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

static void *writer(void *arg)
{
	struct job *j = arg;
	struct sched_sample a = thread_sched(), b;
	double t0 = now();

	for (unsigned k = 0; k < j->copies && !j->err; k++)
		for (uint64_t off = j->lo; off < j->hi && !j->err; off += REQ) {
			size_t n = j->hi - off < REQ ? (size_t)(j->hi - off) : REQ;

			j->err = uzram_write(j->dev, j->data + off, n,
					     k * j->span + off);
		}
	j->wall = now() - t0;
	b = thread_sched();
	j->used = (struct sched_sample){ b.run - a.run, b.queue - a.queue,
					 b.user - a.user, b.sys - a.sys,
					 b.vcsw - a.vcsw };
	return NULL;
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

int main(int argc, char **argv)
{
	struct uzram_config cfg;
	struct uzram_stats st;
	struct uzram *dev = NULL;
	struct job jobs[16];
	pthread_t th[16];
	unsigned copies, threads;
	uint64_t len, span;
	const unsigned char *data;
	void *map;
	uint64_t flen;
	double t0, t, c0, c, sleep = 0, busy = 0;
	struct sched_sample sum = { 0 };
	int err = 0;

	if (argc != 5 || (copies = (unsigned)atoi(argv[2])) < 1 ||
	    (threads = (unsigned)atoi(argv[3])) < 1 || threads > 16) {
		fprintf(stderr, "usage: bench-dedup-fill FILE COPIES THREADS "
			"DEDUP(0|1)\n");
		return 2;
	}
	map = map_file(argv[1], &flen);
	if (!map)
		return 1;
	data = map;
	len = flen & ~(uint64_t)(UZRAM_PAGE_SIZE - 1);
	span = (len + REQ - 1) / REQ * REQ;
	uzram_config_init(&cfg);
	cfg.size = span * copies;
	cfg.dedup = (uint32_t)atoi(argv[4]);
	if (uzram_open(&cfg, &dev)) {
		fprintf(stderr, "bench-dedup-fill: %s\n", uzram_last_error());
		return 1;
	}
	for (unsigned i = 0; i < threads; i++) {
		uint64_t share = (len / REQ + threads - 1) / threads * REQ;

		jobs[i] = (struct job){ .dev = dev, .data = data, .len = len,
					.span = span, .copies = copies };
		jobs[i].lo = i * share < len ? i * share : len;
		jobs[i].hi = (i + 1) * share < len ? (i + 1) * share : len;
	}
	t0 = now();
	c0 = cpu_now();
	for (unsigned i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, writer, &jobs[i]);
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		if (jobs[i].err)
			err = jobs[i].err;
		sum.run += jobs[i].used.run;
		sum.queue += jobs[i].used.queue;
		sum.user += jobs[i].used.user;
		sum.sys += jobs[i].used.sys;
		sum.vcsw += jobs[i].used.vcsw;
		sleep += jobs[i].wall - jobs[i].used.run - jobs[i].used.queue;
		if (jobs[i].wall - jobs[i].used.queue > busy)
			busy = jobs[i].wall - jobs[i].used.queue;
	}
	t = now() - t0;
	c = cpu_now() - c0;
	if (err) {
		fprintf(stderr, "bench-dedup-fill: write: %s\n",
			uzram_last_error());
		return 1;
	}
	uzram_stats(dev, &st, sizeof st);
	printf("{\"bytes\": %llu, \"seconds\": %.4f, \"MBps\": %.1f, "
	       "\"cpu_s\": %.4f, \"user_s\": %.4f, \"sys_s\": %.4f, "
	       "\"run_s\": %.4f, \"queue_s\": %.4f, "
	       "\"sleep_s\": %.4f, \"vcsw\": %ld, \"busy_s\": %.4f, "
	       "\"mem\": %llu, "
	       "\"mem_used_total\": %llu, \"table_bytes\": %llu, "
	       "\"dedup_index_bytes\": %llu, \"pages_deduped\": %llu, "
	       "\"compr_data_size\": %llu, \"slot_lock_waits\": %llu, "
	       "\"class_lock_waits\": %llu, \"class_lock_wait_s\": %.4f}\n",
	       (unsigned long long)(len * copies), t,
	       (double)(len * copies) / t / 1e6, c, sum.user, sum.sys, sum.run, sum.queue, sleep, sum.vcsw, busy,
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
	munmap(map, (size_t)flen);
	return 0;
}
