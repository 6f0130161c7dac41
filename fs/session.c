// SPDX-License-Identifier: MIT
/*
 * session.c - the file system's life: mount (a libfuse3 low-level
 * session over an empty tree), the multi-threaded request loop, the
 * compactor thread, and teardown.
 *
 * What the kernel may cache: everything. Only the kernel changes the tree
 * (nothing else reaches the device), so entries, negative entries and
 * attributes are kept an hour, and open files keep their page cache
 * (keep_cache). Nor does a newer mtime drop a file's pages (libfuse's
 * default FUSE_CAP_AUTO_INVAL_DATA, off here): with it the kernel also
 * asked for the attributes before every read() and dropped the pages of
 * every file it saw written (our WRITE moves the mtime, which the kernel
 * does not track without the writeback cache), so a compiler's output
 * was read back from the device by ar and every write after a refresh
 * asked for security.capability again. `make -j2 lib` of uzram's source
 * on a fresh mount (BENCHMARKS.md, branch fsfast): 8,339 requests with
 * it, 4,630 without (READ 1,770 against 479, GETATTR 1,747 against 525,
 * GETXATTR 1,535 against 365). The model test also reads through the page
 * cache (t66) to catch a page kept stale. Writes go through to the device at once (no writeback
 * cache), so write() itself reports ENOSPC, as on tmpfs. The writeback
 * cache was measured (untar of /usr/include as nobody, 8,925 files, load
 * 3 on 2 cores): it halves the WRITEs (one per file, at close) but the
 * kernel then sends a SETATTR of the times at every close, so the round
 * trips per file stay 6.5, and untar took 1.7 s against 2.1 s without:
 * not worth ENOSPC turning up only at close.
 *
 * Where untar's time goes (same run, counted with -o debug): per file a
 * LOOKUP (the new name), MKNOD, GETXATTR (security.capability, the
 * kernel's check before each write; with FUSE_HANDLE_KILLPRIV_V2, wire.c,
 * once a file), 1.9 WRITEs (tar writes 10 KiB at a time), SETATTR
 * (utimens) and a GETATTR of the directory (the kernel
 * drops a directory's attributes at each change, and default_permissions
 * needs them for the next name). The keeper spent 0.30 s in user space
 * (LZ4 the largest part) and 0.52 s in the kernel reading requests and
 * writing replies, of 1.6 s: the rest is the round trips themselves.
 * Where the kernel can map direct files (Linux 6.6+), a file is now made
 * with CREATE and written direct (ops_name.c's op_create): no GETXATTR,
 * and one WRITE per write() of tar's, not two (/usr/include: 71,496
 * requests waited for, now 54,607, and a RELEASE a file that tar does not
 * wait for).
 * Profiled again with 16 KiB clusters (BENCHMARKS.md, branch fsfast):
 * the file system's own code is under a tenth of the keeper's samples in
 * untar and rm -rf; waking the requester at each reply (~28% in untar)
 * and task switches are the rest, per round trip.
 *
 * Threads: one by default, in our own loop (reqloop.c: /dev/fuse read
 * non-blocking with a short adaptive spin after each reply, so a request
 * that follows within ~100 us pays no sleep and wake-up of this thread;
 * BENCHMARKS.md has the round-trip figures). libfuse's multi-threaded
 * loop (threads > 1) was 3x slower here for small files (untar of
 * /usr/include: 9.5 s against 3.1 s on a loaded 2-core machine,
 * bench/fs.sh): each request wakes a worker on another CPU, and the
 * kernel page cache already serves most reads without us. The data path needs no change for more threads:
 * the locks are in node.c.
 *
 * Listings: always READDIRPLUS (libfuse's default lets the kernel pick
 * plain READDIR when it saw no lookups since the last listing): grep -r
 * over /usr/include/linux (763 files) after drop_caches made 375 LOOKUPs
 * beside the 766 READs, and none with it; 0.43-0.49 s against 0.68-0.69
 * s (tmpfs 0.19-0.31 s, load 9.5 on 2 cores).
 *
 * FLUSH is not implemented (nothing to flush: writes are on the device
 * when they return), so the kernel stops sending it at the first close.
 *
 * The compactor: freed blocks give their objects back to the device's
 * allocator at once; a second after frees of 1 MiB or more it also runs
 * uzram_compact(), so half-empty zspages go back to the system as well.
 * Each second it also writes bmap.c's staged block (the last, partial
 * block of the file written last) to the device.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <time.h>

#include "uzram.h"
#include "uzfs_impl.h"

#define COMPACT_BLOCKS_MIN (1u << 20) /* bytes freed before a compaction */
#define MAX_IO (1u << 20)             /* the largest READ and WRITE */
#define READ_AHEAD_KB (MAX_IO >> 10)

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct uzfs *fs = userdata;

	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* POSIX ACLs as tmpfs's: the kernel enforces them, we keep them in
	 * step with the mode and apply the umask or a default ACL (xattr.c) */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	/* no open: O_TRUNC must then come as a setattr */
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	/* not the first version, where we alone would have to know the
	 * writer's capabilities; wire.c offers FUSE_HANDLE_KILLPRIV_V2,
	 * where the kernel tells us (ops_file.c) */
	conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
	fs->no_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) &&
		      (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT);
	/* requests are small: a splice through a pipe costs two more calls */
	conn->want &= ~(unsigned)FUSE_CAP_SPLICE_READ;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	/* only the kernel changes the tree: no page cache to drop when a
	 * file's mtime moves (the top of the file) */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	/* every listing with the attributes: no LOOKUP after it */
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
	conn->max_write = MAX_IO;
	conn->max_readahead = MAX_IO; /* root raises the bdi's to it */
}

