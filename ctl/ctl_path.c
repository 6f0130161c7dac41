// SPDX-License-Identifier: MIT
/*
 * ctl_path.c - where a server's control socket lives, found the same way
 * by `uzram serve` (which binds it) and `uzram stat` / `uzram ctl` (which
 * connect to it), and the checks that keep another user from standing in
 * for the server.
 *
 *   --ctl-socket PATH        PATH
 *   --socket SOCK (Unix)     SOCK.ctl, next to the NBD socket
 *   --tcp [HOST:]PORT        RUNDIR/tcp-PORT.ctl, where RUNDIR is
 *                            $XDG_RUNTIME_DIR/uzram, or ${TMPDIR:-/tmp}/uzram-UID
 *                            without it; the server makes RUNDIR (0700)
 *
 * Whoever can bind the control socket's name first gets the clients'
 * requests and answers them: in a world-writable directory, anyone. So:
 *   - RUNDIR must be a real directory (not a symbolic link) owned by us
 *     with no access for group or others;
 *   - any control socket's directory must belong to us or root and not be
 *     writable by others unless it is sticky (as /tmp), where nobody can
 *     remove or rename our socket;
 *   - a control socket that already exists must belong to us or root.
 * Both sides check, so a client refuses an impostor's socket too.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/report.h"
#include "ctl.h"

static bool ours(const struct stat *st)
{
	return st->st_uid == geteuid() || st->st_uid == 0;
}

/* RUNDIR into dir, made if create; 0 or -1 after a message. */
static int run_dir(char *dir, size_t n, bool create, const char *who)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
	struct stat st;
	int w;

	if (xdg && xdg[0] == '/')
		w = snprintf(dir, n, "%s/uzram", xdg);
	else
		w = snprintf(dir, n, "%s/uzram-%u",
			     tmp && tmp[0] == '/' ? tmp : "/tmp",
			     (unsigned)geteuid());
	if (w < 0 || (size_t)w >= n) {
		report_error(who, "control socket directory: path too long");
		return -1;
	}
	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		report_error(who, "cannot make %s: %s", dir,
			strerror(errno));
		return -1;
	}
	if (lstat(dir, &st) < 0) {
		report_error(who, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		report_error(who, "refusing %s for the control socket: it must "
			"be a directory of uid %u with mode 0700 (it is uid %u, "
			"mode %04o%s)", dir, (unsigned)geteuid(),
			(unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
			S_ISDIR(st.st_mode) ? "" : ", not a directory");
		return -1;
	}
	return 0;
}

int ctl_path_check(const char *path, const char *who)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 :
			 (int)(slash - path), path);
	if (stat(dir, &st) < 0) {
		report_error(who, "control socket %s: %s: %s", path,
			dir, strerror(errno));
		return -1;
	}
	if (!ours(&st)) {
		report_error(who, "refusing control socket %s: its directory "
			"%s belongs to uid %u", path, dir,
			(unsigned)st.st_uid);
		return -1;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		report_error(who, "refusing control socket %s: its directory "
			"%s is writable by others (mode %04o)", path, dir,
			(unsigned)(st.st_mode & 07777));
		return -1;
	}
	if (lstat(path, &st) == 0 && !ours(&st)) {
		report_error(who, "refusing control socket %s: it belongs to "
			"uid %u, not to you", path, (unsigned)st.st_uid);
		return -1;
	}
	return 0;
}

int ctl_path_find(const char *ctl_socket, const char *socket_path,
		  const char *tcp_port, bool create, const char *who,
		  char *out, size_t n)
{
	char dir[PATH_MAX];
	int w;

	if (!ctl_socket && !socket_path && strchr(tcp_port, '/')) {
		report_error(who, "bad port '%s'", tcp_port);
		return -1;
	}
	if (ctl_socket)
		w = snprintf(out, n, "%s", ctl_socket);
	else if (socket_path)
		w = snprintf(out, n, "%s.ctl", socket_path);
	else if (run_dir(dir, sizeof dir, create, who) < 0)
		return -1;
	else
		w = snprintf(out, n, "%s/tcp-%s.ctl", dir, tcp_port);
	if (w < 0 || (size_t)w >= n) {
		report_error(who, "control socket path too long");
		return -1;
	}
	return ctl_path_check(out, who);
}
