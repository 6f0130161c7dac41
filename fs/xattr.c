// SPDX-License-Identifier: MIT
/*
 * xattr.c - extended attributes: a list of (name, value) on each node,
 * under the node's lock. The namespaces are tmpfs's (user., trusted.,
 * security., and system.posix_acl_access and _default): the kernel
 * checks who may set which, but FUSE hands over any name, so the rest
 * is refused here as tmpfs's handlers refuse it (xattr_name_check()).
 *
 * POSIX ACLs are kept in step with the mode here, as a local file system
 * does (acl.c says what and why): setting an access ACL sets the mode's
 * bits (and keeps the ACL only where the mode cannot say it), a chmod
 * rewrites a kept one (xattr_acl_chmod()), and a node made in a directory
 * with a default ACL gets its ACLs from it, or else the umask
 * (xattr_acl_create(); the kernel leaves the umask to us: FUSE_DONT_MASK).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "uzfs_impl.h"

#define XATTR_SIZE_MAX 65536

static struct xattr **xattr_find(struct node *n, const char *name)
{
	struct xattr **p = &n->xattrs;

	while (*p && strcmp((*p)->name, name))
		p = &(*p)->next;
	return p;
}

/* The caller holds n->lock for writing. */
static int xattr_set(struct node *n, const char *name, const char *value,
		     size_t size, int flags)
{
	struct xattr **p = xattr_find(n, name), *x = *p;
	size_t len = strlen(name);
	char *v;

	if (x && (flags & XATTR_CREATE))
		return -EEXIST;
	if (!x && (flags & XATTR_REPLACE))
		return -ENODATA;
	if (size > XATTR_SIZE_MAX || len > 255)
		return -ERANGE;
	v = malloc(size ? size : 1);
	if (!v)
		return -ENOMEM;
	memcpy(v, value, size);
	if (!x) {
		x = calloc(1, sizeof *x + len + 1);
		if (!x) {
			free(v);
			return -ENOMEM;
		}
		memcpy(x->name, name, len + 1);
		*p = x;
	}
	free(x->value);
	x->value = v;
	x->size = size;
	time_now(&n->ctime);
	return 0;
}

/*
 * An access ACL set on n (posix_acl_update_mode()): the mode's bits from
 * it, the set-group-ID bit off unless the caller is in the file's group
 * or has CAP_FSETID, and the ACL kept only where the mode cannot say it.
 * The caller holds n->lock for writing.
 */
/*
 * Whether tmpfs would take the name (the kernel's xattr_resolve_name()
 * over shmem_xattr_handlers): EOPNOTSUPP for a namespace it has no
 * handler for (foo.x, system.foo, user), EINVAL for a prefix with nothing
 * after it (user.); 0 if taken.
 */
static int xattr_name_check(const char *name)
{
	static const char *const prefix[] = { "user.", "trusted.", "security." };

	if (!strcmp(name, ACL_ACCESS) || !strcmp(name, ACL_DEFAULT))
		return 0;
	for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
		if (!strncmp(name, prefix[i], strlen(prefix[i])))
			return name[strlen(prefix[i])] ? 0 : -EINVAL;
	return -EOPNOTSUPP;
}

static int acl_access_set(fuse_req_t req, struct node *n, const char *value,
			  size_t size, int flags)
{
	mode_t mode = n->mode;
	int r = acl_update_mode(value, size, &mode);

	if (r < 0)
		return r;
	if (r) { /* the mode says it all: none kept (there may be none) */
		(void)xattr_remove(n, ACL_ACCESS);
	} else {
		r = xattr_set(n, ACL_ACCESS, value, size, flags);
		if (r < 0)
			return r;
	}
	if ((mode & S_ISGID) && !caller_in_group(req, n->gid) &&
	    !caller_fsetid(fuse_req_ctx(req)->pid))
		mode &= ~(mode_t)S_ISGID;
	n->mode = mode;
	time_now(&n->ctime);
	return 0;
}

/* An ACL set to none (a header alone, or removed), which there may be
 * already: 0, as tmpfs's simple_set_acl(NULL) (setfacl -b of a plain
 * file). The caller holds n->lock for writing. */
static int acl_drop(struct node *n, const char *name)
{
	int r = xattr_remove(n, name);

	return r == -ENODATA ? 0 : r;
}

static int xattr_set_any(fuse_req_t req, struct node *n, const char *name,
			 const char *value, size_t size, int flags)
{
	bool empty = size == 4; /* a header alone: the ACL removed */
	int r = xattr_name_check(name);

	if (r < 0)
		return r;
	if (!strcmp(name, ACL_ACCESS))
		return empty ? acl_drop(n, name) : acl_access_set(req, n, value, size, flags);
	if (!strcmp(name, ACL_DEFAULT)) {
		if (empty)
			return acl_drop(n, name);
		if (!S_ISDIR(n->mode))
			return -EACCES; /* as set_posix_acl() */
		if (acl_check(value, size) < 0)
			return -EINVAL;
	}
	return xattr_set(n, name, value, size, flags);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct uzfs *fs = req_fs(req);
	struct node *n = node_of(fs, ino);
	bool changed;
	mode_t old;
	int r;

	pthread_rwlock_wrlock(&n->lock);
	old = n->mode;
	r = xattr_set_any(req, n, name, value, size, flags);
	changed = n->mode != old;
	pthread_rwlock_unlock(&n->lock);
	/* the kernel keeps the mode an hour: the next stat must ask (before
	 * the reply, after which n may be gone: node.c) */
	if (changed)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	fuse_reply_err(req, -r);
}

