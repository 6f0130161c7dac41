// SPDX-License-Identifier: MIT
/*
 * serve.c - `uzram serve`: export a new device over NBD. Its options and
 * the device; the server itself is in server/.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uzram.h"
#include "serve.h"
#include "../../server/server.h"
#include "../../ublk/ublk.h"

/* Keys of the --ublk options, past every letter. */
enum {
	KEY_UBLK = 0x100, KEY_UBLK_ID, KEY_UBLK_QUEUES, KEY_UBLK_DEPTH,
	KEY_UBLK_COPY, KEY_UBLK_RECOVERY, KEY_UBLK_TAKE_OVER,
	KEY_WB_LIMIT, KEY_DRY_RUN, KEY_FAST, KEY_REENCODE_AGE,
	KEY_KEEP_FD, KEY_KEEPER, KEY_KEEP_STANDBY, KEY_NBD_DEVICE,
	KEY_FREED_SLOTS, KEY_FREED_FDS, KEY_BACKING_BLOCKS,
};

static const struct cli_option serve_opts[] = {
	{ "size", 's', required_argument, "SIZE", "the device's size (default 1G)" },
	CLI_CODEC_OPTIONS,
	{ "mem-limit", 'm', required_argument, "SIZE",
	  "the most memory the device may take (mem_limit)" },
	{ "socket", 'S', required_argument, "PATH",
	  "serve on this Unix socket (default ./uzram.sock)" },
	{ "tcp", 't', required_argument, "[HOST:]PORT",
	  "serve on TCP instead (HOST: 127.0.0.1 by default)" },
	{ "export", 'e', required_argument, "NAME", "the export's name" },
	{ "read-only", 'r', no_argument, NULL, "refuse writes" },
	{ "max-connections", 'c', required_argument, "N",
	  "default buffer-limit / 8M, from 4 to 128;\n"
	  "at most buffer-limit / 256K" },
	{ "fast-algorithm", KEY_FAST, required_argument, "ALGO[:LEVEL]|none",
	  "write with this codec, and re-encode each cluster\n"
	  "with --algorithm on a thread of its own once idle\n"
	  "(default lz4:8 when --algorithm is not lz4, but\n"
	  "none with --swap, --mem-limit, --dict, --image or\n"
	  "--recomp-algorithm)" },
	{ "reencode-age", KEY_REENCODE_AGE, required_argument, "SECONDS",
	  "with --fast-algorithm, how long a cluster must be\n"
	  "idle before it is re-encoded (default 0: as soon\n"
	  "as the thread gets to it, paced while writes\n"
	  "arrive)" },
	{ "recomp-algorithm", 'A', required_argument, "ALGO[:LEVEL][:dict=FILE]",
	  "a secondary algorithm for `uzram ctl recompress`\n"
	  "(priority 1, 2, 3 in the order given)" },
	{ "dict", 'D', required_argument, "FILE",
	  "a dictionary for the algorithm (lz4, zstd), as\n"
	  "zram's algorithm_params dict=" },
	{ "run", 'R', required_argument, "'COMMAND'",
	  "run COMMAND with sh -c once the server listens,\n"
	  "with $uri set; stop when it exits, with its exit\n"
	  "status" },
	{ "backing", 'b', required_argument, "FILE|DEVICE|NBD-URI",
	  "a second tier for `uzram ctl writeback`; with\n"
	  "--mem-limit, cold clusters move there by themselves\n"
	  "past the high watermark (90% of the limit) down to\n"
	  "the low one (80%), and writes that find memory full\n"
	  "go there" },
	{ "backing-blocks", KEY_BACKING_BLOCKS, no_argument, NULL,
	  "write a --backing file on the blocks under it, as\n"
	  "the kernel writes a swap file: allocated whole,\n"
	  "never through its file system (root; ext4, XFS;\n"
	  "always with --swap)" },
	{ "high-watermark", 'W', required_argument, "PCT",
	  "of --mem-limit, where moving to --backing starts" },
	{ "low-watermark", 'w', required_argument, "PCT", "and where it stops" },
	{ "writeback-limit", KEY_WB_LIMIT, required_argument, "SIZE",
	  "write at most this much to --backing, by hand and\n"
	  "by the policy, as zram's writeback_limit (default:\n"
	  "no limit; `uzram ctl writeback-limit` changes it)" },
	{ "ctl-socket", 'X', required_argument, "PATH",
	  "the control socket for `uzram stat` and `uzram ctl`\n"
	  "(default: SOCKET.ctl, or\n"
	  "$XDG_RUNTIME_DIR/uzram/tcp-PORT.ctl)" },
	{ "image", 'i', required_argument, "FILE",
	  "open the device from FILE if it exists (its size,\n"
	  "cluster, algorithms win; options that differ are an\n"
	  "error), else create it; save it to FILE on SIGTERM,\n"
	  "SIGINT or the end of --run (not with --read-only)" },
	{ "tls", 'T', required_argument, "off|on|require",
	  "on offers TLS (NBD_OPT_STARTTLS), require refuses\n"
	  "clients without it; keys from --tls-psk or\n"
	  "--tls-certificates" },
	{ "tls-psk", 'P', required_argument, "FILE", "psktool's format" },
	{ "tls-certificates", 'K', required_argument, "DIR",
	  "ca-cert.pem, server-cert.pem, server-key.pem" },
	{ "tls-verify-peer", 'V', no_argument, NULL,
	  "require a client certificate (X.509 only)" },
	{ "buffer-limit", 'B', required_argument, "SIZE",
	  "request and reply buffers of all clients together\n"
	  "(default 1/16 of RAM, 64M to 1G); requests wait\n"
	  "for room" },
	{ "timeout", 'I', required_argument, "SECONDS",
	  "drop a client idle this long (default: never)" },
	{ "handshake-timeout", 'H', required_argument, "SECONDS",
	  "the whole handshake (default 30)" },
	{ "metrics", 'E', required_argument, "unix:PATH|[HOST:]PORT",
	  "answer HTTP GET /metrics there with the figures\n"
	  "in Prometheus's text format (uzram-stat(1)); PORT 0:\n"
	  "a free port, which the banner and stat print" },
	{ "threads", 'j', required_argument, "N",
	  "worker threads that compress a large write's\n"
	  "clusters beside the connection's thread (default 0:\n"
	  "none)" },
	{ "dedup", 'U', no_argument, NULL,
	  "store clusters with equal bytes once (see README)" },
	{ "swap", 'w' + 256, no_argument, NULL,
	  "serve as the kernel's swap: lock memory, reserve\n"
	  "--mem-limit (else 16M) of the allocator,\n"
	  "PR_SET_IO_FLUSHER,\n"
	  "oom_score_adj -1000, SCHED_RR; needs root\n"
	  "(doc/block-device.md)" },
	{ "freed-slots", KEY_FREED_SLOTS, required_argument, "DEVICE|off",
	  "(for --swap) hear of the swap slots the kernel\n"
	  "frees on DEVICE, the kernel's block device of this\n"
	  "server (/dev/nbdN), and drop their pages then, as\n"
	  "zram does (a BPF probe; root, kprobes, BTF); default\n"
	  "with --ublk: its device (under --keeper the keeper\n"
	  "loads the probe once for its servers); off: keep them\n"
	  "until the kernel discards whole clusters" },
	{ "ublk", KEY_UBLK, no_argument, NULL,
	  "also be the block device /dev/ublkbN (Linux 6.0+,\n"
	  "ublk_drv; --run sees it as $ublk_dev)" },
	{ "ublk-id", KEY_UBLK_ID, required_argument, "N",
	  "that N (default: the kernel's choice)" },
	{ "ublk-queues", KEY_UBLK_QUEUES, required_argument, "N",
	  "hardware queues, a thread each (default: one per\n"
	  "CPU, up to 4)" },
	{ "ublk-depth", KEY_UBLK_DEPTH, required_argument, "N",
	  "requests in flight per queue (default 64)" },
	{ "ublk-copy", KEY_UBLK_COPY, required_argument, "kernel|user",
	  "who copies the data: the driver (default), or\n"
	  "we, through /dev/ublkcN (UBLK_F_USER_COPY; the\n"
	  "default with --swap where the kernel has it)" },
	{ "ublk-recovery", KEY_UBLK_RECOVERY, no_argument, NULL,
	  "if this server dies, I/O waits for another\n"
	  "(UBLK_F_USER_RECOVERY) instead of failing" },
	{ "ublk-take-over", KEY_UBLK_TAKE_OVER, required_argument, "N",
	  "serve /dev/ublkbN, left by a --ublk-recovery\n"
	  "server that died (from --image if it saved one)" },
	{ "keep-fd", KEY_KEEP_FD, required_argument, "FD",
	  "keep the device's store in the memfd FD (inherited):\n"
	  "a new store if it is empty, else adopt the one a dead\n"
	  "server left there; with --ublk, implies --ublk-recovery\n"
	  "and the requests in flight at a death are sent again\n"
	  "(doc/keep.md)" },
	{ "keeper", KEY_KEEPER, no_argument, NULL,
	  "hold a memfd, run this server with --keep-fd on it,\n"
	  "and when the server dies of a signal, start another that\n"
	  "adopts the store (with --ublk: --ublk-id needed; the new\n"
	  "server takes the device over); uzram swapon's default" },
	{ "nbd-device", KEY_NBD_DEVICE, required_argument, "N",
	  "(for --keeper) attach the kernel's /dev/nbdN to the\n"
	  "server's --socket, and again to each new server\n"
	  "(uzram swapon --transport nbd)" },
	{ "keep-standby", KEY_KEEP_STANDBY, required_argument, "FD",
	  "(for --keeper) start up, then wait for a byte on FD\n"
	  "before opening the device (adopting the store); EOF:\n"
	  "exit" },
	{ "freed-slots-fds", KEY_FREED_FDS, required_argument, "RING,DATA",
	  "(for --keeper) hear of freed swap slots through the\n"
	  "keeper's probe, these inherited fds, in place of\n"
	  "loading one (the keeper passes them)" },
	{ "dry-run", KEY_DRY_RUN, no_argument, NULL,
	  "check the options and make the device they describe,\n"
	  "then exit: nothing listens, and --image, --backing,\n"
	  "--dict and the TLS keys are not read (uzram swapon\n"
	  "--dry-run)" },
	{ "help", 'h', no_argument, NULL, "this text" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_command serve_cmd = {
	.name = "serve",
	.summary = "Export a new device (or --image) over NBD until SIGINT or SIGTERM.\n",
	.shorts = "h",
	.opts = serve_opts,
	.brief = "export a compressed RAM device over NBD",
};

static int parse_tls_mode(const char *s, enum nbd_tls_mode *mode)
{
	static const char *const names[] = { "off", "on", "require" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*mode = (enum nbd_tls_mode)i;
			return 0;
		}
	return -1;
}

/* The --tls options fit together; 0, or -1 after a message. */
static int check_tls_options(const struct nbd_tls_config *tc)
{
	const char *msg = NULL;

	if (tc->mode == NBD_TLS_OFF &&
	    (tc->certificates || tc->psk_file || tc->verify_peer))
		msg = "--tls-certificates, --tls-psk and --tls-verify-peer need "
		      "--tls=on or --tls=require";
	else if (tc->mode != NBD_TLS_OFF && !tc->certificates == !tc->psk_file)
		msg = "--tls needs exactly one of --tls-certificates DIR and "
		      "--tls-psk FILE";
	else if (tc->verify_peer && !tc->certificates)
		msg = "--tls-verify-peer checks X.509 client certificates "
		      "(--tls-certificates); a PSK authenticates the client itself";
	if (msg)
		report_error("serve", "%s", msg);
	return msg ? -1 : 0;
}

/* What `uzram serve`'s options say, as cmd_serve() gathers it. */
struct serve_args {
	const struct cli_command *cmd;  /* serve_cmd, or `uzram ublk add`'s */
	struct uzram_config cfg;
	struct nbd_server_config sc;
	struct nbd_tls_config tc;
	char *tcp;
	const char *dict_path;
	struct recomp_opt recomp[UZRAM_MAX_RECOMP];
	int nrecomp;
	bool max_given, size_set, algo_set, cluster_set, swap, dry_run, keeper;
	bool fast_set;
	int standby_fd;         /* --keep-standby; -1: none */
	int nbd_index;          /* --nbd-device; -1: none */
	uint64_t wb_limit;      /* --writeback-limit in bytes; 0: none */
	bool ublk, ublk_extra;  /* --ublk, and one of its options */
	bool ublk_copy_set;     /* --ublk-copy given */
	struct ublk_opts uo;
	const char *freed_slots; /* --freed-slots; NULL: the default */
	const char *freed_fds;  /* --freed-slots-fds: the keeper's probe */
};

/* The --ublk options (serve_take_server()). */
static int serve_take_ublk(struct serve_args *a, int key, char *arg)
{
	unsigned long long v;

	if (key == KEY_UBLK) {
		a->ublk = true;
		return 0;
	}
	a->ublk_extra = true;
	switch (key) {
	case KEY_UBLK_ID:
	case KEY_UBLK_TAKE_OVER:
		if (parse_uint(arg, (1u << 20) - 1, &v) < 0)
			return CLI_BAD_VALUE;
		a->uo.dev_id = (int)v;
		a->uo.recover = key == KEY_UBLK_TAKE_OVER;
		return 0;
	case KEY_UBLK_QUEUES:
		if (parse_uint(arg, UBLK_MAX_QUEUES, &v) < 0 || v == 0)
			return CLI_BAD_VALUE;
		a->uo.queues = (unsigned)v;
		return 0;
	case KEY_UBLK_DEPTH:
		if (parse_uint(arg, UBLK_MAX_DEPTH, &v) < 0 || v == 0)
			return CLI_BAD_VALUE;
		a->uo.depth = (unsigned)v;
		return 0;
	case KEY_UBLK_COPY:
		if (!strcmp(arg, "kernel"))
			a->uo.copy = UBLK_COPY_KERNEL;
		else if (!strcmp(arg, "user"))
			a->uo.copy = UBLK_COPY_USER;
		else
			return CLI_BAD_VALUE;
		a->ublk_copy_set = true;
		return 0;
	case KEY_UBLK_RECOVERY:
		a->uo.recovery = true;
		return 0;
	default:
		return 2; /* not in serve_opts */
	}
}

/* The options of the server rather than of the device (serve_take()). */
static int serve_take_server(struct serve_args *a, int key, char *arg)
{
	unsigned long long v;

	switch (key) {
	case 'S':
		a->sc.socket_path = arg;
		return 0;
	case 't':
		a->tcp = arg;
		return 0;
	case 'e':
		if (strlen(arg) > NBD_MAX_STRING) {
			report_error("serve", "export name too long");
			return 2;
		}
		a->sc.export.name = arg;
		return 0;
	case 'r':
		a->sc.export.read_only = true;
		return 0;
	case 'c':
		if (parse_uint(arg, 1u << 20, &v) < 0)
			return CLI_BAD_VALUE;
		a->sc.max_connections = (unsigned)v;
		a->max_given = true;
		return 0;
	case 'B':
		if (parse_size(arg, &v) < 0 || v < (1u << 20) || v > SIZE_MAX / 2)
			return CLI_BAD_VALUE;
		a->sc.buffer_limit = (size_t)v;
		return 0;
	case 'I':
	case 'H':
		if (parse_uint(arg, 1u << 30, &v) < 0 || (key == 'H' && v == 0))
			return CLI_BAD_VALUE;
		*(key == 'I' ? &a->sc.idle_secs : &a->sc.handshake_secs) =
			(unsigned)v;
		return 0;
	case 'i':
		a->sc.image = arg;
		return 0;
	case 'E':
		if (!strncmp(arg, "unix:", 5)) {
			a->sc.metrics_path = arg + 5;
			return arg[5] ? 0 : CLI_BAD_VALUE;
		}
		return split_hostport(arg, &a->sc.metrics_host,
				      &a->sc.metrics_port) < 0 ? CLI_BAD_VALUE : 0;
	case 'R':
		a->sc.run = arg;
		return 0;
	case 'X':
		a->sc.ctl_socket = arg;
		return 0;
	case 'T':
		return parse_tls_mode(arg, &a->tc.mode) < 0 ? CLI_BAD_VALUE : 0;
	case 'K':
		a->tc.certificates = arg;
		return 0;
	case 'P':
		a->tc.psk_file = arg;
		return 0;
	case 'V':
		a->tc.verify_peer = true;
		return 0;
	default:
		return serve_take_ublk(a, key, arg);
	}
}

/* One option of `uzram serve` into a (cli_parse()'s take). */
/*
 * The algorithm the device's data ends in, for the banner and uzram stat:
 * with a fast one, the one it re-encodes to (priority 1).
 */
static const char *serve_algorithm(const struct uzram_config *cfg,
				   const struct uzram *dev)
{
	const char *last = uzram_algorithm(dev, 1);

	return cfg->fast_algorithm && !cfg->image && last ? last :
	       uzram_algorithm(dev, 0);
}

/* --fast-algorithm and --reencode-age */
static int serve_take_fast(struct serve_args *a, int key, char *arg)
{
	unsigned long long v;
	const char *dict = NULL;

	if (key == KEY_REENCODE_AGE) {
		if (parse_uint(arg, 512, &v) < 0)
			return CLI_BAD_VALUE;
		a->cfg.reencode_age = (uint32_t)v;
		return 0;
	}
	a->cfg.fast_algorithm = NULL;
	a->cfg.fast_level = 0;
	a->fast_set = true;
	if (!strcmp(arg, "none"))
		return 0;
	if (parse_algo_spec(arg, &a->cfg.fast_algorithm, &a->cfg.fast_level,
			    &dict) < 0)
		return CLI_BAD_VALUE;
	if (dict)
		return cli_bad_value("no dict= for the fast algorithm");
	return 0;
}

/* --recomp-algorithm ALGO[:LEVEL][,dict=FILE], up to UZRAM_MAX_RECOMP */
static int serve_take_recomp(struct serve_args *a, char *arg)
{
	struct recomp_opt *o = &a->recomp[a->nrecomp];

	if (a->nrecomp == UZRAM_MAX_RECOMP) {
		report_error("serve", "at most %d --recomp-algorithm",
			     UZRAM_MAX_RECOMP);
		return 2;
	}
	if (parse_algo_spec(arg, &o->name, &o->level, &o->dict) < 0)
		return CLI_BAD_VALUE;
	a->nrecomp++;
	return 0;
}

/* --high-watermark, --low-watermark (1-100), --threads */
static int serve_take_count(struct serve_args *a, int key, char *arg)
{
	unsigned long long v;

	if (key == 'j') {
		if (parse_uint(arg, UINT32_MAX, &v) < 0)
			return CLI_BAD_VALUE;
		if (v > UZRAM_MAX_THREADS)
			return cli_bad_value("at most %d", UZRAM_MAX_THREADS);
		a->cfg.threads = (uint32_t)v;
		return 0;
	}
	if (parse_uint(arg, 100, &v) < 0 || v == 0)
		return CLI_BAD_VALUE;
	*(key == 'W' ? &a->cfg.high_watermark : &a->cfg.low_watermark) =
		(uint32_t)v;
	return 0;
}

/* --keep-fd, --keeper, --keep-standby (serve_keep.c, doc/keep.md) */
static int serve_take_keep(struct serve_args *a, int key, char *arg)
{
	unsigned long long v;

	if (key == KEY_KEEPER) {
		a->keeper = true;
		return 0;
	}
	if (parse_uint(arg, INT32_MAX, &v) < 0)
		return CLI_BAD_VALUE;
	if (key == KEY_NBD_DEVICE)
		a->nbd_index = (int)v;
	else
		*(key == KEY_KEEP_FD ? &a->cfg.keep_fd : &a->standby_fd) = (int)v;
	return 0;
}

static int serve_take(void *ctx, int key, char *arg)
{
	struct serve_args *a = ctx;
	unsigned long long v;
	int r;

	switch (key) {
	case 's':
		r = cli_take_size(arg, 4096, &v);
		if (r)
			return r;
		a->cfg.size = v;
		a->size_set = true;
		return 0;
	case 'a':
		a->cfg.algorithm = arg;
		a->algo_set = true;
		return 0;
	case 'l':
		return parse_level(arg, &a->cfg.level) < 0 ? CLI_BAD_VALUE : 0;
	case 'm':
		if (parse_mem_size(arg, &v) < 0)
			return CLI_BAD_VALUE;
		a->cfg.mem_limit = v;
		return 0;
	case 'C':
		if (cli_take_cluster(arg, &v))
			return CLI_BAD_VALUE;
		a->cfg.cluster_size = (uint32_t)v;
		a->cluster_set = true;
		return 0;
	case 'D':
		a->dict_path = arg;
		return 0;
	case 'b':
		a->cfg.backing = arg;
		return 0;
	case KEY_BACKING_BLOCKS:
		a->cfg.backing_flags |= UZRAM_BACKING_BLOCKS;
		return 0;
	case 'W':
	case 'w':
	case 'j':
		return serve_take_count(a, key, arg);
	case 'U':
		a->cfg.dedup = 1;
		return 0;
	case 'w' + 256:
		a->swap = true;
		return 0;
	case KEY_FREED_SLOTS:
		a->freed_slots = arg;
		return 0;
	case KEY_FREED_FDS:
		a->freed_fds = arg;
		return 0;
	case KEY_DRY_RUN:
		a->dry_run = true;
		return 0;
	case KEY_KEEP_FD:
	case KEY_KEEPER:
	case KEY_KEEP_STANDBY:
	case KEY_NBD_DEVICE:
		return serve_take_keep(a, key, arg);
	case KEY_WB_LIMIT:
		if (parse_size(arg, &v) < 0 || v < UZRAM_PAGE_SIZE)
			return CLI_BAD_VALUE;
		a->wb_limit = v;
		return 0;
	case KEY_FAST:
	case KEY_REENCODE_AGE:
		return serve_take_fast(a, key, arg);
	case 'A':
		return serve_take_recomp(a, arg);
	default:
		return serve_take_server(a, key, arg);
	}
}

/*
 * --fast-algorithm's default: lz4 at acceleration 8 (bench/nbdcopy.sh: a
 * copy of new data in at 1.2x nbdkit sparse's time, against zstd's 3.8x,
 * and the same memory once re-encoded; doc/benchmarks-notes.md) where
 * --algorithm is a slower codec; none where memory is what counts while
 * writes arrive (--swap, --mem-limit: the fast objects are larger until
 * re-encoded), with a dictionary or an image (the algorithms are theirs),
 * or with --recomp-algorithm (which keeps its priorities from 1).
 */
static void serve_fast_default(struct serve_args *a)
{
	if (a->fast_set || a->swap || a->cfg.mem_limit || a->dict_path ||
	    a->sc.image || a->nrecomp || a->cfg.keep_fd >= 0 || a->keeper ||
	    !strcmp(a->cfg.algorithm, "lz4"))
		return;
	a->cfg.fast_algorithm = "lz4";
	a->cfg.fast_level = 8;
}

/* Where to listen, once the options are all read: 0 or the exit status. */
static int serve_address(struct serve_args *a, int argc, char **argv)
{
	if (check_tls_options(&a->tc) < 0)
		return 2;
	if ((a->freed_slots || a->freed_fds) && !a->swap) {
		report_error("serve", "--freed-slots needs --swap");
		return 2;
	}
	if ((a->wb_limit || a->cfg.backing_flags) && !a->cfg.backing) {
		report_error("serve", "--%s needs --backing", a->wb_limit ?
			     "writeback-limit" : "backing-blocks");
		return 2;
	}
	if (a->ublk_extra && !a->ublk) {
		report_error("serve", "the --ublk-* options need --ublk");
		return 2;
	}
	if (optind != argc) {
		return cli_usage_error(a->cmd, "unexpected argument "
				       "'%s'", argv[optind]);
	}
	if (a->tcp && a->sc.socket_path) {
		report_error("serve", "--socket and --tcp are exclusive");
		return 2;
	}
	if (nbd_socket_activated()) {
		if (a->tcp || a->sc.socket_path) {
			report_error("serve", "systemd passed the sockets "
				"(LISTEN_FDS): --socket and --tcp cannot be used "
				"with them, the .socket unit says where to listen");
			return 2;
		}
		return 0;
	}
	if (a->tcp) {
		if (split_hostport(a->tcp, &a->sc.tcp_host, &a->sc.tcp_port) < 0) {
			report_error("serve", "bad --tcp '%s', want "
				"[HOST:]PORT with PORT 1-65535, or 0 for a free "
				"one", a->tcp);
			return 2;
		}
	} else if (!a->sc.socket_path) {
		a->sc.socket_path = "uzram.sock";
	}
	return 0;
}

/*
 * --dry-run: the device the options describe, made and closed, without
 * the files (image, backing store, dictionaries: their directories must
 * be writable or they must exist) and without listening. 0, or the exit
 * status after a message.
 */
static int serve_dry_run(struct serve_args *a)
{
	const char *files[] = { a->sc.image, a->cfg.backing };
	struct recomp_opt recomp[UZRAM_MAX_RECOMP];
	struct uzram *dev = NULL;
	struct stat sb;
	int r;

	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		if (files[i] && strncmp(files[i], "nbd", 3) &&
		    stat(files[i], &sb) < 0 && !serve_dir_writable(files[i])) {
			report_error("serve", "%s: cannot write in its "
				"directory: %s", files[i], strerror(errno));
			return 1;
		}
	}
	a->cfg.backing = NULL;
	memcpy(recomp, a->recomp, sizeof recomp);
	for (int i = 0; i < a->nrecomp; i++)
		recomp[i].dict = NULL;
	r = serve_open_device(&a->cfg, NULL, NULL, a->size_set, a->algo_set,
			      a->cluster_set, &dev);
	if (!r)
		r = serve_add_recomp(dev, recomp, a->nrecomp,
				     a->cfg.fast_algorithm ? 2 : 1);
	if (!r)
		printf("uzram %s: --dry-run: a %llu-byte %s device%s%s%s of "
		       "%u-byte clusters; not served\n", report_name("serve"),
		       (unsigned long long)uzram_size(dev),
		       serve_algorithm(&a->cfg, dev),
		       a->cfg.fast_algorithm ? " (written with " : "",
		       a->cfg.fast_algorithm ? uzram_algorithm(dev, 0) : "",
		       a->cfg.fast_algorithm ? " first)" : "",
		       uzram_cluster_size(dev));
	uzram_close(dev);
	return r;
}

/* cmd_serve()'s --ublk, as the server's other front end. */
struct serve_ublk {
	struct uzram *dev;
	const struct ublk_opts *opts;
	struct ublk_front *front;
	struct swapfree *sf;     /* --swap: the probe of its freed slots,
				  * loaded before it serves (or NULL) */
};

static int serve_ublk_start(void *arg)
{
	struct serve_ublk *u = arg;
	char path[32];

	if (ublk_front_start(u->dev, u->opts, "serve", &u->front) < 0)
		return -1;
	snprintf(path, sizeof path, "/dev/ublkb%d", ublk_front_id(u->front));
	setenv("ublk_dev", path, 1); /* for --run's command */
	printf("uzram %s: block device %s\n", report_name("serve"), path);
	fflush(stdout);
	serve_swap_freed(&u->sf, u->dev, path);
	return 0;
}

static void serve_ublk_stop(void *arg)
{
	struct serve_ublk *u = arg;

	(void)ublk_front_stop(u->front, "serve");
	u->front = NULL;
	serve_swap_freed_end(u->sf); /* no write runs its hook now */
	u->sf = NULL;
}

/* SIGUSR2 on a kept store: the device to the next server (doc/keep.md). */
static void serve_ublk_leave(void *arg)
{
	struct serve_ublk *u = arg;
	int id = u->front ? ublk_front_id(u->front) : -1;

	if (ublk_front_leave(u->front) < 0) {
		serve_ublk_stop(arg);
		return;
	}
	report_error("serve", "left ublk device %d to the next server", id);
	u->front = NULL;
	/* the queues are parked: no write runs its hook, and the device
	 * closes next (its drain thread touched a closed one: v44) */
	serve_swap_freed_end(u->sf);
	u->sf = NULL;
}

/* Whether --swap hears of freed slots: --freed-slots, else ublk's own. */
static bool serve_freed_wanted(const struct serve_args *a)
{
	return a->swap && (a->freed_slots ? strcmp(a->freed_slots, "off") != 0 :
			   a->ublk);
}

/*
 * The freed slots' probe, before a standby waits: adopted under a swap
 * storm, it must not read the kernel's BTF then (swapfree.h). A keeper's
 * server takes the keeper's (--freed-slots-fds): v44's adoption after a
 * kill during the previous one stalled in reclaim in 2 boots of 11 when
 * each server loaded its own. A server on a kept store without a keeper
 * loads one only if --freed-slots says so.
 */
static struct swapfree *serve_freed_load(const struct serve_args *a)
{
	if (!serve_freed_wanted(a))
		return NULL;
	if (a->freed_fds)
		return serve_swap_freed_adopt(a->freed_fds);
	if (a->cfg.keep_fd >= 0 && !a->freed_slots)
		return NULL;
	return serve_swap_freed_load();
}

/* The server's buffer and connection limits, and --swap's ublk copy mode. */
static void serve_limits(struct serve_args *a)
{
	if (!a->sc.buffer_limit)
		a->sc.buffer_limit = nbd_default_buffer_limit();
	if (!a->max_given) /* from the buffer limit unless given */
		a->sc.max_connections =
			nbd_default_max_connections(a->sc.buffer_limit);
	/* swap: one buffer per queue, not per tag, where the kernel can */
	if (a->swap && !a->ublk_copy_set)
		a->uo.copy = UBLK_COPY_LEAST_MEMORY;
	/* swap: no queue thread faults or takes the mmap lock (ublk/queue.c) */
	a->uo.resident_buffers = a->swap;
	a->sc.resident_buffers = a->swap;
	/* swap: the tier's file is no file system's business (as a swap file) */
	if (a->swap)
		a->cfg.backing_flags |= UZRAM_BACKING_BLOCKS;
}

/* The device of the options, ready to serve: 0, or the exit status. */
static int serve_device(struct serve_args *a, struct uzram **dev)
{
	int r = serve_open_device(&a->cfg, a->sc.image, a->dict_path,
				  a->size_set, a->algo_set, a->cluster_set,
				  dev);

	if (!r)
		r = serve_add_recomp(*dev, a->recomp, a->nrecomp,
				     a->cfg.fast_algorithm ? 2 : 1);
	if (!r && a->wb_limit)
		r = serve_set_wb_limit(*dev, a->wb_limit);
	if (!r)
		serve_keep_report(*dev);
	if (!r && a->swap && serve_swap_ready(*dev, &a->cfg) < 0)
		r = 1;
	return r;
}

int cmd_serve(int argc, char **argv)
{
	return serve_as(&serve_cmd, argc, argv);
}

int serve_as(const struct cli_command *cmd, int argc, char **argv)
{
	struct serve_args a = {
		.sc = { .export = { .name = "" } },
		.tc = { .mode = NBD_TLS_OFF },
	};
	struct nbd_tls *tls = NULL;
	struct uzram *dev = NULL;
	struct swapfree *sf = NULL;
	struct serve_ublk ublk = { .opts = &a.uo };
	struct nbd_frontend ublk_frontend = {
		serve_ublk_start, serve_ublk_stop, &ublk, NULL,
	};
	char desc[256];
	bool busy;
	char **args = serve_keep_args(argc, argv);
	int r;

	uzram_config_init(&a.cfg);
	a.cmd = cmd;
	a.cfg.size = 1ull << 30;
	a.uo.dev_id = -1;
	a.standby_fd = -1;
	a.nbd_index = -1;
	r = cli_parse(cmd, argc, argv, serve_take, &a);
	if (r >= 0 || (r = serve_address(&a, argc, argv)) != 0 ||
	    (a.keeper && !a.dry_run &&
	     (r = serve_keeper(args, a.ublk, a.uo.dev_id, a.nbd_index,
			       serve_freed_wanted(&a))) >= 0)) {
		free(args);
		return r;
	}
	free(args);
	serve_fast_default(&a);
	if (a.dry_run)
		return serve_dry_run(&a);
	if (a.cfg.keep_fd >= 0 && a.ublk) {
		a.uo.recovery = true;
		a.uo.reissue = true;
	}
	if (a.tc.mode != NBD_TLS_OFF && !(tls = nbd_tls_new(&a.tc)))
		return 1;
	a.sc.export.tls = tls;
	serve_limits(&a);
	if (a.swap && serve_swap_begin() < 0) {
		nbd_tls_free(tls);
		return 1;
	}
	sf = serve_freed_load(&a);
	if (a.standby_fd >= 0 && serve_keep_standby(a.standby_fd, &a.cfg) < 0) {
		serve_swap_freed_end(sf);
		serve_swap_end();
		nbd_tls_free(tls);
		return 0;       /* the keeper needs this standby no more */
	}
	r = serve_device(&a, &dev);
	if (r) {
		serve_swap_freed_end(sf);
		serve_swap_end();
		uzram_close(dev);
		nbd_tls_free(tls);
		return r;
	}
	a.sc.algorithm = serve_algorithm(&a.cfg, dev);
	a.sc.export.dev = dev;
	a.sc.export.size = uzram_size(dev);
	snprintf(desc, sizeof desc, "uzram %s device", a.sc.algorithm);
	a.sc.export.description = desc;
	a.sc.image_opened = a.cfg.image != NULL;
	a.sc.prog = cli_prog;
	if (a.ublk) {
		ublk.dev = dev;
		if (!a.freed_slots) { /* its own device's, when it exists */
			ublk.sf = sf;
			sf = NULL;
		}
		a.uo.read_only = a.sc.export.read_only;
		a.sc.frontend = &ublk_frontend;
		if (a.cfg.keep_fd >= 0) /* a new server can adopt the store */
			ublk_frontend.leave = serve_ublk_leave;
	}
	serve_swap_freed(&sf, dev, a.freed_slots); /* --freed-slots DEVICE */
	r = nbd_server_run(&a.sc, &busy);
	serve_swap_end();
	if (!busy) { /* else a stuck client thread may still use them */
		serve_swap_freed_end(sf);
		serve_swap_freed_end(ublk.sf); /* set if no stop or leave ran */
		uzram_close(dev);
		nbd_tls_free(tls);
	}
	return r;
}
