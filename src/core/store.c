// SPDX-License-Identifier: MIT
/*
 * store.c - the device: a table of slots over the allocator (zpool) and the
 * codec layer (zcomp). This is zram_drv.c's role.
 *
 * The unit of compression is the cluster: cluster_size bytes (a power of
 * two from one 4 KiB page, zram's choice and the default, up to 64 KiB),
 * chosen at open. Each cluster has one slot and is compressed as one
 * object: a larger unit gives the codec more context and a better ratio,
 * at the price of decoding the whole cluster to read any part of it. The
 * device size stays a multiple of a page, so the last cluster may be
 * shorter than the others; it is compressed at its own length.
 *
 *   uzram_read/write/discard/write_zeroes
 *        |  split into clusters; partial clusters are read-modify-written
 *        v
 *   dir: one pointer per 16384 clusters (64 MiB of 4 KiB clusters), NULL
 *   until a cluster in it is written
 *   +------+------+------+-----
 *   |  *   | NULL |  *   | ...
 *   +--+---+------+--+---+-----
 *      v             v
 *   +---------+---------+---------+---------+-----
 *   | slot 0  | slot 1  | slot 2  | slot 3  | ...     a chunk of the slot
 *   | EMPTY   | SAME    | OBJ     | HUGE    |         table: 16384 slots of
 *   +---------+---------+----+----+----+----+-----    16 bytes (see core.h)
 *                            |         |
 *                  handle -> v         v  <- handle
 *                  zpool: compressed objects / raw clusters in zspages
 *
 * The table is sparse, a chunk made by the first write into its range and
 * counted against mem_limit: table.c.
 *
 * Writing a cluster. A whole cluster is classified and compressed into the
 * thread's own buffer and stored in the allocator before the slot is even
 * locked; the slot is then locked only to swap the old contents for the
 * new, and the old object is freed after the unlock. A failed write (no
 * memory) therefore leaves the cluster exactly as it was. A partial cluster
 * holds the slot lock for the whole read-modify-write, so that two partial
 * writes to one cluster cannot lose each other's bytes.
 * A write of at least WRITE_POOL_MIN whole clusters on a device with
 * threads (crew.c) writes them on several threads at once, each
 * cluster as above: a failure leaves each cluster old or new, never torn
 * (uzram.h says which).
 * While uzram_save() runs, the old object of a cluster the save has not
 * copied yet is handed to the save instead of being freed (copy on write,
 * see image_save.c, reached through dev->save_hooks); the write does not
 * wait for the save.
 *
 * Rewriting what is stored. Copies, re-syncs and file systems write back
 * many clusters unchanged, and a compression costs many times what a
 * decode does. So each stored object's slot keeps 16 bits of the cluster's
 * XXH3 hash (a small part of a write's cost; bench/notes.md): a write whose
 * bits differ is new data, and one whose bits match is decoded and compared
 * byte for byte (the bits alone are wrong once in 65536), and stores
 * nothing if equal. A partial write compares the bytes it would change.
 * Not on a swap device (swap_writes()): its writes are new data.
 *
 * Dedup (cfg.dedup): new data of a whole cluster is looked up by its whole
 * XXH3 in dedup.c's index before it is compressed, and a match confirmed
 * byte for byte is stored as a reference to that object; every object is
 * freed through dedup.c (content_free()), which frees it with its last
 * reference. The store reaches dedup and the tier only through dev->hooks
 * (core.h's struct store_hooks), which the device fills in.
 *
 * Reading a cluster takes the slot lock shared, maps the object (pinning it
 * against compaction), decompresses (with the codec that made the object:
 * the device's, or a secondary one after recompress.c re-encoded it)
 * straight into the caller's buffer when
 * the request covers the whole cluster, and unlocks. Partial reads of
 * compressed clusters decode into a per-thread scratch buffer (lz4 only up
 * to the last byte asked for, other codecs all of it) and copy out the
 * part asked for. The read path takes no device-wide lock, allocates
 * nothing once the thread's buffers fit the largest cluster it has used,
 * makes no system call and writes no shared counter (on a device with a
 * re-encoder it stores the time of the last I/O, dev->io_ms, once per
 * coarse clock tick at most: reencode.c's sign that the device is in use).
 *
 * The counters stay in pages (as zram's mm_stat): a cluster of n pages
 * counts n in pages_stored, same_pages and huge_pages.
 *
 * Lock rules:
 *  - a slot's flags and val are protected by that slot's lock (core.h);
 *  - a thread holds at most one slot lock at a time, so there is no order
 *    to respect between slots;
 *  - the allocator and the codec take their own internal locks (or none)
 *    and never call back into the store, so calling them under a slot lock
 *    cannot deadlock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "base/base.h"
#include "core.h"
#include "zcomp/zcomp.h"
#include "zpool/zpool.h"

/* xxhash's functions compiled in here, inlined and private to the library. */
#define XXH_INLINE_ALL
#include <xxhash.h>

