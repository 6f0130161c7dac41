// SPDX-License-Identifier: MIT
/*
 * mount_stack.c - the keeper of `uzram mount DIR`: it builds the stack of
 * processes and devices that makes DIR a compressed RAM file system, waits
 * until DIR is unmounted, and takes the stack down again.
 *
 *   DIR              the kernel's ext4 (root)      | fuse2fs (no root)
 *                         |                        |     |
 *   /dev/loopN       direct I/O, autoclear         |     |
 *                         |                        |     |
 *   RUN/fuse/disk    nbdfuse: the export as a file, on FUSE
 *                         |
 *   RUN/sock         `uzram serve`: the device, a child process
 *
 * RUN is the mount's private runtime directory (cli/mount/mount.c). The keeper is
 * the `uzram mount` process itself with -f, otherwise a child of it in a
 * session of its own. Until DIR is usable its messages go to the caller's
 * stderr; a failure at any step unwinds what was built, in reverse, so
 * nothing is left half-made, and the caller sees the children's messages
 * (RUN/log). Once DIR is usable it tells the caller on a pipe and moves its
 * own output to RUN/log.
 *
 * Then it waits for DIR to be unmounted by anyone: `uzram umount DIR`,
 * umount(8) or fusermount3 -u. For the kernel's ext4 it watches
 * /proc/self/mountinfo (poll() reports every change of the mount table);
 * fuse2fs exits by itself. SIGTERM, SIGINT or SIGHUP to the keeper
 * unmounts DIR first. The loop device clears itself when ext4 lets it go
 * (LO_FLAGS_AUTOCLEAR), so no step of a plain umount needs the keeper;
 * the keeper then unmounts nbdfuse, stops the server and removes RUN.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "mount.h"

#define READY_MS 10000  /* how long each child may take to start */
#define STOP_MS  10000  /* how long each child may take to stop */

extern char **environ;

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/*
 * Start argv[0] (looked up in PATH) with stdin /dev/null, stdout on out_fd
 * (the log if -1), stderr on the log, and default signal handling, in a
 * process group of its own: a Ctrl-C meant for `uzram mount -f` must reach
 * only the keeper, which unmounts before it stops the children.
 * Returns the pid, or 0 with a message.
 */
static pid_t spawn(struct mount_req *m, char *const argv[], int out_fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, def;
	pid_t pid;
	int err;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd >= 0 ? out_fd : m->log_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, m->log_fd, 2);
	sigemptyset(&none);
	sigfillset(&def);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
					POSIX_SPAWN_SETSIGDEF |
					POSIX_SPAWN_SETPGROUP);
	err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (err) {
		report_error("mount", "cannot run %s: %s", argv[0],
			strerror(err));
		return 0;
	}
	return pid;
}

/* Reap pid if it exited within ms: 1 (status in *ws), else 0. */
static int reap(pid_t pid, int ms, int *ws)
{
	for (int t = 0;; t += 20) {
		pid_t r = waitpid(pid, ws, WNOHANG);

		if (r == pid || (r < 0 && errno == ECHILD))
			return 1;
		if (t >= ms)
			return 0;
		msleep(20);
	}
}

/*
 * Stop a child: wait ms for it to go by itself, then SIGTERM, SIGKILL.
 * 0 if it exited with status 0 (or was not running), else -1.
 */
static int stop_child(pid_t *pid, int ms)
{
	int ws = 0;

	if (!*pid)
		return 0;
	if (!reap(*pid, ms, &ws)) {
		kill(*pid, SIGTERM);
		if (!reap(*pid, STOP_MS, &ws)) {
			kill(*pid, SIGKILL);
			reap(*pid, STOP_MS, &ws);
		}
	}
	*pid = 0;
	return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
}

