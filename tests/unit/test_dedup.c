// SPDX-License-Identifier: MIT
/*
 * test_dedup.c - identical clusters stored once (cfg.dedup, dedup.c): a hit
 * takes no new object, equal hash bits over different bytes never share
 * (a collision forced through the index's own calls, also from the buffer
 * a partial write merges in), a write into one
 * sharing cluster leaves the others as they were, the last reference frees
 * the object whichever way it goes (rewrite, discard, write-zeroes,
 * close), a hit succeeds at the memory limit, compaction moves shared
 * objects, recompression and a dictionary change re-encode a shared object
 * once for all its clusters, writeback writes a shared object once and
 * backing store compaction moves it once, an image keeps the sharing (of
 * written-back objects too), 2 writers, readers, compaction,
 * recompression, writeback and backing compaction run together on shared
 * clusters (for TSan), and 2 writers of unique data grow the index
 * together without losing an entry.
 *
 * Every check compares the whole device with a reference copy
 * (store_check.h); object counts come from the allocator itself.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <xxhash.h>

#include "store_check.h"
#include "../fuzz/image_fixup.h"
#include "dedup/dedup.h"
#include "image/image.h"
#include "core/core.h"
#include "zpool/zpool.h"

#define NPAGES 1024

static struct uzram *dd_open(uint64_t npages, uint64_t limit,
			     const char *backing, uint32_t cluster)
{
	struct uzram_config cfg;

	uzram_config_init(&cfg);
	cfg.size = npages * PG;
	cfg.mem_limit = limit;
	cfg.backing = backing;
	cfg.cluster_size = cluster;
	cfg.dedup = 1;
	return tu_open(&cfg, "dd_open, with dedup");
}

/* Objects the allocator holds: the truth about what is stored. */
static uint64_t objects(struct uzram *dev)
{
	struct zpool_stats zs;

	zpool_stats(dev->pool, &zs);
	return zs.objects;
}

static void test_hit(void **state)
{
	struct uzram *dev = dd_open(NPAGES, 0, NULL, 0);
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram_stats one, st;

	(void)state;
	assert_non_null(ref);
	dev_write(dev, ref, data_page(0), PG, 0);
	one = get_stats(dev);
	assert_int_equal(objects(dev), 1);
	for (uint64_t p = 1; p < 8; p++)
		dev_write(dev, ref, data_page(0), PG, p * 7 * PG);
	st = get_stats(dev);
	assert_int_equal(objects(dev), 1);
	assert_int_equal(st.pages_stored, 8);
	assert_int_equal(st.pages_deduped, 7);
	assert_int_equal(st.dedup_bytes_saved, 7 * one.compr_data_size);
	assert_int_equal(st.compr_data_size, one.compr_data_size);
	assert_true(st.dedup_index_bytes > 0);
	/* a different page is a miss */
	dev_write(dev, ref, data_page(1), PG, 100 * PG);
	assert_int_equal(objects(dev), 2);
	assert_int_equal(get_stats(dev).pages_deduped, 7);
	/* rewriting a sharing cluster with its own bytes changes nothing */
	dev_write(dev, ref, data_page(0), PG, 7 * PG);
	assert_int_equal(get_stats(dev).pages_unchanged, 1);
	assert_int_equal(objects(dev), 2);
	check_dev(dev, ref, "eight clusters sharing one object");
	/* a raw (incompressible) cluster is shared too */
	{
		uint8_t page[PG];
		uint64_t seed = 3;

		fill_rand(page, PG, &seed);
		dev_write(dev, ref, page, PG, 200 * PG);
		dev_write(dev, ref, page, PG, 201 * PG);
		st = get_stats(dev);
		assert_int_equal(st.huge_pages, 2);
		assert_int_equal(st.pages_deduped, 8);
		assert_int_equal(objects(dev), 3);
	}
	check_dev(dev, ref, "a raw cluster shared");
	free(ref);
	uzram_close(dev);
}

/*
 * Equal hash, different bytes: no XXH3 collision can be found in a test's
 * time, so the index is asked directly, with page 1's bytes and page 0's
 * hash; it must compare the bytes and say no. Then the same with the bytes
 * of page 0 (the hit), to show the call itself works.
 */
