// SPDX-License-Identifier: MIT
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
 *                             another process; malloc set never to make
 *                             or give back memory by a system call on
 *                             the data path (swap_malloc()); mlockall(MCL_CURRENT |
 *                             MCL_ONFAULT): what the program has touched
 *                             so far stays resident
 *   after the device exists   uzram_reserve(): the allocator's frames up
 *                             to --mem-limit less the slot table's room
 *                             (swap_reserve(); else RAM / 64 within
 *                             4..16 MiB) resident now; the data path run once on a scratch
 *                             device of the same algorithm and cluster
 *                             size (warm_up()), so that its code and data
 *                             are touched, and thereby locked;
 *                             uzram_set_swap_reads(): a cluster read
 *                             (swapped in) becomes the oldest, the first
 *                             the tier writes back and the re-encoder
 *                             packs, as the kernel mostly frees its slot
 *                             without telling us (src/core/clock.c), and
 *                             no write is compared with what its slot
 *                             held (src/core/store.c);
 *                             mlockall(MCL_CURRENT | MCL_FUTURE |
 *                             MCL_ONFAULT): every page touched from now on
 *                             stays; SCHED_RR (priority 1) for every
 *                             thread, and the threads made later inherit it;
 *                             the compactor and the refill threads (below)
 *   at the end                serve_swap_end() stops both
 *
 * The compactor. The kernel compacts zram's allocator from its shrinker,
 * that is whenever it reclaims memory, and a swap device is written to
 * exactly then. Ours compacts when the allocator holds more than it stores
 * by over 1/32 (and 1 MiB): checked every COMPACT_MS, so a rewrite-heavy
 * swap load does not leave a tenth of the pool in half-empty zspages
 * while the guest runs out of memory (the swap test's hog, issue 22).
 *
 * The refill thread. Past the reserve, a queue thread that made new
 * frames resident itself (MADV_POPULATE_WRITE on the store) allocated
 * under GFP_NOIO exactly when the kernel was short of memory and swapping
 * to us: v50 on 7.3 deadlocked so with a reserve of RAM / 64 (issue 30).
 * Now the device is in no-fault mode (uzram_set_refill()): stores take
 * resident frames from the allocator's cache only, and this thread, not a
 * queue thread, keeps that cache filled, to a target between RAM / 256
 * (1..4 MiB) and RAM / 64 (4..16 MiB) that follows the rate of writes. A
 * store that finds none waits REFILL_WAIT_MS for it and then fails
 * (ENOSPC: the kernel keeps the page dirty and writes it again later).
 *
 * Why on fault, not all of it: MCL_CURRENT alone makes every page of every
 * mapping resident and locked, the libraries' pages that the server never
 * runs included. The program maps about 45 MB of libraries (libnbd, for a
 * backing store, brings libxml2 and ICU's 30 MB of data), of which the
 * data path uses a few hundred KiB; in the swap test's 384 MiB guest those
 * 45 MB were the difference between the hog completing and the OOM killer
 * (issue 22). What stays untouched here, error paths and the backing
 * store's, faults in from its file when first run, as any program's code
 * does: a read of the file, never a write to our own device, and made
 * from the margin below (SCHED_RR).
 *
 * Program files on tmpfs. The above holds where the program and its
 * libraries live on a disk: a page not yet touched is read from the file.
 * On tmpfs (an initramfs, a live system, the VM bench's guests) the
 * file's pages are shmem, swapped out like anonymous memory, possibly to
 * our own device; a queue thread that then runs code for the first time
 * faults on a page whose swap-in is a request to its own queue, and waits
 * for ever in D (shmem_swapin_folio; the v42 and v50 hangs, found with
 * tests/vm/hungwatch.c). So every mapping of a file on tmpfs is locked
 * whole (lock_shmem_files()), but for large read-only data (ICU's 30 MB,
 * which the data path never reads): its code, its read-only data and
 * symbol tables (lazy binding reads other libraries' too), its .data.
 * That is about 15 MB of pages that are in RAM, or swap, already.
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
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "uzram.h"
#include "serve.h"
#include "../../swapfree/swapfree.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57        /* Linux 5.6 */
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4               /* Linux 4.4 */
#endif
#define TMPFS_MAGIC_ 0x01021994     /* linux/magic.h's TMPFS_MAGIC */
/* a read-only data mapping past this is left out of lock_shmem_files() */
#define SHMEM_DATA_MAX (4u << 20)

/*
 * malloc under --swap. A malloc that grows the heap (brk), makes a thread
 * its own arena (mmap, then mprotect as it grows), maps a large block or
 * trims what was freed, takes the process's mmap lock for writing: on 6.1,
 * where a page fault holds that lock, a queue thread's malloc then waits
 * for the refill thread's fault in reclaim, which waits for that queue (the
 * v42 hang had a malloc's mprotect in it). So: one arena for all threads,
 * never trimmed, grown in steps of MALLOC_PAD and grown once now, before
 * mlockall() locks it, and every page of it up to the break made resident
 * (the block comes from the heap only under a raised mmap threshold: until
 * 2026-12-04 it was mapped, touched and unmapped, and the heap stayed as
 * it was). The data path itself mallocs nothing (zspage descriptors come
 * from the no-fault pool's stock, src/zpool/zpool_reserve.c); the threads'
 * codec contexts are made before they serve (uzram_thread_prepare()).
 * Measured in v32 (6.12): the server's VmHWM less the store's peak was
 * 25.2-25.4 MB with and without.
 */
#define MALLOC_PAD (1u << 20)
#define MMAP_THRESHOLD_DEFAULT (128u << 10)

static void swap_malloc(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p, *start, *end;

	mallopt(M_ARENA_MAX, 1);
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
	mallopt(M_TOP_PAD, MALLOC_PAD);
	mallopt(M_MMAP_THRESHOLD, 2 * MALLOC_PAD);
	p = malloc(MALLOC_PAD);
	mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_DEFAULT);
	if (!p)
		return;
	start = (char *)((uintptr_t)p & ~(uintptr_t)(page - 1));
	free(p);
	/* the heap from the block to the break, the top pad with it */
	end = sbrk(0);
	if (end != (void *)-1 && end > start)
		(void)madvise(start, (size_t)(end - start), MADV_POPULATE_WRITE);
}

int serve_swap_begin(void)
{
	FILE *f;

	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0) {
		report_error("serve", "--swap: prctl(PR_SET_IO_FLUSHER): %s "
			"(needs root, CAP_SYS_RESOURCE, and Linux 5.6 or later)",
			strerror(errno));
		return -1;
	}
	f = fopen("/proc/self/oom_score_adj", "w");
	if (!f || fputs("-1000\n", f) < 0 || fclose(f) != 0) {
		report_error("serve", "--swap: cannot write -1000 to "
			"/proc/self/oom_score_adj: %s", strerror(errno));
		return -1;
	}
	swap_malloc();
	if (mlockall(MCL_CURRENT | MCL_ONFAULT) < 0) {
		report_error("serve", "--swap: mlockall: %s", strerror(errno));
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
		report_error("serve", "--swap: /proc/self/task: %s", strerror(errno));
		return -1;
	}
	while (!r && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (sched_setscheduler(atoi(e->d_name), SCHED_RR, &sp) < 0) {
			report_error("serve", "--swap: sched_setscheduler(thread %s, "
				"SCHED_RR): %s (needs root or CAP_SYS_NICE)",
				e->d_name, strerror(errno));
			r = -1;
		}
	}
	closedir(d);
	return r;
}

/*
 * Run the data path once, as swap will: a write of compressible bytes, a
 * read, a rewrite with other bytes, a discard, on a scratch device made
 * as dev is (its algorithm and cluster size), then a read of dev's first
 * cluster. 0, or -1 after a message.
 */
static int warm_up(struct uzram *dev)
{
	struct uzram_config cfg;
	struct uzram *scratch;
	uint32_t cluster = uzram_cluster_size(dev);
	unsigned char *buf = malloc(cluster);
	int r;

	if (!buf) {
		report_error("serve", "--swap: out of memory");
		return -1;
	}
	uzram_config_init(&cfg);
	cfg.size = 4ull * cluster;
	cfg.algorithm = uzram_algorithm(dev, 0);
	cfg.cluster_size = cluster;
	r = uzram_open(&cfg, &scratch);
	for (uint32_t round = 0; !r && round < 2; round++) {
		for (uint32_t i = 0; i < cluster; i++)
			buf[i] = (unsigned char)("swap page "[i % 10] + (i >> 9) + round);
		r = uzram_write(scratch, buf, cluster, cluster);
		if (!r)
			r = uzram_read(scratch, buf, cluster, cluster);
	}
	if (!r)
		r = uzram_discard(scratch, cluster, cluster);
	uzram_close(scratch);
	if (!r)
		r = uzram_read(dev, buf, cluster, 0);
	free(buf);
	if (r < 0) {
		report_error("serve", "--swap: the warm-up of the data path: %s",
			uzram_strerror(r));
		return -1;
	}
	return 0;
}

#define COMPACT_MS 500

static struct {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool running, stop;
	struct uzram *dev;
} compactor = { .lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void *compactor_main(void *arg)
{
	struct uzram_stats st;
	struct timespec t;

	(void)arg;
	pthread_mutex_lock(&compactor.lock);
	while (!compactor.stop) {
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += COMPACT_MS * 1000000L;
		t.tv_sec += t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&compactor.cv, &compactor.lock, &t);
		if (compactor.stop)
			break;
		pthread_mutex_unlock(&compactor.lock);
		if (!uzram_stats(compactor.dev, &st, sizeof st) &&
		    st.mem_used_total > st.compr_data_size + (1u << 20) &&
		    st.mem_used_total - st.compr_data_size > st.mem_used_total / 32)
			uzram_compact(compactor.dev);
		pthread_mutex_lock(&compactor.lock);
	}
	pthread_mutex_unlock(&compactor.lock);
	return NULL;
}

/*
 * The refill thread: keeps the no-fault pool filled (uzram_set_refill()),
 * so that no queue thread ever faults memory in for the store. It is the
 * one thread of the server that faults for the store, and it keeps
 * PR_SET_IO_FLUSHER and SCHED_RR as the others: without the first (tried, v42
 * on 6.12) its direct reclaim waited in throttle_direct_reclaim() for
 * kswapd, which waited on our device, whose writes waited for the refill;
 * a NOIO allocation is throttled a second at most, and a real-time one
 * may go below the min watermark.
 */
#define REFILL_POLL_MS 200

static struct {
	pthread_t thread;
	_Atomic bool stop;
	bool running;
	struct uzram *dev;
} refiller;

static void *refiller_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&refiller.stop))
		if (uzram_refill(refiller.dev, REFILL_POLL_MS) < 0)
			/* the limit: nothing to make now, try again later */
			usleep(REFILL_POLL_MS * 1000);
	return NULL;
}

