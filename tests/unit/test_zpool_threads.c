// SPDX-License-Identifier: MIT
/*
 * test_zpool_threads.c - the allocator under concurrency: readers map and
 * check objects while writers replace them and a compactor runs without
 * pause, with the cache of resident frames in play. `make test` runs it
 * under TSan as well.
 *
 * CMOCKA_TEST_FILTER=test_concurrent runs one test.
 */
#include <pthread.h>
#include <sched.h>

#include "zpool_check.h"

/*
 * Readers map and check random objects while a writer replaces them and a
 * compactor runs without pause. Each slot has a rwlock: the writer holds it
 * to free and store, readers to map (the store's page lock does this).
 */
struct shared {
	struct zpool *pool;
	struct obj *objs;
	pthread_rwlock_t *locks;
	size_t n;
	uint64_t writes;
	atomic_bool stop;
	atomic_uint_fast64_t reads, bad, compactions;
};

static void *reader(void *arg)
{
	struct shared *sh = arg;
	unsigned char *scratch = malloc(4096);
	uint64_t s = (uint64_t)(uintptr_t)&s | 1;

	while (scratch && !atomic_load(&sh->stop)) {
		size_t i = tu_rand(&s) % sh->n;
		const struct obj *o = &sh->objs[i];

		pthread_rwlock_rdlock(&sh->locks[i]);
		if (o->handle) {
			const void *p = zpool_map(sh->pool, o->handle);

			/* sometimes hold the pin while compaction wants it */
			if (tu_rand(&s) % 16 == 0)
				sched_yield();
			fill(scratch, o->size, o->seed);
			if (memcmp(p, scratch, o->size))
				atomic_fetch_add(&sh->bad, 1);
			zpool_unmap(sh->pool, p);
		}
		pthread_rwlock_unlock(&sh->locks[i]);
		atomic_fetch_add(&sh->reads, 1);
	}
	free(scratch);
	return NULL;
}

static void *compactor(void *arg)
{
	struct shared *sh = arg;

	while (!atomic_load(&sh->stop)) {
		zpool_compact(sh->pool);
		atomic_fetch_add(&sh->compactions, 1);
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct shared sh = { .n = 8192 };
	unsigned char *scratch = malloc(4096);
	pthread_t readers[3], comp;
	uint64_t s = 8;

	(void)state;
	sh.pool = pool_new(256 * MiB, 4096);
	sh.objs = calloc(sh.n, sizeof(*sh.objs));
	sh.locks = calloc(sh.n, sizeof(*sh.locks));
	sh.writes = tu_scaled(150000);
	assert_non_null(scratch);
	assert_non_null(sh.objs);
	assert_non_null(sh.locks);
	for (size_t i = 0; i < sh.n; i++) {
		pthread_rwlock_init(&sh.locks[i], NULL);
		assert_int_equal(store_obj(sh.pool, &sh.objs[i],
					   1 + tu_rand(&s) % 4096, tu_rand(&s),
					   scratch), 0);
	}
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&readers[i], NULL, reader, &sh), 0);
	assert_int_equal(pthread_create(&comp, NULL, compactor, &sh), 0);
	for (uint64_t w = 0; w < sh.writes; w++) {
		size_t i = tu_rand(&s) % sh.n;
		struct obj *o = &sh.objs[i];
		int err = 0;

		pthread_rwlock_wrlock(&sh.locks[i]);
		if (o->handle)
			free_obj(sh.pool, o);
		/* shrink and regrow the set, so zspages empty out */
		if ((w / 25000) % 2 == 0 || tu_rand(&s) % 2)
			err = store_obj(sh.pool, o, 1 + tu_rand(&s) % 4096,
					tu_rand(&s), scratch);
		pthread_rwlock_unlock(&sh.locks[i]);
		if (err)
			break;
		if (w % 1000 == 0)
			sched_yield();
	}
	atomic_store(&sh.stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(readers[i], NULL);
	pthread_join(comp, NULL);
	print_message("concurrent: %llu writes, %llu reads, %llu compaction passes\n",
		      (unsigned long long)sh.writes,
		      (unsigned long long)atomic_load(&sh.reads),
		      (unsigned long long)atomic_load(&sh.compactions));
	assert_int_equal(atomic_load(&sh.bad), 0);
	assert_true(atomic_load(&sh.reads) > 0);
	verify_all(sh.pool, sh.objs, sh.n, scratch);
	for (size_t i = 0; i < sh.n; i++)
		pthread_rwlock_destroy(&sh.locks[i]);
	zpool_destroy(sh.pool);
	free(sh.locks);
	free(sh.objs);
	free(scratch);
}

