// SPDX-License-Identifier: MIT
/*
 * mount_run.c - the runtime directory of one `uzram mount` (see mount.c
 * for what it holds) and whether a path is a mount point: what mount.c and
 * the keeper in mount_stack.c both use.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