/*
 * A thread that takes no signal (the server's main thread takes them),
 * named uzram-WHAT.
 */
static int thread_nosig(pthread_t *t, void *(*fn)(void *), const char *what)
{
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(t, NULL, fn, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!r) { /* named, for the kernel's task dumps and top(1) */
		char name[16];

		snprintf(name, sizeof name, "uzram-%s", what);
		(void)pthread_setname_np(*t, name);
	}
	if (r)
		report_error("serve", "--swap: the %s thread: %s", what, strerror(r));
	return r ? -1 : 0;
}

void serve_swap_end(void)
{
	if (refiller.running) {
		atomic_store(&refiller.stop, true);
		pthread_join(refiller.thread, NULL);
		refiller.running = false;
		/* the writes that follow, if any, fault in as without --swap */
		uzram_set_refill(refiller.dev, 0, 0, 0);
	}
	if (!compactor.running)
		return;
	pthread_mutex_lock(&compactor.lock);
	compactor.stop = true;
	pthread_cond_signal(&compactor.cv);
	pthread_mutex_unlock(&compactor.lock);
	pthread_join(compactor.thread, NULL);
	compactor.running = false;
}

uint64_t serve_ram_share(unsigned div, uint64_t lo, uint64_t hi)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t b = pages > 0 && psz > 0 ? ram_share(pages, psz, div, hi) : 0;

	return b < lo ? lo : b;
}

