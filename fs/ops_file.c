// SPDX-License-Identifier: MIT
/*
 * ops_file.c - the FUSE operations on one node: attributes (getattr,
 * setattr, readlink, statfs), file handles (open, release, fsync), data
 * (read, write, fallocate, lseek; the blocks are bmap.c's) and extended
 * attributes. Each holds the node's lock (node.c has the lock rules).
 *
 * Locks: flock() and fcntl() locks are left to the kernel, which keeps
 * them itself when a FUSE file system has no lock operations; mmap goes
 * through the kernel's page cache and read/write below.
 *
 * Set-user-ID and set-group-ID bits, and security.capability: where the
 * kernel took FUSE_HANDLE_KILLPRIV_V2 (Linux 5.11+; wire.c, which also
 * says why: one GETXATTR a file instead of one a write), it flags a WRITE,
 * a truncating SETATTR by a process without CAP_FSETID and every chown,
 * and kill_privs() clears them as the kernel's notify_change() does for
 * tmpfs; a FALLOCATE carries no flag, so there the caller's capabilities
 * are looked up as for drop_sgid() below. Elsewhere the kernel clears them itself before a write,
 * truncate, fallocate or chown, with a SETATTR of the mode (the file
 * system does not take FUSE_CAP_HANDLE_KILLPRIV, session.c: the kernel
 * alone knows the writer's capabilities). One case FUSE's kernel side
 * leaves out either way where tmpfs clears the bit (the kernel's
 * setattr_should_drop_sgid()): set-group-ID without group execute,
 * written, truncated or chowned by a process neither in the file's group
 * nor with CAP_FSETID. drop_sgid() does that one from
 * the request's credentials (fuse_req_ctx(), the caller's groups and
 * capabilities in /proc; a caller in another pid namespace counts as
 * one without them); such files are rare, so the look-ups cost nothing
 * elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "uzram.h"
#include "uzfs_impl.h"

/* Before a change of n's bytes or size by req's caller: clear the
 * set-group-ID bit of a file without group execute as tmpfs does (the
 * design comment above). The caller holds n->lock for writing; true when
 * the bit went, and a reply without attributes must then tell the kernel
 * (forget_mode()). */
static bool drop_sgid(fuse_req_t req, struct node *n)
{
	if (!S_ISREG(n->mode) || (n->mode & (S_ISGID | S_IXGRP)) != S_ISGID)
		return false;
	if (caller_in_group(req, n->gid) || caller_fsetid(fuse_req_ctx(req)->pid))
		return false;
	n->mode &= ~(mode_t)S_ISGID;
	return true;
}

/* What a request flagged by the kernel (FUSE_HANDLE_KILLPRIV_V2: a write
 * or truncate by a process without CAP_FSETID, any chown) takes away, as
 * notify_change() does on tmpfs: set-user-ID, set-group-ID where the group
 * may execute (without it drop_sgid() decides), and security.capability.
 * The caller holds n->lock for writing; true when the mode changed. */
static bool kill_privs(struct node *n)
{
	mode_t old = n->mode;

	if (S_ISDIR(n->mode))
		return false;
	n->mode &= ~(mode_t)S_ISUID;
	if (n->mode & S_IXGRP)
		n->mode &= ~(mode_t)S_ISGID;
	xattr_remove(n, "security.capability");
	return n->mode != old;
}

/* The kernel keeps a file's mode an hour (ENTRY_TIMEOUT) and a write's
 * reply carries none: drop what it has, so the next stat asks. */
static void forget_mode(fuse_req_t req, fuse_ino_t ino)
{
	fuse_lowlevel_notify_inval_inode(req_fs(req)->se, ino, -1, 0);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = node_of(req_fs(req), ino);
	struct stat st;

	(void)fi;
	pthread_rwlock_rdlock(&n->lock);
	node_fill_attr(req_fs(req), n, &st);
	pthread_rwlock_unlock(&n->lock);
	fuse_reply_attr(req, &st, ENTRY_TIMEOUT); /* after the unlock: node.c */
}

