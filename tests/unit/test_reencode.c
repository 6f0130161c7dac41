// SPDX-License-Identifier: MIT
/*
 * test_reencode.c - write fast, re-encode later (uzram_config.fast_algorithm,
 * src/recompress/reencode.c): the device ends at the final codec's density
 * (the same compressed bytes as a device of that codec alone), an age holds
 * young clusters back until the clock moves, reads and writes keep it
 * paced (one cluster a nap) until the device has been quiet, the config
 * is checked, a save racing the thread keeps every cluster, and a
 * model-based randomized run of writers, readers and the re-encoding thread
 * on shared clusters (partial writes of 16 KiB clusters included) never
 * reads stale or torn data and never loses a write (under TSan and ASan in
 * make test).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "store_check.h"
#include "core/core.h"

#define NPAGES 1024
/* one of the first 512 data pages (store_check.h) */
#define DATA(n) data_page((size_t)((n) % 512))

static struct uzram *open_fast(uint64_t size, uint32_t cluster, uint32_t age)
{
	struct uzram_config cfg;

	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.algorithm = "zstd";
	cfg.fast_algorithm = "lz4";
	cfg.fast_level = 8;
	cfg.cluster_size = cluster;
	cfg.reencode_age = age;
	return tu_open(&cfg, "fast lz4:8, then zstd");
}

/* Real data pages, a few incompressible and same-filled ones, and holes. */
static void fill(struct uzram *dev, uint8_t *ref)
{
	uint64_t seed = 5;
	uint8_t page[PG];

	for (uint64_t p = 0; p < NPAGES; p++) {
		if (p % 64 == 7) {
			fill_rand(page, PG, &seed);
		} else if (p % 64 == 9) {
			fill_same(page, PG, SAME_VALUE);
		} else if (p % 64 == 11) {
			continue;
		} else {
			memcpy(page, DATA(p), PG);
		}
		dev_write(dev, ref, page, PG, p * PG);
	}
}

/* The device's own codec, and the fast one's, as uzram_algorithm() says. */
static void test_density(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG), *ref2 = calloc(NPAGES, PG);
	struct uzram *fast = open_fast(NPAGES * PG, 0, 0);
	struct uzram *zstd = dev_open(NPAGES * PG, "zstd", 0, 0);
	struct uzram_stats f, z;

	(void)state;
	assert_non_null(ref);
	assert_non_null(ref2);
	assert_string_equal(uzram_algorithm(fast, 0), "lz4");
	assert_string_equal(uzram_algorithm(fast, 1), "zstd");
	fill(fast, ref);
	fill(zstd, ref2);
	assert_int_equal(uzram_reencode_wait(fast, 60000), 0);
	f = get_stats(fast);
	z = get_stats(zstd);
	/* every stored object is the one zstd alone would have made */
	assert_int_equal(f.compr_data_size, z.compr_data_size);
	assert_int_equal(f.huge_pages, z.huge_pages);
	/* all but the incompressible ones, kept raw and marked */
	assert_int_equal(f.pages_recompressed,
			 f.pages_stored - f.same_pages - z.huge_pages);
	check_dev(fast, ref, "after the re-encode");
	/* rewrites of re-encoded data are found unchanged */
	dev_write(fast, ref, DATA(3), PG, 3 * PG);
	assert_int_equal(get_stats(fast).pages_unchanged, 1);
	/* and a rewrite with new data is fast again, then re-encoded */
	dev_write(fast, ref, DATA(NPAGES + 1), PG, 3 * PG);
	dev_write(zstd, ref2, DATA(NPAGES + 1), PG, 3 * PG);
	assert_int_equal(uzram_reencode_wait(fast, 60000), 0);
	assert_int_equal(get_stats(fast).compr_data_size,
			 get_stats(zstd).compr_data_size);
	check_dev(fast, ref, "after the re-encode");
	uzram_close(fast);
	uzram_close(zstd);
	free(ref);
	free(ref2);
}

