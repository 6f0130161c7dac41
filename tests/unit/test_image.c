// SPDX-License-Identifier: MIT
/*
 * test_image.c - uzram_save() and uzram_open() from an image: every state
 * a cluster can be in (hole, same-filled, zero, compressed, raw,
 * recompressed by a secondary algorithm, idle) comes back with every byte,
 * for each codec and cluster sizes of 4, 16 and 64 KiB, with the same
 * figures; a flipped bit anywhere, a truncation at any length, trailing
 * bytes, a foreign file, another version, unknown features and records
 * forged behind valid checksums are all refused with -EBADMSG or -EINVAL
 * and a message; a save with bad arguments leaves the old image; and a
 * save that runs while a thread rewrites, discards and zeroes clusters
 * writes the device as it was when the save began (under TSan in make
 * test); and one device holds an image at a time (its lock).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_check.h"
#include "core/core.h"
#include "../fuzz/image_fixup.h"

#define NPAGES 1024

static char dir[64];
static char img[128];

static int setup(void **state)
{
	load_corpus(state);
	strcpy(dir, "/tmp/uzram-test-image.XXXXXX");
	if (!mkdtemp(dir))
		fail_msg("mkdtemp: %s", strerror(errno));
	snprintf(img, sizeof img, "%s/dev.img", dir);
	return 0;
}

static int teardown(void **state)
{
	char path[160];

	snprintf(path, sizeof path, "%s/dev.img", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/bad.img", dir);
	unlink(path);
	rmdir(dir);
	return free_corpus(state);
}

static struct uzram *open_cfg(const char *algo, uint32_t cluster,
			      uint64_t size)
{
	struct uzram_config cfg;

	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.algorithm = algo;
	cfg.cluster_size = cluster;
	return tu_open(&cfg, "open_cfg");
}

/* Open an image; the result of uzram_open(), the device in *devp. */
static int open_image(const char *path, struct uzram **devp)
{
	struct uzram_config cfg;

	uzram_config_init(&cfg);
	cfg.image = path;
	*devp = NULL;
	return uzram_open(&cfg, devp);
}

static struct uzram *reopen(const char *path)
{
	struct uzram *dev;
	int r = open_image(path, &dev);

	if (r)
		fail_msg("opening %s: %d: %s", path, r, uzram_last_error());
	return dev;
}

static void save(struct uzram *dev, const char *path)
{
	int r = uzram_save(dev, path, 0);

	if (r)
		fail_msg("uzram_save(%s): %d: %s", path, r, uzram_last_error());
}

/*
 * A device of NPAGES pages plus 3 (so the last cluster may be short):
 * corpus data, incompressible pages, same-filled and zero pages, holes.
 */
static struct uzram *filled(const char *algo, uint32_t cluster, uint8_t *ref)
{
	struct uzram *dev = open_cfg(algo, cluster, (NPAGES + 3) * PG);
	uint64_t seed = 5;
	uint8_t page[PG];

	dev_write(dev, ref, tar, NPAGES / 4 * PG, 0);
	dev_write(dev, ref, core, NPAGES / 4 * PG, NPAGES / 2 * PG);
	for (uint64_t p = 3 * NPAGES / 4; p < 3 * NPAGES / 4 + 64; p++) {
		fill_rand(page, PG, &seed);
		dev_write(dev, ref, page, PG, p * PG);
	}
	fill_same(page, PG, SAME_VALUE);
	for (uint64_t p = 3 * NPAGES / 4 + 64; p < 3 * NPAGES / 4 + 96; p++)
		dev_write(dev, ref, page, PG, p * PG);
	assert_int_equal(uzram_write_zeroes(dev, 32 * PG,
					    (3 * NPAGES / 4 + 96) * PG,
					    UZRAM_ZERO_NO_HOLE), 0);
	/* the short last cluster, and a partial page in it */
	dev_write(dev, ref, tar + 100 * PG, 2 * PG + 17, NPAGES * PG);
	return dev;
}

