/* SPDX-License-Identifier: MIT */
/*
 * uzfs_impl.h - what the files of fs/ share: the file system, its nodes
 * (inodes) and names (dentries). Private to fs/. The design and the lock
 * rules are at the top of fs/node.c.
 */
#ifndef UZRAM_FS_UZFS_IMPL_H
#define UZRAM_FS_UZFS_IMPL_H

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "uzfs.h"

#define BMAP_CHUNK 1024u               /* block map entries per chunk */
#define UZFS_MAX_FILE (1ull << 44)     /* 16 TiB, as ext4's */
#define UZFS_NAME_MAX 255

struct xattr {
	struct xattr *next;
	size_t size;
	char *value;
	char name[];
};

struct dent {
	struct dent *hnext;           /* the hash chain */
	struct node *dir, *child;
	uint64_t cookie;              /* readdir's place in dir, ever rising */
	uint32_t hash;
	char name[];
};

struct node {
	/* Guarded by fs->ns_lock (written under its write lock): */
	struct node *prev, *next;     /* every node, for uzfs_free() */
	struct node *parent;          /* a directory's, for ".." */
	struct dent **ents;           /* a directory's names by cookie */
	size_t nents, cap;
	uint64_t next_cookie;
	_Atomic uint32_t nlink;       /* read without ns_lock by getattr */
	_Atomic uint64_t nlookup;     /* the kernel's references */

	/* Guarded by lock: */
	pthread_rwlock_t lock;
	uint64_t ino;                 /* st_ino; never changes */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	dev_t rdev;
	struct timespec atime, mtime, ctime, btime;
	uint64_t size;
	uint32_t **chunks;            /* block map: device block + 1, 0 a hole */
	uint64_t nchunks;
	uint64_t blocks;              /* mapped blocks */
	char *target;                 /* a symlink's */
	struct xattr *xattrs;
	uint64_t save_idx;            /* its place in a tree record (tree_image.c) */
};

struct uzfs {
	struct uzram *dev;
	uint32_t bsize;               /* the device's cluster size */
	uint64_t nblocks;

	/* The allocator (alloc.c), guarded by alloc_lock. */
	pthread_mutex_t alloc_lock;
	uint64_t *bitmap;             /* one bit a device block, 1: used */
	uint64_t nfree, rotor;
	_Atomic uint64_t freed;       /* blocks freed since the last compaction */

	/* The staged tail (bmap.c), guarded by stage_lock: the partial last
	 * block of the file written last, kept here until it is whole. */
	pthread_mutex_t stage_lock;
	bool no_stage;                /* cfg->no_stage: never stage */
	struct node *stage_node;      /* NULL: nothing staged */
	uint64_t stage_fblk, stage_blk; /* its file block and device block */
	uint32_t stage_len;           /* bytes from the block's start */
	char *stage_buf;              /* bsize bytes */

	/* The namespace (node.c), guarded by ns_lock. */
	pthread_rwlock_t ns_lock;
	struct dent **hash;
	size_t hash_mask, ndents;
	struct node *root;
	struct node all;              /* the list head of every node */
	_Atomic uint64_t next_ino, nnodes;
	uint64_t max_nodes;           /* uzfs_config's: nnodes + extra_links
				       * stays within it, as tmpfs's inodes */
	_Atomic uint64_t extra_links; /* names of files past their first:
				       * tmpfs takes an inode for each */

	/* The session (session.c). */
	struct fuse_session *se;
	bool mounted, allow_other, debug;
	bool no_open;                 /* the kernel opens without asking */
	/* wire.c: FUSE_HANDLE_KILLPRIV_V2, set while INIT is served;
	 * atomic: libfuse's other threads read them for every request */
	_Atomic uint64_t init_unique; /* the INIT request's */
	_Atomic bool init_pending;    /* its reply not yet written */
	_Atomic bool kernel_killpriv; /* the kernel offered the flag */
	_Atomic bool killpriv;        /* and took it: ops_file.c kills */
	/* FUSE_DIRECT_IO_ALLOW_MMAP, the same way: the kernel offered it,
	 * and took it (a created file written to only bypasses the page
	 * cache: ops_name.c's op_create) */
	_Atomic bool kernel_dio_mmap;
	_Atomic bool dio_create;
	unsigned threads, spin_us;
	pthread_t compactor;
	bool compactor_on;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	bool stopping;
};

/* alloc.c */
int alloc_init(struct uzfs *fs);
void alloc_release(struct uzfs *fs);
int alloc_block(struct uzfs *fs, uint64_t hint, uint64_t *blk);
void alloc_free_run(struct uzfs *fs, uint64_t blk, uint64_t n);

