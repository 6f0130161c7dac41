// SPDX-License-Identifier: MIT
/*
 * umount.c - `uzram umount DIR`: take down what `uzram mount DIR` built.
 * It finds the mount's runtime directory from DIR alone (mount.c says
 * what RUN holds), clears what a dead keeper left (mount_run.c), refuses
 * while a --image save could not be written (mount_fs.c), unmounts DIR
 * (lazily only when the device under it has gone) and waits for the
 * keeper to take down the rest and remove RUN, relaying what the keeper
 * says meanwhile (a failed save).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "uzram.h"
#include "../base/base.h"
#include "mount.h"

#define UMOUNT_WAIT_MS 30000  /* how long umount waits for the keeper */

/* Unmount DIR; lazily if that fails and the device under it has gone. */
static int umount_dir(const struct mount_req *m, const char *via, bool gone)
{
	if (geteuid() == 0) {
		if (umount2(m->dir, 0) == 0 ||
		    (gone && umount2(m->dir, MNT_DETACH) == 0))
			return 0;
		report_error("umount", "%s: %s", m->dir, strerror(errno));
		return -1;
	}
	if (strcmp(via, "fuse") && strcmp(via, "fs")) {
		report_error("umount", "%s: only root can unmount it",
			m->dir);
		return -1;
	}
	return mount_fusermount("-u", m->dir) == 0 ||
	       (gone && mount_fusermount("-uz", m->dir) == 0) ? 0 : -1;
}

/* After the clean-up: the exit status, and what was lost if anything. */
static int umount_status(const char *dir, const char *gone, pid_t pid)
{
	if (!gone)
		return 0;
	report_error("umount", "%s: its device had gone (%s, pid %d, "
		"had ended): writes to %s since then were lost; cleaned up, "
		"uzram mount %s may make it again", dir, gone, (int)pid, dir,
		dir);
	return 1;
}

static const struct cli_option umount_opts[] = {
	{ "help", 'h', no_argument, NULL, "this text" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_command umount_cmd = {
	.name = "umount",
	.operands = "DIR",
	.summary = "Take down what `uzram mount DIR` built.\n",
	.shorts = "h",
	.opts = umount_opts,
	.brief = "take down a uzram mount",
};

int cmd_umount(int argc, char **argv)
{
	struct mount_req m = { 0 };
	char via[8] = "", path[PATH_MAX];
	const char *dir, *gone;
	FILE *f;
	pid_t pid, dead;
	int log_fd, r = cli_parse(&umount_cmd, argc, argv, NULL, NULL);

	if (r >= 0)
		return r;
	if (optind == argc)
		return cli_usage_error(&umount_cmd, "no directory given");
	if (optind != argc - 1)
		return cli_usage_error(&umount_cmd, "one directory only, not "
				       "'%s' and '%s'", argv[optind],
				       argv[optind + 1]);
	if (mount_abs_dir(argv[optind], m.dir) < 0)
		return cli_usage_error(&umount_cmd, "bad directory '%s'",
				       argv[optind]);
	dir = argv[optind];
	if (mount_runtime_dir(&m, "umount") < 0)
		return 1;
	pid = mount_read_pid(&m, "pid");
	gone = mount_stack_gone(&m, &dead);
	if (!mount_keeper_alive(&m)) {
		if (access(m.run, F_OK) == 0) {
			mount_clear_dead(&m);
			return umount_status(dir, gone, dead);
		}
		report_error("umount", "%s is not mounted by uzram mount",
			dir);
		return 1;
	}
	mount_path(&m, path, "via");
	f = fopen(path, "re");
	if (f) {
		if (!fgets(via, sizeof via, f))
			via[0] = '\0';
		via[strcspn(via, "\n")] = '\0';
		fclose(f);
	}
	/* A save of --image that cannot be written: DIR stays as it is */
	if (!strcmp(via, "fs") && mount_fs_check_save(&m) < 0)
		return 1;
	/* What an fs keeper says from now on (a failed save of --image) is
	 * said again here: its log goes with RUN. */
	mount_path(&m, path, "log");
	log_fd = strcmp(via, "fs") ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	if (log_fd >= 0)
		lseek(log_fd, 0, SEEK_END);
	if (mount_point_is(m.dir) && umount_dir(&m, via, gone != NULL) < 0) {
		if (log_fd >= 0)
			close(log_fd);
		return 1;
	}
	/* The keeper takes the rest down and removes RUN. */
	if (mount_wait_gone(pid, UMOUNT_WAIT_MS) < 0) {
		report_error("umount", "the keeper (pid %d) of %s did not "
			"end within %d s", (int)pid, dir, UMOUNT_WAIT_MS / 1000);
		return 1;
	}
	if (log_fd >= 0 && mount_relay_log(log_fd) > 0)
		return 1;
	return umount_status(dir, gone, dead);
}