static void test_collision(void **state)
{
	struct uzram *dev = dd_open(NPAGES, 0, NULL, 0);
	uint8_t *ref = calloc(NPAGES, PG);
	uint64_t h0 = XXH3_64bits(data_page(0), PG);
	struct store_scratch *t = store_scratch_get(PG);
	struct content c = { .bank = -1 };

	(void)state;
	assert_non_null(ref);
	assert_non_null(t);
	dev_write(dev, ref, data_page(0), PG, 0);
	assert_false(dedup_find(dev, data_page(1), PG, h0, t, &c));
	assert_int_equal(get_stats(dev).pages_deduped, 0);
	/*
	 * The same from the thread's merge buffer, where a partial write
	 * builds its cluster: a candidate decoded over it would compare
	 * equal to itself (seen in test_model as a zeroed page that read
	 * back as another page's bytes).
	 */
	memcpy(t->plain, data_page(1), PG);
	assert_false(dedup_find(dev, t->plain, PG, h0, t, &c));
	assert_memory_equal(t->plain, data_page(1), PG);
	assert_int_equal(get_stats(dev).pages_deduped, 0);
	assert_true(dedup_find(dev, data_page(0), PG, h0, t, &c));
	assert_int_equal(get_stats(dev).pages_deduped, 1);
	assert_true(c.flags & SLOT_SHARED);
	content_free(dev, &c);     /* give the reference back */
	assert_int_equal(get_stats(dev).pages_deduped, 0);
	assert_int_equal(objects(dev), 1);
	/* and a real write of page 1 stores a new object */
	dev_write(dev, ref, data_page(1), PG, PG);
	assert_int_equal(objects(dev), 2);
	check_dev(dev, ref, "a forced collision");
	free(ref);
	uzram_close(dev);
}

/* A write into one of the sharing clusters changes only that one. */
static void test_copy_on_write(void **state)
{
	struct uzram *dev = dd_open(NPAGES, 0, NULL, 0);
	uint8_t *ref = calloc(NPAGES, PG), byte = data_page(2)[100] ^ 0xff;

	(void)state;
	assert_non_null(ref);
	for (uint64_t p = 0; p < 4; p++)
		dev_write(dev, ref, data_page(2), PG, p * PG);
	dev_write(dev, ref, data_page(3), PG, PG);          /* whole */
	dev_write(dev, ref, &byte, 1, 2 * PG + 100);         /* partial */
	assert_int_equal(uzram_write_zeroes(dev, 64, 3 * PG, 0), 0);
	memset(ref + 3 * PG, 0, 64);
	check_dev(dev, ref, "three of four sharing clusters rewritten");
	assert_int_equal(get_stats(dev).pages_deduped, 0);
	assert_int_equal(objects(dev), 4);
	/* a partial write that makes a cluster equal to a stored one shares */
	dev_write(dev, ref, data_page(2), 64, 3 * PG);
	assert_int_equal(get_stats(dev).pages_deduped, 1);
	assert_int_equal(objects(dev), 3);
	check_dev(dev, ref, "a partial write back to the shared bytes");
	free(ref);
	uzram_close(dev);
}

/* The object goes with its last reference, whichever call drops it. */
static void test_last_reference(void **state)
{
	struct uzram *dev = dd_open(NPAGES, 0, NULL, 0);
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram_stats st;

	(void)state;
	assert_non_null(ref);
	for (uint64_t p = 0; p < 4; p++)
		dev_write(dev, ref, data_page(4), PG, p * PG);
	assert_int_equal(objects(dev), 1);
	/* the slot that stored the object goes first */
	assert_int_equal(uzram_discard(dev, PG, 0), 0);
	memset(ref, 0, PG);
	assert_int_equal(uzram_write_zeroes(dev, PG, PG, 0), 0);
	memset(ref + PG, 0, PG);
	assert_int_equal(uzram_write_zeroes(dev, PG, 2 * PG,
					    UZRAM_ZERO_NO_HOLE), 0);
	memset(ref + 2 * PG, 0, PG);
	st = get_stats(dev);
	assert_int_equal(st.pages_deduped, 0);
	assert_int_equal(st.dedup_bytes_saved, 0);
	assert_int_equal(objects(dev), 1);
	check_dev(dev, ref, "one reference left");
	/* the last one, by a rewrite with other bytes */
	dev_write(dev, ref, data_page(5), PG, 3 * PG);
	assert_int_equal(objects(dev), 1);
	/* and page 4 is no longer found: storing it again makes an object */
	dev_write(dev, ref, data_page(4), PG, 9 * PG);
	assert_int_equal(objects(dev), 2);
	assert_int_equal(get_stats(dev).pages_deduped, 0);
	check_dev(dev, ref, "the shared object freed");
	/* close with sharing in place: ASan and the pool see no leak */
	for (uint64_t p = 10; p < 20; p++)
		dev_write(dev, ref, data_page(5), PG, p * PG);
	assert_int_equal(get_stats(dev).pages_deduped, 10);
	free(ref);
	uzram_close(dev);
}

