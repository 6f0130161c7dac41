// SPDX-License-Identifier: MIT
/*
 * tsample.c - where the guest's threads spend a swap run: a sampling
 * profiler of states and wait channels, for the VM bench (issue 30 item 4,
 * the NBD swap path).
 *
 *   tsample MS FILE...      until SIGTERM or SIGINT
 *
 * Every MS milliseconds, reads every thread's state and wchan
 * (/proc/PID/task/TID/stat, wchan) and counts each "comm state wchan",
 * idle sleepers (S with no swap-related comm) left out; and the first line
 * of each FILE (a block device's inflight, say), counted per value. At
 * the end, prints to stdout the counts, most first, then per thread the
 * CPU time, the time spent runnable but waiting for a CPU, and the
 * context switches over the run (/proc/PID/task/TID/schedstat and status,
 * deltas against a snapshot at the start), for the threads that ran at
 * least 20 ms. Runs SCHED_FIFO, locked, so a guest short of memory still
 * gets its samples (as swapwatch.c).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAXKEYS 4096
#define MAXTHR 2048

struct key { char s[96]; long n; };
struct thr { int tid; char comm[32]; long long run, wait; long vcs, ncs; };

static struct key keys[MAXKEYS];
static int nkeys;
static struct thr t0[MAXTHR], t1[MAXTHR];
static int n0, n1;
static volatile sig_atomic_t stop;

static void on_sig(int s) { (void)s; stop = 1; }

static int slurp(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY), r;

	if (fd < 0)
		return -1;
	r = (int)read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

static void count(const char *s0)
{
	char s[96];

	snprintf(s, sizeof s, "%.95s", s0);
	for (int i = 0; i < nkeys; i++)
		if (!strcmp(keys[i].s, s)) {
			keys[i].n++;
			return;
		}
	if (nkeys < MAXKEYS) {
		snprintf(keys[nkeys].s, sizeof keys[nkeys].s, "%s", s);
		keys[nkeys++].n = 1;
	}
}

/* comm and state of a thread from its stat line; 0 or -1 */
static int comm_state(const char *dir, char *comm, size_t n, char *st)
{
	char buf[1024], *l, *r;

	if (slurp(dir, buf, sizeof buf) < 0 || !(l = strchr(buf, '(')) ||
	    !(r = strrchr(buf, ')')))
		return -1;
	*r = 0;
	snprintf(comm, n, "%s", l + 1);
	*st = r[2];
	return 0;
}

static void sample_thread(const char *pid, const char *tid)
{
	char path[128], comm[32], wchan[64], st, k[160];

	snprintf(path, sizeof path, "/proc/%s/task/%s/stat", pid, tid);
	if (comm_state(path, comm, sizeof comm, &st) < 0)
		return;
	snprintf(path, sizeof path, "/proc/%s/task/%s/wchan", pid, tid);
	if (slurp(path, wchan, sizeof wchan) < 0)
		strcpy(wchan, "?");
	if (st == 'S' && !strstr(comm, "uzram") && !strstr(comm, "hog") &&
	    !strstr(comm, "kswapd") && !strstr(comm, "nbd") &&
	    !strstr(comm, "kworker"))
		return;
	if (st == 'I')
		return;
	snprintf(k, sizeof k, "%s %c %s", comm, st, wchan);
	count(k);
}

/* visit every thread: fn(pid, tid) */
static void each_thread(void (*fn)(const char *, const char *))
{
	DIR *p = opendir("/proc"), *t;
	struct dirent *d, *e;
	char path[300];

	if (!p)
		return;
	while ((d = readdir(p)))
		if (d->d_name[0] >= '1' && d->d_name[0] <= '9') {
			snprintf(path, sizeof path, "/proc/%s/task", d->d_name);
			if (!(t = opendir(path)))
				continue;
			while ((e = readdir(t)))
				if (e->d_name[0] != '.')
					fn(d->d_name, e->d_name);
			closedir(t);
		}
	closedir(p);
}

static struct thr *snap;
static int *nsnap;

static void snap_thread(const char *pid, const char *tid)
{
	char path[128], buf[4096], st, *s;
	struct thr *x;

	if (*nsnap >= MAXTHR)
		return;
	x = &snap[*nsnap];
	memset(x, 0, sizeof *x);
	x->tid = atoi(tid);
	snprintf(path, sizeof path, "/proc/%s/task/%s/stat", pid, tid);
	if (comm_state(path, x->comm, sizeof x->comm, &st) < 0)
		return;
	snprintf(path, sizeof path, "/proc/%s/task/%s/schedstat", pid, tid);
	if (slurp(path, buf, sizeof buf) > 0)
		sscanf(buf, "%lld %lld", &x->run, &x->wait);
	snprintf(path, sizeof path, "/proc/%s/task/%s/status", pid, tid);
	if (slurp(path, buf, sizeof buf) > 0) {
		if ((s = strstr(buf, "\nvoluntary_ctxt_switches:")))
			x->vcs = atol(s + 25);
		if ((s = strstr(buf, "nonvoluntary_ctxt_switches:")))
			x->ncs = atol(s + 27);
	}
	(*nsnap)++;
}

static int cmp_keys(const void *a, const void *b)
{
	return (int)(((const struct key *)b)->n - ((const struct key *)a)->n);
}

static void report(long samples)
{
	qsort(keys, (size_t)nkeys, sizeof keys[0], cmp_keys);
	printf("TSAMPLE samples %ld\n", samples);
	for (int i = 0; i < nkeys && i < 60; i++)
		printf("TSAMPLE %6ld %s\n", keys[i].n, keys[i].s);
	printf("TSCHED tid comm run_ms runq_wait_ms vol_cs invol_cs\n");
	for (int i = 0; i < n1; i++) {
		struct thr b = { 0 };

		for (int j = 0; j < n0; j++)
			if (t0[j].tid == t1[i].tid)
				b = t0[j];
		if (t1[i].run - b.run < 20000000)
			continue;
		printf("TSCHED %d %s %lld %lld %ld %ld\n", t1[i].tid, t1[i].comm,
		       (t1[i].run - b.run) / 1000000,
		       (t1[i].wait - b.wait) / 1000000, t1[i].vcs - b.vcs,
		       t1[i].ncs - b.ncs);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct sched_param sp = { .sched_priority = 2 };
	struct timespec ts;
	long samples = 0;
	char buf[256], k[400];
	int ms;

	if (argc < 2)
		return 2;
	ms = atoi(argv[1]);
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	signal(SIGTERM, on_sig);
	signal(SIGINT, on_sig);
	(void)mlockall(MCL_CURRENT | MCL_FUTURE);
	(void)sched_setscheduler(0, SCHED_FIFO, &sp);
	snap = t0;
	nsnap = &n0;
	each_thread(snap_thread);
	while (!stop) {
		each_thread(sample_thread);
		for (int i = 2; i < argc; i++)
			if (slurp(argv[i], buf, sizeof buf) > 0) {
				buf[strcspn(buf, "\n")] = 0;
				snprintf(k, sizeof k, "%s: %s",
					 strrchr(argv[i], '/') ? strrchr(argv[i], '/') : argv[i], buf);
				count(k);
			}
		samples++;
		nanosleep(&ts, NULL);
	}
	snap = t1;
	nsnap = &n1;
	each_thread(snap_thread);
	report(samples);
	return 0;
}
