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
	uint64_t max_nodes;    /* the most files, directories, symlinks and
				* device nodes, the root included (tmpfs's
				* nr_inodes): past it ENOSPC; 0: 2^32 */
	bool allow_other;      /* FUSE's allow_other (root only) */
	bool debug;            /* libfuse's debug output */
	unsigned threads;      /* > 1: libfuse's multi-threaded loop; else one */
	unsigned spin_us;      /* one thread: the longest spin on /dev/fuse
				* after a reply, in us (fs/reqloop.c); 0 none */
	bool no_stage;         /* every write on the device before its reply
				* (fs/bmap.c stages none): for a device with a
				* memory limit, whose ENOSPC must reach write() */
	bool load;             /* dev came from an image of uzfs_save(): mount
				* the tree it holds, not an empty one */
	char *why;             /* a buffer for what was wrong with the loaded */
	size_t whylen;         /* tree, or NULL and 0 */
};

/*
 * Mount a new, empty file system at dir, or with cfg->load the tree saved
 * in the device. Returns 0 and *fsp, or a negative errno (and a message on
 * stderr; for a bad saved tree -EBADMSG and the message in cfg->why). The caller keeps cfg->dev open until
 * uzfs_free().
 */
int uzfs_mount(const struct uzfs_config *cfg, const char *dir, struct uzfs **fsp);

/*
 * Serve requests until the file system is unmounted (or uzfs_exit()): on
 * this thread (fs/reqloop.c, spinning up to cfg->spin_us after each
 * reply), or with cfg->threads > 1 on libfuse's threads. Returns 0, or a
 * negative errno.
 */
int uzfs_loop(struct uzfs *fs);

/*
 * Save the tree and its data into the image file path, after uzfs_loop()
 * returned (the directory is unmounted): the tree's record goes into the
 * device (fs/tree_image.c has its format) and the device into path with
 * uzram_save(), which writes aside, flushes and renames, so path is the
 * old image or the new one, whole. Returns 0, or a negative errno with a
 * message in why (whylen bytes).
 */
int uzfs_save(struct uzfs *fs, const char *path, char *why, size_t whylen);

/* Make uzfs_loop() return (from a signal handler too). */
void uzfs_exit(struct uzfs *fs);

/* Unmount if still mounted and free everything. NULL is accepted. */
void uzfs_free(struct uzfs *fs);

#endif