/*
 * The ACL of that name on n, or NULL: none, or bytes no ACL can be. What
 * setxattr stored was checked, but an --image's tree brings its own
 * (tree_image.c), and acl.c's rewrites trust what they are given.
 */
static struct xattr *acl_find(struct node *n, const char *name)
{
	struct xattr *x = *xattr_find(n, name);

	return x && acl_check(x->value, x->size) == 0 ? x : NULL;
}

void xattr_acl_chmod(struct node *n)
{
	struct xattr *x = acl_find(n, ACL_ACCESS);

	if (x)
		acl_chmod(x->value, x->size, n->mode);
}

/*
 * The mode and ACLs of n, just made in dir and not yet named
 * (posix_acl_create()): with a default ACL in dir, an access ACL from it
 * cut to the mode asked for (kept where the mode cannot say it) and, for
 * a directory, the default ACL too; without (or with one no ACL can be),
 * the umask. Symbolic links take neither. Returns 0 or -ENOMEM; the caller holds ns_lock for
 * writing, so nothing else sees n yet.
 */
int xattr_acl_create(struct node *dir, struct node *n, mode_t umask)
{
	struct xattr *d;
	char *v = NULL;
	size_t size = 0;
	int r = 0;

	if (S_ISLNK(n->mode))
		return 0;
	pthread_rwlock_rdlock(&dir->lock);
	d = acl_find(dir, ACL_DEFAULT);
	if (d && (v = malloc(d->size))) {
		memcpy(v, d->value, d->size);
		size = d->size;
	}
	pthread_rwlock_unlock(&dir->lock);
	if (!d) {
		n->mode &= ~(umask & 0777);
		return 0;
	}
	if (!v)
		return -ENOMEM;
	if (S_ISDIR(n->mode))
		r = xattr_set(n, ACL_DEFAULT, v, size, 0);
	if (!r && acl_create_masq(v, size, &n->mode))
		r = xattr_set(n, ACL_ACCESS, v, size, 0);
	free(v);
	return r;
}

/* Reply with len bytes of buf, or only the length when size is 0. */
static void reply_sized(fuse_req_t req, const char *buf, size_t len, size_t size)
{
	if (!size)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, len);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct node *n = node_of(req_fs(req), ino);
	struct xattr *x;
	char *v = NULL;
	size_t len = 0;
	int r = xattr_name_check(name);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	pthread_rwlock_rdlock(&n->lock);
	x = *xattr_find(n, name);
	if (x) {
		len = x->size;
		v = malloc(len ? len : 1);
		if (v)
			memcpy(v, x->value, len);
	}
	pthread_rwlock_unlock(&n->lock);
	if (!x)	/* replied after the unlock: node.c */
		fuse_reply_err(req, ENODATA);
	else if (!v)
		fuse_reply_err(req, ENOMEM);
	else
		reply_sized(req, v, len, size);
	free(v);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct node *n = node_of(req_fs(req), ino);
	size_t len = 0;
	char *buf;

	pthread_rwlock_rdlock(&n->lock);
	for (struct xattr *x = n->xattrs; x; x = x->next)
		len += strlen(x->name) + 1;
	buf = malloc(len ? len : 1);
	if (buf) {
		char *p = buf;

		for (struct xattr *x = n->xattrs; x; x = x->next)
			p = stpcpy(p, x->name) + 1;
	}
	pthread_rwlock_unlock(&n->lock);
	if (buf)	/* replied after the unlock: node.c */
		reply_sized(req, buf, len, size);
	else
		fuse_reply_err(req, ENOMEM);
	free(buf);
}

int xattr_remove(struct node *n, const char *name)
{
	struct xattr **p = xattr_find(n, name), *x = *p;

	if (!x)
		return -ENODATA;
	*p = x->next;
	free(x->value);
	free(x);
	time_now(&n->ctime);
	return 0;
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct node *n = node_of(req_fs(req), ino);
	int r = xattr_name_check(name);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	pthread_rwlock_wrlock(&n->lock);
	if (!strcmp(name, ACL_ACCESS) || !strcmp(name, ACL_DEFAULT))
		r = acl_drop(n, name);
	else
		r = xattr_remove(n, name);
	pthread_rwlock_unlock(&n->lock);
	fuse_reply_err(req, -r);
}

void ops_xattr_init(struct fuse_lowlevel_ops *ops)
{
	ops->setxattr = op_setxattr;
	ops->getxattr = op_getxattr;
	ops->listxattr = op_listxattr;
	ops->removexattr = op_removexattr;
}
