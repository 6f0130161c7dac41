// SPDX-License-Identifier: MIT
/*
 * dict.c - dictionaries: set one for a priority's codec, train one from the
 * device's own data, and say how much is encoded with each. zram's
 * algorithm_params dict=, and then training, which zram leaves to the user.
 *
 * A dictionary belongs to a codec (zcomp_create_dict()): the device's
 * algorithm at priority 0, or a recompression algorithm at 1..3. Objects
 * made with a dictionary decode only with it, so a priority keeps its
 * codecs in two banks (core.h): new objects take the current
 * bank, and a change of dictionary fills the other one:
 *
 *   priority p      bank 0            bank 1
 *                   lz4                lz4 + dict A      <- cur[p] = 1
 *   objects:        made before A      made since
 *
 *   change to B:    1. no object may name bank 0 any more: re-encode
 *                      them into bank 1 (UZRAM_DICT_REENCODE) or refuse
 *                   2. bank 0 = lz4 + dict B, cur[p] = 0
 *                   3. re-encode bank 1's objects with B (REENCODE)
 *
 * Step 1 is what keeps it safe without a lock on the write path: a
 * writer compresses with the codec of the bank current when it started,
 * and checks under the slot lock, before it stores, that this codec is
 * still the current one (store.c's codec_current(): the codec itself, not
 * only its bank, which may have been refilled and made current again in
 * between); the count of step 1 takes every slot's lock, so a writer
 * either stored before the count saw it, or finds its codec stale and
 * compresses again. A codec taken out of a bank
 * is kept on the retired list until close: a writer may still be
 * compressing with it. Changes of bank are serialized by dict_lock.
 * Objects written back to the tier (SLOT_BACKED) keep their bank bit;
 * re-encoding does not fetch them, so a change that would empty a bank
 * some of them still name is refused (-EBUSY) until they are rewritten.
 *
 * Training (uzram_train_dictionary()): a sample of the stored clusters,
 * taken evenly over the table, is decoded and given to libzstd's
 * ZDICT_trainFromBuffer(); a second sample, disjoint from the first, is
 * compressed with the codec as it is and with the new dictionary. The
 * dictionary is kept only if it saves at least UZRAM_DICT_MIN_GAIN percent
 * of the second sample's compressed bytes: on some data a dictionary costs
 * more than it saves, and only the device's own data can tell.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zdict.h>

#include "uzram.h"
#include "base/base.h"
#include "recompress.h"
#include "core/core.h"
#include "zcomp/zcomp.h"

/* The most a training decodes: to train on, and to measure with. */
#define TRAIN_MAX (16u << 20)
#define TEST_MAX (4u << 20)

struct zcomp_retired {
	struct zcomp *zc;
	struct zcomp_retired *next;
};

void dict_retired_free(struct uzram *dev)
{
	while (dev->retired) {
		struct zcomp_retired *r = dev->retired;

		dev->retired = r->next;
		zcomp_destroy(r->zc);
		free(r);
	}
}

/* Pages the objects of one priority hold, per codec bank. */
struct place_count {
	uint64_t mem[2];     /* in memory */
	uint64_t backed[2];  /* compressed on the backing store (a raw
			      * object there needs no codec) */
};

/*
 * Count the objects priority prio made, each slot looked at under its lock
 * (see the top of the file for why).
 */
static void count_places(struct uzram *dev, unsigned prio,
			 struct place_count *pc)
{
	struct slot *s;

	memset(pc, 0, sizeof(*pc));
	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		uint64_t val, pages = cluster_len(dev, idx) >> PAGE_SHIFT;
		enum slot_state state;
		uint32_t f;

		slot_lock_shared(s);
		f = slot_flags(s);
		val = s->val;
		slot_unlock_shared(s);
		state = (enum slot_state)(f & SLOT_STATE_MASK);
		if (slot_prio(f) != prio)
			continue;
		if (state == SLOT_OBJ)
			pc->mem[slot_bank(f)] += pages;
		else if (state == SLOT_BACKED &&
			 backed_size(val) != cluster_len(dev, idx))
			pc->backed[slot_bank(f)] += pages;
	}
}

