// SPDX-License-Identifier: MIT
/*
 * serve_keep.c - `uzram serve --keeper`: a small process that holds the
 * memfd of a kept store (uzram_config.keep_fd; doc/keep.md) and runs the
 * server on it, again and again.
 *
 *   keeper: memfd_create() (inherited by its children), oom_score_adj
 *           -1000, its own pages locked as it touches them
 *     |
 *     +-- fork, exec: uzram serve ARGS --keep-fd FD        (the server)
 *     |     dies of a signal (SIGKILL, a crash, the OOM killer)
 *     +-- fork, exec: uzram serve ARGS --keep-fd FD --ublk-take-over N
 *     |     adopts the store and recovers /dev/ublkbN: the requests that
 *     |     waited, and those in flight at the death (RECOVERY_REISSUE),
 *     |     are served from the same data
 *     ...
 *   with --nbd-device N (uzram swapon --transport nbd): the keeper attaches
 *   the kernel's /dev/nbdN to each server's socket (serve_nbdlink.c): at
 *   the start, after each death, and when the kernel says the connection
 *   died; the device's I/O waits meanwhile, and the requests that were in
 *   flight on the dead socket are sent again
 *   SIGTERM, SIGINT, SIGHUP to the keeper: passed on to the server; the
 *   keeper exits with the server's status once it has stopped.
 *   SIGUSR2 to the keeper: a planned restart (`uzram swapon --restart`,
 *   after an upgrade): a new standby from the program file as it is now;
 *   once it is ready, SIGUSR2 to the server, which finishes the requests
 *   it holds and leaves the device (no STOP_DEV, no DEL_DEV) and exits;
 *   the standby adopts the store and takes the device over, as after a
 *   death but with no request cut short.
 *
 * A server that exits by itself after a death (an error: a store it
 * refuses, a take-over that fails) is tried again like a death; after
 * KEEP_DEATHS deaths within KEEP_WINDOW_S seconds the keeper gives up: with
 * ublk it deletes the device, so that the I/O waiting on it fails instead
 * of waiting for ever (serving data the store cannot vouch for would be
 * worse). The first server's failure ends the keeper with its status.
 *
 * The keeper allocates nothing after it starts the first server and does
 * no I/O but the wait, so that it runs when memory is short.
 *
 * The store's pages must never go to swap: while no server runs, nobody
 * has them mapped and locked, and reclaim would write them to the very
 * device that waits for the new server, which needs them to adopt the
 * store: a deadlock (seen in tests/vm/v44-swap-keeper.sh). Shmem pages are
 * charged to the memory cgroup of the process that made them, so the
 * keeper runs itself and its servers in a cgroup whose memory.swap.max is
 * 0 (keep_cgroup()): its own if that is so already (the packaged unit's
 * MemorySwapMax=0), else a new one under the root if the keeper is in the
 * root cgroup; otherwise it says that it could not.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uzram.h"
#include "serve.h"
#include "../../swapfree/swapfree.h"
#include "../../ublk/ublk.h"

static void lock_program(void);

#define KEEP_DEATHS 5
#define KEEP_WINDOW_S 10
#define CGROOT "/sys/fs/cgroup"
#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57        /* Linux 5.6 */
#endif

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

/* The first line of path into buf (n bytes), without its newline; 0 or -1. */
static int read_line(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "re");
	bool ok = f && fgets(buf, (int)n, f);

	if (f)
		fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/*
 * Put the keeper (and so its servers) in a memory cgroup that never swaps;
 * the cgroup it made, to remove at the end, into made (or ""). 0, or -1
 * after a warning: the store's pages may then be swapped while no server
 * runs.
 */
