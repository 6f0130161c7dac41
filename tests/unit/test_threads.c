/*
 * test_threads.c - many threads on one device; make test runs it under
 * ThreadSanitizer as well.
 *
 *   pages 0 .. 4*REGION-1          four private regions, one per worker:
 *                                  random reads, writes, discards and
 *                                  write-zeroes at any offset, checked
 *                                  exactly against the worker's own copy
 *   pages 4*REGION .. +SHARED-1    one shared range: two threads write
 *                                  whole self-describing pages into it and
 *                                  read them back, while discarding some
 *   + a compaction thread and a thread reading stats and block status
 *
 * A self-describing page starts with a header (magic, page number, writer,
 * sequence number, and the XXH3 hash of the whole page with the hash field
 * zeroed). Whatever the interleaving, every page read from the shared range
 * must be all zeros or carry a valid header naming that very page: a torn
 * page (half of one write and half of another) fails the hash.
 *
 * Threads do not call cmocka's asserts (they longjmp to the main thread's
 * context); they record the first failure, and the main thread reports it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <xxhash.h>

#include "uzram.h"
#include "testutil.h"

#define PG ((uint64_t)UZRAM_PAGE_SIZE)
#define REGION 512
#define NPRIV 4
#define SHARED 128
#define NSHARED 2
#define NPAGES (NPRIV * REGION + SHARED)
#define OPS 100000
#define MAGIC 0x757a72616d746872ull

struct hdr {
	uint64_t magic, page, writer, seq, hash;
};

static uint8_t *corpus;
static size_t corpus_len;
static struct uzram *dev;
static _Atomic int stop;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static char fail_text[512];

static void record_failure(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void record_failure(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&fail_lock);
	if (!fail_text[0]) {
		va_start(ap, fmt);
		vsnprintf(fail_text, sizeof(fail_text), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&fail_lock);
	atomic_store(&stop, 1);
}

static int load(void **state)
{
	struct uzram_config cfg;
	size_t tlen, clen;
	uint8_t *t, *c;

	(void)state;
	t = tu_corpus("files.tar", 8u << 20, &tlen);
	c = tu_corpus("heap-python.core", 16u << 20, &clen);
	corpus = malloc(tlen + clen);
	assert_non_null(corpus);
	memcpy(corpus, t, tlen);
	memcpy(corpus + tlen, c, clen);
	corpus_len = tlen + clen;
	free(t);
	free(c);
	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	return 0;
}

static int unload(void **state)
{
	(void)state;
	uzram_close(dev);
	free(corpus);
	return 0;
}

static uint64_t rnd(uint64_t *rng, uint64_t n)
{
	return tu_rand(rng) % n;
}

struct worker {
	pthread_t th;
	int id;
	uint64_t rng;
	uint64_t ops;
	uint8_t *ref;             /* private workers: the region's copy */
	uint64_t reads, writes, zeroes, pages_seen;
};

static int first_diff(const uint8_t *a, const uint8_t *b, size_t len,
		      size_t *at)
{
	size_t i;

	if (memcmp(a, b, len) == 0)
		return 0;
	for (i = 0; a[i] == b[i]; i++)
		;
	*at = i;
	return 1;
}