/*
 * Two writers whose objects alternate between small and large sizes, so
 * that memory flows between classes through the cache (and is trimmed from
 * it, by the writers and by a compactor) while readers map and check.
 */
struct cache_writer {
	struct shared *sh;
	size_t lo, hi;
	uint64_t seed;
	int err;
};

static void *cache_writer(void *arg)
{
	struct cache_writer *w = arg;
	struct shared *sh = w->sh;
	unsigned char *scratch = malloc(4096);
	uint64_t s = w->seed;

	for (uint64_t k = 0; scratch && k < sh->writes && !w->err; k++) {
		size_t i = w->lo + tu_rand(&s) % (w->hi - w->lo);
		struct obj *o = &sh->objs[i];
		bool small = (k / 20000 + w->seed) % 2;
		size_t size = small ? 1 + tu_rand(&s) % 600
				    : 2000 + tu_rand(&s) % 2097;

		pthread_rwlock_wrlock(&sh->locks[i]);
		if (o->handle)
			free_obj(sh->pool, o);
		w->err = store_obj(sh->pool, o, size, tu_rand(&s), scratch);
		pthread_rwlock_unlock(&sh->locks[i]);
	}
	free(scratch);
	return NULL;
}

static void test_cache_concurrent(void **state)
{
	struct shared sh = { .n = 8192 };
	struct cache_writer w[2];
	unsigned char *scratch = malloc(4096);
	pthread_t readers[2], writers[2], comp;
	struct zpool_stats st0, st;

	(void)state;
	sh.pool = pool_new(256 * MiB, 4096);
	sh.objs = calloc(sh.n, sizeof(*sh.objs));
	sh.locks = calloc(sh.n, sizeof(*sh.locks));
	sh.writes = tu_scaled(100000);
	assert_non_null(scratch);
	assert_non_null(sh.objs);
	assert_non_null(sh.locks);
	zpool_stats(sh.pool, &st0);
	for (size_t i = 0; i < sh.n; i++)
		pthread_rwlock_init(&sh.locks[i], NULL);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct cache_writer){ .sh = &sh, .lo = i * sh.n / 2,
					      .hi = (i + 1) * sh.n / 2,
					      .seed = 20 + (uint64_t)i };
		assert_int_equal(pthread_create(&writers[i], NULL, cache_writer,
						&w[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&readers[i], NULL, reader, &sh), 0);
	assert_int_equal(pthread_create(&comp, NULL, compactor, &sh), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(writers[i], NULL);
	atomic_store(&sh.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(readers[i], NULL);
	pthread_join(comp, NULL);
	print_message("cache: %llu writes, %llu reads, %llu compaction passes, "
		      "%llu release batches\n",
		      (unsigned long long)(2 * sh.writes),
		      (unsigned long long)atomic_load(&sh.reads),
		      (unsigned long long)atomic_load(&sh.compactions),
		      (unsigned long long)atomic_load(&sh.pool->releases));
	assert_int_equal(w[0].err, 0);
	assert_int_equal(w[1].err, 0);
	assert_int_equal(atomic_load(&sh.bad), 0);
	verify_all(sh.pool, sh.objs, sh.n, scratch);
	assert_true(cache_pages(sh.pool) <= zp_cache_cap(sh.pool));
	assert_true(atomic_load(&sh.pool->slack_pages) <=
		    zp_cache_cap(sh.pool) / 4);
	for (size_t i = 0; i < sh.n; i++) {
		if (sh.objs[i].handle)
			free_obj(sh.pool, &sh.objs[i]);
		pthread_rwlock_destroy(&sh.locks[i]);
	}
	zpool_compact(sh.pool);
	zpool_stats(sh.pool, &st);
	assert_int_equal(st.objects, 0);
	assert_int_equal(cache_pages(sh.pool), 0);
	assert_int_equal(atomic_load(&sh.pool->slack_pages), 0);
	/* all pages went back; the handle and frame tables stay */
	assert_true(st.mem_used < st0.mem_used + 256 * KiB);
	zpool_destroy(sh.pool);
	free(sh.locks);
	free(sh.objs);
	free(scratch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_cache_concurrent),
	};

	return tu_run_tests(tests, NULL, NULL);
}
