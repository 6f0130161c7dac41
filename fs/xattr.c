// SPDX-License-Identifier: MIT
/*
 * xattr.c - extended attributes: a list of (name, value) on each node,
 * under the node's lock. Any namespace is kept (user., trusted.,
 * security., system.posix_acl_*); the kernel checks who may set which.
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

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct node *n = node_of(req_fs(req), ino);
	int r;

	pthread_rwlock_wrlock(&n->lock);
	r = xattr_set(n, name, value, size, flags);
	pthread_rwlock_unlock(&n->lock);
	fuse_reply_err(req, -r);
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

	pthread_rwlock_rdlock(&n->lock);
	x = *xattr_find(n, name);
	if (x)
		reply_sized(req, x->value, x->size, size);
	else
		fuse_reply_err(req, ENODATA);
	pthread_rwlock_unlock(&n->lock);
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
		reply_sized(req, buf, len, size);
	} else {
		fuse_reply_err(req, ENOMEM);
	}
	pthread_rwlock_unlock(&n->lock);
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
	int r;

	pthread_rwlock_wrlock(&n->lock);
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
