// SPDX-License-Identifier: MIT
/*
 * swap_transport.c - the two ways `uzram swapon` makes `uzram serve --swap`
 * the kernel's block device (struct swap_transport in swap.h):
 *
 *   nbd    modprobe nbd; the server on its Unix socket; the kernel's NBD
 *          client attaches /dev/nbdN to it (nbd-client -swap, or under a
 *          keeper the keeper itself, through netlink, so that it can
 *          attach it again to the next server: swap_attach_kept()), and
 *          nbd-client -d detaches it before the server stops
 *   ublk   modprobe ublk_drv (Linux 6.0+); the server itself makes
 *          /dev/ublkbN (serve --ublk --ublk-id N) and removes it when it
 *          stops: no client, no socket between the kernel and the device
 *
 * The ublk device's requests come to the server's queue threads, which are
 * made after --swap's rules took hold (cli/serve/serve_swap.c): they inherit
 * SCHED_RR, their memory is locked on fault, and they allocate nothing per
 * request (ublk/queue.c). The server's NBD socket stays, for `uzram stat`
 * and `uzram ctl`.
 *
 * Also swap_run(), which runs the programs of both (modprobe, the server,
 * nbd-client) and those of swap.c (mkswap, swapon, swapoff).
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "swap.h"
#include "../../ublk/ublk.h"

extern char **environ;

void swap_sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

int swap_run(char *const argv[], int out_fd, int secs, bool detach)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int err, ws;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out_fd >= 0) {
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
		posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
	}
	posix_spawnattr_init(&attr);
	if (detach)
		posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (err) {
		fprintf(stderr, "uzram: cannot run %s: %s\n", argv[0], strerror(err));
		return -1;
	}
	if (detach)
		return pid;
	for (int t = 0; t < secs * 50; t++) {
		if (waitpid(pid, &ws, WNOHANG) == pid)
			return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
		swap_sleep_ms(20);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &ws, 0);
	fprintf(stderr, "uzram: %s did not finish in %d s\n", argv[0], secs);
	return -1;
}

static bool no_modprobe; /* there was none to run: swap_missing() says so */

/* Whether program is a file we may run in a directory of $PATH. */
static bool on_path(const char *program)
{
	const char *p = getenv("PATH");
	char file[PATH_MAX];

	for (size_t n; p && *p; p += n + (p[n] == ':')) {
		n = strcspn(p, ":");
		if (snprintf(file, sizeof file, "%.*s/%s", (int)n, p, program) <
		    (int)sizeof file && access(file, X_OK) == 0)
			return true;
	}
	return false;
}

/* modprobe NAME, its messages dropped: the caller says what is missing. */
static void modprobe(char *name)
{
	char *argv[] = { "modprobe", name, NULL };
	int fd;

	if (!on_path("modprobe")) {
		no_modprobe = true;
		return;
	}
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	swap_run(argv, fd, 30, false);
	if (fd >= 0)
		close(fd);
}

const char *swap_missing(const struct swap_transport *t)
{
	static char why[2][256];
	char *out = why[t == &swap_ublk];

	if (!no_modprobe)
		return t->missing;
	snprintf(out, sizeof why[0], "no %s: its module %s is not loaded, and "
		 "there is no modprobe to load it (Debian: apt-get install kmod)",
		 t->name, t->module);
	return out;
}

/* Whether the server pid, our child, has exited (and reap it). */
static bool exited(pid_t pid)
{
	int ws;

	return waitpid(pid, &ws, WNOHANG) == pid;
}

/* nbd */

static bool nbd_available(void)
{
	if (access("/sys/module/nbd", F_OK) == 0)
		return true;
	modprobe("nbd");
	return access("/sys/module/nbd", F_OK) == 0;
}

/* N of the first /dev/nbdN with no client, or -1. */
static int nbd_free_device(void)
{
	char path[64];

	for (int n = 0; n < 256; n++) {
		snprintf(path, sizeof path, "/sys/block/nbd%d", n);
		if (access(path, F_OK) != 0)
			break;
		snprintf(path, sizeof path, "/sys/block/nbd%d/pid", n);
		if (access(path, F_OK) != 0)
			return n;
	}
	report_error("swapon", "no free /dev/nbdN (nbd.ko's nbds_max)");
	return -1;
}

/*
 * A server that did not start: what swapon says, then the last few lines
 * of its log, its own last words, so that the reason is on the terminal,
 * not only in the file.
 */
static void not_started(const char *what, const char *log)
{
	enum { KEEP = 4 };
	char *said[KEEP] = { NULL }, *line = NULL;
	FILE *f = fopen(log, "r");
	size_t cap = 0, n = 0;

	report_error("swapon", "%s; its output is in %s", what, log);
	while (f && getline(&line, &cap, f) > 0) {
		if (line[0] == '\n')
			continue;
		free(said[n % KEEP]);
		said[n++ % KEEP] = strdup(line);
	}
	for (size_t i = n > KEEP ? n - KEEP : 0; i < n; i++)
		if (said[i % KEEP])
			fputs(said[i % KEEP], stderr);
	for (size_t i = 0; i < KEEP; i++)
		free(said[i]);
	free(line);
	if (f)
		fclose(f);
}

static void nbd_serve_args(int n, char *argv[4], char buf[16])
{
	(void)n;
	(void)buf;
	argv[0] = NULL;
}