/* With an age, clusters wait until the device's clock has moved on. */
static void test_age(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG);
	/* the longest age, so that no slow machine reaches it by itself */
	struct uzram *dev = open_fast(NPAGES * PG, 0, 512);

	(void)state;
	assert_non_null(ref);
	fill(dev, ref);
	/* a clean pass, but nothing is 512 s old */
	assert_int_equal(uzram_reencode_wait(dev, 60000), 0);
	assert_int_equal(get_stats(dev).pages_recompressed, 0);
	/* the device's clock moved on by 600 s (private: its origin) */
	dev->clock0 -= 600;
	assert_int_equal(uzram_reencode_wait(dev, 60000), 0);
	assert_true(get_stats(dev).pages_recompressed > 0);
	check_dev(dev, ref, "after the re-encode");
	uzram_close(dev);
	free(ref);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Whether the device's last-I/O time (private: dev->io_ms) is now. */
static void assert_io_now(struct uzram *dev, const char *what)
{
	struct timespec ts;
	int64_t ms;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (ms - atomic_load(&dev->io_ms) > 1000)
		fail_msg("%s did not note the I/O", what);
}

/*
 * Reads slow the thread as writes do. Each uzram_read() and uzram_write()
 * notes the time (dev->io_ms); while it is recent, the thread re-encodes
 * one cluster a nap (PACE_US, 1 ms) at most. The time is held in the
 * future here after the writes, so that no gap in this thread's own I/O
 * (a loaded machine) lets the thread run free: all 1024 clusters (no age) would
 * then be done in a fraction of the 200 ms. Once the device is quiet it
 * catches up.
 */
static void test_reads(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG), page[PG];
	struct uzram *dev = open_fast(NPAGES * PG, 0, 0);
	uint64_t n;
	double t0;

	(void)state;
	assert_non_null(ref);
	atomic_store(&dev->io_ms, 0);
	assert_int_equal(uzram_read(dev, page, PG, 0), 0);
	assert_io_now(dev, "uzram_read");
	t0 = now_ms();
	fill(dev, ref); /* its writes pace the thread meanwhile */
	atomic_store(&dev->io_ms, INT64_MAX / 2);
	usleep(200 * 1000);
	n = get_stats(dev).pages_recompressed;
	/* one a nap, each nap 1 ms or more; 16 pages of slack */
	if ((double)n > now_ms() - t0 + 16)
		fail_msg("%llu pages re-encoded in %.0f ms of I/O",
			 (unsigned long long)n, now_ms() - t0);
	atomic_store(&dev->io_ms, 0);
	dev_write(dev, ref, DATA(1), PG, 1 * PG);
	assert_io_now(dev, "uzram_write");
	atomic_store(&dev->io_ms, 0);
	assert_int_equal(uzram_reencode_wait(dev, 60000), 0);
	assert_true(get_stats(dev).pages_recompressed > n + NPAGES / 2);
	check_dev(dev, ref, "after the re-encode");
	uzram_close(dev);
	free(ref);
}

static void test_config(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	static const char dict[512] = "a dictionary";

	(void)state;
	uzram_config_init(&cfg);
	cfg.size = 64 * PG;
	assert_null(cfg.fast_algorithm);
	cfg.fast_algorithm = "lz5";
	assert_int_equal(uzram_open(&cfg, &dev), -ENOENT);
	cfg.fast_algorithm = "lz4";
	cfg.fast_level = 65538;
	assert_int_equal(uzram_open(&cfg, &dev), -EINVAL);
	cfg.fast_level = 0;
	cfg.dict = dict;
	cfg.dict_size = sizeof dict;
	assert_int_equal(uzram_open(&cfg, &dev), -EINVAL);
	assert_null(dev);
	/* a device without one has no thread to wait for */
	cfg.fast_algorithm = NULL;
	cfg.dict = NULL;
	cfg.dict_size = 0;
	dev = tu_open(&cfg, "no fast algorithm");
	assert_int_equal(uzram_reencode_wait(dev, 10), -EINVAL);
	assert_int_equal(uzram_reencode_wait(NULL, 10), -EINVAL);
	uzram_close(dev);
	/* a config of the previous layout opens, without one */
	cfg.struct_size = offsetof(struct uzram_config, threads) +
			  sizeof(uint32_t);
	cfg.fast_algorithm = "nonsense past the old struct";
	dev = tu_open(&cfg, "0.3 layout");
	assert_null(dev->reenc);
	uzram_close(dev);
}