/*
 * Put zc (owned) in the bank of prio that its objects do not use, and make
 * it current; see the top of the file. Adds the pages re-encoded to
 * *pages. On failure zc is freed and the banks are as they were, but for
 * objects already re-encoded.
 */
static int dict_install(struct uzram *dev, unsigned prio, struct zcomp *zc,
			unsigned flags, uint64_t *pages)
{
	const struct recomp_pass pass = { .prio = prio, .reencode = true };
	struct zcomp_retired *r = malloc(sizeof(*r));
	struct place_count pc;
	unsigned t;
	long n;
	int ret = 0;

	if (!r) {
		zcomp_destroy(zc);
		return uzram_set_error(-ENOMEM, "dictionary: out of memory");
	}
	pthread_mutex_lock(&dev->dict_lock);
	t = !atomic_load_explicit(&dev->cur[prio], memory_order_relaxed);
	count_places(dev, prio, &pc);
	if (pc.backed[t]) {
		ret = uzram_set_error(-EBUSY, "dictionary: %llu pages of "
			"priority %u on the backing store are encoded with the "
			"dictionary before the current one; rewrite or discard "
			"them first", (unsigned long long)pc.backed[t], prio);
		goto out;
	}
	if (pc.mem[t] && (flags & UZRAM_DICT_REENCODE)) {
		n = recompress_pass(dev, &pass);
		if (n < 0) {
			ret = (int)n;
			goto out;
		}
		*pages += (uint64_t)n;
		count_places(dev, prio, &pc);
	}
	if (pc.mem[t] || pc.backed[t]) {
		ret = uzram_set_error(-EBUSY, "dictionary: %llu pages of "
			"priority %u are still encoded with the dictionary "
			"before the current one; re-encode them first "
			"(UZRAM_DICT_REENCODE)",
			(unsigned long long)(pc.mem[t] + pc.backed[t]), prio);
		goto out;
	}
	r->zc = atomic_load_explicit(&dev->comp[prio][t], memory_order_relaxed);
	r->next = dev->retired;
	if (r->zc) {
		dev->retired = r;
		r = NULL;
	}
	atomic_store_explicit(&dev->comp[prio][t], zc, memory_order_release);
	atomic_store_explicit(&dev->cur[prio], t, memory_order_release);
	zc = NULL;
	if (flags & UZRAM_DICT_REENCODE) {
		n = recompress_pass(dev, &pass);
		if (n < 0)
			ret = (int)n;
		else
			*pages += (uint64_t)n;
	}
out:
	pthread_mutex_unlock(&dev->dict_lock);
	free(r);
	zcomp_destroy(zc);
	return ret;
}

/* The current codec of prio, or NULL (and the error set) if it has none. */
static const struct zcomp *prio_codec(struct uzram *dev, int prio,
				      const char *what)
{
	const struct zcomp *zc = NULL;

	if (prio >= 0 && prio <= UZRAM_MAX_RECOMP)
		zc = comp_at(dev, (unsigned)prio, NULL);
	if (!zc)
		uzram_set_error(-EINVAL, "%s: no algorithm of priority %d",
				what, prio);
	return zc;
}

UZRAM_API int uzram_set_dictionary(struct uzram *dev, int prio,
				   const void *dict, size_t len, unsigned flags)
{
	const struct zcomp *cur;
	struct zcomp *zc;
	uint64_t pages = 0;
	int ret;

	if (!dev || (len && !dict))
		return uzram_set_error(-EINVAL, "set_dictionary: NULL %s",
				       dev ? "dictionary" : "device");
	if (flags & ~UZRAM_DICT_REENCODE)
		return uzram_set_error(-EINVAL, "set_dictionary: unknown flags "
				       "%#x", flags);
	cur = prio_codec(dev, prio, "set_dictionary");
	if (!cur)
		return -EINVAL;
	ret = zcomp_create_dict(zcomp_name(cur), zcomp_level(cur), dict, len,
				&zc);
	if (ret)
		return codec_error("set_dictionary", zcomp_name(cur),
				   zcomp_level(cur), len, ret);
	return dict_install(dev, (unsigned)prio, zc, flags, &pages);
}