/* Random I/O inside one region, checked exactly. */
static void *private_worker(void *arg)
{
	struct worker *w = arg;
	const uint64_t base = (uint64_t)w->id * REGION * PG;
	const uint64_t size = REGION * PG;
	uint8_t *buf = malloc(4 * PG);
	uint64_t k, off, len, v, i;
	size_t at;
	int e;

	if (!buf) {
		record_failure("worker %d: out of memory", w->id);
		return NULL;
	}
	for (k = 0; k < w->ops && !atomic_load(&stop); k++) {
		off = rnd(&w->rng, REGION) * PG;
		if (rnd(&w->rng, 2))
			off += rnd(&w->rng, 2) ? PG - 1 - rnd(&w->rng, 8) :
			       rnd(&w->rng, PG);
		len = rnd(&w->rng, 3) ? PG : 1 + rnd(&w->rng, 3 * PG);
		if (len > size - off)
			len = size - off;
		switch (rnd(&w->rng, 10)) {
		case 0: case 1: case 2: case 3:
			e = uzram_read(dev, buf, len, base + off);
			if (e)
				record_failure("worker %d op %llu: read %llu "
					       "@ %llu: %d", w->id,
					       (unsigned long long)k,
					       (unsigned long long)len,
					       (unsigned long long)(base + off),
					       e);
			else if (first_diff(buf, w->ref + off, len, &at))
				record_failure("worker %d op %llu: read %llu "
					       "@ %llu differs at %llu", w->id,
					       (unsigned long long)k,
					       (unsigned long long)len,
					       (unsigned long long)(base + off),
					       (unsigned long long)(base + off +
								    at));
			w->reads++;
			break;
		case 4: case 5: case 6: case 7:
			switch (rnd(&w->rng, 4)) {
			case 0:
				v = tu_rand(&w->rng);
				for (i = 0; i < len; i++)
					buf[i] = (uint8_t)(v >> (8 * ((off + i) % 8)));
				break;
			case 1:
				for (i = 0; i < len; i++)
					buf[i] = (uint8_t)tu_rand(&w->rng);
				break;
			default:
				memcpy(buf, corpus + rnd(&w->rng, corpus_len -
							 4 * PG), len);
				break;
			}
			e = uzram_write(dev, buf, len, base + off);
			if (e)
				record_failure("worker %d op %llu: write %llu "
					       "@ %llu: %d", w->id,
					       (unsigned long long)k,
					       (unsigned long long)len,
					       (unsigned long long)(base + off),
					       e);
			memcpy(w->ref + off, buf, len);
			w->writes++;
			break;
		default:
			v = rnd(&w->rng, 3);
			e = v == 0 ? uzram_discard(dev, len, base + off) :
			    uzram_write_zeroes(dev, len, base + off,
					       v == 1 ? 0 : UZRAM_ZERO_NO_HOLE);
			if (e)
				record_failure("worker %d op %llu: zeroing %llu "
					       "@ %llu: %d", w->id,
					       (unsigned long long)k,
					       (unsigned long long)len,
					       (unsigned long long)(base + off),
					       e);
			memset(w->ref + off, 0, len);
			w->zeroes++;
			break;
		}
	}
	free(buf);
	return NULL;
}

static void make_page(uint8_t *p, uint64_t page, uint64_t writer,
		      uint64_t seq, uint64_t *rng)
{
	struct hdr h = { MAGIC, page, writer, seq, 0 };
	uint64_t i, v;

	if (rnd(rng, 4)) {
		memcpy(p, corpus + rnd(rng, corpus_len - PG), PG);
	} else {
		for (i = 0; i < PG; i += 8) {
			v = tu_rand(rng);
			memcpy(p + i, &v, 8);
		}
	}
	memcpy(p, &h, sizeof(h));
	h.hash = XXH3_64bits(p, PG);
	memcpy(p, &h, sizeof(h));
}

/* 0 if the page is zeros or a consistent page `page`; else a reason. */
static const char *check_page(uint8_t *p, uint64_t page)
{
	struct hdr h;
	uint64_t want;
	uint8_t copy[sizeof(struct hdr)];

	memcpy(&h, p, sizeof(h));
	if (h.magic == 0 && p[0] == 0 && memcmp(p, p + 1, PG - 1) == 0)
		return NULL;
	if (h.magic != MAGIC)
		return "no header";
	if (h.page != page)
		return "header names another page";
	if (h.writer >= NSHARED)
		return "unknown writer";
	/* Hash the page as written: with the hash field zeroed. */
	memcpy(copy, p, sizeof(copy));
	memset(p + offsetof(struct hdr, hash), 0, 8);
	want = XXH3_64bits(p, PG);
	memcpy(p, copy, sizeof(copy));
	return want == h.hash ? NULL : "torn page (hash mismatch)";
}

