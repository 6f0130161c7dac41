// SPDX-License-Identifier: MIT
/*
 * mount_run.c - the runtime directory of one `uzram mount` (see mount.c
 * for what it holds), whether a path is a mount point, and the keeper's
 * life as RUN shows it (whether it lives, which of its children died,
 * what a dead one left cleared): what mount.c, umount.c and the keeper in
 * mount_stack.c share.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount.h"

void mount_path(const struct mount_req *m, char *out, const char *name)
{
	/* runtime_dir() left room for every name */
	if (snprintf(out, PATH_MAX, "%s/%s", m->run, name) >= PATH_MAX)
		out[0] = '\0';
}

int mount_write_run(const struct mount_req *m, const char *name,
		    const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	mount_path(m, path, name);
	f = fopen(path, "we");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		report_error("mount", "cannot write %s", path);
		return -1;
	}
	return 0;
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++, d++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + s[3] - '0');
			s += 3;
		} else {
			*d = *s;
		}
	}
	*d = '\0';
}

/*
 * The mountinfo line of the mount at path, in line (n bytes): its fifth
 * field, the mount point (unescaped), is path; *save then goes on after
 * that field, for strtok_r(). false: no mount there.
 */
static bool mount_line(const char *path, char *line, size_t n, char **save)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, (int)n, f)) {
		char *field = strtok_r(line, " ", save);

		for (int i = 1; field && i < 5; i++)
			field = strtok_r(NULL, " ", save);
		if (field) {
			unescape(field);
			found = !strcmp(field, path);
		}
	}
	fclose(f);
	return found;
}

bool mount_point_is(const char *path)
{
	char line[8192], *save;

	return mount_line(path, line, sizeof line, &save);
}

uid_t mount_owner(const char *path)
{
	char line[8192], *save, *field, *opt;

	if (!mount_line(path, line, sizeof line, &save))
		return (uid_t)-1;
	/* past " - ": the type, the source, the super options */
	while ((field = strtok_r(NULL, " ", &save)) && strcmp(field, "-"))
		;
	field = field ? strtok_r(NULL, " ", &save) : NULL;
	if (!field || strncmp(field, "fuse", 4))
		return (uid_t)-1;
	(void)strtok_r(NULL, " ", &save);
	opt = strtok_r(NULL, " \n", &save);
	opt = opt ? strstr(opt, "user_id=") : NULL;
	return opt ? (uid_t)strtoul(opt + 8, NULL, 10) : (uid_t)-1;
}

void mount_remove_run(const struct mount_req *m)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(m->run);

	/*
	 * Every name in RUN is ours: the files the keeper wrote, and the
	 * sockets a server killed with SIGKILL could not remove.
	 */
	mount_path(m, path, "fuse");
	rmdir(path);
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    strcmp(e->d_name, "fuse")) {
			mount_path(m, path, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	if (rmdir(m->run) < 0)
		report_error("mount", "rmdir %s: %s", m->run,
			strerror(errno));
}

long mount_relay_log(int fd)
{
	char buf[4096];
	ssize_t n;
	long all = 0;

	while ((n = read(fd, buf, sizeof buf)) > 0 &&
	       write(STDERR_FILENO, buf, (size_t)n) == n)
		all += n;
	close(fd);
	return all;
}

/* The pid in RUN/NAME, 0 if there is none. */
pid_t mount_read_pid(const struct mount_req *m, const char *name)
{
	char path[PATH_MAX];

	mount_path(m, path, name);
	return read_pid_file(path);
}

/* fusermount3 ARG DIR; 0 if it succeeded (else it said why). */
int mount_fusermount(const char *arg, const char *dir)
{
	pid_t pid = fork();
	int ws;

	if (pid == 0) {
		execlp("fusermount3", "fusermount3", arg, dir, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) ||
	    WEXITSTATUS(ws))
		return -1;
	return 0;
}

void mount_unmount_lazy(const char *dir)
{
	if (geteuid() == 0)
		umount2(dir, MNT_DETACH);
	else
		mount_fusermount("-uz", dir);
}

/* Wait for a process that is not our child to end; 0, or -1 at timeout. */
int mount_wait_gone(pid_t pid, int ms)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int r = poll(&pf, 1, ms);

		close(fd);
		return r == 1 ? 0 : -1;
	}
	return errno == ESRCH ? 0 : -1;
}

/*
 * Whether the keeper of RUN lives: it holds a lock on RUN/pid from before
 * it starts until RUN is gone, which no reuse of its pid can fake.
 */
bool mount_keeper_alive(const struct mount_req *m)
{
	char path[PATH_MAX];
	bool alive;
	int fd;

	mount_path(m, path, "pid");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	alive = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return alive;
}

/* Whether pid runs (a zombie does not) with RUN in its command line. */
static bool runs_in(const struct mount_req *m, pid_t pid)
{
	char path[64], buf[4096] = "", state = 'Z';
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
			state = 'Z';
		fclose(f);
	}
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	f = pid > 0 && state != 'Z' ? fopen(path, "re") : NULL;
	if (f) {
		n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
	}
	for (size_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[n] = '\0';
	return strstr(buf, m->run) != NULL;
}

/*
 * The keeper died (killed, say): unmount what it left lazily, stop its
 * children, remove RUN.
 */
void mount_clear_dead(struct mount_req *m)
{
	char fuse[PATH_MAX];
	pid_t pid;

	mount_path(m, fuse, "fuse");
	if (mount_point_is(m->dir))
		mount_unmount_lazy(m->dir);
	if (mount_point_is(fuse))
		mount_unmount_lazy(fuse); /* nbdfuse ends with it */
	for (int i = 0; i < 2; i++) {
		pid = mount_read_pid(m, i ? "server.pid" : "nbdfuse.pid");
		if (runs_in(m, pid) && kill(pid, SIGTERM) == 0 &&
		    mount_wait_gone(pid, 10000) < 0)
			fprintf(stderr, "uzram: pid %d does not end\n", (int)pid);
	}
	mount_remove_run(m);
	fprintf(stderr, "uzram: %s: its keeper had died; cleared what it left\n",
		m->dir);
}

/*
 * Which part of the stack under DIR has died, or NULL: the server or
 * nbdfuse that the keeper started (the OOM killer's choice). The kernel
 * logged the writes since as "lost async page write" and told the writer
 * they succeeded; only umount can still say so.
 */
const char *mount_stack_gone(const struct mount_req *m, pid_t *pid)
{
	static const char *const who[] = { "uzram serve", "nbdfuse" };

	for (int i = 0; i < 2; i++) {
		*pid = mount_read_pid(m, i ? "nbdfuse.pid" : "server.pid");
		if (*pid > 0 && !runs_in(m, *pid))
			return who[i];
	}
	return NULL;
}
