// SPDX-License-Identifier: MIT
/*
 * mount.c - `uzram mount DIR` (a compressed RAM file system in one command):
 * options, checks, the runtime directory, and the fork of the keeper that
 * builds the stack (cli/mount/mount_stack.c; `uzram umount DIR`, which
 * takes it down, is umount.c).
 *
 * Each mount has a private runtime directory, RUN = BASE/m-HASH, where
 * HASH is the FNV-1a hash of DIR's absolute path, so `uzram umount DIR`
 * and `uzram stat --mount DIR` find it from DIR alone. BASE is
 * $UZRAM_RUNTIME_DIR, else /run/uzram as root, else
 * $XDG_RUNTIME_DIR/uzram, else /tmp/uzram-UID; it must be a directory of
 * ours that nobody else can enter (0700). RUN holds:
 *
 *   sock, sock.ctl   the server's sockets      fuse/disk  nbdfuse's file
 *   pid              the keeper's pid          dir        DIR
 *   via              "loop" or "fuse"          log        children's stderr
 *
 * Test hooks (see mount.h): UZRAM_DEV_FUSE replaces /dev/fuse and
 * UZRAM_LOOP_CONTROL replaces /dev/loop-control, so a test can take FUSE
 * or the loop devices away without unloading a module.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uzram.h"
#include "../base/base.h"
#include "mount.h"


static const struct cli_option mount_opts[] = {
	{ "size", 's', required_argument, "SIZE",
	  "the device and file system (default: half of RAM,\n"
	  "as tmpfs)" },
	{ "algorithm", 'a', required_argument, "ALGO",
	  "the compression algorithm (default lz4)" },
	{ "level", 'l', required_argument, "N",
	  "its level (default: its own)" },
	{ "cluster", 'C', required_argument, "4K..64K",
	  "pages compressed together (default 4K; 16K with\n"
	  "--via fs, a file's block)" },
	{ "mem-limit", 'm', required_argument, "SIZE",
	  "the file system is made no larger than about SIZE,\n"
	  "so that it, not the device, reports ENOSPC (--via\n"
	  "fs: the device's ENOSPC reaches the write, and df's\n"
	  "available space follows what the limit lets in)" },
	{ "inodes", 'I', required_argument, "N",
	  "the most files, directories and symlinks, as tmpfs's\n"
	  "nr_inodes (K, M, G: powers of 1024; --via fs: half\n"
	  "as many as RAM has pages by default, as tmpfs; ext4:\n"
	  "mkfs.ext4 -N N)" },
	{ "fs", 'F', required_argument, "ext4", "the file system (ext4 only)" },
	{ NULL, 'o', required_argument, "OPTIONS",
	  "mount options: the kernel's ext4's with --via loop,\n"
	  "fuse2fs's with --via fuse; with --via fs tmpfs's\n"
	  "size=, nr_inodes=, mode=, uid=, gid=" },
	{ "uid", 'u', required_argument, "UID",
	  "owner of DIR's root (default: the caller; without\n"
	  "root, only the caller)" },
	{ "gid", 'g', required_argument, "GID",
	  "group of DIR's root (default: the caller's; without\n"
	  "root, one of the caller's groups)" },
	{ "mode", 'M', required_argument, "MODE",
	  "mode of DIR's root, octal (default 0755; 1777\n"
	  "for a /tmp)" },
	{ "via", 'v', required_argument, "loop|fuse|fs",
	  "loop: the kernel's ext4 on a loop device (root;\n"
	  "the default as root), fuse: ext4 through fuse2fs,\n"
	  "fs: uzram's own file system (FUSE; the default\n"
	  "without root)" },
	{ "image", 'i', required_argument, "FILE",
	  "open the tree saved in FILE, if it exists, and save\n"
	  "the whole tree there at umount (implies --via fs)" },
	{ "foreground", 'f', no_argument, NULL,
	  "stay in the foreground until DIR is unmounted" },
	{ "nonempty", 'N', no_argument, NULL,
	  "mount over a DIR that is not empty, hiding its files\n"
	  "until umount, as mount(8) does (the boot's units:\n"
	  "a /tmp may hold files until tmpfiles cleans it)" },
	{ "help", 'h', no_argument, NULL, "this text" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_command mount_cmd = {
	.name = "mount",
	.operands = "DIR",
	.summary = "A compressed RAM file system at DIR (an empty directory, or any with\n"
		   "--nonempty); returns once DIR is usable. uzram umount DIR (or umount /\n"
		   "fusermount3 -u) undoes it all.\n",
	.shorts = "o:fh",
	.opts = mount_opts,
	.brief = "mount a compressed RAM file system",
};

/* DIR as an absolute path without resolving it (it may be a dead mount). */
int mount_abs_dir(const char *dir, char *out)
{
	char cwd[PATH_MAX], *r = realpath(dir, out);
	size_t n;

	if (r)
		return 0;
	if (dir[0] == '/')
		n = (size_t)snprintf(out, PATH_MAX, "%s", dir);
	else if (getcwd(cwd, sizeof cwd))
		n = (size_t)snprintf(out, PATH_MAX, "%s/%s", cwd, dir);
	else
		return -1;
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	return n < PATH_MAX ? 0 : -1;
}