static void *shared_worker(void *arg)
{
	struct worker *w = arg;
	const uint64_t base = NPRIV * REGION;
	uint8_t *buf = malloc(4 * PG);
	uint64_t k, p, n, i, seq = 0;
	const char *why;
	int e;

	if (!buf) {
		record_failure("shared %d: out of memory", w->id);
		return NULL;
	}
	for (k = 0; k < w->ops && !atomic_load(&stop); k++) {
		p = rnd(&w->rng, SHARED);
		n = 1 + rnd(&w->rng, 4);
		if (p + n > SHARED)
			n = SHARED - p;
		switch (rnd(&w->rng, 10)) {
		case 0: case 1: case 2: case 3: case 4:
			for (i = 0; i < n; i++)
				make_page(buf + i * PG, base + p + i,
					  (uint64_t)w->id, seq++, &w->rng);
			e = uzram_write(dev, buf, n * PG, (base + p) * PG);
			if (e)
				record_failure("shared %d: write: %d", w->id,
					       e);
			w->writes++;
			break;
		case 5:
			e = rnd(&w->rng, 2) ?
			    uzram_discard(dev, PG, (base + p) * PG) :
			    uzram_write_zeroes(dev, PG, (base + p) * PG,
					       UZRAM_ZERO_NO_HOLE);
			if (e)
				record_failure("shared %d: zeroing: %d", w->id,
					       e);
			w->zeroes++;
			break;
		default:
			e = uzram_read(dev, buf, n * PG, (base + p) * PG);
			if (e) {
				record_failure("shared %d: read: %d", w->id, e);
				break;
			}
			for (i = 0; i < n; i++) {
				why = check_page(buf + i * PG, base + p + i);
				if (why)
					record_failure("shared %d op %llu: page "
						       "%llu: %s", w->id,
						       (unsigned long long)k,
						       (unsigned long long)
						       (base + p + i), why);
			}
			w->reads++;
			w->pages_seen += n;
			break;
		}
	}
	free(buf);
	return NULL;
}

