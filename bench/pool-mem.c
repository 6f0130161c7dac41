// SPDX-License-Identifier: MIT
/*
 * pool-mem.c - what the no-fault pool (uzram_set_refill(), `serve --swap`)
 * costs in memory, in-process: the same swap-like writes to a device
 * without the pool and with it, and the peak and final mem_used_total.
 *
 *	bench-pool-mem FILE [MIN_MIB MAX_MIB RESERVE_MIB]
 *
 * The device is 896 MiB of lz4, as v32's (tests/vm/v32-swap-ublk.sh). Its
 * first 768 MiB are written in order with 4 KiB pages of FILE (each page
 * stamped with its number and pass), as the sequential hog swaps out; then
 * twice more, each write followed one time in four by a discard of a
 * random page, as the kernel frees swap slots it reads back. With the
 * pool, a thread calls uzram_refill() in a loop, as serve --swap's does,
 * with a target between MIN_MIB and MAX_MIB (1 and 6: a 384 MiB guest's
 * RAM / 256 and RAM / 64) and a reserve of RESERVE_MIB (0). Prints one
 * line a run:
 *	pool off|on: peak P, end E, stored S, waits W, misses M
 * (bytes; P, E: mem_used_total; W, M: writes that waited for the refill,
 * and of those, that failed)
 * The difference between the two runs is what the pool holds: its cached
 * frames (the refill's target) and the slack of longer frames that stores
 * took when none of their length was cached.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uzram.h"

#define PAGE 4096u
#define DEVICE_MIB 896u
#define HOG_MIB 768u
#define PASSES 3

static atomic_int stop;

static void *refill_loop(void *arg)
{
	struct uzram *dev = arg;

	while (!atomic_load(&stop))
		uzram_refill(dev, 100);
	return NULL;
}

static uint64_t mem_used(struct uzram *dev, struct uzram_stats *out)
{
	struct uzram_stats st;

	uzram_stats(dev, &st, sizeof st);
	if (out)
		*out = st;
	return st.mem_used_total;
}

/* One run; the peak of mem_used_total, sampled every 1024 writes. */
static int run(const unsigned char *data, size_t dpages, int pool,
	       const unsigned mib[3])
{
	struct uzram_config cfg;
	struct uzram *dev;
	pthread_t t;
	uint64_t peak = 0, end, pages = (uint64_t)HOG_MIB << 20 >> 12;
	struct uzram_stats st;
	unsigned char page[PAGE];
	unsigned seed = 1;

	uzram_config_init(&cfg);
	cfg.size = (uint64_t)DEVICE_MIB << 20;
	cfg.algorithm = "lz4";
	if (uzram_open(&cfg, &dev) < 0) {
		fprintf(stderr, "bench-pool-mem: uzram_open: %s\n", uzram_last_error());
		return -1;
	}
	if (pool) {
		if ((mib[2] && uzram_reserve(dev, (uint64_t)mib[2] << 20) < 0) ||
		    uzram_set_refill(dev, (uint64_t)mib[0] << 20,
				     (uint64_t)mib[1] << 20, 250) < 0) {
			fprintf(stderr, "bench-pool-mem: %s\n", uzram_last_error());
			uzram_close(dev);
			return -1;
		}
		atomic_store(&stop, 0);
		pthread_create(&t, NULL, refill_loop, dev);
	}
	for (unsigned pass = 0; pass < PASSES; pass++)
		for (uint64_t p = 0; p < pages; p++) {
			memcpy(page, data + (p * 7 + pass * 13) % dpages * PAGE, PAGE);
			memcpy(page, &p, sizeof p);
			page[sizeof p] = (unsigned char)pass;
			if (uzram_write(dev, page, PAGE, p * PAGE) < 0)
				fprintf(stderr, "bench-pool-mem: write: %s\n",
					uzram_last_error());
			if (pass && rand_r(&seed) % 4 == 0)
				uzram_discard(dev, PAGE, (uint64_t)rand_r(&seed) % pages * PAGE);
			if (!(p & 1023)) {
				uint64_t m = mem_used(dev, NULL);

				peak = m > peak ? m : peak;
			}
		}
	end = mem_used(dev, &st);
	if (pool) {
		atomic_store(&stop, 1);
		pthread_join(t, NULL);
	}
	printf("pool %s: peak %llu, end %llu, stored %llu, waits %llu, misses %llu\n",
	       pool ? "on" : "off", (unsigned long long)peak, (unsigned long long)end,
	       (unsigned long long)st.orig_data_size,
	       (unsigned long long)st.refill_waits, (unsigned long long)st.refill_misses);
	uzram_close(dev);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned mib[3] = { 1, 6, 0 };
	struct stat st;
	unsigned char *data;
	int fd;

	if (argc != 2 && argc != 5) {
		fprintf(stderr, "usage: bench-pool-mem FILE [MIN_MIB MAX_MIB RESERVE_MIB]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++)
		mib[i - 2] = (unsigned)strtoul(argv[i], NULL, 10);
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < PAGE) {
		perror(argv[1]);
		return 1;
	}
	data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (data == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (run(data, (size_t)st.st_size / PAGE, 0, mib) < 0 ||
	    run(data, (size_t)st.st_size / PAGE, 1, mib) < 0)
		return 1;
	return 0;
}