/* A hit needs no memory: it succeeds at the limit, new data does not. */
static void test_limit(void **state)
{
	struct uzram *dev = dd_open(NPAGES, 192 * 1024, NULL, 0);
	uint8_t *ref = calloc(NPAGES, PG), page[PG];
	uint64_t seed = 12, p;

	(void)state;
	assert_non_null(ref);
	p = fill_to_limit(dev, ref, NPAGES, 11);
	assert_true(p > 4);
	fill_rand(page, PG, &seed);
	check_dev(dev, ref, "filled to the limit");
	/* the same bytes elsewhere: a hit, at the limit */
	for (uint64_t q = 0; q < 4; q++)
		dev_write(dev, ref, ref, PG, (p + 1 + q) * PG);
	assert_int_equal(get_stats(dev).pages_deduped, 4);
	assert_int_equal(uzram_write(dev, page, PG, (p + 10) * PG), -ENOSPC);
	check_dev(dev, ref, "hits at the limit, and new data refused");
	free(ref);
	uzram_close(dev);
}

/* Shared objects move with compaction; every reader still finds them. */
static void test_compaction(void **state)
{
	struct uzram *dev = dd_open(NPAGES, 0, NULL, 0);
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram_stats st;

	(void)state;
	assert_non_null(ref);
	/* unique pages interleaved with copies of 16 shared ones */
	for (uint64_t p = 0; p < 512; p++)
		dev_write(dev, ref, data_page(p % 2 ? 100 + p : p % 32), PG,
			  p * PG);
	/* free most unique pages: their zspages become sparse */
	for (uint64_t p = 1; p < 512; p += 2)
		if (p % 8 != 1) {
			assert_int_equal(uzram_discard(dev, PG, p * PG), 0);
			memset(ref + p * PG, 0, PG);
		}
	assert_true(uzram_compact(dev) >= 0);
	st = get_stats(dev);
	assert_true(st.pages_compacted > 0);
	assert_int_equal(st.pages_deduped, 256 - 16);
	check_dev(dev, ref, "after compaction");
	/* hits on the moved objects */
	for (uint64_t p = 600; p < 632; p++)
		dev_write(dev, ref, data_page(p % 16 * 2), PG, p * PG);
	assert_int_equal(get_stats(dev).pages_deduped, 256 - 16 + 32);
	check_dev(dev, ref, "hits on moved objects");
	free(ref);
	uzram_close(dev);
}

/* compr_data_size of a device without dedup holding pages, recompressed */
static uint64_t recompressed_size(const int *pages, int n)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint64_t size;

	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	for (int i = 0; i < n; i++)
		assert_int_equal(uzram_write(dev, data_page(pages[i]), PG,
					     (uint64_t)i * PG), 0);
	assert_int_equal(uzram_recompress(dev, 1, 0, 0), n);
	size = get_stats(dev).compr_data_size;
	uzram_close(dev);
	return size;
}

/*
 * A shared object is re-encoded once for all its clusters: they all name
 * the new object, the old one is freed, the counters count the new one
 * once, and a rewrite of one leaves the others intact.
 */
static void test_recompress(void **state)
{
	struct uzram *dev = dd_open(NPAGES, 0, NULL, 0);
	uint8_t *ref = calloc(NPAGES, PG);
	const int both[] = { 6, 7 };
	uint64_t one = recompressed_size(both, 1);
	uint64_t two = recompressed_size(both, 2);
	const int n = 8;
	struct uzram_stats st;

	(void)state;
	assert_non_null(ref);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 0), 1);
	for (int i = 0; i < n; i++)
		dev_write(dev, ref, data_page(6), PG, (uint64_t)(3 * i + 1) * PG);
	dev_write(dev, ref, data_page(7), PG, 0);
	assert_int_equal(get_stats(dev).pages_deduped, n - 1);
	assert_int_equal(uzram_recompress(dev, 1, 0, 0), n + 1);
	st = get_stats(dev);
	assert_int_equal(st.pages_recompressed, n + 1);
	assert_int_equal(st.pages_deduped, n - 1);
	assert_int_equal(st.compr_data_size, two);
	assert_int_equal(st.dedup_bytes_saved, (uint64_t)(n - 1) * one);
	assert_int_equal(objects(dev), 2);
	check_dev(dev, ref, "a shared object recompressed");
	/* nothing is left for a second run */
	assert_int_equal(uzram_recompress(dev, 1, 0, 0), 0);
	/* copy on write still holds on the new object */
	dev_write(dev, ref, data_page(12), PG, 4 * PG);
	assert_int_equal(uzram_discard(dev, PG, 7 * PG), 0);
	memset(ref + 7 * PG, 0, PG);
	st = get_stats(dev);
	assert_int_equal(st.pages_deduped, n - 3);
	assert_int_equal(st.dedup_bytes_saved, (uint64_t)(n - 3) * one);
	check_dev(dev, ref, "one of the recompressed clusters rewritten");
	/* a recompressed object has left the index: a copy is a new object */
	dev_write(dev, ref, data_page(6), PG, 2 * PG);
	assert_int_equal(get_stats(dev).pages_deduped, n - 3);
	check_dev(dev, ref, "after recompression");
	free(ref);
	uzram_close(dev);
}