static int keep_cgroup(char *made, size_t n)
{
	char own[512], path[700], val[64];

	made[0] = '\0';
	if (read_line("/proc/self/cgroup", own, sizeof own) == 0 &&
	    !strncmp(own, "0::", 3)) {
		snprintf(path, sizeof path, CGROOT "%s/memory.swap.max", own + 3);
		if (read_line(path, val, sizeof val) == 0 && !strcmp(val, "0"))
			return 0;
		if (!strcmp(own + 3, "/")) {
			snprintf(made, n, CGROOT "/uzram-keeper-%ld", (long)getpid());
			snprintf(val, sizeof val, "%ld", (long)getpid());
			snprintf(path, sizeof path, "%s/cgroup.procs", made);
			(void)write_file(CGROOT "/cgroup.subtree_control", "+memory");
			if ((mkdir(made, 0755) == 0 || errno == EEXIST) &&
			    write_file(strcat(strcpy(own, made), "/memory.swap.max"),
				       "0") == 0 &&
			    write_file(path, val) == 0)
				return 0;
			rmdir(made);
			made[0] = '\0';
		}
	}
	report_error("serve", "--keeper: cannot keep the store's pages "
		"out of swap (no cgroup v2 memory controller of our own with "
		"memory.swap.max 0; a unit: MemorySwapMax=0): a death of the "
		"server under memory pressure may then hang the device");
	return -1;
}

/* Leave the cgroup keep_cgroup() made, and remove it. */
static void keep_cgroup_end(const char *made)
{
	char pid[32];

	if (!made[0])
		return;
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	(void)write_file(CGROOT "/cgroup.procs", pid);
	rmdir(made);
}

char **serve_keep_args(int argc, char **argv)
{
	char **copy = calloc((size_t)argc + 1, sizeof *copy);

	if (copy)
		memcpy(copy, argv, (size_t)argc * sizeof *copy);
	return copy;
}

void serve_keep_report(struct uzram *dev)
{
	struct uzram_keep_info info;

	if (uzram_keep_info(dev, &info) < 0 || !info.kept)
		return;
	if (info.adopted)
		printf("uzram %s: adopted the kept store: %llu clusters "
		       "hold data, %llu writes were cut short, %llu MiB of "
		       "reserve kept\n", report_name("serve"),
		       (unsigned long long)info.slots,
		       (unsigned long long)info.torn,
		       (unsigned long long)(info.reserve >> 20));
	else
		printf("uzram %s: the device's store is kept (--keep-fd)\n",
		       report_name("serve"));
	fflush(stdout);
}

/*
 * The adoption's path run once, so that its code is in memory (and locked
 * by the mlockall that follows) before it is needed: a store of a few
 * pages in a scratch memfd, made, closed and adopted.
 */
static void standby_warm_up(const struct uzram_config *cfg)
{
	struct uzram_config c;
	struct uzram *dev = NULL;
	unsigned char page[UZRAM_PAGE_SIZE];
	int fd = memfd_create("uzram-warm-up", MFD_CLOEXEC);

	uzram_config_init(&c);
	c.size = 8 * UZRAM_PAGE_SIZE;
	c.algorithm = cfg->algorithm;
	c.level = cfg->level;
	c.keep_fd = fd;
	memset(page, 'k', sizeof page);
	if (fd >= 0 && !uzram_open(&c, &dev)) {
		(void)uzram_write(dev, page, sizeof page, 0);
		uzram_close(dev);
		if (!uzram_open(&c, &dev)) {
			(void)uzram_read(dev, page, sizeof page, 0);
			uzram_close(dev);
		}
	}
	if (fd >= 0)
		close(fd);
}

/*
 * The size of a balloon (the standby's, the keeper's below): RAM / 64, at
 * least 2 MiB and at most 8 MiB. A standby starts with about 1 MiB of
 * its own (its libraries' relocated data, its stack); 8 MiB each, fixed,
 * were 16 MiB locked of a 256 MiB guest's 73 MiB available (v50, issue
 * 30: BENCHMARKS.md, "The server's own memory").
 */
static size_t balloon_bytes(void)
{
	return (size_t)serve_ram_share(64, 2u << 20, 8u << 20);
}