static void same_figures(struct uzram *a, struct uzram *b)
{
	struct uzram_stats sa = get_stats(a), sb = get_stats(b);

	assert_int_equal(sa.disksize, sb.disksize);
	assert_int_equal(sa.pages_stored, sb.pages_stored);
	assert_int_equal(sa.compr_data_size, sb.compr_data_size);
	assert_int_equal(sa.same_pages, sb.same_pages);
	assert_int_equal(sa.huge_pages, sb.huge_pages);
	assert_int_equal(uzram_cluster_size(a), uzram_cluster_size(b));
	for (int i = 0; i <= UZRAM_MAX_RECOMP; i++) {
		const char *x = uzram_algorithm(a, i), *y = uzram_algorithm(b, i);

		assert_true(x == y || (x && y && !strcmp(x, y)));
	}
}

static void round_trip(const char *algo, uint32_t cluster)
{
	uint8_t *ref = calloc(NPAGES + 3, PG);
	struct uzram *dev = filled(algo, cluster, ref), *back;
	struct uzram_stats before, after;
	struct stat sb;

	assert_non_null(ref);
	before = get_stats(dev);
	save(dev, img);
	back = reopen(img);
	check_dev(back, ref, "reopened image");
	check_read(back, ref, NPAGES * PG + 5, 2 * PG);
	same_figures(dev, back);
	after = get_stats(back);
	assert_int_equal(stat(img, &sb), 0);
	printf("   %s, %u-byte clusters: compr %llu, image %lld bytes, "
	       "mem_used %llu before the save, %llu after opening\n", algo,
	       cluster, (unsigned long long)before.compr_data_size,
	       (long long)sb.st_size,
	       (unsigned long long)before.mem_used_total,
	       (unsigned long long)after.mem_used_total);
	/* a fresh allocator packs at least as well as the one that filled */
	assert_true(after.mem_used_total <= before.mem_used_total +
		    before.mem_used_total / 100);
	/* the device saved from the image is the same image again */
	save(back, img);
	uzram_close(back);
	back = reopen(img);
	check_dev(back, ref, "image of a reopened image");
	uzram_close(back);
	uzram_close(dev);
	free(ref);
}

static void test_round_trip(void **state)
{
	static const char *const algos[] = { "lz4", "zstd", "deflate" };
	static const uint32_t clusters[] = { 4096, 16384, 65536 };

	(void)state;
	for (size_t a = 0; a < 3; a++)
		for (size_t c = 0; c < 3; c++)
			round_trip(algos[a], clusters[c]);
}

/* Recompressed clusters and idle marks come back as they were. */
static void test_recompressed_idle(void **state)
{
	uint8_t *ref = calloc(NPAGES + 3, PG), buf[PG];
	struct uzram *dev = filled("lz4", 0, ref), *back;
	long n, m;

	(void)state;
	assert_int_equal(uzram_add_recomp_algorithm(dev, "zstd", 5), 1);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "deflate", 0), 2);
	assert_true(uzram_recompress(dev, 1, UZRAM_RECOMP_HUGE, 0) >= 0);
	assert_true(uzram_recompress(dev, 2, 0, 2000) > 0);
	assert_true(uzram_mark_idle(dev) > 0);
	assert_int_equal(uzram_read(dev, buf, PG, 7 * PG), 0);
	assert_int_equal(uzram_read(dev, buf, PG, (NPAGES / 2 + 3) * PG), 0);
	save(dev, img);
	back = reopen(img);
	assert_string_equal(uzram_algorithm(back, 1), "zstd");
	assert_string_equal(uzram_algorithm(back, 2), "deflate");
	assert_null(uzram_algorithm(back, 3));
	same_figures(dev, back);
	/* the idle marks: the same clusters qualify on both */
	n = uzram_recompress(dev, 1, UZRAM_RECOMP_IDLE, 0);
	m = uzram_recompress(back, 1, UZRAM_RECOMP_IDLE, 0);
	printf("   %ld idle pages recompressed on the device, %ld on the "
	       "image\n", n, m);
	assert_true(n > 0);
	assert_int_equal(n, m);
	same_figures(dev, back);
	check_dev(back, ref, "recompressed and reopened");
	uzram_close(back);
	uzram_close(dev);
	free(ref);
}

