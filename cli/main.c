/*
 * main.c - the uzram program: a thin dispatcher over its subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "uzram.h"
#include "cli.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
} commands[] = {
	{ "load", cmd_load,
	  "load FILE [--algorithm A] [--level N] [--mem-limit M] [--json]\n"
	  "             [--cluster 4K..64K] [--randread N] [--recompress ALGO[:LEVEL]]\n"
	  "             [--backing TARGET] [--save IMAGE]" },
	{ "serve", cmd_serve,
	  "serve [--size 1G] [--algorithm lz4] [--level N] [--mem-limit M]\n"
	  "              [--socket PATH | --tcp HOST:PORT] [--export NAME]\n"
	  "              [--read-only] [--max-connections N] [--cluster 4K..64K]\n"
	  "              [--recomp-algorithm ALGO[:LEVEL][:dict=FILE]]... [--dict FILE]\n"
	  "              [--run 'COMMAND'] [--image FILE] [--ctl-socket PATH]\n"
	  "              [--tls=off|on|require]\n"
	  "              [--tls-psk FILE | --tls-certificates DIR [--tls-verify-peer]]\n"
	  "              [--backing TARGET] [--high-watermark PCT] [--low-watermark PCT]\n"
	  "              [--buffer-limit SIZE] [--timeout SECONDS]\n"
	  "              [--handshake-timeout SECONDS]" },
	{ "mount", cmd_mount,
	  "mount DIR [--size S] [--algorithm A] [--level N] [--mem-limit M]\n"
	  "              [--cluster 4K..64K] [--fs ext4] [-o OPTIONS] [--uid U]\n"
	  "              [--gid G] [--mode M] [--via loop|fuse] [-f]" },
	{ "umount", cmd_umount, "umount DIR" },
	{ "ublk", cmd_ublk,
	  "ublk add [serve's options] | list | del N\n"
	  "             (add: serve --ublk [--ublk-id N] [--ublk-queues N] [--ublk-depth N]\n"
	  "              [--ublk-copy kernel|user] [--ublk-recovery | --ublk-take-over N])" },
	{ "stat", cmd_stat,
	  "stat [--socket PATH | --tcp [HOST:]PORT | --ctl-socket PATH | --mount DIR]\n"
	  "            [--json]" },
	{ "ctl", cmd_ctl,
	  "ctl [--socket PATH | --tcp [HOST:]PORT | --ctl-socket PATH]\n"
	  "            compact | mem-limit SIZE | reset-max | idle\n"
	  "            | recompress [type=huge|idle|huge_idle] [threshold=SIZE] [priority=N]\n"
	  "            | idle SECONDS | writeback [type=TYPE] [pages=LO-HI] [limit=N]\n"
	  "            | writeback-limit N|off | backing-compact\n"

	  "            | train-dict [priority=N] [size=SIZE] | save [IMAGE]" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  uzram %s\n", commands[i].usage);
	fprintf(f, "  uzram --version\n");
	fprintf(f, "algorithms: %s\n", uzram_algorithms());
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("uzram %s\n", uzram_version_string());
		return 0;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "uzram: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