/*
 * A save while the thread re-encodes: the image holds every cluster, in
 * whichever codec it had when copied, and opens with both codecs.
 */
static void test_save_racing(void **state)
{
	char dir[] = "/tmp/uzram-test-reencode.XXXXXX", img[96];
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram *dev = open_fast(NPAGES * PG, 0, 0), *back = NULL;
	struct uzram_config cfg;

	(void)state;
	assert_non_null(ref);
	assert_non_null(mkdtemp(dir));
	snprintf(img, sizeof img, "%s/dev.img", dir);
	fill(dev, ref);
	/* no wait: the thread is at work (or about to be) during the save */
	if (uzram_save(dev, img, 0))
		fail_msg("uzram_save: %s", uzram_last_error());
	assert_int_equal(uzram_reencode_wait(dev, 60000), 0);
	check_dev(dev, ref, "after the save");
	uzram_close(dev);
	uzram_config_init(&cfg);
	cfg.image = img;
	back = tu_open(&cfg, "the image");
	assert_string_equal(uzram_algorithm(back, 0), "lz4");
	assert_string_equal(uzram_algorithm(back, 1), "zstd");
	check_dev(back, ref, "opened from the image");
	uzram_close(back);
	unlink(img);
	rmdir(dir);
	free(ref);
}

/*
 * The model. Each page has one owner, the only thread that writes it, and
 * a version it bumps on each write; version v of page p is a 16-byte
 * header (p, v) and corpus bytes picked by (p, v), so a page read back
 * names the version it holds and can be checked whole. Owners check their
 * own pages exactly; any thread checks any page: its bytes are those of
 * the version it names, never older than one it saw before, never newer
 * than the owner has begun writing. Clusters hold 4 pages, owned by
 * different threads, so most writes are partial read-modify-writes racing
 * the re-encode of their cluster and each other.
 */
#define MPAGES 512
#define CPAGES 4        /* pages a cluster */
#define WRITERS 3

static struct uzram *mdev;
static _Atomic uint64_t started[MPAGES];  /* the version being written */
static _Atomic bool mstop;
static _Atomic int mfail;

static void version_page(uint8_t *pg, uint64_t p, uint64_t v)
{
	memcpy(pg, DATA(p * 7919 + v * 104729), PG);
	memcpy(pg, &p, 8);
	memcpy(pg + 8, &v, 8);
}

/* Check page p read into pg; *seen: the newest version seen before. */
static bool page_ok(const uint8_t *pg, uint64_t p, uint64_t *seen)
{
	uint8_t want[PG];
	uint64_t hp, v;

	memcpy(&hp, pg, 8);
	memcpy(&v, pg + 8, 8);
	if (v == 0 && has_data(pg, PG) == 0)   /* never written */
		return *seen == 0;
	if (hp != p || v < *seen || v > atomic_load(&started[p]))
		return false;
	version_page(want, p, v);
	*seen = v;
	return !memcmp(want, pg, PG);
}

struct mthread {
	int id;
	uint64_t seed;
	uint64_t seen[MPAGES];
};

