// SPDX-License-Identifier: MIT
/*
 * main.c - the uzram program: a thin dispatcher over its subcommands
 * (the list is in subcommands.c).
 */
#include <stdio.h>
#include <string.h>

#include "uzram.h"
#include "cli.h"

int main(int argc, char **argv)
{
	if (argc > 0 && strchr(argv[0], '/'))
		cli_prog = argv[0]; /* build/uzram: print commands that way */
	if (argc < 2) {
		cli_top_usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		cli_top_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("uzram %s\n", uzram_version_string());
		return 0;
	}
	for (size_t i = 0; i < cli_ncommands; i++)
		if (!strcmp(argv[1], cli_commands[i].cmd->name))
			return cli_commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "uzram: unknown command '%s'\nsee `uzram --help`\n",
		argv[1]);
	return 2;
}
