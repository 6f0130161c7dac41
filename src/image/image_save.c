// SPDX-License-Identifier: MIT
/*
 * image_save.c - uzram_save(): write a device to an image file, as stored
 * (the format is in image.h and image-format.md), while it serves reads
 * and writes.
 *
 * A point-in-time copy without stopping writers. The save walks the page
 * table once, in cluster order, and copies each stored cluster's object
 * into the block it is building, under the slot lock taken shared (readers
 * share it; a writer of that one cluster waits for one memcpy). Writers do
 * not wait for the save: one that replaces or discards a cluster the walk
 * has not reached hands the old contents over instead of freeing them
 * (copy on write at the cluster), and the save writes them after the walk.
 * What decides who owns a cluster's old contents is one bit per cluster:
 *
 *   done  |0|0|1|1|1|0|0|0|1| ...      set by whoever gets it first:
 *          ^     ^                      the walk, when it copies the
 *          |     a writer's hand-over   cluster (shared slot lock), or a
 *          not reached, not written     writer swapping it (exclusive lock)
 *
 * Both test and set it with an atomic OR under the slot lock, so for each
 * cluster exactly one of them records what it held when the save began:
 * the walk copies the current contents if the bit was clear, and a writer
 * that finds it clear keeps the old object alive and queues it on the
 * save's list (sv->held). A hole needs no record: a writer that fills a
 * hole the walk has not reached sets the bit and queues nothing, and the
 * walk then skips the cluster. Holes are read without the lock, as reads
 * do: a cluster that is empty when the walk passes was empty at some
 * moment after the save began, which is all a concurrent write may expect.
 *
 * The instant of the copy is when dev->save is published: every write that
 * finished before uzram_save() was called is in the image, none that
 * started after it is. A write in flight then may or may not be.
 *
 * Ending a save. A writer reads dev->save without a lock, so the save must
 * not be freed while a writer may still use it: a writer that saw it set
 * counts itself in dev->save_users (an atomic add, then it reads dev->save
 * again), and the save, once its walk is done, clears dev->save and waits
 * for save_users to drop to zero before it takes the list. Both sides use
 * sequentially consistent operations, so either the writer sees NULL or the
 * save sees the writer (Dekker's pattern). The wait is as long as one
 * writer's hand-over: a malloc and a list push. Only the first check of
 * dev->save is on every write's path, a load (acquire, a plain load on
 * x86) of a word that only changes at a save's start and end. The store
 * reaches the two functions below through dev->save_hooks (core.h's
 * struct save_hooks), which a save sets before it publishes dev->save.
 *
 * The old contents a writer hands over are counted out of the figures at
 * once (the device no longer holds them) but stay in the allocator, so
 * mem_used_total shows them, until the save has written and freed them:
 * a device rewritten during a save may hold up to twice its memory, and
 * a write may meet the memory limit sooner. If a hand-over cannot get
 * memory for its list entry it frees the old object and the save fails
 * with -ENOMEM: an image is complete or it is not written.
 *
 * Codecs: the header names every codec bank of every priority, with its
 * dictionary, as the save began. A dictionary change (dict.c) or a new
 * secondary algorithm during the save may make objects with a codec the
 * header does not name; the save then fails with -EAGAIN rather than
 * write an image that would not decode.
 *
 * Crash safety: the image goes to a temporary file in the same directory
 * (mkostemp), is fsync()ed, renamed over path, and the directory is
 * fsync()ed, so path names the old image or the new one, whole, at every
 * instant. A kill -9 leaves the temporary file behind (path.tmp.XXXXXX);
 * any error removes it.
 *
 * Lock rules: the walk holds one slot lock at a time, shared, and calls the
 * allocator under it (as reads do); sv->lock guards sv->held and sv->err
 * and is never taken under a slot lock. One save at a time per device
 * (dev->save is claimed with a compare-and-swap).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uzram.h"
#include "dedup/dedup.h"
#include "base/base.h"
#include "image.h"
#include "core/core.h"
#include "device/device.h"
#include "tier/tier.h"
#include "zcomp/zcomp.h"
#include "zpool/zpool.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define WRITEBACK_STEP (8u << 20)

/* Old contents a writer handed over. */
struct held {
	struct held *next;
	uint64_t idx;
	struct content c;
};

struct image_save {
	_Atomic uint64_t *done;  /* one bit per cluster, see the top */
	uint64_t *map;           /* the same memory, to free it */
	pthread_mutex_t lock;
	struct held *held;       /* under lock */
	int err;                 /* under lock: a hand-over that failed */
};

