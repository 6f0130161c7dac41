/* SPDX-License-Identifier: MIT */
/*
 * serve.h - `uzram serve` (cli/serve/): an NBD server, and a ublk device
 * beside it, on one uzram device; serve_device.c: the device from the
 * options; serve_swap.c: its --swap; serve_keep.c: its --keeper, a store
 * that outlives the server.
 */
#ifndef UZRAM_CLI_SERVE_H
#define UZRAM_CLI_SERVE_H

#include "../base/base.h"

extern const struct cli_command serve_cmd;
int cmd_serve(int argc, char **argv);  /* cli/serve/serve.c */

/*
 * cli/serve/serve_device.c: the device from the options. Each 0, or
 * non-zero (the exit status) after a message.
 */
struct uzram;
struct uzram_config;
struct recomp_opt {
	const char *name, *dict;
	int level;
};
int serve_open_device(struct uzram_config *cfg, const char *image,
		      const char *dict_path, bool size_set, bool algo_set,
		      bool cluster_set, struct uzram **dev);
int serve_add_recomp(struct uzram *dev, const struct recomp_opt *recomp,
		     int n, int first);
int serve_set_wb_limit(struct uzram *dev, uint64_t bytes);
/* whether a file could be created beside path (errno says why not) */
bool serve_dir_writable(const char *path);

/* cli/serve/serve_swap.c: `uzram serve --swap`; each 0, or -1 after a message */
/* reserved when --swap has no --mem-limit: RAM / 64, at most 16 MiB */
#define SWAP_RESERVE_MAX (16ull << 20)
/* RAM / div, within [lo, hi], in whole pages (for the reserve and balloons) */
uint64_t serve_ram_share(unsigned div, uint64_t lo, uint64_t hi);
int serve_swap_begin(void);                /* before the device exists */
/* after: reserves of the allocator what cfg's mem_limit leaves room for */
int serve_swap_ready(struct uzram *dev, const struct uzram_config *cfg);
void serve_swap_end(void);                 /* before the device goes */

/*
 * cli/serve/serve_keep.c: `uzram serve --keeper`, --keep-fd and
 * --keep-standby (doc/keep.md). serve_keep_args(): a copy of argv
 * (NULL-terminated, to free) before the parse permutes it; serve_keeper():
 * hold a memfd and run the server on it until it stops, starting another
 * after a death; the exit status. serve_keep_standby(): run the adoption's
 * code once on a scratch store, lock what the process holds, and wait for a
 * byte on fd; 0 then, or -1 (EOF: the keeper wants no more of this
 * standby). serve_keep_report(): print what the device found in its kept
 * store.
 */
char **serve_keep_args(int argc, char **argv);
int serve_keeper(char **args, bool ublk, int ublk_id, int nbd_index);
int serve_keep_standby(int fd, const struct uzram_config *cfg);
void serve_keep_report(struct uzram *dev);

/*
 * cli/serve/serve_nbdlink.c: the kernel's NBD client for `serve --keeper
 * --nbd-device N` (doc/keep.md). nbdlink_open(): generic netlink to the
 * family "nbd" and its multicast group, for /dev/nbd<index> (0, or a
 * negative errno; nbdlink_close() either way). nbdlink_dial(): connect to
 * the server's Unix socket at path and do the client's handshake: the fd,
 * with the export's size and transmission flags, or a negative errno.
 * nbdlink_attach(): give sock to the kernel (NBD_CMD_CONNECT the first
 * time, then NBD_CMD_RECONFIGURE); the kernel holds its own reference, the
 * caller closes sock. nbdlink_detach(): NBD_CMD_DISCONNECT. nbdlink_dead():
 * whether the kernel reported the device's connection dead since the last
 * call. Not thread-safe; nothing allocates.
 */
struct nbdlink {
	int fd, events;         /* commands; the multicast group */
	uint16_t family;
	int index;
	bool attached;
};
int nbdlink_open(struct nbdlink *l, int index);
void nbdlink_close(struct nbdlink *l);
int nbdlink_dial(const char *path, uint64_t *size, uint16_t *flags);
int nbdlink_attach(struct nbdlink *l, int sock, uint64_t size, uint16_t flags);
int nbdlink_detach(struct nbdlink *l);
bool nbdlink_dead(struct nbdlink *l);

#endif /* UZRAM_CLI_SERVE_H */
