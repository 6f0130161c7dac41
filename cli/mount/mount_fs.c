// SPDX-License-Identifier: MIT
/*
 * mount_fs.c - the keeper of `uzram mount DIR --via fs` (the default
 * without root): one process that holds the device and serves DIR with
 * uzram's own file system (fs/), instead of the ext4 stack of
 * mount_stack.c.
 *
 *   DIR      uzram's file system (FUSE, libfuse3's low-level API)
 *             |  in this process
 *   device   libuzram: the files' data, compressed
 *
 * RUN (cli/mount/mount.c) holds pid (locked while the keeper lives), dir, via
 * ("fs"), log, and sock.ctl: the control channel of `uzram stat --mount`
 * and `uzram ctl --mount` (ctl/ctl_alone.c). The keeper serves until DIR is unmounted (uzram umount,
 * fusermount3 -u, umount) or it gets SIGTERM, SIGINT or SIGHUP, which
 * unmount first. Killed outright, it leaves DIR giving ENOTCONN; `uzram
 * umount DIR` then finds no live keeper and clears the mount and RUN
 * (mount.c's clear_dead()).
 *
 * With --image FILE the device opens from FILE when it exists (uzram_open()
 * checks it whole) and the file system mounts the tree saved in it
 * (fs/tree_image.c); at the end, once DIR is unmounted, the tree is saved
 * there (uzfs_save(): aside, fsync, rename). A keeper killed outright saves
 * nothing: FILE keeps the tree of the last clean umount. RUN/image names
 * FILE, so that `uzram umount` can first see whether the save can be
 * written (mount_fs_check_save()) and leave DIR mounted if not; a save
 * that fails all the same is rescued (rescue_save()).
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "uzram.h"
#include "../base/base.h"
#include "mount.h"
#include "../../fs/uzfs.h"
#include "../../ctl/ctl.h"

/*
 * Write fast, re-encode later (uzram_config.fast_algorithm): new clusters
 * are compressed with lz4 at acceleration FAST_LEVEL, and the device's
 * own thread re-encodes each with the configured algorithm once it has
 * been neither read nor written for REENCODE_AGE seconds. Measured
 * (BENCHMARKS.md, the fs section): a 1 GiB dd took the keeper 1.4 s of
 * CPU to write and 0.5-0.7 s to read back, against 2.4-3.0 s and 0.7-0.8
 * s with lz4 alone; the corpus (/usr/include) held 0.84x tmpfs's memory
 * right after untar and 0.38x, as with lz4 alone, 15 s later. The age
 * keeps just-written data cheap to read for a while (a file is often
 * read right after it is written); once clusters are due, the re-encoder
 * takes one a millisecond at most while reads or writes reach the device
 * (src/recompress/reencode.c), so a file read back 12-20 s after it was
 * written, or a write that takes that long, does not share the CPU with it.
 *
 * Not with --mem-limit (the fast objects are larger until re-encoded, so
 * the limit would come sooner), nor with --image (a device opened from an
 * image runs no re-encoder: the fast objects would stay), nor where the
 * configured codec is lz4 at least as fast already.
 */
#define FAST_LEVEL 64
#define REENCODE_AGE 16

/*
 * Clusters of 16 KiB unless --cluster says otherwise (a device's default
 * is one page): a file's block is one cluster (fs/bmap.c). Measured
 * (BENCHMARKS.md, "CPU per byte", branch fsdata): a 512 MiB dd bs=1M
 * took the keeper 1.34-1.50 s of CPU a GiB against 1.76-2.00 s with 4
 * KiB clusters (lz4 at acceleration 64 compresses a 4 KiB cluster so
 * little that 42% of them were stored raw, each a page to populate; at 16
 * KiB 24%), at 466-646 MB/s against 451-537 MB/s; /usr/include held 44.3
 * MiB once re-encoded against 50.3 MiB; untar, grep -r, rm -rf, a C build
 * and 4 KiB random writes (fio) were the same within the noise. 32 and 64
 * KiB gained no more. The price: a file takes whole 16 KiB blocks of
 * --size (st_blocks, df), where tmpfs counts 4 KiB pages.
 */
#define FS_CLUSTER (16u << 10)

static void write_fast(const struct mount_req *m, struct uzram_config *cfg)
{
	if (m->mem_limit || m->image[0] ||
	    (!strcmp(cfg->algorithm, "lz4") && cfg->level >= FAST_LEVEL))
		return;
	cfg->fast_algorithm = "lz4";
	cfg->fast_level = FAST_LEVEL;
	cfg->reencode_age = REENCODE_AGE;
}

