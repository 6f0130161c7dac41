// SPDX-License-Identifier: MIT
/*
 * codec-limit.c - the physical limit for a compressed RAM disk: raw LZ4 on
 * the same 4 KiB pages the benchmark stores, in a tight loop, with 1 and 2
 * threads.
 *
 *	codec-limit [--seconds S] [--max-mib M] FILE...
 *
 * The files (at most M MiB of each) are cut into 4096-byte pages (a short
 * last page is dropped),
 * every page is compressed once with LZ4_compress_default into one arena,
 * and then for S seconds per measure:
 *   decompress_random  LZ4_decompress_safe of the pages in a random order
 *                      (what a 4K random read has to do);
 *   decompress_seq     the same in storage order (a sequential read);
 *   compress           LZ4_compress_default of the pages in order into a
 *                      per-thread buffer (what a writer has to do).
 * Each thread walks its own order. MB are 10^6 bytes of uncompressed page
 * data. Prints one JSON object on stdout and a summary on stderr.
 *
 * Nothing here is shared between threads except the read-only arena, so
 * two threads measure the codec and the memory system, not a lock.
 */
#include <errno.h>
#include <lz4.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 4096u

struct corpus {
	size_t nr_pages;
	char *pages;		/* nr_pages * PAGE bytes of input */
	char *arena;		/* compressed pages back to back */
	size_t *off;		/* nr_pages + 1 offsets into arena */
	size_t orig_bytes;
	size_t compr_bytes;
};

enum measure { DECOMPRESS_RANDOM, DECOMPRESS_SEQ, COMPRESS };

struct worker {
	pthread_t thread;
	const struct corpus *c;
	enum measure what;
	unsigned int id;
	double seconds;
	uint64_t pages;
	double elapsed;
	int failed;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Read whole pages of each file, at most max_bytes of each (0: all). */
static int load(struct corpus *c, char **files, int nr_files, size_t max_bytes)
{
	size_t cap = 0, used = 0;

	for (int i = 0; i < nr_files; i++) {
		FILE *f = fopen(files[i], "rb");
		size_t got, start = used;

		if (!f) {
			fprintf(stderr, "codec-limit: cannot open %s: %s\n",
				files[i], strerror(errno));
			return -1;
		}
		for (;;) {
			if (used + PAGE > cap) {
				size_t ncap = cap ? cap * 2 : 64u << 20;
				char *p = realloc(c->pages, ncap);

				if (!p) {
					fclose(f);
					return -1;
				}
				c->pages = p;
				cap = ncap;
			}
			if (max_bytes && used - start >= max_bytes)
				break;
			got = fread(c->pages + used, 1, PAGE, f);
			if (got < PAGE)
				break;
			used += PAGE;
		}
		fclose(f);
	}
	c->nr_pages = used / PAGE;
	c->orig_bytes = used;
	return c->nr_pages ? 0 : -1;
}

static int compress_all(struct corpus *c)
{
	size_t bound = LZ4_compressBound(PAGE), pos = 0;

	c->off = malloc((c->nr_pages + 1) * sizeof(*c->off));
	c->arena = malloc(c->nr_pages * bound);
	if (!c->off || !c->arena)
		return -1;
	for (size_t i = 0; i < c->nr_pages; i++) {
		int n = LZ4_compress_default(c->pages + i * PAGE, c->arena + pos,
					     PAGE, bound);

		if (n <= 0)
			return -1;
		c->off[i] = pos;
		pos += n;
	}
	c->off[c->nr_pages] = pos;
	c->compr_bytes = pos;
	return 0;
}

/* xorshift64*: a fixed, cheap shuffle that differs per thread. */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	const struct corpus *c = w->c;
	size_t n = c->nr_pages, i, k = 0;
	uint32_t *order = malloc(n * sizeof(*order));
	char *out = malloc(LZ4_compressBound(PAGE));
	uint64_t seed = 0x9e3779b97f4a7c15ull * (w->id + 1);
	double start, end;

