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
 *                             space reservation is far larger than RAM);
 *                             SCHED_RR (priority 1) for every thread, and
 *                             the threads made later inherit it
 *
 * Why real-time: the server's memory grows with what is swapped to it, so
 * however much is reserved, it takes pages while the kernel is short of
 * them. The guest's stall (seen with tests/vm/swapwatch.c, issue 22) was exactly
 * that: free memory at the min watermark, kswapd and the hog waiting in
 * mempool_alloc() for a bio that only a reply of ours gives back, and our
 * threads in page faults looping in __alloc_pages_slowpath(), as a NOIO
 * allocation may not reclaim swap-backed pages and never calls the OOM
 * killer. The page allocator lets a real-time task go a quarter of the
 * min watermark lower than anyone else (ALLOC_HARDER, ALLOC_MIN_RESERVE
 * since Linux 6.3); only the kernel's own atomic and PF_MEMALLOC
 * allocations share that. So our faults are served from pages the hog
 * can never take, and each write we complete lets reclaim free more than
 * it cost us. vm.min_free_kbytes sizes that margin (doc/block-device.md).
 *
 * All of it needs root (CAP_SYS_RESOURCE for the first two, and for
 * mlockall beyond RLIMIT_MEMLOCK); --swap refuses to start otherwise,
 * since a swap server without them can hang the machine. What this does
 * not cover is in doc/block-device.md.
 */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
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

/* SCHED_RR for every thread of the process; 0 or -1 with a message. */
static int realtime_all(void)
{
	struct sched_param sp = { .sched_priority = 1 };
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int r = 0;

	if (!d) {
		fprintf(stderr, "uzram serve --swap: /proc/self/task: %s\n", strerror(errno));
		return -1;
	}
	while (!r && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (sched_setscheduler(atoi(e->d_name), SCHED_RR, &sp) < 0) {
			fprintf(stderr, "uzram serve --swap: sched_setscheduler(thread %s, "
				"SCHED_RR): %s (needs root or CAP_SYS_NICE)\n",
				e->d_name, strerror(errno));
			r = -1;
		}
	}
	closedir(d);
	return r;
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
	if (realtime_all() < 0)
		return -1;
	fprintf(stderr, "uzram serve: --swap: memory locked, %llu MiB reserved%s, SCHED_RR\n",
		(unsigned long long)(reserve >> 20),
		r == -ENOSPC ? " (less: the memory limit came first)" : "");
	return 0;
}