/*
 * Dictionaries come back with the image: a device whose primary codec
 * changed its dictionary holds objects of both banks, a secondary one has
 * its own; every byte reads back, the counts of dictionary pages match, and
 * new writes to the reopened device use its current dictionary.
 */
static void test_dictionaries(void **state)
{
	uint8_t *ref = calloc(NPAGES + 3, PG);
	struct uzram_dict_info a, b;
	struct uzram_config cfg;
	struct uzram *dev = NULL, *back;

	(void)state;
	uzram_config_init(&cfg);
	cfg.size = (NPAGES + 3) * PG;
	cfg.algorithm = "zstd";
	cfg.dict = tar + 200 * PG;
	cfg.dict_size = 8 * PG;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	dev_write(dev, ref, tar, 256 * PG, 0);
	assert_int_equal(uzram_set_dictionary(dev, 0, core + 300 * PG, 8 * PG,
					      0), 0);
	dev_write(dev, ref, core, 256 * PG, 512 * PG);
	assert_int_equal(uzram_add_recomp_algorithm(dev, "lz4", 0), 1);
	assert_int_equal(uzram_set_dictionary(dev, 1, tar + 400 * PG, 4 * PG,
					      0), 0);
	assert_true(uzram_recompress(dev, 1, UZRAM_RECOMP_HUGE, 0) >= 0);
	save(dev, img);
	back = reopen(img);
	check_dev(back, ref, "an image with dictionaries");
	same_figures(dev, back);
	for (int prio = 0; prio <= 1; prio++) {
		assert_int_equal(uzram_dict_info(dev, prio, &a), 0);
		assert_int_equal(uzram_dict_info(back, prio, &b), 0);
		assert_int_equal(a.dict_size, b.dict_size);
		assert_int_equal(a.pages, b.pages);
		assert_int_equal(a.pages_previous, b.pages_previous);
	}
	assert_true(a.dict_size == 4 * PG);
	assert_int_equal(uzram_dict_info(back, 0, &b), 0);
	printf("   primary: %llu pages with the current dictionary, %llu "
	       "with the one before\n", (unsigned long long)b.pages,
	       (unsigned long long)b.pages_previous);
	assert_true(b.pages > 0 && b.pages_previous > 0);
	dev_write(back, ref, tar + 300 * PG, 64 * PG, 800 * PG);
	check_dev(back, ref, "writes after reopening");
	uzram_close(back);
	uzram_close(dev);
	free(ref);
}

static void test_empty_and_conflict(void **state)
{
	struct uzram *dev = open_cfg("zstd", 16384, 1u << 30), *back;
	struct uzram_config cfg;
	int r;

	(void)state;
	save(dev, img);
	back = reopen(img);
	assert_int_equal(uzram_size(back), 1u << 30);
	assert_int_equal(uzram_cluster_size(back), 16384);
	assert_string_equal(uzram_algorithm(back, 0), "zstd");
	assert_int_equal(get_stats(back).pages_stored, 0);
	uzram_close(back);

	/* a size that is not the image's is a conflict; the same one is not */
	uzram_config_init(&cfg);
	cfg.image = img;
	cfg.size = 1u << 20;
	r = uzram_open(&cfg, &back);
	assert_int_equal(r, -EINVAL);
	assert_non_null(strstr(uzram_last_error(), "conflicts"));
	cfg.size = 1u << 30;
	assert_int_equal(uzram_open(&cfg, &back), 0);
	uzram_close(back);

	/* a memory limit the image does not fit in */
	uint8_t *ref = calloc(NPAGES + 3, PG);
	struct uzram *full = filled("lz4", 0, ref);

	save(full, img);
	cfg.size = 0;
	cfg.mem_limit = 64 * PG;
	assert_int_equal(uzram_open(&cfg, &back), -ENOSPC);
	assert_non_null(strstr(uzram_last_error(), "memory limit"));
	uzram_close(full);
	uzram_close(dev);
	free(ref);
}

