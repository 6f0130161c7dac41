/* SPDX-License-Identifier: MIT */
/*
 * zpool_check.h - what the allocator tests share: objects whose bytes come
 * from a seed the test keeps (fill), checked byte for byte through
 * zpool_map() (intact; verify_all also checks that handles are unique and
 * the counters). Included by test_zpool.c and test_zpool_threads.c.
 */
#ifndef UZRAM_TEST_ZPOOL_CHECK_H
#define UZRAM_TEST_ZPOOL_CHECK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "testutil.h"
#include "zpool/zpool_impl.h"       /* the cache's counters and bound */
#define KiB 1024ull
#define MiB (1024ull * 1024)

struct obj {
	uint32_t handle;      /* 0: none */
	uint32_t size;
	uint64_t seed;
};

static inline void fill(void *buf, size_t size, uint64_t seed)
{
	unsigned char *p = buf;
	uint64_t s = seed | 1;
	size_t i = 0;

	for (; i + 8 <= size; i += 8) {
		uint64_t v = tu_rand(&s);

		memcpy(p + i, &v, 8);
	}
	if (i < size) {
		uint64_t v = tu_rand(&s);

		memcpy(p + i, &v, size - i);
	}
}

/* Whether the object's bytes are those fill() wrote. */
static inline bool intact(struct zpool *pool, const struct obj *o, void *scratch)
{
	const void *p = zpool_map(pool, o->handle);
	bool ok;

	fill(scratch, o->size, o->seed);
	ok = p && memcmp(p, scratch, o->size) == 0;
	zpool_unmap(pool, p);
	return ok;
}

static inline int store_obj(struct zpool *pool, struct obj *o, size_t size,
		     uint64_t seed, void *scratch)
{
	int err;

	fill(scratch, size, seed);
	err = zpool_store(pool, scratch, size, &o->handle);
	if (err) {
		o->handle = 0;
		return err;
	}
	o->size = (uint32_t)size;
	o->seed = seed;
	return 0;
}

static inline void free_obj(struct zpool *pool, struct obj *o)
{
	zpool_free(pool, o->handle);
	o->handle = 0;
}

static inline int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Check every live object, that handles are unique and the counters. */
static inline void verify_all(struct zpool *pool, const struct obj *objs, size_t n,
		       void *scratch)
{
	uint32_t *hs = malloc((n + 1) * sizeof(*hs));
	uint64_t bytes = 0, live = 0;
	struct zpool_stats st;

	assert_non_null(hs);
	for (size_t i = 0; i < n; i++) {
		if (!objs[i].handle)
			continue;
		if (!intact(pool, &objs[i], scratch))
			fail_msg("object %zu (handle %u, %u bytes) corrupted", i,
				 objs[i].handle, objs[i].size);
		hs[live++] = objs[i].handle;
		bytes += objs[i].size;
	}
	qsort(hs, live, sizeof(*hs), cmp_u32);
	for (uint64_t i = 1; i < live; i++)
		if (hs[i] == hs[i - 1])
			fail_msg("handle %u is live twice", hs[i]);
	free(hs);
	zpool_stats(pool, &st);
	assert_int_equal(st.objects, live);
	assert_int_equal(st.obj_bytes, bytes);
	assert_true(st.mem_used <= st.mem_used_max);
}

static inline struct zpool *pool_new(uint64_t max_objects, size_t max_object)
{
	struct zpool *pool = NULL;

	assert_int_equal(zpool_create(max_objects, max_object, &pool), 0);
	assert_non_null(pool);
	return pool;
}

static inline uint64_t cache_pages(struct zpool *pool)
{
	return atomic_load(&pool->cache_pages);
}

#endif