/* The device's config from the options mount.c kept for uzram serve. */
static int device_config(const struct mount_req *m, struct uzram_config *cfg)
{
	unsigned long long v;
	long ncpu;

	uzram_config_init(cfg);
	cfg->size = m->size;
	if (m->image[0] && access(m->image, F_OK) == 0) {
		cfg->image = m->image; /* its size: build_fs() checks --size */
		cfg->size = 0;
	}
	cfg->mem_limit = m->mem_limit;
	cfg->cluster_size = FS_CLUSTER;
	/* a large write's clusters are compressed on every core (the NBD
	 * server leaves this to --threads; here the fs is the only user),
	 * but not on two: there the one helper took 30% more CPU for the
	 * same throughput (1 GiB dd, quiet, BENCHMARKS.md, 2026-12-04) */
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cfg->threads = ncpu > 2 ? (uint32_t)(ncpu - 1 < 7 ? ncpu - 1 : 7) : 0;
	for (int i = 0; i + 1 < m->serve_argc; i += 2) {
		const char *name = m->serve_argv[i], *arg = m->serve_argv[i + 1];

		if (!strcmp(name, "--algorithm")) {
			cfg->algorithm = arg;
		} else if (!strcmp(name, "--level")) {
			if (parse_level(arg, &cfg->level) < 0)
				goto bad;
		} else if (!strcmp(name, "--cluster")) {
			if (parse_size(arg, &v) < 0 || v > UINT32_MAX)
				goto bad;
			cfg->cluster_size = (uint32_t)v;
		}
		continue;
bad:
		report_error("mount", "bad value '%s' for %s", arg, name);
		return -1;
	}
	write_fast(m, cfg);
	return 0;
}

/* The temporary files of saves to image killed midway (uzram_save()
 * writes image.tmp.XXXXXX): we hold the image's lock, so no save runs. */
static void remove_stale(const char *image)
{
	char pat[PATH_MAX + 16];
	glob_t g;

	if (snprintf(pat, sizeof pat, "%s.tmp.??????", image) >= (int)sizeof pat ||
	    glob(pat, GLOB_NOSORT, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++)
		unlink(g.gl_pathv[i]);
	globfree(&g);
}

/* The device and the file system on DIR; -1 with a message. */
static int build_fs(struct mount_req *m, struct uzram **dev, struct uzfs **fs)
{
	struct uzram_config cfg;
	char why[256] = "";
	struct uzfs_config fc = {
		.uid = m->uid, .gid = m->gid,
		.mode = m->set_mode ? m->mode : 0755,
		/* tmpfs's default nr_inodes: half of RAM's pages */
		.max_nodes = m->inodes ? m->inodes :
			     (uint64_t)sysconf(_SC_PHYS_PAGES) / 2,
		.allow_other = geteuid() == 0,
		.debug = getenv("UZRAM_FS_DEBUG") != NULL,
		/* with a limit the device's ENOSPC must reach write() */
		.no_stage = m->mem_limit != 0,
		/* a tuning knob for measurements; see fs/session.c */
		.threads = getenv("UZRAM_FS_THREADS") ?
			   (unsigned)atoi(getenv("UZRAM_FS_THREADS")) : 1,
		.spin_us = getenv("UZRAM_FS_SPIN") ?
			   (unsigned)atoi(getenv("UZRAM_FS_SPIN")) : 100,
	};
	int r;

	if (dprintf(m->pid_fd, "%d\n", (int)getpid()) < 0 ||
	    mount_write_run(m, "dir", m->dir) < 0 ||
	    mount_write_run(m, "via", "fs\n") < 0 ||
	    (m->image[0] && mount_write_run(m, "image", m->image) < 0) ||
	    device_config(m, &cfg) < 0)
		return -1;
	r = uzram_open(&cfg, dev);
	if (r < 0) {
		report_error("mount", "cannot %s: %s", cfg.image ? "open the image" :
			  "make the device", uzram_last_error());
		return -1;
	}
	if (cfg.image && m->size_set) {
		struct uzram_stats st;

		if (uzram_stats(*dev, &st, sizeof st) == 0 &&
		    st.disksize != ((m->size + 4095) & ~4095ull)) {
			report_error("mount", "--size %llu conflicts with the "
				"size of image %s, %llu bytes: leave --size out",
				m->size, m->image,
				(unsigned long long)st.disksize);
			uzram_close(*dev);
			return -1;
		}
	}
	/* a new image: no other device may take it until we save it */
	if (m->image[0] && !cfg.image && (r = uzram_image_claim(*dev, m->image)) < 0) {
		report_error("mount", "%s: %s", m->image, uzram_last_error());
		uzram_close(*dev);
		return -1;
	}
	if (m->image[0])
		remove_stale(m->image);
	fc.dev = *dev;
	fc.load = cfg.image != NULL;
	fc.why = why;
	fc.whylen = sizeof why;
	r = uzfs_mount(&fc, m->dir, fs);
	if (r == -EBADMSG)
		report_error("mount", "%s is not a file system image uzram can open: %s",
			  m->image, why);
	else if (r < 0)
		report_error("mount", "cannot mount %s: %s", m->dir, strerror(-r));
	if (r < 0) {
		uzram_close(*dev);
		return -1;
	}
	return 0;
}

/*
 * The save into --image failed after DIR was unmounted (its directory not
 * writable, its file system full, ...): the tree is still in this
 * process's memory and nothing else keeps it, so save it where it can
 * be written rather than drop it, and say where.
 */
static void rescue_save(const struct mount_req *m, struct uzfs *fs)
{
	const char *dirs[] = { getenv("HOME"), "/var/tmp", "/tmp" };
	const char *base = strrchr(m->image, '/');
	char path[PATH_MAX], why[512];

	base = base ? base + 1 : m->image;
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		if (!dirs[i] || dirs[i][0] != '/' ||
		    snprintf(path, sizeof path, "%s/%s.rescued-%d", dirs[i],
			     base, (int)getpid()) >= (int)sizeof path)
			continue;
		if (uzfs_save(fs, path, why, sizeof why) == 0) {
			report_error("mount", "the tree of %s is saved in %s "
				     "instead: mv it to %s, or mount it with "
				     "--image %s", m->dir, path, m->image, path);
			return;
		}
	}
	report_error("mount", "the tree of %s could not be saved anywhere: "
		     "it is lost", m->dir);
}