/*
 * The kernel reads ahead a FUSE file in READs of its bdi's read_ahead_kb,
 * 128 KiB by default, and max_readahead in INIT can only lower it: a
 * sequential read of a large file is then a round trip for each 128 KiB.
 * Root may raise it (/sys/class/bdi/MAJ:MIN/read_ahead_kb of the mount's
 * st_dev) to max_write, as large as a READ can be; files opened later
 * read ahead that far. A user cannot (EACCES), and keeps the 128 KiB.
 */
static void raise_readahead(const char *dir)
{
	char path[PATH_MAX], line[PATH_MAX + 256], mnt[PATH_MAX];
	char dev[32] = "", d[32];
	FILE *f;

	/* not stat(dir): the file system answers nothing before INIT */
	if (!realpath(dir, path) || !(f = fopen("/proc/self/mountinfo", "re")))
		return;
	while (fgets(line, sizeof line, f)) /* the last mount on dir: ours */
		if (sscanf(line, "%*s %*s %31s %*s %4095s", d, mnt) == 2 &&
		    !strcmp(mnt, path))
			memcpy(dev, d, sizeof dev);
	fclose(f);
	if (!dev[0])
		return;
	snprintf(line, sizeof line, "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(line, "we");
	if (!f)
		return;
	fprintf(f, "%u\n", READ_AHEAD_KB);
	fclose(f);
}

static void *compactor(void *arg)
{
	struct uzfs *fs = arg;
	uint64_t min = COMPACT_BLOCKS_MIN / fs->bsize;

	pthread_mutex_lock(&fs->stop_lock);
	while (!fs->stopping) {
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 1;
		pthread_cond_timedwait(&fs->stop_cond, &fs->stop_lock, &t);
		if (fs->stopping)
			continue;
		pthread_mutex_unlock(&fs->stop_lock);
		bmap_stage_flush(fs, NULL); /* a file's last block, not left out */
		if (atomic_load(&fs->freed) >= (min ? min : 1)) {
			atomic_store(&fs->freed, 0);
			uzram_compact(fs->dev);
		}
		pthread_mutex_lock(&fs->stop_lock);
	}
	pthread_mutex_unlock(&fs->stop_lock);
	return NULL;
}

/* The empty tree: the root directory and the tables. */
static int tree_init(struct uzfs *fs, const struct uzfs_config *cfg)
{
	fs->all.next = fs->all.prev = &fs->all;
	atomic_store(&fs->next_ino, 1);
	fs->hash_mask = 1023;
	fs->hash = calloc(fs->hash_mask + 1, sizeof *fs->hash);
	if (!fs->hash || pthread_rwlock_init(&fs->ns_lock, NULL))
		return -ENOMEM;
	fs->root = node_new(fs, S_IFDIR | (cfg->mode & 07777), cfg->uid, cfg->gid);
	if (!fs->root)
		return -ENOMEM;
	atomic_store(&fs->root->nlink, 2);
	atomic_store(&fs->root->nlookup, 1);
	return 0;
}

static struct fuse_session *session_new(struct uzfs *fs)
{
	static struct fuse_lowlevel_ops ops;
	char opts[128];
	char *argv[] = { "uzram", "-o", opts, NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se;

	memset(&ops, 0, sizeof ops);
	ops.init = op_init;
	ops_name_init(&ops);
	ops_file_init(&ops);
	snprintf(opts, sizeof opts, "default_permissions,fsname=uzram,"
		 "subtype=uzram%s", fs->allow_other ? ",allow_other" : "");
	if (fs->debug)
		argv[args.argc++] = "-d";
	se = fuse_session_new(&args, &ops, sizeof ops, fs);
	fuse_opt_free_args(&args); /* libfuse may have copied them */
	return se;
}

int uzfs_mount(const struct uzfs_config *cfg, const char *dir, struct uzfs **fsp)
{
	struct uzfs *fs = calloc(1, sizeof *fs);
	int r = fs ? 0 : -ENOMEM;

	if (fs) {
		fs->dev = cfg->dev;
		fs->bsize = uzram_cluster_size(cfg->dev);
		fs->nblocks = uzram_size(cfg->dev) / fs->bsize;
		fs->max_nodes = cfg->max_nodes ? cfg->max_nodes : 1ull << 32;
		fs->allow_other = cfg->allow_other;
		fs->debug = cfg->debug;
		fs->threads = cfg->threads;
		fs->spin_us = cfg->spin_us;
		fs->no_stage = cfg->no_stage;
		pthread_mutex_init(&fs->stop_lock, NULL);
		pthread_cond_init(&fs->stop_cond, NULL);
		pthread_mutex_init(&fs->stage_lock, NULL);
		fs->stage_buf = malloc(fs->bsize);
		r = fs->stage_buf ? alloc_init(fs) : -ENOMEM;
	}
	if (!r)
		r = tree_init(fs, cfg);
	if (!r && cfg->load)
		r = tree_load(fs, cfg->why, cfg->whylen);
	if (!r && !(fs->se = session_new(fs)))
		r = -EINVAL; /* libfuse said why */
	if (!r && fuse_session_mount(fs->se, dir) != 0)
		r = -EIO;
	if (!r) {
		fs->mounted = true;
		raise_readahead(dir);
	}
	/* without it, the kernel clears set-ID bits itself (wire.c) */
	if (!r && wire_attach(fs) < 0)
		fprintf(stderr, "uzram: fs: no custom I/O on /dev/fuse: "
			"a GETXATTR before every write\n");
	if (!r && pthread_create(&fs->compactor, NULL, compactor, fs) == 0)
		fs->compactor_on = true;
	if (r < 0) {
		uzfs_free(fs);
		return r;
	}
	*fsp = fs;
	return 0;
}

int uzfs_loop(struct uzfs *fs)
{
	struct fuse_loop_config lc = { .clone_fd = 1, .max_idle_threads = 16 };
	int r;

	if (fuse_set_signal_handlers(fs->se) != 0)
		return -EIO;
	r = fs->threads > 1 ? fuse_session_loop_mt(fs->se, &lc) :
			      reqloop_run(fs->se, fs->spin_us);
	fuse_remove_signal_handlers(fs->se);
	return r < 0 ? r : 0;
}

void uzfs_exit(struct uzfs *fs)
{
	fuse_session_exit(fs->se);
}

void uzfs_free(struct uzfs *fs)
{
	if (!fs)
		return;
	if (fs->compactor_on) {
		pthread_mutex_lock(&fs->stop_lock);
		fs->stopping = true;
		pthread_cond_signal(&fs->stop_cond);
		pthread_mutex_unlock(&fs->stop_lock);
		pthread_join(fs->compactor, NULL);
	}
	if (fs->mounted)
		fuse_session_unmount(fs->se);
	if (fs->se)
		fuse_session_destroy(fs->se);
	if (fs->hash) {
		node_free_all(fs);
		pthread_rwlock_destroy(&fs->ns_lock);
	}
	alloc_release(fs);
	free(fs->stage_buf);
	pthread_mutex_destroy(&fs->stage_lock);
	pthread_cond_destroy(&fs->stop_cond);
	pthread_mutex_destroy(&fs->stop_lock);
	free(fs);
}
