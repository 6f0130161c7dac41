// SPDX-License-Identifier: MIT
/*
 * client.c - `uzram stat` (a running server's figures) and `uzram ctl`
 * (commands for it): both find the server's control socket from where the
 * server is, send one request line and print the reply (nbd_server_ctl()).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uzram.h"
#include "cli.h"
#include "../ctl/ctl.h"

/* Where the server is: the options of `uzram stat` and `uzram ctl`. */
#define CLIENT_OPTIONS \
	{ "socket", 'S', required_argument, "PATH", \
	  "the server's Unix socket (default ./uzram.sock)" }, \
	{ "tcp", 't', required_argument, "[HOST:]PORT", \
	  "the server's TCP port (HOST: 127.0.0.1 by default)" }, \
	{ "ctl-socket", 'X', required_argument, "PATH", \
	  "the server's control socket, if it was given one" }, \
	{ "mount", 'M', required_argument, "DIR", \
	  "the server behind `uzram mount DIR`" }, \
	{ "help", 'h', no_argument, NULL, "this text" }

static const struct cli_option stat_opts[] = {
	CLIENT_OPTIONS,
	{ "json", 'j', no_argument, NULL, "every figure, as one JSON object" },
	{ "bytes", 'b', no_argument, NULL,
	  "the summary's sizes in bytes, not in K, M, G" },
	{ "all", 'a', no_argument, NULL,
	  "every figure, one \"name value\" line each, in bytes" },
	{ "prometheus", 'p', no_argument, NULL,
	  "the figures in Prometheus's text format, as for\n"
	  "node_exporter's textfile collector" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_command stat_cmd = {
	.name = "stat",
	.summary = "The figures of a running server, as zramctl gives zram's: sizes in units,\n"
		   "the compression ratio, memory, pages, clients. --json and --all give\n"
		   "every figure (zram's mm_stat and io_stat, and the server's own).\n",
	.shorts = "h",
	.opts = stat_opts,
	.brief = "print the figures of a running server",
};

static const struct cli_option ctl_opts[] = {
	CLIENT_OPTIONS,
	{ NULL, 0, 0, NULL, NULL },
};

/* The COMMANDs of `uzram ctl`: its usage, the man pages, the completion. */
static const struct cli_word ctl_words[] = {
	{ "compact", NULL,
	  "move objects out of sparse allocator pages, give back\n"
	  "what is empty (zram's compact)" },
	{ "mem-limit", "SIZE",
	  "change the memory limit; 0 removes it (zram's mem_limit)" },
	{ "reset-max", NULL, "restart mem_used_max from mem_used_total" },
	{ "idle", "[SECONDS]",
	  "mark every stored page idle until it is next read or\n"
	  "written (zram's idle); with SECONDS, only what was\n"
	  "not read or written for that long" },
	{ "recompress", "[type=huge|idle|huge_idle] [threshold=SIZE] [priority=N]",
	  "re-encode stored pages with a --recomp-algorithm of the\n"
	  "server (priority 1 by default), all or only huge or idle ones,\n"
	  "at least threshold bytes compressed (zram's recompress)" },
	{ "writeback",
	  "[type=huge|idle|huge_idle|incompressible] [pages=LO-HI] [limit=N]",
	  "move stored pages to the backing store, largest first: all,\n"
	  "huge, idle, both, or huge ones recompression could not shrink;\n"
	  "pages LO to HI only; at most N pages (zram's writeback)" },
	{ "writeback-limit", "N|off",
	  "let writeback write at most N more pages, or no limit\n"
	  "(zram's writeback_limit and writeback_limit_enable)" },
	{ "backing-compact", NULL,
	  "move the live objects of mostly dead backing store\n"
	  "segments together and give the rest back" },
	{ "train-dict", "[priority=N] [size=SIZE]",
	  "train a dictionary (64 KiB by default) for the algorithm\n"
	  "of a priority (0: the device's) from the stored data, keep\n"
	  "it if it saves 2% on a second sample, re-encode with it" },
	{ "save", "[IMAGE]",
	  "save the device to IMAGE, or to the server's --image,\n"
	  "while it serves (uzram_save); not a mount's (its tree\n"
	  "is saved at umount: uzram mount --image)" },
	{ NULL, NULL, NULL },
};

static void ctl_commands(FILE *f)
{
	fprintf(f, "commands:\n");
	for (const struct cli_word *w = ctl_words; w->name; w++)
		fprintf(f, "  %s %s%s%s\n", w == ctl_words ? " " : "|", w->name,
			w->args ? " " : "", w->args ? w->args : "");
	for (const struct cli_word *w = ctl_words; w->name; w++) {
		const char *line = w->help, *nl;
		int col = fprintf(f, "  %s", w->name);

		for (; line; line = nl ? nl + 1 : NULL, col = 0) {
			nl = strchr(line, '\n');
			if (col >= 17) {
				fputc('\n', f);
				col = 0;
			}
			fprintf(f, "%*s%.*s\n", 17 - col, "",
				nl ? (int)(nl - line) : (int)strlen(line), line);
		}
	}
}

const struct cli_command ctl_cmd = {
	.name = "ctl",
	.operands = "COMMAND [ARG]...",
	.summary = "Send a command to a running server.\n",
	.shorts = "h",
	.opts = ctl_opts,
	.footer = ctl_commands,
	.brief = "send a command to a running server",
	.words = ctl_words,
};

/* What stat is asked for: its output options. */
struct stat_want {
	bool json, prom, bytes, all;
};

/* What stat's and ctl's options say (client_options()). */
struct client_args {
	const char *who;
	const char *sock, *ctl, *port;
	struct stat_want *want; /* stat's; NULL for ctl */
};

static int client_take(void *ctx, int key, char *arg)
{
	static char msock[PATH_MAX];
	struct client_args *a = ctx;
	const char *host;

	switch (key) {
	case 'S':
		a->sock = arg;
		return 0;
	case 'M':
		if (mount_socket_path(a->who, arg, msock, sizeof msock) < 0)
			return 1;
		a->sock = msock;
		return 0;
	case 'X':
		a->ctl = arg;
		return 0;
	case 't':
		if (split_hostport(arg, &host, &a->port) < 0 ||
		    !strcmp(a->port, "0")) {
			report_error(a->who, "bad --tcp '%s', want [HOST:]PORT "
				     "with PORT 1-65535", arg);
			return 2;
		}
		return 0;
	case 'j':
		a->want->json = true;
		return 0;
	case 'p':
		a->want->prom = true;
		return 0;
	case 'b':
		a->want->bytes = true;
		return 0;
	case 'a':
		a->want->all = true;
		return 0;
	default:
		return 2; /* not in the tables */
	}
}

/*
 * The options of stat and ctl (cmd): where the server is (--socket PATH,
 * --tcp [HOST:]PORT, --ctl-socket PATH, or --mount DIR, a directory of
 * `uzram mount`; ./uzram.sock by default), --help, and stat's --json and
 * --prometheus.
 * Puts the control socket's path in path (PATH_MAX bytes). Returns -1 to
 * go on, or the exit status.
 */
static int client_options(int argc, char **argv, const struct cli_command *cmd,
			  const char *who, char *path, struct stat_want *want)
{
	struct client_args a = { .who = who, .want = want };
	int r = cli_parse(cmd, argc, argv, client_take, &a);

	if (r >= 0)
		return r;
	if (!!a.sock + !!a.ctl + !!a.port > 1) {
		report_error(who, "--socket (or --mount), --tcp and "
			"--ctl-socket are exclusive");
		return 2;
	}
	if (!a.sock && !a.ctl && !a.port)
		a.sock = "uzram.sock";
	return ctl_path_find(a.ctl, a.sock, a.port, false, who, path,
			     PATH_MAX) < 0 ? 1 : -1;
}

int cmd_stat(int argc, char **argv)
{
	static char reply[NBD_CTL_REPLY_MAX];
	char path[PATH_MAX];
	struct stat_want w = { 0 };
	int r = client_options(argc, argv, &stat_cmd, "stat", path, &w);

	if (r >= 0)
		return r;
	if (optind != argc)
		return cli_usage_error(&stat_cmd, "unexpected argument '%s'",
				       argv[optind]);
	if (w.json + w.prom + w.all + w.bytes > 1)
		return cli_usage_error(&stat_cmd, "--json, --prometheus, --all "
				       "and --bytes are exclusive");
	if (w.json || w.prom || w.all)
		return nbd_server_ctl(path, w.json ? "json\n" : w.prom ?
				      "prometheus\n" : "text\n", "stat");
	r = nbd_server_ask(path, "json\n", "stat", reply, sizeof reply);
	return r ? r : stat_summary(reply, w.bytes, stdout);
}

/* "recompress [type=huge|idle|huge_idle] [threshold=SIZE] [priority=N]" */
static int recompress_request(int argc, char **argv, char *req, size_t n)
{
	unsigned long long threshold = 0, prio = 1;
	unsigned flags = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "type=huge"))
			flags |= UZRAM_RECOMP_HUGE;
		else if (!strcmp(a, "type=idle"))
			flags |= UZRAM_RECOMP_IDLE;
		else if (!strcmp(a, "type=huge_idle"))
			flags |= UZRAM_RECOMP_HUGE | UZRAM_RECOMP_IDLE;
		else if (!strncmp(a, "threshold=", 10) &&
			 !parse_size(a + 10, &threshold) && threshold <= UINT32_MAX)
			;
		else if (!strncmp(a, "priority=", 9) &&
			 !parse_uint(a + 9, UZRAM_MAX_RECOMP, &prio) && prio > 0)
			;
		else
			return -1;
	}
	snprintf(req, n, "recompress %llu %u %llu\n", prio, flags, threshold);
	return 0;
}

