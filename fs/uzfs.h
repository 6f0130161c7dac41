/* SPDX-License-Identifier: MIT */
/*
 * uzfs.h - uzram's own file system (fs/): what a program (cli/mount/mount_fs.c)
 * calls to serve a directory. The design is at the top of fs/node.c.
 */
#ifndef UZRAM_FS_UZFS_H
#define UZRAM_FS_UZFS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct uzram;
struct uzfs;

struct uzfs_config {
	struct uzram *dev;     /* the file data's device; the fs does not own it */
	uid_t uid;             /* the root directory's owner, group, mode */
	gid_t gid;
	mode_t mode;
	bool allow_other;      /* FUSE's allow_other (root only) */
	bool debug;            /* libfuse's debug output */
	unsigned threads;      /* > 1: libfuse's multi-threaded loop; else one */
};

/*
 * Mount a new, empty file system at dir. Returns 0 and *fsp, or a negative
 * errno (and a message on stderr). The caller keeps cfg->dev open until
 * uzfs_free().
 */
int uzfs_mount(const struct uzfs_config *cfg, const char *dir, struct uzfs **fsp);

/*
 * Serve requests on several threads until the file system is unmounted
 * (or uzfs_exit()). Returns 0, or a negative errno.
 */
int uzfs_loop(struct uzfs *fs);

/* Make uzfs_loop() return (from a signal handler too). */
void uzfs_exit(struct uzfs *fs);

/* Unmount if still mounted and free everything. NULL is accepted. */
void uzfs_free(struct uzfs *fs);

#endif
