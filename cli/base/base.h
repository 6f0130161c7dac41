/* SPDX-License-Identifier: MIT */
/*
 * base.h - what every subcommand of the uzram program shares (cli/base/):
 * the option tables and their parser, the usage text, number and size
 * parsing, the library's last message. Uses only the public API in
 * uzram.h.
 */
#ifndef UZRAM_CLI_BASE_H
#define UZRAM_CLI_BASE_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../../common/report.h"

/* options.c */

/*
 * uzram_last_error() without the library call's name it starts with
 * (common/lib_message.h): what a command prints after its own words.
 */
const char *cli_lib_error(void);

/*
 * A share of RAM for a default size: pages * page_size / div, at most cap
 * (0: none), rounded down to whole 4K pages, which the device takes. Half
 * of an odd number of pages is not one (uzram mount's default on a 24 GiB
 * machine once was 12638078976 bytes).
 */
unsigned long long ram_share(unsigned long long pages,
			     unsigned long long page_size, unsigned div,
			     unsigned long long cap);

/*
 * The connections `uzram swapon` gives /dev/nbdN: one per CPU, up to 4.
 * The kernel makes a hardware queue of each (blk-mq maps the CPUs to
 * them), so a swap-in waits behind the writes of its own queue only, not
 * behind all of them on one socket (BENCHMARKS.md, "The random workload
 * through uzram swapon": two took 165-171 s where one took 183-184 s).
 */
int swap_nbd_connections(void);

/* Parse "123", "4K", "1.5G" (powers of 1024) into bytes; 0 or -EINVAL. */
int parse_size(const char *s, unsigned long long *out);
/*
 * A size of memory (a device's, a memory limit): parse_size()'s, or "N%"
 * of RAM as tmpfs's size=N% reads it, rounded down to whole 4 KiB pages;
 * 0 or -EINVAL.
 */
int parse_mem_size(const char *s, unsigned long long *out);

/* "PORT", "HOST:PORT" or "[V6ADDR]:PORT" in place; host defaults to
 * 127.0.0.1, PORT is 0 to 65535 (0: the server picks one). 0 or -1. */
int split_hostport(char *arg, const char **host, const char **port);
/* A decimal number, digits only, at most max; 0 or -1. */
int parse_uint(const char *s, unsigned long long max, unsigned long long *out);

/*
 * A compression level: decimal, from -UZRAM_CLI_MAX_LEVEL to
 * UZRAM_CLI_MAX_LEVEL (each codec then checks its own range). 0 or -EINVAL.
 */
#define UZRAM_CLI_MAX_LEVEL 1000
int parse_level(const char *s, int *level);

/*
 * Parse "NAME" or "NAME:LEVEL" (an algorithm and its level, 0 if none) in
 * place: *name points into s afterwards. 0 or -EINVAL.
 */
int parse_algo_level(char *s, const char **name, int *level);

/*
 * The same for "NAME[:LEVEL][:dict=PATH]": *dict points at PATH in s, or
 * is NULL. 0 or -EINVAL.
 */
int parse_algo_spec(char *s, const char **name, int *level, const char **dict);

/*
 * Read the dictionary file at path into a new buffer (*buf, *len; the
 * caller frees it), up to one byte more than the library takes, so that
 * its own check names a file too large. Says what failed on stderr,
 * prefixed by "uzram CMD:". 0 or a negative errno.
 */
int read_dict(const char *cmd, const char *path, void **buf, size_t *len);

/*
 * The process ID a pid file (a server's, a keeper's) holds; 0 when the
 * file is missing or holds no number. Whether that process still runs is
 * the caller's question.
 */
pid_t read_pid_file(const char *path);

/*
 * One option of a subcommand, for the parser and for --help alike. key is
 * what the parser hands over: a letter, which is also the short option
 * when it is in the command's shorts. The table ends with an all-zero
 * entry.
 */