/* The times of setattr; the caller holds n->lock for writing. */
static void set_times(struct node *n, const struct stat *attr, int to_set,
		      const struct timespec *now)
{
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		n->atime = *now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		n->atime = attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		n->mtime = *now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		n->mtime = attr->st_mtim;
	n->ctime = (to_set & FUSE_SET_ATTR_CTIME) ? attr->st_ctim : *now;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);
	struct node *n = node_of(fs, ino);
	struct timespec now;
	struct stat st;
	int r = 0;

	(void)fi;
	time_now(&now);
	pthread_rwlock_wrlock(&n->lock);
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (!S_ISREG(n->mode))
			r = S_ISDIR(n->mode) ? -EISDIR : -EINVAL;
		else if ((uint64_t)attr->st_size > UZFS_MAX_FILE)
			r = -EFBIG;
		else
			r = bmap_truncate(fs, n, (uint64_t)attr->st_size);
		if (!r && !(to_set & FUSE_SET_ATTR_MTIME))
			n->mtime = now;
	}
	if (!r) {
		if (to_set & FUSE_SET_ATTR_MODE) {
			n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
			xattr_acl_chmod(n); /* posix_acl_chmod() */
		}
		/* FATTR_KILL_SUIDGID comes as FUSE_SET_ATTR_KILL_SUID */
		if ((to_set & FUSE_SET_ATTR_KILL_SUID) &&
		    !(to_set & FUSE_SET_ATTR_MODE))
			kill_privs(n);
		/* by the group the file had (a reply with attributes) */
		if (to_set & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID |
			      FUSE_SET_ATTR_GID))
			drop_sgid(req, n);
		if (to_set & FUSE_SET_ATTR_UID)
			n->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			n->gid = attr->st_gid;
		set_times(n, attr, to_set, &now);
		node_fill_attr(fs, n, &st);
	}
	pthread_rwlock_unlock(&n->lock);
	if (r < 0)	/* replied after the unlock: node.c */
		fuse_reply_err(req, -r);
	else
		fuse_reply_attr(req, &st, ENTRY_TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct node *n = node_of(req_fs(req), ino);
	char *t;

	pthread_rwlock_rdlock(&n->lock);
	t = n->target ? strdup(n->target) : NULL;
	pthread_rwlock_unlock(&n->lock);
	if (t)	/* replied after the unlock: node.c */
		fuse_reply_readlink(req, t);
	else
		fuse_reply_err(req, S_ISLNK(n->mode) ? ENOMEM : EINVAL);
	free(t);
}

/*
 * Blocks the device's memory limit still lets in, at the compression the
 * stored data has had so far (none, before any): what a writer can expect
 * before the device's ENOSPC, which can come before the blocks run out
 * (--mem-limit; df showed half the file system free at that ENOSPC).
 */
static uint64_t blocks_in_limit(struct uzfs *fs)
{
	struct uzram_stats st;
	uint64_t left;

	if (uzram_stats(fs->dev, &st, sizeof st) < 0 || !st.mem_limit)
		return UINT64_MAX;
	left = st.mem_limit > st.mem_used_total ?
	       st.mem_limit - st.mem_used_total : 0;
	if (st.compr_data_size && st.orig_data_size > st.compr_data_size)
		left = (uint64_t)((double)left * (double)st.orig_data_size /
				  (double)st.compr_data_size);
	return left / fs->bsize;
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct uzfs *fs = req_fs(req);
	struct statvfs sv = { 0 };
	uint64_t files = fs->max_nodes, room = blocks_in_limit(fs);
	uint64_t used = node_count(fs);

	(void)ino;
	pthread_mutex_lock(&fs->alloc_lock);
	sv.f_bfree = fs->nfree;	/* df's used: the blocks files hold */
	sv.f_bavail = fs->nfree < room ? fs->nfree : room;
	pthread_mutex_unlock(&fs->alloc_lock);
	sv.f_bsize = sv.f_frsize = fs->bsize;
	sv.f_blocks = fs->nblocks;
	sv.f_files = files;
	/* an image may bring more nodes than this mount's limit */
	sv.f_ffree = sv.f_favail = files > used ? files - used : 0;
	sv.f_namemax = UZFS_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* Only when the kernel cannot open without us (no FUSE_CAP_NO_OPEN_SUPPORT). */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);

	if (fs->no_open) {
		fuse_reply_err(req, ENOSYS); /* the kernel stops asking */
		return;
	}
	if (S_ISDIR(node_of(fs, ino)->mode)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->keep_cache = 1; /* O_TRUNC came as a setattr: no atomic_o_trunc */
	fuse_reply_open(req, fi);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)ino, (void)datasync, (void)fi;
	fuse_reply_err(req, 0); /* the data is where it stays */
}

