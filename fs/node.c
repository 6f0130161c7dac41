// SPDX-License-Identifier: MIT
/*
 * node.c - uzram's own file system: its design, and the node (inode) and
 * name (dentry) tables.
 *
 * One process serves one directory through libfuse3's low-level API
 * (session.c); file data lives in a uzram device opened in the same
 * process, metadata in memory.
 *
 *   kernel --FUSE--> ops_name.c (lookup, mkdir, rename, readdir, ...)
 *                    ops_file.c (getattr, setattr, read, write, xattrs, ...)
 *                        |                   |
 *                    node.c (names)      bmap.c (a file's blocks)
 *                                            |
 *                                        alloc.c (free device blocks)
 *                                            |
 *                                     uzram_read/write/discard (libuzram)
 *
 *   tree_image.c: --image: the tree's record into the device, the device
 *   into a file (uzram_save()), and back at mount.
 *
 * Data. The device is cut into blocks of its cluster size. A regular file
 * owns a set of blocks, found through its block map (bmap.c): file block i
 * in device block map[i], or a hole. Blocks are handed out by alloc.c,
 * next to the file's previous block when it is free, so files written in
 * order lie in long runs and I/O goes to the device in runs. A freed block
 * (the last name and handle of a file gone, truncate, hole punch) is
 * discarded on the device before anyone can take it again, so its memory
 * is given back at once and a new block reads as zeros. Block 0 is never
 * a file's: it holds a saved tree's superblock (tree_image.c). A background
 * thread (session.c) compacts the device's allocator after frees.
 *
 * Nodes. The kernel's node id of a node is its address (FUSE_ROOT_ID for
 * the root), as libfuse's passthrough_ll does; st_ino is a counter. A node
 * lives while it has a name (nlink) or the kernel holds a reference
 * (nlookup, counted by every reply with an entry, given back by forget).
 * The kernel keeps its reference while the file is open anywhere and
 * sends forget once the last name and the last handle are gone, so that
 * is when the blocks go. The file system has no open or opendir (the
 * kernel's no_open: one round trip less per open and per close); only a
 * file made by open(O_CREAT) gets a handle, direct I/O when it is opened
 * to be written only (ops_name.c's op_create). Metadata lives in the
 * process's heap, beside --size and --mem-limit, so the number of nodes
 * is bounded as tmpfs bounds its inodes (uzfs_config's max_nodes, `uzram
 * mount --inodes`, half as many as RAM has pages by default): a new node
 * or a file's second and later names (tmpfs takes an inode for each hard
 * link) past it is ENOSPC (node_full()), and statfs reports the count.
 *
 * Names. Every name is a struct dent in one hash table keyed by (directory,
 * name); a directory also keeps its dents in an array in creation order,
 * each with a cookie that only rises, and readdir's offset is a cookie, so
 * a readdir that runs while names come and go never skips or repeats one
 * that stays.
 *
 *   hash[h(dir,name)] -> dent -> dent ...      dir->ents: [dent c=1][dent c=4]...
 *                         |
 *                         child -> node
 *
 * Locks, always taken in this order:
 *   fs->ns_lock (rwlock): the hash, every directory's ents, nlink, parent,
 *       the list of all nodes. Read for lookup and readdir; write for any
 *       change of names and for freeing a node.
 *   node->lock (rwlock): a node's attributes, size, block map, symlink
 *       target and xattrs. Read for getattr, read, lseek; write for the rest.
 *   fs->alloc_lock (mutex): the free-block bitmap (alloc.c), held only
 *       inside alloc.c.
 *   fs->stage_lock (mutex): bmap.c's staged block (the partial last block
 *       of the file written last), after a node's lock or alone (the
 *       compactor, a save); nothing of ours is taken under it.
 *   nlookup is atomic: readdirplus counts references under the read lock;
 *   a count that reaches zero takes the write lock to free.
 * The device needs no lock of ours: libuzram locks its own pages, and no
 * two files share a block.
 * A reply goes after the locks it was made under are released, and
 * nothing touches the node after it: once the kernel has its answer the
 * caller may drop the file, the kernel forget the node and another thread
 * free it, and a node made next may take its memory (with libfuse's
 * threads an unlock after the reply can leave a new node's lock with -1
 * readers: stress-ng in t66 once left a rename waiting on one for ever).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uzram.h"
#include "uzfs_impl.h"

void time_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
}

struct node *node_of(struct uzfs *fs, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? fs->root : (struct node *)(uintptr_t)ino;
}

/* A node with one reference from nobody yet; linked into fs->all. The
 * caller holds ns_lock for writing. */
