/*
 * serve_swap.c - `uzram serve --swap`: a server that the kernel may swap
 * to, even when it swaps to reclaim the very memory the server needs.
 *
 * The deadlock: the kernel, short of memory, writes pages out to our
 * device; if serving that write needs a page of ours that was swapped out,
 * a page of memory the kernel must first reclaim, or an allocation that
 * reclaims by writing to our device, nothing moves. What --swap does, in
 * this order:
 *
 *   before the device exists  prctl(PR_SET_IO_FLUSHER): this thread and
 *                             every thread made after it allocate as
 *                             the kernel's own I/O path does (no I/O from
 *                             their reclaim, no dirty throttling of the
 *                             process by others' writeback);
 *                             oom_score_adj -1000: the OOM killer picks
 *                             another process; mlockall(MCL_CURRENT): the
 *                             program, its libraries, heap and stacks so
 *                             far are resident and stay so
 *   after the device exists   uzram_reserve(): the allocator's frames up
 *                             to --mem-limit (else SWAP_RESERVE) resident
 *                             now; mlockall(MCL_CURRENT | MCL_FUTURE |
 *                             MCL_ONFAULT): every page touched from now on
 *                             stays (ONFAULT, as the device's address
 *                             space reservation is far larger than RAM)
 *
 * All of it needs root (CAP_SYS_RESOURCE for the first two, and for
 * mlockall beyond RLIMIT_MEMLOCK); --swap refuses to start otherwise,
 * since a swap server without them can hang the machine. What this does
 * not cover is in doc/block-device.md.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "uzram.h"
#include "cli.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57        /* Linux 5.6 */
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4               /* Linux 4.4 */
#endif

int serve_swap_begin(void)
{
	FILE *f;

	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0) {
		fprintf(stderr, "uzram serve --swap: prctl(PR_SET_IO_FLUSHER): %s "
			"(needs root, CAP_SYS_RESOURCE, and Linux 5.6 or later)\n",
			strerror(errno));
		return -1;
	}
	f = fopen("/proc/self/oom_score_adj", "w");
	if (!f || fputs("-1000\n", f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "uzram serve --swap: cannot write -1000 to "
			"/proc/self/oom_score_adj: %s\n", strerror(errno));
		return -1;
	}
	if (mlockall(MCL_CURRENT) < 0) {
		fprintf(stderr, "uzram serve --swap: mlockall: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

int serve_swap_ready(struct uzram *dev, uint64_t mem_limit)
{
	uint64_t reserve = mem_limit ? mem_limit : SWAP_RESERVE;
	int r = uzram_reserve(dev, reserve);

	if (r < 0 && r != -ENOSPC) {
		fprintf(stderr, "uzram serve --swap: %s\n", uzram_last_error());
		return -1;
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0) {
		fprintf(stderr, "uzram serve --swap: mlockall(MCL_FUTURE | MCL_ONFAULT): %s\n",
			strerror(errno));
		return -1;
	}
	fprintf(stderr, "uzram serve: --swap: memory locked, %llu MiB reserved%s\n",
		(unsigned long long)(reserve >> 20),
		r == -ENOSPC ? " (less: the memory limit came first)" : "");
	return 0;
}
