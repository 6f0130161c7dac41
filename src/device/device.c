// SPDX-License-Identifier: MIT
/*
 * device.c - a device's lifetime and configuration: device_create() and
 * uzram_close(), and the calls that only read the device's figures. The
 * I/O path is in store.c; uzram_open() (open.c) checks the config and
 * creates the device here, or has image_open.c do it from an image.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "uzram.h"
#include "base/base.h"
#include "dedup/dedup.h"
#include "device.h"
#include "recompress/recompress.h"
#include "core/core.h"
#include "tier/tier.h"
#include "zcomp/zcomp.h"
#include "zpool/zpool.h"

/* log2 of a valid cluster size (0 means one page), or -1. */
static int cluster_shift(uint32_t bytes)
{
	if (bytes == 0)
		return CLUSTER_MIN_SHIFT;
	for (int shift = CLUSTER_MIN_SHIFT; shift <= CLUSTER_MAX_SHIFT; shift++)
		if (bytes == UINT32_C(1) << shift)
			return shift;
	return -1;
}

/* The config's cluster size as a log2, once it and the size are checked. */
static int geometry_check(const struct uzram_config *c)
{
	int shift;

	if (c->size == 0 || c->size > MAX_PAGES * PAGE)
		return uzram_set_error(-EINVAL,
			"open: size %llu is not between 1 and %llu bytes",
			(unsigned long long)c->size,
			(unsigned long long)(MAX_PAGES * PAGE));
	shift = cluster_shift(c->cluster_size);
	if (shift < 0)
		return uzram_set_error(-EINVAL,
			"open: cluster size %lu is not a power of two from "
			"%u to %u bytes", (unsigned long)c->cluster_size,
			1u << CLUSTER_MIN_SHIFT, 1u << CLUSTER_MAX_SHIFT);
	return shift;
}

int device_tier_open(struct uzram *dev, const char *target, uint64_t flags,
		     unsigned high, unsigned low)
{
	int ret = tier_open(dev, target, flags, high, low);

	if (ret)
		return ret;
	dev->hooks.make_room = tier_make_room;
	dev->hooks.backed_read = tier_read;
	dev->hooks.write_through = tier_write_through;
	dev->hooks.backed_free = tier_free;
	return tier_policy_start(dev);
}

/* A crew thread's start: its codec contexts made at open, not at its first job. */
static int crew_prepare(void *dev)
{
	return store_thread_prepare(dev);
}

/* The threads a config asks for: the write crew, and the tier's. */
static int device_start(struct uzram *dev, const struct uzram_config *c)
{
	int ret;

	if (c->threads) {
		ret = crew_create(c->threads, crew_prepare, dev, &dev->crew);
		if (ret)
			return uzram_set_error(ret, "open: cannot start %lu "
					       "threads: %s",
					       (unsigned long)c->threads,
					       uzram_strerror(ret));
	}
	if (c->fast_algorithm && (ret = reencode_start(dev, c->reencode_age)))
		return ret;
	if (c->backing)
		return device_tier_open(dev, c->backing, c->backing_flags,
					c->high_watermark, c->low_watermark);
	return 0;
}

/*
 * With a fast algorithm, writers take it (priority 0) and the configured
 * algorithm becomes priority 1, what reencode.c's thread re-encodes to.
 */
static int device_codecs(struct uzram *dev, const struct uzram_config *c)
{
	const char *first = c->fast_algorithm ? c->fast_algorithm : c->algorithm;
	int level = c->fast_algorithm ? c->fast_level : c->level;
	struct zcomp *comp = NULL;
	int ret;

	if (c->fast_algorithm && c->dict)
		return uzram_set_error(-EINVAL, "open: a dictionary with a fast "
				       "algorithm (%s) is not supported",
				       c->fast_algorithm);
	ret = zcomp_create_dict(first, level, c->dict, c->dict_size, &comp);
	atomic_store_explicit(&dev->comp[0][0], comp, memory_order_relaxed);
	if (ret)
		return codec_error("open", first, level, c->dict_size, ret);
	if (!c->fast_algorithm)
		return 0;
	comp = NULL;
	ret = zcomp_create(c->algorithm, c->level, &comp);
	atomic_store_explicit(&dev->comp[1][0], comp, memory_order_relaxed);
	if (ret)
		return codec_error("open", c->algorithm, c->level, 0, ret);
	return 0;
}

/* A device of c's geometry (cluster shift `shift`), with no layer yet. */
static struct uzram *device_alloc(const struct uzram_config *c, int shift)
{
	struct uzram *dev = calloc(1, sizeof *dev);
	struct timespec ts;