/* /proc/meminfo's MemAvailable in bytes, or 0 if it says nothing. */
static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kib = 0;
	char line[128];

	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kib << 10;
}

/*
 * What to reserve of the allocator under --mem-limit: the limit less the
 * room the slot table (8 bytes a cluster) and a dedup index (up to about
 * 16) take as the device fills, which the same limit covers; a reserve of
 * the whole limit left them none, and the first write failed with ENOSPC
 * (issue 30: v31's device with --mem-limit). With a backing store, no
 * more than the low watermark (less 1/64 of the limit): the reserve
 * counts as memory used, and above the watermarks the policy thread would
 * write back all there is, trying to come down to a level it never can.
 * Half the limit at least, or the low watermark's share. Without a limit,
 * RAM / 64 within 4..16 MiB: RAM / 64 (3 MiB in v50's 256 MiB guest)
 * deadlocked v50 on 7.3 in make test (2026-12-04) while queue threads grew
 * the store past the reserve by faulting under GFP_NOIO; now none does
 * (the refill thread above), and the reserve is only the pool's start.
 * And never more than half of what the kernel says is available: swap is
 * often turned on when memory is short already, and a reserve beyond
 * that stalled in the NOIO allocator with no swap to reclaim to (v51 on
 * 7.3 after its zram run had the OOM killer out: 50 MiB asked, 48 MiB
 * free under a boosted min watermark, "page allocation stall for 60
 * secs" in MADV_POPULATE_WRITE, and swapon gave up). The rest comes
 * through the refill thread as the store grows, as without a limit.
 */
