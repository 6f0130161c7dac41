// SPDX-License-Identifier: MIT
/*
 * test_zpool.c - the allocator of compressed objects (src/zpool/zpool.c).
 *
 * Every object is filled with bytes generated from a seed kept by the test,
 * and checked byte for byte through zpool_map() (zpool_check.h); objects
 * outlive frees, handle reuse and compaction (with threads running at once:
 * test_zpool_threads.c). Besides bytes, the tests check the promises in
 * numbers: the counters, the cache of resident frames, a fragmentation
 * bound after compaction, the memory limit and the address space (-ENOSPC,
 * nothing changed), and mem_used against the process's RSS (plain build
 * only: the sanitizers' shadow memory is not the pool's).
 *
 * CMOCKA_TEST_FILTER=test_limit runs one test.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zpool_check.h"

static void test_invalid(void **state)
{
	struct zpool *pool = NULL;
	unsigned char buf[64] = { 0 };
	uint32_t h = 0;

	(void)state;
	assert_int_equal(zpool_create(1 * MiB, 0, &pool), -EINVAL);
	assert_int_equal(zpool_create(1 * MiB, 4095, &pool), -EINVAL);
	assert_int_equal(zpool_create(1 * MiB, 64 * KiB + 16, &pool), -EINVAL);
	assert_int_equal(zpool_create(0, 4096, &pool), -EINVAL);
	assert_int_equal(zpool_create(1 * MiB, 4096, NULL), -EINVAL);
	zpool_destroy(NULL);

	pool = pool_new(1 * MiB, 4096);
	assert_int_equal(zpool_store(pool, buf, 0, &h), -EINVAL);
	assert_int_equal(zpool_store(pool, buf, 4097, &h), -EINVAL);
	assert_int_equal(h, 0);
	assert_int_equal(zpool_store(pool, buf, 1, &h), 0);
	assert_true(h != 0);
	zpool_free(pool, h);
	zpool_destroy(pool);

	pool = pool_new(1 * MiB, 16);
	assert_int_equal(zpool_store(pool, buf, 17, &h), -EINVAL);
	assert_int_equal(zpool_store(pool, buf, 16, &h), 0);
	zpool_free(pool, h);
	zpool_destroy(pool);
}

/* Random stores and frees of sizes 1..max_object, checked as we go. */
static void churn(size_t max_object, uint64_t ops, size_t nslots, uint64_t seed)
{
	struct zpool *pool = pool_new(256 * MiB, max_object);
	struct obj *objs = calloc(nslots, sizeof(*objs));
	void *scratch = malloc(max_object);
	struct zpool_stats st0, st;
	uint64_t s = seed;

	assert_non_null(objs);
	assert_non_null(scratch);
	zpool_stats(pool, &st0);
	for (uint64_t i = 0; i < ops; i++) {
		struct obj *o = &objs[tu_rand(&s) % nslots];

		if (o->handle)
			free_obj(pool, o);
		if (tu_rand(&s) % 4) {
			/* half tiny, to fill the classes of many objects */
			size_t size = tu_rand(&s) % 2 ? 1 + tu_rand(&s) % max_object
						    : 1 + tu_rand(&s) % 64;

			assert_int_equal(store_obj(pool, o, size, tu_rand(&s),
						   scratch), 0);
		}
		if (i % (ops / 4 + 1) == 0)
			verify_all(pool, objs, nslots, scratch);
	}
	verify_all(pool, objs, nslots, scratch);
	for (size_t i = 0; i < nslots; i++)
		if (objs[i].handle)
			free_obj(pool, &objs[i]);
	zpool_stats(pool, &st);
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.obj_bytes, 0);
	/* compaction gives back the cache; the handle and frame tables stay */
	zpool_compact(pool);
	zpool_stats(pool, &st);
	assert_true(st.mem_used < st0.mem_used + 256 * KiB);
	free(scratch);
	free(objs);
	zpool_destroy(pool);
}


/*
 * Emptied zspages' frames stay resident in the pool's cache, within its cap
 * (CACHE_MIN_PAGES for a pool this small) and above half of it after a
 * trim; releases come in batches, not one per frame; a class of another
 * size takes the cached frames without new memory; compaction gives
 * everything back.
 */
static void test_cache(void **state)
{
	size_t n = 200;
	struct zpool *pool = pool_new(64 * MiB, 4096);
	struct obj *objs = calloc(2 * n, sizeof(*objs));
	void *scratch = malloc(4096);
	struct zpool_stats st0, st1, st;
	uint64_t cap, cached, releases;

	(void)state;
	assert_non_null(objs);
	assert_non_null(scratch);
	zpool_stats(pool, &st0);
	/* one object per 1-page zspage */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(store_obj(pool, &objs[i], 4096, i, scratch), 0);
	releases = atomic_load(&pool->releases);
	for (size_t i = 0; i < n; i++)
		free_obj(pool, &objs[i]);
	zpool_stats(pool, &st1);
	cap = zp_cache_cap(pool);
	cached = cache_pages(pool);
	assert_int_equal(cap, CACHE_MIN_PAGES);
	assert_true(cached <= cap && cached >= cap / 2);
	/* 136 frames went back, trimmed from cap + 1 to cap / 2 each time */
	assert_true(atomic_load(&pool->releases) - releases <= 6);
	/* mem_used holds the cache and the grown tables, nothing more */
	assert_true(st1.mem_used >= st0.mem_used + cached * 4096);
	assert_true(st1.mem_used <= st0.mem_used + (cached + 8) * 4096);

	/* 2 KiB objects, two per 1-page zspage, take the cached frames */
	for (size_t i = 0; i < 2 * cached; i++)
		assert_int_equal(store_obj(pool, &objs[i], 2048, n + i, scratch), 0);
	zpool_stats(pool, &st);
	assert_int_equal(cache_pages(pool), 0);
	assert_true(st.mem_used <= st1.mem_used + 4096);   /* a handle batch */
	verify_all(pool, objs, 2 * n, scratch);
	for (size_t i = 0; i < 2 * cached; i++)
		free_obj(pool, &objs[i]);
	assert_true(zpool_compact(pool) >= (long)cached);
	assert_int_equal(cache_pages(pool), 0);
	zpool_stats(pool, &st);
	assert_true(st.mem_used < st0.mem_used + 8 * 4096);
	free(scratch);
	free(objs);
	zpool_destroy(pool);
}

/*
 * A class of 1-page zspages takes cached frames of a class with longer
 * zspages and keeps their other pages as slack, resident and counted,
 * within the slack's budget (a quarter of the cache's cap); compaction
 * gives the slack back and the objects stay.
 */