/* Shared objects stay in memory; once alone, they are written back. */
static struct uzram *image_open_dedup(const char *img, uint32_t dedup,
				      int *err);

/* The place on the backing store of written-back cluster idx. */
static uint64_t backed_place(struct uzram *dev, uint64_t idx)
{
	struct slot *s = slot_peek(dev, idx);

	if (!s) {
		fail_msg("cluster %llu has no slot", (unsigned long long)idx);
		return 0;
	}
	assert_int_equal(slot_state(s), SLOT_BACKED);
	return s->val;
}

/*
 * Writeback writes a shared object once: all its clusters name one place
 * on the backing store, counted as deduplicated there; a rewrite or a
 * discard of one leaves the others as they were, and the last reference
 * frees the place.
 */
static void test_writeback(void **state)
{
	char path[] = "/tmp/uzram-dedup-XXXXXX";
	int fd = mkstemp(path);
	struct uzram *dev;
	uint8_t *ref = calloc(NPAGES, PG);
	struct uzram_stats before, st;
	uint64_t shared;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	dev = dd_open(NPAGES, 0, path, 0);
	unlink(path);
	assert_non_null(ref);
	for (uint64_t p = 0; p < 8; p++)
		dev_write(dev, ref, data_page(8), PG, 2 * p * PG);
	dev_write(dev, ref, data_page(9), PG, PG);
	before = get_stats(dev);
	assert_int_equal(before.pages_deduped, 7);
	shared = before.dedup_bytes_saved / 7;
	assert_int_equal(uzram_writeback(dev, 0, 0, NPAGES - 1, 0), 9);
	st = get_stats(dev);
	assert_int_equal(objects(dev), 0);
	assert_int_equal(st.compr_data_size, 0);
	assert_int_equal(st.bd_count, 9);
	assert_int_equal(st.bd_writes, 2);   /* two objects written */
	assert_int_equal(st.bd_bytes, before.compr_data_size);
	assert_int_equal(st.pages_deduped, 7);
	assert_int_equal(st.dedup_bytes_saved, before.dedup_bytes_saved);
	for (uint64_t p = 1; p < 8; p++)
		assert_int_equal(backed_place(dev, 2 * p), backed_place(dev, 0));
	check_dev(dev, ref, "a shared object written back once");

	/* copy on write: the others still read the shared place */
	dev_write(dev, ref, data_page(10), PG, 0);
	assert_int_equal(get_stats(dev).pages_deduped, 6);
	for (uint64_t p = 1; p < 7; p++)
		assert_int_equal(uzram_discard(dev, PG, 2 * p * PG), 0);
	memset(ref + 2 * PG, 0, 12 * PG);
	st = get_stats(dev);
	assert_int_equal(st.pages_deduped, 0);
	assert_int_equal(st.dedup_bytes_saved, 0);
	assert_int_equal(st.bd_count, 2);
	check_dev(dev, ref, "a shared place rewritten and discarded");
	/* the last reference gives the place back */
	assert_int_equal(uzram_discard(dev, PG, 14 * PG), 0);
	memset(ref + 14 * PG, 0, PG);
	st = get_stats(dev);
	assert_int_equal(st.bd_count, 1);
	assert_int_equal(st.bd_bytes, before.compr_data_size - shared);
	check_dev(dev, ref, "the last reference to a shared place gone");
	free(ref);
	uzram_close(dev);
}

/*
 * Compaction of the backing store moves a shared place once, for all its
 * clusters, and an image of the device keeps the sharing of what is
 * written back.
 */
