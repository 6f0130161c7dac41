// SPDX-License-Identifier: MIT
/*
 * hog.c - the memory hog of the VM bench's swap test (tests/vm/v30-swap.sh).
 *
 *   hog MIB DATA_FILE PASSES [NOISE]
 *
 * Maps MIB MiB of anonymous memory and fills every page with a page of
 * DATA_FILE (real data, so that the swap device compresses what a real
 * workload would give it) stamped with the page's number and the pass,
 * then checks every page, PASSES times over: each pass rewrites the page
 * it checked. With MIB beyond the guest's RAM, every pass swaps out and
 * back in. Prints one line per pass with its seconds, and exits 1 at the
 * first page that does not read back as written (with its number).
 *
 * NOISE (0 to 16, default 0): that many sixteenths of each page, from
 * its end, are pseudo-random bytes of (page, pass) instead of data, so no
 * codec stores a page in less than NOISE/16 of it, whatever DATA_FILE
 * holds: tests/vm/v51-swap-beyond-ram.sh makes the hog's compressed pages
 * larger than the guest's RAM so.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE 4096

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static unsigned noise;  /* sixteenths of a page */

/* Page i of pass p: data page (i mod n) with (i, p) in its first 16 bytes,
 * and its last noise/16 from xorshift64 seeded with (i, p). */
static void fill(unsigned char *pg, const unsigned char *data, size_t ndata,
		 uint64_t i, uint64_t p)
{
	uint64_t x = (i * 0x9e3779b97f4a7c15ull) ^ (p + 1) * 0xbf58476d1ce4e5b9ull;
	size_t at;

	memcpy(pg, data + (i % ndata) * PAGE, PAGE);
	for (at = PAGE - noise * (PAGE / 16); at < PAGE; at += sizeof x) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(pg + at, &x, sizeof x);
	}
	memcpy(pg, &i, sizeof i);
	memcpy(pg + 8, &p, sizeof p);
}

int main(int argc, char **argv)
{
	unsigned char *mem, *data, *want;
	size_t npages, ndata, got;
	long passes;
	uint64_t i, p;
	FILE *f;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: hog MIB DATA_FILE PASSES [NOISE]\n");
		return 2;
	}
	noise = argc == 5 ? (unsigned)strtoul(argv[4], NULL, 10) : 0;
	if (noise > 16) {
		fprintf(stderr, "hog: NOISE is 0 to 16 sixteenths of a page\n");
		return 2;
	}
	npages = (size_t)strtoull(argv[1], NULL, 10) * (1024 * 1024 / PAGE);
	passes = strtol(argv[3], NULL, 10);
	f = fopen(argv[2], "rb");
	if (!f || !npages || passes < 1) {
		fprintf(stderr, "hog: cannot read %s, or MIB/PASSES not positive\n", argv[2]);
		return 2;
	}
	data = malloc(8u << 20);
	want = malloc(PAGE);
	if (!data || !want)
		return 2;
	got = fread(data, 1, 8u << 20, f);
	fclose(f);
	ndata = got / PAGE;
	if (!ndata) {
		fprintf(stderr, "hog: %s holds less than a page\n", argv[2]);
		return 2;
	}
	mem = mmap(NULL, npages * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("hog: mmap");
		return 2;
	}
	double t0 = now(), t = t0;
	for (i = 0; i < npages; i++)
		fill(mem + i * PAGE, data, ndata, i, 0);
	printf("hog: pass 0 (fill) %zu pages %.1f s\n", npages, now() - t);
	for (p = 1; p <= (uint64_t)passes; p++) {
		t = now();
		for (i = 0; i < npages; i++) {
			unsigned char *pg = mem + i * PAGE;

			fill(want, data, ndata, i, p - 1);
			if (memcmp(pg, want, PAGE)) {
				printf("hog: page %llu of pass %llu does not read back as written\n",
				       (unsigned long long)i, (unsigned long long)p - 1);
				return 1;
			}
			fill(pg, data, ndata, i, p);
		}
		printf("hog: pass %llu (check and rewrite) %.1f s\n",
		       (unsigned long long)p, now() - t);
	}
	t = now();
	for (i = 0; i < npages; i++) {
		fill(want, data, ndata, i, (uint64_t)passes);
		if (memcmp(mem + i * PAGE, want, PAGE)) {
			printf("hog: page %llu of the last pass does not read back as written\n",
			       (unsigned long long)i);
			return 1;
		}
	}
	printf("hog: final check %.1f s\n", now() - t);
	printf("hog: ok %zu pages, %ld passes, %.1f s\n", npages, passes, now() - t0);
	return 0;
}
