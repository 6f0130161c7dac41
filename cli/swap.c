/*
 * swap.c - `uzram swapon` and `uzram swapoff`: uzram as the kernel's swap in
 * one command each, with the defaults of zram-generator.
 *
 *   swapon   1. the kernel has nbd.ko (modprobe nbd), else a clear refusal
 *            2. `uzram serve --swap` on /run/uzram/swap/nbdN.sock, in a
 *               session of its own, its output in nbdN.log, its pid in
 *               nbdN.pid (serve_swap.c says what --swap holds)
 *            3. nbd-client -unix ... -swap: the kernel's NBD client attaches
 *               /dev/nbdN (the first free one, or --device)
 *            4. mkswap, swapon --discard=pages -p PRIORITY
 *   swapoff  the same backwards, for --device or every nbdN.pid there
 *
 * Defaults: size min(RAM / 2, 4096 MiB), zstd when the library has it, else
 * lz4, priority 100 (zram-generator's zram-size, compression-algorithm,
 * swap-priority). A step that fails undoes the ones before it. The ublk
 * transport will be a second way to do step 3.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uzram.h"
#include "cli.h"

#define SWAP_DIR "/run/uzram/swap"

extern char **environ;

static const struct cli_option swapon_opts[] = {
	{ "size", 's', required_argument, "SIZE",
	  "the swap device's size (default min(RAM / 2, 4G))" },
	{ "algorithm", 'a', required_argument, "ALGO",
	  "(default zstd, else lz4)" },
	{ "mem-limit", 'm', required_argument, "SIZE",
	  "the most memory the device may take; all of it is\n"
	  "reserved at start (default: no limit, 16M reserved)" },
	{ "priority", 'p', required_argument, "N", "swapon's priority (default 100)" },
	{ "device", 'd', required_argument, "/dev/nbdN",
	  "(default: the first free one)" },
	{ "help", 'h', no_argument, NULL, "this text" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_command swapon_cmd = {
	.name = "swapon",
	.summary = "Swap on a new uzram device, attached by the kernel's NBD client.\n",
	.shorts = "h",
	.opts = swapon_opts,
	.brief = "swap on a new uzram device",
};

static const struct cli_option swapoff_opts[] = {
	{ "device", 'd', required_argument, "/dev/nbdN",
	  "(default: every device uzram swapon set up)" },
	{ "help", 'h', no_argument, NULL, "this text" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_command swapoff_cmd = {
	.name = "swapoff",
	.summary = "Stop swapping on uzram devices and stop their servers.\n",
	.shorts = "h",
	.opts = swapoff_opts,
	.brief = "stop swapping on uzram devices",
};

struct swapon_args {
	unsigned long long size, mem_limit, priority;
	char *algorithm;
	const char *device;
};

static void sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

/*
 * Run argv (PATH lookup) with stdin /dev/null and stdout and stderr on
 * out_fd (-1: ours), for at most secs seconds; detach: in a new session,
 * not waited for. The exit status, the pid when detached, or -1 after a
 * message.
 */
static int run(char *const argv[], int out_fd, int secs, bool detach)
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
		sleep_ms(20);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &ws, 0);
	fprintf(stderr, "uzram: %s did not finish in %d s\n", argv[0], secs);
	return -1;
}

static bool have_nbd(void)
{
	char *modprobe[] = { "modprobe", "nbd", NULL };

	if (access("/sys/module/nbd", F_OK) == 0)
		return true;
	run(modprobe, -1, 30, false);
	return access("/sys/module/nbd", F_OK) == 0;
}

/* N of the first /dev/nbdN with no client, or -1. */
static int free_nbd(void)
{
	char path[64];

	for (int n = 0; n < 256; n++) {
		snprintf(path, sizeof path, "/sys/block/nbd%d", n);
		if (access(path, F_OK) != 0)
			return -1;
		snprintf(path, sizeof path, "/sys/block/nbd%d/pid", n);
		if (access(path, F_OK) != 0)
			return n;
	}
	return -1;
}

static int nbd_number(const char *dev)
{
	int n;
	char end;

	if (sscanf(dev, "/dev/nbd%d%c", &n, &end) != 1 || n < 0) {
		fprintf(stderr, "uzram: bad --device '%s', want /dev/nbdN\n", dev);
		return -1;
	}
	return n;
}

static void swap_path(char *out, size_t n, int nbd, const char *ext)
{
	snprintf(out, n, SWAP_DIR "/nbd%d.%s", nbd, ext);
}