static void test_writeback_compact(void **state)
{
	char path[] = "/tmp/uzram-dedup-XXXXXX";
	char img[] = "/tmp/uzram-dedup-img-XXXXXX";
	int fd = mkstemp(path), ifd = mkstemp(img), err;
	struct uzram *dev, *back;
	uint8_t *ref = calloc(NPAGES, PG);
	uint64_t n = 16, was, seed = 5;
	uint8_t page[PG];
	struct uzram_stats st;

	(void)state;
	assert_true(fd >= 0 && ifd >= 0);
	close(fd);
	close(ifd);
	dev = dd_open(NPAGES, 0, path, 0);
	unlink(path);
	assert_non_null(ref);
	for (uint64_t p = 0; p < 8; p++)
		dev_write(dev, ref, data_page(0), PG, p * PG);
	/* random pages after it, past the first segment of the backing store */
	while (get_stats(dev).compr_data_size < (5u << 20) / 4) {
		assert_true(n < NPAGES);
		fill_rand(page, PG, &seed);
		dev_write(dev, ref, page, PG, n * PG);
		n++;
	}
	assert_true(uzram_writeback(dev, 0, 0, NPAGES - 1, 0) > 8);
	was = backed_place(dev, 0);
	assert_int_equal(uzram_discard(dev, (n - 17) * PG, 16 * PG), 0);
	memset(ref + 16 * PG, 0, (n - 17) * PG);
	assert_true(uzram_backing_compact(dev) > 0);
	st = get_stats(dev);
	assert_true(st.bd_compacted > 0);
	assert_int_equal(st.pages_deduped, 7);
	assert_true(backed_place(dev, 0) != was);
	for (uint64_t p = 1; p < 8; p++)
		assert_int_equal(backed_place(dev, p), backed_place(dev, 0));
	check_dev(dev, ref, "a shared place moved by compaction");

	assert_int_equal(uzram_save(dev, img, 0), 0);
	uzram_close(dev);
	back = image_open_dedup(img, 1, &err);
	assert_int_equal(err, 0);
	check_dev(back, ref, "an image of shared written-back clusters");
	assert_int_equal(get_stats(back).pages_deduped, 7);
	assert_int_equal(objects(back), 2);
	uzram_close(back);
	unlink(img);
	free(ref);
}

/*
 * A dictionary change re-encodes a shared object once, for all its
 * clusters, and the index follows it: a later copy of those bytes shares
 * the new object.
 */
static void test_dictionary(void **state)
{
	struct uzram *dev = dd_open(NPAGES, 0, NULL, 0);
	uint8_t *ref = calloc(NPAGES, PG);
	const uint8_t *dict = data_page(20);

	(void)state;
	assert_non_null(ref);
	dev_write(dev, ref, data_page(10), PG, 0);
	dev_write(dev, ref, data_page(10), PG, PG);
	dev_write(dev, ref, data_page(11), PG, 2 * PG);
	assert_int_equal(uzram_set_dictionary(dev, 0, dict, 2048,
					      UZRAM_DICT_REENCODE), 0);
	check_dev(dev, ref, "a dictionary set");
	/* the second change needs the shared object out of its bank */
	assert_int_equal(uzram_set_dictionary(dev, 0, dict + 2048, 2048,
					      UZRAM_DICT_REENCODE), 0);
	assert_int_equal(get_stats(dev).pages_deduped, 1);
	assert_int_equal(objects(dev), 2);
	check_dev(dev, ref, "a second dictionary");
	dev_write(dev, ref, data_page(10), PG, 3 * PG);
	assert_int_equal(get_stats(dev).pages_deduped, 2);
	assert_int_equal(objects(dev), 2);
	assert_int_equal(uzram_discard(dev, 2 * PG, 0), 0);
	memset(ref, 0, 2 * PG);
	check_dev(dev, ref, "the re-encoded object shared after the change");
	free(ref);
	uzram_close(dev);
}

/*
 * One walk re-encodes at most REMAP_SHARED shared objects (recompress.c's
 * map, 3/4 of 4096); a full map makes the pass walk again, so one change
 * still re-encodes them all, each once.
 */
#define REMAP_SHARED 3072
#define MANY (REMAP_SHARED + 500)

static void test_recompress_bounded(void **state)
{
	struct uzram *dev = dd_open(2 * MANY, 0, NULL, 0);
	uint8_t *ref = calloc(2 * MANY, PG);
	const uint8_t *dict = data_page(20);
	uint8_t page[PG];

	(void)state;
	assert_non_null(ref);
	for (uint32_t i = 0; i < MANY; i++) {
		memcpy(page, data_page(i % 16), PG);
		memcpy(page, &i, sizeof i);
		dev_write(dev, ref, page, PG, (uint64_t)i * PG);
		dev_write(dev, ref, page, PG, (uint64_t)(MANY + i) * PG);
	}
	assert_int_equal(get_stats(dev).pages_deduped, MANY);
	assert_int_equal(uzram_set_dictionary(dev, 0, dict, 2048,
					      UZRAM_DICT_REENCODE), 0);
	assert_int_equal(get_stats(dev).pages_recompressed, 2 * MANY);
	assert_int_equal(get_stats(dev).pages_deduped, MANY);
	assert_int_equal(objects(dev), MANY);
	check_dev(dev, ref, "more shared objects than a walk's map holds");
	/* nothing was left in the old bank: the next change needs it */
	assert_int_equal(uzram_set_dictionary(dev, 0, dict + 2048, 2048,
					      UZRAM_DICT_REENCODE), 0);
	assert_int_equal(get_stats(dev).pages_recompressed, 4 * MANY);
	assert_int_equal(objects(dev), MANY);
	check_dev(dev, ref, "a second change");
	free(ref);
	uzram_close(dev);
}