static void *mwriter(void *arg)
{
	struct mthread *t = arg;
	uint8_t pg[PG], got[PG];
	const uint64_t rounds = tu_scaled(6000);

	for (uint64_t k = 0; k < rounds && !atomic_load(&mfail); k++) {
		/* pages id, id + WRITERS, ...: one in each cluster's slots */
		uint64_t p = t->id + WRITERS * (tu_rand(&t->seed) %
						(MPAGES / WRITERS));
		uint64_t v = atomic_load(&started[p]) + 1;

		if (tu_rand(&t->seed) % 3) {
			atomic_store(&started[p], v);
			version_page(pg, p, v);
			if (uzram_write(mdev, pg, PG, p * PG))
				atomic_store(&mfail, 1);
			t->seen[p] = v;
		}
		if (uzram_read(mdev, got, PG, p * PG) ||
		    !page_ok(got, p, &t->seen[p]) ||
		    t->seen[p] != atomic_load(&started[p]))
			atomic_store(&mfail, 2);    /* own write lost */
	}
	return NULL;
}

static void *mreader(void *arg)
{
	struct mthread *t = arg;
	uint8_t buf[CPAGES * PG];

	while (!atomic_load(&mstop) && !atomic_load(&mfail)) {
		uint64_t c = tu_rand(&t->seed) % (MPAGES / CPAGES);

		if (uzram_read(mdev, buf, sizeof buf, c * CPAGES * PG)) {
			atomic_store(&mfail, 3);
			break;
		}
		for (uint64_t i = 0; i < CPAGES; i++)
			if (!page_ok(buf + i * PG, c * CPAGES + i,
				     &t->seen[c * CPAGES + i]))
				atomic_store(&mfail, 4);   /* stale, torn */
	}
	return NULL;
}

/* Keeps the re-encoder unpaced, so it races the writers all along. */
static void *mhurry(void *arg)
{
	(void)arg;
	while (!atomic_load(&mstop))
		(void)uzram_reencode_wait(mdev, 2);
	return NULL;
}

static void test_model_concurrent(void **state)
{
	static struct mthread w[WRITERS], r[2];
	pthread_t tw[WRITERS], tr[2], th;
	uint8_t got[PG];
	uint64_t seen;

	(void)state;
	mdev = open_fast(MPAGES * PG, CPAGES * PG, 0);
	atomic_store(&mstop, false);
	atomic_store(&mfail, 0);
	for (int i = 0; i < MPAGES; i++)
		atomic_store(&started[i], 0);
	assert_int_equal(pthread_create(&th, NULL, mhurry, NULL), 0);
	for (int i = 0; i < 2; i++) {
		r[i] = (struct mthread){ .id = i, .seed = 101 + (uint64_t)i };
		assert_int_equal(pthread_create(&tr[i], NULL, mreader, &r[i]), 0);
	}
	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct mthread){ .id = i, .seed = 7 + (uint64_t)i };
		assert_int_equal(pthread_create(&tw[i], NULL, mwriter, &w[i]), 0);
	}
	for (int i = 0; i < WRITERS; i++)
		pthread_join(tw[i], NULL);
	atomic_store(&mstop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(tr[i], NULL);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&mfail), 0);
	assert_int_equal(uzram_reencode_wait(mdev, 60000), 0);
	printf("   %llu pages re-encoded beside %d writers and 2 readers\n",
	       (unsigned long long)get_stats(mdev).pages_recompressed,
	       WRITERS);
	assert_true(get_stats(mdev).pages_recompressed > 0);
	/* every page holds its owner's last version */
	for (uint64_t p = 0; p < MPAGES; p++) {
		seen = atomic_load(&started[p]);
		assert_int_equal(uzram_read(mdev, got, PG, p * PG), 0);
		assert_true(page_ok(got, p, &seen));
		assert_int_equal(seen, atomic_load(&started[p]));
	}
	uzram_close(mdev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_density),
		cmocka_unit_test(test_age),
		cmocka_unit_test(test_reads),
		cmocka_unit_test(test_save_racing),
		cmocka_unit_test(test_model_concurrent),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