/* The part of a request [off, off + len) that falls in one cluster. */
struct span {
	uint64_t idx;  /* the cluster */
	size_t ulen;   /* its length */
	size_t uoff;   /* where the part starts in it */
	size_t n;      /* bytes in the part */
};

static inline struct span span_at(const struct uzram *dev, uint64_t off,
				  uint64_t len)
{
	struct span sp = { .idx = off >> dev->cshift };

	sp.ulen = cluster_len(dev, sp.idx);
	sp.uoff = (size_t)(off & (dev->csize - 1));
	sp.n = len < sp.ulen - sp.uoff ? (size_t)len : sp.ulen - sp.uoff;
	return sp;
}

static void fill64(unsigned char *dst, uint64_t v, size_t uoff, size_t len)
{
	const unsigned char *b = (const unsigned char *)&v;

	if (v == 0) {
		memset(dst, 0, len);
		return;
	}
	for (size_t i = 0; i < len; i++)
		dst[i] = b[(uoff + i) & 7];
}

/*
 * Swap in new contents, stamped with the access time unless a hole; the
 * caller holds the slot lock exclusively.
 */
static struct content slot_swap(struct uzram *dev, struct slot *s,
				const struct content *c)
{
	struct content old = {
		.flags = slot_flags(s), .val = s->val, .bank = -1,
	};

	s->val = c->val;
	slot_set_flags(s, (c->flags & SLOT_STATE_MASK) == SLOT_EMPTY ? c->flags :
			  c->flags | store_clock(dev) << SLOT_STAMP_SHIFT);
	return old;
}

/* Whether a cluster is one 8-byte value repeated; if so, stores it in *val. */
static bool cluster_same(const unsigned char *src, size_t len, uint64_t *val)
{
	memcpy(val, src, sizeof *val);
	return !memcmp(src, src + sizeof *val, len - sizeof *val);
}

/* A cluster's tag from its XXH3, shifted into place in the slot flags (core.h). */
static uint32_t hash_tag(uint64_t hash)
{
	return (uint32_t)(hash >> 48) << SLOT_TAG_SHIFT;
}

/*
 * Compress a cluster of len bytes that is not same-filled and store it in the
 * allocator, raw if it does not compress. Does not touch the table. On
 * failure nothing is allocated.
 */
static int cluster_compress(struct uzram *dev, const unsigned char *src,
			 size_t len, uint32_t tag, struct store_scratch *t,
			 struct content *c)
{
	const void *data = t->cbuf;
	enum slot_state state = SLOT_OBJ;
	uint32_t bank_flag;
	const struct zcomp *zc = comp_at(dev, 0, &bank_flag);
	uint32_t handle, bank = bank_flag;
	int clen, ret;

	clen = zcomp_compress(zc, src, len, t->cbuf, HUGE_LIMIT(len));
	if (clen == -E2BIG) {
		data = src;
		clen = (int)len;
		state = SLOT_HUGE;
		bank = 0;
	} else if (clen < 0) {
		return clen;
	}
	ret = zpool_store(dev->pool, data, (size_t)clen, &handle);
	c->bank = state == SLOT_OBJ ? (bank ? 1 : 0) : -1;
	c->codec = zc;
	if (ret == -ENOSPC && dev->hooks.write_through) {
		ret = dev->hooks.write_through(dev, data, (uint32_t)clen, len,
					       &c->val);
		c->flags = SLOT_BACKED | tag | bank;
		return ret;
	}
	if (ret)
		return ret;
	c->flags = state | tag | bank;
	c->val = (uint64_t)clen << 32 | handle;
	return 0;
}

