// SPDX-License-Identifier: MIT
/*
 * tree_image.c - the whole tree in one file (`uzram mount DIR --image
 * FILE`): the metadata is written into the device itself, and the device
 * is saved with the library's image (uzram_save(), src/image-format.md),
 * so one file holds both, and uzram_save()'s write-aside, fsync and
 * rename keep the previous image whole through a kill at any moment.
 *
 *   device block 0: the superblock (reserved for it while mounted: zeros)
 *   +---------------------------------------------------------------+
 *   | "UZFSTREE" | version | 64 | length | first | count | bsize | 0 |
 *   | XXH3-64 of the record | XXH3-64 of the 56 bytes before        |
 *   +---------------------------------------------------------------+
 *   the record: in free blocks, chained; each block is
 *   [ next block (u64, 0: the last) | bsize - 8 bytes of the record ]
 *
 * The record (every integer little-endian), version 1:
 *   u64 nodes, u64 next st_ino; then each node, the root first:
 *   u32 mode, uid, gid; u64 rdev, st_ino; atime, mtime, ctime, btime
 *   (i64 s, u32 ns each); u64 size; u32 nlink; then by type:
 *     file:      u64 runs; each u64 file block, device block, count
 *     symlink:   u32 length, the target
 *     directory: u64 names; each u64 node index, u16 length, the name
 *   and u32 xattrs; each u16 name length, u32 value length, name, value.
 *
 * Loading checks everything before the tree is used: both checksums, every
 * bound and length, that no device block is owned twice or by the record,
 * that every directory has one name and reaches the root, and every
 * node's nlink; anything wrong and nothing is mounted. Once loaded, the
 * record's blocks are freed (discarded) and block 0 is zeros again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "uzfs_impl.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define SB_MAGIC "UZFSTREE"
#define SB_VERSION 1u
#define SB_SIZE 64u
#define NODE_MIN 96u /* the smallest node record, for a bound on nodes */

/* A growing buffer for the record. */
struct out {
	uint8_t *p;
	size_t len, cap;
	bool failed;
};