/*
 * What a standby holds until it adopts the store, and gives back the
 * moment before: the first allocations of the adoption then find free
 * pages although memory is short and swap waits (the device's server is
 * dead). balloon_bytes() of it.
 */
int serve_keep_standby(int fd, const struct uzram_config *cfg)
{
	size_t size = balloon_bytes();
	void *balloon;
	char c;
	ssize_t n;

	standby_warm_up(cfg);
	balloon = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	lock_program();
	(void)mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT);
	if (balloon != MAP_FAILED)
		(void)mlock(balloon, size);
	report_error("serve", "the standby (pid %ld) is ready",
		(long)getpid());
	/* to the keeper: on a pipe's end ENOTSOCK; if the keeper closed its
	 * end already (a death came first), EPIPE and no SIGPIPE */
	(void)send(fd, "r", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (balloon != MAP_FAILED)
		munmap(balloon, size);
	if (n == 1)
		report_error("serve", "the standby (pid %ld) adopts the "
			"store", (long)getpid());
	return n == 1 ? 0 : -1;
}

/*
 * A server's command line: args without --keeper, the store's fd, and for
 * a standby its pipe and the device to take over. `uzram ublk add`'s
 * servers are `uzram ublk add` too, so that their messages say so.
 */
static char **child_argv(char **args, char *self, char *fd, char *take_over,
			 char *standby, char *freed)
{
	size_t n = 0, k = 0;
	char **v;

	while (args[n])
		n++;
	v = calloc(n + 10, sizeof *v);
	if (!v)
		return NULL;
	v[k++] = self;
	if (strcmp(report_name("serve"), "serve")) {
		v[k++] = "ublk";
		v[k++] = "add";  /* its "--ublk" follows in args */
	} else {
		v[k++] = "serve";
	}
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(args[i], "--nbd-device") && args[i + 1])
			i++;    /* the keeper's, and its value */
		else if (strcmp(args[i], "--keeper") &&
			 strncmp(args[i], "--nbd-device=", 13))
			v[k++] = args[i];
	}
	v[k++] = "--keep-fd";
	v[k++] = fd;
	if (freed) {    /* the keeper's probe (swapfree_share()), or "off" */
		v[k++] = strcmp(freed, "off") ? "--freed-slots-fds" :
						"--freed-slots";
		v[k++] = freed;
	}
	if (take_over) {
		v[k++] = "--ublk-take-over";
		v[k++] = take_over;
	}
	if (standby) {
		v[k++] = "--keep-standby";
		v[k++] = standby;
	}
	return v;
}