/*
 * Store a cluster of len bytes that is not same-filled, whose XXH3 is hash:
 * with dedup on, as a reference to an equal whole cluster if one is
 * stored, else compressed and indexed (dedup.c) before any slot names it.
 */
static int cluster_store(struct uzram *dev, const unsigned char *src,
		      size_t len, uint64_t hash, struct store_scratch *t,
		      struct content *c)
{
	bool dedup = dev->hooks.share_same && len == dev->csize;
	int ret;

	if (dedup && dev->hooks.share_same(dev, src, len, hash, t, c))
		return 0;
	ret = cluster_compress(dev, src, len, hash_tag(hash), t, c);
	if (!ret && dedup)
		dev->hooks.remember(dev, c, hash);
	return ret;
}

/* Turn one cluster of len bytes into slot contents (see cluster_store). */
static int cluster_encode(struct uzram *dev, const unsigned char *src,
		       size_t len, struct store_scratch *t, struct content *c)
{
	if (cluster_same(src, len, &c->val)) {
		c->flags = SLOT_SAME;
		c->bank = -1;
		return 0;
	}
	return cluster_store(dev, src, len, XXH3_64bits(src, len), t, c);
}

/*
 * slot_read() (core.h), inlined into uzram_read(), the hot path, and
 * called from everywhere else.
 */
static inline __attribute__((always_inline)) int
slot_read_inline(struct uzram *dev, const struct slot *s, size_t len,
		 size_t uoff, size_t n, unsigned char *dst)
{
	bool whole = n == len;
	struct store_scratch *t = NULL;
	unsigned char *buf = dst;      /* where the whole cluster is decoded */
	const unsigned char *obj;
	int ret;

	switch (slot_state(s)) {
	case SLOT_EMPTY:
		memset(dst, 0, n);
		return 0;
	case SLOT_SAME:
		fill64(dst, s->val, uoff, n);
		return 0;
	case SLOT_HUGE:
		if (slot_size(s) != len)
			return -EIO;
		obj = zpool_map(dev->pool, slot_handle(s));
		memcpy(dst, obj + uoff, n);
		zpool_unmap(dev->pool, obj);
		return 0;
	case SLOT_OBJ:
		if (!whole) {
			t = store_scratch_get(dev->csize);
			if (!t)
				return -ENOMEM;
			buf = t->plain;
		}
		obj = zpool_map(dev->pool, slot_handle(s));
		if (whole)
			ret = zcomp_decompress(comp_of(dev, slot_flags(s)), obj,
					       slot_size(s), dst, len);
		else    /* codecs that decode in order stop after uoff + n */
			ret = zcomp_decompress_prefix(comp_of(dev,
					slot_flags(s)), obj, slot_size(s),
					buf, uoff + n, len);
		zpool_unmap(dev->pool, obj);
		break;
	case SLOT_BACKED:
		t = store_scratch_get(dev->csize);
		if (!t)
			return -ENOMEM;
		if (!whole)
			buf = t->plain;
		ret = dev->hooks.backed_read(dev, s, buf, len, t->cbuf);
		break;
	default:
		return -EIO;
	}
	if (!ret && buf != dst)
		memcpy(dst, buf + uoff, n);
	return ret;
}

int slot_read(struct uzram *dev, const struct slot *s, size_t len,
	      size_t uoff, size_t n, unsigned char *dst)
{
	return slot_read_inline(dev, s, len, uoff, n, dst);
}

/*
 * Whether the codec that made contents c is still the one new objects
 * take. The bank alone would not do: between a writer's compression and
 * its commit, the bank can be refilled with another dictionary and made
 * current again (dict.c); codecs are never freed while the device is
 * open, so the pointer names one codec. The caller holds the slot lock.
 */