/* BASE (see the top), created 0700 if missing, checked to be private. */
static int runtime_base(char *out, const char *who)
{
	const char *env = getenv(ENV_RUNTIME_DIR), *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat sb;

	if (env && *env)
		snprintf(out, PATH_MAX, "%s", env);
	else if (geteuid() == 0)
		snprintf(out, PATH_MAX, "/run/uzram");
	else if (xdg && *xdg)
		snprintf(out, PATH_MAX, "%s/uzram", xdg);
	else
		snprintf(out, PATH_MAX, "/tmp/uzram-%u", (unsigned)geteuid());
	if (mkdir(out, 0700) < 0 && errno != EEXIST) {
		report_error(who, "mkdir %s: %s", out, strerror(errno));
		return -1;
	}
	if (lstat(out, &sb) < 0 || !S_ISDIR(sb.st_mode) ||
	    sb.st_uid != geteuid() || (sb.st_mode & 077)) {
		report_error(who, "%s is not a private directory of ours (0700)", out);
		return -1;
	}
	return 0;
}

/*
 * Root, on a DIR that another user mounted (a FUSE mount's user_id): that
 * user's RUN, in the runtime directories a user's uzram mount makes by
 * default (runtime_base()), so that root's uzram umount, stat --mount and
 * ctl --mount reach it. Only a private directory of that user's counts.
 */
static void owner_run(struct mount_req *m, const char *name)
{
	uid_t uid = mount_owner(m->dir);
	char bases[2][64], run[PATH_MAX];
	struct stat sb;

	if (uid == (uid_t)-1 || uid == 0)
		return;
	snprintf(bases[0], sizeof bases[0], "/run/user/%u/uzram", (unsigned)uid);
	snprintf(bases[1], sizeof bases[1], "/tmp/uzram-%u", (unsigned)uid);
	for (int i = 0; i < 2; i++) {
		if (snprintf(run, sizeof run, "%s/%s", bases[i], name) >=
		    (int)sizeof run || lstat(bases[i], &sb) < 0 ||
		    !S_ISDIR(sb.st_mode) || sb.st_uid != uid ||
		    (sb.st_mode & 077) || lstat(run, &sb) < 0 ||
		    !S_ISDIR(sb.st_mode) || sb.st_uid != uid)
			continue;
		if (strlen(run) < sizeof m->run) {
			snprintf(m->run, sizeof m->run, "%s", run);
			m->run_owner = uid;
		}
		return;
	}
}