static void test_cache_slack(void **state)
{
	struct zpool *pool = pool_new(64 * MiB, 4096);
	struct obj objs[4], *big;
	void *scratch = malloc(4096);
	const struct size_class *a = NULL;
	struct zpool_stats st1, st;
	size_t nbig;
	long pages;

	(void)state;
	assert_non_null(scratch);
	for (unsigned i = 0; i < pool->nclasses; i++)
		if (pool->classes[i].pages == 4 && pool->classes[i].objs > 1) {
			a = &pool->classes[i];
			break;
		}
	assert_non_null(a);
	nbig = 4 * a->objs;
	big = calloc(nbig, sizeof(*big));
	assert_non_null(big);
	for (size_t i = 0; i < nbig; i++)
		assert_int_equal(store_obj(pool, &big[i], a->size, i, scratch), 0);
	for (size_t i = 0; i < nbig; i++)
		free_obj(pool, &big[i]);
	assert_int_equal(cache_pages(pool), 4 * a->pages);
	zpool_stats(pool, &st1);

	for (size_t i = 0; i < 4; i++)
		assert_int_equal(store_obj(pool, &objs[i], 4096, i, scratch), 0);
	zpool_stats(pool, &st);
	assert_int_equal(cache_pages(pool), 0);
	assert_int_equal(atomic_load(&pool->slack_pages), 4 * (a->pages - 1));
	assert_true(4 * (a->pages - 1) <= zp_cache_cap(pool) / 4);
	assert_true(st.mem_used <= st1.mem_used + 4096);
	pages = zpool_compact(pool);
	zpool_stats(pool, &st1);
	print_message("slack: class of %u bytes, %u pages: compact gave back "
		      "%ld pages\n", a->size, a->pages, pages);
	assert_int_equal(pages, 4 * (a->pages - 1));
	assert_int_equal(cache_pages(pool), 0);
	assert_int_equal(atomic_load(&pool->slack_pages), 0);
	assert_true(st1.mem_used + (uint64_t)pages * 4096 <= st.mem_used);
	verify_all(pool, objs, 4, scratch);
	free(big);
	free(scratch);
	zpool_destroy(pool);
}

static void test_churn_small(void **state)
{
	(void)state;
	churn(4096, tu_scaled(400000), 20000, 1);
}

static void test_churn_large(void **state)
{
	(void)state;
	churn(64 * KiB, tu_scaled(15000), 2000, 2);
}

/* n objects of 1000 bytes, then all go but every keep-th. */
static void store_sparse(struct zpool *pool, struct obj *objs, size_t n,
			 unsigned keep, uint64_t seed, void *scratch)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(store_obj(pool, &objs[i], 1000, tu_rand(&seed),
					   scratch), 0);
	for (size_t i = 0; i < n; i++)
		if (i % keep)
			free_obj(pool, &objs[i]);
}

/*
 * A pinned object never moves: compaction gives up on a zspage whose pins
 * do not drain (here the pins belong to the compacting thread itself, which
 * would otherwise deadlock), and moves it once unmapped.
 */
static void test_compact_while_mapped(void **state)
{
	size_t n = 2000;
	struct zpool *pool = pool_new(64 * MiB, 4096);
	struct obj *objs = calloc(n, sizeof(*objs));
	const void **ptr = calloc(n, sizeof(*ptr));
	void *scratch = malloc(4096);
	struct zpool_stats before, after;
	long pages;

	(void)state;
	assert_non_null(objs);
	assert_non_null(ptr);
	assert_non_null(scratch);
	/* 3 of every 4 go: a quarter of each zspage stays */
	store_sparse(pool, objs, n, 4, 10, scratch);
	for (size_t i = 0; i < n; i += 4)
		ptr[i] = zpool_map(pool, objs[i].handle);
	zpool_stats(pool, &before);
	pages = zpool_compact(pool);
	zpool_stats(pool, &after);
	/* nothing moved; only cached frames could go */
	assert_int_equal(after.pages_compacted, before.pages_compacted);
	assert_true(pages <= (long)CACHE_MIN_PAGES + 16);
	zpool_stats(pool, &before);
	for (size_t i = 0; i < n; i += 4) {
		assert_ptr_equal(zpool_map(pool, objs[i].handle), ptr[i]);
		zpool_unmap(pool, ptr[i]);
		fill(scratch, objs[i].size, objs[i].seed);
		assert_memory_equal(ptr[i], scratch, objs[i].size);
		zpool_unmap(pool, ptr[i]);
	}
	pages = zpool_compact(pool);
	zpool_stats(pool, &after);
	print_message("compact after unmap: %ld pages, mem_used %llu -> %llu KiB\n",
		      pages, (unsigned long long)before.mem_used / KiB,
		      (unsigned long long)after.mem_used / KiB);
	assert_true(pages > 0);
	assert_true(after.mem_used < before.mem_used);
	verify_all(pool, objs, n, scratch);
	free(scratch);
	free(ptr);
	free(objs);
	zpool_destroy(pool);
}

/* test_read_during_move: what zp_test_moved() does while it is armed */
static struct {
	struct zpool *pool;
	const struct obj *objs;
	const void **ptr;
	void *scratch;
	size_t n;
	bool armed;
} mid_move;

/* Called by compaction after each object it moved, class lock held. */
void zp_test_moved(struct zpool *pool, unsigned left)
{
	if (!mid_move.armed || pool != mid_move.pool || !left)
		return;
	mid_move.armed = false;
	for (size_t i = 0; i < mid_move.n; i++) {
		const struct obj *o = &mid_move.objs[i];

		if (!o->handle)
			continue;
		mid_move.ptr[i] = zpool_map(pool, o->handle);
		fill(mid_move.scratch, o->size, o->seed);
		assert_memory_equal(mid_move.ptr[i], mid_move.scratch, o->size);
	}
}

static bool any_draining(const struct zpool *pool)
{
	for (unsigned i = 0; i < pool->nclasses; i++)
		if (pool->classes[i].group[ZS_DRAINING])
			return true;
	return false;
}

/*
 * Readers never wait for compaction: with a compaction stopped between two
 * moves (zp_test_moved()), every object maps at once, also those of the
 * zspage being emptied (with the old migrate bit that map spun forever:
 * the alarm fails the test). The old spots stay intact while mapped, even
 * as new objects are stored, and their zspage is retired once unmapped.
 */