/* The image's file, read whole into *len bytes. */
static uint8_t *file_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	buf = malloc(*len);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, *len, f), *len);
	fclose(f);
	return buf;
}

static void file_write(const char *path, const uint8_t *p, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, len, f), len);
	fclose(f);
}

static struct uzram *image_open_dedup(const char *img, uint32_t dedup, int *err)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;

	uzram_config_init(&cfg);
	cfg.image = img;
	cfg.dedup = dedup;
	*err = uzram_open(&cfg, &dev);
	return dev;
}

/*
 * An image keeps the sharing: one record per shared object, the others
 * name its cluster. Opened with dedup, the clusters share again; without,
 * each has its own copy. A shared record that names no earlier record of
 * its object is refused.
 */
static void test_image(void **state)
{
	char img[] = "/tmp/uzram-dedup-img-XXXXXX";
	int fd = mkstemp(img), err;
	struct uzram *dev = dd_open(NPAGES, 0, NULL, 0), *back;
	uint8_t *ref = calloc(NPAGES, PG), *file;
	size_t len, hlen, nrec, off, forged = 0;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_non_null(ref);
	for (uint64_t p = 0; p < 64; p++)
		dev_write(dev, ref, data_page(p % 4), PG, p * 3 * PG);
	assert_int_equal(get_stats(dev).pages_deduped, 60);
	assert_int_equal(uzram_save(dev, img, 0), 0);
	/* the save's own references are given back */
	assert_int_equal(get_stats(dev).pages_deduped, 60);
	uzram_close(dev);

	back = image_open_dedup(img, 1, &err);
	assert_int_equal(err, 0);
	check_dev(back, ref, "opened from the image with dedup");
	assert_int_equal(get_stats(back).pages_deduped, 60);
	assert_int_equal(objects(back), 4);
	/* the loaded objects are in the index: a new copy is a hit */
	dev_write(back, ref, data_page(3), PG, 500 * PG);
	assert_int_equal(get_stats(back).pages_deduped, 61);
	assert_int_equal(objects(back), 4);
	assert_int_equal(uzram_discard(back, PG, 500 * PG), 0);
	memset(ref + 500 * PG, 0, PG);
	/* the device works as any other: rewrites, discards */
	dev_write(back, ref, data_page(9), PG, 0);
	assert_int_equal(uzram_discard(back, 30 * PG, 3 * PG), 0);
	memset(ref + 3 * PG, 0, 30 * PG);
	check_dev(back, ref, "the image's device changed");
	assert_int_equal(get_stats(back).pages_deduped, 64 - 1 - 10 - 4);
	uzram_close(back);
	memset(ref, 0, NPAGES * PG);
	for (uint64_t p = 0; p < 64; p++)
		memcpy(ref + p * 3 * PG, data_page(p % 4), PG);

	back = image_open_dedup(img, 0, &err);
	assert_int_equal(err, 0);
	check_dev(back, ref, "opened from the image without dedup");
	assert_int_equal(get_stats(back).pages_deduped, 0);
	assert_int_equal(objects(back), 64);
	uzram_close(back);

	/* a shared record pointed at a hole, then at another object */
	file = file_read(img, &len);
	hlen = img_get32(file + IMG_H_HEADER_LEN);
	nrec = img_get32(file + hlen + IMG_B_RECORDS);
	off = hlen + IMG_BLOCK_HEAD;
	for (size_t i = 0; i < nrec && !forged; i++) {
		if (img_get32(file + off + 8) & SLOT_SHARED)
			forged = off;
		off += IMG_RECORD_HEAD + img_get32(file + off + 12);
	}
	assert_true(forged > 0);
	for (int k = 0; k < 2; k++) {
		uint64_t was = img_get64(file + forged + IMG_RECORD_HEAD);
		uint64_t page = was / 3 % 4, target = 1;   /* 1: a hole */

		/* else a cluster of the first four, with other bytes */
		for (uint64_t q = 0; k && q < 4; q++)
			if (XXH3_64bits(data_page(q), PG) >> 48 !=
			    XXH3_64bits(data_page(page), PG) >> 48)
				target = 3 * q;
		assert_true(target != 1 || !k);
		img_put64(file + forged + IMG_RECORD_HEAD, target);
		image_fixup(file, len);
		file_write(img, file, len);
		back = image_open_dedup(img, 1, &err);
		assert_null(back);
		assert_int_equal(err, -EBADMSG);
		assert_non_null(strstr(uzram_last_error(), "shared record"));
		img_put64(file + forged + IMG_RECORD_HEAD, was);
	}
	free(file);
	unlink(img);
	free(ref);
}

