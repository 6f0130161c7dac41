// SPDX-License-Identifier: MIT
/*
 * subcommands.c - the list of subcommands, and the top-level usage made from
 * their option tables: `uzram --help` names every option that some
 * `uzram CMD --help` names, and nothing else, because both print the same
 * struct cli_option entries. cli/gen/gendoc.c makes the man pages' OPTIONS
 * sections and the bash completion from the same list.
 */
#include <stdio.h>
#include <string.h>

#include "uzram.h"
#include "cli.h"

const struct cli_entry cli_commands[] = {
	{ &load_cmd, cmd_load },
	{ &serve_cmd, cmd_serve },
	{ &mount_cmd, cmd_mount },
	{ &umount_cmd, cmd_umount },
	{ &ublk_cmd, cmd_ublk },
	{ &stat_cmd, cmd_stat },
	{ &ctl_cmd, cmd_ctl },
	{ &swapon_cmd, cmd_swapon },
	{ &swapoff_cmd, cmd_swapoff },
};
const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

#define USAGE_WIDTH 79

int cli_option_synopsis(const struct cli_option *o, char *out, size_t n)
{
	const char *arg = o->arg ? o->arg : "";
	const char *sep = !o->arg || !strncmp(arg, "[=", 2) ? "" : " ";

	if (o->name)
		return snprintf(out, n, "--%s%s%s", o->name, sep, arg);
	return snprintf(out, n, "-%c%s%s", o->key, o->arg ? " " : "", arg);
}

/* "  uzram NAME [--a A] [--b]... OPERANDS", wrapped under its first option. */
static void command_synopsis(const struct cli_command *cmd, FILE *f)
{
	char item[128];
	int indent = fprintf(f, "  uzram %s", cmd->name), col = indent;

	for (const struct cli_option *o = cmd->opts; o->name || o->key; o++) {
		if (o->key == 'h')
			continue;
		cli_option_synopsis(o, item, sizeof item);
		if (col + 3 + (int)strlen(item) > USAGE_WIDTH)
			col = fprintf(f, "\n%*s", indent, "") - 1;
		col += fprintf(f, " [%s]", item);
	}
	if (cmd->operands) {
		if (col + 1 + (int)strlen(cmd->operands) > USAGE_WIDTH)
			fprintf(f, "\n%*s", indent, "");
		fprintf(f, " %s", cmd->operands);
	}
	fputc('\n', f);
}

void cli_commands_usage(FILE *f, bool briefs)
{
	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *cmd = cli_commands[i].cmd;

		command_synopsis(cmd, f);
		if (briefs)
			fprintf(f, "    %s\n", cmd->brief);
		for (const struct cli_word *w = cmd->words; w && w->name; w++)
			fprintf(f, "      %s%s%s\n", w->name, w->args ? " " : "",
				w->args ? w->args : "");
	}
}

void cli_top_usage(FILE *f)
{
	fprintf(f, "usage: uzram COMMAND [OPTION]... [OPERAND]...\n"
		"       uzram --help | --version\n\ncommands:\n");
	for (size_t i = 0; i < cli_ncommands; i++)
		fprintf(f, "  %-8s %s\n", cli_commands[i].cmd->name,
			cli_commands[i].cmd->brief);
	fprintf(f, "\n");
	cli_commands_usage(f, false);
	fprintf(f, "\n`uzram COMMAND --help` says what each option does.\n"
		"algorithms: %s\n", uzram_algorithms());
}
