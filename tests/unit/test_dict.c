// SPDX-License-Identifier: MIT
/*
 * test_dict.c - dictionaries (src/recompress/dict.c): round trips of
 * every state with a dictionary, for lz4 and zstd, in pages and clusters;
 * a device whose dictionary changes while older objects are stored (they
 * still read); the refusals (sizes, codecs without dictionaries, a corrupt zstd
 * dictionary, a third change with objects of the first still stored);
 * training, which keeps nothing on random data and reports what it
 * measured on real data; and writers racing dictionary changes.
 *
 * Dictionaries here are raw content (real bytes of the corpus, which
 * both codecs accept) or trained by the library itself.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "store_check.h"

#define NPAGES 1024

static const char *const algos[] = { "lz4", "zstd" };

/* A raw-content dictionary: data pages from the far end of the corpus. */
static uint8_t *raw_dict(size_t len, size_t first_page)
{
	uint8_t *d = malloc(len);

	assert_non_null(d);
	for (size_t off = 0; off < len; off += PG) {
		size_t n = len - off < PG ? len - off : PG;

		memcpy(d + off, data_page(first_page + off / PG), n);
	}
	return d;
}

static struct uzram *open_with(const char *algo, uint32_t cluster,
			       const void *dict, size_t dict_size)
{
	struct uzram_config cfg;

	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	cfg.algorithm = algo;
	cfg.cluster_size = cluster;
	cfg.dict = dict;
	cfg.dict_size = dict_size;
	return tu_open(&cfg, "open_with");
}

/* Every state: data, same-filled, raw (random), holes, partial writes. */
static void fill_states(struct uzram *dev, uint8_t *ref, size_t first)
{
	uint64_t seed = 21, p;
	uint8_t page[PG];

	for (p = 0; p < 256; p++)
		dev_write(dev, ref, data_page(first + p), PG, p * PG);
	for (; p < 320; p++) {
		fill_same(page, PG, SAME_VALUE + p % 3);
		dev_write(dev, ref, page, PG, p * PG);
	}
	for (; p < 352; p++) {
		fill_rand(page, PG, &seed);
		dev_write(dev, ref, page, PG, p * PG);
	}
	dev_write(dev, ref, data_page(first + 400), 1000, 500 * PG + 77);
	dev_write(dev, ref, data_page(first + 401), 3 * PG + 5, 700 * PG - 9);
	assert_int_equal(uzram_discard(dev, 16 * PG, 32 * PG), 0);
	memset(ref + 32 * PG, 0, 16 * PG);
}

static void test_roundtrip(void **state)
{
	static const uint32_t clusters[] = { 4096, 16384 };
	uint8_t *ref = calloc(NPAGES, PG), *dict = raw_dict(32768, 3000);

	(void)state;
	assert_non_null(ref);
	for (size_t a = 0; a < 2; a++)
		for (size_t c = 0; c < 2; c++) {
			struct uzram *dev = open_with(algos[a], clusters[c],
						      dict, 32768);
			struct uzram_dict_info info;

			memset(ref, 0, NPAGES * PG);
			fill_states(dev, ref, 0);
			check_dev(dev, ref, algos[a]);
			check_read(dev, ref, 5 * PG + 3, 2 * PG);
			assert_int_equal(uzram_dict_info(dev, 0, &info), 0);
			assert_int_equal(info.dict_size, 32768);
			assert_true(info.pages > 0);
			assert_int_equal(info.pages_previous, 0);
			uzram_close(dev);
		}
	free(dict);
	free(ref);
}