/* Fork and exec argv, with fd (-1: none) inherited. The pid, or -1. */
static pid_t start(char **argv, const sigset_t *old, int fd)
{
	pid_t pid = fork();

	if (pid == 0) {
		sigprocmask(SIG_SETMASK, old, NULL);
		if (fd >= 0)
			fcntl(fd, F_SETFD, 0);
		execv(argv[0], argv);
		report_error("serve", "--keeper: cannot run %s: %s",
			argv[0], strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		report_error("serve", "--keeper: fork: %s", strerror(errno));
	return pid;
}

static void announce(pid_t pid)
{
	report_error("serve", "--keeper: the server is pid %ld",
		(long)pid);
}

/*
 * The next server, started ahead: it waits for a byte on wfd (one end of
 * a socket pair), and writes "r" on it once it is ready.
 */
struct standby {
	pid_t pid;      /* 0: none */
	int wfd;
	bool ready;
};

/* A planned restart (SIGUSR2): its steps, in struct keeper.restart. */
enum {
	RESTART_NONE,
	RESTART_STANDBY,        /* a standby of the binary on disk starts */
	RESTART_LEAVING,        /* the server was asked to leave (SIGUSR2) */
};
#define RESTART_WAIT_S 120      /* for the new standby to be ready */

struct keeper {
	char **args;            /* serve's, with --keeper */
	char **direct;          /* a server that takes over, made ahead (no
				 * allocation while the device waits) */
	char *self, *fdbuf, *idbuf;
	char *freed;            /* each server's --freed-slots-fds (or its
				 * --freed-slots off), or NULL */
	bool ublk;
	int ublk_id;
	struct standby sb;
	pid_t active;
	int deaths, stopping;
	time_t window;
	void *balloon;          /* balloon_size bytes, or NULL */
	size_t balloon_size;
	time_t last_death;
	int restart;            /* RESTART_* */
	time_t restart_at;
	struct keeper_link link; /* --nbd-device N (serve_nbdlink.c) */
};

/*
 * The keeper's own balloon: memory it holds, locked, while all is well and
 * gives back at a death, so that the next server finds free pages although
 * memory is short and swap waits for it. A standby starts up while the
 * device serves and needs none of it; but after a kill during an adoption
 * the next standby starts (fork, exec, start-up) while the device waits
 * (tests/vm/v43: without it, its exec blocked in a page fault). Held again
 * once no server has died for KEEPER_CALM_S seconds. balloon_bytes() of it.
 */
#define KEEPER_CALM_S 10

static void balloon_fill(struct keeper *k)
{
	void *p;

	if (k->balloon)
		return;
	k->balloon_size = balloon_bytes();
	p = mmap(NULL, k->balloon_size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return;
	(void)mlock(p, k->balloon_size);
	k->balloon = p;
}

static void balloon_pop(struct keeper *k)
{
	if (k->balloon)
		munmap(k->balloon, k->balloon_size);
	k->balloon = NULL;
}

static void standby_start(struct keeper *k, const sigset_t *old)
{
	int p[2];
	char rbuf[16];
	char **v;

	k->sb.pid = 0;
	k->sb.wfd = -1;
	k->sb.ready = false;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
		return;
	snprintf(rbuf, sizeof rbuf, "%d", p[0]);
	v = child_argv(k->args, k->self, k->fdbuf,
		       k->ublk ? k->idbuf : NULL, rbuf, k->freed);
	k->sb.pid = v ? start(v, old, p[0]) : -1;
	free(v);
	close(p[0]);
	if (k->sb.pid > 0) {
		k->sb.wfd = p[1];
	} else {
		k->sb.pid = 0;
		close(p[1]);
	}
}

static void standby_drop(struct keeper *k)
{
	if (k->sb.wfd >= 0)
		close(k->sb.wfd);   /* EOF: the standby exits */
	k->sb.wfd = -1;
}

/* A server that will not come back: the device fails its I/O. */
static void give_up(struct keeper *k)
{
	if (k->ublk && k->ublk_id >= 0)
		(void)ublk_del_device(k->ublk_id, "serve --keeper");
	keeper_link_give_up(&k->link);
}

/*
 * Lock in memory the pages of the program's file and of its libraries that
 * a new process's loader and code read: a new server runs them, and where
 * they live on a tmpfs (an initramfs, the VM bench) their pages could
 * otherwise be swapped out to the device, whose I/O waits for that very
 * server. For each file mapping of ours, the same range of the file,
 * except read-only data mappings over LOCK_LIB_MAX (ICU's 30 MB, which
 * the server never reads, as serve_swap.c leaves them); /etc/ld.so.cache
 * besides, which the loader reads and unmaps.
 *
 * It was whole files under LOCK_LIB_MAX: ICU's data file was left out
 * whole, and with it the one page of it that the loader writes (its .data
 * and the zeroes of its .bss, a copy-on-write fault that reads the file's
 * page). v44 on 7.3 (ci10, 2026-12-04): two standbys started while the
 * device waited hung in that fault, in shmem_swapin_folio, at
 * libicudata.so.72's offset 0x1dcf000 (their registers), the device
 * waiting for them: a deadlock.
 */
#define LOCK_LIB_MAX (8u << 20)

/*
 * The file's pages themselves, [off, off + len) of path mapped read-only
 * and shared, and locked for life: the process's own mapping of a
 * library's data is private, and once written, its pages are copies,
 * while a new process starts from the file's (run 7 of tests/vm/v43 hung
 * on one, swapped out of the VM's tmpfs root). len 0: the whole file.
 */
static void lock_file(const char *path, uint64_t off, uint64_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *p;

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size > off) {
		/* a mapping may reach past the end: no page there */
		if (!len || len > (uint64_t)st.st_size - off)
			len = (uint64_t)st.st_size - off;
		p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd,
			 (off_t)off);
		if (p != MAP_FAILED)
			(void)mlock(p, (size_t)len);
	}
	close(fd);
}

static void lock_program(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096 + 128], perms[8];
	unsigned long lo, hi;
	unsigned long long off;

	while (f && fgets(line, sizeof line, f)) {
		char *path = strchr(line, '/');

		if (!path || sscanf(line, "%lx-%lx %7s %llx", &lo, &hi, perms,
				    &off) != 4)
			continue;
		path[strcspn(path, "\n")] = '\0';
		/* shared: ours, made by lock_file() as we read */
		if (perms[3] == 's' || (perms[1] != 'w' && perms[2] != 'x' &&
					hi - lo > LOCK_LIB_MAX))
			continue;
		(void)mlock((void *)lo, hi - lo);
		lock_file(path, off, hi - lo);
	}
	if (f)
		fclose(f);
	lock_file("/etc/ld.so.cache", 0, 0);
}