UZRAM_API int uzram_dict_info(struct uzram *dev, int prio,
			      struct uzram_dict_info *info)
{
	const struct zcomp *cur;
	struct place_count pc;
	unsigned bank;

	if (!dev || !info)
		return uzram_set_error(-EINVAL, "dict_info: NULL argument");
	cur = prio_codec(dev, prio, "dict_info");
	if (!cur)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	zcomp_dict(cur, &info->dict_size);
	bank = atomic_load_explicit(&dev->cur[prio], memory_order_relaxed);
	count_places(dev, (unsigned)prio, &pc);
	info->pages = pc.mem[bank] + pc.backed[bank];
	info->pages_previous = pc.mem[!bank] + pc.backed[!bank];
	return 0;
}

/* The samples a training takes: clusters decoded one after another. */
struct samples {
	unsigned char *buf;
	size_t *sizes;
	size_t n, bytes, cap_bytes, cap_n;
};

static int samples_init(struct samples *sm, size_t cap_bytes, size_t csize)
{
	sm->n = sm->bytes = 0;
	sm->cap_bytes = cap_bytes;
	sm->cap_n = cap_bytes / UZRAM_PAGE_SIZE + 1;
	sm->buf = malloc(cap_bytes + csize);
	sm->sizes = malloc(sm->cap_n * sizeof(*sm->sizes));
	return sm->buf && sm->sizes ? 0 : -ENOMEM;
}

static void samples_free(struct samples *sm)
{
	free(sm->buf);
	free(sm->sizes);
}

/* Decode cluster idx into the samples, if it is an object and fits. */
static void samples_add(struct uzram *dev, struct samples *sm, struct slot *s,
			uint64_t idx)
{
	size_t len = cluster_len(dev, idx);
	enum slot_state state;
	int ret = -1;

	if (sm->bytes + len > sm->cap_bytes || sm->n == sm->cap_n)
		return;
	slot_lock_shared(s);
	state = slot_state(s);
	if (state == SLOT_OBJ || state == SLOT_HUGE)
		ret = slot_decode(dev, s, sm->buf + sm->bytes, len);
	slot_unlock_shared(s);
	if (ret)
		return;
	sm->sizes[sm->n++] = len;
	sm->bytes += len;
}

/* What codec zc stores for the samples (raw size for what does not fit). */
static uint64_t samples_cost(const struct zcomp *zc, const struct samples *sm,
			     unsigned char *out)
{
	const unsigned char *p = sm->buf;
	uint64_t total = 0;

	for (size_t i = 0; i < sm->n; p += sm->sizes[i++]) {
		int n = zcomp_compress(zc, p, sm->sizes[i], out,
				       HUGE_LIMIT(sm->sizes[i]));

		total += n > 0 ? (uint64_t)n : sm->sizes[i];
	}
	return total;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/*
 * Take the two samples: stored clusters spread evenly over the table,
 * one to train on, the next to test with, and so on.
 */
static void draw_samples(struct uzram *dev, struct samples *train,
			 struct samples *test)
{
	uint64_t stored = 0, stride, k = 0, taken = 0;
	struct slot *s;

	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		enum slot_state st = slot_state(s);

		stored += st == SLOT_OBJ || st == SLOT_HUGE;
	}
	stride = stored / ((train->cap_bytes + test->cap_bytes) / dev->csize + 1) + 1;
	for (uint64_t idx = 0; (s = slot_next(dev, &idx)); idx++) {
		enum slot_state st = slot_state(s);

		if ((st != SLOT_OBJ && st != SLOT_HUGE) || k++ % stride)
			continue;
		samples_add(dev, taken++ % 2 ? test : train, s, idx);
	}
}

/*
 * Train a dictionary of at most dict_size bytes for cur's codec on train's
 * clusters, and measure it against none on test's, filling r's figures.
 * Returns 1 with *zcp the codec with the dictionary (owned by the caller)
 * if it saves UZRAM_DICT_MIN_GAIN percent; 0 with a message if it does
 * not, or if no dictionary came out; or a negative errno.
 */