/* RUN/image into out (PATH_MAX bytes): the mount's --image; "" if none. */
static void read_image_path(const struct mount_req *m, char *out)
{
	char path[PATH_MAX];
	FILE *f;

	mount_path(m, path, "image");
	out[0] = '\0';
	f = fopen(path, "re");
	if (f) {
		if (!fgets(out, PATH_MAX, f))
			out[0] = '\0';
		fclose(f);
	}
}

/* The compressed bytes the keeper's device holds (its control channel),
 * or 0 if it does not say. */
static unsigned long long stored_bytes(const struct mount_req *m)
{
	static char reply[NBD_CTL_REPLY_MAX];
	char ctl[PATH_MAX];
	const char *p;

	mount_path(m, ctl, "sock.ctl");
	if (nbd_server_ask(ctl, "json\n", "umount", reply, sizeof reply))
		return 0;
	p = strstr(reply, "\"compr_data_size\":");
	return p ? strtoull(p + strlen("\"compr_data_size\":"), NULL, 10) : 0;
}

int mount_fs_check_save(const struct mount_req *m)
{
	char image[PATH_MAX], dir[PATH_MAX], *slash;
	unsigned long long need, avail;
	struct statvfs sv;

	read_image_path(m, image);
	if (!image[0])
		return 0;
	snprintf(dir, sizeof dir, "%s", image);
	slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	if (access(dir, W_OK | X_OK) < 0 || statvfs(dir, &sv) < 0) {
		report_error("umount", "%s: its tree cannot be saved into %s "
			"(%s: %s): %s stays mounted and unchanged; fix that and "
			"run uzram umount again", m->dir, image, dir,
			strerror(errno), m->dir);
		return -1;
	}
	/* root does not ask another user's keeper (mount_socket_path()) */
	need = m->run_owner ? 0 : stored_bytes(m);
	avail = (unsigned long long)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) *
		sv.f_frsize;
	if (avail < need) {
		report_error("umount", "%s: its tree cannot be saved into %s "
			"(%s has %llu KiB free, its data alone takes %llu KiB): "
			"%s stays mounted and unchanged; make room and run "
			"uzram umount again", m->dir, image, dir, avail >> 10,
			need >> 10, m->dir);
		return -1;
	}
	return 0;
}

int mount_fs_keep(struct mount_req *m)
{
	struct uzram *dev = NULL;
	struct uzfs *fs = NULL;
	struct nbd_ctl_alone *ctl_chan;
	char log[PATH_MAX], ctl[PATH_MAX];
	int r;

	signal(SIGPIPE, SIG_IGN);
	mount_path(m, log, "log");
	m->log_fd = open(log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (m->log_fd < 0 || build_fs(m, &dev, &fs) < 0) {
		if (m->log_fd < 0)
			report_error("mount", "keeper: %s", strerror(errno));
		mount_remove_run(m);
		return 1;
	}
	if (!m->foreground) {
		dup2(m->log_fd, 1);
		dup2(m->log_fd, 2);
	}
	if (m->notify_fd >= 0) {
		if (write(m->notify_fd, "k", 1) != 1)
			uzfs_exit(fs); /* the caller is gone: do not stay */
		close(m->notify_fd);
	}
	mount_path(m, ctl, "sock.ctl");
	/* with write_fast(), what the data ends in is priority 1 */
	ctl_chan = nbd_ctl_alone_start(dev, uzram_algorithm(dev, 1) ?
				       uzram_algorithm(dev, 1) :
				       uzram_algorithm(dev, 0), ctl);
	r = uzfs_loop(fs);
	nbd_ctl_alone_stop(ctl_chan);
	if (m->image[0]) {
		char why[512];

		if (uzfs_save(fs, m->image, why, sizeof why) < 0) {
			report_error("mount", "cannot save the tree of %s into %s "
				  "(the image there is unchanged): %s", m->dir,
				  m->image, why);
			rescue_save(m, fs);
			r = -1;
		}
	}
	uzfs_free(fs);
	uzram_close(dev);
	mount_remove_run(m);
	return r < 0 ? 1 : 0;
}