uint64_t node_count(struct uzfs *fs)
{
	return atomic_load(&fs->nnodes) + atomic_load(&fs->extra_links);
}

bool node_full(struct uzfs *fs)
{
	return node_count(fs) >= fs->max_nodes;
}

struct node *node_new(struct uzfs *fs, mode_t mode, uid_t uid, gid_t gid)
{
	struct node *n = calloc(1, sizeof *n);

	if (!n)
		return NULL;
	if (pthread_rwlock_init(&n->lock, NULL)) {
		free(n);
		return NULL;
	}
	n->ino = atomic_fetch_add(&fs->next_ino, 1);
	n->mode = mode;
	n->uid = uid;
	n->gid = gid;
	time_now(&n->mtime);
	n->atime = n->ctime = n->btime = n->mtime;
	n->next_cookie = 1;
	n->next = fs->all.next;
	n->prev = &fs->all;
	fs->all.next->prev = n;
	fs->all.next = n;
	atomic_fetch_add(&fs->nnodes, 1);
	return n;
}

/* The caller holds ns_lock for writing; nothing refers to n any more. */
static void node_free(struct uzfs *fs, struct node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	if (S_ISREG(n->mode))
		bmap_release(fs, n);
	while (n->xattrs) {
		struct xattr *x = n->xattrs;

		n->xattrs = x->next;
		free(x->value);
		free(x);
	}
	free(n->target);
	free(n->ents);
	pthread_rwlock_destroy(&n->lock);
	free(n);
	atomic_fetch_sub(&fs->nnodes, 1);
}

void node_fill_attr(struct uzfs *fs, struct node *n, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = n->ino;
	st->st_mode = n->mode;
	st->st_nlink = atomic_load(&n->nlink);
	st->st_uid = n->uid;
	st->st_gid = n->gid;
	st->st_rdev = n->rdev;
	st->st_size = (off_t)n->size;
	st->st_blksize = (blksize_t)(fs->bsize > 65536 ? 65536 : fs->bsize);
	st->st_blocks = (blkcnt_t)(n->blocks * (fs->bsize / 512));
	if (S_ISLNK(n->mode) || S_ISDIR(n->mode))
		st->st_blocks = 0;
	st->st_atim = n->atime;
	st->st_mtim = n->mtime;
	st->st_ctim = n->ctime;
}

/* An entry for a reply, counting one reference. */
void node_entry(struct uzfs *fs, struct node *n, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = n == fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
	e->attr_timeout = ENTRY_TIMEOUT;
	e->entry_timeout = ENTRY_TIMEOUT;
	pthread_rwlock_rdlock(&n->lock);
	node_fill_attr(fs, n, &e->attr);
	pthread_rwlock_unlock(&n->lock);
	atomic_fetch_add(&n->nlookup, 1);
}

/* Free n once it has no name and the kernel forgot it: the kernel holds
 * its reference while any process has the file open, and gives it back
 * (forget) as soon as the last name is gone and the last handle closed.
 * The caller holds ns_lock for writing. */
static void node_check(struct uzfs *fs, struct node *n)
{
	if (n != fs->root && !atomic_load(&n->nlink) && !atomic_load(&n->nlookup))
		node_free(fs, n);
}

