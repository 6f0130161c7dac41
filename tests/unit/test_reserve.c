// SPDX-License-Identifier: MIT
/*
 * test_reserve.c - uzram_reserve(): the reserve is resident and counted at
 * once, stores take their memory from it (mem_used_total does not grow
 * while the data fits), discards do not give it back to the OS (the
 * cache's floor), it stops at mem_limit with -ENOSPC, and 0 ends it so
 * that uzram_compact() returns it.
 *
 * The no-fault pool (uzram_set_refill()): a write that finds it empty,
 * with no refill running, fails with -ENOSPC within a bounded time, makes
 * nothing resident and keeps the cluster's old data; after a refill the
 * same write succeeds. With a refill thread, writes that need new memory
 * all succeed from frames it made. The mode makes the whole slot table
 * first, and refuses a limit that cannot hold it.
 *
 * uzram_thread_prepare(): a thread's first write and read of a zstd
 * device allocate its codec contexts (measured with mallinfo2(), so that
 * the check cannot pass for want of a measure); after the call they
 * allocate nothing. The write crew's threads are ready when uzram_open()
 * returns.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "uzram.h"
#include "testutil.h"

#define MIB (1ull << 20)
#define RESERVE (8 * MIB)
#define DATA (4 * MIB)

static uint64_t mem_used(struct uzram *dev)
{
	struct uzram_stats st;

	assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
	return st.mem_used_total;
}

static struct uzram *open_dev_sized(uint64_t size, uint64_t limit)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;

	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.mem_limit = limit;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	return dev;
}

static struct uzram *open_dev(uint64_t limit)
{
	return open_dev_sized(64 * MIB, limit);
}

static void test_reserve_serves_stores(void **state)
{
	struct uzram *dev = open_dev(0);
	uint64_t m0, m1, m2, m3;
	size_t len;
	uint8_t *data = tu_corpus("heap-python.core", DATA, &len);

	(void)state;
	assert_true(len == DATA);
	m0 = mem_used(dev);
	assert_int_equal(uzram_reserve(dev, RESERVE), 0);
	m1 = mem_used(dev);
	assert_true(m1 >= m0 + RESERVE);

	/* 4 MiB of data compresses into less than the 8 MiB reserve */
	for (uint64_t off = 0; off < DATA; off += MIB)
		assert_int_equal(uzram_write(dev, data + off, MIB, off), 0);
	m2 = mem_used(dev);
	/* what stores add beyond the reserve: descriptors, the slot table */
	assert_true(m2 <= m1 + MIB / 4);

	/* discarding all of it keeps the reserve resident */
	assert_int_equal(uzram_discard(dev, DATA, 0), 0);
	uzram_compact(dev);
	m3 = mem_used(dev);
	if (m3 < RESERVE)
		fail_msg("the reserve was given back: %llu bytes held after "
			 "discard and compact, %llu reserved",
			 (unsigned long long)m3, (unsigned long long)RESERVE);

	/* 0 ends the reserve; compaction gives it back */
	assert_int_equal(uzram_reserve(dev, 0), 0);
	uzram_compact(dev);
	m3 = mem_used(dev);
	assert_true(m3 < m0 + RESERVE / 2);
	free(data);
	uzram_close(dev);
}

static void test_reserve_stops_at_limit(void **state)
{
	struct uzram *dev = open_dev(2 * MIB);

	(void)state;
	assert_int_equal(uzram_reserve(dev, RESERVE), -ENOSPC);
	assert_true(mem_used(dev) <= 2 * MIB);
	assert_int_equal(uzram_reserve(NULL, RESERVE), -EINVAL);
	uzram_close(dev);
}

#define CLUSTER 4096u
#define SLOTS 256u

/* Incompressible bytes: each such cluster is stored raw, a zspage page. */
static void fill_random(uint8_t *buf, size_t n, uint64_t *seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t r = tu_rand(seed);

		memcpy(buf + i, &r, 8);
	}
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void refill_stats(struct uzram *dev, struct uzram_stats *st)
{
	assert_int_equal(uzram_stats(dev, st, sizeof *st), 0);
}