/* The file being written and the block being built. */
struct writer {
	int fd;
	const char *path;        /* the temporary file, for messages */
	unsigned char *buf;      /* head, payload, room for one more record */
	size_t len;              /* bytes of head and payload in buf */
	uint32_t nrec;           /* records in the block */
	uint64_t seed;           /* the header's checksum */
	uint64_t blocks, records;
	/* the codecs the header names, [prio][bank] as when the save began */
	const struct zcomp *codec[IMG_CODECS];
	uint64_t written;        /* bytes of the file so far */
	uint64_t flushed;        /* of which write-back was started */
	struct dedup_saved *shared; /* shared objects written (dedup.h) */
};

uint64_t img_sum(const void *p, size_t n, uint64_t seed)
{
	return XXH3_64bits_withSeed(p, n, seed);
}

/* Set cluster idx's bit; whether it was set already. */
static bool done_claim(_Atomic uint64_t *done, uint64_t idx)
{
	uint64_t bit = UINT64_C(1) << (idx & 63);

	return atomic_fetch_or_explicit(&done[idx >> 6], bit,
					memory_order_relaxed) & bit;
}

/*
 * The write path's side of a save, through save_hooks. A writer that holds
 * cluster idx's lock exclusively and has swapped new contents in, while
 * dev->save was seen non-NULL, calls image_save_enter(): a non-NULL return
 * means the save had not copied the cluster yet and now counts on the
 * writer for the old contents, which the writer passes, after unlocking,
 * to image_save_hand_over() instead of releasing them.
 */
static struct image_save *image_save_enter(struct uzram *dev, uint64_t idx)
{
	struct image_save *sv;

	atomic_fetch_add(&dev->save_users, 1);
	sv = atomic_load(&dev->save);
	if (sv && !done_claim(sv->done, idx))
		return sv;
	atomic_fetch_sub_explicit(&dev->save_users, 1, memory_order_release);
	return NULL;
}

static void image_save_hand_over(struct uzram *dev, struct image_save *sv,
				 uint64_t idx, const struct content *old,
				 size_t len)
{
	struct held *h = NULL;

	if ((old->flags & SLOT_STATE_MASK) != SLOT_EMPTY) {
		h = malloc(sizeof *h);
		pthread_mutex_lock(&sv->lock);
		if (h) {
			*h = (struct held){ sv->held, idx, *old };
			sv->held = h;
		} else {
			sv->err = -ENOMEM;
		}
		pthread_mutex_unlock(&sv->lock);
		if (h)
			content_account(dev, old, -1, len);
		else
			content_release(dev, old, len);
	}
	atomic_fetch_sub_explicit(&dev->save_users, 1, memory_order_release);
}

static const struct save_hooks save_hooks = {
	.enter = image_save_enter,
	.hand_over = image_save_hand_over,
};

static int write_all(struct writer *w, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t r = write(w->fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return uzram_set_error(-errno, "save: cannot write %s: %s",
					       w->path, strerror(errno));
		p += r;
		n -= (size_t)r;
		w->written += (uint64_t)r;
	}
	/*
	 * Start the disk's write-back of what is written every few MiB, so
	 * that it runs while the walk goes on and the final fsync() finds
	 * little left to do (a hint: errors show at the fsync).
	 */
	if (w->written - w->flushed >= WRITEBACK_STEP) {
		(void)sync_file_range(w->fd, (off_t)w->flushed,
				      (off_t)(w->written - w->flushed),
				      SYNC_FILE_RANGE_WRITE);
		w->flushed = w->written;
	}
	return 0;
}

/* Write the block built so far, if it holds a record, and start another. */
static int block_flush(struct writer *w)
{
	unsigned char *b = w->buf;
	int ret;

	if (!w->nrec)
		return 0;
	img_put32(b + IMG_B_MAGIC, IMG_BLOCK_MAGIC);
	img_put32(b + IMG_B_RECORDS, w->nrec);
	img_put32(b + IMG_B_PAYLOAD, (uint32_t)(w->len - IMG_BLOCK_HEAD));
	img_put32(b + IMG_B_RESERVED, 0);
	img_put64(b + w->len, img_sum(b, w->len, w->seed));
	ret = write_all(w, b, w->len + IMG_SUM_LEN);
	w->blocks++;
	w->records += w->nrec;
	w->len = IMG_BLOCK_HEAD;
	w->nrec = 0;
	return ret;
}