/*
 * As serve --swap holds the server (serve_swap.c): the keeper's own
 * allocations (the fork of a new server) must not wait for I/O to the
 * device that waits for that server (PR_SET_IO_FLUSHER), it may dip into
 * the reserves (SCHED_RR), the OOM killer passes it by, and its pages stay.
 */
static void keeper_setup(char *made, size_t n)
{
	struct sched_param sp = { .sched_priority = 1 };
	FILE *f = fopen("/proc/self/oom_score_adj", "w");

	if (f) {
		fputs("-1000", f);
		fclose(f);
	}
	(void)prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0);
	(void)sched_setscheduler(0, SCHED_RR, &sp);
	lock_program();
	(void)mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT);
	(void)keep_cgroup(made, n);
}

/*
 * SIGUSR2: a planned restart, from the program file as it is now (a
 * package upgrade replaced it): drop the standby (of the old program),
 * start one of the new; restart_step() goes on once it is ready.
 */
static void restart_begin(struct keeper *k, const sigset_t *old)
{
	if (k->restart != RESTART_NONE || k->stopping)
		return;
	report_error("serve", "--keeper: restart: a new standby from %s",
		k->self);
	standby_drop(k);
	k->sb.pid = 0;          /* it sees EOF and exits; reaped as a stranger */
	standby_start(k, old);
	k->restart = RESTART_STANDBY;
	k->restart_at = time(NULL);
}

/* The restart's next step, if its time has come. */
static void restart_step(struct keeper *k)
{
	char c;

	if (k->restart != RESTART_STANDBY)
		return;
	if (k->sb.pid > 0 && !k->sb.ready &&
	    recv(k->sb.wfd, &c, 1, MSG_DONTWAIT) == 1 && c == 'r')
		k->sb.ready = true;
	if (k->sb.pid > 0 && k->sb.ready) {
		report_error("serve", "--keeper: restart: the standby (pid "
			"%ld) is ready; the server (pid %ld) leaves the "
			"device to it", (long)k->sb.pid, (long)k->active);
		k->restart = RESTART_LEAVING;
		kill(k->active, SIGUSR2);
	} else if (k->sb.pid <= 0 ||
		   time(NULL) - k->restart_at > RESTART_WAIT_S) {
		report_error("serve", "--keeper: restart failed: no standby "
			"of %s got ready; the server (pid %ld) goes on",
			k->self, (long)k->active);
		k->restart = RESTART_NONE;
	}
}