static bool codec_current(struct uzram *dev, const struct content *c)
{
	unsigned cur;

	if (c->bank < 0)
		return true;
	cur = atomic_load_explicit(&dev->cur[0], memory_order_acquire);
	return (unsigned)c->bank == cur &&
	       atomic_load_explicit(&dev->comp[0][cur], memory_order_acquire) ==
		       c->codec;
}

/*
 * Swap new contents into cluster idx, whose slot the caller has locked
 * exclusively, and unlock it. The old contents are released, unless a save
 * in progress has not copied the cluster yet: then they are handed to it
 * (image_save.c), which writes them and releases them afterwards.
 */
static void cluster_swap_unlock(struct uzram *dev, struct slot *s, uint64_t idx,
			     const struct content *c, size_t len)
{
	struct content old = slot_swap(dev, s, c);
	const struct save_hooks *save = NULL;
	struct image_save *sv = NULL;

	if (__builtin_expect(atomic_load_explicit(&dev->save,
						  memory_order_acquire) != NULL, 0)) {
		save = atomic_load_explicit(&dev->save_hooks,
					    memory_order_relaxed);
		sv = save->enter(dev, idx);
	}
	slot_unlock(s);
	content_account(dev, c, 1, len);
	if (sv)
		save->hand_over(dev, sv, idx, &old, len);
	else
		content_release(dev, &old, len);
}

/*
 * Swap new contents into cluster idx, whose slot the caller has locked
 * exclusively, and unlock it. Returns false, having changed nothing, if
 * the object was made by a codec that is no longer current (a dictionary
 * change, dict.c): the caller frees it and compresses again. Every write
 * ends here, whether it compressed outside the lock or under it.
 */
static bool cluster_commit_locked(struct uzram *dev, struct slot *s,
			       uint64_t idx, const struct content *c,
			       size_t len)
{
	if (!codec_current(dev, c)) {
		slot_unlock(s);
		return false;
	}
	cluster_swap_unlock(dev, s, idx, c, len);
	return true;
}

/* cluster_commit_locked() for contents made outside the lock. */
static bool cluster_commit(struct uzram *dev, struct slot *s, uint64_t idx,
			const struct content *c, size_t len)
{
	slot_lock(s);
	return cluster_commit_locked(dev, s, idx, c, len);
}

/*
 * A swap device's writes (uzram_set_swap_reads()) are pages the kernel
 * writes out because they changed: one in 30,000 was equal to what its
 * slot held (v33, BENCHMARKS.md), so the check below and the XXH3 tag it
 * needs are skipped there, unless dedup wants the hash anyway.
 */
static bool swap_writes(const struct uzram *dev)
{
	return atomic_load_explicit(&dev->swap_reads, memory_order_relaxed) &&
	       !dev->hooks.share_same;
}

/*
 * Whether the slot already holds exactly the cluster src, whose tag bits
 * (core.h; 0 for a same-filled cluster) are `tag`. The tag, read without the
 * lock, rules out almost every changed cluster; a match is confirmed byte for
 * byte under the shared lock. A concurrent writer may change the slot
 * right after: this write is then ordered before it.
 */
static bool cluster_unchanged(struct uzram *dev, struct slot *s,
			   const unsigned char *src, size_t len, uint32_t tag,
			   struct store_scratch *t)
{
	bool same = false;

	if (slot_tag(slot_flags(s)) != tag || slot_state(s) == SLOT_EMPTY)
		return false;
	slot_lock_shared(s);
	if (slot_tag(slot_flags(s)) == tag && slot_state(s) != SLOT_EMPTY &&
	    !slot_decode(dev, s, t->plain, len) && !memcmp(t->plain, src, len)) {
		same = true;
		slot_touch_at(s, store_clock(dev));
	}
	slot_unlock_shared(s);
	return same;
}