/* Two dictionaries and none, with objects of each stored: all read. */
static void test_change(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG), *a = raw_dict(16384, 3000),
		*b = raw_dict(20000, 3100);
	struct uzram_dict_info info;

	(void)state;
	assert_non_null(ref);
	for (size_t i = 0; i < 2; i++) {
		struct uzram *dev = open_with(algos[i], 4096, NULL, 0);

		memset(ref, 0, NPAGES * PG);
		fill_states(dev, ref, 0);               /* no dictionary */
		assert_int_equal(uzram_set_dictionary(dev, 0, a, 16384, 0), 0);
		for (uint64_t p = 100; p < 200; p++)    /* with a */
			dev_write(dev, ref, data_page(1000 + p), PG, p * PG);
		check_dev(dev, ref, "dictionary a over none");
		assert_int_equal(uzram_dict_info(dev, 0, &info), 0);
		assert_int_equal(info.dict_size, 16384);
		assert_int_equal(info.pages, 100);
		assert_true(info.pages_previous >= 100);

		/* b would take the bank of none, still in use: refused */
		assert_int_equal(uzram_set_dictionary(dev, 0, b, 20000, 0),
				 -EBUSY);
		assert_non_null(strstr(uzram_last_error(), "re-encode"));
		check_dev(dev, ref, "after a refused change");

		/* re-encoded, the older objects move to a, and b comes in */
		assert_int_equal(uzram_set_dictionary(dev, 0, b, 20000,
						      UZRAM_DICT_REENCODE), 0);
		check_dev(dev, ref, "dictionary b, everything re-encoded");
		assert_int_equal(uzram_dict_info(dev, 0, &info), 0);
		assert_int_equal(info.dict_size, 20000);
		assert_int_equal(info.pages_previous, 0);

		/* and back to none, leaving b's objects as they are */
		for (uint64_t p = 200; p < 220; p++)
			dev_write(dev, ref, data_page(2000 + p), PG, p * PG);
		assert_int_equal(uzram_set_dictionary(dev, 0, NULL, 0, 0), 0);
		dev_write(dev, ref, data_page(5), PG, 900 * PG);
		check_dev(dev, ref, "no dictionary again");
		assert_int_equal(uzram_dict_info(dev, 0, &info), 0);
		assert_int_equal(info.dict_size, 0);
		assert_true(info.pages_previous > 0);
		uzram_close(dev);
	}
	free(a);
	free(b);
	free(ref);
}

/* A secondary algorithm with a dictionary: recompression reads back. */
static void test_recompress_dict(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG), *d = raw_dict(65536, 3000);
	struct uzram *dev = open_with("lz4", 4096, NULL, 0);
	struct uzram_dict_info info;

	(void)state;
	fill_states(dev, ref, 0);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 3), 1);
	assert_int_equal(uzram_set_dictionary(dev, 1, d, 65536, 0), 0);
	assert_true(uzram_recompress(dev, 1, 0, 0) > 0);
	check_dev(dev, ref, "recompressed with a dictionary");
	assert_int_equal(uzram_dict_info(dev, 1, &info), 0);
	assert_int_equal(info.dict_size, 65536);
	assert_true(info.pages > 0);
	assert_int_equal(uzram_dict_info(dev, 2, &info), -EINVAL);
	uzram_close(dev);
	free(d);
	free(ref);
}

static void test_refused(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint8_t *d = raw_dict(2u << 20, 0), *ref = calloc(NPAGES, PG);
	/* zstd's dictionary magic, then tables that are not tables */
	uint8_t bad[4096];
	uint64_t seed = 5;

	(void)state;
	assert_non_null(ref);
	fill_rand(bad, sizeof bad, &seed);
	memcpy(bad, "\x37\xa4\x30\xec", 4);
	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	cfg.dict = d;
	cfg.dict_size = 100;
	assert_int_equal(uzram_open(&cfg, &dev), -EINVAL);
	assert_non_null(strstr(uzram_last_error(), "dictionary of 100 bytes"));
	cfg.dict_size = 2u << 20;
	assert_int_equal(uzram_open(&cfg, &dev), -EINVAL);
	cfg.dict_size = 4096;
	cfg.algorithm = "deflate";
	assert_int_equal(uzram_open(&cfg, &dev), -EOPNOTSUPP);
	assert_non_null(strstr(uzram_last_error(), "takes no dictionary"));
	cfg.algorithm = "lz4hc";
	assert_int_equal(uzram_open(&cfg, &dev), -EOPNOTSUPP);
	cfg.algorithm = "zstd";
	cfg.dict = bad;
	cfg.dict_size = sizeof bad;
	assert_int_equal(uzram_open(&cfg, &dev), -EINVAL);
	assert_null(dev);

	/* on a live device: refused, and nothing changes */
	dev = open_with("zstd", 4096, NULL, 0);
	fill_states(dev, ref, 0);
	assert_int_equal(uzram_set_dictionary(dev, 0, bad, sizeof bad, 0),
			 -EINVAL);
	assert_int_equal(uzram_set_dictionary(dev, 0, d, 10, 0), -EINVAL);
	assert_int_equal(uzram_set_dictionary(dev, 0, NULL, 10, 0), -EINVAL);
	assert_int_equal(uzram_set_dictionary(dev, 0, d, 4096, 8), -EINVAL);
	assert_int_equal(uzram_set_dictionary(dev, 1, d, 4096, 0), -EINVAL);
	assert_int_equal(uzram_set_dictionary(NULL, 0, d, 4096, 0), -EINVAL);
	assert_int_equal(uzram_train_dictionary(dev, 0, 100, 0, NULL), -EINVAL);
	assert_int_equal(uzram_train_dictionary(dev, 3, 0, 0, NULL), -EINVAL);
	check_dev(dev, ref, "after refused dictionaries");
	uzram_close(dev);
	free(d);
	free(ref);
}