/* An image of a small device, read into memory. */
static uint8_t *small_image(size_t *len, uint8_t *ref)
{
	struct uzram *dev = filled("lz4", 0, ref);
	uint8_t *buf;
	struct stat sb;
	int fd;

	assert_int_equal(uzram_discard(dev, NPAGES / 2 * PG, NPAGES / 4 * PG), 0);
	memset(ref + NPAGES / 4 * PG, 0, NPAGES / 2 * PG);
	save(dev, img);
	uzram_close(dev);
	fd = open(img, O_RDONLY);
	assert_true(fd >= 0 && fstat(fd, &sb) == 0);
	*len = (size_t)sb.st_size;
	buf = malloc(*len);
	assert_int_equal(read(fd, buf, *len), (ssize_t)*len);
	close(fd);
	return buf;
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	close(fd);
}

/* The bytes must be refused with err; the message names the file. */
static void refused(const uint8_t *p, size_t n, int err, const char *what,
		    const char *why)
{
	char path[160];
	struct uzram *dev;
	int r;

	snprintf(path, sizeof path, "%s/bad.img", dir);
	write_file(path, p, n);
	r = open_image(path, &dev);
	if (r != err)
		fail_msg("%s: uzram_open gave %d (%s), want %d", what, r,
			 uzram_last_error(), err);
	assert_null(dev);
	if (!strstr(uzram_last_error(), path) ||
	    (why && !strstr(uzram_last_error(), why)))
		fail_msg("%s: message '%s' does not name %s and '%s'", what,
			 uzram_last_error(), path, why ? why : "");
}

static void test_bit_flips(void **state)
{
	uint8_t *ref = calloc(NPAGES + 3, PG), *good, *bad;
	uint64_t seed = 11, flips = tu_scaled(300);
	size_t len;

	(void)state;
	good = small_image(&len, ref);
	bad = malloc(len + 1);
	printf("   %zu-byte image, %llu bit flips and truncations\n", len,
	       (unsigned long long)flips);
	for (uint64_t i = 0; i < flips; i++) {
		size_t at = (i < 64 ? i * 2 : tu_rand(&seed)) % len;
		char what[64];

		memcpy(bad, good, len);
		bad[at] ^= (uint8_t)(1u << (tu_rand(&seed) % 8));
		snprintf(what, sizeof what, "bit flip at byte %zu", at);
		refused(bad, len, at < 8 ? -EINVAL : -EBADMSG, what, NULL);
	}
	for (uint64_t i = 0; i < flips; i++) {
		size_t n = (i < 150 ? i : tu_rand(&seed)) % len;
		char what[64];

		snprintf(what, sizeof what, "truncated to %zu bytes", n);
		refused(good, n, -EBADMSG, what, n > 8 ? NULL : "truncated");
	}
	memcpy(bad, good, len);
	bad[len] = 0;
	refused(bad, len + 1, -EBADMSG, "a byte appended", "after the trailer");
	/* the good image still opens and holds every byte */
	{
		struct uzram *dev = reopen(img);

		check_dev(dev, ref, "the good image after the bad ones");
		uzram_close(dev);
	}
	free(bad);
	free(good);
	free(ref);
}