void node_put(struct uzfs *fs, struct node *n, uint64_t nlookup)
{
	if (atomic_fetch_sub(&n->nlookup, nlookup) != nlookup)
		return;
	pthread_rwlock_wrlock(&fs->ns_lock);
	node_check(fs, n);
	pthread_rwlock_unlock(&fs->ns_lock);
}

void node_unlinked(struct uzfs *fs, struct node *n)
{
	node_check(fs, n);
}

void node_free_all(struct uzfs *fs)
{
	while (fs->all.next != &fs->all)
		node_free(fs, fs->all.next);
	for (size_t i = 0; fs->hash && i <= fs->hash_mask; i++)
		while (fs->hash[i]) {
			struct dent *d = fs->hash[i];

			fs->hash[i] = d->hnext;
			free(d);
		}
	free(fs->hash);
	fs->hash = NULL;
}

static uint32_t name_hash(const struct node *dir, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uintptr_t)dir;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
	return (uint32_t)(h ^ h >> 32);
}

struct dent *dent_find(struct uzfs *fs, const struct node *dir, const char *name)
{
	uint32_t h = name_hash(dir, name);

	for (struct dent *d = fs->hash[h & fs->hash_mask]; d; d = d->hnext)
		if (d->hash == h && d->dir == dir && !strcmp(d->name, name))
			return d;
	return NULL;
}

/* Double the hash table; on failure keep the old one (chains grow). */
static void hash_grow(struct uzfs *fs)
{
	size_t size = (fs->hash_mask + 1) * 2;
	struct dent **h = calloc(size, sizeof *h);

	if (!h)
		return;
	for (size_t i = 0; i <= fs->hash_mask; i++)
		while (fs->hash[i]) {
			struct dent *d = fs->hash[i];

			fs->hash[i] = d->hnext;
			d->hnext = h[d->hash & (size - 1)];
			h[d->hash & (size - 1)] = d;
		}
	free(fs->hash);
	fs->hash = h;
	fs->hash_mask = size - 1;
}

/* Add name -> child in dir (which has no such name). The caller holds
 * ns_lock for writing and sets nlink. */
int dent_add(struct uzfs *fs, struct node *dir, const char *name,
	     struct node *child)
{
	size_t len = strlen(name);
	struct dent *d;

	if (len > UZFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (dir->nents == dir->cap) {
		size_t cap = dir->cap ? dir->cap * 2 : 8;
		struct dent **e = realloc(dir->ents, cap * sizeof *e);

		if (!e)
			return -ENOMEM;
		dir->ents = e;
		dir->cap = cap;
	}
	d = malloc(sizeof *d + len + 1);
	if (!d)
		return -ENOMEM;
	memcpy(d->name, name, len + 1);
	d->dir = dir;
	d->child = child;
	d->cookie = dir->next_cookie++;
	d->hash = name_hash(dir, name);
	d->hnext = fs->hash[d->hash & fs->hash_mask];
	fs->hash[d->hash & fs->hash_mask] = d;
	dir->ents[dir->nents++] = d;
	if (++fs->ndents > fs->hash_mask + 1)
		hash_grow(fs);
	if (S_ISDIR(child->mode))
		child->parent = dir;
	return 0;
}

/* The index in dir->ents of the first dent with a cookie >= cookie. */
size_t dent_first(const struct node *dir, uint64_t cookie)
{
	size_t lo = 0, hi = dir->nents;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (dir->ents[mid]->cookie < cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Take d out of the hash and its directory and free it. The caller holds
 * ns_lock for writing and fixes nlink. */
void dent_remove(struct uzfs *fs, struct dent *d)
{
	struct dent **p = &fs->hash[d->hash & fs->hash_mask];
	struct node *dir = d->dir;
	size_t i = dent_first(dir, d->cookie);

	while (*p != d)
		p = &(*p)->hnext;
	*p = d->hnext;
	memmove(dir->ents + i, dir->ents + i + 1,
		(dir->nents - i - 1) * sizeof *dir->ents);
	dir->nents--;
	fs->ndents--;
	free(d);
}