/* Run a command to its end; 0 if it exited with 0, else -1 with a message. */
static int run(struct mount_req *m, char *const argv[])
{
	pid_t pid = spawn(m, argv, -1);
	int ws = 0;

	if (!pid)
		return -1;
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return 0;
	report_error("mount", "%s failed (%s %d)", argv[0],
		WIFEXITED(ws) ? "exit status" : "signal",
		WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
	return -1;
}

/* Copy the end of RUN/log to stderr: what the children said. */
static void show_log(struct mount_req *m)
{
	char buf[2048];
	off_t end = lseek(m->log_fd, 0, SEEK_END);
	ssize_t n;

	if (end <= 0)
		return;
	n = pread(m->log_fd, buf, sizeof buf - 1,
		  end > (off_t)sizeof buf - 1 ? end - (off_t)sizeof buf + 1 : 0);
	if (n > 0) {
		buf[n] = '\0';
		fprintf(stderr, "uzram mount: messages of the failed step:\n%s%s",
			buf, buf[n - 1] == '\n' ? "" : "\n");
	}
}

/* `uzram serve --socket RUN/sock OPTIONS`; waits for its "ready" line. */
static int start_server(struct mount_req *m)
{
	char sock[PATH_MAX], buf[4096];
	char *argv[24] = { m->self, "serve", "--socket", sock };
	size_t len = 0;
	int p[2], n = 4, ws;

	mount_path(m, sock, "sock");
	for (int i = 0; i < m->serve_argc; i++)
		argv[n++] = m->serve_argv[i];
	if (pipe2(p, O_CLOEXEC) < 0) {
		report_error("mount", "pipe: %s", strerror(errno));
		return -1;
	}
	m->server = spawn(m, argv, p[1]);
	close(p[1]);
	while (m->server && len < sizeof buf - 1) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		ssize_t r;

		if (poll(&pf, 1, READY_MS) <= 0)
			break;
		r = read(p[0], buf + len, sizeof buf - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		buf[len] = '\0';
		if (!strncmp(buf, "ready\n", 6) || strstr(buf, "\nready\n")) {
			close(p[0]);
			return 0;
		}
	}
	close(p[0]);
	report_error("mount", "uzram serve did not start");
	if (m->server && reap(m->server, 0, &ws))
		m->server = 0;
	return -1;
}

/* nbdfuse RUN/fuse/disk --unix RUN/sock; waits for its pid file. */
static int start_nbdfuse(struct mount_req *m)
{
	char fuse[PATH_MAX], disk[PATH_MAX], sock[PATH_MAX], pidf[PATH_MAX];
	char *argv[] = { "nbdfuse", "-P", pidf, disk, "--unix", sock, NULL };
	struct stat sb;
	int ws;

	mount_path(m, fuse, "fuse");
	mount_path(m, disk, "fuse/disk");
	mount_path(m, sock, "sock");
	mount_path(m, pidf, "nbdfuse.pid");
	if (mkdir(fuse, 0700) < 0) {
		report_error("mount", "mkdir %s: %s", fuse, strerror(errno));
		return -1;
	}
	m->nbdfuse = spawn(m, argv, -1);
	for (int t = 0; m->nbdfuse && t < READY_MS; t += 20) {
		if (stat(pidf, &sb) == 0 && sb.st_size > 0)
			return 0;
		if (reap(m->nbdfuse, 0, &ws)) {
			m->nbdfuse = 0;
			break;
		}
		msleep(20);
	}
	report_error("mount", "nbdfuse did not mount %s", fuse);
	return -1;
}

/*
 * mkfs.ext4 on target, m->fs_bytes large, the root owned by uid:gid, with
 * --inodes inodes (else mkfs's own count).
 */
static int make_fs(struct mount_req *m, char *target)
{
	char ext[128], blocks[32], inodes[32];
	char *argv[] = { "mkfs.ext4", "-q", "-F", "-L", "uzram", "-m", "0",
			 "-O", "^has_journal", "-E", ext,
			 NULL, NULL, NULL, NULL, NULL }; /* [-N N] target blocks */
	int n = 11;

	/*
	 * The device reads as zeros and trimming it frees nothing, so no
	 * zeroing of inode tables (now or lazily later) and no discard. No
	 * journal: it protects against a crash nothing survives anyway, and
	 * would hold its own compressed copy of the metadata.
	 */
	snprintf(ext, sizeof ext, "root_owner=%u:%u,nodiscard,"
		 "assume_storage_prezeroed=1", (unsigned)m->uid, (unsigned)m->gid);
	snprintf(blocks, sizeof blocks, "%lluk", m->fs_bytes >> 10);
	if (m->inodes) {
		snprintf(inodes, sizeof inodes, "%llu", m->inodes);
		argv[n++] = "-N";
		argv[n++] = inodes;
	}
	argv[n++] = target;
	argv[n] = blocks;
	return run(m, argv);
}

/*
 * Bind a free loop device to RUN/fuse/disk with direct I/O (no second copy
 * of every block in the page cache) and autoclear. Retries when another
 * process takes the free device first.
 */
static int loop_attach(struct mount_req *m)
{
	const char *ctl_path = getenv(ENV_LOOP_CONTROL);
	char disk[PATH_MAX];
	struct loop_config lc = { .block_size = 4096 };
	int ctl, file, err = 0;

	if (!ctl_path)
		ctl_path = "/dev/loop-control";
	mount_path(m, disk, "fuse/disk");
	ctl = open(ctl_path, O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		report_error("mount", "no loop device: %s: %s", ctl_path,
			strerror(errno));
		return -1;
	}
	file = open(disk, O_RDWR | O_CLOEXEC);
	if (file < 0) {
		report_error("mount", "%s: %s", disk, strerror(errno));
		close(ctl);
		return -1;
	}
	lc.fd = (unsigned)file;
	lc.info.lo_flags = LO_FLAGS_DIRECT_IO | LO_FLAGS_AUTOCLEAR;
	/* "uzram:DIR", cut to fit, for losetup -l */
	memcpy(lc.info.lo_file_name, "uzram:", 6);
	memcpy(lc.info.lo_file_name + 6, m->dir,
	       strnlen(m->dir, LO_NAME_SIZE - 7));
	for (int tries = 0; tries < 32; tries++) {
		int nr = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (nr < 0) {
			err = errno;
			break;
		}
		snprintf(m->loop_dev, sizeof m->loop_dev, "/dev/loop%d", nr);
		m->loop_fd = open(m->loop_dev, O_RDWR | O_CLOEXEC);
		if (m->loop_fd < 0) {
			err = errno;
			break;
		}
		if (ioctl(m->loop_fd, LOOP_CONFIGURE, &lc) == 0)
			break;
		err = errno;
		close(m->loop_fd);
		m->loop_fd = -1;
		if (err != EBUSY)
			break;
	}
	close(file);
	close(ctl);
	if (m->loop_fd >= 0)
		return 0;
	report_error("mount", "no loop device: %s: %s", m->loop_dev,
		strerror(err));
	m->loop_dev[0] = '\0';
	return -1;
}

/* Whether m->loop_dev is still bound to our RUN/fuse/disk. */
static bool loop_bound(struct mount_req *m)
{
	struct loop_info64 li;
	char disk[PATH_MAX];
	struct stat sb;
	bool bound;
	int fd = open(m->loop_dev, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	mount_path(m, disk, "fuse/disk");
	bound = ioctl(fd, LOOP_GET_STATUS64, &li) == 0 && stat(disk, &sb) == 0 &&
		li.lo_inode == sb.st_ino && li.lo_device == sb.st_dev;
	close(fd);
	return bound;
}

/* -o for mount(8) or fuse2fs: the defaults, then the caller's. */
static void mount_opts(struct mount_req *m, char *out, size_t n,
		       const char *defaults)
{
	snprintf(out, n, "%s%s%s", defaults, m->opts ? "," : "",
		 m->opts ? m->opts : "");
}

/* Root: loop device, mkfs.ext4, mount(8). */
static int build_loop(struct mount_req *m)
{
	char opts[1024];
	char *argv[] = { "mount", "-t", "ext4", "-o", opts, m->loop_dev,
			 m->dir, NULL };

	if (loop_attach(m) < 0 || make_fs(m, m->loop_dev) < 0)
		return -1;
	/* discard: a deleted file gives its memory back to the device. */
	mount_opts(m, opts, sizeof opts, "discard");
	if (run(m, argv) < 0)
		return -1;
	m->mounted = true;
	close(m->loop_fd); /* ext4 holds the loop now; autoclear from here on */
	m->loop_fd = -1;
	return 0;
}

/* No root: mkfs.ext4 on the FUSE file, fuse2fs in the foreground. */
static int build_fuse(struct mount_req *m)
{
	char disk[PATH_MAX], opts[1024];
	char *argv[] = { "fuse2fs", disk, m->dir, "-f", "-o", opts, NULL };
	int ws;

	mount_path(m, disk, "fuse/disk");
	if (make_fs(m, disk) < 0)
		return -1;
	/*
	 * fakeroot: fuse2fs's own permission checks refuse to open a file
	 * just created with mode 0 (tar's placeholders do that); the kernel
	 * makes the usual checks instead (default_permissions).
	 */
	/* fuse2fs is libfuse 2's: its fusermount refuses a DIR with files
	 * unless told (libfuse 3's, --via fs, never does) */
	mount_opts(m, opts, sizeof opts, m->nonempty ?
		   "fsname=uzram,big_writes,fakeroot,default_permissions,nonempty" :
		   "fsname=uzram,big_writes,fakeroot,default_permissions");
	m->fuse2fs = spawn(m, argv, -1);
	for (int t = 0; m->fuse2fs && t < READY_MS; t += 20) {
		struct stat sb;

		/* mounted, and fuse2fs answers for the root with its owner */
		if (mount_point_is(m->dir) && stat(m->dir, &sb) == 0 &&
		    sb.st_uid == m->uid) {
			m->mounted = true;
			return 0;
		}
		if (reap(m->fuse2fs, 0, &ws)) {
			m->fuse2fs = 0;
			break;
		}
		msleep(20);
	}
	report_error("mount", "fuse2fs did not mount %s", m->dir);
	return -1;
}

/* Unmount DIR (lazily when the stack below it is already broken). */
static int unmount_dir(struct mount_req *m, bool lazy)
{
	char *argv[] = { "fusermount3", lazy ? "-uz" : "-u", m->dir, NULL };

	if (geteuid() == 0) {
		if (umount2(m->dir, lazy ? MNT_DETACH : 0) == 0)
			return 0;
		report_error("mount", "umount %s: %s", m->dir,
			strerror(errno));
		return -1;
	}
	return run(m, argv);
}

/* A child ended while DIR is mounted. */
static void child_ended(struct mount_req *m, pid_t pid, int ws)
{
	const char *who = pid == m->server ? "uzram serve" :
			  pid == m->nbdfuse ? "nbdfuse" :
			  pid == m->fuse2fs ? "fuse2fs" : NULL;

	if (!who)
		return;
	if (pid == m->fuse2fs) {
		m->fuse2fs = 0;
		if (mount_point_is(m->dir)) /* it crashed */
			unmount_dir(m, true);
		m->mounted = false;
		return;
	}
	report_error("mount", "%s ended (status %#x) while %s is mounted; "
		"its files are lost, unmount it", who, ws, m->dir);
	m->lost = true;
	*(pid == m->server ? &m->server : &m->nbdfuse) = 0;
}

/* Until DIR is unmounted: signals, children and the mount table. */
static void wait_unmount(struct mount_req *m, int sfd)
{
	int mfd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	char sink[4096];

	while (m->mounted) {
		struct pollfd pf[2] = { { .fd = sfd, .events = POLLIN },
					{ .fd = mfd, .events = POLLPRI } };
		struct signalfd_siginfo si;
		pid_t pid;
		int ws;

		if (poll(pf, 2, 1000) < 0 && errno != EINTR)
			break;
		if ((pf[0].revents & POLLIN) &&
		    read(sfd, &si, sizeof si) == sizeof si &&
		    si.ssi_signo != SIGCHLD && unmount_dir(m, false) < 0)
			report_error("mount", "%s stays mounted", m->dir);
		while ((pid = waitpid(-1, &ws, WNOHANG)) > 0)
			child_ended(m, pid, ws);
		if (pf[1].revents & (POLLPRI | POLLERR)) {
			/* the event stays until the file is read again */
			lseek(mfd, 0, SEEK_SET);
			while (read(mfd, sink, sizeof sink) > 0)
				;
		}
		if (!m->fuse2fs && !mount_point_is(m->dir))
			m->mounted = false;
	}
	if (mfd >= 0)
		close(mfd);
}

/*
 * Undo what is built, top down. Safe on a half-built stack. -1 if the
 * server did not end cleanly (a sanitizer build reports a leak so).
 */
static int teardown(struct mount_req *m)
{
	char path[PATH_MAX];
	int r;
	char *argv[] = { "fusermount3", "-u", path, NULL };

	if (m->mounted && unmount_dir(m, false) < 0)
		unmount_dir(m, true);
	m->mounted = false;
	stop_child(&m->fuse2fs, STOP_MS);
	if (m->loop_fd >= 0) {
		ioctl(m->loop_fd, LOOP_CLR_FD, 0);
		close(m->loop_fd);
		m->loop_fd = -1;
	}
	for (int t = 0; m->loop_dev[0] && loop_bound(m); t += 20) {
		if (t >= STOP_MS) {
			report_error("mount", "%s is still bound",
				m->loop_dev);
			break;
		}
		msleep(20);
	}
	mount_path(m, path, "fuse");
	/* also when nbdfuse has died: its mount stays, and RUN with it */
	if (mount_point_is(path) && run(m, argv) < 0) {
		argv[1] = "-uz";
		run(m, argv);
	}
	stop_child(&m->nbdfuse, STOP_MS);
	if (m->server)
		kill(m->server, SIGTERM);
	r = stop_child(&m->server, STOP_MS);
	if (r < 0)
		report_error("mount", "uzram serve did not end cleanly");
	mount_remove_run(m);
	return r;
}

/* Build the stack up to a usable DIR; -1 with a message. */
static int build(struct mount_req *m)
{
	char pid[32], path[PATH_MAX];

	if (dprintf(m->pid_fd, "%d\n", (int)getpid()) < 0 ||
	    mount_write_run(m, "dir", m->dir) < 0 ||
	    mount_write_run(m, "via",
			    m->via == VIA_LOOP ? "loop\n" : "fuse\n") < 0)
		return -1;
	if (start_server(m) < 0)
		return -1;
	snprintf(pid, sizeof pid, "%d\n", (int)m->server);
	if (mount_write_run(m, "server.pid", pid) < 0 || start_nbdfuse(m) < 0)
		return -1;
	if (m->via == VIA_LOOP ? build_loop(m) < 0 : build_fuse(m) < 0)
		return -1;
	if (m->set_mode && chmod(m->dir, m->mode) < 0) {
		report_error("mount", "chmod %s: %s", m->dir,
			strerror(errno));
		return -1;
	}
	/* mkfs.ext4 gives lost+found to root whatever root_owner says */
	if (geteuid() == 0 &&
	    snprintf(path, sizeof path, "%s/lost+found", m->dir) < PATH_MAX &&
	    chown(path, m->uid, m->gid) < 0 && errno != ENOENT) {
		report_error("mount", "chown %s: %s", path,
			strerror(errno));
		return -1;
	}
	return 0;
}

int mount_keep(struct mount_req *m)
{
	/*
	 * Under a Type=notify unit (uzram-mount@.service runs mount -f) the
	 * keeper says READY=1 once DIR is usable; the server and nbdfuse it
	 * starts must not speak for it, so they do not inherit the socket.
	 */
	char *notify = getenv("NOTIFY_SOCKET") ? strdup(getenv("NOTIFY_SOCKET")) : NULL;
	char log[PATH_MAX];
	sigset_t set;
	int sfd;

	unsetenv("NOTIFY_SOCKET");

	m->loop_fd = -1;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	mount_path(m, log, "log");
	m->log_fd = open(log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (sfd < 0 || m->log_fd < 0) {
		report_error("mount", "keeper: %s", strerror(errno));
		free(notify);
		return 1;
	}
	if (build(m) < 0) {
		show_log(m);
		teardown(m);
		free(notify);
		return 1;
	}
	if (notify && setenv("NOTIFY_SOCKET", notify, 1) == 0)
		(void)sd_notifyf(1, "READY=1\nSTATUS=mounted %s", m->dir);
	free(notify);
	report_error("mount", "%s: %s", m->dir, m->via == VIA_LOOP ?
		"the kernel's ext4 on a loop device (direct I/O) on nbdfuse" :
		"ext4 through fuse2fs (FUSE, no root needed) on nbdfuse");
	if (!m->foreground) {
		/* Nothing of ours may keep the caller's stdout or stderr open. */
		dup2(m->log_fd, 1);
		dup2(m->log_fd, 2);
	}
	if (m->notify_fd >= 0) {
		if (write(m->notify_fd, "k", 1) != 1) {
			teardown(m); /* the caller is gone: do not stay mounted */
			return 1;
		}
		close(m->notify_fd);
	}
	wait_unmount(m, sfd);
	close(sfd);
	return teardown(m) < 0 || m->lost ? 1 : 0;
}