static void test_foreign_and_version(void **state)
{
	uint8_t *ref = calloc(NPAGES + 3, PG), *good, *bad;
	size_t len;

	(void)state;
	good = small_image(&len, ref);
	bad = malloc(len);
	refused(tar, 64 * PG, -EINVAL, "files.tar", "not a uzram image");
	refused((const uint8_t *)"UZRAMIMX", 8, -EINVAL, "near magic",
		"not a uzram image");

	memcpy(bad, good, len);
	img_put32(bad + IMG_H_VERSION, 3);
	image_fixup(bad, len);
	refused(bad, len, -EINVAL, "version 3", "version 3");
	/* version 1, the same but for shared records, still opens */
	memcpy(bad, good, len);
	img_put32(bad + IMG_H_VERSION, 1);
	image_fixup(bad, len);
	write_file(img, bad, len);
	{
		struct uzram *v1 = reopen(img);

		check_dev(v1, ref, "a version 1 image");
		uzram_close(v1);
	}
	memcpy(bad, good, len);
	img_put32(bad + IMG_H_VERSION, 7);
	img_put32(bad + IMG_H_HEADER_LEN, 1);
	refused(bad, len, -EINVAL, "version 7, another header", "version 7");
	memcpy(bad, good, len);
	img_put32(bad + IMG_H_INCOMPAT, 4);
	image_fixup(bad, len);
	refused(bad, len, -EINVAL, "unknown feature", "features 0x4");
	memcpy(bad, good, len);
	img_put32(bad + IMG_H_COMPAT, 4);   /* may be ignored */
	image_fixup(bad, len);
	write_file(img, bad, len);
	uzram_close(reopen(img));
	memcpy(bad, good, len);
	strcpy((char *)bad + IMG_H_CODECS, "brotli");
	image_fixup(bad, len);
	refused(bad, len, -ENOENT, "unknown algorithm", "brotli");
	free(bad);
	free(good);
	free(ref);
}

/*
 * A header that gives a dictionary to an algorithm that takes none (found
 * by fuzz_image, which aborted on -EOPNOTSUPP): -EINVAL, as uzram.h says
 * for a codec that refuses an image's dictionary.
 */
static void test_dictionary_for_none(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	uint8_t *ref = calloc(16, PG), *buf;
	size_t len;
	int fd, patched = 0;
	struct stat sb;

	(void)state;
	assert_non_null(ref);
	uzram_config_init(&cfg);
	cfg.size = 16 * PG;
	cfg.dict = tar;
	cfg.dict_size = 4096;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	dev_write(dev, ref, tar + PG, 8 * PG, 0);
	save(dev, img);
	uzram_close(dev);
	fd = open(img, O_RDONLY);
	assert_true(fd >= 0 && fstat(fd, &sb) == 0);
	len = (size_t)sb.st_size;
	buf = malloc(len);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, len), (ssize_t)len);
	close(fd);
	for (unsigned i = 0; i < IMG_CODECS; i++) {
		uint8_t *e = buf + IMG_H_CODECS + i * IMG_CODEC_LEN;

		if (!img_get32(e + IMG_CODEC_DICT))
			continue;
		memset(e, 0, IMG_CODEC_NAME);
		strcpy((char *)e, "lz4hc");
		patched++;
	}
	assert_int_equal(patched, 1);
	image_fixup(buf, len);
	refused(buf, len, -EINVAL, "lz4hc with a dictionary", "does not take");
	free(buf);
	free(ref);
}

