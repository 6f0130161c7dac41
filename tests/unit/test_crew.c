// SPDX-License-Identifier: MIT
/*
 * test_crew.c - devices with a write crew (uzram_config.threads).
 *
 *  - a bad thread count is refused with a message and no device; an older
 *    caller's config (without the field) still opens, with none;
 *  - writes of every shape (whole clusters, partial head and tail, one
 *    cluster to many), with 1 to 3 threads and 4 KiB or 16 KiB clusters,
 *    read back exactly, and the counters agree with a device without
 *    threads given the same writes;
 *  - a large write that meets the memory limit half way fails with
 *    -ENOSPC naming an offset: every page before it holds the new bytes,
 *    the page at it the old ones, and each page after it all old or all
 *    new bytes (uzram.h's promise for devices with threads).
 *  - the lock figures: threads that fight over one cluster make waits
 *    counted with their time, and the figures stay once the threads exit.
 * The model test and test_threads also run with threads on some devices.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>

#include "uzram.h"
#include "testutil.h"

#define PG ((uint64_t)UZRAM_PAGE_SIZE)

TU_CORPUS_MIX(4u << 20, 4u << 20)

static struct uzram *open_dev(uint64_t size, uint32_t cluster,
			      uint32_t threads, uint64_t limit)
{
	struct uzram_config cfg;

	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.cluster_size = cluster;
	cfg.threads = threads;
	cfg.mem_limit = limit;
	return tu_open(&cfg, "open_dev");
}

static void test_bad_threads(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = (struct uzram *)&cfg;  /* must stay untouched */
	uint8_t page[PG];

	(void)state;
	uzram_config_init(&cfg);
	cfg.size = 1u << 20;
	cfg.threads = UZRAM_MAX_THREADS + 1;
	assert_int_equal(uzram_open(&cfg, &dev), -EINVAL);
	assert_ptr_equal(dev, (struct uzram *)&cfg);
	assert_non_null(strstr(uzram_last_error(), "threads"));

	/* a caller built before the field (0.2): its struct ends at image */
	cfg.struct_size = offsetof(struct uzram_config, dedup);
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	assert_int_equal(uzram_write(dev, corpus, 64 * PG, 0), 0);
	assert_int_equal(uzram_read(dev, page, PG, 63 * PG), 0);
	assert_memory_equal(page, corpus + 63 * PG, PG);
	uzram_close(dev);
}

static void check_same_stats(struct uzram *a, struct uzram *b)
{
	struct uzram_stats sa, sb;

	assert_int_equal(uzram_stats(a, &sa, sizeof sa), 0);
	assert_int_equal(uzram_stats(b, &sb, sizeof sb), 0);
	assert_int_equal(sa.pages_stored, sb.pages_stored);
	assert_int_equal(sa.same_pages, sb.same_pages);
	assert_int_equal(sa.huge_pages, sb.huge_pages);
	assert_int_equal(sa.compr_data_size, sb.compr_data_size);
	assert_int_equal(sa.pages_unchanged, sb.pages_unchanged);
}

static void roundtrip(uint32_t cluster, uint32_t threads, uint64_t seed)
{
	const uint64_t size = 6u << 20;
	struct uzram *dev = open_dev(size, cluster, threads, 0);
	struct uzram *ref = open_dev(size, cluster, 0, 0);
	uint8_t *model = calloc(1, size), *buf = malloc(size);
	uint64_t rng = seed, rounds = tu_scaled(200);

	assert_non_null(model);
	assert_non_null(buf);
	for (uint64_t k = 0; k < rounds; k++) {
		/* page-aligned or not, from one page to 1 MiB + a bit */
		uint64_t len = tu_rand(&rng) % 3 ? (1 + tu_rand(&rng) % 256) * PG
						 : 1 + tu_rand(&rng) % (PG << 8);
		uint64_t off = tu_rand(&rng) % (size - len);
		uint64_t src = tu_rand(&rng) % (corpus_len - len);

		if (tu_rand(&rng) % 2)
			off &= ~(PG - 1);
		assert_int_equal(uzram_write(dev, corpus + src, len, off), 0);
		assert_int_equal(uzram_write(ref, corpus + src, len, off), 0);
		memcpy(model + off, corpus + src, len);
	}
	assert_int_equal(uzram_read(dev, buf, size, 0), 0);
	assert_memory_equal(buf, model, size);
	check_same_stats(dev, ref);
	/* the same bytes again: nothing stored, on any thread */
	assert_int_equal(uzram_write(dev, model, size, 0), 0);
	assert_int_equal(uzram_write(ref, model, size, 0), 0);
	check_same_stats(dev, ref);
	uzram_close(dev);
	uzram_close(ref);
	free(model);
	free(buf);
}

