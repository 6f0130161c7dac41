// SPDX-License-Identifier: MIT
/*
 * options.c - the subcommands' options: the values several of them take
 * (sizes, levels, "ALGO[:LEVEL][:dict=PATH]", dictionary files), and one
 * parser for all, driven by a table with one entry per option from which
 * both getopt_long's table and the --help text are made.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uzram.h"
#include "base.h"
#include "../../common/lib_message.h"

int parse_level(const char *s, int *level)
{
	char *end;
	long l;

	errno = 0;
	l = strtol(s, &end, 10);
	if (!*s || *end || errno || l < -UZRAM_CLI_MAX_LEVEL ||
	    l > UZRAM_CLI_MAX_LEVEL)
		return -EINVAL;
	*level = (int)l;
	return 0;
}

int parse_algo_level(char *s, const char **name, int *level)
{
	char *colon = strchr(s, ':');
	int l = 0;

	if (colon && parse_level(colon + 1, &l) < 0)
		return -EINVAL;
	if (s == colon || !*s)
		return -EINVAL;
	if (colon)
		*colon = '\0';
	*name = s;
	*level = l;
	return 0;
}

int parse_algo_spec(char *s, const char **name, int *level, const char **dict)
{
	char *d = strstr(s, ":dict=");

	*dict = NULL;
	if (d) {
		*d = '\0';
		*dict = d + strlen(":dict=");
		if (!**dict)
			return -EINVAL;
	}
	return parse_algo_level(s, name, level);
}

pid_t read_pid_file(const char *path)
{
	FILE *f = fopen(path, "re");
	long pid = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1 || pid < 0)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}

int read_dict(const char *cmd, const char *path, void **buf, size_t *len)
{
	/* the library takes 1 MiB at most; one byte more tells it is too big */
	const size_t max = (1u << 20) + 1;
	unsigned char *b = malloc(max);
	size_t n = 0;
	ssize_t r;
	int fd;

	if (!b) {
		report_error(cmd, "out of memory");
		return -ENOMEM;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		report_error(cmd, "cannot open dictionary %s: %s", path,
			     strerror(errno));
		free(b);
		return -errno;
	}
	while (n < max && (r = read(fd, b + n, max - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			report_error(cmd, "cannot read dictionary %s: %s",
				     path, strerror(errno));
			close(fd);
			free(b);
			return -EIO;
		}
		n += (size_t)r;
	}
	close(fd);
	*buf = b;
	*len = n;
	return 0;
}

int parse_size(const char *s, unsigned long long *out)
{
	char *end;
	double v;

	/* Plain decimals only: strtod would also take " -1", "+5", "0x10",
	 * "1e3" and "nan". */
	size_t digits = strspn(s, "0123456789.");

	if (digits == 0)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end != s + digits || v < 0)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v *= 1024.0; end++; break;
	case 'm': case 'M': v *= 1024.0 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': v *= 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end == 'i' && end[-1] != *s) /* accept "KiB" spellings too */
		end++;
	if (*end == 'B')
		end++;
	if (*end != '\0' || v >= 18446744073709551616.0)
		return -EINVAL;
	*out = (unsigned long long)v;
	return 0;
}

int parse_mem_size(const char *s, unsigned long long *out)
{
	size_t len = strlen(s), digits = strspn(s, "0123456789.");
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	char *end;
	double pct;

	if (!len || s[len - 1] != '%')
		return parse_size(s, out);
	/* plain decimals, as parse_size() takes them */
	if (!digits || digits != len - 1 || pages <= 0 || page <= 0)
		return -EINVAL;
	errno = 0;
	pct = strtod(s, &end);
	if (errno || end != s + digits || pct > 1e6)
		return -EINVAL;
	*out = (unsigned long long)((double)pages * (double)page * pct / 100) &
	       ~(unsigned long long)(UZRAM_PAGE_SIZE - 1);
	return 0;
}

/* "PORT", "HOST:PORT" or "[V6ADDR]:PORT"; host defaults to 127.0.0.1. */
/* A port is a number, 0 (pick a free one, for a server) to 65535. */
static bool port_valid(const char *port)
{
	unsigned long long n;

	return port[0] >= '0' && port[0] <= '9' &&
	       parse_uint(port, 65535, &n) == 0;
}