static void put(struct out *o, const void *v, size_t n)
{
	if (o->failed)
		return;
	if (o->len + n > o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 1u << 16;
		uint8_t *p;

		while (cap < o->len + n)
			cap *= 2;
		p = realloc(o->p, cap);
		if (!p) {
			o->failed = true;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, v, n);
	o->len += n;
}

static void put_le(struct out *o, uint64_t v, unsigned bytes)
{
	uint8_t b[8];

	for (unsigned i = 0; i < bytes; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(o, b, bytes);
}

static void put_time(struct out *o, const struct timespec *t)
{
	put_le(o, (uint64_t)t->tv_sec, 8);
	put_le(o, (uint64_t)t->tv_nsec, 4);
}

/* A file's blocks as runs (file block, device block, count): counted
 * when o is NULL, else written. The chunks that are holes are skipped. */
static uint64_t put_runs(struct out *o, const struct node *n)
{
	uint64_t runs = 0, f0 = 0, d0 = 0, len = 0;

	for (uint64_t f = 0; f <= n->nchunks * BMAP_CHUNK; f++) {
		bool last = f == n->nchunks * BMAP_CHUNK;
		bool hole = !last && !n->chunks[f / BMAP_CHUNK];
		uint64_t e = last || hole ? 0 : bmap_get(n, f);

		if (len && e && e - 1 == d0 + len && f == f0 + len) {
			len++;
			continue;
		}
		if (len && o) {
			put_le(o, f0, 8);
			put_le(o, d0, 8);
			put_le(o, len, 8);
		}
		runs += len != 0;
		len = 0;
		if (e) {
			f0 = f;
			d0 = e - 1;
			len = 1;
		}
		if (hole)
			f += BMAP_CHUNK - 1;
	}
	return runs;
}

static void put_node(struct out *o, const struct node *n)
{
	put_le(o, n->mode, 4);
	put_le(o, n->uid, 4);
	put_le(o, n->gid, 4);
	put_le(o, n->rdev, 8);
	put_le(o, n->ino, 8);
	put_time(o, &n->atime);
	put_time(o, &n->mtime);
	put_time(o, &n->ctime);
	put_time(o, &n->btime);
	put_le(o, n->size, 8);
	put_le(o, atomic_load(&n->nlink), 4);
	if (S_ISREG(n->mode)) {
		put_le(o, put_runs(NULL, n), 8);
		put_runs(o, n);
	} else if (S_ISLNK(n->mode)) {
		put_le(o, strlen(n->target), 4);
		put(o, n->target, strlen(n->target));
	} else if (S_ISDIR(n->mode)) {
		put_le(o, n->nents, 8);
		for (size_t i = 0; i < n->nents; i++) {
			size_t len = strlen(n->ents[i]->name);

			put_le(o, n->ents[i]->child->save_idx, 8);
			put_le(o, len, 2);
			put(o, n->ents[i]->name, len);
		}
	}
	uint32_t nx = 0;

	for (const struct xattr *x = n->xattrs; x; x = x->next)
		nx++;
	put_le(o, nx, 4);
	for (const struct xattr *x = n->xattrs; x; x = x->next) {
		put_le(o, strlen(x->name), 2);
		put_le(o, x->size, 4);
		put(o, x->name, strlen(x->name));
		put(o, x->value, x->size);
	}
}

/* The record of the tree; the nodes without a name are freed first. */
static int tree_record(struct uzfs *fs, struct out *o)
{
	uint64_t count = 1;

	for (struct node *n = fs->all.next, *next; n != &fs->all; n = next) {
		next = n->next;
		if (n != fs->root && !atomic_load(&n->nlink)) {
			atomic_store(&n->nlookup, 0);
			node_unlinked(fs, n); /* open but unlinked: goes */
		}
	}
	fs->root->save_idx = 0;
	for (struct node *n = fs->all.next; n != &fs->all; n = n->next)
		if (n != fs->root)
			n->save_idx = count++;
	put_le(o, count, 8);
	put_le(o, atomic_load(&fs->next_ino), 8);
	put_node(o, fs->root);
	for (struct node *n = fs->all.next; n != &fs->all; n = n->next)
		if (n != fs->root)
			put_node(o, n);
	return o->failed ? -ENOMEM : 0;
}

/* Write the record into free blocks and the superblock into block 0. */
static int record_write(struct uzfs *fs, const struct out *o, uint64_t *first)
{
	uint64_t bs = fs->bsize, room = bs - 8, nblk = (o->len + room - 1) / room;
	uint64_t *blks = calloc(nblk ? nblk : 1, sizeof *blks);
	uint8_t *buf = malloc(bs), sb[SB_SIZE] = { 0 };
	struct out s = { 0 };
	int r = blks && buf ? 0 : -ENOMEM;

	for (uint64_t i = 0; !r && i < nblk; i++)
		r = alloc_block(fs, i ? blks[i - 1] + 1 : 1, &blks[i]);
	for (uint64_t i = 0; !r && i < nblk; i++) {
		size_t part = o->len - i * room < room ? o->len - i * room : room;
		uint64_t next = i + 1 < nblk ? blks[i + 1] : 0;

		memset(buf, 0, bs);
		for (int b = 0; b < 8; b++)
			buf[b] = (uint8_t)(next >> (8 * b));
		memcpy(buf + 8, o->p + i * room, part);
		r = uzram_write(fs->dev, buf, bs, blks[i] * bs);
	}
	if (!r) {
		put(&s, SB_MAGIC, 8);
		put_le(&s, SB_VERSION, 4);
		put_le(&s, SB_SIZE, 4);
		put_le(&s, o->len, 8);
		put_le(&s, nblk ? blks[0] : 0, 8);
		put_le(&s, nblk, 8);
		put_le(&s, bs, 4);
		put_le(&s, 0, 4);
		put_le(&s, XXH3_64bits(o->p, o->len), 8);
		r = s.failed ? -ENOMEM : 0;
	}
	if (!r) {
		put_le(&s, XXH3_64bits(s.p, s.len), 8);
		r = s.failed ? -ENOMEM : 0;
	}
	if (!r) {
		memcpy(sb, s.p, SB_SIZE);
		r = uzram_write(fs->dev, sb, SB_SIZE, 0);
	}
	*first = nblk ? blks[0] : 0;
	for (uint64_t i = 0; r < 0 && i < nblk && blks[i]; i++)
		alloc_free_run(fs, blks[i], 1);
	free(s.p);
	free(buf);
	free(blks);
	return r;
}

/* Free the record's chain of blocks and zero block 0. */
static void record_drop(struct uzfs *fs, uint64_t first)
{
	uint8_t head[8];

	for (uint64_t b = first, i = 0; b && i < fs->nblocks; i++) {
		uint64_t next = 0;

		if (uzram_read(fs->dev, head, 8, b * fs->bsize) < 0)
			break;
		for (int k = 7; k >= 0; k--)
			next = next << 8 | head[k];
		alloc_free_run(fs, b, 1);
		b = next;
	}
	uzram_discard(fs->dev, fs->bsize, 0);
}

int uzfs_save(struct uzfs *fs, const char *path, char *why, size_t whylen)
{
	struct out o = { 0 };
	uint64_t first = 0;
	int r = bmap_stage_flush(fs, NULL); /* bmap.c's staged block */

	if (r < 0) {
		snprintf(why, whylen, "cannot write a file's last block: %s",
			 strerror(-r));
	} else if ((r = tree_record(fs, &o)) < 0) {
		snprintf(why, whylen, "out of memory for the tree's record");
	} else if ((r = record_write(fs, &o, &first)) < 0) {
		snprintf(why, whylen, "cannot write the tree's record (%zu bytes) "
			 "into the device: %s", o.len, strerror(-r));
	} else if ((r = uzram_save(fs->dev, path, 0)) < 0) {
		snprintf(why, whylen, "%s", uzram_last_error());
	}
	if (first)
		record_drop(fs, first);
	free(o.p);
	return r;
}

/* --- loading --- */

/* A bounds-checked reader of the record. */
struct in {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static uint64_t get_le(struct in *in, unsigned bytes)
{
	uint64_t v = 0;

	if (in->bad || in->left < bytes) {
		in->bad = true;
		return 0;
	}
	for (unsigned i = bytes; i-- > 0;)
		v = v << 8 | in->p[i];
	in->p += bytes;
	in->left -= bytes;
	return v;
}

static const char *get_bytes(struct in *in, size_t n)
{
	const char *s = (const char *)in->p;

	if (in->bad || in->left < n) {
		in->bad = true;
		return NULL;
	}
	in->p += n;
	in->left -= n;
	return s;
}

static void get_time(struct in *in, struct timespec *t)
{
	t->tv_sec = (time_t)get_le(in, 8);
	t->tv_nsec = (long)get_le(in, 4);
	if (t->tv_nsec >= 1000000000L)
		in->bad = true;
}

/* A failed check: a message into why, -EBADMSG. */
#define BAD(...) (snprintf(why, whylen, __VA_ARGS__), -EBADMSG)

/* Mark a run of device blocks used by a file; -EBADMSG if any is taken. */
static int claim_run(struct uzfs *fs, struct node *n, uint64_t f, uint64_t d,
		     uint64_t len)
{
	if (!len || d == 0 || d >= fs->nblocks || len > fs->nblocks - d ||
	    f >= UZFS_MAX_FILE / fs->bsize || len > UZFS_MAX_FILE / fs->bsize - f)
		return -EBADMSG;
	for (uint64_t i = 0; i < len; i++) {
		uint64_t b = d + i;
		uint64_t *w = &fs->bitmap[b / 64], bit = 1ull << (b % 64);
		uint32_t *s;

		if (*w & bit || bmap_get(n, f + i))
			return -EBADMSG;
		s = bmap_slot(n, f + i);
		if (!s)
			return -ENOMEM;
		*w |= bit;
		fs->nfree--;
		*s = (uint32_t)(b + 1);
		n->blocks++;
	}
	return 0;
}

/* One node's record into n (made by the caller); its names are kept in
 * *names (the record's place) for link_names(). */
static int read_node(struct uzfs *fs, struct in *in, struct node *n,
		     uint32_t *nlink, struct in *names)
{
	uint64_t k;
	int r = 0;

	n->mode = (mode_t)get_le(in, 4);
	n->uid = (uid_t)get_le(in, 4);
	n->gid = (gid_t)get_le(in, 4);
	n->rdev = (dev_t)get_le(in, 8);
	n->ino = get_le(in, 8);
	get_time(in, &n->atime);
	get_time(in, &n->mtime);
	get_time(in, &n->ctime);
	get_time(in, &n->btime);
	n->size = get_le(in, 8);
	*nlink = (uint32_t)get_le(in, 4);
	if (in->bad || n->size > UZFS_MAX_FILE ||
	    n->ino >= atomic_load(&fs->next_ino))
		return -EBADMSG;
	switch (n->mode & S_IFMT) {
	case S_IFREG:
		k = get_le(in, 8);
		if (k > in->left / 24)
			return -EBADMSG;
		while (!r && k--) {
			uint64_t f = get_le(in, 8), d = get_le(in, 8);

			r = claim_run(fs, n, f, d, get_le(in, 8));
		}
		break;
	case S_IFLNK:
		k = get_le(in, 4);
		if (k == 0 || k >= 4096 || k != n->size || in->left < k)
			return -EBADMSG;
		n->target = strndup(get_bytes(in, k), k);
		if (!n->target)
			return -ENOMEM;
		if (strlen(n->target) != k)
			return -EBADMSG;
		break;
	case S_IFDIR:
		*names = *in;
		k = get_le(in, 8);
		if (k > in->left / 11)
			return -EBADMSG;
		while (k--) {
			get_le(in, 8);
			get_bytes(in, get_le(in, 2));
		}
		break;
	case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	default:
		return -EBADMSG;
	}
	for (k = get_le(in, 4); !r && !in->bad && k--;) {
		size_t nlen = get_le(in, 2), vlen = get_le(in, 4);
		const char *name = get_bytes(in, nlen), *value = get_bytes(in, vlen);
		struct xattr *x;

		if (in->bad || !nlen || nlen > 255 || vlen > 65536 ||
		    memchr(name, 0, nlen))
			return -EBADMSG;
		x = calloc(1, sizeof *x + nlen + 1);
		if (!x || !(x->value = malloc(vlen ? vlen : 1))) {
			free(x);
			return -ENOMEM;
		}
		memcpy(x->name, name, nlen);
		memcpy(x->value, value, vlen);
		x->size = vlen;
		x->next = n->xattrs;
		n->xattrs = x;
	}
	return in->bad ? -EBADMSG : r;
}

/* A directory's names, read again from its record's place. */
static int link_names(struct uzfs *fs, struct node *dir, struct in *in,
		      struct node **nodes, uint64_t count)
{
	char name[UZFS_NAME_MAX + 1];

	for (uint64_t k = get_le(in, 8); k--;) {
		uint64_t i = get_le(in, 8);
		size_t len = get_le(in, 2);
		const char *s = get_bytes(in, len);
		struct node *c;
		int r;

		if (in->bad || i == 0 || i >= count || !len || len > UZFS_NAME_MAX)
			return -EBADMSG;
		memcpy(name, s, len);
		name[len] = '\0';
		c = nodes[i];
		if (strlen(name) != len || strchr(name, '/') || !strcmp(name, ".") ||
		    !strcmp(name, "..") || dent_find(fs, dir, name) ||
		    (S_ISDIR(c->mode) && c->parent))
			return -EBADMSG;
		r = dent_add(fs, dir, name, c);
		if (r < 0)
			return r;
		atomic_fetch_add(&c->nlink, S_ISDIR(c->mode) ? 2 : 1);
		if (S_ISDIR(c->mode))
			atomic_fetch_add(&dir->nlink, 1);
	}
	return 0;
}

/* The superblock and the record's chain into a buffer, both checked. */
static int record_read(struct uzfs *fs, uint8_t **rec, uint64_t *len,
		       uint64_t *first, char *why, size_t whylen)
{
	uint8_t sb[SB_SIZE], head[8], *buf = NULL;
	struct in in = { sb, SB_SIZE, false };
	uint64_t bs = fs->bsize, room = bs - 8, nblk, sum, b;
	int r = uzram_read(fs->dev, sb, SB_SIZE, 0);

	if (r < 0)
		return BAD("cannot read the superblock: %s", strerror(-r));
	if (memcmp(get_bytes(&in, 8), SB_MAGIC, 8))
		return BAD("no file system tree in it (a device image of uzram "
			   "serve --image?)");
	if (XXH3_64bits(sb, SB_SIZE - 8) != (get_le(&(struct in){ sb + 56, 8,
						     false }, 8)))
		return BAD("the superblock's checksum does not match");
	if (get_le(&in, 4) != SB_VERSION || get_le(&in, 4) != SB_SIZE)
		return BAD("a tree record of a version this uzram does not read");
	*len = get_le(&in, 8);
	*first = b = get_le(&in, 8);
	nblk = get_le(&in, 8);
	if (get_le(&in, 4) != bs || get_le(&in, 4) != 0 || !*len ||
	    nblk != (*len + room - 1) / room || nblk >= fs->nblocks)
		return BAD("the superblock's fields are out of bounds");
	sum = get_le(&in, 8);
	buf = malloc(nblk * bs);
	if (!buf)
		return -ENOMEM;
	for (uint64_t i = 0; i < nblk; i++) {
		uint64_t *w = &fs->bitmap[b / 64], bit = 1ull << (b % 64);

		if (b == 0 || b >= fs->nblocks || (*w & bit)) {
			free(buf);
			return BAD("the record's block chain is broken at block %"
				   PRIu64, i);
		}
		*w |= bit; /* taken until loaded: no file may own it */
		fs->nfree--;
		r = uzram_read(fs->dev, buf + i * room, bs, b * bs);
		if (r < 0) {
			free(buf);
			return BAD("cannot read the record: %s", strerror(-r));
		}
		memcpy(head, buf + i * room, 8); /* the next block */
		memmove(buf + i * room, buf + i * room + 8, room);
		b = get_le(&(struct in){ head, 8, false }, 8);
	}
	if (b != 0 || XXH3_64bits(buf, *len) != sum) {
		free(buf);
		return BAD("the tree record's checksum does not match");
	}
	*rec = buf;
	return 0;
}

/* Each directory has one name and the root above it; each node's nlink
 * is what its names make. */
static int tree_check(struct node **nodes, const uint32_t *nlink,
		      uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		struct node *n = nodes[i], *up = n;
		uint64_t steps = 0;

		if (atomic_load(&n->nlink) != nlink[i] || (i && !nlink[i]))
			return -EBADMSG;
		if (!S_ISDIR(n->mode))
			continue;
		while (up != nodes[0] && up && steps++ < count)
			up = up->parent;
		if (up != nodes[0])
			return -EBADMSG;
	}
	return 0;
}

/* The nodes of the record, the root (made by tree_init()) first. */
static int tree_parse(struct uzfs *fs, struct in *in, char *why, size_t whylen)
{
	uint64_t count = get_le(in, 8), i;
	struct node **nodes = NULL;
	struct in *names = NULL;
	uint32_t *nlink = NULL;
	int r = 0;

	atomic_store(&fs->next_ino, get_le(in, 8));
	if (in->bad || !count || count > in->left / NODE_MIN + 1)
		return BAD("the tree record's node count is out of bounds");
	nodes = calloc(count, sizeof *nodes);
	names = calloc(count, sizeof *names);
	nlink = calloc(count, sizeof *nlink);
	if (!nodes || !names || !nlink)
		r = -ENOMEM;
	for (i = 0; !r && i < count; i++) {
		nodes[i] = i ? node_new(fs, 0, 0, 0) : fs->root;
		if (!nodes[i]) {
			r = -ENOMEM;
			break;
		}
		if (!i)
			atomic_store(&fs->root->nlink, 2);
		r = read_node(fs, in, nodes[i], &nlink[i], &names[i]);
		if (r == -EBADMSG)
			r = BAD("node %" PRIu64 " of the tree record is bad", i);
	}
	if (!r && (!S_ISDIR(fs->root->mode) || in->left))
		r = BAD("the tree record's root or length is bad");
	for (i = 0; !r && i < count; i++)
		if (S_ISDIR(nodes[i]->mode)) {
			r = link_names(fs, nodes[i], &names[i], nodes, count);
			if (r == -EBADMSG)
				r = BAD("the names of directory node %" PRIu64
					" are bad", i);
		}
	if (!r && tree_check(nodes, nlink, count) < 0)
		r = BAD("the tree record's links do not add up");
	for (i = 0; !r && i < count; i++)
		if (!S_ISDIR(nodes[i]->mode) && nlink[i] > 1)
			atomic_fetch_add(&fs->extra_links, nlink[i] - 1);
	free(nodes);
	free(names);
	free(nlink);
	return r;
}

int tree_load(struct uzfs *fs, char *why, size_t whylen)
{
	uint8_t *rec = NULL;
	uint64_t len = 0, first = 0;
	int r = record_read(fs, &rec, &len, &first, why, whylen);
	struct in in = { rec, (size_t)len, false };

	if (!r)
		r = tree_parse(fs, &in, why, whylen);
	if (!r)
		record_drop(fs, first);
	free(rec);
	return r;
}