/* "writeback [type=...] [pages=LO-HI] [limit=N]"; pages fit 32 bits */
static int writeback_request(int argc, char **argv, char *req, size_t n)
{
	static const struct { const char *name; unsigned flags; } types[] = {
		{ "type=huge", UZRAM_WB_HUGE }, { "type=idle", UZRAM_WB_IDLE },
		{ "type=huge_idle", UZRAM_WB_HUGE | UZRAM_WB_IDLE },
		{ "type=incompressible", UZRAM_WB_INCOMPRESSIBLE },
	};
	unsigned long long limit = 0, lo = 0, hi = 0;
	bool range = false;
	unsigned flags = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *dash;
		size_t t;

		for (t = 0; t < sizeof types / sizeof types[0]; t++)
			if (!strcmp(a, types[t].name))
				break;
		if (t < sizeof types / sizeof types[0]) {
			flags |= types[t].flags;
		} else if (!strncmp(a, "limit=", 6) &&
			   !parse_uint(a + 6, UINT32_MAX, &limit)) {
			;
		} else if (!strncmp(a, "pages=", 6) &&
			   (dash = strchr(a + 6, '-'))) {
			char lo_s[24];

			if ((size_t)(dash - (a + 6)) >= sizeof lo_s)
				return -1;
			memcpy(lo_s, a + 6, (size_t)(dash - (a + 6)));
			lo_s[dash - (a + 6)] = '\0';
			if (parse_uint(lo_s, UINT32_MAX, &lo) ||
			    parse_uint(dash + 1, UINT32_MAX, &hi) || lo > hi)
				return -1;
			range = true;
		} else {
			return -1;
		}
	}
	if (range)
		snprintf(req, n, "writeback %u %llu %llu %llu\n", flags, limit,
			 lo, hi);
	else
		snprintf(req, n, "writeback %u %llu\n", flags, limit);
	return 0;
}

