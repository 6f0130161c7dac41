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
/* `uzram serve` whose usage and option errors are cmd's (serve's options) */
int serve_as(const struct cli_command *cmd, int argc, char **argv);

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
/*
 * Reserved when --swap has no --mem-limit: RAM / 64 within 4..16 MiB; and
 * the no-fault pool's refill target, RAM / 256 within 1..4 MiB up to
 * RAM / 64 within 4..16 MiB; a write waits REFILL_WAIT_MS for the refill
 * at most (serve_swap.c)
 */
#define SWAP_RESERVE_DIV 64u
#define SWAP_RESERVE_LO (4ull << 20)
#define SWAP_RESERVE_HI (16ull << 20)
#define REFILL_MIN_DIV 256u
#define REFILL_MIN_LO (1ull << 20)
#define REFILL_MIN_HI (4ull << 20)
#define REFILL_MAX_DIV 64u
#define REFILL_MAX_LO (4ull << 20)
#define REFILL_MAX_HI (16ull << 20)
#define REFILL_WAIT_MS 250u
/* RAM / div, within [lo, hi], in whole pages (for the reserve and balloons) */
uint64_t serve_ram_share(unsigned div, uint64_t lo, uint64_t hi);
int serve_swap_begin(void);                /* before the device exists */
/* after: reserves of the allocator what cfg's mem_limit leaves room for */
int serve_swap_ready(struct uzram *dev, const struct uzram_config *cfg);
void serve_swap_end(void);                 /* before the device goes */
/*
 * --freed-slots (swapfree/): serve_swap_freed_load() loads the probe,
 * before the device serves (NULL after a message when it cannot, and the
 * server goes on without); serve_swap_freed_adopt() takes a keeper's
 * instead (--freed-slots-fds), the same way; serve_swap_freed() starts it
 * on the block device at path (on failure, a message, and *sf stopped and
 * NULL);
 * serve_swap_freed_end() says what it dropped and stops it, once the
 * device's writes have ended. Each accepts NULL.
 */
struct swapfree;
struct swapfree *serve_swap_freed_load(void);
struct swapfree *serve_swap_freed_adopt(const char *fds);
void serve_swap_freed(struct swapfree **sf, struct uzram *dev, const char *path);
void serve_swap_freed_end(struct swapfree *sf);

/*
 * cli/serve/serve_keep.c: `uzram serve --keeper`, --keep-fd and
 * --keep-standby (doc/keep.md). serve_keep_args(): a copy of argv
 * (NULL-terminated, to free) before the parse permutes it; serve_keeper():
 * hold a memfd and run the server on it until it stops, starting another
 * after a death; the exit status; with freed, the probe of freed swap
 * slots, loaded once for all its servers (swapfree_share()).
 * serve_keep_standby(): run the adoption's code once on a scratch store,
 * lock what the process holds, and wait for a byte on fd; 0 then, or -1 (EOF: the keeper wants no more of this
 * standby). serve_keep_report(): print what the device found in its kept
 * store.
 */
char **serve_keep_args(int argc, char **argv);
int serve_keeper(char **args, bool ublk, int ublk_id, int nbd_index,
		 bool freed);
int serve_keep_standby(int fd, const struct uzram_config *cfg);
void serve_keep_report(struct uzram *dev);

/*
 * cli/serve/serve_nbdlink.c: the kernel's /dev/nbdN for `serve --keeper
 * --nbd-device N` (doc/keep.md, "Over NBD"). keeper_link_open(): for
 * index N (-1: none, and the calls below do nothing), the servers'
 * --socket out of args; 0, or 1 after a message (keeper_link_close()
 * either way). keeper_link_lost(): a new server runs, attach the device
 * to it. keeper_link_step(): the kernel's events, and the attach if it is
 * due; -1 when the first attach failed (the keeper stops), else 0.
 * keeper_link_give_up(): NBD_CMD_DISCONNECT, the waiting I/O fails. For
 * the keeper's one thread; nothing allocates after the open.
 */
struct keeper_link {
	int index;              /* N of /dev/nbdN; -1: none */
	int conns;              /* sockets it gets (swap_nbd_connections()) */
	int fd, events;         /* netlink: commands; the multicast group */
	uint16_t family;        /* generic netlink's id of "nbd" */
	bool attached;          /* NBD_CMD_CONNECT done */
	const char *sock;       /* the servers' --socket */
	bool relink;            /* to attach to the server when it listens */
	bool dead_seen;         /* the kernel said NBD_CMD_LINK_DEAD */
	bool dial_said;         /* the dial's failure was reported */
	time_t relink_at;       /* when relink was set */
};
int keeper_link_open(struct keeper_link *kl, int index, char **args);
void keeper_link_close(struct keeper_link *kl);
void keeper_link_lost(struct keeper_link *kl);
int keeper_link_step(struct keeper_link *kl);
void keeper_link_give_up(struct keeper_link *kl);

#endif /* UZRAM_CLI_SERVE_H */