	if (!dev)
		return NULL;
	dev->size = (c->size + PAGE_MASK) & ~PAGE_MASK;
	dev->cshift = (unsigned)shift;
	dev->csize = (size_t)1 << shift;
	dev->nclusters = (dev->size + dev->csize - 1) >> shift;
	dev->nchunks = (dev->nclusters + CHUNK_SLOTS - 1) >> CHUNK_SHIFT;
	dev->mem_limit = c->mem_limit;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	dev->clock0 = ts.tv_sec;
	pthread_mutex_init(&dev->dict_lock, NULL);
	return dev;
}

/*
 * The layers under the store, bottom up: the codec, the allocator, the
 * dedup index (and its hooks), the slot directory. On an error the caller
 * closes the device, which undoes what was made.
 */
static int device_layers(struct uzram *dev, const struct uzram_config *c,
			 const struct zpool_file *file)
{
	int ret = device_codecs(dev, c);

	if (ret)
		return ret;
	/*
	 * One object per cluster, and during a save one more per cluster at
	 * most: the old objects that writers hand over (image_save.c), each
	 * of which may sit alone in a zspage, so the pool reserves address
	 * space (not memory) for twice as many. A rewrite in flight holds one
	 * more until it frees the old one, which the pool's spares cover.
	 */
	ret = file ? zpool_create_file(2 * dev->nclusters, dev->csize, file,
				       &dev->pool) :
		     zpool_create(2 * dev->nclusters, dev->csize, &dev->pool);
	if (ret)
		return uzram_set_error(ret, "open: cannot create the allocator: %s",
				       uzram_strerror(ret));
	if (c->dedup && (ret = dedup_create(dev)))
		return uzram_set_error(ret, "open: out of memory for the dedup index");
	if (dev->dedup) {
		dev->hooks.share_same = dedup_find;
		dev->hooks.remember = dedup_insert;
		dev->hooks.drop_object = dedup_put;
		dev->hooks.drop_backed = dedup_place_put;
	}
	table_limit_apply(dev);
	dev->dir = calloc(dev->nchunks, sizeof(*dev->dir));
	if (!dev->dir)
		return uzram_set_error(-ENOMEM,
			"open: cannot allocate a slot directory of %llu entries",
			(unsigned long long)dev->nchunks);
	return 0;
}

int device_create(const struct uzram_config *cfg, struct uzram **devp)
{
	return device_create_file(cfg, NULL, devp);
}

int device_create_file(const struct uzram_config *cfg,
		       const struct zpool_file *file, struct uzram **devp)
{
	struct uzram_config c = *cfg;
	struct uzram *dev;
	int ret, shift;

	shift = geometry_check(&c);
	if (shift < 0)
		return shift;
	if (c.threads > UZRAM_MAX_THREADS)
		return uzram_set_error(-EINVAL,
			"open: %lu threads is more than %u",
			(unsigned long)c.threads, UZRAM_MAX_THREADS);
	if (!c.algorithm)
		c.algorithm = "lz4";
	dev = device_alloc(&c, shift);
	if (!dev)
		return uzram_set_error(-ENOMEM, "open: out of memory");
	ret = device_layers(dev, &c, file);
	if (!ret)
		ret = device_start(dev, &c);
	if (ret) {
		uzram_close(dev);
		return ret;
	}
	*devp = dev;
	return 0;
}

UZRAM_API void uzram_close(struct uzram *dev)
{
	if (!dev)
		return;
	reencode_stop(dev);
	crew_destroy(dev->crew);
	tier_close(dev);
	if (dev->table_map)
		munmap(dev->table_map, dev->nchunks * CHUNK_BYTES);
	for (uint64_t i = 0; !dev->table_map && dev->dir && i < dev->nchunks; i++) {
		struct slot *chunk = atomic_load_explicit(&dev->dir[i],
							  memory_order_relaxed);
		if (chunk)
			munmap(chunk, CHUNK_BYTES);
	}
	free(dev->dir);
	zpool_destroy(dev->pool);
	image_lock_release(atomic_load(&dev->image_lock));
	dedup_destroy(dev->dedup);
	for (int i = 0; i <= UZRAM_MAX_RECOMP; i++)
		for (int bank = 0; bank < 2; bank++)
			zcomp_destroy(atomic_load_explicit(&dev->comp[i][bank],
							   memory_order_relaxed));
	dict_retired_free(dev);
	pthread_mutex_destroy(&dev->dict_lock);
	free(dev);
}

UZRAM_API uint64_t uzram_size(const struct uzram *dev)
{
	return dev ? dev->size : 0;
}

UZRAM_API int uzram_keep_info(const struct uzram *dev,
			      struct uzram_keep_info *info)
{
	if (!dev || !info)
		return uzram_set_error(-EINVAL, "keep_info: NULL argument");
	*info = dev->keep;
	return 0;
}