/* a <= b, for timespecs */
static bool time_le(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec <= b->tv_nsec);
}

/*
 * relatime, tmpfs's default (the kernel's relatime_need_update()): a read
 * (of a file, or of a directory's names: node_accessed()) moves atime to
 * now when atime is not after mtime or ctime, or a day old. FUSE leaves atime to the file system (the kernel marks its inodes
 * S_NOATIME, and refetches atime after a read); the kernel's page cache
 * answers reads it holds, so this is as often as reads reach us. n->lock
 * held for reading: whether it is due.
 */
static bool atime_due(const struct node *n, const struct timespec *now)
{
	return time_le(&n->atime, &n->mtime) || time_le(&n->atime, &n->ctime) ||
	       now->tv_sec - n->atime.tv_sec >= 24 * 60 * 60;
}

/* A read of n seen (a readdir's: no lock of n's held): atime by
 * relatime, as above. */
void node_accessed(struct node *n)
{
	struct timespec now;
	bool touch;

	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	pthread_rwlock_rdlock(&n->lock);
	touch = atime_due(n, &now);
	pthread_rwlock_unlock(&n->lock);
	if (touch) {
		pthread_rwlock_wrlock(&n->lock);
		if (atime_due(n, &now))
			n->atime = now;
		pthread_rwlock_unlock(&n->lock);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);
	struct node *n = node_of(fs, ino);
	char *buf = malloc(size ? size : 1);
	int r = buf ? 0 : -ENOMEM;
	struct timespec now;
	bool touch;

	(void)fi;
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	pthread_rwlock_rdlock(&n->lock);
	if ((uint64_t)off >= n->size)
		size = 0;
	else if ((uint64_t)off + size > n->size)
		size = (size_t)(n->size - (uint64_t)off);
	if (!r && size)
		r = bmap_read(fs, n, buf, size, (uint64_t)off);
	touch = atime_due(n, &now);
	pthread_rwlock_unlock(&n->lock);
	if (touch) {	/* at most once a day a file, or after a change */
		pthread_rwlock_wrlock(&n->lock);
		if (atime_due(n, &now))
			n->atime = now;
		pthread_rwlock_unlock(&n->lock);
	}
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, buf, size);
	free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);
	struct node *n = node_of(fs, ino);
	bool dropped = false;
	long r;

	pthread_rwlock_wrlock(&n->lock);
	if (fi->flags & O_APPEND)
		off = (off_t)n->size;
	r = bmap_write(fs, n, buf, size, (uint64_t)off);
	if (r > 0) {
		/* the page cache's writeback (mmap) comes without credentials
		 * and, as on tmpfs, keeps the bits */
		if (!fi->writepage && wire_write_kills())
			dropped = kill_privs(n);
		if (!fi->writepage && drop_sgid(req, n))
			dropped = true;
		time_now(&n->mtime);
		n->ctime = n->mtime;
	}
	pthread_rwlock_unlock(&n->lock);
	if (dropped)
		forget_mode(req, ino);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_write(req, (size_t)r);
}