/* Records that pass the checksums but not the bounds. */
static void test_forged_records(void **state)
{
	uint8_t *ref = calloc(NPAGES + 3, PG), *good, *bad;
	size_t len, r0, r1, hlen;

	(void)state;
	good = small_image(&len, ref);
	bad = malloc(len);
	hlen = img_get32(good + IMG_H_HEADER_LEN);
	r0 = hlen + IMG_BLOCK_HEAD;
	r1 = r0 + IMG_RECORD_HEAD + img_get32(good + r0 + 12);

	memcpy(bad, good, len);
	img_put64(bad + r0, NPAGES + 3);
	image_fixup(bad, len);
	refused(bad, len, -EBADMSG, "index past the end", "past the end");
	memcpy(bad, good, len);
	img_put64(bad + r1, img_get64(good + r0));
	image_fixup(bad, len);
	refused(bad, len, -EBADMSG, "a cluster twice", "twice");
	memcpy(bad, good, len);
	img_put32(bad + r0 + 8, (img_get32(good + r0 + 8) & ~SLOT_STATE_MASK) |
		  SLOT_HUGE);
	image_fixup(bad, len);
	refused(bad, len, -EBADMSG, "a small object called raw", "raw");
	memcpy(bad, good, len);
	img_put32(bad + r0 + 8, img_get32(good + r0 + 8) | 2 << SLOT_PRIO_SHIFT);
	image_fixup(bad, len);
	refused(bad, len, -EBADMSG, "an object of no algorithm", "algorithm");
	memcpy(bad, good, len);
	img_put32(bad + r0 + 8, img_get32(good + r0 + 8) | SLOT_SHARED);
	image_fixup(bad, len);
	refused(bad, len, -EBADMSG, "the shared bit", "shared");
	memcpy(bad, good, len);
	img_put32(bad + IMG_H_VERSION, 1);
	img_put32(bad + r0 + 8, img_get32(good + r0 + 8) | SLOT_SHARED);
	image_fixup(bad, len);
	refused(bad, len, -EBADMSG, "the shared bit in version 1", "version 1");
	memcpy(bad, good, len);
	img_put32(bad + r0 + 8, 5);
	image_fixup(bad, len);
	refused(bad, len, -EBADMSG, "state 5", "state");
	memcpy(bad, good, len);
	img_put32(bad + hlen + IMG_B_RECORDS,
		  img_get32(good + hlen + IMG_B_RECORDS) + 1);
	image_fixup(bad, len);
	refused(bad, len, -EBADMSG, "one record too many", "past the end");
	free(bad);
	free(good);
	free(ref);
}

/* A save that fails leaves the old image; no temporary file stays. */
static void test_save_errors(void **state)
{
	uint8_t *ref = calloc(NPAGES + 3, PG);
	struct uzram *dev = filled("lz4", 0, ref), *back;
	char path[160];

	(void)state;
	save(dev, img);
	assert_int_equal(uzram_write(dev, tar + 500 * PG, PG, 0), 0);
	assert_int_equal(uzram_save(NULL, img, 0), -EINVAL);
	assert_int_equal(uzram_save(dev, NULL, 0), -EINVAL);
	assert_int_equal(uzram_save(dev, img, 1), -EINVAL);
	assert_non_null(strstr(uzram_last_error(), "flags"));
	snprintf(path, sizeof path, "%s/no/such/dir.img", dir);
	assert_int_equal(uzram_save(dev, path, 0), -ENOENT);
	assert_non_null(strstr(uzram_last_error(), path));
	/* another save in progress: only one at a time */
	atomic_store(&dev->save, (struct image_save *)(void *)ref);
	assert_int_equal(uzram_save(dev, img, 0), -EALREADY);
	atomic_store(&dev->save, NULL);
	back = reopen(img);
	check_dev(back, ref, "the old image after failed saves");
	uzram_close(back);
	assert_int_equal(open_image(path, &back), -ENOENT);
	snprintf(path, sizeof path, "%s", dir);
	assert_int_equal(open_image(path, &back), -EISDIR);
	uzram_close(dev);
	free(ref);
}

/* ---- a save racing a writer ---- */

#define RPAGES 8192

struct racer {
	struct uzram *dev;
	uint8_t *now;           /* what the device holds */
	uint64_t seed;
	atomic_bool stop;
	long during;            /* changes made while the save ran */
};

