// SPDX-License-Identifier: MIT
/*
 * ops_name.c - the FUSE operations on names: lookup and forget, making
 * nodes (mknod, mkdir, create, symlink, link), removing and moving names
 * (unlink, rmdir, rename, with RENAME_NOREPLACE, RENAME_EXCHANGE and
 * RENAME_WHITEOUT) and reading directories. Each takes fs->ns_lock
 * (node.c has the lock rules); permissions are the kernel's
 * (default_permissions).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "uzfs_impl.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct uzfs *fs = req_fs(req);
	struct fuse_entry_param e;
	struct dent *d;

	/* as tmpfs: a name no directory can hold is not merely absent */
	if (strlen(name) > UZFS_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	pthread_rwlock_rdlock(&fs->ns_lock);
	d = dent_find(fs, node_of(fs, parent), name);
	if (d)
		node_entry(fs, d->child, &e);
	pthread_rwlock_unlock(&fs->ns_lock);
	if (!d) { /* a negative entry the kernel may keep */
		memset(&e, 0, sizeof e);
		e.entry_timeout = ENTRY_TIMEOUT;
	}
	fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	node_put(req_fs(req), node_of(req_fs(req), ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct uzfs *fs = req_fs(req);

	for (size_t i = 0; i < count; i++)
		node_put(fs, node_of(fs, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

/* A new node named name in parent; 0 and *out (with one reference), or a
 * negative errno. The caller holds ns_lock for writing. */
static int make(fuse_req_t req, struct node *dir, const char *name,
		mode_t mode, struct node **out)
{
	struct uzfs *fs = req_fs(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct node *n;
	gid_t gid = ctx->gid;
	int r;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (!atomic_load(&dir->nlink))
		return -ENOENT; /* removed while we came */
	if (dent_find(fs, dir, name))
		return -EEXIST;
	if (node_full(fs))
		return -ENOSPC;
	if (dir->mode & S_ISGID) { /* as ext4 and tmpfs */
		gid = dir->gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	n = node_new(fs, mode, ctx->uid, gid);
	if (!n)
		return -ENOMEM;
	r = xattr_acl_create(dir, n, ctx->umask);
	if (!r)
		r = dent_add(fs, dir, name, n);
	if (r < 0) {
		atomic_store(&n->nlookup, 0);
		node_unlinked(fs, n); /* no name, no reference: freed */
		return r;
	}
	atomic_store(&n->nlink, S_ISDIR(mode) ? 2 : 1);
	if (S_ISDIR(mode))
		atomic_fetch_add(&dir->nlink, 1);
	pthread_rwlock_wrlock(&dir->lock);
	time_now(&dir->mtime);
	dir->ctime = dir->mtime;
	pthread_rwlock_unlock(&dir->lock);
	*out = n;
	return 0;
}

/* make() and the reply; target for a symlink, rdev for a device. */
static void make_reply(fuse_req_t req, fuse_ino_t parent, const char *name,
		       mode_t mode, dev_t rdev, const char *target,
		       struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);
	struct fuse_entry_param e;
	struct node *n = NULL;
	char *t = target ? strdup(target) : NULL;
	int r = target && !t ? -ENOMEM : 0;

	pthread_rwlock_wrlock(&fs->ns_lock);
	if (!r)
		r = make(req, node_of(fs, parent), name, mode, &n);
	if (!r) {
		n->rdev = rdev;
		n->target = t;
		n->size = t ? strlen(t) : 0;
		t = NULL;
		node_entry(fs, n, &e);
	}
	pthread_rwlock_unlock(&fs->ns_lock);
	free(t);
	if (r < 0) {
		fuse_reply_err(req, -r);
	} else if (fi) {
		fi->keep_cache = 1;
		fuse_reply_create(req, &e, fi);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	make_reply(req, parent, name, mode, rdev, NULL, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	make_reply(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	if (strlen(link) >= 4096) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	make_reply(req, parent, name, S_IFLNK | 0777, 0, link, NULL);
}

/*
 * A file made by open(O_CREAT) and opened to be written only (tar x, cp,
 * a compiler's output) is written with direct I/O where the kernel took
 * FUSE_DIRECT_IO_ALLOW_MMAP (wire.c): through the page cache the kernel
 * ends a WRITE at every page it holds only in part, so tar's 10 KiB
 * writes went as two WRITEs each, and before each write it asked for
 * security.capability (a GETXATTR), which a direct write does not (it
 * flags the write instead, ops_file.c's kill_privs()). Opened again
 * later, the file is cached as any other (no OPEN comes: no_open).
 *
 * Other kernels: the file is made with mknod and opened without asking,
 * and needs no RELEASE either; the first CREATE is answered ENOSYS and
 * the kernel stops asking. A created handle has a RELEASE (a request the
 * writer does not wait for) until the kernel's first plain OPEN.
 */
static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);

	if (atomic_load(&fs->dio_create)) {
		fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY;
	} else if (fs->no_open) {
		fuse_reply_err(req, ENOSYS); /* the kernel stops asking */
		return;
	}
	make_reply(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, fi);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct uzfs *fs = req_fs(req);
	struct node *n = node_of(fs, ino), *dir = node_of(fs, newparent);
	struct fuse_entry_param e;
	int r = 0;

	pthread_rwlock_wrlock(&fs->ns_lock);
	if (S_ISDIR(n->mode))
		r = -EPERM;
	else if (!atomic_load(&n->nlink) || !atomic_load(&dir->nlink))
		r = -ENOENT;
	else if (dent_find(fs, dir, newname))
		r = -EEXIST;
	else if (node_full(fs))
		r = -ENOSPC; /* as tmpfs: a link takes an inode */
	else
		r = dent_add(fs, dir, newname, n);
	if (!r) {
		atomic_fetch_add(&n->nlink, 1);
		atomic_fetch_add(&fs->extra_links, 1);
		pthread_rwlock_wrlock(&n->lock);
		time_now(&n->ctime);
		pthread_rwlock_unlock(&n->lock);
		pthread_rwlock_wrlock(&dir->lock);
		time_now(&dir->mtime);
		dir->ctime = dir->mtime;
		pthread_rwlock_unlock(&dir->lock);
		node_entry(fs, n, &e);
	}
	pthread_rwlock_unlock(&fs->ns_lock);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_entry(req, &e);
}

/* Drop one name of child (d), as unlink, rmdir and rename do. The caller
 * holds ns_lock for writing. */
static void drop_name(struct uzfs *fs, struct dent *d)
{
	struct node *child = d->child, *dir = d->dir;
	struct timespec now;

	time_now(&now);
	dent_remove(fs, d);
	if (S_ISDIR(child->mode)) {
		atomic_store(&child->nlink, 0);
		atomic_fetch_sub(&dir->nlink, 1);
	} else if (atomic_fetch_sub(&child->nlink, 1) > 1) {
		atomic_fetch_sub(&fs->extra_links, 1);
	}
	pthread_rwlock_wrlock(&child->lock);
	child->ctime = now;
	pthread_rwlock_unlock(&child->lock);
	pthread_rwlock_wrlock(&dir->lock);
	dir->mtime = dir->ctime = now;
	pthread_rwlock_unlock(&dir->lock);
	node_unlinked(fs, child);
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name,
			bool isdir)
{
	struct uzfs *fs = req_fs(req);
	struct dent *d;
	int r = 0;

	pthread_rwlock_wrlock(&fs->ns_lock);
	d = dent_find(fs, node_of(fs, parent), name);
	if (!d)
		r = -ENOENT;
	else if (isdir && !S_ISDIR(d->child->mode))
		r = -ENOTDIR;
	else if (!isdir && S_ISDIR(d->child->mode))
		r = -EISDIR;
	else if (isdir && d->child->nents)
		r = -ENOTEMPTY;
	else
		drop_name(fs, d);
	pthread_rwlock_unlock(&fs->ns_lock);
	fuse_reply_err(req, -r);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, true);
}

/* Whether dir is n or below it. */
static bool below(const struct node *dir, const struct node *n)
{
	for (; dir; dir = dir->parent)
		if (dir == n)
			return true;
	return false;
}

/* Why src cannot replace dst (both exist), or 0. */
static int replace_check(const struct dent *src, const struct dent *dst)
{
	if (S_ISDIR(src->child->mode) && !S_ISDIR(dst->child->mode))
		return -ENOTDIR;
	if (!S_ISDIR(src->child->mode) && S_ISDIR(dst->child->mode))
		return -EISDIR;
	if (S_ISDIR(dst->child->mode) && dst->child->nents)
		return -ENOTEMPTY;
	return 0;
}

/* Swap the nodes of two names (RENAME_EXCHANGE). */
static void exchange(struct dent *a, struct dent *b)
{
	struct node *na = a->child, *nb = b->child;
	bool da = S_ISDIR(na->mode), db = S_ISDIR(nb->mode);

	a->child = nb;
	b->child = na;
	if (da)
		na->parent = b->dir;
	if (db)
		nb->parent = a->dir;
	if (da != db && a->dir != b->dir) {
		atomic_fetch_add(&(da ? b : a)->dir->nlink, 1);
		atomic_fetch_sub(&(da ? a : b)->dir->nlink, 1);
	}
}

/*
 * Move oname of odir to nname of ndir. wh, for RENAME_WHITEOUT: a node
 * made beforehand (a char device 0/0, no name yet) that takes the old
 * name's entry over, so the move and the whiteout happen together and
 * nothing is allocated after the first change.
 */
static int do_rename(struct uzfs *fs, struct node *odir, const char *oname,
		     struct node *ndir, const char *nname, unsigned flags,
		     struct node *wh)
{
	struct dent *src = dent_find(fs, odir, oname), *dst;
	int r;

	if (!src)
		return -ENOENT;
	if (!S_ISDIR(ndir->mode) || !atomic_load(&ndir->nlink))
		return -ENOENT;
	if (S_ISDIR(src->child->mode) && below(ndir, src->child))
		return -EINVAL;
	dst = dent_find(fs, ndir, nname);
	if (flags & RENAME_EXCHANGE) {
		if (!dst)
			return -ENOENT;
		if (S_ISDIR(dst->child->mode) && below(odir, dst->child))
			return -EINVAL;
		exchange(src, dst);
		return 0;
	}
	if (dst && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (dst && dst->child == src->child)
		return 0; /* two names of one file: nothing to do */
	if (dst && (r = replace_check(src, dst)) < 0)
		return r;
	r = dent_add(fs, ndir, nname, src->child); /* before anything goes */
	if (r < 0)
		return r;
	if (S_ISDIR(src->child->mode)) {
		atomic_fetch_add(&ndir->nlink, 1);
		atomic_fetch_sub(&odir->nlink, 1);
	}
	if (dst) {
		drop_name(fs, dst);
	}
	if (wh) {
		src->child = wh;
		atomic_store(&wh->nlink, 1);
	} else {
		dent_remove(fs, src);
	}
	return 0;
}

/*
 * RENAME_WHITEOUT (overlayfs on an upper directory here, which the kernel
 * allows only with CAP_MKNOD): what the old name becomes, a char device
 * 0/0 of the caller's, as tmpfs's shmem_whiteout() makes.
 */
static struct node *whiteout_new(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	return node_new(req_fs(req), S_IFCHR, ctx->uid, ctx->gid);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct uzfs *fs = req_fs(req);
	struct node *odir = node_of(fs, parent), *ndir = node_of(fs, newparent);
	struct node *wh = NULL;
	struct timespec now;
	int r = 0;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) ||
	    (flags & RENAME_EXCHANGE && flags & ~(unsigned)RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	time_now(&now);
	pthread_rwlock_wrlock(&fs->ns_lock);
	if (flags & RENAME_WHITEOUT && node_full(fs))
		r = -ENOSPC; /* tmpfs too takes an inode for it */
	else if (flags & RENAME_WHITEOUT && !(wh = whiteout_new(req)))
		r = -ENOMEM;
	if (!r)
		r = do_rename(fs, odir, name, ndir, newname, flags, wh);
	if (wh && !atomic_load(&wh->nlink))
		node_unlinked(fs, wh); /* not used: freed */
	if (!r) {
		/* the directories' mtime and ctime, and the ctime of what moved
		 * (both, exchanged), as tmpfs's simple_rename_timestamp() */
		struct node *moved[2] = {
			dent_find(fs, ndir, newname)->child,
			flags & RENAME_EXCHANGE ? dent_find(fs, odir, name)->child : NULL,
		};

		for (int i = 0; i < 2; i++) {
			struct node *d = i ? ndir : odir;

			pthread_rwlock_wrlock(&d->lock);
			d->mtime = d->ctime = now;
			pthread_rwlock_unlock(&d->lock);
		}
		for (int i = 0; i < 2 && moved[i]; i++) {
			pthread_rwlock_wrlock(&moved[i]->lock);
			moved[i]->ctime = now;
			pthread_rwlock_unlock(&moved[i]->lock);
		}
	}
	pthread_rwlock_unlock(&fs->ns_lock);
	fuse_reply_err(req, -r);
}

/* One entry into buf at *used; false when it does not fit. */
static bool dir_add(fuse_req_t req, char *buf, size_t size, size_t *used,
		    bool plus, const char *name, struct node *n, off_t next)
{
	struct uzfs *fs = req_fs(req);
	struct fuse_entry_param e;
	size_t need;

	if (plus && n && strcmp(name, ".") && strcmp(name, "..")) {
		node_entry(fs, n, &e);
		need = fuse_add_direntry_plus(req, buf + *used, size - *used,
					      name, &e, next);
		if (need > size - *used) {
			atomic_fetch_sub(&n->nlookup, 1); /* not sent */
			return false;
		}
	} else {
		memset(&e, 0, sizeof e);
		e.attr.st_ino = n->ino;
		e.attr.st_mode = n->mode & S_IFMT;
		need = plus ? fuse_add_direntry_plus(req, buf + *used,
						     size - *used, name, &e, next)
			    : fuse_add_direntry(req, buf + *used, size - *used,
						name, &e.attr, next);
		if (need > size - *used)
			return false;
	}
	*used += need;
	return true;
}

/*
 * Offsets: 0 is ".", 1 "..", and a name with cookie c is at c + 1 (its
 * next offset is c + 2), so the reply's last offset names where to go on.
 */
static void dir_list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     bool plus)
{
	struct uzfs *fs = req_fs(req);
	struct node *dir = node_of(fs, ino);
	char *buf = malloc(size);
	size_t used = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_rwlock_rdlock(&fs->ns_lock);
	if (off == 0 && dir_add(req, buf, size, &used, plus, ".", dir, 1))
		off = 1;
	if (off == 1 && dir_add(req, buf, size, &used, plus, "..",
				dir->parent ? dir->parent : dir, 2))
		off = 2;
	if (off >= 2)
		for (size_t i = dent_first(dir, (uint64_t)off - 1);
		     i < dir->nents; i++) {
			struct dent *d = dir->ents[i];

			if (!dir_add(req, buf, size, &used, plus, d->name,
				     d->child, (off_t)d->cookie + 2))
				break;
		}
	pthread_rwlock_unlock(&fs->ns_lock);
	node_accessed(dir); /* tmpfs's iterate_dir() touches atime */
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	dir_list(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	dir_list(req, ino, size, off, true);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct uzfs *fs = req_fs(req);

	if (fs->no_open) { /* the kernel stops asking, and caches the listing */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (!S_ISDIR(node_of(fs, ino)->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_open(req, fi);
}

void ops_name_init(struct fuse_lowlevel_ops *ops)
{
	ops->lookup = op_lookup;
	ops->forget = op_forget;
	ops->forget_multi = op_forget_multi;
	ops->mknod = op_mknod;
	ops->mkdir = op_mkdir;
	ops->symlink = op_symlink;
	ops->create = op_create;
	ops->link = op_link;
	ops->unlink = op_unlink;
	ops->rmdir = op_rmdir;
	ops->rename = op_rename;
	ops->opendir = op_opendir;
	ops->readdir = op_readdir;
	ops->readdirplus = op_readdirplus;
}