/*
 * The device to the standby (or, if there is none, to a server started
 * now), which adopts the store and takes the device over; then the next
 * standby. 1 when no server could be started.
 */
static int hand_over(struct keeper *k, const sigset_t *old)
{
	if (k->sb.pid > 0 && write(k->sb.wfd, "a", 1) == 1) {
		k->active = k->sb.pid;
		standby_drop(k);
	} else {
		if (k->sb.pid > 0)
			kill(k->sb.pid, SIGKILL);
		standby_drop(k);
		k->active = k->direct ? start(k->direct, old, -1) : -1;
		if (k->active < 0)
			return 1;
	}
	k->sb.pid = 0;
	keeper_link_lost(&k->link);
	announce(k->active);
	standby_start(k, old);
	return 0;
}

/*
 * The active server ended with wait status ws: after a death, hand over to
 * the standby (or start a server). 1 when the keeper is done, with *rc.
 */
static int server_ended(struct keeper *k, int ws, const sigset_t *old, int *rc)
{
	pid_t dead;
	int r;

	/*
	 * A clean stop, or the first server's failure, ends the keeper; a
	 * server after a death that fails (a take-over that timed out, say)
	 * counts as a death: the next one tries, up to KEEP_DEATHS.
	 */
	if (k->restart == RESTART_LEAVING && !k->stopping) {
		k->restart = RESTART_NONE;
		report_error("serve", "--keeper: restart: the server (pid %ld) "
			"left with status %d; the standby (pid %ld) takes over",
			(long)k->active, WIFEXITED(ws) ? WEXITSTATUS(ws) :
			128 + WTERMSIG(ws), (long)k->sb.pid);
		return hand_over(k, old);
	}
	if (k->stopping || (WIFEXITED(ws) && (!k->deaths || !WEXITSTATUS(ws)))) {
		*rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
		return 1;
	}
	if (time(NULL) - k->window > KEEP_WINDOW_S) {
		k->window = time(NULL);
		k->deaths = 0;
	}
	if (++k->deaths > KEEP_DEATHS) {
		report_error("serve", "--keeper: the server died %d times "
			"in %d s: giving up", k->deaths, KEEP_WINDOW_S);
		give_up(k);
		return 1;
	}
	balloon_pop(k);
	k->last_death = time(NULL);
	dead = k->active;
	/* the standby first: a line in the log may wait for memory */
	r = hand_over(k, old);
	if (WIFEXITED(ws))
		report_error("serve", "--keeper: the server (pid %ld) "
			"exited with status %d; the next one adopts the store",
			(long)dead, WEXITSTATUS(ws));
	else
		report_error("serve", "--keeper: the server (pid %ld) "
			"died of signal %d; the next one adopts the store",
			(long)dead, WTERMSIG(ws));
	return r;
}

/* Serve until the active server stops; the exit status. */
static int keeper_run(struct keeper *k, char **first, const sigset_t *set,
		      const sigset_t *old)
{
	int rc = 1, ws;
	pid_t pid;

	k->active = start(first, old, -1);
	if (k->active < 0)
		return 1;
	announce(k->active);
	keeper_link_lost(&k->link);
	standby_start(k, old);
	balloon_fill(k);
	for (;;) {
		/* while a restart waits for its standby, a look each 0.1 s;
		 * with /dev/nbdN, at its events each 0.5 s, and at the new
		 * server's socket each 20 ms while the device waits */
		const struct timespec calm = { .tv_sec = KEEPER_CALM_S },
			step = { .tv_nsec = 100000000 },
			nbd = { .tv_nsec = 500000000 },
			link = { .tv_nsec = 20000000 };
		siginfo_t si;
		int sig = sigtimedwait(set, &si, k->link.relink ? &link :
				       k->restart == RESTART_STANDBY ? &step :
				       k->link.index >= 0 ? &nbd : &calm);

		if (!k->stopping && keeper_link_step(&k->link) < 0) {
			k->stopping = 1;        /* the first attach failed */
			kill(k->active, SIGTERM);
			standby_drop(k);
		}

		if (sig < 0 && !k->balloon &&
		    time(NULL) - k->last_death >= KEEPER_CALM_S)
			balloon_fill(k);

		if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
			k->stopping = 1;
			kill(k->active, sig);
			standby_drop(k);
		}
		if (sig == SIGUSR2)
			restart_begin(k, old);
		restart_step(k);
		while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
			if (pid == k->active && server_ended(k, ws, old, &rc)) {
				standby_drop(k);
				if (k->sb.pid > 0)
					(void)waitpid(k->sb.pid, NULL, 0);
				return rc;
			}
			if (pid == k->sb.pid) {  /* a standby died: another */
				standby_drop(k);
				k->sb.pid = 0;
				if (!k->stopping && ++k->deaths <= KEEP_DEATHS)
					standby_start(k, old);
			}
		}
	}
}