/* ---- threads: 2 writers, readers, compaction, recompression ---- */

#define T_PAGES 256
#define T_POOL 8

static struct uzram *tdev;
static atomic_int tstop;
static _Atomic int tfail;
static uint8_t *tmodel;   /* what each writer last wrote, per page */

/* Writer w owns pages [w * T_PAGES / 2, (w + 1) * T_PAGES / 2). */
static void *twrite(void *arg)
{
	uint64_t w = (uint64_t)(uintptr_t)arg, seed = 77 + w;
	uint64_t lo = w * T_PAGES / 2;
	uint64_t n = tu_scaled(20000) + 1;

	for (uint64_t i = 0; i < n && !atomic_load(&tfail); i++) {
		uint64_t p = lo + tu_rand(&seed) % (T_PAGES / 2);
		unsigned k = (unsigned)(tu_rand(&seed) % (T_POOL + 1));

		if (k == T_POOL) {
			if (uzram_discard(tdev, PG, p * PG))
				atomic_store(&tfail, 1);
			memset(tmodel + p * PG, 0, PG);
			continue;
		}
		if (uzram_write(tdev, data_page(k), PG, p * PG))
			atomic_store(&tfail, 1);
		memcpy(tmodel + p * PG, data_page(k), PG);
	}
	return NULL;
}

/* A reader sees one of the pool's pages or zeros, never anything else. */
static void *tread(void *arg)
{
	uint64_t seed = 99 + (uint64_t)(uintptr_t)arg;
	uint8_t page[PG], zero[PG] = { 0 };

	while (!atomic_load(&tstop)) {
		uint64_t p = tu_rand(&seed) % T_PAGES;
		bool ok = false;

		if (uzram_read(tdev, page, PG, p * PG)) {
			atomic_store(&tfail, 2);
			break;
		}
		ok = !memcmp(page, zero, PG);
		for (unsigned k = 0; k < T_POOL && !ok; k++)
			ok = !memcmp(page, data_page(k), PG);
		if (!ok) {
			atomic_store(&tfail, 3);
			break;
		}
	}
	return NULL;
}

/* Compaction, recompression, writeback and backing store compaction. */
/*
 * Compaction, recompression, writeback and the backing store's compaction
 * in turn, until the writers are done, and at least twice each: on a busy
 * machine the writers may end before this thread got its first turns
 * (test_threads then found nothing written back).
 */
static void *tchurn(void *arg)
{
	(void)arg;
	for (unsigned i = 0; !atomic_load(&tstop) || i < 16; i++) {
		if (uzram_compact(tdev) < 0 ||
		    (i % 4 == 0 && uzram_recompress(tdev, 1, 0, 0) < 0) ||
		    (i % 4 == 1 && uzram_writeback(tdev, 0, 0, T_PAGES - 1,
						   0) < 0) ||
		    (i % 8 == 3 && uzram_backing_compact(tdev) < 0))
			atomic_store(&tfail, 4);
		usleep(200);
	}
	return NULL;
}

static void test_threads(void **state)
{
	char path[] = "/tmp/uzram-dedup-XXXXXX";
	int fd = mkstemp(path);
	pthread_t w[2], r[2], c;
	struct uzram_stats st;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	tdev = dd_open(T_PAGES, 0, path, 0);
	unlink(path);
	tmodel = calloc(T_PAGES, PG);
	assert_non_null(tmodel);
	assert_int_equal(uzram_add_recomp_algorithm(tdev, "zstd", 0), 1);
	atomic_store(&tstop, 0);
	atomic_store(&tfail, 0);
	for (uintptr_t i = 0; i < 2; i++) {
		assert_int_equal(pthread_create(&w[i], NULL, twrite, (void *)i), 0);
		assert_int_equal(pthread_create(&r[i], NULL, tread, (void *)i), 0);
	}
	assert_int_equal(pthread_create(&c, NULL, tchurn, NULL), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i], NULL);
	atomic_store(&tstop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	pthread_join(c, NULL);
	if (atomic_load(&tfail))
		fail_msg("a thread failed (%d: 1 write, 2 read, 3 wrong bytes, "
			 "4 compact, recompress or write back)",
			 atomic_load(&tfail));
	check_dev(tdev, tmodel, "after the threads");
	st = get_stats(tdev);
	assert_true(st.pages_deduped > 0);
	assert_true(st.pages_written_back > 0);
	assert_int_equal(uzram_discard(tdev, T_PAGES * PG, 0), 0);
	st = get_stats(tdev);
	assert_int_equal(st.pages_deduped, 0);
	assert_int_equal(st.bd_count + st.bd_bytes, 0);
	assert_int_equal(objects(tdev), 0);
	/* no place leaked: at most the open segments of the two heads */
	assert_true(st.bd_space <= 2u << 20);
	uzram_close(tdev);
	free(tmodel);
}