int split_hostport(char *arg, const char **host, const char **port)
{
	char *colon;

	*host = "127.0.0.1";
	if (arg[0] == '[') {
		char *end = strchr(arg, ']');

		if (!end || end[1] != ':' || !end[2])
			return -1;
		if (!port_valid(end + 2))
			return -1;
		*end = '\0';
		*host = arg + 1;
		*port = end + 2;
		return 0;
	}
	colon = strrchr(arg, ':');
	if (!port_valid(colon ? colon + 1 : arg))
		return -1; /* arg left whole, for the message */
	if (!colon) {
		*port = arg;
	} else {
		*colon = '\0';
		if (colon != arg)
			*host = arg;
		*port = colon + 1;
	}
	return 0;
}

int parse_uint(const char *s, unsigned long long max,
		      unsigned long long *out)
{
	char *end;

	if (*s < '0' || *s > '9') /* strtoull would take " -1" and "+5" */
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end || *out > max ? -1 : 0;
}

/* ---- one parser for the subcommands' options ---- */

#define CLI_MAX_OPTIONS 48
#define HELP_COLUMN     26 /* where the help text starts */

const struct cli_option *cli_find(const struct cli_option *opts, int key)
{
	for (; opts->name || opts->key; opts++)
		if (opts->key == key)
			return opts;
	return NULL;
}

/* The option's left column: "-o, --name ARG", as far as it has each. */
static int option_title(const struct cli_option *o, const char *shorts,
			char *out, size_t n)
{
	char letter[8] = "";

	if (o->key > 0 && o->key < 128 && strchr(shorts, o->key))
		snprintf(letter, sizeof letter, "-%c%s", o->key,
			 o->name ? ", " : (o->arg ? " " : ""));
	return snprintf(out, n, "%s%s%s%s%s", letter, o->name ? "--" : "",
			o->name ? o->name : "",
			o->name && o->arg && strncmp(o->arg, "[=", 2) ? " " : "",
			o->arg ? o->arg : "");
}

void cli_usage(const struct cli_command *cmd, FILE *f)
{
	char title[80];

	fprintf(f, "usage: uzram %s [OPTION]...%s%s\n", cmd->name,
		cmd->operands ? " " : "", cmd->operands ? cmd->operands : "");
	if (cmd->summary)
		fprintf(f, "%s", cmd->summary);
	for (const struct cli_option *o = cmd->opts; o->name || o->key; o++) {
		const char *line = o->help, *nl;
		int w = option_title(o, cmd->shorts, title, sizeof title);

		fprintf(f, "  %s", title);
		if (w + 2 >= HELP_COLUMN - 1) {
			fputc('\n', f);
			w = -2;
		}
		for (; line; line = nl ? nl + 1 : NULL) {
			nl = strchr(line, '\n');
			fprintf(f, "%*s%.*s\n", HELP_COLUMN - 2 - w, "",
				nl ? (int)(nl - line) : (int)strlen(line), line);
			w = -2;
		}
	}
	if (cmd->footer)
		cmd->footer(f);
}

const char *cli_prog = "uzram";

int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "uzram %s: ", report_name(cmd->name));
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nsee `uzram %s --help`\n", report_name(cmd->name));
	return 2;
}

/* Why the last value was bad, when a take function said (cli_bad_value()). */
static char bad_why[160];

int cli_bad_value(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(bad_why, sizeof bad_why, fmt, ap);
	va_end(ap);
	return CLI_BAD_VALUE;
}

/* n bytes as the largest unit that divides it: 16M, 4K, 100. */
static void size_words(unsigned long long n, char *out, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && n && n % 1024 == 0) {
		n /= 1024;
		u++;
	}
	snprintf(out, len, u < 0 ? "%llu" : "%llu%c", n, u < 0 ? 0 : units[u]);
}

int cli_take_size(const char *arg, unsigned long long min,
		  unsigned long long *out)
{
	char words[32];

	if (parse_mem_size(arg, out) < 0)
		return CLI_BAD_VALUE;
	if (*out == 0)
		return cli_bad_value("more than 0 bytes (0 holds nothing)");
	size_words(min, words, sizeof words);
	if (*out < min)
		return cli_bad_value("at least %s", words);
	size_words(UZRAM_SIZE_MAX, words, sizeof words);
	if (*out > UZRAM_SIZE_MAX)
		return cli_bad_value("at most %s, the largest device", words);
	size_words((*out + 4095) & ~4095ull, words, sizeof words);
	if (*out % 4096)
		return cli_bad_value("whole 4K pages, such as %s", words);
	return 0;
}