static int cluster_write_full(struct uzram *dev, uint64_t idx,
			   const unsigned char *src, size_t len)
{
	int ret = -ENOMEM;
	struct slot *s = slot_get(dev, idx, &ret);
	struct store_scratch *t = store_scratch_get(dev->csize);
	struct content c = { .bank = -1 };
	uint64_t hash = 0;

	if (!s)
		return ret;
	if (!t)
		return -ENOMEM;
	/* SLOT_SAME, or the tag alone until cluster_store() adds the state;
	 * on a swap device without dedup, no tag: nothing is compared */
	if (cluster_same(src, len, &c.val)) {
		c.flags = SLOT_SAME;
	} else if (!swap_writes(dev)) {
		hash = XXH3_64bits(src, len);
		c.flags = hash_tag(hash);
	}
	if (!swap_writes(dev) &&
	    cluster_unchanged(dev, s, src, len, c.flags >> SLOT_TAG_SHIFT, t)) {
		stats_add(&dev->stats.pages_unchanged, (int64_t)(len >> PAGE_SHIFT));
		return 0;
	}
	if (c.flags == SLOT_SAME) {
		cluster_commit(dev, s, idx, &c, len);
		return 0;
	}
	for (;;) {
		ret = cluster_store(dev, src, len, hash, t, &c);
		if (ret)
			return ret;
		if (cluster_commit(dev, s, idx, &c, len))
			return 0;
		content_free(dev, &c);
	}
}

static bool mem_is_zero(const unsigned char *p, size_t n)
{
	return !n || (p[0] == 0 && !memcmp(p, p + 1, n - 1));
}

/* Write n bytes at uoff of cluster idx; src NULL writes zeros. */
static int cluster_write_part(struct uzram *dev, uint64_t idx, size_t uoff,
			   size_t n, const unsigned char *src)
{
	int ret = -ENOMEM;
	struct slot *s = slot_get(dev, idx, &ret);
	struct store_scratch *t = store_scratch_get(dev->csize);
	size_t len = cluster_len(dev, idx);
	struct content c;

	if (!s)
		return ret;
	if (!t)
		return -ENOMEM;
	for (;;) {
		slot_lock(s);
		if (!src && (slot_state(s) == SLOT_EMPTY ||
			     (slot_state(s) == SLOT_SAME && s->val == 0))) {
			slot_unlock(s);
			return 0;
		}
		ret = slot_decode(dev, s, t->plain, len);
		/* A hole stays a hole only when zeroed; written zeros are data. */
		if (!ret && slot_state(s) != SLOT_EMPTY &&
		    (src ? !memcmp(t->plain + uoff, src, n)
			 : mem_is_zero(t->plain + uoff, n))) {
			slot_touch_at(s, store_clock(dev));
			slot_unlock(s);
			stats_add(&dev->stats.pages_unchanged,
				  (int64_t)(len >> PAGE_SHIFT));
			return 0;
		}
		if (!ret) {
			if (src)
				memcpy(t->plain + uoff, src, n);
			else
				memset(t->plain + uoff, 0, n);
			ret = cluster_encode(dev, t->plain, len, t, &c);
		}
		if (ret) {
			slot_unlock(s);
			return ret;
		}
		if (cluster_commit_locked(dev, s, idx, &c, len))
			return 0;
		content_free(dev, &c);
	}
}

/* Checks shared by every I/O call; counts and explains a bad range. */
static int check_io(struct uzram *dev, const char *what, uint64_t off,
		    uint64_t len)
{
	if (off > dev->size || len > dev->size - off) {
		stats_inc(&dev->stats.invalid_io);
		return uzram_set_error(-ERANGE,
			"%s of %llu bytes at offset %llu is outside the device "
			"of %llu bytes", what, (unsigned long long)len,
			(unsigned long long)off, (unsigned long long)dev->size);
	}
	return 0;
}

/*
 * Count and explain a failed request. A write that fails with -EIO is a
 * failed write too (a backing store refused it, or the old bytes of a
 * partial cluster could not be read for the merge).
 */
static int io_failed(struct uzram *dev, const char *what, int ret,
		     uint64_t off)
{
	if (ret == -ENOSPC || ret == -ENOMEM ||
	    (ret == -EIO && strcmp(what, "read")))
		stats_inc(&dev->stats.failed_writes);
	else if (ret == -EIO)
		stats_inc(&dev->stats.failed_reads);
	return uzram_set_error(ret, "%s at offset %llu: %s", what,
			       (unsigned long long)off, uzram_strerror(ret));
}