static void *compactor(void *arg)
{
	const struct timespec pause = { 0, 1000000 };
	uint64_t *count = arg;
	long n;

	while (!atomic_load(&stop)) {
		n = uzram_compact(dev);
		if (n < 0)
			record_failure("uzram_compact: %ld", n);
		(*count)++;
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* Stats and block status while everything moves: sane, never failing. */
static void *observer(void *arg)
{
	const struct timespec pause = { 0, 50000 };
	uint64_t rng = 77, off, len, run, *count = arg;
	struct uzram_stats st;
	unsigned flags;
	int e;

	while (!atomic_load(&stop)) {
		if (uzram_stats(dev, &st, sizeof(st)))
			record_failure("uzram_stats failed");
		if (st.pages_stored > NPAGES || st.same_pages > NPAGES ||
		    st.huge_pages > NPAGES)
			record_failure("insane stats: stored %llu same %llu "
				       "huge %llu",
				       (unsigned long long)st.pages_stored,
				       (unsigned long long)st.same_pages,
				       (unsigned long long)st.huge_pages);
		off = rnd(&rng, NPAGES * PG);
		len = 1 + rnd(&rng, NPAGES * PG - off);
		e = uzram_block_status(dev, off, len, &run, &flags);
		if (e || run == 0 || run > len || flags == UZRAM_STATUS_HOLE ||
		    flags > (UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO))
			record_failure("block_status %llu @ %llu: %d, run %llu,"
				       " flags %u", (unsigned long long)len,
				       (unsigned long long)off, e,
				       (unsigned long long)run, flags);
		(*count)++;
		nanosleep(&pause, NULL);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct worker w[NPRIV + NSHARED];
	uint64_t ncompact = 0, nobserve = 0, ops = tu_scaled(OPS), k;
	pthread_t tc, to;
	struct uzram_stats st;
	const char *why;
	uint8_t *buf;
	size_t at;
	int i;

	(void)state;
	memset(w, 0, sizeof(w));
	printf("   %llu operations per worker\n", (unsigned long long)ops);
	for (i = 0; i < NPRIV + NSHARED; i++) {
		w[i].id = i < NPRIV ? i : i - NPRIV;
		w[i].rng = 0x1234567ull * (uint64_t)(i + 1);
		w[i].ops = ops;
		if (i < NPRIV) {
			w[i].ref = calloc(1, REGION * PG);
			assert_non_null(w[i].ref);
		}
	}
	assert_int_equal(pthread_create(&tc, NULL, compactor, &ncompact), 0);
	assert_int_equal(pthread_create(&to, NULL, observer, &nobserve), 0);
	for (i = 0; i < NPRIV + NSHARED; i++)
		assert_int_equal(pthread_create(&w[i].th, NULL,
						i < NPRIV ? private_worker :
						shared_worker, &w[i]), 0);
	for (i = 0; i < NPRIV + NSHARED; i++)
		pthread_join(w[i].th, NULL);
	atomic_store(&stop, 1);
	pthread_join(tc, NULL);
	pthread_join(to, NULL);
	if (fail_text[0])
		fail_msg("%s", fail_text);

	/* Everything at rest: every region exact, every shared page whole. */
	buf = malloc(REGION * PG);
	assert_non_null(buf);
	for (i = 0; i < NPRIV; i++) {
		assert_int_equal(uzram_read(dev, buf, REGION * PG,
					    (uint64_t)i * REGION * PG), 0);
		if (first_diff(buf, w[i].ref, REGION * PG, &at))
			fail_msg("region %d differs at offset %llu at the end",
				 i, (unsigned long long)((uint64_t)i * REGION *
							  PG + at));
	}
	assert_int_equal(uzram_read(dev, buf, SHARED * PG,
				    NPRIV * REGION * PG), 0);
	for (k = 0; k < SHARED; k++) {
		why = check_page(buf + k * PG, NPRIV * REGION + k);
		if (why)
			fail_msg("shared page %llu at the end: %s",
				 (unsigned long long)k, why);
	}
	assert_int_equal(uzram_stats(dev, &st, sizeof(st)), 0);
	assert_int_equal(st.failed_reads, 0);
	assert_int_equal(st.failed_writes, 0);
	assert_int_equal(st.invalid_io, 0);
	assert_int_equal(st.orig_data_size, st.pages_stored * PG);
	assert_true(st.pages_stored <= NPAGES);
	printf("   workers: %llu/%llu/%llu reads/writes/zeroings (worker 0); "
	       "shared readers saw %llu pages; %llu compactions, %llu "
	       "observations; %llu pages compacted\n",
	       (unsigned long long)w[0].reads, (unsigned long long)w[0].writes,
	       (unsigned long long)w[0].zeroes,
	       (unsigned long long)(w[NPRIV].pages_seen +
				    w[NPRIV + 1].pages_seen),
	       (unsigned long long)ncompact, (unsigned long long)nobserve,
	       (unsigned long long)st.pages_compacted);
	if (w[NPRIV].pages_seen + w[NPRIV + 1].pages_seen < ops / 4)
		fail_msg("the shared readers checked too few pages");
	/* Discard all: nothing stored, nothing left in the allocator. */
	assert_int_equal(uzram_discard(dev, NPAGES * PG, 0), 0);
	assert_int_equal(uzram_stats(dev, &st, sizeof(st)), 0);
	assert_int_equal(st.pages_stored, 0);
	assert_int_equal(st.compr_data_size, 0);
	for (i = 0; i < NPRIV; i++)
		free(w[i].ref);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, load, unload);
}