static void *race_writer(void *arg)
{
	struct racer *w = arg;
	uint8_t buf[PG];

	/* start once the save has begun: every change is after its instant */
	while (!atomic_load(&w->dev->save) && !atomic_load(&w->stop))
		sched_yield();
	while (!atomic_load(&w->stop)) {
		uint64_t p = tu_rand(&w->seed) % RPAGES, op = tu_rand(&w->seed) % 8;
		uint8_t *at = w->now + p * PG;
		int r;

		if (op == 0) {
			r = uzram_discard(w->dev, PG, p * PG);
			memset(at, 0, PG);
		} else if (op == 1) {
			r = uzram_write_zeroes(w->dev, PG, p * PG,
					       UZRAM_ZERO_NO_HOLE);
			memset(at, 0, PG);
		} else if (op == 2) {
			memcpy(buf, tar + 1000, 100);
			r = uzram_write(w->dev, buf, 100, p * PG + 50);
			memcpy(at + 50, buf, 100);
		} else {
			memcpy(buf, tar + (tu_rand(&w->seed) % 1024) * PG, PG);
			r = uzram_write(w->dev, buf, PG, p * PG);
			memcpy(at, buf, PG);
		}
		if (r)
			fail_msg("write during the save: %s", uzram_last_error());
		if (atomic_load(&w->dev->save))
			w->during++;
	}
	return NULL;
}

static void test_save_races_writer(void **state)
{
	uint8_t *start = calloc(RPAGES, PG), *now = calloc(RPAGES, PG);
	uint64_t rounds = tu_scaled(4);
	struct uzram *dev, *back, *fresh;

	(void)state;
	assert_non_null(start);
	assert_non_null(now);
	for (uint64_t round = 0; round < rounds; round++) {
		struct racer w = { .seed = 3 + round, .now = now };
		pthread_t t;

		dev = open_cfg(round % 2 ? "zstd" : "lz4", 0, RPAGES * PG);
		memset(start, 0, (size_t)RPAGES * PG);
		/* a hole every 8 pages, the rest from the corpus */
		for (uint64_t p = 0; p < RPAGES; p++)
			if (p % 8)
				dev_write(dev, start, core + (p % 4096) * PG, PG,
					  p * PG);
		memcpy(now, start, (size_t)RPAGES * PG);
		w.dev = dev;
		assert_int_equal(pthread_create(&t, NULL, race_writer, &w), 0);
		save(dev, img);
		atomic_store(&w.stop, true);
		pthread_join(t, NULL);
		printf("   round %llu: %ld changes while the save ran\n",
		       (unsigned long long)round, w.during);
		back = reopen(img);
		check_dev(back, start, "the image of a device being written");
		uzram_close(back);
		check_dev(dev, now, "the device written during the save");
		/*
		 * The figures follow the data, as on a device filled anew:
		 * what writers handed over was counted out (zeros and holes
		 * differ in pages_stored, not in these).
		 */
		fresh = open_cfg(round % 2 ? "zstd" : "lz4", 0, RPAGES * PG);
		assert_int_equal(uzram_write(fresh, now, (size_t)RPAGES * PG, 0), 0);
		assert_int_equal(get_stats(dev).compr_data_size,
				 get_stats(fresh).compr_data_size);
		assert_int_equal(get_stats(dev).huge_pages,
				 get_stats(fresh).huge_pages);
		uzram_close(fresh);
		uzram_close(dev);
	}
	free(start);
	free(now);
}

/*
 * Clusters written back to a backing store go into the image as the
 * objects they are: the image opens without the backing store, and
 * reads every byte back.
 */