static void test_read_during_move(void **state)
{
	size_t n = 2000, moved = 0;
	struct zpool *pool = pool_new(64 * MiB, 4096);
	struct obj *objs = calloc(2 * n, sizeof(*objs)), *more = objs + n;
	const void **ptr = calloc(n, sizeof(*ptr));
	void *scratch = malloc(4096);
	struct zpool_stats before, after;
	uint64_t s;

	(void)state;
	assert_non_null(objs);
	assert_non_null(ptr);
	assert_non_null(scratch);
	/* half go: a zspage being emptied holds more after its first move */
	store_sparse(pool, objs, n, 2, 11, scratch);
	s = 12;
	mid_move = (__typeof__(mid_move)){ pool, objs, ptr, scratch, n, true };
	alarm(60);
	zpool_compact(pool);
	alarm(0);
	assert_false(mid_move.armed);
	assert_true(any_draining(pool));
	for (size_t i = 0; i < n; i++)
		if (objs[i].handle)
			assert_int_equal(store_obj(pool, &more[i], 1000,
						   tu_rand(&s), scratch), 0);
	for (size_t i = 0; i < n; i++) {
		const void *p;

		if (!objs[i].handle)
			continue;
		fill(scratch, objs[i].size, objs[i].seed);
		assert_memory_equal(ptr[i], scratch, objs[i].size);
		p = zpool_map(pool, objs[i].handle);
		moved += p != ptr[i];
		zpool_unmap(pool, p);
		zpool_unmap(pool, ptr[i]);
	}
	assert_true(moved > 0);
	zpool_stats(pool, &before);
	zpool_compact(pool);
	zpool_stats(pool, &after);
	assert_false(any_draining(pool));
	assert_true(after.pages_compacted > before.pages_compacted);
	verify_all(pool, objs, 2 * n, scratch);
	free(scratch);
	free(ptr);
	free(objs);
	zpool_destroy(pool);
}

/*
 * What the design promises for objects of 1..4096 bytes, after
 * zpool_compact():
 *  - each size class has less than one zspage (<= 64 KiB) of free slots,
 *    since compaction stops only then, and there are no more classes in use
 *    than distinct 16-byte size buckets in use;
 *  - an object of s bytes takes at most 1.07 * s + 16 bytes of zspage: 16
 *    for rounding to a class, and < 7% for the zspage's tail and for the
 *    classes above ~3.6 KiB, which hold one object per page (nothing packs
 *    them better in 16 pages);
 *  - metadata: 8 bytes of cell and 4 of owner slot per object, and under
 *    64 bytes of descriptor header per zspage (at most one per object);
 *    each class may also hold a batch of 64 unused handles (512 bytes).
 * So mem_used <= 1.07 * obj_bytes + 92 * objects
 *                + (64 KiB + 512) * buckets + the pool's fixed metadata.
 */
static uint64_t design_bound(const struct zpool_stats *st, const struct obj *objs,
			     size_t n, uint64_t fixed)
{
	bool bucket[4096 / 16 + 1] = { false };
	uint64_t buckets = 0;

	for (size_t i = 0; i < n; i++)
		if (objs[i].handle && !bucket[(objs[i].size + 15) / 16]) {
			bucket[(objs[i].size + 15) / 16] = true;
			buckets++;
		}
	return st->obj_bytes + st->obj_bytes * 7 / 100 + 92 * st->objects +
	       (64 * KiB + 512) * buckets + fixed;
}

