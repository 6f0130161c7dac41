/* SPDX-License-Identifier: MIT */
/*
 * swap.h - what cli/swap/swap_transport.c (the two ways the kernel reaches the
 * server, and running the programs they need) and swap_restart.c (swapon
 * --restart) give cli/swap/swap.c (`uzram swapon`, `uzram swapoff`).
 */
#ifndef UZRAM_CLI_SWAP_H
#define UZRAM_CLI_SWAP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../base/base.h"

#define SWAP_DIR "/run/uzram/swap"

/*
 * A way for the kernel to reach `uzram serve --swap` as the block device
 * /dev/<node>N; N also names the files SWAP_DIR/<node>N.{sock,log,pid}.
 * Each call says what failed on stderr after "uzram swapon: " (or
 * "uzram swapoff: ").
 */
struct swap_transport {
	const char *name;  /* --transport's value: "nbd", "ublk" */
	const char *node;  /* "nbd": /dev/nbdN; "ublkb": /dev/ublkbN */
	/* Whether the kernel has it, after loading its module if need be. */
	bool (*available)(void);
	/* The message for a kernel without it (what to install), when
	 * modprobe ran; swap_missing() says what to say. */
	const char *missing;
	const char *module; /* its kernel module: "nbd", "ublk_drv" */
	/* N of the first device no one uses, or -1 after a message. */
	int (*free_device)(void);
	/* serve's arguments beyond --swap's, for device n, into argv
	 * (at most 3, NULL-terminated); buf (16 bytes) may hold a number. */
	void (*serve_args)(int n, char *argv[4], char buf[16]);
	/* Once the server runs: wait until it is ready and make /dev/<node>n
	 * its device. 0, or -1 after a message (the caller stops the server). */
	int (*attach)(int n, pid_t pid, const char *sock, const char *log);
	/* Before the server stops, after swapoff: undo attach. 0 or 1. */
	int (*detach)(int n);
	/* After the server is gone: remove what it may have left behind (a
	 * killed ublk server leaves its device). Messages by report_error(who, ...). */
	void (*gone)(int n, const char *who);
};

/* cli/swap/swap_transport.c */
extern const struct swap_transport swap_nbd, swap_ublk;

void swap_sleep_ms(int ms);
/*
 * attach for a server under a keeper that makes the device itself (ublk:
 * the server; nbd: the keeper, serve --nbd-device): wait for its "block
 * device /dev/<node>n" line in log, and the node. 0, or -1 after a message.
 */
int swap_attach_kept(const struct swap_transport *t, int n, pid_t pid,
		     const char *log);
/*
 * Run argv (PATH lookup) with stdin /dev/null and stdout and stderr on
 * out_fd (-1: ours), for at most secs seconds; detach: in a new session,
 * not waited for. The exit status, the pid when detached, or -1 after a
 * message.
 */
int swap_run(char *const argv[], int out_fd, int secs, bool detach);

/*
 * Why t is not available (after t->available() said so): t->missing, or,
 * when there was no modprobe to load its module, that and where to get it.
 */
const char *swap_missing(const struct swap_transport *t);

/*
 * cli/swap/swap_restart.c: `uzram swapon --restart`: SIGUSR2 to the
 * keeper (pid keeper) of dev, whose server writes log; 0 once a new
 * server serves dev, else 1 after a message.
 */
int swap_restart(const char *dev, pid_t keeper, const char *log);

extern const struct cli_command swapon_cmd, swapoff_cmd;
int cmd_swapon(int argc, char **argv);  /* swap.c: swap on uzram */
int cmd_swapoff(int argc, char **argv); /* swap.c: and off again */

#endif