static void test_refill_empty_pool_fails_fast(void **state)
{
	struct uzram *dev = open_dev(0);
	uint8_t old[CLUSTER], buf[CLUSTER], back[CLUSTER];
	uint64_t seed = 30, m0;
	struct uzram_stats st;
	unsigned slot;
	double t0, took = 0;
	int r = 0;

	(void)state;
	/* every slot holds a compressible page, stored before the mode */
	for (unsigned i = 0; i < CLUSTER; i++)
		old[i] = (uint8_t)(i / 64);
	for (slot = 0; slot < SLOTS; slot++)
		assert_int_equal(uzram_write(dev, old, CLUSTER,
					     (uint64_t)slot * CLUSTER), 0);
	uzram_compact(dev);     /* the cache goes: the pool is empty */
	assert_int_equal(uzram_set_refill(dev, 64 << 10, 256 << 10, 20), 0);

	/* raw pages need new zspages: once the free spots are gone, one fails */
	for (slot = 0; slot < SLOTS; slot++) {
		fill_random(buf, CLUSTER, &seed);
		m0 = mem_used(dev);
		t0 = now_s();
		r = uzram_write(dev, buf, CLUSTER, (uint64_t)slot * CLUSTER);
		took = now_s() - t0;
		if (r)
			break;
	}
	assert_int_equal(r, -ENOSPC);
	if (took > 2.0)
		fail_msg("the failed write took %.3f s, its wait is 20 ms", took);
	/* nothing was faulted in for it, and the slot kept its data */
	assert_true(mem_used(dev) <= m0);
	assert_int_equal(uzram_read(dev, back, CLUSTER, (uint64_t)slot * CLUSTER), 0);
	assert_memory_equal(back, old, CLUSTER);
	refill_stats(dev, &st);
	assert_int_equal(st.refill_misses, 1);
	assert_true(st.refill_waits >= 1);
	/* the miss waited its 20 ms, and no wait is longer than the write */
	assert_true(st.refill_wait_ns >= 19 * 1000000ull);
	assert_true(st.refill_wait_ns <= (uint64_t)(took * 1e9) * st.refill_waits);
	assert_true(st.failed_writes >= 1);
	assert_int_equal(st.refill_target, 64 << 10);

	/* a refill, and the same write succeeds; what it made is cached
	 * frames, counted in mem_used_total */
	assert_true(uzram_refill(dev, 0) > 0);
	refill_stats(dev, &st);
	assert_true(st.pool_cached > 0);
	assert_true(st.pool_cached <= st.mem_used_total);
	assert_int_equal(uzram_write(dev, buf, CLUSTER, (uint64_t)slot * CLUSTER), 0);
	assert_int_equal(uzram_read(dev, back, CLUSTER, (uint64_t)slot * CLUSTER), 0);
	assert_memory_equal(back, buf, CLUSTER);
	refill_stats(dev, &st);
	assert_int_equal(st.refill_misses, 1);
	assert_true(st.refill_made > 0);

	/* min 0 ends the mode: writes fault in again, the refill refuses */
	assert_int_equal(uzram_set_refill(dev, 0, 0, 0), 0);
	assert_int_equal(uzram_refill(dev, 0), -EINVAL);
	assert_int_equal(uzram_set_refill(dev, 2, 1, 0), -EINVAL);
	assert_int_equal(uzram_set_refill(NULL, 1, 1, 0), -EINVAL);
	for (slot = 0; slot < SLOTS; slot++) {
		fill_random(buf, CLUSTER, &seed);
		assert_int_equal(uzram_write(dev, buf, CLUSTER,
					     (uint64_t)slot * CLUSTER), 0);
	}
	uzram_close(dev);
}

/*
 * The no-fault mode makes the whole slot table at once, so that no write
 * maps a chunk of it (an mmap() in a thread serving swap: the v32 hang
 * of 2026-12-04): table_bytes is the full table before any write, and a
 * write at the far end of the device does not grow it. A limit that
 * cannot hold the table is refused, the mode stays off, nothing is lost.
 */
static void test_refill_makes_whole_table(void **state)
{
	/* 16 chunks of table, 4 MiB */
	const uint64_t size = 1024 * MIB, full = size / CLUSTER * 16;
	struct uzram *dev = open_dev_sized(size, 0);
	uint8_t buf[CLUSTER], back[CLUSTER];
	struct uzram_stats st;
	uint64_t seed = 7;

	(void)state;
	assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
	assert_true(st.table_bytes < full);
	assert_int_equal(uzram_set_refill(dev, 64 << 10, 256 << 10, 20), 0);
	assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
	assert_true(st.table_bytes >= full);
	/* the mode ended (writes fault in again), the table stays whole */
	assert_int_equal(uzram_set_refill(dev, 0, 0, 0), 0);
	fill_random(buf, CLUSTER, &seed);
	assert_int_equal(uzram_write(dev, buf, CLUSTER, size - CLUSTER), 0);
	assert_int_equal(uzram_read(dev, back, CLUSTER, size - CLUSTER), 0);
	assert_memory_equal(back, buf, CLUSTER);
	{
		uint64_t before = st.table_bytes;

		assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
		assert_int_equal(st.table_bytes, before);
	}
	uzram_close(dev);

	/* a limit of 1 MiB holds a chunk or two, not the table */
	dev = open_dev_sized(size, MIB);
	fill_random(buf, CLUSTER, &seed);
	assert_int_equal(uzram_write(dev, buf, CLUSTER, 0), 0);
	assert_int_equal(uzram_set_refill(dev, 64 << 10, 256 << 10, 20), -ENOSPC);
	assert_non_null(strstr(uzram_last_error(), "slot table"));
	assert_int_equal(uzram_refill(dev, 0), -EINVAL); /* the mode is off */
	assert_int_equal(uzram_read(dev, back, CLUSTER, 0), 0);
	assert_memory_equal(back, buf, CLUSTER);
	uzram_close(dev);
}

