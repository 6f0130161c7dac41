// SPDX-License-Identifier: MIT
/*
 * swap.c - `uzram swapon` and `uzram swapoff`: uzram as the kernel's swap in
 * one command each, with the defaults of zram-generator.
 *
 *   swapon   1. the transport (swap_transport.c): --transport, or the one
 *               --device names, or (auto) ublk where the kernel has it,
 *               else nbd; a clear refusal when it has neither
 *            2. `uzram serve --swap` (serve_swap.c says what --swap holds)
 *               on /run/uzram/swap/DEV.sock, on ublk under a keeper
 *               (serve --keeper: a new server adopts the store if one
 *               dies, doc/keep.md; DEV.pid is then the keeper's), in a session of its own, its
 *               output in DEV.log, its pid in DEV.pid, DEV being nbdN or
 *               ublkbN (the first free one, or --device); for ublk with
 *               --ublk --ublk-id N: the server makes /dev/ublkbN
 *            3. nbd: nbd-client -unix ... -swap attaches /dev/nbdN;
 *               ublk: wait for the server's /dev/ublkbN
 *            4. mkswap, swapon --discard=pages -p PRIORITY
 *   swapoff  the same backwards (swapoff, nbd-client -d for nbd, SIGTERM
 *            to the server, which removes a ublk device itself), for
 *            --device or every DEV.pid there
 *
 * Defaults: size min(RAM / 2, 4096 MiB), zstd when the library has it, else
 * lz4, priority 100 (zram-generator's zram-size, compression-algorithm,
 * swap-priority). A step that fails undoes the ones before it.
 *
 * The device's options that serve takes (--level, --cluster, --backing
 * and its watermarks, --writeback-limit, --recomp-algorithm, --dedup,
 * --threads, --fast-algorithm, --reencode-age) are checked here for their
 * form and passed on as given (serve_argv()); what each costs under --swap
 * is in doc/block-device.md.
 * --dry-run stops before step 1: it prints serve's command line and runs
 * it with serve's own --dry-run, which makes the device and serves
 * nothing, so that a unit's command line can be checked without root.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uzram.h"
#include "../base/base.h"
#include "swap.h"

/* Keys of swapon's options that have no letter of their own. */
enum { KEY_DRY_RUN = 0x100, KEY_WB_LIMIT, KEY_FAST, KEY_REENCODE_AGE,
       KEY_RESTART };