/* Fill, free a random 70%, compact: survivors keep every byte. */
static void test_compact_keeps_bytes(void **state)
{
	size_t n = tu_scaled(40000);
	struct zpool *pool = pool_new(256 * MiB, 4096);
	struct obj *objs = calloc(n, sizeof(*objs));
	void *scratch = malloc(4096);
	struct zpool_stats st0, full, freed, after;
	uint64_t s = 3;
	long pages;

	(void)state;
	assert_non_null(objs);
	assert_non_null(scratch);
	zpool_stats(pool, &st0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(store_obj(pool, &objs[i], 1 + tu_rand(&s) % 4096,
					   tu_rand(&s), scratch), 0);
	zpool_stats(pool, &full);
	for (size_t i = 0; i < n; i++)
		if (tu_rand(&s) % 100 < 70)
			free_obj(pool, &objs[i]);
	zpool_stats(pool, &freed);
	pages = zpool_compact(pool);
	zpool_stats(pool, &after);
	print_message("compact: full %llu KiB, after frees %llu KiB, after "
		      "compact %llu KiB (%ld pages), objects %llu KiB\n",
		      (unsigned long long)full.mem_used / KiB,
		      (unsigned long long)freed.mem_used / KiB,
		      (unsigned long long)after.mem_used / KiB, pages,
		      (unsigned long long)after.obj_bytes / KiB);
	assert_true(after.pages_compacted > freed.pages_compacted);
	/* what compaction emptied went back, and so did the cache */
	assert_true((uint64_t)pages >= after.pages_compacted -
		    freed.pages_compacted);
	assert_int_equal(cache_pages(pool), 0);
	assert_true(after.mem_used <= freed.mem_used);
	assert_true(freed.mem_used - after.mem_used >= (uint64_t)pages * 4096);
	assert_true(after.mem_used <= design_bound(&after, objs, n, st0.mem_used));
	verify_all(pool, objs, n, scratch);
	/* a second pass finds nothing left to do */
	assert_int_equal(zpool_compact(pool), 0);
	verify_all(pool, objs, n, scratch);
	free(scratch);
	free(objs);
	zpool_destroy(pool);
}

static void test_fragmentation_bound(void **state)
{
	size_t n = tu_scaled(60000);
	struct zpool *pool = pool_new(256 * MiB, 4096);
	struct obj *objs = calloc(n, sizeof(*objs));
	void *scratch = malloc(4096);
	struct zpool_stats st0, st, churned;
	uint64_t s = 4, bound;

	(void)state;
	assert_non_null(objs);
	assert_non_null(scratch);
	zpool_stats(pool, &st0);
	for (uint64_t i = 0; i < 6 * n; i++) {
		struct obj *o = &objs[tu_rand(&s) % n];

		if (o->handle)
			free_obj(pool, o);
		if (tu_rand(&s) % 3)
			assert_int_equal(store_obj(pool, o, 1 + tu_rand(&s) % 4096,
						   tu_rand(&s), scratch), 0);
	}
	zpool_stats(pool, &churned);
	zpool_compact(pool);
	zpool_stats(pool, &st);
	bound = design_bound(&st, objs, n, st0.mem_used);
	print_message("fragmentation: objects %llu KiB, mem_used %llu KiB after "
		      "churn, %llu KiB after compact (%.3fx), bound %llu KiB\n",
		      (unsigned long long)st.obj_bytes / KiB,
		      (unsigned long long)churned.mem_used / KiB,
		      (unsigned long long)st.mem_used / KiB,
		      (double)st.mem_used / (double)st.obj_bytes,
		      (unsigned long long)bound / KiB);
	assert_true(st.mem_used <= bound);
	verify_all(pool, objs, n, scratch);
	free(scratch);
	free(objs);
	zpool_destroy(pool);
}

/*
 * A size without a zspage of its own takes a free slot of a bigger class
 * (borrow() in zpool.c) instead of opening a zspage that would stay almost
 * empty; free and compaction must find such objects where they are.
 */
static void test_borrow(void **state)
{
	struct zpool *pool = pool_new(64 * MiB, 4096);
	struct obj objs[65] = { { 0 } };
	void *scratch = malloc(4096);
	struct zpool_stats st0, one, two;

	(void)state;
	assert_non_null(scratch);
	zpool_stats(pool, &st0);
	assert_int_equal(store_obj(pool, &objs[0], 3000, 1, scratch), 0);
	zpool_stats(pool, &one);
	assert_int_equal(store_obj(pool, &objs[1], 2800, 2, scratch), 0);
	zpool_stats(pool, &two);
	assert_int_equal(two.mem_used, one.mem_used);
	/* more than a zspage's worth: the small size opens its own */
	for (size_t i = 2; i < 65; i++)
		assert_int_equal(store_obj(pool, &objs[i], 2800, i + 1, scratch), 0);
	verify_all(pool, objs, 65, scratch);
	free_obj(pool, &objs[0]);
	verify_all(pool, objs, 65, scratch);
	for (size_t i = 1; i < 65; i += 2)
		free_obj(pool, &objs[i]);
	zpool_compact(pool);
	verify_all(pool, objs, 65, scratch);
	for (size_t i = 2; i < 65; i += 2)
		free_obj(pool, &objs[i]);
	zpool_compact(pool);
	zpool_stats(pool, &two);
	assert_int_equal(two.objects, 0);
	/* the touched frame table and handle cells stay */
	assert_true(two.mem_used <= st0.mem_used + 2 * 4096);
	free(scratch);
	zpool_destroy(pool);
}

static bool stats_equal(const struct zpool_stats *a, const struct zpool_stats *b)
{
	return a->mem_used == b->mem_used && a->mem_used_max == b->mem_used_max &&
	       a->obj_bytes == b->obj_bytes && a->objects == b->objects &&
	       a->pages_compacted == b->pages_compacted;
}

/* Once the limit is hit, stores fail and change nothing, until frees. */
static void test_limit(void **state)
{
	size_t n = 4096;
	struct zpool *pool = pool_new(256 * MiB, 4096);
	struct obj *objs = calloc(n, sizeof(*objs));
	void *scratch = malloc(4096);
	struct zpool_stats st0, full, st;
	uint64_t s = 5, limit;
	size_t stored = 0, failed = 0;
	struct obj extra;
	int err = 0;

	(void)state;
	assert_non_null(objs);
	assert_non_null(scratch);
	zpool_stats(pool, &st0);
	limit = st0.mem_used + 2 * MiB;
	zpool_set_limit(pool, limit);
	while (stored < n) {
		err = store_obj(pool, &objs[stored], 1000, tu_rand(&s), scratch);
		if (err)
			break;
		stored++;
	}
	assert_int_equal(err, -ENOSPC);
	assert_true(stored > 1000 && stored < 2100);
	zpool_stats(pool, &full);
	assert_true(full.mem_used <= limit);
	assert_true(full.mem_used_max <= limit);
	/* the same size again, and every other size: fail or fit, no change */
	assert_int_equal(store_obj(pool, &extra, 1000, 1, scratch), -ENOSPC);
	zpool_stats(pool, &st);
	assert_true(stats_equal(&st, &full));
	for (size_t size = 1; size <= 4096; size += 1 + size / 8) {
		struct zpool_stats before;

		zpool_stats(pool, &before);
		err = store_obj(pool, &extra, size, 2, scratch);
		if (err) {
			/* it may have given cached frames back, nothing else */
			assert_int_equal(err, -ENOSPC);
			zpool_stats(pool, &st);
			assert_int_equal(st.objects, before.objects);
			assert_int_equal(st.obj_bytes, before.obj_bytes);
			assert_true(st.mem_used <= before.mem_used);
			assert_int_equal(st.mem_used_max, before.mem_used_max);
			failed++;
		} else {
			free_obj(pool, &extra);
		}
	}
	assert_true(failed > 0);
	verify_all(pool, objs, n, scratch);

	/* frees make room again */
	for (size_t i = 0; i < stored; i += 2)
		free_obj(pool, &objs[i]);
	assert_int_equal(store_obj(pool, &extra, 1000, 3, scratch), 0);
	assert_int_equal(store_obj(pool, &objs[0], 4096, 4, scratch), 0);
	assert_true(intact(pool, &extra, scratch));
	free_obj(pool, &extra);
	verify_all(pool, objs, n, scratch);

	/* no limit: the rest fits */
	zpool_set_limit(pool, 0);
	for (size_t i = stored; i < n; i++)
		assert_int_equal(store_obj(pool, &objs[i], 1000, tu_rand(&s),
					   scratch), 0);
	zpool_stats(pool, &st);
	assert_true(st.mem_used > limit);
	verify_all(pool, objs, n, scratch);
	free(scratch);
	free(objs);
	zpool_destroy(pool);
}

/* Room for few objects means few frames: running out is -ENOSPC too. */
static void test_address_space(void **state)
{
	size_t n = 100000;
	struct zpool *pool = pool_new(16, 64 * KiB);
	struct obj *objs = calloc(n, sizeof(*objs));
	void *scratch = malloc(64 * KiB);
	struct zpool_stats before, st;
	size_t stored = 0;
	int err = 0;

	(void)state;
	assert_non_null(objs);
	assert_non_null(scratch);
	while (stored < n) {
		err = store_obj(pool, &objs[stored], 64 * KiB, stored + 1, scratch);
		if (err)
			break;
		stored++;
	}
	assert_int_equal(err, -ENOSPC);
	assert_true(stored > 0 && stored < n);
	zpool_stats(pool, &before);
	assert_int_equal(store_obj(pool, &objs[stored], 40000, 9, scratch),
			 -ENOSPC);
	zpool_stats(pool, &st);
	assert_true(stats_equal(&st, &before));
	free_obj(pool, &objs[0]);
	assert_int_equal(store_obj(pool, &objs[0], 40000, 9, scratch), 0);
	verify_all(pool, objs, n, scratch);
	free(scratch);
	free(objs);
	zpool_destroy(pool);
}

/* It also means few handles: running out is -ENOSPC. */
static void test_handles_run_out(void **state)
{
	size_t n = 1 << 17, stored = 0;
	struct zpool *pool = pool_new(16, 4096);
	struct obj *objs = calloc(n, sizeof(*objs));
	unsigned char scratch[16];
	struct zpool_stats before, st;
	int err = 0;

	(void)state;
	assert_non_null(objs);
	while (stored < n) {
		err = store_obj(pool, &objs[stored], 16, stored + 1, scratch);
		if (err)
			break;
		stored++;
	}
	assert_int_equal(err, -ENOSPC);
	assert_true(stored >= 60000 && stored < n);
	zpool_stats(pool, &before);
	assert_int_equal(store_obj(pool, &objs[stored], 16, 1, scratch), -ENOSPC);
	zpool_stats(pool, &st);
	assert_true(stats_equal(&st, &before));
	free_obj(pool, &objs[7]);
	assert_int_equal(store_obj(pool, &objs[7], 16, 8, scratch), 0);
	verify_all(pool, objs, n, scratch);
	free(objs);
	zpool_destroy(pool);
}

/*
 * Handles freed by one size class serve stores of another: a swap device's
 * data changes size over its life (stress-ng's vm methods, one after the
 * other, in v35), and with each class keeping every handle it freed, the
 * classes the data moved to ran out of new handles while the others held
 * most of them unused: stores failed with -ENOSPC (the kernel's "critical
 * space allocation error", 2026-12-05) with a fraction of the pool's
 * objects live.
 */
static void test_freed_handles_serve_other_classes(void **state)
{
	size_t nsmall = 80000, nbig = 20000;
	struct zpool *pool = pool_new(nbig, 4096); /* handles: nbig + 65536 */
	struct obj *small = calloc(nsmall, sizeof(*small));
	struct obj *big = calloc(nbig, sizeof(*big));
	unsigned char *scratch = malloc(4096);

	(void)state;
	assert_non_null(small);
	assert_non_null(big);
	assert_non_null(scratch);
	for (size_t i = 0; i < nsmall; i++)
		assert_int_equal(store_obj(pool, &small[i], 16, i + 1, scratch), 0);
	for (size_t i = 0; i < nsmall; i++)
		free_obj(pool, &small[i]);
	/* now bigger data, as many objects as the pool was made for */
	for (size_t i = 0; i < nbig; i++)
		if (store_obj(pool, &big[i], 2000, i + 1, scratch))
			fail_msg("store %zu of %zu, after %zu smaller objects "
				 "were freed: -ENOSPC", i, nbig, nsmall);
	verify_all(pool, big, nbig, scratch);
	/* and back: the small class gets handles the big one freed */
	for (size_t i = 0; i < nbig; i++)
		free_obj(pool, &big[i]);
	for (size_t i = 0; i < nsmall; i++)
		assert_int_equal(store_obj(pool, &small[i], 16, i + 7, scratch), 0);
	verify_all(pool, small, nsmall, scratch);
	free(scratch);
	free(big);
	free(small);
	zpool_destroy(pool);
}

/* Under an address-space limit the reservations shrink until mmap agrees. */
static void test_reservation_shrinks(void **state)
{
	int status = -1;
	pid_t pid;

	(void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* the sanitizers' own shadow needs more address space than this */
	skip();
#endif
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 32ull << 30, 32ull << 30 };
		unsigned char data[100] = { 1, 2, 3 };
		struct zpool *pool;
		const unsigned char *p;
		uint32_t h;
		int ok;

		if (setrlimit(RLIMIT_AS, &rl) ||
		    zpool_create(1ull << 50, 4096, &pool) ||
		    zpool_store(pool, data, sizeof(data), &h))
			_exit(1);
		p = zpool_map(pool, h);
		ok = !memcmp(p, data, sizeof(data));
		zpool_unmap(pool, p);
		zpool_destroy(pool);
		_exit(ok ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static uint64_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long long size, resident;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu %llu", &size, &resident), 2);
	fclose(f);
	return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static double rel_diff(uint64_t a, uint64_t b)
{
	return a > b ? (double)(a - b) / (double)b : (double)(b - a) / (double)b;
}

/* mem_used follows the process's real memory within 5%. */
static void test_rss(void **state)
{
	const uint64_t total = 64 * MiB;
	size_t n = total / 1024;   /* more slots than objects of 2 KiB mean */
	struct obj *objs;
	unsigned char *src;
	struct zpool *pool;
	uint64_t rss0, rss1, rss2, stored = 0, s = 6;
	struct zpool_stats st0, st1, st2;
	size_t i;

	(void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* shadow memory and redzones are not the pool's */
	skip();
#endif
	objs = calloc(n, sizeof(*objs));
	src = malloc(128 * KiB);
	pool = pool_new(1ull << 30, 4096);
	assert_non_null(objs);
	assert_non_null(src);
	fill(src, 128 * KiB, 7);
	memset(objs, 0, n * sizeof(*objs));
	zpool_stats(pool, &st0);
	rss0 = rss_bytes();
	for (i = 0; i < n && stored < total; i++) {
		size_t size = 1 + tu_rand(&s) % 4096;

		assert_int_equal(zpool_store(pool, src + tu_rand(&s) % (64 * KiB),
					     size, &objs[i].handle), 0);
		stored += size;
	}
	zpool_stats(pool, &st1);
	rss1 = rss_bytes();
	print_message("rss: %llu KiB of objects, mem_used +%llu KiB, rss +%llu KiB\n",
		      (unsigned long long)st1.obj_bytes / KiB,
		      (unsigned long long)(st1.mem_used - st0.mem_used) / KiB,
		      (unsigned long long)(rss1 - rss0) / KiB);
	assert_true(rel_diff(rss1 - rss0, st1.mem_used - st0.mem_used) < 0.05);

	/* free every other object: the cache and the slack count too */
	for (i = 0; i < n; i += 2)
		if (objs[i].handle)
			zpool_free(pool, objs[i].handle);
	zpool_stats(pool, &st2);
	rss2 = rss_bytes();
	print_message("rss: after freeing half, mem_used +%llu KiB (cache %llu "
		      "KiB), rss +%llu KiB\n",
		      (unsigned long long)(st2.mem_used - st0.mem_used) / KiB,
		      (unsigned long long)cache_pages(pool) * 4,
		      (unsigned long long)(rss2 - rss0) / KiB);
	assert_true(rel_diff(rss2 - rss0, st2.mem_used - st0.mem_used) < 0.05);

	/* compact: both fall, and still agree */
	zpool_compact(pool);
	zpool_stats(pool, &st2);
	rss2 = rss_bytes();
	print_message("rss: after compacting, mem_used +%llu KiB, rss +%llu KiB\n",
		      (unsigned long long)(st2.mem_used - st0.mem_used) / KiB,
		      (unsigned long long)(rss2 - rss0) / KiB);
	assert_true(rel_diff(rss2 - rss0, st2.mem_used - st0.mem_used) < 0.05);
	zpool_destroy(pool);
	free(src);
	free(objs);
}


struct refill_arg {
	struct zpool *pool;
	atomic_bool stop;
};

static void *refill_loop(void *arg)
{
	struct refill_arg *ra = arg;

	while (!atomic_load(&ra->stop))
		zpool_refill(ra->pool, 10);
	return NULL;
}

/*
 * The pool's shortest and longest zspage lengths' classes; *lo only among
 * those whose descriptor is in their zspage's tail when `tail_desc`.
 */
static void classes_by_length(const struct zpool *pool, bool tail_desc,
			      const struct size_class **lo,
			      const struct size_class **hi)
{
	*lo = *hi = NULL;
	for (unsigned i = 0; i < pool->nclasses; i++) {
		const struct size_class *c = &pool->classes[i];

		if ((!tail_desc || c->desc_off) && (!*lo || c->pages < (*lo)->pages))
			*lo = c;
		if (!*hi || c->pages > (*hi)->pages)
			*hi = c;
	}
	assert_true((*lo)->pages < (*hi)->pages);
}

/* Zspages of c's length, made and emptied: their frames go to the cache. */
static void cache_frames_of(struct zpool *pool, const struct size_class *c)
{
	static uint32_t h[4096];
	static const unsigned char data[ZP_FRAME] = { 1 };
	unsigned n = c->objs * 8 < 4096 ? c->objs * 8 : 4096;

	for (unsigned i = 0; i < n; i++)
		assert_int_equal(zpool_store(pool, data, c->size, &h[i]), 0);
	for (unsigned i = 0; i < n; i++)
		zpool_free(pool, h[i]);
}

/*
 * A no-fault pool whose cache holds its target, all of one zspage length,
 * still serves a store of a longer one: the refill makes a frame of each
 * length a store found none of, whatever the cache holds.
 */
static void test_refill_serves_other_length(void **state)
{
	struct refill_arg ra = { 0 };
	const struct size_class *lo, *hi;
	uint32_t one;
	unsigned char data[ZP_FRAME] = { 1 };
	uint64_t cached;
	pthread_t th;

	(void)state;
	assert_int_equal(zpool_create(64 * 1024, 4096, &ra.pool), 0);
	classes_by_length(ra.pool, false, &lo, &hi);
	/* zspages of the short length, emptied: the cache holds only those */
	cache_frames_of(ra.pool, lo);
	cached = atomic_load(&ra.pool->cache_pages);
	assert_true(cached >= lo->pages);
	for (unsigned r = hi->pages; r <= ZP_MAX_PAGES; r++)
		assert_int_equal((uint32_t)atomic_load(&ra.pool->stack[r]), 0);
	/* a target the cache already holds */
	assert_int_equal(zpool_set_refill(ra.pool, cached << PAGE_SHIFT,
					  cached << PAGE_SHIFT, 5000), 0);
	assert_int_equal(pthread_create(&th, NULL, refill_loop, &ra), 0);
	assert_int_equal(zpool_store(ra.pool, data, hi->size, &one), 0);
	atomic_store(&ra.stop, true);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&ra.pool->pool_misses), 0);
	zpool_free(ra.pool, one);
	zpool_destroy(ra.pool);
}

/*
 * A no-fault store past the slack budget waits for a frame of its own
 * length rather than take a longer cached one: the slack stayed resident
 * while its zspage lived, and v32 with lz4 peaked at 265-269 MB so, 248-249
 * MB with the budget (BENCHMARKS.md). Fails on the code before 2026-12-04,
 * which took any longer frame at once.
 */
static void test_nofault_store_keeps_slack_budget(void **state)
{
	struct refill_arg ra = { 0 };
	const struct size_class *lo, *hi;
	uint32_t one;
	unsigned char data[ZP_FRAME] = { 1 };
	uint64_t slack, budget;
	pthread_t th;

	(void)state;
	assert_int_equal(zpool_create(64 * 1024, 4096, &ra.pool), 0);
	/* lo's descriptor in its tail: its store waits for nothing else */
	classes_by_length(ra.pool, true, &lo, &hi);
	/* zspages of the long length, emptied: the cache holds only those */
	cache_frames_of(ra.pool, hi);
	assert_int_equal(zpool_set_refill(ra.pool, 64 << PAGE_SHIFT,
					  64 << PAGE_SHIFT, 5000), 0);
	/* the slack budget spent */
	budget = zp_cache_cap(ra.pool) >> SLACK_SHARE_SHIFT;
	slack = atomic_load(&ra.pool->slack_pages);
	atomic_store(&ra.pool->slack_pages, budget);
	assert_int_equal(pthread_create(&th, NULL, refill_loop, &ra), 0);
	assert_int_equal(zpool_store(ra.pool, data, lo->size, &one), 0);
	atomic_store(&ra.stop, true);
	pthread_join(th, NULL);
	/* a frame of its own length: no slack added */
	assert_int_equal(atomic_load(&ra.pool->slack_pages), budget);
	assert_int_equal(atomic_load(&ra.pool->pool_misses), 0);
	atomic_store(&ra.pool->slack_pages, slack);
	zpool_free(ra.pool, one);
	zpool_destroy(ra.pool);
}

/*
 * A pool holding n objects of `size` bytes of `fill` (handles in h), then
 * made a no-fault pool of a small target (16 pages), so that frames its
 * frees or compaction leave are past the cache's cap.
 */
static struct zpool *nofault_pool_of(uint32_t *h, unsigned n, size_t size,
				     int fill)
{
	unsigned char data[4096];
	struct zpool *pool;

	assert_true(size <= sizeof data);
	memset(data, fill, size);
	assert_int_equal(zpool_create(64 * 1024, n, &pool), 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(zpool_store(pool, data, size, &h[i]), 0);
	assert_int_equal(zpool_set_refill(pool, 16 * 4096, 16 * 4096, 1), 0);
	return pool;
}

/*
 * In a no-fault pool, frees never give memory back themselves (a release
 * takes the mmap lock, which a swap server's queue thread must not wait
 * for: zpool_frame.c); the cache runs past its cap until the refill trims
 * it. Fails where zpool_free() trims (before 2026-12-04).
 */
static void test_nofault_frees_leave_trim_to_refill(void **state)
{
	enum { N = 4096 };
	static uint32_t h[N];
	struct zpool *pool = nofault_pool_of(h, N, 3000, 7);
	uint64_t releases;

	(void)state;
	releases = atomic_load(&pool->releases);
	for (unsigned i = 0; i < N; i++)
		zpool_free(pool, h[i]);
	assert_true(zp_cache_over(pool));
	assert_true(atomic_load(&pool->releases) == releases);
	/* the refill gives the excess back */
	zpool_refill(pool, 1);
	assert_false(zp_cache_over(pool));
	assert_true(atomic_load(&pool->releases) > releases);
	zpool_destroy(pool);
}

/*
 * Nor does compaction give pages back in a no-fault pool: it did, with
 * munlock() under a class lock, and v32 on 6.12 hung (the compactor behind
 * the refill's fault in reclaim, a store behind the compactor). Its moves
 * still free zspages into the cache, for the refill to trim.
 */
static void test_nofault_compact_leaves_trim_to_refill(void **state)
{
	enum { N = 4096 };
	static uint32_t h[N];
	unsigned char data[1000];
	struct zpool *pool = nofault_pool_of(h, N, sizeof data, 5);
	uint64_t releases, slack;

	(void)state;
	memset(data, 5, sizeof data);
	/* three objects of four freed: zspages to compact, frames to free */
	for (unsigned i = 0; i < N; i++)
		if (i % 4)
			zpool_free(pool, h[i]);
	releases = atomic_load(&pool->releases);
	slack = atomic_load(&pool->slack_pages);
	assert_true(zpool_compact(pool) == 0);
	assert_true(atomic_load(&pool->releases) == releases);
	assert_true(atomic_load(&pool->slack_pages) == slack);
	assert_true(zp_cache_over(pool));
	zpool_refill(pool, 1);
	assert_false(zp_cache_over(pool));
	assert_true(atomic_load(&pool->releases) > releases);
	for (unsigned i = 0; i < N; i += 4) {
		const void *p = zpool_map(pool, h[i]);

		assert_memory_equal(p, data, sizeof data);
		zpool_unmap(pool, p);
	}
	zpool_destroy(pool);
}

/*
 * A no-fault pool's new zspages take their malloc'ed descriptors from the
 * stock the refill made (a malloc in a store's thread faulted, and v44 on
 * 7.3 stood still), and ended zspages give them back to it.
 */
static void test_nofault_descriptors_from_stock(void **state)
{
	enum { N = 1024 };
	struct zpool *pool;
	static uint32_t h[N];
	static unsigned char data[4096];
	unsigned n = 0, full;

	(void)state;
	assert_int_equal(zpool_create(64 * 1024, N, &pool), 0);
	assert_int_equal(zpool_set_refill(pool, 64 * 4096, 64 * 4096, 1), 0);
	zpool_refill(pool, 1);
	if (!pool->desc_max) {
		zpool_destroy(pool);
		skip();  /* every class's descriptor fits its zspage's tail */
	}
	full = pool->desc_count;
	assert_true(full > 0);
	/* an object of every size: every class opens a zspage */
	for (size_t size = 16; size <= pool->max_object && n < N; size += 16) {
		int r;

		memset(data, (int)size, size);
		while ((r = zpool_store(pool, data, size, &h[n])) == -ENOSPC)
			zpool_refill(pool, 1);
		assert_int_equal(r, 0);
		n++;
	}
	assert_true(pool->desc_count < full);
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *p = zpool_map(pool, h[i]);
		size_t size = 16 * (i + 1);

		for (size_t b = 0; b < size; b++)
			assert_int_equal(p[b], (unsigned char)size);
		zpool_unmap(pool, p);
		zpool_free(pool, h[i]);
	}
	/* the ended zspages' descriptors went back */
	assert_int_equal(pool->desc_count, full);
	zpool_destroy(pool);
}

/* The class of the first size whose zspage's tail cannot hold its
 * descriptor, or NULL. */
static const struct size_class *malloc_desc_class(const struct zpool *pool)
{
	for (unsigned i = 0; i < pool->nclasses; i++)
		if (!pool->classes[i].desc_off)
			return &pool->classes[i];
	return NULL;
}

static uint64_t live_objects(struct zpool *pool)
{
	struct zpool_stats st;

	zpool_stats(pool, &st);
	return st.objects;
}

/* Take the whole descriptor stock out of the pool; its count. */
static unsigned stock_take_all(struct zpool *pool, void **list)
{
	unsigned n;

	pthread_mutex_lock(&pool->pool_lock);
	*list = pool->desc_stock;
	n = pool->desc_count;
	pool->desc_stock = NULL;
	pool->desc_count = 0;
	pthread_mutex_unlock(&pool->pool_lock);
	return n;
}

static void list_free(void *list)
{
	while (list) {
		void *next = *(void **)list;

		free(list);
		list = next;
	}
}

static void *refill_later(void *arg)
{
	struct zpool *pool = arg;

	usleep(20 * 1000);
	return (void *)(intptr_t)zpool_refill(pool, 0);
}

/*
 * With the stock empty, a no-fault store does not malloc its zspage's
 * descriptor (a queue thread's malloc faulted on a fresh heap page and v44
 * stood still 300 s): it waits for the refill, and takes what the refill
 * stocked; none within the wait: -ENOSPC, nothing stored, a miss counted.
 * Fails on the code before 2026-12-04, which malloc'ed.
 */
static void test_nofault_empty_stock_waits(void **state)
{
	static unsigned char data[4096];
	const struct size_class *c;
	struct zpool *pool;
	pthread_t t;
	uint64_t misses, objects;
	const unsigned char *p;
	void *list, *ret;
	uint32_t h;

	(void)state;
	assert_int_equal(zpool_create(64 * 1024, 1024, &pool), 0);
	assert_int_equal(zpool_set_refill(pool, 64 * 4096, 64 * 4096, 10), 0);
	zpool_refill(pool, 1);
	if (!pool->desc_max || !(c = malloc_desc_class(pool))) {
		zpool_destroy(pool);
		skip();  /* every class's descriptor fits its zspage's tail */
	}
	memset(data, 0x5a, sizeof data);
	assert_true(stock_take_all(pool, &list) > 0);
	misses = atomic_load(&pool->pool_misses);
	objects = live_objects(pool);
	/* no refill runs: the store waits 10 ms and fails */
	assert_int_equal(zpool_store(pool, data, c->size, &h), -ENOSPC);
	assert_int_equal(atomic_load(&pool->pool_misses), misses + 1);
	assert_null(pool->desc_stock);
	assert_int_equal(live_objects(pool), objects);
	/* a refill 20 ms later stocks one: the store, waiting up to 5 s, takes it */
	assert_int_equal(zpool_set_refill(pool, 64 * 4096, 64 * 4096, 5000), 0);
	assert_int_equal(pthread_create(&t, NULL, refill_later, pool), 0);
	assert_int_equal(zpool_store(pool, data, c->size, &h), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_true((intptr_t)ret >= 0);
	assert_int_equal(atomic_load(&pool->pool_misses), misses + 1);
	p = zpool_map(pool, h);
	assert_memory_equal(p, data, c->size);
	zpool_unmap(pool, p);
	zpool_free(pool, h);
	list_free(list);
	zpool_destroy(pool);
}

/*
 * The refill sleeps while a store still counted as waiting has what it
 * asked for: it returned at once there, and its thread spun at SCHED_RR
 * beside the store it waited for (fails on the code before 2026-12-04).
 */
static void test_refill_sleeps_with_nothing_to_make(void **state)
{
	struct zpool *pool;
	struct timespec t0, t1;
	long ms;

	(void)state;
	assert_int_equal(zpool_create(64 * 1024, 1024, &pool), 0);
	assert_int_equal(zpool_set_refill(pool, 16 * 4096, 16 * 4096, 1), 0);
	/* filled to its target: nothing left to make */
	while (zpool_refill(pool, 1) > 0)
		;
	for (unsigned p = 1; p <= ZP_MAX_PAGES; p++)
		assert_int_equal((int)atomic_load(&pool->pool_short[p]), 0);
	pthread_mutex_lock(&pool->pool_lock);
	pool->pool_waiters++; /* a store woken, not yet run */
	pthread_mutex_unlock(&pool->pool_lock);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(zpool_refill(pool, 100), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 90);
	pthread_mutex_lock(&pool->pool_lock);
	pool->pool_waiters--;
	pthread_mutex_unlock(&pool->pool_lock);
	zpool_destroy(pool);
}

struct waiting_store {
	struct zpool *pool;
	size_t size;
	uint32_t handle;
	int rc;
	atomic_bool done;
};

static void *store_waiting(void *arg)
{
	struct waiting_store *w = arg;
	unsigned char data[4096];

	memset(data, 0x3c, w->size);
	w->rc = zpool_store(w->pool, data, w->size, &w->handle);
	atomic_store(&w->done, true);
	return NULL;
}

/*
 * A store that waits for the refill's next frame holds no class lock
 * (zp_zspage_make(), as zsmalloc makes a zspage outside its class lock): a
 * free of the same class, which a swap server's other queue thread or a
 * trim runs, completes while that store still waits, where it waited for
 * the store's pool_wait_ms before (fails on the code before 2026-12-05:
 * the free returns only after the store's 10 s ran out). Then the refill
 * runs, and the store takes its frame and keeps its bytes.
 */
static void test_nofault_wait_holds_no_class_lock(void **state)
{
	const size_t size = 1000;
	const struct size_class *c;
	struct waiting_store w = { .size = size };
	unsigned char data[1000];
	const unsigned char *p;
	struct zpool *pool;
	uint32_t h[64];
	pthread_t t;

	(void)state;
	memset(data, 0x17, sizeof data);
	assert_int_equal(zpool_create(64 * 1024, 1024, &pool), 0);
	c = &pool->classes[pool->size_index[(size + ZP_ALIGN - 1) / ZP_ALIGN]];
	assert_true(c->objs <= 64);
	/* one full zspage of the class, made outside the mode */
	for (uint32_t i = 0; i < c->objs; i++)
		assert_int_equal(zpool_store(pool, data, size, &h[i]), 0);
	assert_int_equal(c->zspages, 1);
	/* no-fault, nothing cached, no refill: the next store waits */
	assert_int_equal(zpool_set_refill(pool, 16 * 4096, 16 * 4096, 10000), 0);
	assert_int_equal(atomic_load(&pool->cache_pages), 0);
	w.pool = pool;
	assert_int_equal(pthread_create(&t, NULL, store_waiting, &w), 0);
	while (!atomic_load(&pool->pool_waits))
		usleep(1000);
	zpool_free(pool, h[0]);
	assert_false(atomic_load(&w.done));
	assert_true(zpool_refill(pool, 0) >= 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.rc, 0);
	p = zpool_map(pool, w.handle);
	for (size_t i = 0; i < size; i++)
		assert_int_equal(p[i], 0x3c);
	zpool_unmap(pool, p);
	zpool_free(pool, w.handle);
	for (uint32_t i = 1; i < c->objs; i++) {
		p = zpool_map(pool, h[i]);
		assert_memory_equal(p, data, size);
		zpool_unmap(pool, p);
		zpool_free(pool, h[i]);
	}
	zpool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_churn_small),
		cmocka_unit_test(test_churn_large),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_cache_slack),
		cmocka_unit_test(test_compact_keeps_bytes),
		cmocka_unit_test(test_compact_while_mapped),
		cmocka_unit_test(test_read_during_move),
		cmocka_unit_test(test_fragmentation_bound),
		cmocka_unit_test(test_borrow),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_address_space),
		cmocka_unit_test(test_handles_run_out),
		cmocka_unit_test(test_freed_handles_serve_other_classes),
		cmocka_unit_test(test_reservation_shrinks),
		cmocka_unit_test(test_rss),
		cmocka_unit_test(test_refill_serves_other_length),
		cmocka_unit_test(test_nofault_frees_leave_trim_to_refill),
		cmocka_unit_test(test_nofault_compact_leaves_trim_to_refill),
		cmocka_unit_test(test_nofault_descriptors_from_stock),
		cmocka_unit_test(test_nofault_empty_stock_waits),
		cmocka_unit_test(test_nofault_store_keeps_slack_budget),
		cmocka_unit_test(test_refill_sleeps_with_nothing_to_make),
		cmocka_unit_test(test_nofault_wait_holds_no_class_lock),
	};

	return tu_run_tests(tests, NULL, NULL);
}