struct refiller {
	struct uzram *dev;
	atomic_bool stop;
};

static void *refill_main(void *arg)
{
	struct refiller *rf = arg;

	while (!atomic_load(&rf->stop))
		uzram_refill(rf->dev, 10);
	return NULL;
}

static void test_refill_thread_serves_writes(void **state)
{
	struct uzram *dev = open_dev(0);
	struct refiller rf = { .dev = dev };
	uint64_t seed = 31, n = tu_scaled(2048);
	uint8_t buf[CLUSTER], back[CLUSTER];
	struct uzram_stats st;
	pthread_t th;

	(void)state;
	/* a long wait: this checks the wake-ups, not the machine's speed */
	assert_int_equal(uzram_set_refill(dev, 64 << 10, 1 << 20, 10000), 0);
	assert_int_equal(pthread_create(&th, NULL, refill_main, &rf), 0);
	for (uint64_t i = 0; i < n; i++) {
		fill_random(buf, CLUSTER, &seed);
		assert_int_equal(uzram_write(dev, buf, CLUSTER, (i % 8192) * CLUSTER), 0);
	}
	atomic_store(&rf.stop, true);
	pthread_join(th, NULL);
	refill_stats(dev, &st);
	assert_int_equal(st.refill_misses, 0);
	/* the raw pages' memory came from the refill */
	assert_true(st.refill_made >= n * CLUSTER / 2);
	/* the last page written reads back */
	assert_int_equal(uzram_read(dev, back, CLUSTER, ((n - 1) % 8192) * CLUSTER), 0);
	assert_memory_equal(back, buf, CLUSTER);
	uzram_close(dev);
}

/* Bytes malloc has handed out and not had back, over all its arenas. */
static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

struct first_io {
	struct uzram *dev;
	bool prepare;
	size_t grew; /* heap_in_use()'s growth over the first write and read */
};

/* A new thread's first write and read of cluster 0, after the call or not. */
static void *first_io_main(void *arg)
{
	struct first_io *f = arg;
	uint8_t buf[4096];
	size_t before, after;

	if (f->prepare)
		assert_int_equal(uzram_thread_prepare(f->dev), 0);
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)("a page of text "[i % 15] + (i >> 10));
	before = heap_in_use();
	assert_int_equal(uzram_write(f->dev, buf, sizeof buf, 0), 0);
	assert_int_equal(uzram_read(f->dev, buf, sizeof buf, 0), 0);
	after = heap_in_use();
	f->grew = after > before ? after - before : 0;
	return NULL;
}

static size_t first_io_grew(struct uzram *dev, bool prepare)
{
	struct first_io f = { .dev = dev, .prepare = prepare };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, first_io_main, &f), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	return f.grew;
}

/* A 16 MiB zstd device with `threads` write threads. */
static struct uzram *open_zstd(uint32_t threads)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;

	uzram_config_init(&cfg);
	cfg.size = 16 * MIB;
	cfg.algorithm = "zstd";
	cfg.threads = threads;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	return dev;
}

static void test_thread_prepare_makes_contexts(void **state)
{
	struct uzram *dev;
	size_t without, with;

	(void)state;
	if (heap_in_use() == 0)
		skip(); /* a sanitizer's malloc: mallinfo2() sees nothing */
	dev = open_zstd(0);
	/* cluster 0's zspage exists: the threads rewrite the same bytes */
	first_io_grew(dev, true);
	without = first_io_grew(dev, false);
	with = first_io_grew(dev, true);
	/* a zstd compression and decompression context: 186 KiB at level 3 */
	assert_true(without >= 64 * 1024);
	assert_true(with < 1024);
	assert_int_equal(uzram_thread_prepare(NULL), -EINVAL);
	uzram_close(dev);
}

static void test_crew_ready_at_open(void **state)
{
	struct uzram *dev;
	size_t before, grew;

	(void)state;
	if (heap_in_use() == 0)
		skip();
	before = heap_in_use();
	dev = open_zstd(2);
	grew = heap_in_use() - before;
	/* each of the two threads holds its zstd contexts already */
	assert_true(grew >= 2 * 160 * 1024);
	uzram_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve_serves_stores),
		cmocka_unit_test(test_reserve_stops_at_limit),
		cmocka_unit_test(test_refill_empty_pool_fails_fast),
		cmocka_unit_test(test_refill_thread_serves_writes),
		cmocka_unit_test(test_refill_makes_whole_table),
		cmocka_unit_test(test_thread_prepare_makes_contexts),
		cmocka_unit_test(test_crew_ready_at_open),
	};

	return tu_run_tests(tests, NULL, NULL);
}