static int dict_train(const struct zcomp *cur, const struct samples *train,
		      const struct samples *test, size_t dict_size,
		      size_t csize, struct uzram_train_report *r,
		      struct zcomp **zcp)
{
	unsigned char *dict = malloc(dict_size), *out = malloc(csize);
	struct zcomp *zc = NULL;
	size_t got;
	int ret = 0;

	*zcp = NULL;
	if (!dict || !out) {
		ret = uzram_set_error(-ENOMEM, "train_dictionary: out of memory");
		goto out;
	}
	r->train_us = now_us();
	got = ZDICT_trainFromBuffer(dict, dict_size, train->buf, train->sizes,
				    (unsigned)train->n);
	r->train_us = now_us() - r->train_us;
	if (ZDICT_isError(got)) {
		uzram_set_error(0, "train_dictionary: no dictionary from %zu "
				"clusters (%zu bytes): %s", train->n,
				train->bytes, ZDICT_getErrorName(got));
		goto out;
	}
	r->dict_size = got;
	ret = zcomp_create_dict(zcomp_name(cur), zcomp_level(cur), dict, got,
				&zc);
	if (ret) {
		ret = codec_error("train_dictionary", zcomp_name(cur),
				  zcomp_level(cur), got, ret);
		goto out;
	}
	r->bytes_without = samples_cost(cur, test, out);
	r->bytes_with = samples_cost(zc, test, out);
	if (!test->n || r->bytes_with * 100 >
			r->bytes_without * (100 - UZRAM_DICT_MIN_GAIN)) {
		uzram_set_error(0, "train_dictionary: the dictionary saves too "
				"little: %llu bytes instead of %llu on %zu "
				"clusters", (unsigned long long)r->bytes_with,
				(unsigned long long)r->bytes_without, test->n);
		goto out;
	}
	*zcp = zc;
	zc = NULL;
	ret = 1;
out:
	zcomp_destroy(zc);
	free(dict);
	free(out);
	return ret;
}

UZRAM_API int uzram_train_dictionary(struct uzram *dev, int prio,
				     size_t dict_size, unsigned flags,
				     struct uzram_train_report *rep)
{
	struct uzram_train_report r = { 0 };
	struct samples train = { 0 }, test = { 0 };
	const struct zcomp *cur;
	struct zcomp *zc = NULL;
	int ret;

	if (!dev)
		return uzram_set_error(-EINVAL, "train_dictionary: NULL device");
	if (flags & ~UZRAM_DICT_REENCODE)
		return uzram_set_error(-EINVAL, "train_dictionary: unknown "
				       "flags %#x", flags);
	if (!dict_size)
		dict_size = UZRAM_DICT_DEFAULT_SIZE;
	if (dict_size < ZCOMP_DICT_MIN || dict_size > ZCOMP_DICT_MAX)
		return uzram_set_error(-EINVAL, "train_dictionary: a dictionary "
				       "of %zu bytes is outside %u..%u bytes",
				       dict_size, ZCOMP_DICT_MIN, ZCOMP_DICT_MAX);
	cur = prio_codec(dev, prio, "train_dictionary");
	if (!cur)
		return -EINVAL;
	/* libzstd's advice: about 100 times the dictionary to train on */
	if (samples_init(&train, dict_size * 100 < TRAIN_MAX ? dict_size * 100
							      : TRAIN_MAX,
			 dev->csize) ||
	    samples_init(&test, TEST_MAX, dev->csize)) {
		ret = uzram_set_error(-ENOMEM, "train_dictionary: out of memory");
		goto out;
	}
	draw_samples(dev, &train, &test);
	r.train_bytes = train.bytes;
	r.test_bytes = test.bytes;
	ret = dict_train(cur, &train, &test, dict_size, dev->csize, &r, &zc);
	if (ret <= 0)
		goto out;
	ret = dict_install(dev, (unsigned)prio, zc, flags, &r.pages_reencoded);
	if (!ret) {
		r.kept = 1;
		ret = 1;
	}
out:
	if (rep)
		*rep = r;
	samples_free(&train);
	samples_free(&test);
	return ret;
}
