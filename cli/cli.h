/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the subcommands of the uzram program. Each one parses its own
 * arguments (argv[0] is the subcommand name) and returns the exit status.
 * They use only the public API in uzram.h.
 */
#ifndef UZRAM_CLI_H
#define UZRAM_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "load/load.h"
#include "mount/mount.h"
#include "serve/serve.h"
#include "swap/swap.h"

int cmd_stat(int argc, char **argv);   /* cli/client.c: ask a running server */
/*
 * cli/stat_text.c: `uzram stat`'s summary for people from the server's
 * JSON figures (sizes in units, or in bytes with bytes); the exit status.
 */
int stat_summary(const char *json, bool bytes, FILE *f);
int cmd_ctl(int argc, char **argv);    /* cli/client.c: control a running server */
int cmd_ublk(int argc, char **argv);   /* cli/ublk.c: ublk devices */

/*
 * Every subcommand's table, in the order the top-level usage lists them
 * (subcommands.c). The man pages and the bash completion are made from these
 * too (cli/gen/gendoc.c), so --help, `uzram --help`, uzram-CMD(1) and the
 * completion cannot disagree.
 */
struct cli_entry {
	const struct cli_command *cmd;
	int (*run)(int argc, char **argv);
};
extern const struct cli_entry cli_commands[];
extern const size_t cli_ncommands;
extern const struct cli_command stat_cmd, ctl_cmd, ublk_cmd;
/* The top-level usage: each command with all its options, from the tables. */
void cli_top_usage(FILE *f);
/* Its part that lists each command's options and COMMANDs (briefs: and
 * under each, what it does): also the README's "every option" block. */
void cli_commands_usage(FILE *f, bool briefs);
/* "--name ARG" (or "-o ARG" when o has no long name) into out; its length. */
int cli_option_synopsis(const struct cli_option *o, char *out, size_t n);

#endif