static uint64_t swap_reserve(struct uzram *dev, const struct uzram_config *cfg)
{
	uint64_t clusters = uzram_size(dev) / uzram_cluster_size(dev) + 1;
	uint64_t limit = cfg->mem_limit, room = clusters * 24 + (1u << 20);
	uint64_t reserve = room < limit / 2 ? limit - room : limit / 2;
	uint32_t high = cfg->high_watermark ? cfg->high_watermark : 90;
	uint32_t low = cfg->low_watermark ? cfg->low_watermark : high - 10;
	uint64_t avail = mem_available();

	if (!limit)
		reserve = serve_ram_share(SWAP_RESERVE_DIV, SWAP_RESERVE_LO,
					  SWAP_RESERVE_HI);
	else if (cfg->backing && reserve > limit / 100 * low - limit / 64)
		reserve = limit / 100 * low - limit / 64;
	return avail && reserve > avail / 2 ? avail / 2 : reserve;
}

/*
 * Lock whole every mapping of a file on tmpfs but read-only data past
 * SHMEM_DATA_MAX (see the top of this file); the bytes locked. A mapping
 * that fails to lock is left as it is: this narrows the hang, it is not
 * what the server needs to start.
 */
static uint64_t lock_shmem_files(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4352], perms[8], path[4096];
	unsigned long lo, hi;
	uint64_t locked = 0;
	struct statfs sf;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		path[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095s", &lo, &hi, perms, path) < 3 ||
		    path[0] != '/' || statfs(path, &sf) < 0 || sf.f_type != TMPFS_MAGIC_)
			continue;
		if (perms[1] != 'w' && perms[2] != 'x' && hi - lo > SHMEM_DATA_MAX)
			continue;
		if (mlock((void *)lo, hi - lo) == 0)
			locked += hi - lo;
	}
	fclose(f);
	return locked;
}