static pid_t read_pid(int nbd)
{
	char path[128];
	long pid = 0;
	FILE *f;

	swap_path(path, sizeof path, nbd, "pid");
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}

/* Stop the server of nbd, if any: SIGTERM, then SIGKILL after 30 s. */
static void stop_server(int nbd)
{
	pid_t pid = read_pid(nbd);
	char path[128];
	int t;

	if (pid > 0 && kill(pid, SIGTERM) == 0) {
		for (t = 0; t < 1500 && kill(pid, 0) == 0; t++)
			sleep_ms(20);
		if (t == 1500)
			kill(pid, SIGKILL);
	}
	waitpid(pid, NULL, WNOHANG);
	swap_path(path, sizeof path, nbd, "pid");
	unlink(path);
	swap_path(path, sizeof path, nbd, "sock");
	unlink(path);
}

/* swapoff, nbd-client -d, the server: each if there. 0 or 1. */
static int swap_down(int nbd)
{
	char dev[32], *off[] = { "swapoff", dev, NULL };
	char *detach[] = { "nbd-client", "-d", dev, NULL };
	int rc = 0;

	snprintf(dev, sizeof dev, "/dev/nbd%d", nbd);
	if (run(off, -1, 600, false) != 0)
		rc = 1;
	if (run(detach, -1, 60, false) != 0)
		rc = 1;
	stop_server(nbd);
	return rc;
}

static int swapon_take(void *arg, int key, char *val)
{
	struct swapon_args *a = arg;

	switch (key) {
	case 's':
		return parse_size(val, &a->size) < 0 || !a->size ? CLI_BAD_VALUE : 0;
	case 'm':
		return parse_size(val, &a->mem_limit) < 0 ? CLI_BAD_VALUE : 0;
	case 'p':
		return parse_uint(val, 32767, &a->priority) < 0 ? CLI_BAD_VALUE : 0;
	case 'a':
		a->algorithm = val;
		return 0;
	case 'd':
		a->device = val;
		return 0;
	}
	return CLI_BAD_VALUE;
}