unsigned long long ram_share(unsigned long long pages,
			     unsigned long long page_size, unsigned div,
			     unsigned long long cap)
{
	unsigned long long v = pages * page_size / div;

	if (cap && v > cap)
		v = cap;
	return v & ~(unsigned long long)(UZRAM_PAGE_SIZE - 1);
}

int swap_nbd_connections(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

int cli_take_cluster(const char *arg, unsigned long long *out)
{
	if (parse_size(arg, out) < 0 || *out < UZRAM_PAGE_SIZE ||
	    *out > 16 * UZRAM_PAGE_SIZE || (*out & (*out - 1)))
		return CLI_BAD_VALUE;
	return 0;
}

/* What a value of o must look like, for the message about a bad one. */
static const char *value_hint(const struct cli_option *o)
{
	const char *a = o->arg ? o->arg : "";

	if (!strcmp(o->name ? o->name : "", "level"))
		return "a whole number (each algorithm has its own range)";
	if (!strcmp(a, "SIZE") && o->name && (!strcmp(o->name, "size") ||
					      !strcmp(o->name, "mem-limit")))
		return "bytes, a number with K, M, G or T (powers of 1024), or "
		       "a share of RAM: 4096, 64M, 1.5G, 2GiB, 25%";
	if (!strcmp(a, "SIZE"))
		return "bytes, or a number with K, M, G or T (powers of 1024): "
		       "4096, 64M, 1.5G, 2GiB";
	if (!strcmp(a, "4K..64K"))
		return "a power of two from 4K to 64K";
	if (!strcmp(a, "N") || !strcmp(a, "SECONDS"))
		return "a whole number";
	if (!strcmp(a, "PCT"))
		return "a percentage, 0 to 100";
	if (strchr(a, '|') && strspn(a, "abcdefghijklmnopqrstuvwxyz0-9|") ==
	    strlen(a))
		return a; /* off|on|require: the choices */
	return NULL;
}

/* After getopt_long() returned '?' or ':' (missing value): say which. */
static void option_error(const struct cli_command *cmd, int key, char **argv)
{
	const char *arg = argv[optind - 1];
	char letter[3] = { '-', (char)optopt, '\0' };

	if (strncmp(arg, "--", 2)) /* a short one, maybe inside -fx */
		arg = letter;
	if (key == ':')
		report_error(cmd->name, "%s needs a value", arg);
	else
		report_error(cmd->name, "unknown option '%s'", arg);
}

int cli_parse(const struct cli_command *cmd, int argc, char **argv,
	      int (*take)(void *ctx, int key, char *arg), void *ctx)
{
	struct option lopts[CLI_MAX_OPTIONS + 1];
	const struct cli_option *o;
	char shorts[64];
	size_t n = 0;
	int key, r;

	for (o = cmd->opts; o->name || o->key; o++)
		if (o->name && n < CLI_MAX_OPTIONS)
			lopts[n++] = (struct option){ o->name, o->has_arg,
						      NULL, o->key };
	lopts[n] = (struct option){ NULL, 0, NULL, 0 };
	/* ':' first: getopt prints nothing and tells a missing value apart */
	snprintf(shorts, sizeof shorts, ":%s", cmd->shorts);
	opterr = 0;
	while ((key = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		if (key == 'h') {
			cli_usage(cmd, stdout);
			return 0;
		}
		o = cli_find(cmd->opts, key);
		if (!o || key == '?' || key == ':') {
			option_error(cmd, key, argv);
			fprintf(stderr, "see `uzram %s --help`\n",
				report_name(cmd->name));
			return 2;
		}
		r = take ? take(ctx, key, optarg) : 2;
		if (r == CLI_BAD_VALUE) {
			const char *hint = bad_why[0] ? bad_why : value_hint(o);

			report_error(cmd->name, "bad value '%s' for --%s%s%s",
				     optarg, o->name, hint ? "; want " : "",
				     hint ? hint : "");
			bad_why[0] = '\0';
		}
		if (r == CLI_USAGE)
			fprintf(stderr, "see `uzram %s --help`\n",
				report_name(cmd->name));
		if (r == CLI_BAD_VALUE || r == CLI_USAGE)
			return 2;
		if (r)
			return r;
	}
	return -1;
}

const char *cli_lib_error(void)
{
	return lib_message(uzram_last_error());
}