static int nbd_attach(int n, pid_t pid, const char *sock, const char *log)
{
	char dev[32], path[128], conns[16];
	char *attach[] = { "nbd-client", "-unix", path, dev, "-b", "4096", "-swap",
			   "-connections", conns, NULL };
	struct stat st;
	int t;

	for (t = 0; t < 1500; t++) {
		if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
			break;
		if (exited(pid))
			t = 1500;
		else
			swap_sleep_ms(20);
	}
	if (t >= 1500) {
		not_started("uzram serve --swap did not start", log);
		return -1;
	}
	snprintf(dev, sizeof dev, "/dev/nbd%d", n);
	snprintf(path, sizeof path, "%s", sock);
	snprintf(conns, sizeof conns, "%d", swap_nbd_connections());
	if (swap_run(attach, -1, 60, false) != 0) {
		report_error("swapon", "nbd-client could not attach %s", dev);
		return -1;
	}
	return 0;
}

static int nbd_detach(int n)
{
	char dev[32], *detach[] = { "nbd-client", "-d", dev, NULL };

	snprintf(dev, sizeof dev, "/dev/nbd%d", n);
	return swap_run(detach, -1, 60, false) != 0;
}

static void nbd_gone(int n, const char *who)
{
	(void)n;
	(void)who;
}

const struct swap_transport swap_nbd = {
	.name = "nbd",
	.node = "nbd",
	.available = nbd_available,
	.missing = "no NBD client: no /sys/module/nbd, and `modprobe nbd` "
		   "found no nbd.ko (Debian: linux-image-amd64 has it)",
	.module = "nbd",
	.free_device = nbd_free_device,
	.serve_args = nbd_serve_args,
	.attach = nbd_attach,
	.detach = nbd_detach,
	.gone = nbd_gone,
};

/* ublk */

static bool ublk_available(void)
{
	if (access("/sys/module/ublk_drv", F_OK) != 0)
		modprobe("ublk_drv");
	for (int t = 0; t < 50; t++) { /* the node follows the module */
		if (access("/dev/ublk-control", F_OK) == 0)
			return true;
		if (access("/sys/module/ublk_drv", F_OK) != 0)
			return false;
		swap_sleep_ms(20);
	}
	return false;
}

/* Whether ublk device n exists, live or dead, or its nodes do. */
static bool ublk_exists(int n)
{
	char path[64];

	snprintf(path, sizeof path, "/sys/class/ublk-char/ublkc%d", n);
	if (access(path, F_OK) == 0)
		return true;
	snprintf(path, sizeof path, "/dev/ublkc%d", n);
	if (access(path, F_OK) == 0)
		return true;
	snprintf(path, sizeof path, "/dev/ublkb%d", n);
	return access(path, F_OK) == 0;
}

static int ublk_free_device(void)
{
	for (int n = 0; n < 1024; n++)
		if (!ublk_exists(n))
			return n;
	report_error("swapon", "no free ublk device number below 1024 "
		"(uzram ublk list)");
	return -1;
}

static void ublk_serve_args(int n, char *argv[4], char buf[16])
{
	snprintf(buf, 16, "%d", n);
	argv[0] = "--ublk";
	argv[1] = "--ublk-id";
	argv[2] = buf;
	argv[3] = NULL;
}

/* Whether log holds the line `want` (without its newline). */
static bool log_has(const char *log, const char *want)
{
	FILE *f = fopen(log, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	bool found = false;

	if (!f)
		return false;
	while (!found && (len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		found = !strcmp(line, want);
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * The server prints "uzram serve: block device /dev/ublkbN" once the
 * kernel started the device (cli/serve/serve.c), a keeper of an NBD device
 * "... /dev/nbdN" once it attached it (cli/serve/serve_keep.c); the node
 * may come a little after, from devtmpfs or udev.
 */
int swap_attach_kept(const struct swap_transport *tr, int n, pid_t pid,
		     const char *log)
{
	char dev[32], want[64];
	struct stat st;
	int t;

	snprintf(dev, sizeof dev, "/dev/%s%d", tr->node, n);
	snprintf(want, sizeof want, "uzram serve: block device %s", dev);
	for (t = 0; t < 3000 && !log_has(log, want); t++) {
		if (exited(pid))
			t = 3000;
		else
			swap_sleep_ms(20);
	}
	if (t >= 3000) {
		char what[96];

		snprintf(what, sizeof what, "uzram serve --swap did not make %s",
			 dev);
		not_started(what, log);
		return -1;
	}
	for (t = 0; t < 250; t++) {
		if (stat(dev, &st) == 0 && S_ISBLK(st.st_mode))
			return 0;
		swap_sleep_ms(20);
	}
	report_error("swapon", "no block device node %s after 5 s", dev);
	return -1;
}

static int ublk_attach(int n, pid_t pid, const char *sock, const char *log)
{
	(void)sock;
	return swap_attach_kept(&swap_ublk, n, pid, log);
}

static int ublk_detach(int n)
{
	(void)n;
	return 0;
}

/* A server that was killed, or failed to delete its device, leaves it:
 * delete it as `uzram ublk del N` does. */
static void ublk_gone(int n, const char *who)
{
	char path[64];

	snprintf(path, sizeof path, "/sys/class/ublk-char/ublkc%d", n);
	if (access(path, F_OK) == 0)
		ublk_del_device(n, who);
}

const struct swap_transport swap_ublk = {
	.name = "ublk",
	.node = "ublkb",
	.available = ublk_available,
	.missing = "no ublk: `modprobe ublk_drv` found no ublk_drv.ko, or "
		   "there is no /dev/ublk-control (Linux 6.0 or later; "
		   "Debian 12: the bookworm-backports kernel)",
	.module = "ublk_drv",
	.free_device = ublk_free_device,
	.serve_args = ublk_serve_args,
	.attach = ublk_attach,
	.detach = ublk_detach,
	.gone = ublk_gone,
};