/* Random data: libzstd trains nothing useful, and nothing is kept. */
static void test_train_random(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG), page[PG];
	struct uzram *dev = open_with("zstd", 4096, NULL, 0);
	struct uzram_train_report rep;
	struct uzram_dict_info info;
	uint64_t seed = 77;
	int r;

	(void)state;
	assert_non_null(ref);
	for (uint64_t p = 0; p < NPAGES; p++) {
		/* half-random pages: they compress, but share nothing */
		fill_rand(page, PG, &seed);
		memset(page + PG / 2, 0, PG / 2);
		dev_write(dev, ref, page, PG, p * PG);
	}
	r = uzram_train_dictionary(dev, 0, 16384, UZRAM_DICT_REENCODE, &rep);
	printf("   random: %d (%s), %llu -> %llu bytes\n", r,
	       uzram_last_error(), (unsigned long long)rep.bytes_without,
	       (unsigned long long)rep.bytes_with);
	assert_int_equal(r, 0);
	assert_int_equal(rep.kept, 0);
	assert_int_equal(rep.pages_reencoded, 0);
	assert_int_equal(uzram_dict_info(dev, 0, &info), 0);
	assert_int_equal(info.dict_size, 0);
	check_dev(dev, ref, "after a dictionary not kept");
	uzram_close(dev);
	free(ref);
}

/*
 * Real data: whatever the corpus, the report is consistent with what was
 * kept, and the device reads back; a kept dictionary re-encodes it all.
 */
static void test_train_real(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram_train_report rep;
	struct uzram_dict_info info;

	(void)state;
	assert_non_null(ref);
	for (size_t a = 0; a < 2; a++) {
		struct uzram *dev = open_with(algos[a], 4096, NULL, 0);
		int r;

		memset(ref, 0, NPAGES * PG);
		for (uint64_t p = 0; p < NPAGES; p++)
			dev_write(dev, ref, data_page(p), PG, p * PG);
		r = uzram_train_dictionary(dev, 0, 0, UZRAM_DICT_REENCODE,
					   &rep);
		printf("   %s: kept %d, %llu -> %llu bytes, dict %llu, %llu "
		       "us, %llu pages re-encoded\n", algos[a], rep.kept,
		       (unsigned long long)rep.bytes_without,
		       (unsigned long long)rep.bytes_with,
		       (unsigned long long)rep.dict_size,
		       (unsigned long long)rep.train_us,
		       (unsigned long long)rep.pages_reencoded);
		assert_true(r == 0 || r == 1);
		assert_int_equal(rep.kept, r);
		assert_true(rep.train_bytes > 0 && rep.test_bytes > 0);
		assert_int_equal(uzram_dict_info(dev, 0, &info), 0);
		if (r) {
			assert_true(rep.bytes_with * 100 <=
				    rep.bytes_without * (100 - UZRAM_DICT_MIN_GAIN));
			assert_int_equal(info.dict_size, rep.dict_size);
			assert_int_equal(info.pages_previous, 0);
			assert_int_equal(rep.pages_reencoded, info.pages);
		} else {
			assert_int_equal(info.dict_size, 0);
		}
		check_dev(dev, ref, algos[a]);
		uzram_close(dev);
	}
	free(ref);
}

/*
 * Objects written back to a backing store keep the dictionary that made
 * them; re-encoding does not fetch them, so a change that would take that
 * dictionary away is refused, and every byte still reads back.
 */
