// SPDX-License-Identifier: MIT
/*
 * ublk.c - `uzram ublk add|list|del`, as ublksrv's commands: add is
 * `uzram serve --ublk` (the same options, the same `uzram stat` and
 * `uzram ctl` channel; the server lives as long as the device); list and
 * del look after devices, such as one whose server was killed. The front
 * end itself is in ublk/. add's messages, serve's, say "uzram ublk add:"
 * (report_rename()), and its --help is serve's options under its own name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../ublk/ublk.h"

static const struct cli_option ublk_opts[] = {
	{ "help", 'h', no_argument, NULL, "this text" },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct cli_word ublk_words[] = {
	{ "add", "[SERVE-OPTION]...",
	  "uzram serve --ublk SERVE-OPTION...: /dev/ublkbN until SIGTERM" },
	{ "list", NULL, "the ublk devices: id, state, server, queues, depth" },
	{ "del", "N", "remove device N, whose server is gone" },
	{ NULL, NULL, NULL },
};

static void ublk_footer(FILE *f)
{
	fprintf(f, "commands:\n");
	for (const struct cli_word *w = ublk_words; w->name; w++)
		fprintf(f, "  %s%s%s\n      %s\n", w->name, w->args ? " " : "",
			w->args ? w->args : "", w->help);
}

const struct cli_command ublk_cmd = {
	.name = "ublk",
	.operands = "COMMAND [ARG]...",
	.summary = "Make and look after ublk block devices (Linux 6.0+, ublk_drv).\n",
	.shorts = "h",
	.opts = ublk_opts,
	.footer = ublk_footer,
	.brief = "a uzram device as the block device /dev/ublkbN",
	.words = ublk_words,
};

int cmd_ublk(int argc, char **argv)
{
	unsigned long long id;
	int r;

	if (argc >= 2 && !strcmp(argv[1], "add")) {
		/* argv[0] and argv[1] become "serve" and "--ublk"; its
		 * messages, usage and --help name `uzram ublk add`, the
		 * command the user typed */
		struct cli_command add = serve_cmd;
		char **args = calloc((size_t)argc + 1, sizeof *args);

		if (!args) {
			report_error("ublk", "out of memory");
			return 1;
		}
		add.name = "ublk add";
		add.summary = "Make /dev/ublkbN, a new device (or --image), and "
			"serve it until SIGINT or\nSIGTERM: `uzram serve "
			"--ublk` with the same options.\n";
		report_rename("serve", add.name);
		args[0] = (char *)"serve";
		args[1] = (char *)"--ublk";
		memcpy(args + 2, argv + 2, (size_t)(argc - 2) * sizeof *args);
		r = serve_as(&add, argc, args);
		free(args);
		return r;
	}
	r = cli_parse(&ublk_cmd, argc, argv, NULL, NULL);
	if (r >= 0)
		return r;
	argc -= optind;
	argv += optind;
	if (argc == 1 && !strcmp(argv[0], "list"))
		return ublk_list_devices("ublk");
	if (argc == 2 && !strcmp(argv[0], "del")) {
		if (parse_uint(argv[1], (1u << 20) - 1, &id) < 0) {
			report_error("ublk", "bad device number '%s'",
				argv[1]);
			return 2;
		}
		return ublk_del_device((int)id, "ublk");
	}
	if (argc == 0)
		report_error("ublk", "which command? (add, list, del)");
	else
		report_error("ublk", "unknown or incomplete command "
			"'%s'", argv[0]);
	cli_usage(&ublk_cmd, stderr);
	return 2;
}