/* m->run for m->dir; -1 with a message when the sockets would not fit. */
int mount_runtime_dir(struct mount_req *m, const char *who)
{
	char base[PATH_MAX], name[24];
	uint64_t h = 0xcbf29ce484222325ull;
	struct sockaddr_un sa;

	if (runtime_base(base, who) < 0)
		return -1;
	for (const unsigned char *p = (const unsigned char *)m->dir; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	snprintf(name, sizeof name, "m-%016llx", (unsigned long long)h);
	if (snprintf(m->run, sizeof m->run, "%s/%s", base, name) >=
	    (int)sizeof m->run) {
		report_error(who, "runtime directory %s too long", base);
		return -1;
	}
	if (geteuid() == 0 && !getenv(ENV_RUNTIME_DIR) &&
	    access(m->run, F_OK) < 0)
		owner_run(m, name);
	if (strlen(m->run) + sizeof "/nbdfuse.pid" > sizeof sa.sun_path) {
		report_error(who, "runtime directory %s too long for a socket", m->run);
		return -1;
	}
	return 0;
}

int mount_socket_path(const char *who, const char *dir, char *out, size_t n)
{
	struct mount_req m = { 0 };
	char sock[PATH_MAX], ctl[PATH_MAX];

	if (mount_abs_dir(dir, m.dir) < 0 || mount_runtime_dir(&m, who) < 0)
		return -1;
	mount_path(&m, sock, "sock");
	mount_path(&m, ctl, "sock.ctl"); /* --via fs has only this one */
	if (access(sock, F_OK) < 0 && access(ctl, F_OK) < 0) {
		report_error(who, "%s is not mounted by uzram mount", dir);
		return -1;
	}
	/* root does not talk to a socket another user's process answers on
	 * (ctl_path.c); it may take the mount down */
	if (m.run_owner) {
		report_error(who, "%s is uid %u's uzram mount: ask as that user "
			"(root can take it down: %s umount %s)", dir,
			(unsigned)m.run_owner, cli_prog, dir);
		return -1;
	}
	snprintf(out, n, "%s", sock);
	return 0;
}

/* program in PATH, or a message naming the Debian package that has it. */
static int need(const char *program, const char *package)
{
	const char *path = getenv("PATH");
	char file[PATH_MAX];

	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(file, sizeof file, "%.*s/%s", (int)n, p, program);
		if (access(file, X_OK) == 0)
			return 0;
		p += n + (p[n] == ':');
	}
	report_error("mount", "%s not found: install the Debian package %s "
		"(scripts/deps.sh run)", program, package);
	return -1;
}

/* DIR must be a directory that is not a mount point already, and empty
 * unless --nonempty. */