UZRAM_API int uzram_read(struct uzram *dev, void *buf, size_t len,
			 uint64_t off)
{
	unsigned char *dst = buf;
	bool swap_reads;
	uint32_t now;
	int ret;

	if (!dev || !buf)
		return uzram_set_error(-EINVAL, "read: NULL %s",
				       dev ? "buffer" : "device");
	ret = check_io(dev, "read", off, len);
	if (ret)
		return ret;
	now = store_clock_io(dev); /* reads slow the re-encoder too */
	swap_reads = atomic_load_explicit(&dev->swap_reads,
					  memory_order_relaxed);
	for (struct span sp; len; dst += sp.n, off += sp.n, len -= sp.n) {
		struct slot *s;

		sp = span_at(dev, off, len);
		s = slot_peek(dev, sp.idx);
		if (!s || slot_state(s) == SLOT_EMPTY) {
			memset(dst, 0, sp.n);
			continue;
		}
		slot_lock_shared(s);
		if (swap_reads)
			slot_cool_at(s, now);
		else
			slot_touch_at(s, now);
		ret = slot_read_inline(dev, s, sp.ulen, sp.uoff, sp.n, dst);
		slot_unlock_shared(s);
		if (ret)
			return io_failed(dev, "read", ret, off);
	}
	return 0;
}

/*
 * The fewest whole clusters a write shares with the pool. Waking a thread
 * costs some microseconds, about one 4 KiB cluster's compression with lz4;
 * 4 is a judgement, not a measured optimum (the bench's writes are 1 MiB).
 */
#define WRITE_POOL_MIN 4

struct write_job {
	struct uzram *dev;
	const unsigned char *src;
	uint64_t idx;
};

static int write_job_one(void *arg, size_t i)
{
	const struct write_job *j = arg;

	return cluster_write_full(j->dev, j->idx + i,
			       j->src + (i << j->dev->cshift), j->dev->csize);
}

/* What the device's owner runs before each write (uzram_set_write_hook()). */
static void write_hook_run(struct uzram *dev)
{
	void (*fn)(void *) = atomic_load_explicit(&dev->write_hook,
						  memory_order_acquire);

	if (fn)
		fn(atomic_load_explicit(&dev->write_hook_arg,
					memory_order_relaxed));
}

UZRAM_API int uzram_set_write_hook(struct uzram *dev, void (*fn)(void *arg),
				   void *arg)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "set_write_hook: NULL device");
	atomic_store_explicit(&dev->write_hook, NULL, memory_order_relaxed);
	atomic_store_explicit(&dev->write_hook_arg, arg, memory_order_relaxed);
	atomic_store_explicit(&dev->write_hook, fn, memory_order_release);
	return 0;
}

UZRAM_API int uzram_write(struct uzram *dev, const void *buf, size_t len,
			  uint64_t off)
{
	const unsigned char *src = buf;
	int ret;

	if (!dev || !buf)
		return uzram_set_error(-EINVAL, "write: NULL %s",
				       dev ? "buffer" : "device");
	ret = check_io(dev, "write", off, len);
	if (ret)
		return ret;
	write_hook_run(dev);
	if (dev->reenc) { /* writes arrive: the re-encoder slows (reencode.c) */
		stats_inc(&dev->writes);
		(void)store_clock_io(dev);
	}
	for (struct span sp; len; src += sp.n, off += sp.n, len -= sp.n) {
		size_t whole = len >> dev->cshift, failed;

		sp = span_at(dev, off, len);
		if (sp.uoff == 0 && whole >= WRITE_POOL_MIN && dev->crew) {
			struct write_job j = { dev, src, sp.idx };

			ret = crew_for(dev->crew, whole, write_job_one,
					  &j, &failed);
			if (ret)
				return io_failed(dev, "write", ret,
						 off + (failed << dev->cshift));
			sp.n = whole << dev->cshift;
			continue;
		}
		if (sp.n == sp.ulen)
			ret = cluster_write_full(dev, sp.idx, src, sp.ulen);
		else
			ret = cluster_write_part(dev, sp.idx, sp.uoff, sp.n, src);
		if (ret)
			return io_failed(dev, "write", ret, off);
	}
	return 0;
}