/* Append one record; the caller flushes when the block is full. */
static void record_put(struct writer *w, uint64_t idx, uint32_t flags,
		       const void *data, uint32_t size)
{
	unsigned char *r = w->buf + w->len;

	img_put64(r, idx);
	img_put32(r + 8, flags);
	img_put32(r + 12, size);
	memcpy(r + IMG_RECORD_HEAD, data, size);
	w->len += IMG_RECORD_HEAD + size;
	w->nrec++;
}

static int block_maybe_flush(struct writer *w)
{
	return w->len - IMG_BLOCK_HEAD >= IMG_BLOCK_TARGET ? block_flush(w) : 0;
}

/*
 * A cluster on the backing store goes into the image as the object it is,
 * read back as stored: compressed (SLOT_OBJ) or raw (SLOT_HUGE), its other
 * bits kept. An image holds everything; it does not refer to a backing
 * store, which may be gone or rewritten when the image is opened.
 */
static int backed_put(struct uzram *dev, struct writer *w, uint64_t idx,
		      uint32_t flags, uint64_t val)
{
	size_t len = cluster_len(dev, idx);
	uint32_t size = backed_size(val);
	struct store_scratch *t = store_scratch_get(dev->csize);
	enum slot_state state = size == len ? SLOT_HUGE : SLOT_OBJ;
	unsigned char ref[8];
	uint64_t first;
	int ret = dedup_saved_find_place(dev, &w->shared, flags,
					 backed_off(val), size, idx, &first);

	if (ret > 0) {
		img_put64(ref, first);
		record_put(w, idx, (flags & ~SLOT_STATE_MASK) | state, ref,
			   sizeof ref);
		return 0;
	}
	if (!t || ret < 0)
		return uzram_set_error(-ENOMEM, "save: out of memory");
	if (!size || size > len ||
	    backing_pread(dev->tier->b, t->cbuf, size, backed_off(val))) {
		stats_inc(&dev->stats.bd_failed_reads);
		return uzram_set_error(-EIO, "save: cannot read cluster %llu "
				       "back from the backing store",
				       (unsigned long long)idx);
	}
	flags = (flags & ~SLOT_STATE_MASK) | state;
	if (state == SLOT_OBJ && comp_of(dev, flags) !=
	    w->codec[slot_prio(flags) * 2 + slot_bank(flags)])
		return uzram_set_error(-EAGAIN, "save: an algorithm or a "
				       "dictionary was set during the save; "
				       "save again");
	record_put(w, idx, flags & ~SLOT_SHARED, t->cbuf, size);
	return 0;
}

/*
 * Record the object of cluster idx, mapped while copied; a shared object
 * that a record of this save holds already is recorded as a reference to
 * that record's cluster (image-format.md).
 */
static int object_put(struct uzram *dev, struct writer *w, uint64_t idx,
		      uint32_t flags, uint32_t handle, uint32_t size)
{
	unsigned char ref[8];
	const void *obj;
	uint64_t first;
	int ret = dedup_saved_find(dev, &w->shared, flags, handle, size, idx,
				   &first);

	if (ret < 0)
		return uzram_set_error(ret, "save: out of memory");
	if (ret) {
		img_put64(ref, first);
		record_put(w, idx, flags | SLOT_SHARED, ref, sizeof ref);
		return 0;
	}
	obj = zpool_map(dev->pool, handle);
	record_put(w, idx, flags & ~SLOT_SHARED, obj, size);
	zpool_unmap(dev->pool, obj);
	return 0;
}

/* Record contents c of cluster idx; objects are mapped while copied. */
static int content_put(struct uzram *dev, struct writer *w, uint64_t idx,
		       uint32_t flags, uint64_t val)
{
	uint32_t handle = (uint32_t)val, size = (uint32_t)(val >> 32);
	enum slot_state state = (enum slot_state)(flags & SLOT_STATE_MASK);

	switch (state) {
	case SLOT_EMPTY:
		return 0;
	case SLOT_SAME:
		/* the 8 bytes as they repeat in the cluster */
		record_put(w, idx, flags, &val, sizeof val);
		return 0;
	case SLOT_OBJ:
	case SLOT_HUGE:
		/* made by a codec (or dictionary) set after the header */
		if (state == SLOT_OBJ && comp_of(dev, flags) !=
		    w->codec[slot_prio(flags) * 2 + slot_bank(flags)])
			return uzram_set_error(-EAGAIN, "save: an algorithm or "
					       "a dictionary was set during the "
					       "save; save again");
		return object_put(dev, w, idx, flags, handle, size);
	case SLOT_BACKED:
		return backed_put(dev, w, idx, flags, val);
	}
	return uzram_set_error(-EIO, "save: cluster %llu is in state %u, "
			       "which images do not hold",
			       (unsigned long long)idx, flags & SLOT_STATE_MASK);
}