static void test_roundtrip(void **state)
{
	(void)state;
	for (uint32_t threads = 1; threads <= 3; threads++) {
		roundtrip(0, threads, 17 + threads);
		roundtrip(16384, threads, 91 + threads);
	}
}

/* The offset in "write at offset N: ..." */
static uint64_t failed_offset(void)
{
	const char *msg = strstr(uzram_last_error(), "offset ");

	assert_non_null(msg);
	return strtoull(msg + 7, NULL, 10);
}

static void test_enospc(void **state)
{
	const uint64_t size = 8u << 20, npages = size / PG;
	struct uzram *dev = open_dev(size, 0, 2, 2u << 20);
	uint8_t *data = malloc(size), *buf = malloc(size), *old = malloc(size);
	uint64_t rng = 5, v, fail, newer = 0;

	(void)state;
	assert_non_null(data);
	assert_non_null(buf);
	assert_non_null(old);
	/* old bytes: same-filled pages, which take no allocator memory */
	for (uint64_t p = 0; p < npages; p++)
		memset(old + p * PG, (int)(p % 251) + 1, PG);
	assert_int_equal(uzram_write(dev, old, size, 0), 0);
	/* new bytes: random, so they cannot all fit in 2 MiB */
	for (uint64_t i = 0; i < size; i += 8) {
		v = tu_rand(&rng);
		memcpy(data + i, &v, 8);
	}
	assert_int_equal(uzram_write(dev, data, size, 0), -ENOSPC);
	fail = failed_offset();
	assert_true(fail % PG == 0);
	assert_true(fail > 0 && fail < size);
	assert_int_equal(uzram_read(dev, buf, size, 0), 0);
	assert_memory_equal(buf, data, fail);
	assert_memory_equal(buf + fail, old + fail, PG);
	for (uint64_t p = fail / PG + 1; p < npages; p++) {
		if (!memcmp(buf + p * PG, data + p * PG, PG)) {
			newer++;
			continue;
		}
		if (memcmp(buf + p * PG, old + p * PG, PG))
			fail_msg("page %llu is neither old nor new",
				 (unsigned long long)p);
	}
	printf("failed at page %llu, %llu later pages written\n",
	       (unsigned long long)(fail / PG), (unsigned long long)newer);
	uzram_close(dev);
	free(data);
	free(buf);
	free(old);
}

struct fighter {
	struct uzram *dev;
	_Atomic int *stop;
	int id, err;
};

/* Rewrite cluster 0 (the first 8 rewrite two at once), or read it. */
static void *fight(void *arg)
{
	struct fighter *f = arg;
	uint8_t buf[2 * PG];
	uint64_t k = 0;

	while (!atomic_load(f->stop) && !f->err) {
		size_t len = f->id % 2 ? 2 * PG : PG;

		if (f->id < 2) {
			memcpy(buf, corpus + (k++ % 64) * PG, len);
			f->err = uzram_write(f->dev, buf, len, 0);
		} else {
			f->err = uzram_read(f->dev, buf, len, 0);
		}
	}
	return NULL;
}

static uint64_t all_waits(struct uzram *dev, uint64_t *ns)
{
	struct uzram_stats st;

	assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
	*ns = st.slot_lock_wait_ns + st.slot_read_wait_ns +
	      st.class_lock_wait_ns + st.frame_wait_ns;
	return st.slot_lock_waits + st.slot_read_waits + st.class_lock_waits +
	       st.frame_waits;
}

static void test_lock_figures(void **state)
{
	struct uzram *dev = open_dev(1u << 20, 0, 0, 0);
	struct fighter f[4];
	pthread_t th[4];
	_Atomic int stop = 0;
	uint64_t w0, ns0, w1, ns1, w2, ns2;

	(void)state;
	w0 = all_waits(dev, &ns0);
	for (int i = 0; i < 4; i++) {
		f[i] = (struct fighter){ .dev = dev, .stop = &stop, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, fight, &f[i]), 0);
	}
	/* until a wait is counted (the threads take turns on any machine) */
	for (int polls = 0; (w1 = all_waits(dev, &ns1)) == w0; polls++) {
		if (polls == 1000000)
			break;
		sched_yield();
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(f[i].err, 0);
	}
	if (w1 == w0)
		fail_msg("four threads on one cluster never waited for a lock");
	assert_true(ns1 > ns0);
	/* the threads are gone; their figures are not */
	w2 = all_waits(dev, &ns2);
	assert_true(w2 >= w1);
	assert_true(ns2 >= ns1);
	uzram_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_threads),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_lock_figures),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