/*
 * --swap: the probe of freed swap slots, loaded and attached here, once,
 * while memory is no emergency and before the keeper locks itself (libbpf
 * reads megabytes of the kernel's BTF, and gives them back); each server
 * takes its ring and globals by fd. Where it cannot be loaded, the
 * servers are told --freed-slots off: none tries again.
 */
static void keeper_freed(struct keeper *k, struct swapfree **sf,
			 char *buf, size_t n)
{
	k->freed = buf;
	if (swapfree_load("serve", sf) < 0 ||
	    swapfree_share(*sf, buf, n, "serve") < 0) {
		swapfree_stop(*sf);
		*sf = NULL;
		snprintf(buf, n, "off");
	}
	malloc_trim(0);
}

int serve_keeper(char **args, bool ublk, int ublk_id, int nbd_index,
		 bool freed)
{
	char self[4096], fdbuf[16], idbuf[16], made[300], freedbuf[32];
	struct keeper k = {
		.args = args, .self = self, .fdbuf = fdbuf, .idbuf = idbuf,
		.ublk = ublk, .ublk_id = ublk_id, .sb = { 0, -1 },
	};
	struct swapfree *sf = NULL;
	char **first = NULL;
	int fd, rc = 1;
	sigset_t set, old;
	ssize_t len;

	if (ublk && ublk_id < 0) {
		report_error("serve", "--keeper --ublk needs --ublk-id");
		return 2;
	}
	if (!args || keeper_link_open(&k.link, nbd_index, args))
		return 2;
	len = readlink("/proc/self/exe", self, sizeof self - 1);
	fd = memfd_create("uzram-store", 0);
	if (len < 0 || fd < 0 || !args) {
		report_error("serve", "--keeper: %s: %s",
			fd < 0 ? "memfd_create" : "/proc/self/exe",
			strerror(errno));
		return 1;
	}
	self[len] = '\0';
	snprintf(fdbuf, sizeof fdbuf, "%d", fd);
	snprintf(idbuf, sizeof idbuf, "%d", ublk_id);
	if (freed)
		keeper_freed(&k, &sf, freedbuf, sizeof freedbuf);
	first = child_argv(args, self, fdbuf, NULL, NULL, k.freed);
	k.direct = child_argv(args, self, fdbuf, ublk ? idbuf : NULL, NULL,
			      k.freed);
	if (first && k.direct) {
		keeper_setup(made, sizeof made);
		sigemptyset(&set);
		sigaddset(&set, SIGCHLD);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGHUP);
		sigaddset(&set, SIGUSR2);
		sigprocmask(SIG_BLOCK, &set, &old);
		rc = keeper_run(&k, first, &set, &old);
		keep_cgroup_end(made);
	}
	free(first);
	free(k.direct);
	keeper_link_close(&k.link);
	swapfree_stop(sf);
	close(fd);
	return rc;
}
