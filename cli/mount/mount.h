/* SPDX-License-Identifier: MIT */
/*
 * mount.h - what cli/mount/mount.c (the commands, the runtime directory),
 * cli/mount/mount_stack.c (the keeper that builds and tears down the stack) and
 * cli/mount/mount_run.c (below both: paths in the runtime directory, mount
 * points) share. See the top of mount_stack.c for the design.
 */
#ifndef UZRAM_CLI_MOUNT_H
#define UZRAM_CLI_MOUNT_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "../base/base.h"

/* Test hooks: environment variables that replace a fixed path. */
#define ENV_DEV_FUSE      "UZRAM_DEV_FUSE"      /* /dev/fuse */
#define ENV_LOOP_CONTROL  "UZRAM_LOOP_CONTROL"  /* /dev/loop-control */
#define ENV_RUNTIME_DIR   "UZRAM_RUNTIME_DIR"   /* parent of the mounts' dirs */

enum mount_via { VIA_AUTO, VIA_LOOP, VIA_FUSE, VIA_FS };

struct mount_req {
	/* Options of `uzram mount`. */
	char dir[PATH_MAX];          /* absolute */
	char run[PATH_MAX];          /* this mount's runtime directory */
	char self[PATH_MAX];         /* the uzram program, for `uzram serve` */
	char *serve_argv[20];         /* options passed on to uzram serve */
	int serve_argc;
	unsigned long long size, mem_limit, fs_bytes;
	unsigned long long inodes;    /* --inodes, or 0: the default */
	char *opts;                  /* -o: mount options (argv's), or NULL */
	uid_t uid;
	gid_t gid;
	mode_t mode;
	bool set_mode;
	enum mount_via via;          /* VIA_AUTO is resolved before the keeper */
	char image[PATH_MAX];        /* --image (--via fs), absolute, or "" */
	bool size_set;               /* --size was given */
	bool foreground;
	bool nonempty;               /* --nonempty: DIR may hold files */
	uid_t run_owner;             /* root on another user's mount: that
				      * user, whose RUN run is; else 0 */

	/* The keeper's state: what is built, so teardown knows what to undo. */
	int notify_fd;               /* to the waiting parent, or -1 */
	int pid_fd;                  /* RUN/pid, flock()ed while the keeper lives */
	int log_fd;                  /* RUN/log: the children's stderr */
	pid_t server, nbdfuse, fuse2fs;
	int loop_fd;                 /* held until ext4 holds the loop */
	char loop_dev[32];
	bool mounted;                /* DIR is mounted */
	bool lost;                   /* the device went away under DIR */
};

/* mount_run.c: RUN/NAME into out (PATH_MAX bytes). */
void mount_path(const struct mount_req *m, char *out, const char *name);

/* mount_run.c: write text to RUN/NAME; -1 with a message. */
int mount_write_run(const struct mount_req *m, const char *name,
		    const char *text);

/* mount_run.c: whether path is a mount point in this mount namespace. */
bool mount_point_is(const char *path);
/* mount_run.c: the user who mounted the FUSE file system at path (its
 * user_id), or (uid_t)-1: none there, or not FUSE. */
uid_t mount_owner(const char *path);

/* mount_run.c: copy what is left to read of fd (the keeper's log) to
 * stderr and close fd; the bytes copied. */
long mount_relay_log(int fd);

/* mount_run.c: remove RUN and the files the keeper makes in it. */
void mount_remove_run(const struct mount_req *m);

/* mount_run.c: the keeper's life, for mount.c and umount.c. The pid in
 * RUN/NAME, 0 if none; fusermount3 ARG DIR (0 if it succeeded, else it
 * said why); DIR unmounted lazily; a process that is not our child waited
 * for up to ms (0, or -1 at the timeout); whether the keeper of RUN lives
 * (its lock on RUN/pid); what a dead keeper left cleared (DIR and
 * nbdfuse's file unmounted lazily, its children stopped, RUN removed);
 * which part of the stack under DIR has died (its pid in *pid), or NULL. */
pid_t mount_read_pid(const struct mount_req *m, const char *name);
int mount_fusermount(const char *arg, const char *dir);
void mount_unmount_lazy(const char *dir);
int mount_wait_gone(pid_t pid, int ms);
bool mount_keeper_alive(const struct mount_req *m);
void mount_clear_dead(struct mount_req *m);
const char *mount_stack_gone(const struct mount_req *m, pid_t *pid);

/* mount.c: DIR as an absolute path without resolving it (it may be a dead
 * mount), into out (PATH_MAX bytes); 0 or -1. */
int mount_abs_dir(const char *dir, char *out);
/* mount.c: m->run for m->dir (see mount.c's top), the base made if
 * missing and checked private; 0, or -1 with a message as `uzram who`. */
int mount_runtime_dir(struct mount_req *m, const char *who);

/*
 * mount_stack.c: the keeper: build the stack, tell notify_fd once DIR is usable, wait for
 * the unmount, tear down. Returns the exit status. Its messages go to
 * stderr until DIR is usable, then to RUN/log.
 */
int mount_keep(struct mount_req *m);

/* mount_fs.c: the same for --via fs: one process serves DIR with uzram's
 * own file system (fs/). Returns the exit status. */
int mount_fs_keep(struct mount_req *m);

/*
 * mount_fs.c: before `uzram umount` unmounts a --via fs mount made with
 * --image: whether the save can be written. The image's directory must
 * exist and be writable, and its file system have room for the device's
 * compressed bytes (the image holds the objects as they are, written
 * beside the image there now, which it replaces only once whole). 0 (also
 * without --image), or -1 after saying why and what to do.
 */
int mount_fs_check_save(const struct mount_req *m);

extern const struct cli_command mount_cmd, umount_cmd;
int cmd_mount(int argc, char **argv);  /* mount.c: a file system at DIR */
int cmd_umount(int argc, char **argv); /* umount.c: take it down */
/*
 * The socket of the server behind `uzram mount DIR` into out (n bytes);
 * 0, or -1 with a message, report_error(who, ...) ("ctl"), when DIR is
 * not mounted by uzram mount.
 */
int mount_socket_path(const char *who, const char *dir, char *out, size_t n);

#endif