/* Whether the library has algorithm `name` (uzram_algorithms()). */
static bool have_algorithm(const char *name)
{
	const char *all = uzram_algorithms(), *p = all;
	size_t n = strlen(name);

	while ((p = strstr(p, name))) {
		if ((p == all || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
			return true;
		p += n;
	}
	return false;
}

/* Wait for the server's socket; 0, or -1 when it died or took 30 s. */
static int wait_socket(pid_t pid, const char *sock)
{
	struct stat st;
	int ws;

	for (int t = 0; t < 1500; t++) {
		if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
			return 0;
		if (waitpid(pid, &ws, WNOHANG) == pid)
			return -1;
		sleep_ms(20);
	}
	return -1;
}

int cmd_swapon(int argc, char **argv)
{
	struct swapon_args a = { .priority = 100 };
	char self[4096], sock[128], log[128], pidf[128], dev[32], size[32],
	     limit[32], prio[16];
	int r, nbd, fd;
	pid_t pid;
	FILE *f;

	r = cli_parse(&swapon_cmd, argc, argv, swapon_take, &a);
	if (r >= 0)
		return r;
	if (geteuid() != 0) {
		fprintf(stderr, "uzram swapon: needs root (mlockall, nbd-client, swapon)\n");
		return 1;
	}
	if (!have_nbd()) {
		fprintf(stderr, "uzram swapon: this kernel has no NBD client: no "
			"/sys/module/nbd, and `modprobe nbd` found no nbd.ko; install "
			"the kernel's modules (Debian: linux-image-amd64 has nbd.ko), "
			"or use the kernel's own zram (systemd-zram-generator)\n");
		return 1;
	}
	if (!a.size) {
		unsigned long long ram = (unsigned long long)sysconf(_SC_PHYS_PAGES) *
					 (unsigned long long)sysconf(_SC_PAGESIZE);

		a.size = ram / 2 < (4096ull << 20) ? ram / 2 : 4096ull << 20;
		a.size &= ~(unsigned long long)(UZRAM_PAGE_SIZE - 1);
	}
	if (!a.algorithm)
		a.algorithm = have_algorithm("zstd") ? "zstd" : "lz4";
	nbd = a.device ? nbd_number(a.device) : free_nbd();
	if (nbd < 0) {
		if (!a.device)
			fprintf(stderr, "uzram swapon: no free /dev/nbdN (nbd.ko's nbds_max)\n");
		return 1;
	}
	if (read_pid(nbd) > 0 && kill(read_pid(nbd), 0) == 0) {
		fprintf(stderr, "uzram swapon: /dev/nbd%d is uzram's swap already "
			"(uzram swapoff --device /dev/nbd%d)\n", nbd, nbd);
		return 1;
	}
	/* 0700, as uzram mount makes it and insists on (mount.c's
	 * runtime_base()): at boot uzram-swap@ and uzram-mount@ start side
	 * by side, and whichever comes first makes it for both */
	if (mkdir("/run/uzram", 0700) < 0 && errno != EEXIST)
		goto dir_fail;
	if (mkdir(SWAP_DIR, 0700) < 0 && errno != EEXIST)
		goto dir_fail;
	r = (int)readlink("/proc/self/exe", self, sizeof self - 1);
	if (r < 0) {
		perror("uzram swapon: /proc/self/exe");
		return 1;
	}
	self[r] = '\0';
	swap_path(sock, sizeof sock, nbd, "sock");
	swap_path(log, sizeof log, nbd, "log");
	swap_path(pidf, sizeof pidf, nbd, "pid");
	snprintf(dev, sizeof dev, "/dev/nbd%d", nbd);
	snprintf(size, sizeof size, "%llu", a.size);
	snprintf(limit, sizeof limit, "%llu", a.mem_limit);
	snprintf(prio, sizeof prio, "%llu", a.priority);
	unlink(sock);

	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "uzram swapon: cannot create %s: %s\n", log, strerror(errno));
		return 1;
	}
	char *serve[] = { self, "serve", "--swap", "--size", size, "--algorithm",
			  a.algorithm, "--socket", sock,
			  a.mem_limit ? "--mem-limit" : NULL, limit, NULL };
	pid = run(serve, fd, 0, true);
	close(fd);
	if (pid <= 0)
		return 1;
	f = fopen(pidf, "w");
	if (!f || fprintf(f, "%ld\n", (long)pid) < 0 || fclose(f) != 0) {
		fprintf(stderr, "uzram swapon: cannot write %s\n", pidf);
		kill(pid, SIGTERM);
		return 1;
	}
	if (wait_socket(pid, sock) < 0) {
		fprintf(stderr, "uzram swapon: uzram serve --swap did not start; "
			"its output is in %s\n", log);
		stop_server(nbd);
		return 1;
	}
	char *attach[] = { "nbd-client", "-unix", sock, dev, "-b", "4096", "-swap", NULL };
	char *mkswap[] = { "mkswap", dev, NULL };
	/* discard: freed swap clusters reach the server as trims, as freed
	 * slots reach zram (swap_slot_free_notify); without it the server
	 * keeps every stale page until the device is full */
	char *on[] = { "swapon", "--discard=pages", "-p", prio, dev, NULL };
	if (run(attach, -1, 60, false) != 0) {
		fprintf(stderr, "uzram swapon: nbd-client could not attach %s\n", dev);
		stop_server(nbd);
		return 1;
	}
	if (run(mkswap, -1, 120, false) != 0 || run(on, -1, 120, false) != 0) {
		fprintf(stderr, "uzram swapon: mkswap or swapon on %s failed\n", dev);
		swap_down(nbd);
		return 1;
	}
	printf("uzram swapon: %s, %llu MiB, %s, priority %llu, server pid %ld\n",
	       dev, a.size >> 20, a.algorithm, a.priority, (long)pid);
	return 0;

dir_fail:
	fprintf(stderr, "uzram swapon: cannot create %s: %s\n", SWAP_DIR, strerror(errno));
	return 1;
}

static int swapoff_take(void *arg, int key, char *val)
{
	if (key != 'd')
		return CLI_BAD_VALUE;
	*(const char **)arg = val;
	return 0;
}

int cmd_swapoff(int argc, char **argv)
{
	const char *device = NULL;
	int r, nbd, rc = 0, found = 0;

	r = cli_parse(&swapoff_cmd, argc, argv, swapoff_take, &device);
	if (r >= 0)
		return r;
	if (device) {
		nbd = nbd_number(device);
		if (nbd < 0)
			return 1;
		if (read_pid(nbd) <= 0) {
			fprintf(stderr, "uzram swapoff: %s is not uzram's swap "
				"(no " SWAP_DIR "/nbd%d.pid)\n", device, nbd);
			return 1;
		}
		return swap_down(nbd);
	}
	for (nbd = 0; nbd < 256; nbd++) {
		if (read_pid(nbd) <= 0)
			continue;
		found++;
		rc |= swap_down(nbd);
	}
	if (!found)
		fprintf(stderr, "uzram swapoff: no swap of uzram swapon is set up\n");
	return found ? rc : 1;
}