/* ---- 2 writers growing the index: no entry lost ---- */

static uint64_t g_pages;  /* each writer's pages, written twice */
static uint64_t *g_stamp; /* what makes page i unique */

/* Page i's bytes: one of 64 data pages, g_stamp[i] in its first 8. */
static void unique_page(uint8_t *page, uint64_t i)
{
	memcpy(page, data_page(i % 64), PG);
	memcpy(page, &g_stamp[i], sizeof g_stamp[i]);
}

/*
 * Stamps for n unique pages whose hashes all fall in one shard of the
 * index (its top 6 bits, dedup.c), so that the writers contend for that
 * shard and grow it at the same moments.
 */
static uint64_t *one_shard_stamps(uint64_t n)
{
	uint64_t *stamp = malloc(n * sizeof *stamp), s = 0;
	uint8_t page[PG];

	assert_non_null(stamp);
	for (uint64_t i = 0; i < n; i++)
		for (;;) {
			memcpy(page, data_page(i % 64), PG);
			memcpy(page, &(uint64_t){ ++s }, sizeof s);
			if (XXH3_64bits(page, PG) >> 58 == 0) {
				stamp[i] = s;
				break;
			}
		}
	return stamp;
}

/*
 * Writer w writes pages [w * g_pages, (w + 1) * g_pages), then the same
 * bytes again 2 * g_pages pages further: the first pass grows the shard
 * from both threads at once, the second must find every page.
 */
static void *tgrow(void *arg)
{
	uint64_t w = (uint64_t)(uintptr_t)arg;
	uint8_t page[PG];

	for (uint64_t pass = 0; pass < 2; pass++)
		for (uint64_t i = w * g_pages; i < (w + 1) * g_pages; i++) {
			unique_page(page, i);
			if (uzram_write(tdev, page, PG,
					(pass * 2 * g_pages + i) * PG)) {
				atomic_store(&tfail, 1);
				return NULL;
			}
		}
	return NULL;
}

static void test_threads_grow(void **state)
{
	pthread_t w[2];
	struct uzram_stats st;

	(void)state;
	g_pages = tu_scaled(2048) < 1024 ? 1024 : tu_scaled(2048);
	g_stamp = one_shard_stamps(2 * g_pages);
	tdev = dd_open(4 * g_pages, 0, NULL, 0);
	tmodel = calloc(4 * g_pages, PG);
	assert_non_null(tmodel);
	for (uint64_t i = 0; i < 2 * g_pages; i++) {
		unique_page(tmodel + i * PG, i);
		memcpy(tmodel + (2 * g_pages + i) * PG, tmodel + i * PG, PG);
	}
	atomic_store(&tfail, 0);
	for (uintptr_t i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&w[i], NULL, tgrow, (void *)i), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i], NULL);
	if (atomic_load(&tfail))
		fail_msg("a writer failed: %s", uzram_last_error());
	check_dev(tdev, tmodel, "2 writers growing the index");
	st = get_stats(tdev);
	assert_int_equal(st.pages_stored, 4 * g_pages);
	assert_int_equal(st.pages_deduped, 2 * g_pages);
	assert_int_equal(objects(tdev), 2 * g_pages);
	uzram_close(tdev);
	free(tmodel);
	free(g_stamp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hit),
		cmocka_unit_test(test_collision),
		cmocka_unit_test(test_copy_on_write),
		cmocka_unit_test(test_last_reference),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_compaction),
		cmocka_unit_test(test_recompress),
		cmocka_unit_test(test_recompress_bounded),
		cmocka_unit_test(test_writeback),
		cmocka_unit_test(test_writeback_compact),
		cmocka_unit_test(test_dictionary),
		cmocka_unit_test(test_image),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_threads_grow),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