struct cli_option {
	const char *name;  /* long name without "--"; NULL: short only */
	int key;
	int has_arg;       /* getopt's no_argument or required_argument */
	const char *arg;   /* the value's name for --help, or NULL */
	const char *help;  /* --help's text; lines separated by "\n" */
};

/* A COMMAND operand of a subcommand (`uzram ctl compact`). */
struct cli_word {
	const char *name;  /* "idle" */
	const char *args;  /* "[SECONDS]", or NULL */
	const char *help;  /* lines separated by "\n" */
};

struct cli_command {
	const char *name;              /* "serve": messages say "uzram serve: " */
	const char *operands;          /* after the options in the usage: "DIR" */
	const char *summary;           /* lines after the usage line, or NULL */
	const char *shorts;            /* getopt's short options: "o:fh" */
	const struct cli_option *opts;
	void (*footer)(FILE *f);       /* prints after the options, or NULL */
	const char *brief;             /* what it does, in a few lowercase words:
					* the top-level usage, the man page's NAME */
	const struct cli_word *words;  /* the COMMANDs it takes as operands,
					* ending with an all-NULL entry; or NULL */
};

/* The codec's options, the same in every subcommand that makes a device. */
#define CLI_CODEC_OPTIONS \
	{ "algorithm", 'a', required_argument, "ALGO", \
	  "the compression algorithm (default lz4)" }, \
	{ "level", 'l', required_argument, "N", \
	  "its level (default: its own)" }, \
	{ "cluster", 'C', required_argument, "4K..64K", \
	  "pages compressed together (default 4K)" }

#define CLI_BAD_VALUE (-1)
#define CLI_USAGE     (-2)

/*
 * For a take function (below): the value is bad, and fmt says what a good
 * one is ("at most 64"), in place of what the option's kind suggests.
 * Returns CLI_BAD_VALUE.
 */
int cli_bad_value(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * A device's size for a take function: SIZE as parse_mem_size() reads it, at
 * least min bytes, never 0, in whole 4 KiB pages. 0, or CLI_BAD_VALUE with
 * the reason (cli_bad_value()).
 */
int cli_take_size(const char *arg, unsigned long long min,
		  unsigned long long *out);

/* --cluster: a power of two from 4K to 64K; 0 or CLI_BAD_VALUE. */
int cli_take_cluster(const char *arg, unsigned long long *out);

/*
 * Parse argv's options with cmd's table: take(ctx, key, value) gets each
 * (NULL: the table has only 'h')
 * and returns 0, CLI_BAD_VALUE (the parser says "uzram CMD: bad value 'V'
 * for --NAME" and returns 2), CLI_USAGE (take said what is wrong, if
 * anything; the parser prints the usage on stderr and returns 2) or an
 * exit status to stop with. 'h' prints the usage on stdout and returns 0;
 * an unknown option or a missing value is named ("uzram CMD: unknown
 * option '--x'", "uzram CMD: --x needs a value"), then the usage goes to
 * stderr and the status is 2. Returns -1 once all options are taken
 * (optind is then at the first operand), else the exit status.
 */
int cli_parse(const struct cli_command *cmd, int argc, char **argv,
	      int (*take)(void *ctx, int key, char *arg), void *ctx);
/* The entry of opts for key, or NULL. */
const struct cli_option *cli_find(const struct cli_option *opts, int key);
/*
 * The program as the user ran it, when that was a path (build/uzram), so
 * that the commands printed for them to copy run as printed; else "uzram".
 */
extern const char *cli_prog;

/* The usage and every option's help, from cmd's table. */
void cli_usage(const struct cli_command *cmd, FILE *f);
/*
 * A bad command line: "uzram NAME: MESSAGE" and where the help is, on
 * stderr (git's way: the error, not the whole help, which scrolls it
 * away). Returns 2, the exit status of a usage error.
 */
int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* UZRAM_CLI_BASE_H */