/* "train-dict [priority=N] [size=SIZE]" */
static int train_request(int argc, char **argv, char *req, size_t n)
{
	unsigned long long prio = 0, size = UZRAM_DICT_DEFAULT_SIZE;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "priority=", 9) &&
		    !parse_uint(a + 9, UZRAM_MAX_RECOMP, &prio))
			;
		else if (!strncmp(a, "size=", 5) && !parse_size(a + 5, &size) &&
			 size <= (1u << 20))
			;
		else {
			report_error("ctl", "bad train-dict argument "
				"'%s'", a);
			return -1;
		}
	}
	snprintf(req, n, "train-dict %llu %llu\n", prio, size);
	return 0;
}

/* save [PATH]: a relative PATH is made absolute, as the server's working
 * directory is not ours. */
static int save_request(int argc, char **argv, char *req, size_t n)
{
	char cwd[PATH_MAX];

	if (argc == 1) {
		snprintf(req, n, "save\n");
		return 0;
	}
	if (argv[1][0] != '/' && !getcwd(cwd, sizeof cwd)) {
		report_error("ctl", "getcwd: %s", strerror(errno));
		return 1;
	}
	if ((size_t)snprintf(req, n, "save %s%s%s\n",
			     argv[1][0] == '/' ? "" : cwd,
			     argv[1][0] == '/' ? "" : "/", argv[1]) >= n ||
	    strchr(argv[1], '\n')) {
		report_error("ctl", "bad path '%s'", argv[1]);
		return 2;
	}
	return 0;
}