/* A run of file blocks that allocate() mapped, to give back on failure. */
struct run {
	uint64_t first, n;
};

/*
 * Map every block of [off, off + len) (fallocate's mode 0). All or
 * nothing, as tmpfs's shmem_fallocate(): when a block cannot be had
 * (ENOSPC), the blocks this call mapped are freed again, so a failed
 * fallocate leaves neither the space taken (df full, a 2-byte file of
 * 64 MiB of blocks) nor the file changed. What it mapped is kept as runs
 * of file blocks, few for a file laid out in order.
 */
static int allocate(struct uzfs *fs, struct node *n, uint64_t off, uint64_t len)
{
	struct run *runs = NULL, *more;
	size_t nruns = 0, cap = 0;
	uint64_t blk;
	int r = 0;

	for (uint64_t f = off / fs->bsize; !r && f * fs->bsize < off + len; f++) {
		if (bmap_get(n, f))
			continue; /* mapped already: kept as it is */
		if (!nruns || runs[nruns - 1].first + runs[nruns - 1].n != f) {
			if (nruns == cap) {
				cap = cap ? 2 * cap : 16;
				more = realloc(runs, cap * sizeof *runs);
				if (!more) {
					r = -ENOMEM;
					break;
				}
				runs = more;
			}
			runs[nruns++] = (struct run){ .first = f, .n = 0 };
		}
		r = bmap_map(fs, n, f, &blk);
		if (!r)
			runs[nruns - 1].n++;
	}
	for (size_t i = 0; r && i < nruns; i++)
		bmap_free_range(fs, n, runs[i].first, runs[i].first + runs[i].n);
	free(runs);
	return r;
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);
	struct node *n = node_of(fs, ino);
	uint64_t end = (uint64_t)off + (uint64_t)len;
	bool dropped = false;
	int r;

	(void)fi;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
		     FALLOC_FL_ZERO_RANGE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (end > UZFS_MAX_FILE || !S_ISREG(n->mode)) {
		fuse_reply_err(req, S_ISREG(n->mode) ? EFBIG : ENODEV);
		return;
	}
	pthread_rwlock_wrlock(&n->lock);
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		r = bmap_zero(fs, n, (uint64_t)off, (uint64_t)len);
	else
		r = allocate(fs, n, (uint64_t)off, (uint64_t)len);
	if (!r && !(mode & FALLOC_FL_KEEP_SIZE) && end > n->size)
		n->size = end;
	if (!r) {
		/* FALLOCATE comes without a kill flag: the caller's own */
		if (atomic_load(&fs->killpriv) &&
		    !caller_fsetid(fuse_req_ctx(req)->pid))
			dropped = kill_privs(n);
		if (drop_sgid(req, n))
			dropped = true;
		time_now(&n->mtime);
		n->ctime = n->mtime;
	}
	pthread_rwlock_unlock(&n->lock);
	if (dropped)
		forget_mode(req, ino);
	fuse_reply_err(req, -r);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);
	struct node *n = node_of(fs, ino);
	int64_t r = -EINVAL;

	(void)fi;
	pthread_rwlock_rdlock(&n->lock);
	if (whence == SEEK_DATA || whence == SEEK_HOLE)
		r = (uint64_t)off >= n->size ? -ENXIO :
		    bmap_seek(fs, n, (uint64_t)off, whence == SEEK_DATA);
	pthread_rwlock_unlock(&n->lock);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_lseek(req, (off_t)r);
}

void ops_file_init(struct fuse_lowlevel_ops *ops)
{
	ops->getattr = op_getattr;
	ops->setattr = op_setattr;
	ops->readlink = op_readlink;
	ops->statfs = op_statfs;
	ops->open = op_open;
	ops->fsync = op_fsync;
	ops->read = op_read;
	ops->write = op_write;
	ops->fallocate = op_fallocate;
	ops->lseek = op_lseek;
	ops_xattr_init(ops);
}