static const struct cli_option swapon_opts[] = {
	{ "size", 's', required_argument, "SIZE",
	  "the swap device's size (default min(RAM / 2, 4G))" },
	{ "algorithm", 'a', required_argument, "ALGO",
	  "(default zstd, else lz4)" },
	{ "level", 'l', required_argument, "N",
	  "its level (default: its own)" },
	{ "cluster", 'C', required_argument, "4K..64K",
	  "pages compressed together (default 4K: a swap-in\n"
	  "reads one page, a larger cluster decodes all of it)" },
	{ "mem-limit", 'm', required_argument, "SIZE",
	  "the most memory the device may take; reserved at\n"
	  "start but for the slot table's room, up to half\n"
	  "the memory available (default: no limit, RAM / 64\n"
	  "within 4M..16M reserved)" },
	{ "backing", 'b', required_argument, "FILE|DEVICE",
	  "a second tier (needs --mem-limit): past the high\n"
	  "watermark the server recompresses, then writes\n"
	  "back the coldest clusters by itself, and writes\n"
	  "that find memory full go there (default: none).\n"
	  "A file is allocated whole and written on the\n"
	  "blocks under it, as a swap file (ext4, XFS)" },
	{ "high-watermark", 'W', required_argument, "PCT",
	  "of --mem-limit, where moving to --backing starts\n"
	  "(default 90)" },
	{ "low-watermark", 'w', required_argument, "PCT",
	  "and where it stops (default 10 below the high one)" },
	{ "writeback-limit", KEY_WB_LIMIT, required_argument, "SIZE",
	  "write at most this much to --backing, as zram's\n"
	  "writeback_limit (default: no limit)" },
	{ "recomp-algorithm", 'A', required_argument, "ALGO[:LEVEL]",
	  "a secondary algorithm (priority 1, 2, 3 in the order\n"
	  "given): the policy recompresses old clusters with\n"
	  "the last one before it writes back (default: none)" },
	{ "fast-algorithm", KEY_FAST, required_argument, "ALGO[:LEVEL]|none",
	  "swap out with this codec, and re-encode each page\n"
	  "with --algorithm once idle (e.g. lz4:8; default:\n"
	  "none: slower than --algorithm alone on swap,\n"
	  "doc/block-device.md)" },
	{ "reencode-age", KEY_REENCODE_AGE, required_argument, "SECONDS",
	  "how long a page must be idle first (default 0)" },
	{ "dedup", 'U', no_argument, NULL,
	  "store clusters with equal bytes once (default: off)" },
	{ "threads", 'j', required_argument, "N",
	  "worker threads for large writes (default 0)" },
	{ "priority", 'p', required_argument, "N", "swapon's priority (default 100)" },
	{ "transport", 't', required_argument, "auto|ublk|nbd",
	  "how the kernel reaches the server: ublk (Linux 6.0+,\n"
	  "ublk_drv; the server is /dev/ublkbN) or the kernel's\n"
	  "NBD client (nbd.ko, nbd-client); auto (the default):\n"
	  "ublk where the kernel has it, else nbd" },
	{ "device", 'd', required_argument, "/dev/nbdN|/dev/ublkbN",
	  "(default: the first free one of the transport)" },
	{ "dry-run", KEY_DRY_RUN, no_argument, NULL,
	  "check the options as the server takes them and print\n"
	  "its command line; start nothing (needs no root)" },
	{ "restart", KEY_RESTART, no_argument, NULL,
	  "restart --device's server from the uzram program on\n"
	  "disk now (after an upgrade), the device in swap all\n"
	  "along: its keeper hands it over (doc/keep.md)" },
	{ "help", 'h', no_argument, NULL, "this text" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_command swapon_cmd = {
	.name = "swapon",
	.summary = "Swap on a new uzram device: /dev/ublkbN through ublk, or /dev/nbdN\n"
		   "attached by the kernel's NBD client.\n",
	.shorts = "h",
	.opts = swapon_opts,
	.brief = "swap on a new uzram device",
};

static const struct cli_option swapoff_opts[] = {
	{ "device", 'd', required_argument, "/dev/nbdN|/dev/ublkbN",
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

static const struct swap_transport *const transports[] = { &swap_ublk, &swap_nbd };
#define NTRANSPORTS (sizeof transports / sizeof transports[0])

struct swapon_args {
	unsigned long long size, mem_limit, priority;
	char *algorithm;
	/* passed on to serve as given, once checked here */
	char *level, *cluster, *backing, *high, *low, *wb_limit, *threads;
	char *fast, *reencode_age;
	char *recomp[UZRAM_MAX_RECOMP];
	int nrecomp;
	bool dedup, dry_run, restart;
	const char *device;
	const struct swap_transport *transport; /* NULL: auto */
};

/* The transport and N of /dev/nbdN or /dev/ublkbN; -1 if it is neither. */
static int parse_device(const char *dev, const struct swap_transport **t)
{
	unsigned long long n;

	if (strncmp(dev, "/dev/", 5))
		return -1;
	for (size_t i = 0; i < NTRANSPORTS; i++) {
		size_t len = strlen(transports[i]->node);

		if (!strncmp(dev + 5, transports[i]->node, len) &&
		    parse_uint(dev + 5 + len, 1u << 20, &n) == 0) {
			*t = transports[i];
			return (int)n;
		}
	}
	return -1;
}

static void swap_path(char *out, size_t size, const struct swap_transport *t,
		      int n, const char *ext)
{
	snprintf(out, size, SWAP_DIR "/%s%d.%s", t->node, n, ext);
}

static pid_t read_pid(const struct swap_transport *t, int n)
{
	char path[128];

	swap_path(path, sizeof path, t, n, "pid");
	return read_pid_file(path);
}

/* Whether pid is gone; reaps it when it is our child (swapon's undo). */
static bool server_gone(pid_t pid)
{
	return waitpid(pid, NULL, WNOHANG) == pid || kill(pid, 0) != 0;
}

/*
 * Stop the server of device n, if any: SIGTERM, then SIGKILL after 30 s,
 * and wait until it is gone; then the transport's leftovers and the files
 * but the log.
 */
static void stop_server(const struct swap_transport *t, int n, const char *who)
{
	pid_t pid = read_pid(t, n);
	char path[128];
	int i;

	if (pid > 0 && kill(pid, SIGTERM) == 0) {
		for (i = 0; i < 1500 && !server_gone(pid); i++)
			swap_sleep_ms(20);
		if (i == 1500) {
			report_error(who, "the server of /dev/%s%d (pid %ld) did "
				"not stop in 30 s: killed", t->node, n, (long)pid);
			kill(pid, SIGKILL);
			for (i = 0; i < 500 && !server_gone(pid); i++)
				swap_sleep_ms(20);
		}
	}
	t->gone(n, who);
	swap_path(path, sizeof path, t, n, "pid");
	unlink(path);
	swap_path(path, sizeof path, t, n, "sock");
	unlink(path);
}

/* Whether dev is in /proc/swaps. */
static bool is_swap(const char *dev)
{
	FILE *f = fopen("/proc/swaps", "r");
	char line[512];
	size_t len = strlen(dev);
	bool found = false;

	while (f && !found && fgets(line, sizeof line, f))
		found = !strncmp(line, dev, len) && (line[len] == ' ' || line[len] == '\t');
	if (f)
		fclose(f);
	return found;
}

/*
 * swapoff, the transport's detach, the server: each if there. 0 or 1.
 * A device that swapoff could not take out of swap (short of memory for
 * what it holds) keeps its server: stopping it would fail every swap-in.
 */
static int swap_down(const struct swap_transport *t, int n, const char *who)
{
	char dev[32], *off[] = { "swapoff", dev, NULL };
	int rc = 0;

	snprintf(dev, sizeof dev, "/dev/%s%d", t->node, n);
	if (swap_run(off, -1, 600, false) != 0) {
		if (is_swap(dev)) {
			report_error(who, "%s is still swap (swapoff failed): its "
				"server is left running", dev);
			return 1;
		}
		rc = 1;
	}
	if (t->detach(n) != 0)
		rc = 1;
	stop_server(t, n, who);
	return rc;
}

/* swapon's options that serve takes as they are (swapon_take()). */
static int swapon_take_serve(struct swapon_args *a, int key, char *val)
{
	unsigned long long v;
	char spec[256];
	const char *name, *dict;
	int level;

	switch (key) {
	case 'l':
		a->level = val;
		return parse_level(val, &level) < 0 ? CLI_BAD_VALUE : 0;
	case 'C':
		a->cluster = val;
		return parse_size(val, &v) < 0 || v < 4096 || v > 65536 ||
		       (v & (v - 1)) ? CLI_BAD_VALUE : 0;
	case 'b':
		a->backing = val;
		return 0;
	case 'W':
	case 'w':
		*(key == 'W' ? &a->high : &a->low) = val;
		return parse_uint(val, 100, &v) < 0 || !v ? CLI_BAD_VALUE : 0;
	case KEY_WB_LIMIT:
		a->wb_limit = val;
		return parse_size(val, &v) < 0 ? CLI_BAD_VALUE : 0;
	case 'j':
		a->threads = val;
		return parse_uint(val, UZRAM_MAX_THREADS, &v) < 0 ? CLI_BAD_VALUE : 0;
	case 'U':
		a->dedup = true;
		return 0;
	case KEY_FAST:
		a->fast = val;
		snprintf(spec, sizeof spec, "%s", val);
		return strcmp(val, "none") &&
		       (parse_algo_spec(spec, &name, &level, &dict) < 0 || dict) ?
		       CLI_BAD_VALUE : 0;
	case KEY_REENCODE_AGE:
		a->reencode_age = val;
		return parse_uint(val, 512, &v) < 0 ? CLI_BAD_VALUE : 0;
	case 'A':
		if (a->nrecomp == UZRAM_MAX_RECOMP)
			return cli_usage_error(&swapon_cmd, "at most %d "
					       "--recomp-algorithm", UZRAM_MAX_RECOMP);
		a->recomp[a->nrecomp++] = val;
		snprintf(spec, sizeof spec, "%s", val);
		return parse_algo_spec(spec, &name, &level, &dict) < 0 ||
		       dict ? CLI_BAD_VALUE : 0;
	}
	return CLI_BAD_VALUE;
}

static int swapon_take(void *arg, int key, char *val)
{
	struct swapon_args *a = arg;

	switch (key) {
	case 's':
		return cli_take_size(val, 4096, &a->size);
	case 'm':
		return parse_mem_size(val, &a->mem_limit) < 0 ? CLI_BAD_VALUE : 0;
	case 'p':
		return parse_uint(val, 32767, &a->priority) < 0 ? CLI_BAD_VALUE : 0;
	case 'a':
		a->algorithm = val;
		return 0;
	case 't':
		if (!strcmp(val, "auto"))
			a->transport = NULL;
		else if (!strcmp(val, "ublk"))
			a->transport = &swap_ublk;
		else if (!strcmp(val, "nbd"))
			a->transport = &swap_nbd;
		else
			return CLI_BAD_VALUE;
		return 0;
	case 'd':
		a->device = val;
		return 0;
	case KEY_DRY_RUN:
	case KEY_RESTART:
		*(key == KEY_DRY_RUN ? &a->dry_run : &a->restart) = true;
		return 0;
	}
	return swapon_take_serve(a, key, val);
}

/*
 * The options that fit together only in some ways, once all are read.
 * A backing store over the network is refused: its I/O path (libnbd, the
 * socket) allocates, which the server of a swap device must not while the
 * kernel reclaims (doc/block-device.md). 0, or 2 after a message.
 */
static int swapon_check(const struct swapon_args *a)
{
	if (a->backing && (!strncmp(a->backing, "nbd:", 4) ||
			   !strncmp(a->backing, "nbd+", 4)))
		return cli_usage_error(&swapon_cmd, "--backing %s: an NBD "
				       "backing store allocates on its socket path, "
				       "which swap must not; give a block device or "
				       "a file", a->backing);
	if (a->backing && !a->mem_limit)
		return cli_usage_error(&swapon_cmd, "--backing needs --mem-limit: "
				       "the server moves clusters out past a "
				       "watermark of that limit");
	if (!a->backing && (a->high || a->low || a->wb_limit))
		return cli_usage_error(&swapon_cmd, "--high-watermark, "
				       "--low-watermark and --writeback-limit "
				       "need --backing");
	return 0;
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

/*
 * The transport of a, and the device number (-1 for the first free one):
 * --device names its transport, which --transport must not contradict;
 * auto takes ublk where the kernel has it, else nbd. 0, or 1 after a
 * message.
 */
static int choose_transport(struct swapon_args *a, const struct swap_transport **out,
			    int *n)
{
	const struct swap_transport *t = a->transport;

	*n = -1;
	if (a->device) {
		const struct swap_transport *dt;

		*n = parse_device(a->device, &dt);
		if (*n < 0) {
			report_error("swapon", "bad --device '%s', want "
				"/dev/nbdN or /dev/ublkbN", a->device);
			return 1;
		}
		if (t && t != dt) {
			report_error("swapon", "--device %s is %s's, not "
				"--transport %s's", a->device, dt->name, t->name);
			return 1;
		}
		t = dt;
	}
	if (t) {
		if (!t->available()) {
			report_error("swapon", "--transport %s: this kernel has "
				"%s; or use the kernel's own zram "
				"(systemd-zram-generator)", t->name, swap_missing(t));
			return 1;
		}
	} else if (swap_ublk.available()) {
		t = &swap_ublk;
	} else if (swap_nbd.available()) {
		t = &swap_nbd;
	} else {
		report_error("swapon", "this kernel has neither ublk nor an "
			"NBD client: %s; and %s; install the kernel's modules, or "
			"use the kernel's own zram (systemd-zram-generator)",
			swap_missing(&swap_ublk), swap_missing(&swap_nbd));
		return 1;
	}
	*out = t;
	return 0;
}

/* serve's command line, as swapon builds it (serve_argv()). */
struct serve_line {
	char *argv[48];
	char self[4096], sock[128], size[32], limit[32], idbuf[16], nbd[32];
};

/* Append one argument; argv has room for every option swapon passes. */
static void push(struct serve_line *l, int *k, char *arg)
{
	assert(*k < (int)(sizeof l->argv / sizeof l->argv[0]) - 1);
	l->argv[(*k)++] = arg;
	l->argv[*k] = NULL;
}

/*
 * Whether the server runs under a keeper (serve --keeper, doc/keep.md): on
 * ublk, whose device waits for a new server after a death, and on nbd,
 * whose device the keeper attaches to each new server (serve
 * --nbd-device), for the devices a kept store can hold (one-page
 * clusters, no dedup, backing store, recompression or fast algorithm).
 */
static bool keeps_store(const struct swapon_args *a, const struct swap_transport *t)
{
	unsigned long long cluster = UZRAM_PAGE_SIZE;

	(void)t;        /* both transports can */
	if (a->cluster && parse_size(a->cluster, &cluster) < 0)
		return false;
	return !a->dedup && !a->backing && !a->nrecomp &&
	       (!a->fast || !strcmp(a->fast, "none")) &&
	       cluster == UZRAM_PAGE_SIZE;
}

/* `uzram serve --swap ...` for device n of t, into l. 0, or 1 after a message. */
static int serve_argv(const struct swapon_args *a, const struct swap_transport *t,
		      int n, struct serve_line *l)
{
	char *extra[4];
	int r = (int)readlink("/proc/self/exe", l->self, sizeof l->self - 1), k = 0;

	if (r < 0) {
		report_error("swapon", "/proc/self/exe: %s", strerror(errno));
		return 1;
	}
	l->self[r] = '\0';
	swap_path(l->sock, sizeof l->sock, t, n, "sock");
	snprintf(l->size, sizeof l->size, "%llu", a->size);
	snprintf(l->limit, sizeof l->limit, "%llu", a->mem_limit);
	char *const pairs[][2] = {
		{ "--size", l->size }, { "--algorithm", a->algorithm },
		{ "--level", a->level }, { "--cluster", a->cluster },
		{ "--socket", l->sock },
		{ "--mem-limit", a->mem_limit ? l->limit : NULL },
		{ "--backing", a->backing }, { "--high-watermark", a->high },
		{ "--low-watermark", a->low }, { "--writeback-limit", a->wb_limit },
		{ "--threads", a->threads }, { "--fast-algorithm", a->fast },
		{ "--reencode-age", a->reencode_age },
	};

	push(l, &k, l->self);
	push(l, &k, "serve");
	push(l, &k, "--swap");
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		if (pairs[i][1]) {
			push(l, &k, pairs[i][0]);
			push(l, &k, pairs[i][1]);
		}
	}
	for (int i = 0; i < a->nrecomp; i++) {
		push(l, &k, "--recomp-algorithm");
		push(l, &k, a->recomp[i]);
	}
	if (a->dedup)
		push(l, &k, "--dedup");
	if (keeps_store(a, t))
		push(l, &k, "--keeper");
	if (keeps_store(a, t) && t == &swap_nbd) {
		snprintf(l->idbuf, sizeof l->idbuf, "%d", n);
		push(l, &k, "--nbd-device");
		push(l, &k, l->idbuf);
	}
	/* ublk's server knows its device; NBD's is the kernel's /dev/nbdN */
	if (t == &swap_nbd) {
		snprintf(l->nbd, sizeof l->nbd, "/dev/nbd%d", n);
		push(l, &k, "--freed-slots");
		push(l, &k, l->nbd);
	}
	t->serve_args(n, extra, l->idbuf);
	for (int i = 0; extra[i]; i++)
		push(l, &k, extra[i]);
	return 0;
}

/*
 * --dry-run: serve's command line for the device the real run would take
 * (--device's, else the transport this kernel has, as choose_transport()
 * picks it, device 0), printed, then run with serve's --dry-run, which
 * checks every option as the server would: its exit status. Where the
 * kernel has no transport the real run could use, it says so, checks
 * /dev/ublkb0's line (the most options) and says the real run would stop
 * (the generator's tests check units' lines on such machines).
 */
static int swapon_dry_run(struct swapon_args *a)
{
	const struct swap_transport *t = &swap_ublk;
	struct serve_line l;
	int n = 0, k, r;
	bool none = choose_transport(a, &t, &n) != 0;

	if (none && a->device && parse_device(a->device, &t) < 0)
		return 1;	/* said so */
	if (n < 0)
		n = 0;
	if (serve_argv(a, t, n, &l))
		return 1;
	for (k = 0; l.argv[k]; k++)
		;
	l.argv[k] = "--dry-run";
	l.argv[k + 1] = NULL;
	printf("uzram swapon: would run:");
	for (int i = 0; i < k; i++)
		printf(" %s", l.argv[i]);
	printf("\n");
	fflush(stdout);
	r = swap_run(l.argv, -1, 60, false) == 0 ? 0 : 1;
	if (none)
		report_error("swapon", "--dry-run: %s, but the real run on "
			"this kernel would stop before it (above)",
			r ? "and the options are wrong" : "the options are good");
	return r;
}

/* The defaults of what was not given: zram-generator's size and algorithm. */
static void swapon_defaults(struct swapon_args *a)
{
	if (!a->size)
		a->size = ram_share(sysconf(_SC_PHYS_PAGES),
				    sysconf(_SC_PAGESIZE), 2, 4096ull << 20);
	if (!a->algorithm)
		a->algorithm = have_algorithm("zstd") ? "zstd" : "lz4";
}

/*
 * Start the server of device n in a session of its own, its output in
 * DEV.log, its pid in DEV.pid, and attach it. The pid, or -1 after a
 * message (the server stopped).
 */
static pid_t start_server(const struct swapon_args *a, const struct swap_transport *t,
			  int n)
{
	struct serve_line l;
	char log[128], pidf[128];
	pid_t pid;
	FILE *f;
	int fd;

	if (serve_argv(a, t, n, &l))
		return -1;
	swap_path(log, sizeof log, t, n, "log");
	swap_path(pidf, sizeof pidf, t, n, "pid");
	unlink(l.sock);
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		report_error("swapon", "cannot create %s: %s", log, strerror(errno));
		return -1;
	}
	pid = swap_run(l.argv, fd, 0, true);
	close(fd);
	if (pid <= 0)
		return -1;
	f = fopen(pidf, "w");
	if (!f || fprintf(f, "%ld\n", (long)pid) < 0 || fclose(f) != 0) {
		report_error("swapon", "cannot write %s", pidf);
		kill(pid, SIGTERM);
		return -1;
	}
	if ((keeps_store(a, t) ? swap_attach_kept(t, n, pid, log) :
	     t->attach(n, pid, l.sock, log)) < 0) {
		stop_server(t, n, "swapon");
		return -1;
	}
	return pid;
}

/* --restart --device DEV (swap_restart.c). */
static int swapon_restart(const struct swapon_args *a)
{
	const struct swap_transport *t;
	char log[128];
	int n = a->device ? parse_device(a->device, &t) : -1;

	if (n < 0) {
		report_error("swapon", "--restart needs --device /dev/ublkbN "
			"or /dev/nbdN");
		return 2;
	}
	swap_path(log, sizeof log, t, n, "log");
	return swap_restart(a->device, read_pid(t, n), log);
}

int cmd_swapon(int argc, char **argv)
{
	struct swapon_args a = { .priority = 100 };
	const struct swap_transport *t;
	char dev[32], prio[16];
	int r, n;
	pid_t pid;

	r = cli_parse(&swapon_cmd, argc, argv, swapon_take, &a);
	if (r >= 0)
		return r;
	if (optind != argc)
		return cli_usage_error(&swapon_cmd, "unexpected argument '%s'",
				       argv[optind]);
	if (a.restart)
		return swapon_restart(&a);
	if ((r = swapon_check(&a)))
		return r;
	swapon_defaults(&a);
	if (a.dry_run)
		return swapon_dry_run(&a);
	if (geteuid() != 0) {
		report_error("swapon", "needs root (mlockall, the block "
			"device, swapon)");
		return 1;
	}
	if (choose_transport(&a, &t, &n))
		return 1;
	if (n < 0)
		n = t->free_device();
	if (n < 0)
		return 1;
	snprintf(dev, sizeof dev, "/dev/%s%d", t->node, n);
	pid = read_pid(t, n);
	if (pid > 0 && kill(pid, 0) == 0) {
		report_error("swapon", "%s is uzram's swap already "
			"(uzram swapoff --device %s)", dev, dev);
		return 1;
	}
	/* 0700, as uzram mount makes it and insists on (mount.c's
	 * runtime_base()): at boot uzram-swap@ and uzram-mount@ start side
	 * by side, and whichever comes first makes it for both */
	if ((mkdir("/run/uzram", 0700) < 0 && errno != EEXIST) ||
	    (mkdir(SWAP_DIR, 0700) < 0 && errno != EEXIST)) {
		report_error("swapon", "cannot create %s: %s", SWAP_DIR,
			strerror(errno));
		return 1;
	}
	pid = start_server(&a, t, n);
	if (pid < 0)
		return 1;
	snprintf(prio, sizeof prio, "%llu", a.priority);
	char *mkswap[] = { "mkswap", dev, NULL };
	/* discard: freed swap clusters reach the server as trims, as freed
	 * slots reach zram (swap_slot_free_notify); without it the server
	 * keeps every stale page until the device is full */
	char *on[] = { "swapon", "--discard=pages", "-p", prio, dev, NULL };
	if (swap_run(mkswap, -1, 120, false) != 0 || swap_run(on, -1, 120, false) != 0) {
		report_error("swapon", "mkswap or swapon on %s failed", dev);
		swap_down(t, n, "swapon");
		return 1;
	}
	printf("uzram swapon: %s (%s), %llu MiB, %s, priority %llu, server pid %ld\n",
	       dev, t->name, a.size >> 20, a.algorithm, a.priority, (long)pid);
	return 0;
}

static int swapoff_take(void *arg, int key, char *val)
{
	if (key != 'd')
		return CLI_BAD_VALUE;
	*(const char **)arg = val;
	return 0;
}

/*
 * Every DEV.pid of SWAP_DIR through swap_down(), read first and taken
 * down after (swap_down() removes files of the directory); *found counts
 * them. 0 or 1.
 */
static int swapoff_all(int *found)
{
	struct { const struct swap_transport *t; int n; } devs[256];
	DIR *d = opendir(SWAP_DIR);
	struct dirent *e;
	char name[300];
	int n, count = 0, rc = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && count < (int)(sizeof devs / sizeof devs[0])) {
		size_t len = strlen(e->d_name);

		if (len < 5 || len >= 200 || strcmp(e->d_name + len - 4, ".pid"))
			continue;
		snprintf(name, sizeof name, "/dev/%.*s", (int)(len - 4), e->d_name);
		n = parse_device(name, &devs[count].t);
		if (n >= 0 && read_pid(devs[count].t, n) > 0)
			devs[count++].n = n;
	}
	closedir(d);
	for (int i = 0; i < count; i++)
		rc |= swap_down(devs[i].t, devs[i].n, "swapoff");
	*found = count;
	return rc;
}

int cmd_swapoff(int argc, char **argv)
{
	const struct swap_transport *t;
	const char *device = NULL;
	int r, n, rc, found = 0;

	r = cli_parse(&swapoff_cmd, argc, argv, swapoff_take, &device);
	if (r >= 0)
		return r;
	if (device) {
		n = parse_device(device, &t);
		if (n < 0) {
			report_error("swapoff", "bad --device '%s', want "
				"/dev/nbdN or /dev/ublkbN", device);
			return 1;
		}
		if (read_pid(t, n) <= 0) {
			report_error("swapoff", "%s is not uzram's swap "
				  "(no " SWAP_DIR "/%s%d.pid)", device, t->node, n);
			return 1;
		}
		return swap_down(t, n, "swapoff");
	}
	rc = swapoff_all(&found);
	if (!found)
		report_error("swapoff", "no swap of uzram swapon is set up");
	return found ? rc : 1;
}