/* A command that is none of ctl's, or one with a wrong number of words. */
static int ctl_unknown(int argc, char **argv)
{
	static const char *const known[] = { "compact", "reset-max", "idle",
		"writeback", "writeback-limit", "backing-compact", "train-dict",
		"recompress", "save", "mem-limit" };

	if (argc == 0)
		return cli_usage_error(&ctl_cmd, "no command given");
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (!strcmp(argv[0], known[i]))
			return cli_usage_error(&ctl_cmd, "%s: wrong number of "
					       "arguments (%d)", argv[0],
					       argc - 1);
	return cli_usage_error(&ctl_cmd, "unknown command '%s'", argv[0]);
}

/*
 * The control request for ctl's words argv[0..argc) into req (n bytes):
 * 0, or the exit status after a message.
 */
static int ctl_request(int argc, char **argv, char *req, size_t n)
{
	unsigned long long v;
	const char *cmd = argc ? argv[0] : "";

	if (argc == 1 && (!strcmp(cmd, "compact") || !strcmp(cmd, "reset-max") ||
			  !strcmp(cmd, "idle") ||
			  !strcmp(cmd, "backing-compact"))) {
		snprintf(req, n, "%s\n", cmd);
	} else if (argc == 2 && !strcmp(cmd, "idle")) {
		if (parse_uint(argv[1], UINT32_MAX, &v) < 0) {
			report_error("ctl", "bad seconds '%s'", argv[1]);
			return 2;
		}
		snprintf(req, n, "idle %llu\n", v);
	} else if (argc >= 1 && !strcmp(cmd, "writeback")) {
		if (writeback_request(argc, argv, req, n) < 0)
			return cli_usage_error(&ctl_cmd, "bad arguments for "
					       "writeback");
	} else if (argc == 2 && !strcmp(cmd, "writeback-limit")) {
		if (!strcmp(argv[1], "off"))
			snprintf(req, n, "writeback-limit 0 0\n");
		else if (!parse_uint(argv[1], UINT32_MAX, &v))
			snprintf(req, n, "writeback-limit 1 %llu\n", v);
		else {
			report_error("ctl", "bad page count '%s'", argv[1]);
			return 2;
		}
	} else if (argc >= 1 && !strcmp(cmd, "train-dict")) {
		if (train_request(argc, argv, req, n) < 0)
			return cli_usage_error(&ctl_cmd, "bad arguments for "
					       "train-dict");
	} else if (argc >= 1 && !strcmp(cmd, "recompress")) {
		if (recompress_request(argc, argv, req, n) < 0)
			return cli_usage_error(&ctl_cmd, "bad arguments for "
					       "recompress");
	} else if ((argc == 1 || argc == 2) && !strcmp(cmd, "save")) {
		return save_request(argc, argv, req, n);
	} else if (argc == 2 && !strcmp(cmd, "mem-limit")) {
		if (parse_mem_size(argv[1], &v) < 0) {
			report_error("ctl", "bad size '%s'", argv[1]);
			return 2;
		}
		snprintf(req, n, "mem-limit %llu\n", v);
	} else {
		return ctl_unknown(argc, argv);
	}
	return 0;
}

int cmd_ctl(int argc, char **argv)
{
	char path[PATH_MAX], req[PATH_MAX + 16];
	int r = client_options(argc, argv, &ctl_cmd, "ctl", path, NULL);

	if (r >= 0)
		return r;
	r = ctl_request(argc - optind, argv + optind, req, sizeof req);
	if (r)
		return r;
	return nbd_server_ctl(path, req, "ctl");
}
