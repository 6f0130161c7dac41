// SPDX-License-Identifier: MIT
/*
 * swap_tune.c - the kernel setting `uzram swapon` makes for its devices,
 * and `uzram swapoff` gives back: vm.page-cluster 0 (no swap readahead).
 *
 * Why (issue 30; doc/block-device.md, "What the kernel tells a swap device
 * of freed slots"): a ublk or NBD device is not synchronous, so each
 * swap-in also reads up to 2^page-cluster neighbours into the swap cache
 * (zram skips that path). On random access most of them are never used,
 * and each keeps its slot allocated until reclaim drops it: scattered over
 * the swap area, they keep clusters from becoming wholly free, and only
 * wholly free clusters are discarded. Measured on the random workload
 * (tests/vm/v33, 6.12): after the workload exited the server still held
 * 105,020 pages with the default 3, 23,370 with 0.
 *
 *   swapon   swap_tune_apply(): the first device of SWAP_DIR saves the
 *            value it finds in SWAP_DIR/page-cluster, then writes 0
 *   swapoff  swap_tune_restore(): once no DEV.pid is left in SWAP_DIR,
 *            writes the saved value back and removes the file
 *
 * The setting is the whole kernel's (it is not per device; a device's
 * read_ahead_kb does not reach swap-ins); a value changed by hand while
 * uzram's swap is on is overwritten by swapoff's restore.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swap.h"

#define PAGE_CLUSTER "/proc/sys/vm/page-cluster"
#define SAVED SWAP_DIR "/page-cluster"

/* The number in path, or -errno. */
static long read_number(const char *path)
{
	FILE *f = fopen(path, "r");
	long v;
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%ld", &v) == 1 && v >= 0;
	fclose(f);
	return ok ? v : -EINVAL;
}

/* v into path; 0 or -errno. */
static int write_number(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	int r = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%ld\n", v) < 0)
		r = -EIO;
	if (fclose(f) != 0 && !r)
		r = -errno;
	return r;
}

/* Whether SWAP_DIR holds a DEV.pid: a device of uzram swapon is up. */
static bool devices_left(void)
{
	DIR *d = opendir(SWAP_DIR);
	struct dirent *e;
	bool found = false;

	while (d && !found && (e = readdir(d))) {
		size_t len = strlen(e->d_name);

		found = len > 4 && !strcmp(e->d_name + len - 4, ".pid");
	}
	if (d)
		closedir(d);
	return found;
}

int swap_tune_apply(long *was)
{
	long old = read_number(SAVED);
	int r;

	if (old < 0) {
		old = read_number(PAGE_CLUSTER);
		if (old < 0)
			return (int)old;
		r = write_number(SAVED, old);
		if (r < 0)
			return r;
	}
	*was = old;
	return write_number(PAGE_CLUSTER, 0);
}

void swap_tune_restore(const char *who)
{
	long old;
	int r;

	if (devices_left())
		return;
	old = read_number(SAVED);
	if (old == -ENOENT)
		return;
	r = old < 0 ? (int)old : write_number(PAGE_CLUSTER, old);
	if (r < 0)
		fprintf(stderr, "%s: cannot restore vm.page-cluster from %s: %s\n",
			who, SAVED, strerror(-r));
	unlink(SAVED);
}