/* bmap.c: a regular file's blocks; the caller holds n->lock for writing
 * (for reading where it says so). */
uint64_t bmap_get(const struct node *n, uint64_t fblk);     /* read lock */
uint32_t *bmap_slot(struct node *n, uint64_t fblk);
int bmap_map(struct uzfs *fs, struct node *n, uint64_t fblk, uint64_t *blk);
void bmap_free_range(struct uzfs *fs, struct node *n, uint64_t first,
		     uint64_t end);
void bmap_release(struct uzfs *fs, struct node *n);
int bmap_zero(struct uzfs *fs, struct node *n, uint64_t off, uint64_t len);
int bmap_truncate(struct uzfs *fs, struct node *n, uint64_t size);
int bmap_read(struct uzfs *fs, const struct node *n, char *buf, size_t len,
	      uint64_t off);                                 /* read lock */
long bmap_write(struct uzfs *fs, struct node *n, const char *buf, size_t len,
		uint64_t off);
int64_t bmap_seek(struct uzfs *fs, const struct node *n, uint64_t off,
		  bool data);                               /* read lock */
/* The staged tail onto the device: n's (a read lock on n is enough), or
 * any node's (n NULL: no node lock needed); 0 or a negative errno. */
int bmap_stage_flush(struct uzfs *fs, const struct node *n);

/* node.c */
struct node *node_of(struct uzfs *fs, fuse_ino_t ino);
struct node *node_new(struct uzfs *fs, mode_t mode, uid_t uid, gid_t gid);
/* Whether a new node or name would pass max_nodes (the caller holds
 * ns_lock for writing, as every maker of one does): it returns ENOSPC.
 * node_count(): what counts against it, statfs's used inodes. */
bool node_full(struct uzfs *fs);
uint64_t node_count(struct uzfs *fs);
void node_fill_attr(struct uzfs *fs, struct node *n, struct stat *st);
void node_entry(struct uzfs *fs, struct node *n, struct fuse_entry_param *e);
void node_put(struct uzfs *fs, struct node *n, uint64_t nlookup);
void node_unlinked(struct uzfs *fs, struct node *n); /* ns_lock held */
void node_free_all(struct uzfs *fs);
struct dent *dent_find(struct uzfs *fs, const struct node *dir, const char *name);
int dent_add(struct uzfs *fs, struct node *dir, const char *name,
	     struct node *child);
void dent_remove(struct uzfs *fs, struct dent *d);
size_t dent_first(const struct node *dir, uint64_t cookie);
void time_now(struct timespec *ts);

/* tree_image.c: the tree from the record in the device (cfg.load);
 * 0, -ENOMEM, or -EBADMSG with a message in why. */
int tree_load(struct uzfs *fs, char *why, size_t whylen);

/* ops_name.c: the operations on names */
void ops_name_init(struct fuse_lowlevel_ops *ops);

/* ops_file.c: the operations on one node: attributes, data */
void ops_file_init(struct fuse_lowlevel_ops *ops);
void node_accessed(struct node *n);  /* atime by relatime; no lock held */

/* reqloop.c: serve requests on this thread until the session ends,
 * spinning up to spin_us after each reply; 0 or a negative errno. */
int reqloop_run(struct fuse_session *se, unsigned spin_us);

/* wire.c: /dev/fuse read and written for libfuse (FUSE_HANDLE_KILLPRIV_V2);
 * wire_attach() after fuse_session_mount(): 0 or a negative errno. */
int wire_attach(struct uzfs *fs);
bool wire_write_kills(void); /* the WRITE being served: kill set-ID bits */

/* xattr.c: extended attributes, and POSIX ACLs kept with the mode */
void ops_xattr_init(struct fuse_lowlevel_ops *ops);
int xattr_remove(struct node *n, const char *name); /* n->lock for writing */
void xattr_acl_chmod(struct node *n);               /* n->lock for writing */
int xattr_acl_create(struct node *dir, struct node *n, mode_t umask);

/* acl.c: POSIX ACLs in their xattr form (the mode arithmetic) */
#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"
int acl_check(const char *v, size_t size);
int acl_update_mode(const char *v, size_t size, mode_t *mode);
void acl_chmod(char *v, size_t size, mode_t mode);
int acl_create_masq(char *v, size_t size, mode_t *mode);

/* caller.c: a request's caller beyond uid, gid and pid */
bool caller_fsetid(pid_t pid);
bool caller_in_group(fuse_req_t req, gid_t gid);

#define ENTRY_TIMEOUT 3600.0    /* only the kernel changes the tree */

static inline struct uzfs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

#endif