static int check_dir(const char *arg, struct mount_req *m)
{
	struct stat sb;
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (stat(arg, &sb) < 0 || !realpath(arg, m->dir)) {
		uid_t owner;

		if (errno == ENOTCONN)	/* a FUSE mount whose server died */
			report_error("mount", "%s: %s: the file system there "
				"has lost its process (%s umount %s, or "
				"fusermount3 -u, takes it down)", arg,
				strerror(errno), cli_prog, arg);
		else if (errno == EACCES && mount_abs_dir(arg, m->dir) == 0 &&
			 (owner = mount_owner(m->dir)) != (uid_t)-1)
			/* FUSE keeps out even root without allow_other */
			report_error("mount", "%s: already a mount point, uid "
				"%u's FUSE mount", arg, (unsigned)owner);
		else
			report_error("mount", "%s: %s", arg, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		report_error("mount", "%s: not a directory", arg);
		return -1;
	}
	/* before the empty check: a mounted file system is never empty */
	if (mount_point_is(m->dir)) {
		struct mount_req t = { 0 };
		char sock[PATH_MAX];
		bool ours;

		snprintf(t.dir, sizeof t.dir, "%s", m->dir);
		ours = mount_runtime_dir(&t, "mount") == 0 &&
		       (mount_path(&t, sock, "sock"), access(sock, F_OK) == 0);
		if (ours)
			report_error("mount", "%s: already mounted by "
				"uzram mount (%s umount %s first)", arg,
				cli_prog, arg);
		else
			report_error("mount", "%s: already a mount "
				"point", arg);
		return -1;
	}
	if (m->nonempty)
		return 0;
	d = opendir(m->dir);
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	if (!d || n) {
		report_error("mount", "%s: %s", arg,
			d ? "directory not empty (--nonempty mounts over "
			    "its files)" : strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Why fuse cannot be opened read-write, and what would fix it: the module
 * when the device is missing, else its mode, owner and group against ours.
 */
static int fuse_unavailable(const char *fuse, int err)
{
	struct stat sb;
	struct group *g;
	char gname[64];

	if (err != EACCES && err != EPERM) {
		report_error("mount", "FUSE is unavailable: %s: %s "
			"(as root: modprobe fuse; apt-get install fuse3)",
			fuse, strerror(err));
		return -1;
	}
	if (stat(fuse, &sb) < 0) {
		report_error("mount", "FUSE is unavailable: %s: %s",
			fuse, strerror(err));
		return -1;
	}
	g = getgrgid(sb.st_gid);
	if (g)
		snprintf(gname, sizeof gname, "%s", g->gr_name);
	else
		snprintf(gname, sizeof gname, "%u", (unsigned)sb.st_gid);
	fprintf(stderr, "uzram mount: cannot open %s read-write: it has mode "
		"%04o, owner uid %u, group %s, and this process has uid %u; ",
		fuse, (unsigned)(sb.st_mode & 07777), (unsigned)sb.st_uid,
		gname, (unsigned)geteuid());
	if ((sb.st_mode & 060) == 060)
		fprintf(stderr, "join group %s (as root: adduser USER %s, then "
			"log in again)\n", gname, gname);
	else
		fprintf(stderr, "as root, chmod 666 %s (what Debian's udev rule "
			"sets)\n", fuse);
	return -1;
}

/* Append /usr/sbin and /sbin to PATH where they are not on it. */
static void sbin_on_path(void)
{
	static char buf[8192];
	const char *path = getenv("PATH");
	const char *dirs[] = { "/usr/sbin", "/sbin" };

	snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
	for (size_t i = 0; i < 2; i++) {
		size_t n = strlen(dirs[i]), len = strlen(buf);
		bool have = false;

		for (const char *p = buf; *p;) {
			size_t k = strcspn(p, ":");

			have |= k == n && !strncmp(p, dirs[i], n);
			p += k + (p[k] == ':');
		}
		if (!have && len + n + 2 < sizeof buf)
			snprintf(buf + len, sizeof buf - len, ":%s", dirs[i]);
	}
	setenv("PATH", buf, 1);
}

/* FUSE, the programs, and which path: loop as root when there is one. */
static int check_system(struct mount_req *m)
{
	const char *fuse = getenv(ENV_DEV_FUSE), *ctl = getenv(ENV_LOOP_CONTROL);

	if (!fuse)
		fuse = "/dev/fuse";
	if (!ctl)
		ctl = "/dev/loop-control";
	if (access(fuse, R_OK | W_OK) < 0)
		return fuse_unavailable(fuse, errno);
	/* --image is uzram's own file system's: it picks it as root too */
	if (m->via == VIA_FS ||
	    (m->via == VIA_AUTO && (geteuid() != 0 || m->image[0]))) {
		m->via = VIA_FS; /* cli/mount/mount_fs.c */
		return need("fusermount3", "fuse3");
	}
	/* mkfs.ext4 is in /usr/sbin, on no user's PATH on Debian: without
	 * it --via fuse, which needs no root, would say e2fsprogs is missing */
	sbin_on_path();
	if (need("nbdfuse", "libnbd-bin") < 0 || need("mkfs.ext4", "e2fsprogs") < 0 ||
	    need("fusermount3", "fuse3") < 0)
		return -1;
	if (m->via == VIA_AUTO) {
		if (geteuid() != 0) {
			m->via = VIA_FUSE;
		} else if (access(ctl, R_OK | W_OK) < 0) {
			report_error("mount", "no loop device (%s: %s): "
				"using fuse2fs", ctl, strerror(errno));
			m->via = VIA_FUSE;
		} else {
			m->via = VIA_LOOP;
		}
	}
	if (m->via == VIA_LOOP && geteuid() != 0) {
		report_error("mount", "--via loop needs root");
		return -1;
	}
	return m->via == VIA_FUSE ? need("fuse2fs", "fuse2fs") : 0;
}

static int parse_id(const char *s, int base, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, base);
	if (errno || end == s || *end || v > max || s[0] == '-')
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* Pass --NAME VALUE on to uzram serve (NAME is one of mount_opts[]). */
static void serve_option(struct mount_req *m, const char *name, char *value)
{
	static char names[8][24];
	int i = m->serve_argc / 2;

	if (i >= 8)
		return; /* each option once: getopt gave a later one again */
	snprintf(names[i], sizeof names[i], "--%s", name);
	m->serve_argv[m->serve_argc++] = names[i];
	m->serve_argv[m->serve_argc++] = value;
}

/* One option of `uzram mount` into the mount_req ctx (cli_parse()'s take). */
static int mount_take(void *ctx, int key, char *arg)
{
	struct mount_req *m = ctx;
	unsigned long long v;
	unsigned id;
	int r;

	switch (key) {
	case 's': case 'm':
		if (key == 's' && (r = cli_take_size(arg, 16 << 20, &v)))
			return r;
		if (key == 'm' && parse_mem_size(arg, &v) < 0)
			return CLI_BAD_VALUE;
		/* the file system is the limit less 1/16 (sizes()), at least
		 * the 16M of --size: 0 is no limit */
		if (key == 'm' && v && v - v / 16 < (16 << 20))
			return cli_bad_value("0 (no limit) or at least 18M, for a "
					     "file system of 16M");
		*(key == 's' ? &m->size : &m->mem_limit) = v;
		m->size_set |= key == 's';
		serve_option(m, cli_find(mount_opts, key)->name, arg);
		return 0;
	case 'C':
		if (cli_take_cluster(arg, &v))
			return CLI_BAD_VALUE;
		serve_option(m, "cluster", arg);
		return 0;
	case 'a': case 'l': /* uzram serve checks them */
		serve_option(m, cli_find(mount_opts, key)->name, arg);
		return 0;
	case 'I':
		if (parse_size(arg, &v) < 0 || !v || v > UINT32_MAX)
			return cli_bad_value("1 to 4G-1 (tmpfs's nr_inodes: "
					     "K, M, G are powers of 1024)");
		m->inodes = v;
		return 0;
	case 'F':
		return strcmp(arg, "ext4") ? CLI_BAD_VALUE : 0;
	case 'o':
		m->opts = arg;
		return 0;
	case 'u': case 'g':
		if (parse_id(arg, 10, UINT32_MAX - 1, &id) < 0)
			return CLI_BAD_VALUE;
		*(key == 'u' ? &m->uid : &m->gid) = id;
		return 0;
	case 'M':
		if (parse_id(arg, 8, 07777, &id) < 0)
			return CLI_BAD_VALUE;
		m->mode = (mode_t)id;
		m->set_mode = true;
		return 0;
	case 'v':
		if (strcmp(arg, "loop") && strcmp(arg, "fuse") && strcmp(arg, "fs"))
			return CLI_BAD_VALUE;
		m->via = arg[0] == 'l' ? VIA_LOOP : arg[1] == 's' ? VIA_FS : VIA_FUSE;
		return 0;
	case 'i':
		if (mount_abs_dir(arg, m->image) < 0)
			return CLI_BAD_VALUE;
		return 0;
	case 'f':
		m->foreground = true;
		return 0;
	case 'N':
		m->nonempty = true;
		return 0;
	default:
		return 2; /* not in mount_opts */
	}
}

/* Options into m; -1 to go on, or the exit status. */
static int mount_options(int argc, char **argv, struct mount_req *m)
{
	int r = cli_parse(&mount_cmd, argc, argv, mount_take, m);

	if (r >= 0)
		return r;
	if (optind == argc)
		return cli_usage_error(&mount_cmd, "no directory given");
	if (optind != argc - 1)
		return cli_usage_error(&mount_cmd, "one directory only, not "
				       "'%s' and '%s'", argv[optind],
				       argv[optind + 1]);
	return -1;
}

/*
 * -o with uzram's own file system: tmpfs's options, as a tmpfs line of
 * fstab or uzram.conf's options key has them: size=, nr_inodes=, mode=,
 * uid=, gid= (as --size, --inodes, --mode, --uid, --gid, and checked as
 * they are), and nosuid, nodev and rw, which every such mount is. The
 * list is cut in place: serve's --size points into it. 0, or 2 after a
 * message.
 */
static int tmpfs_options(struct mount_req *m)
{
	static const struct { const char *name; int key; } map[] = {
		{ "size", 's' }, { "nr_inodes", 'I' }, { "mode", 'M' },
		{ "uid", 'u' }, { "gid", 'g' },
	};
	char *save = NULL, *o, *eq;
	size_t i;

	for (o = strtok_r(m->opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (!strcmp(o, "nosuid") || !strcmp(o, "nodev") || !strcmp(o, "rw"))
			continue;
		eq = strchr(o, '=');
		for (i = 0; eq && i < sizeof map / sizeof map[0]; i++)
			if (strlen(map[i].name) == (size_t)(eq - o) &&
			    !strncmp(o, map[i].name, (size_t)(eq - o)))
				break;
		if (!eq || i == sizeof map / sizeof map[0]) {
			report_error("mount", "-o %s: uzram's own file system takes "
				"tmpfs's size=, nr_inodes=, mode=, uid= and gid= "
				"(and nosuid, nodev, rw: it is always so)", o);
			return 2;
		}
		*eq = '\0';
		if (mount_take(m, map[i].key, eq + 1)) {
			report_error("mount", "-o %s: bad value '%s'", o, eq + 1);
			return 2;
		}
	}
	m->opts = NULL;
	return 0;
}

/*
 * Without root, DIR's root is the caller's, in the caller's group or one
 * of its other groups: what chown(2) lets a user give a file. A user's
 * mount whose root claimed uid 0 was one the user could not chown back
 * (and under fuse2fs, not write in); mount(8) lets no user choose tmpfs's
 * uid= and gid= either. 0, or -1 after saying why.
 */
static int check_owner(const struct mount_req *m)
{
	int n = getgroups(0, NULL);
	gid_t *groups;
	bool in = false;

	if (geteuid() == 0)
		return 0;
	if (m->uid != getuid()) {
		report_error("mount", "--uid %u: only root may mount a file "
			"system owned by another user (you are uid %u, and "
			"could not chown its files back)", (unsigned)m->uid,
			(unsigned)getuid());
		return -1;
	}
	if (m->gid == getgid() || m->gid == getegid())
		return 0;
	groups = n > 0 ? calloc((size_t)n, sizeof *groups) : NULL;
	n = groups ? getgroups(n, groups) : 0;
	for (int i = 0; i < n; i++)
		in |= groups[i] == m->gid;
	free(groups);
	if (in)
		return 0;
	report_error("mount", "--gid %u: only root may mount a file system "
		"owned by a group you are not in (yours is gid %u)",
		(unsigned)m->gid, (unsigned)getgid());
	return -1;
}

/* The size of device and fs; with a memory limit, the fs fits in it. */
static void sizes(struct mount_req *m)
{
	static char size[32];

	if (!m->size) {
		m->size = ram_share(sysconf(_SC_PHYS_PAGES),
				    sysconf(_SC_PAGESIZE), 2, 0);
		snprintf(size, sizeof size, "%llu", m->size);
		m->serve_argv[m->serve_argc++] = "--size";
		m->serve_argv[m->serve_argc++] = size;
	}
	m->fs_bytes = m->size;
	/*
	 * A device out of memory fails writes under ext4, which takes them for
	 * I/O errors. A file system no larger than the limit (less 1/16 for
	 * the allocator's overhead on incompressible data) runs out of blocks
	 * first and says ENOSPC, consistently.
	 */
	if (m->via != VIA_FS && m->mem_limit && /* fs: the device says ENOSPC */
	    m->mem_limit - m->mem_limit / 16 < m->fs_bytes) {
		m->fs_bytes = m->mem_limit - m->mem_limit / 16;
		report_error("mount", "the file system holds at most %llu "
			"MiB, within --mem-limit", m->fs_bytes >> 20);
	}
	m->fs_bytes &= ~4095ull;
}

/* Create RUN/pid and lock it for the keeper (it inherits the lock). */
static int lock_run(struct mount_req *m)
{
	char path[PATH_MAX];

	mount_path(m, path, "pid");
	m->pid_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (m->pid_fd < 0 || flock(m->pid_fd, LOCK_EX | LOCK_NB) < 0) {
		report_error("mount", "%s: %s", path, strerror(errno));
		if (m->pid_fd >= 0)
			close(m->pid_fd);
		unlink(path);
		rmdir(m->run);
		return -1;
	}
	return 0;
}

/* RUN, fresh: clear what a dead keeper left; refuse a live one. */
static int make_run(struct mount_req *m)
{
	pid_t pid;

	if (mkdir(m->run, 0700) == 0)
		return lock_run(m);
	if (errno != EEXIST) {
		report_error("mount", "mkdir %s: %s", m->run,
			strerror(errno));
		return -1;
	}
	if (mount_keeper_alive(m)) {
		pid = mount_read_pid(m, "pid");
		report_error("mount", "%s is mounted already (keeper pid %d)",
			m->dir, (int)pid);
		return -1;
	}
	mount_clear_dead(m);
	if (mkdir(m->run, 0700) == 0)
		return lock_run(m);
	report_error("mount", "mkdir %s: %s", m->run, strerror(errno));
	return -1;
}

int cmd_mount(int argc, char **argv)
{
	struct mount_req m = { .uid = getuid(), .gid = getgid(), .notify_fd = -1 };
	char c;
	pid_t pid;
	int p[2], r, ws;

	r = mount_options(argc, argv, &m);
	if (r >= 0)
		return r;
	if (readlink("/proc/self/exe", m.self, sizeof m.self - 1) < 0) {
		report_error("mount", "/proc/self/exe: %s", strerror(errno));
		return 1;
	}
	if (check_dir(argv[optind], &m) < 0 || check_system(&m) < 0)
		return 1;
	/* ext4's or fuse2fs's options, or tmpfs's for uzram's own */
	if (m.opts && m.via == VIA_FS && (r = tmpfs_options(&m)))
		return r;
	if (check_owner(&m) < 0 || mount_runtime_dir(&m, "mount") < 0)
		return 1;
	if (m.image[0] && m.via != VIA_FS) {
		report_error("mount", "--image is for --via fs (uzram's own file "
			  "system)");
		return 1;
	}
	sizes(&m);
	if (make_run(&m) < 0)
		return 1;
	if (m.foreground)
		return m.via == VIA_FS ? mount_fs_keep(&m) : mount_keep(&m);
	if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		report_error("mount", "%s", strerror(errno));
		mount_remove_run(&m);
		return 1;
	}
	if (pid == 0) {
		close(p[0]);
		m.notify_fd = p[1];
		setsid();
		if (chdir("/") < 0)
			_exit(1);
		_exit(m.via == VIA_FS ? mount_fs_keep(&m) : mount_keep(&m));
	}
	close(p[1]);
	close(m.pid_fd); /* the keeper's copy holds the lock */
	while ((r = (int)read(p[0], &c, 1)) < 0 && errno == EINTR)
		;
	close(p[0]);
	if (r == 1)
		return 0;
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(ws) && WEXITSTATUS(ws) ? WEXITSTATUS(ws) : 1;
}
