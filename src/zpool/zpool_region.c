// SPDX-License-Identifier: MIT
/*
 * zpool_region.c - the pool's address space and size classes.
 *
 * Address space. Three reservations are made at create, all with
 * MAP_NORESERVE and MADV_NOHUGEPAGE, so untouched parts cost nothing:
 *
 *   region       nframes * 64 KiB   zspage data, one zspage per frame
 *   frame table  nframes * 16 bytes pin, free link, descriptor per frame
 *   cells        ncells * 8 bytes   the handle table
 *
 * nframes covers the worst case without compaction (every object of 16
 * bytes or more alone in a zspage), capped at 32 TiB and halved while mmap
 * refuses. Frames are handed out by zpool_frame.c; the region never
 * fragments because every frame is alike.
 *
 * With zpool_create_file() the three parts are mapped from a file
 * instead (a kept store, src/device/keep.c): same sizes, never halved,
 * MAP_SHARED, one after the other at ZPOOL_FILE_ALIGN.
 *
 * Size classes: see pick_pages() and classes_init().
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "zpool_impl.h"

/* ---- address space ---- */

/* Map *count units, halving *count on failure down to min. */
static void *reserve(uint64_t *count, uint64_t min, size_t unit)
{
	for (;;) {
		size_t len = (size_t)(*count * unit);
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p != MAP_FAILED) {
			/* huge pages would make RSS jump by 2 MiB at a time */
			madvise(p, len, MADV_NOHUGEPAGE);
			return p;
		}
		if (*count / 2 < min)
			return NULL;
		*count /= 2;
	}
}

/* ---- create and destroy ---- */

/* glibc: an 8-byte chunk header, rounded to 16 */
static uint32_t desc_malloc_bytes(size_t desc)
{
	return (uint32_t)((desc + 8 + 15) & ~(size_t)15);
}

/*
 * A zspage's descriptor lives in the zspage's tail, after the last object,
 * when the tail is big enough: it then costs nothing (the tail would be
 * wasted), and it is resident exactly as long as the zspage's pages are.
 * Object offsets are multiples of 16, so the descriptor is aligned.
 */
static bool desc_fits(uint32_t size, uint32_t pages, uint32_t objs)
{
	return (uint64_t)pages * PAGE - (uint64_t)objs * size >=
	       sizeof(struct zspage) + objs * sizeof(uint32_t);
}

/*
 * The zspage length for objects of `size`: of 1..16 pages, the one that
 * minimises what PICK_OBJS objects of the class waste at zspage tails and
 * in malloc'ed descriptors (none when the descriptor fits the tail), plus
 * half a zspage, the expected waste of the class's one partly filled
 * zspage. Long zspages waste less at the tail; short ones make that partly
 * filled zspage cheaper. Over the lz4 pages of a 512 MiB tar (130k objects)
 * and a 178 MiB core (45k objects), 512 did best of 256, 384 and 512, and
 * 256 did better than 128 and 1024 and than the old rule (the shortest
 * length within 1 point of the least waste; 0.24 MiB more on each).
 */
static uint32_t pick_pages(uint32_t size, uint32_t *objs)
{
	uint64_t best = UINT64_MAX;
	uint32_t best_p = 1;

	/*
	 * Sizes that tile a page (16, 32, ... 4096) waste no tail at any
	 * length: a longer zspage would only share out a malloc'ed descriptor
	 * (under 1%), and would make every rewrite of incompressible pages
	 * fault in, and compact, several pages instead of one.
	 */
	for (uint32_t p = 1; p <= ZP_MAX_PAGES && PAGE % size; p++) {
		uint32_t span = p * PAGE, n = span / size;
		uint64_t waste, cost;

		if (!n)
			continue;
		waste = span - n * size;
		if (!desc_fits(size, p, n))
			waste += desc_malloc_bytes(sizeof(struct zspage) +
						   n * sizeof(uint32_t));
		cost = waste * PICK_OBJS / n + span / 2;
		if (cost < best) {
			best = cost;
			best_p = p;
		}
	}
	*objs = best_p * PAGE / size;
	return best_p;
}