static void test_backed(void **state)
{
	uint8_t *ref = calloc(NPAGES, PG), *a = raw_dict(16384, 3000),
		*b = raw_dict(16384, 3100);
	char dir[] = "/tmp/uzram-test-dict.XXXXXX", backing[64];
	struct uzram_config cfg;
	struct uzram *dev = NULL;

	(void)state;
	assert_non_null(ref);
	assert_non_null(mkdtemp(dir));
	snprintf(backing, sizeof backing, "%s/backing", dir);
	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	cfg.backing = backing;
	cfg.dict = a;
	cfg.dict_size = 16384;
	if (uzram_open(&cfg, &dev))
		fail_msg("uzram_open with a backing file: %s", uzram_last_error());
	for (uint64_t p = 0; p < 256; p++)
		dev_write(dev, ref, data_page(p), PG, p * PG);
	assert_true(uzram_writeback(dev, 0, 0, 255, 0) > 0);
	/* b goes into the free bank: fine; none again would empty a's */
	assert_int_equal(uzram_set_dictionary(dev, 0, b, 16384,
					      UZRAM_DICT_REENCODE), 0);
	assert_int_equal(uzram_set_dictionary(dev, 0, NULL, 0,
					      UZRAM_DICT_REENCODE), -EBUSY);
	assert_non_null(strstr(uzram_last_error(), "backing store"));
	check_dev(dev, ref, "written back under a dictionary that stays");
	/* rewritten, they leave the old dictionary: the change goes through */
	for (uint64_t p = 0; p < 256; p++)
		dev_write(dev, ref, data_page(300 + p), PG, p * PG);
	assert_int_equal(uzram_set_dictionary(dev, 0, NULL, 0,
					      UZRAM_DICT_REENCODE), 0);
	check_dev(dev, ref, "after the change");
	uzram_close(dev);
	unlink(backing);
	rmdir(dir);
	free(a);
	free(b);
	free(ref);
}

/*
 * Writers and readers of their own regions while another thread changes
 * the dictionary again and again, re-encoding: no write may be lost, no
 * read may fail, whatever interleaving.
 */
static struct uzram *rdev;
static atomic_int rstop, rfail;

struct racer {
	int id;
	uint8_t *ref;
};

static void *race_writer(void *arg)
{
	struct racer *w = arg;
	uint64_t rng = 99 + (uint64_t)w->id, base = (uint64_t)w->id * 256;
	uint8_t buf[PG];

	while (!atomic_load(&rstop)) {
		uint64_t p = base + tu_rand(&rng) % 256;
		const uint8_t *src = data_page(tu_rand(&rng) % 1024);

		if (uzram_write(rdev, src, PG, p * PG)) {
			atomic_store(&rfail, 1);
			break;
		}
		memcpy(w->ref + (p - base) * PG, src, PG);
		p = base + tu_rand(&rng) % 256;
		if (uzram_read(rdev, buf, PG, p * PG) ||
		    memcmp(buf, w->ref + (p - base) * PG, PG)) {
			atomic_store(&rfail, 2);
			break;
		}
	}
	return NULL;
}

static void test_race(void **state)
{
	uint8_t *a = raw_dict(8192, 3000), *b = raw_dict(12288, 3200);
	struct racer w[2];
	pthread_t th[2];
	uint8_t *buf = malloc(256 * PG);
	unsigned long rounds = tu_scaled(40);

	(void)state;
	assert_non_null(buf);
	rdev = open_with("lz4", 4096, NULL, 0);
	atomic_store(&rstop, 0);
	atomic_store(&rfail, 0);
	for (int i = 0; i < 2; i++) {
		w[i].id = i;
		w[i].ref = calloc(256, PG);
		assert_non_null(w[i].ref);
		assert_int_equal(pthread_create(&th[i], NULL, race_writer,
						&w[i]), 0);
	}
	for (unsigned long k = 0; k < rounds && !atomic_load(&rfail); k++) {
		const uint8_t *d = k % 3 == 0 ? a : k % 3 == 1 ? b : NULL;
		size_t len = k % 3 == 0 ? 8192 : k % 3 == 1 ? 12288 : 0;

		assert_int_equal(uzram_set_dictionary(rdev, 0, d, len,
						      UZRAM_DICT_REENCODE), 0);
	}
	atomic_store(&rstop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&rfail), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(uzram_read(rdev, buf, 256 * PG,
					    (uint64_t)i * 256 * PG), 0);
		assert_memory_equal(buf, w[i].ref, 256 * PG);
		free(w[i].ref);
	}
	uzram_close(rdev);
	free(buf);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_change),
		cmocka_unit_test(test_recompress_dict),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_train_random),
		cmocka_unit_test(test_train_real),
		cmocka_unit_test(test_backed),
		cmocka_unit_test(test_race),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