/* Copy cluster idx unless a writer handed its old contents over. */
static int slot_save(struct uzram *dev, struct image_save *sv,
		     struct writer *w, struct slot *s, uint64_t idx)
{
	int ret = 0;

	slot_lock_shared(s);
	if (!done_claim(sv->done, idx))
		ret = content_put(dev, w, idx, slot_flags(s), s->val);
	slot_unlock_shared(s);
	return ret ? ret : block_maybe_flush(w);
}

/*
 * End the save's life as writers see it; then write (if all went well so
 * far) and free what they handed over. Returns ret or the first error.
 */
static int save_finish(struct uzram *dev, struct image_save *sv,
		       struct writer *w, int ret)
{
	struct held *h, *next;

	atomic_store(&dev->save, NULL);
	while (atomic_load(&dev->save_users))
		sched_yield();
	if (!ret && sv->err)
		ret = uzram_set_error(sv->err, "save: out of memory for what "
				      "a write replaced during the save");
	for (h = sv->held; h; h = next) {
		enum slot_state st = (enum slot_state)(h->c.flags &
						       SLOT_STATE_MASK);

		next = h->next;
		if (!ret)
			ret = content_put(dev, w, h->idx, h->c.flags, h->c.val);
		if (!ret)
			ret = block_maybe_flush(w);
		if (st == SLOT_OBJ || st == SLOT_HUGE)
			content_free(dev, &h->c);
		free(h);
	}
	sv->held = NULL;
	return ret;
}

/*
 * Write the header: the geometry, every codec bank with its dictionary,
 * and the checksum of it all, which seeds the blocks' (w->seed).
 */
static int header_write(struct uzram *dev, struct writer *w)
{
	unsigned char h[IMG_H_DICTS] = { 0 }, sum[IMG_SUM_LEN];
	const void *dict[IMG_CODECS];
	size_t dict_len[IMG_CODECS], total = IMG_HEADER_MIN;
	uint32_t cur = 0;
	XXH3_state_t st;
	int ret;

	for (unsigned i = 0; i < IMG_CODECS; i++) {
		const struct zcomp *zc = atomic_load_explicit(
			&dev->comp[i / 2][i % 2], memory_order_acquire);
		unsigned char *c = h + IMG_H_CODECS + i * IMG_CODEC_LEN;

		w->codec[i] = zc;
		dict[i] = NULL;
		dict_len[i] = 0;
		if (!zc)
			continue;
		strncpy((char *)c, zcomp_name(zc), IMG_CODEC_NAME - 1);
		img_put32(c + IMG_CODEC_LEVEL, (uint32_t)zcomp_level(zc));
		dict[i] = zcomp_dict(zc, &dict_len[i]);
		img_put32(c + IMG_CODEC_DICT, (uint32_t)dict_len[i]);
		total += dict_len[i];
	}
	for (unsigned prio = 0; prio <= UZRAM_MAX_RECOMP; prio++)
		if (atomic_load_explicit(&dev->cur[prio], memory_order_acquire))
			cur |= 1u << prio;
	memcpy(h + IMG_H_MAGIC, IMG_MAGIC, 8);
	img_put32(h + IMG_H_VERSION, IMG_VERSION);
	img_put32(h + IMG_H_HEADER_LEN, (uint32_t)total);
	img_put64(h + IMG_H_SIZE, dev->size);
	img_put32(h + IMG_H_CLUSTER, (uint32_t)dev->csize);
	img_put32(h + IMG_H_CUR, cur);
	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, h, sizeof h);
	ret = write_all(w, h, sizeof h);
	for (unsigned i = 0; !ret && i < IMG_CODECS; i++) {
		if (!dict_len[i])
			continue;
		XXH3_64bits_update(&st, dict[i], dict_len[i]);
		ret = write_all(w, dict[i], dict_len[i]);
	}
	w->seed = XXH3_64bits_digest(&st);
	img_put64(sum, w->seed);
	return ret ? ret : write_all(w, sum, sizeof sum);
}

/* Walk the table and write header, blocks and trailer to w->fd. */
static int save_walk(struct uzram *dev, struct image_save *sv,
		     struct writer *w)
{
	unsigned char t[IMG_TRAILER_LEN] = { 0 };
	struct slot *s;
	int ret;