static int classes_init(struct zpool *pool)
{
	uint32_t cand[ZP_MAX_CANDIDATES], map[ZP_MAX_CANDIDATES];
	uint32_t size[ZP_MAX_CANDIDATES], pages[ZP_MAX_CANDIDATES];
	uint32_t objs[ZP_MAX_CANDIDATES];
	uint32_t max = (uint32_t)pool->max_object, n = 0, k = 0, s;
	size_t nidx = max / ZP_ALIGN + 1;
	uint16_t *idx;

	for (s = ZP_ALIGN; s <= max && s <= ZP_FINE_LIMIT; s += ZP_ALIGN)
		cand[n++] = s;
	for (s = cand[n - 1]; s < max;) {
		uint32_t step = (s / 64) & ~(ZP_ALIGN - 1);

		s += step > ZP_ALIGN ? step : ZP_ALIGN;
		cand[n++] = s < max ? s : max;
		assert(n < ZP_MAX_CANDIDATES);
	}
	/* from the top: a size whose zspages look like the next class's joins it */
	for (uint32_t i = n; i-- > 0;) {
		uint32_t o, p = pick_pages(cand[i], &o);

		if (!k || pages[k - 1] != p || objs[k - 1] != o) {
			size[k] = cand[i];
			pages[k] = p;
			objs[k] = o;
			k++;
		}
		map[i] = k - 1;
	}
	pool->classes = aligned_alloc(64, k * sizeof(*pool->classes));
	idx = calloc(nidx, sizeof(*idx));
	if (!pool->classes || !idx) {
		free(idx);
		return -ENOMEM;
	}
	memset(pool->classes, 0, k * sizeof(*pool->classes));
	for (uint32_t i = 0; i < k; i++) {
		struct size_class *c = &pool->classes[i];
		uint32_t j = k - 1 - i;
		size_t desc = sizeof(struct zspage) + objs[j] * sizeof(uint32_t);

		c->size = size[j];
		c->pages = pages[j];
		c->objs = objs[j];
		if (desc_fits(size[j], pages[j], objs[j]))
			c->desc_off = objs[j] * size[j];
		else
			c->desc_bytes = desc_malloc_bytes(desc);
		pthread_mutex_init(&c->lock, NULL);
		pool->nclasses++;
	}
	for (uint32_t u = 1, j = 0; u < nidx; u++) {
		while (cand[j] < u * ZP_ALIGN)
			j++;
		idx[u] = (uint16_t)(k - 1 - map[j]);
	}
	pool->size_index = idx;
	pool->meta_fixed += k * sizeof(*pool->classes) + nidx * sizeof(*idx);
	return 0;
}

/* Frames for max_objects objects: the worst case, see pool_new(). */
static uint64_t frames_for(uint64_t max_objects, unsigned nclasses)
{
	uint64_t nframes = max_objects + 2ull * nclasses + ZP_SPARE_FRAMES;

	return nframes > ZP_MAX_FRAMES ? ZP_MAX_FRAMES : nframes;
}

static uint64_t cells_for(uint64_t max_objects)
{
	uint64_t ncells = max_objects + ZP_MIN_HANDLES;

	return ncells > ZP_MAX_HANDLES ? ZP_MAX_HANDLES : ncells;
}

static uint64_t file_align(uint64_t n)
{
	return (n + ZPOOL_FILE_ALIGN - 1) & ~(ZPOOL_FILE_ALIGN - 1);
}

/* Map `len` bytes of the file at *off, shared, and move *off past them. */
static void *map_file(const struct zpool_file *file, uint64_t *off, uint64_t len)
{
	void *p = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_NORESERVE, file->fd, (off_t)*off);

	*off += file_align(len);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, (size_t)len, MADV_NOHUGEPAGE);
	return p;
}

/*
 * The three parts: private reservations (halved while mmap refuses), or
 * the file's parts, whose sizes never change.
 */
static int pool_map(struct zpool *pool, uint64_t nframes, uint64_t ncells,
		    const struct zpool_file *file)
{
	uint64_t off = file ? file->off : 0;

	if (file) {
		pool->fd = file->fd;
		pool->frames_off = off;
		pool->frames = map_file(file, &off, nframes * sizeof(struct frame));
		pool->cells_off = off;
		pool->cells = map_file(file, &off, ncells * sizeof(pool->cells[0]));
		pool->region_off = off;
		pool->base = map_file(file, &off, nframes << ZP_FRAME_SHIFT);
		pool->nframes = nframes;
		pool->ncells = ncells;
		return pool->frames && pool->cells && pool->base ? 0 : -ENOMEM;
	}
	pool->base = reserve(&nframes, ZP_MIN_FRAMES, ZP_FRAME);
	if (!pool->base)
		return -ENOMEM;
	pool->nframes = nframes;
	pool->frames = reserve(&nframes, nframes, sizeof(struct frame));
	if (!pool->frames)
		return -ENOMEM;
	pool->cells = reserve(&ncells, ZP_MIN_HANDLES, sizeof(pool->cells[0]));
	if (!pool->cells)
		return -ENOMEM;
	pool->ncells = ncells;
	return 0;
}