UZRAM_API uint32_t uzram_cluster_size(const struct uzram *dev)
{
	return dev ? (uint32_t)dev->csize : 0;
}

static void lock_figures(struct uzram_stats *st)
{
	struct lock_counts lc;

	lockstat_sum(&lc);
	st->slot_lock_waits = lc.waits[LOCK_SLOT];
	st->slot_lock_wait_ns = lc.wait_ns[LOCK_SLOT];
	st->slot_read_waits = lc.waits[LOCK_SLOT_SHARED];
	st->slot_read_wait_ns = lc.wait_ns[LOCK_SLOT_SHARED];
	st->class_lock_waits = lc.waits[LOCK_CLASS];
	st->class_lock_wait_ns = lc.wait_ns[LOCK_CLASS];
	st->frame_waits = lc.waits[LOCK_FRAME];
	st->frame_wait_ns = lc.wait_ns[LOCK_FRAME];
}

static void refill_figures(struct uzram *dev, struct uzram_stats *st)
{
	struct zpool_refill_stats rs;

	zpool_refill_stats(dev->pool, &rs);
	st->refill_waits = rs.waits;
	st->refill_misses = rs.misses;
	st->refill_wait_ns = rs.wait_ns;
	st->refill_made = rs.made;
	st->refill_target = rs.target;
	st->pool_cached = rs.cached;
}

UZRAM_API int uzram_stats(struct uzram *dev, struct uzram_stats *st,
			  size_t st_size)
{
	struct uzram_stats full;

	if (!dev || !st || !st_size)
		return uzram_set_error(-EINVAL, "stats: NULL argument");
	memset(&full, 0, sizeof full);
	stats_snapshot(&dev->stats, dev->pool, dev->size,
		       atomic_load_explicit(&dev->mem_limit, memory_order_relaxed),
		       table_bytes_only(dev), &full);
	stats_dedup(&dev->stats, &full);
	full.dedup_index_bytes = atomic_load_explicit(&dev->index_bytes,
						      memory_order_relaxed);
	lock_figures(&full);
	refill_figures(dev, &full);
	if (dev->tier) {
		full.bd_capacity = dev->tier->sp.nsegs << SEG_SHIFT;
		full.bd_space = space_used(&dev->tier->sp);
		full.bd_wb_limit = atomic_load(&dev->tier->wb_limit_on) ?
				   atomic_load(&dev->tier->wb_limit) : 0;
	}
	memcpy(st, &full, st_size < sizeof full ? st_size : sizeof full);
	return 0;
}

UZRAM_API int uzram_set_mem_limit(struct uzram *dev, uint64_t bytes)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "set_mem_limit: NULL device");
	atomic_store_explicit(&dev->mem_limit, bytes, memory_order_relaxed);
	table_limit_apply(dev);
	if (dev->tier && bytes)
		tier_kick(dev->tier);   /* the policy looks at the new limit now */
	return 0;
}

UZRAM_API int uzram_reset_mem_used_max(struct uzram *dev)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "reset_mem_used_max: NULL device");
	zpool_reset_max(dev->pool);
	return 0;
}

UZRAM_API int uzram_add_recomp_algorithm(struct uzram *dev,
					 const char *algorithm, int level)
{
	struct zcomp *zc = NULL;
	int ret;

	if (!dev || !algorithm)
		return uzram_set_error(-EINVAL, "add_recomp_algorithm: NULL %s",
				       dev ? "algorithm" : "device");
	ret = zcomp_create(algorithm, level, &zc);
	if (ret)
		return codec_error("add_recomp_algorithm", algorithm, level, 0,
				   ret);
	for (int prio = 1; prio <= UZRAM_MAX_RECOMP; prio++) {
		struct zcomp *none = NULL;

		if (atomic_compare_exchange_strong_explicit(&dev->comp[prio][0],
				&none, zc, memory_order_release,
				memory_order_relaxed))
			return prio;
	}
	zcomp_destroy(zc);
	return uzram_set_error(-ENOSPC, "add_recomp_algorithm: the device "
			       "already has %d secondary algorithms",
			       UZRAM_MAX_RECOMP);
}

UZRAM_API long uzram_compact(struct uzram *dev)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "compact: NULL device");
	return zpool_compact(dev->pool);
}

UZRAM_API const char *uzram_algorithms(void)
{
	return zcomp_known();
}

UZRAM_API const char *uzram_algorithm(const struct uzram *dev, int prio)
{
	const struct zcomp *zc;

	if (!dev || prio < 0 || prio > UZRAM_MAX_RECOMP)
		return NULL;
	zc = atomic_load_explicit(&dev->comp[prio][atomic_load_explicit(
			&dev->cur[prio], memory_order_acquire)],
			memory_order_acquire);
	return zc ? zcomp_name(zc) : NULL;
}