int serve_swap_ready(struct uzram *dev, const struct uzram_config *cfg)
{
	uint64_t shmem, pool_min, pool_max;
	uint64_t reserve = swap_reserve(dev, cfg);
	struct uzram_keep_info keep = { 0 };
	int r;

	/*
	 * An adopted store (serve --keeper, doc/keep.md) comes while the
	 * device waits for us and memory may be short: no more than it has.
	 */
	(void)uzram_keep_info(dev, &keep);
	if (keep.adopted)
		reserve = 0;
	r = reserve ? uzram_reserve(dev, reserve) : 0;

	if (r < 0 && r != -ENOSPC) {
		report_error("serve", "--swap: %s", cli_lib_error());
		return -1;
	}
	/* a read is a swap-in, mostly of a page the kernel then drops */
	(void)uzram_set_swap_reads(dev, 1);
	if (warm_up(dev) < 0)
		return -1;
	shmem = lock_shmem_files();
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0) {
		report_error("serve", "--swap: mlockall(MCL_FUTURE | MCL_ONFAULT): %s",
			strerror(errno));
		return -1;
	}
	compactor.dev = dev;
	if (thread_nosig(&compactor.thread, compactor_main, "compactor") < 0)
		return -1;
	compactor.running = true;
	refiller.dev = dev;
	pool_min = serve_ram_share(REFILL_MIN_DIV, REFILL_MIN_LO, REFILL_MIN_HI);
	pool_max = serve_ram_share(REFILL_MAX_DIV, REFILL_MAX_LO, REFILL_MAX_HI);
	if (uzram_set_refill(dev, pool_min, pool_max, REFILL_WAIT_MS) < 0) {
		report_error("serve", "--swap: %s", cli_lib_error());
		return -1;
	}
	if (thread_nosig(&refiller.thread, refiller_main, "refill") < 0)
		return -1;
	refiller.running = true;
	if (realtime_all() < 0)
		return -1;
	report_error("serve", "--swap: memory locked (%llu MiB of files on tmpfs), "
		     "%llu MiB reserved%s, a no-fault pool of %llu-%llu KiB, SCHED_RR",
		     (unsigned long long)(shmem >> 20),
		     (unsigned long long)((keep.adopted ? keep.reserve : reserve) >> 20),
		     keep.adopted ? " (the dead server's, kept)" :
		     r == -ENOSPC ? " (less: the memory limit came first)" : "",
		     (unsigned long long)(pool_min >> 10),
		     (unsigned long long)(pool_max >> 10));
	return 0;
}

struct swapfree *serve_swap_freed_load(void)
{
	struct swapfree *sf;

	return swapfree_load("serve", &sf) < 0 ? NULL : sf;
}

struct swapfree *serve_swap_freed_adopt(const char *fds)
{
	struct swapfree *sf;

	return swapfree_adopt(fds, "serve", &sf) < 0 ? NULL : sf;
}

void serve_swap_freed(struct swapfree **sf, struct uzram *dev, const char *path)
{
	if (!*sf)
		return;
	if (swapfree_start(*sf, dev, path, "serve") < 0) {
		swapfree_stop(*sf);
		*sf = NULL;
		return;
	}
	report_error("serve", "--swap: the swap slots the kernel frees on %s "
		     "are dropped as it frees them", path);
}

void serve_swap_freed_end(struct swapfree *sf)
{
	struct swapfree_stats st;

	if (swapfree_stats(sf, &st) == 0)
		report_error("serve", "--swap: %llu freed swap slots dropped, "
			     "%llu not heard (the ring was full), %llu past "
			     "the device's end (ignored)",
			     (unsigned long long)st.slots,
			     (unsigned long long)st.lost,
			     (unsigned long long)st.outside);
	swapfree_stop(sf);
}