static int pool_new(uint64_t max_objects, size_t max_object,
		    const struct zpool_file *file, struct zpool **out)
{
	struct zpool *pool;
	int err;

	if (!out || !max_objects || !max_object || max_object % ZP_ALIGN ||
	    max_object > ZP_MAX_OBJECT)
		return -EINVAL;
	pool = aligned_alloc(64, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	memset(pool, 0, sizeof(*pool));
	pool->pidfd = -1;
	pool->fd = -1;
	pool->max_object = max_object;
	pool->meta_fixed = sizeof(*pool);
	err = zp_pool_sync_init(pool);
	if (err)
		goto fail;
	err = classes_init(pool);
	if (err)
		goto fail;

	/*
	 * Worst case without compaction: every object alone in its zspage;
	 * plus a partial zspage per class and ZP_SPARE_FRAMES cached frames
	 * (which zp_frame_get() gives back when frames run out).
	 */
	err = pool_map(pool, frames_for(max_objects, pool->nclasses),
		       cells_for(max_objects), file);
	if (err)
		goto fail;
	for (unsigned i = 0; i < pool->nclasses; i++)
		pool->classes[i].frames = pool->frames;
	pool->handle_bump = 1;       /* handle 0 is never valid */

	zp_frames_init(pool);
	pool->mem_used = pool->meta_fixed + zp_table_bytes(1, sizeof(pool->cells[0]));
	pool->mem_used_max = pool->mem_used;
	*out = pool;
	return 0;
fail:
	zpool_destroy(pool);
	return err;
}

int zpool_create(uint64_t max_objects, size_t max_object, struct zpool **out)
{
	return pool_new(max_objects, max_object, NULL, out);
}

int zpool_create_file(uint64_t max_objects, size_t max_object,
		      const struct zpool_file *file, struct zpool **out)
{
	if (!file || file->fd < 0 || file->off % ZPOOL_FILE_ALIGN)
		return -EINVAL;
	return pool_new(max_objects, max_object, file, out);
}

uint64_t zpool_file_bytes(uint64_t max_objects, size_t max_object)
{
	struct zpool probe = { .max_object = max_object };
	uint64_t nframes;

	/* the number of classes follows from max_object alone */
	if (!max_object || max_object % ZP_ALIGN || max_object > ZP_MAX_OBJECT ||
	    classes_init(&probe))
		return 0;
	for (unsigned i = 0; i < probe.nclasses; i++)
		pthread_mutex_destroy(&probe.classes[i].lock);
	free(probe.classes);
	free(probe.size_index);
	nframes = frames_for(max_objects, probe.nclasses);
	return file_align(nframes * sizeof(struct frame)) +
	       file_align(cells_for(max_objects) * 8) +
	       file_align(nframes << ZP_FRAME_SHIFT);
}

void zpool_destroy(struct zpool *pool)
{
	if (!pool)
		return;
	for (unsigned i = 0; i < pool->nclasses; i++) {
		struct size_class *c = &pool->classes[i];

		pthread_mutex_destroy(&c->lock);
		if (c->desc_off || !pool->frames)
			continue;    /* descriptors went with the region */
		for (unsigned g = 0; g <= ZS_DRAINING; g++) {
			while (c->group[g]) {
				struct zspage *zs = c->group[g];

				c->group[g] = zs->next ?
					c->frames[zs->next - 1].zs : NULL;
				zp_desc_put(pool, zs);
			}
		}
	}
	zp_desc_stock_free(pool);
	zp_frames_fini(pool);
	if (pool->pool_sync) {
		pthread_mutex_destroy(&pool->pool_lock);
		pthread_cond_destroy(&pool->refill_cv);
		pthread_cond_destroy(&pool->filled_cv);
		pthread_mutex_destroy(&pool->handles_lock);
	}
	if (pool->cells)
		munmap(pool->cells, pool->ncells * sizeof(pool->cells[0]));
	if (pool->frames)
		munmap(pool->frames, pool->nframes * sizeof(struct frame));
	if (pool->base)
		munmap(pool->base, pool->nframes << ZP_FRAME_SHIFT);
	free(pool->classes);
	free(pool->size_index);
	free(pool);
}

void zpool_set_limit(struct zpool *pool, uint64_t bytes)
{
	atomic_store_explicit(&pool->limit, bytes, memory_order_relaxed);
}

void zpool_reset_max(struct zpool *pool)
{
	atomic_store_explicit(&pool->mem_used_max,
			      atomic_load_explicit(&pool->mem_used,
						   memory_order_relaxed),
			      memory_order_relaxed);
	zp_mem_note_max(pool);
}

void zpool_stats(struct zpool *pool, struct zpool_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < pool->nclasses; i++) {
		const struct size_class *c = &pool->classes[i];

		st->objects += atomic_load_explicit(&c->objects, memory_order_relaxed);
		st->obj_bytes += atomic_load_explicit(&c->obj_bytes,
						      memory_order_relaxed);
	}
	st->mem_used = atomic_load_explicit(&pool->mem_used, memory_order_relaxed);
	st->mem_used_max = atomic_load_explicit(&pool->mem_used_max,
						memory_order_relaxed);
	st->pages_compacted = atomic_load_explicit(&pool->pages_compacted,
						   memory_order_relaxed);
}
