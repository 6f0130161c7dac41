// SPDX-License-Identifier: MIT
/*
 * rhog.c - the random-rewrite hog of the VM bench's swap tests
 * (tests/vm/guest-swap.sh with VMT_SWAP_WORKLOAD=random; issue 30).
 *
 *   rhog MIB DATA_FILE PROCS TOUCHES
 *
 * PROCS processes (fork) each map MIB / PROCS MiB of anonymous memory and
 *
 *   1. fill it: page i is of one of three kinds, by i mod 16,
 *        0       zero (zram and uzram keep it as a same-filled page)
 *        1       random bytes (incompressible, a huge page for both)
 *        2..15   a page of DATA_FILE (a real memory image), stamped
 *      each seeded by the page's number and its generation (gen[i]);
 *   2. TOUCHES times the number of its pages: pick a page at random,
 *      check it, and every other time rewrite it with the next generation
 *      (a read fault then a write fault, as a program reusing its heap);
 *   3. check every page.
 *
 * With MIB beyond the guest's RAM every phase swaps out and in, in no
 * order: the swap slots freed by rewrites are scattered over the whole
 * swap area, which the sequential hog (hog.c) never does. Each process
 * prints one line per phase with its seconds; the parent exits 0 when
 * every child read back every page right, 1 when one found a wrong page
 * (it prints which), 2 on bad arguments or a child that died otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

struct hog {
	unsigned char *mem;
	uint8_t *gen;                /* each page's generation */
	size_t npages;
	const unsigned char *data;   /* the data file's first ndata pages */
	size_t ndata;
	unsigned proc;
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* The bytes of page i at generation g of process p. */
static void content(const struct hog *h, unsigned char *pg, uint64_t i, uint64_t g)
{
	uint64_t seed = (i + 1) * 0x9e3779b97f4a7c15ull ^ (g << 48) ^
			((uint64_t)h->proc << 40);
	uint64_t tag[2] = { i | (uint64_t)h->proc << 56, g };

	switch (i % 16) {
	case 0:
		memset(pg, 0, PAGE);
		return;
	case 1:
		for (size_t k = 0; k < PAGE; k += 8) {
			uint64_t v = xorshift(&seed);

			memcpy(pg + k, &v, 8);
		}
		return;
	default:
		memcpy(pg, h->data + ((i * 7 + g) % h->ndata) * PAGE, PAGE);
		memcpy(pg, tag, sizeof tag);
	}
}

/* 0 if page i holds its current generation, else 1 (and says so). */
static int check(const struct hog *h, unsigned char *want, uint64_t i, const char *phase)
{
	content(h, want, i, h->gen[i]);
	if (!memcmp(h->mem + i * PAGE, want, PAGE))
		return 0;
	printf("rhog %u: page %llu (generation %u) does not read back as written, %s\n",
	       h->proc, (unsigned long long)i, h->gen[i], phase);
	fflush(stdout);
	return 1;
}

/* One process's whole run; its exit status. */
static int run(struct hog *h, unsigned long touches)
{
	unsigned char want[PAGE];
	uint64_t seed = 0x2545f4914f6cdd1dull * (h->proc + 1), i, n;
	double t0 = now(), t = t0;

	h->mem = mmap(NULL, h->npages * PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	h->gen = calloc(h->npages, 1);
	if (h->mem == MAP_FAILED || !h->gen) {
		perror("rhog: mmap");
		return 2;
	}
	for (i = 0; i < h->npages; i++)
		content(h, h->mem + i * PAGE, i, 0);
	printf("rhog %u: fill %zu pages %.1f s\n", h->proc, h->npages, now() - t);
	fflush(stdout);
	t = now();
	for (n = 0; n < (uint64_t)touches * h->npages; n++) {
		i = xorshift(&seed) % h->npages;
		if (check(h, want, i, "random phase"))
			return 1;
		if (n & 1) {
			h->gen[i]++;
			content(h, h->mem + i * PAGE, i, h->gen[i]);
		}
	}
	printf("rhog %u: %llu random touches (half rewrites) %.1f s\n", h->proc,
	       (unsigned long long)n, now() - t);
	fflush(stdout);
	t = now();
	for (i = 0; i < h->npages; i++)
		if (check(h, want, i, "final check"))
			return 1;
	printf("rhog %u: final check %.1f s, ok, %.1f s in all\n", h->proc,
	       now() - t, now() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	struct hog h = { 0 };
	unsigned long procs, touches;
	unsigned char *data;
	int rc = 0, st;
	FILE *f;

	if (argc != 5) {
		fprintf(stderr, "usage: rhog MIB DATA_FILE PROCS TOUCHES\n");
		return 2;
	}
	procs = strtoul(argv[3], NULL, 10);
	touches = strtoul(argv[4], NULL, 10);
	if (!procs || procs > 64) {
		fprintf(stderr, "rhog: PROCS must be 1 to 64\n");
		return 2;
	}
	h.npages = (size_t)strtoull(argv[1], NULL, 10) * (1024 * 1024 / PAGE) / procs;
	f = fopen(argv[2], "rb");
	data = malloc(8u << 20);
	if (!f || !data || !h.npages) {
		fprintf(stderr, "rhog: cannot read %s, or MIB is 0\n", argv[2]);
		return 2;
	}
	h.ndata = fread(data, 1, 8u << 20, f) / PAGE;
	fclose(f);
	h.data = data;
	if (!h.ndata) {
		fprintf(stderr, "rhog: %s holds less than a page\n", argv[2]);
		return 2;
	}
	for (unsigned p = 0; p < procs; p++) {
		pid_t pid = fork();

		if (pid == 0) {
			h.proc = p;
			exit(run(&h, touches));
		}
		if (pid < 0) {
			perror("rhog: fork");
			rc = 2;
		}
	}
	while (wait(&st) > 0) {
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 2;

		if (!WIFEXITED(st))
			printf("rhog: a process died of signal %d\n", WTERMSIG(st));
		if (code > rc)
			rc = code;
	}
	return rc;
}