static int zero_range(struct uzram *dev, const char *what, uint64_t len,
		      uint64_t off, enum slot_state whole)
{
	const struct content c = { .flags = whole, .bank = -1 };
	const uint64_t chunk_span = CHUNK_SLOTS << dev->cshift;
	int ret = check_io(dev, what, off, len);

	if (ret)
		return ret;
	while (len) {
		struct span sp = span_at(dev, off, len);
		struct slot *s = slot_peek(dev, sp.idx);
		uint64_t n = sp.n;

		if (whole == SLOT_EMPTY && !s) {
			/* a chunk never written: skip to its end */
			uint64_t left = chunk_span - (off & (chunk_span - 1));

			n = len < left ? len : left;
		} else if (whole == SLOT_EMPTY && slot_state(s) == SLOT_EMPTY) {
			/* nothing to drop, and no table page to fault in */
		} else if (n == sp.ulen) {
			s = slot_get(dev, sp.idx, &ret);
			if (!s)
				return io_failed(dev, what, ret, off);
			cluster_commit(dev, s, sp.idx, &c, sp.ulen);
		} else {
			ret = cluster_write_part(dev, sp.idx, sp.uoff, sp.n, NULL);
			if (ret)
				return io_failed(dev, what, ret, off);
		}
		off += n;
		len -= n;
	}
	return 0;
}

UZRAM_API int uzram_discard(struct uzram *dev, size_t len, uint64_t off)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "discard: NULL device");
	return zero_range(dev, "discard", len, off, SLOT_EMPTY);
}

UZRAM_API int uzram_write_zeroes(struct uzram *dev, size_t len, uint64_t off,
				 unsigned flags)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "write_zeroes: NULL device");
	if (flags & ~(unsigned)UZRAM_ZERO_NO_HOLE)
		return uzram_set_error(-EINVAL, "write_zeroes: unknown flags %#x",
				       flags);
	write_hook_run(dev);
	return zero_range(dev, "write_zeroes", len, off,
			  flags & UZRAM_ZERO_NO_HOLE ? SLOT_SAME : SLOT_EMPTY);
}

static unsigned cluster_status(struct uzram *dev, uint64_t idx)
{
	struct slot *s = slot_peek(dev, idx);
	enum slot_state state;
	uint64_t val;

	if (!s || slot_state(s) == SLOT_EMPTY)
		return UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO;
	slot_lock_shared(s);
	state = slot_state(s);
	val = s->val;
	slot_unlock_shared(s);
	if (state == SLOT_EMPTY)
		return UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO;
	if (state == SLOT_SAME && val == 0)
		return UZRAM_STATUS_ZERO;
	return 0;
}

UZRAM_API int uzram_block_status(struct uzram *dev, uint64_t off, uint64_t len,
				 uint64_t *run, unsigned *flags)
{
	const unsigned shift = dev ? dev->cshift : 0;
	uint64_t pos, end;
	unsigned first;
	int ret;

	if (!dev || !run || !flags || !len)
		return uzram_set_error(-EINVAL, "block_status: %s",
				       len ? "NULL argument" : "zero length");
	ret = check_io(dev, "block_status", off, len);
	if (ret)
		return ret;
	end = off + len;
	first = cluster_status(dev, off >> shift);
	pos = ((off >> shift) + 1) << shift;
	while (pos < end) {
		uint64_t idx = pos >> shift;

		if (first == (UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO) &&
		    !atomic_load_explicit(&dev->dir[idx >> CHUNK_SHIFT],
					  memory_order_acquire)) {
			pos = ((idx >> CHUNK_SHIFT) + 1) << (CHUNK_SHIFT + shift);
			continue;
		}
		if (cluster_status(dev, idx) != first)
			break;
		pos += dev->csize;
	}
	*run = (pos < end ? pos : end) - off;
	*flags = first;
	return 0;
}