	if (!order || !out) {
		w->failed = 1;
		goto out;
	}
	for (i = 0; i < n; i++)
		order[i] = (uint32_t)((i + w->id * n / 2) % n);
	if (w->what == DECOMPRESS_RANDOM)
		for (i = n - 1; i > 0; i--) {
			size_t r = next_rand(&seed) % (i + 1);
			uint32_t t = order[i];

			order[i] = order[r];
			order[r] = t;
		}
	start = now();
	end = start + w->seconds;
	for (;;) {
		for (unsigned int b = 0; b < 64; b++) {
			uint32_t p = order[k];
			int r;

			if (++k == n)
				k = 0;
			if (w->what == COMPRESS)
				r = LZ4_compress_default(c->pages + (size_t)p * PAGE,
							 out, PAGE,
							 LZ4_compressBound(PAGE));
			else
				r = LZ4_decompress_safe(c->arena + c->off[p], out,
							(int)(c->off[p + 1] - c->off[p]),
							PAGE);
			if (r <= 0 || (w->what != COMPRESS && r != (int)PAGE)) {
				w->failed = 1;
				goto out;
			}
		}
		w->pages += 64;
		if (now() >= end)
			break;
	}
	w->elapsed = now() - start;
out:
	free(order);
	free(out);
	return NULL;
}

static int measure(const struct corpus *c, enum measure what,
		   unsigned int threads, double seconds, double *pages_per_s)
{
	struct worker w[2];

	*pages_per_s = 0;
	for (unsigned int t = 0; t < threads; t++) {
		w[t] = (struct worker){ .c = c, .what = what, .id = t,
					.seconds = seconds };
		if (pthread_create(&w[t].thread, NULL, work, &w[t]))
			return -1;
	}
	for (unsigned int t = 0; t < threads; t++) {
		pthread_join(w[t].thread, NULL);
		if (w[t].failed)
			return -1;
		*pages_per_s += w[t].pages / w[t].elapsed;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {
		[DECOMPRESS_RANDOM] = "decompress_random",
		[DECOMPRESS_SEQ] = "decompress_seq",
		[COMPRESS] = "compress",
	};
	struct corpus c = { 0 };
	double seconds = 1.5;
	size_t max_bytes = 0;
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc)
			max_bytes = (size_t)atol(argv[++i]) << 20;
		else
			break;
	}
	if (i >= argc || seconds <= 0) {
		fprintf(stderr, "usage: codec-limit [--seconds S] [--max-mib M] FILE...\n");
		return 2;
	}
	if (load(&c, argv + i, argc - i, max_bytes) || compress_all(&c)) {
		fprintf(stderr, "codec-limit: cannot load or compress the corpus\n");
		return 1;
	}
	printf("{\"lz4_version\": \"%s\", \"page_size\": %u, \"pages\": %zu, "
	       "\"orig_bytes\": %zu, \"compr_bytes\": %zu, \"seconds\": %.2f",
	       LZ4_versionString(), PAGE, c.nr_pages, c.orig_bytes,
	       c.compr_bytes, seconds);
	for (int m = DECOMPRESS_RANDOM; m <= COMPRESS; m++) {
		printf(", \"%s\": {", names[m]);
		for (unsigned int t = 1; t <= 2; t++) {
			double pps;

			if (measure(&c, m, t, seconds, &pps)) {
				fprintf(stderr, "codec-limit: %s failed\n", names[m]);
				return 1;
			}
			printf("%s\"%u\": {\"pages_per_s\": %.0f, \"MBps\": %.1f}",
			       t > 1 ? ", " : "", t, pps, pps * PAGE / 1e6);
			fprintf(stderr, "codec-limit: %-17s %u thread%s %8.1f MB/s %9.0f pages/s\n",
				names[m], t, t > 1 ? "s" : " ", pps * PAGE / 1e6, pps);
		}
		printf("}");
	}
	printf("}\n");
	free(c.pages);
	free(c.arena);
	free(c.off);
	return 0;
}
