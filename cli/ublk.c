/*
 * ublk.c - `uzram ublk add|list|del`, as ublksrv's commands: add is
 * `uzram serve --ublk` (the same options, the same `uzram stat` and
 * `uzram ctl` channel; the server lives as long as the device); list and
 * del look after devices, such as one whose server was killed. The front
 * end itself is in ublk/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../ublk/ublk.h"

static void ublk_usage(FILE *f)
{
	fprintf(f, "usage: uzram ublk add [SERVE-OPTION]...  (uzram serve --ublk; "
		"see uzram serve --help)\n"
		"       uzram ublk list\n"
		"       uzram ublk del N\n");
}

int cmd_ublk(int argc, char **argv)
{
	unsigned long long id;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		ublk_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "add")) {
		/* argv[0] and argv[1] become "serve" and "--ublk" */
		char **args = calloc((size_t)argc + 1, sizeof *args);
		int r;

		if (!args) {
			fprintf(stderr, "uzram ublk: out of memory\n");
			return 1;
		}
		args[0] = (char *)"serve";
		args[1] = (char *)"--ublk";
		memcpy(args + 2, argv + 2, (size_t)(argc - 2) * sizeof *args);
		r = cmd_serve(argc, args);
		free(args);
		return r;
	}
	if (!strcmp(argv[1], "list") && argc == 2)
		return ublk_list_devices("uzram ublk");
	if (!strcmp(argv[1], "del") && argc == 3) {
		if (parse_uint(argv[2], (1u << 20) - 1, &id) < 0) {
			fprintf(stderr, "uzram ublk: bad device number '%s'\n",
				argv[2]);
			return 2;
		}
		return ublk_del_device((int)id, "uzram ublk");
	}
	fprintf(stderr, "uzram ublk: unknown or incomplete command '%s'\n",
		argv[1]);
	ublk_usage(stderr);
	return 2;
}