	ret = header_write(dev, w);
	w->len = IMG_BLOCK_HEAD;
	for (uint64_t idx = 0; !ret && (s = slot_next(dev, &idx)); idx++)
		if (slot_state(s) != SLOT_EMPTY)
			ret = slot_save(dev, sv, w, s, idx);
	ret = save_finish(dev, sv, w, ret);
	if (!ret)
		ret = block_flush(w);
	if (ret)
		return ret;
	img_put32(t + IMG_T_MAGIC, IMG_TRAILER_MAGIC);
	img_put64(t + IMG_T_BLOCKS, w->blocks);
	img_put64(t + IMG_T_RECORDS, w->records);
	img_put64(t + IMG_T_SUM, img_sum(t, IMG_T_SUM, w->seed));
	return write_all(w, t, sizeof t);
}

static int sys_fail(const char *what, const char *path)
{
	return uzram_set_error(-errno, "save: cannot %s %s: %s", what, path,
			       strerror(errno));
}

/* fsync the directory that holds path, so a rename in it is durable. */
static int dir_sync(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	int fd, ret = 0;

	if (!slash)
		strcpy(dir, ".");
	else if (n == 0)
		strcpy(dir, "/");
	else {
		memcpy(dir, path, n);
		dir[n] = '\0';
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		ret = sys_fail("sync the directory", dir);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Write the image to fd, the temporary file tmp, and sync it. */
static int save_to(struct uzram *dev, struct image_save *sv, int fd,
		   const char *tmp)
{
	struct writer w = { .fd = fd, .path = tmp };
	int ret;

	w.buf = malloc(IMG_BLOCK_HEAD + IMG_PAYLOAD_MAX + IMG_SUM_LEN);
	if (!w.buf) {
		ret = uzram_set_error(-ENOMEM, "save: out of memory");
		return save_finish(dev, sv, &w, ret);
	}
	ret = save_walk(dev, sv, &w);
	dedup_saved_free(dev, w.shared);
	free(w.buf);
	if (!ret && fsync(fd) < 0)
		ret = sys_fail("sync", tmp);
	return ret;
}

UZRAM_API int uzram_save(struct uzram *dev, const char *path, unsigned flags)
{
	struct image_save *sv, *none = NULL;
	struct image_lock *lock = NULL;
	char tmp[PATH_MAX];
	int fd, ret;

	if (!dev || !path)
		return uzram_set_error(-EINVAL, "save: NULL %s",
				       dev ? "path" : "device");
	if (flags)
		return uzram_set_error(-EINVAL, "save: unknown flags %#x",
				       flags);
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >=
	    sizeof tmp)
		return uzram_set_error(-ENAMETOOLONG, "save: path too long: "
				       "%s", path);
	/* The device's own image, or a path no other device holds. */
	if (!image_lock_covers(atomic_load(&dev->image_lock), path)) {
		ret = image_lock_acquire(path, "save", &lock);
		if (ret)
			return ret;
	}
	sv = calloc(1, sizeof *sv);
	if (sv)
		sv->map = calloc((dev->nclusters + 63) / 64, sizeof(uint64_t));
	if (!sv || !sv->map) {
		free(sv);
		image_lock_release(lock);
		return uzram_set_error(-ENOMEM, "save: out of memory for a "
				       "map of %llu clusters",
				       (unsigned long long)dev->nclusters);
	}
	sv->done = (_Atomic uint64_t *)sv->map;
	pthread_mutex_init(&sv->lock, NULL);
	/* before dev->save: a writer that sees the save finds its hooks */
	atomic_store_explicit(&dev->save_hooks, &save_hooks,
			      memory_order_release);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = sys_fail("create", tmp);
	} else if (!atomic_compare_exchange_strong(&dev->save, &none, sv)) {
		ret = uzram_set_error(-EALREADY, "save: a save of this device "
				      "is already in progress");
	} else {
		ret = save_to(dev, sv, fd, tmp);
	}
	if (fd >= 0 && close(fd) < 0 && !ret)
		ret = sys_fail("close", tmp);
	if (fd >= 0 && !ret && rename(tmp, path) < 0)
		ret = sys_fail("rename the new image to", path);
	if (fd >= 0 && ret)
		unlink(tmp);
	if (!ret)
		ret = dir_sync(path);
	pthread_mutex_destroy(&sv->lock);
	free(sv->map);
	free(sv);
	image_lock_release(lock);
	return ret;
}