static void test_backed_clusters(void **state)
{
	uint8_t *ref = calloc(NPAGES + 3, PG);
	struct uzram_config cfg;
	struct uzram *dev = NULL, *back;
	char backing[160];
	long n;

	(void)state;
	assert_non_null(ref);
	snprintf(backing, sizeof backing, "%s/backing", dir);
	uzram_config_init(&cfg);
	cfg.size = (NPAGES + 3) * PG;
	cfg.backing = backing;
	if (uzram_open(&cfg, &dev))
		fail_msg("uzram_open with a backing file: %s", uzram_last_error());
	dev_write(dev, ref, tar, NPAGES / 2 * PG, 0);
	dev_write(dev, ref, core, NPAGES / 4 * PG, NPAGES / 2 * PG);
	n = uzram_writeback(dev, 0, 0, NPAGES / 2, 0);
	assert_true(n > 0);
	check_dev(dev, ref, "written back");
	save(dev, img);
	uzram_close(dev);
	unlink(backing);
	back = reopen(img);
	check_dev(back, ref, "an image of written-back clusters");
	uzram_close(back);
	free(ref);
}

/*
 * One device per image: the device opened from an image holds it, across
 * its own saves (each a new inode renamed over the path), until it
 * closes; a second open, a save of another device there and a claim all
 * fail with -EBUSY naming the holder; a claimed path that does not exist
 * yet is held the same way; a lock file left by a dead holder is free.
 */
static void test_image_lock(void **state)
{
	uint8_t *ref = calloc(NPAGES + 3, PG);
	struct uzram *dev = filled("lz4", 0, ref), *a, *b, *other;
	char lock[160], pid[32], fresh[160];
	struct stat sb;
	int fd;

	(void)state;
	assert_non_null(ref);
	snprintf(lock, sizeof lock, "%s.lock", img);
	snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
	save(dev, img);
	assert_int_equal(stat(lock, &sb), -1); /* a save lets go at its end */
	a = reopen(img);
	assert_int_equal(stat(lock, &sb), 0);
	assert_int_equal(open_image(img, &b), -EBUSY);
	assert_null(b);
	assert_non_null(strstr(uzram_last_error(), img));
	assert_non_null(strstr(uzram_last_error(), pid));
	/* another device's save would replace a's image: refused */
	other = open_cfg("lz4", 0, PG * 8);
	assert_int_equal(uzram_save(other, img, 0), -EBUSY);
	assert_non_null(strstr(uzram_last_error(), pid));
	assert_int_equal(uzram_image_claim(other, img), -EBUSY);
	/* a's own saves keep the lock: the rename does not touch img.lock */
	save(a, img);
	save(a, img);
	assert_int_equal(open_image(img, &b), -EBUSY);
	uzram_close(a);
	assert_int_equal(stat(lock, &sb), -1);
	b = reopen(img);
	check_dev(b, ref, "the image, after the refused save");
	uzram_close(b);

	/* a claim of an image not written yet */
	snprintf(fresh, sizeof fresh, "%s/fresh.img", dir);
	assert_int_equal(uzram_image_claim(other, fresh), 0);
	assert_int_equal(uzram_image_claim(other, fresh), 0);
	assert_int_equal(uzram_image_claim(other, img), -EEXIST);
	assert_int_equal(uzram_save(dev, fresh, 0), -EBUSY);
	save(other, fresh);
	assert_int_equal(open_image(fresh, &b), -EBUSY);
	uzram_close(other);
	b = reopen(fresh);
	uzram_close(b);
	assert_int_equal(unlink(fresh), 0);

	/* a lock file nobody holds (its holder was killed) */
	fd = open(lock, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "999999\n", 7), 7);
	close(fd);
	b = reopen(img);
	uzram_close(b);
	assert_int_equal(stat(lock, &sb), -1);
	uzram_close(dev);
	free(ref);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_recompressed_idle),
		cmocka_unit_test(test_dictionaries),
		cmocka_unit_test(test_empty_and_conflict),
		cmocka_unit_test(test_bit_flips),
		cmocka_unit_test(test_foreign_and_version),
		cmocka_unit_test(test_dictionary_for_none),
		cmocka_unit_test(test_forged_records),
		cmocka_unit_test(test_save_errors),
		cmocka_unit_test(test_save_races_writer),
		cmocka_unit_test(test_backed_clusters),
		cmocka_unit_test(test_image_lock),
	};

	return tu_run_tests(tests, setup, teardown);
}
