/*
 * dedup-fill.c - fill a device from a file with N writer threads, with or
 * without dedup, and report the time and the memory it holds.
 *
 *	bench-dedup-fill FILE COPIES THREADS DEDUP
 *
 * The device is COPIES times the file's size (rounded up to 1 MiB); copy k
 * goes to offset k * that size, so that copies after the first repeat
 * every cluster of the first at another offset. The file is read into
 * memory first (not timed). Each thread writes its own contiguous share of
 * each copy in 1 MiB requests, the copies one after the other, as a
 * writer per queue would. Prints one JSON object:
 *	{"bytes": written, "seconds": S, "MBps": M, "cpu_s": C, "mem": bytes held,
 *	 "mem_used_total": .., "table_bytes": .., "dedup_index_bytes": ..,
 *	 "pages_deduped": .., "compr_data_size": ..}
 * where mem = mem_used_total + table_bytes + dedup_index_bytes, everything
 * the device holds (the figure mem_limit caps), C the CPU seconds (user and
 * system, all threads) the writes took, which other jobs on the machine
 * disturb less than S, and MB = 10^6 bytes.
 * Uses the public API only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "uzram.h"

#define REQ (1u << 20)

struct job {
	struct uzram *dev;
	const unsigned char *data;
	uint64_t len, span, lo, hi;  /* this thread's share [lo, hi) */
	unsigned copies;
	int err;
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

static void *writer(void *arg)
{
	struct job *j = arg;

	for (unsigned k = 0; k < j->copies && !j->err; k++)
		for (uint64_t off = j->lo; off < j->hi && !j->err; off += REQ) {
			size_t n = j->hi - off < REQ ? (size_t)(j->hi - off) : REQ;

			j->err = uzram_write(j->dev, j->data + off, n,
					     k * j->span + off);
		}
	return NULL;
}

static unsigned char *slurp(const char *path, uint64_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 ||
	    fseek(f, 0, SEEK_SET) || !(buf = malloc((size_t)n)) ||
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "bench-dedup-fill: cannot read %s\n", path);
		free(buf);
		buf = NULL;
	}
	*len = buf ? (uint64_t)n : 0;
	if (f)
		fclose(f);
	return buf;
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
	unsigned char *data;
	double t0, t, c0, c;
	int err = 0;

	if (argc != 5 || (copies = (unsigned)atoi(argv[2])) < 1 ||
	    (threads = (unsigned)atoi(argv[3])) < 1 || threads > 16) {
		fprintf(stderr, "usage: bench-dedup-fill FILE COPIES THREADS "
			"DEDUP(0|1)\n");
		return 2;
	}
	data = slurp(argv[1], &len);
	if (!data)
		return 1;
	len &= ~(uint64_t)(UZRAM_PAGE_SIZE - 1);
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
	       "\"cpu_s\": %.4f, \"mem\": %llu, \"mem_used_total\": %llu, \"table_bytes\": %llu, "
	       "\"dedup_index_bytes\": %llu, \"pages_deduped\": %llu, "
	       "\"compr_data_size\": %llu}\n",
	       (unsigned long long)(len * copies), t, (double)(len * copies) / t / 1e6,
	       c,
	       (unsigned long long)(st.mem_used_total + st.table_bytes +
				    st.dedup_index_bytes),
	       (unsigned long long)st.mem_used_total,
	       (unsigned long long)st.table_bytes,
	       (unsigned long long)st.dedup_index_bytes,
	       (unsigned long long)st.pages_deduped,
	       (unsigned long long)st.compr_data_size);
	uzram_close(dev);
	free(data);
	return 0;
}
