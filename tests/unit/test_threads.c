// SPDX-License-Identifier: MIT
/*
 * test_threads.c - many threads on one device; make test runs it under
 * ThreadSanitizer as well.
 *
 *   pages 0 .. 4*REGION-1          four private regions, one per worker:
 *                                  random reads, writes, discards and
 *                                  write-zeroes at any offset (some writes
 *                                  of the bytes already there), checked
 *                                  exactly against the worker's own copy
 *   pages 4*REGION .. +SHARED-1    one shared range: two threads write
 *                                  whole self-describing pages into it (up
 *                                  to 8 at once: the device has 2 worker
 *                                  threads, UZRAM_TEST_THREADS to change) and
 *                                  read them back, while discarding some
 *                                  and writing some back as they read them
 *   + a compaction thread and a thread reading stats and block status
 *
 * A self-describing page starts with a header (magic, page number, writer,
 * sequence number, and the CRC-32 of the whole page with that field
 * zeroed; libdeflate's crc32, already linked for the codec). Whatever the interleaving, every page read from the shared range
 * must be all zeros or carry a valid header naming that very page: a torn
 * page (half of one write and half of another) fails the checksum.
 *
 * Threads do not call cmocka's asserts (they longjmp to the main thread's
 * context); they record the first failure, and the main thread reports it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <libdeflate.h>

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

	(void)state;
	corpus = tu_corpus_mix(8u << 20, 16u << 20, &corpus_len);
	uzram_config_init(&cfg);
	cfg.size = NPAGES * PG;
	cfg.threads = tu_threads(2);
	dev = tu_open(&cfg, "test_threads");
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
			switch (rnd(&w->rng, 5)) {
			case 4:
				/* what it holds: found unchanged, not stored */
				memcpy(buf, w->ref + off, len);
				break;
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
	h.hash = libdeflate_crc32(0, p, PG);
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
	/* Check the page as it was written: with the hash field zeroed. */
	memcpy(copy, p, sizeof(copy));
	memset(p + offsetof(struct hdr, hash), 0, 8);
	want = libdeflate_crc32(0, p, PG);
	memcpy(p, copy, sizeof(copy));
	return want == h.hash ? NULL : "torn page (checksum mismatch)";
}

static void *shared_worker(void *arg)
{
	struct worker *w = arg;
	const uint64_t base = NPRIV * REGION;
	uint8_t *buf = malloc(8 * PG);
	uint64_t k, p, n, i, seq = 0;
	const char *why;
	int e;

	if (!buf) {
		record_failure("shared %d: out of memory", w->id);
		return NULL;
	}
	for (k = 0; k < w->ops && !atomic_load(&stop); k++) {
		p = rnd(&w->rng, SHARED);
		n = 1 + rnd(&w->rng, 8);
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
			/* write back what was read, racing the other writer */
			if (rnd(&w->rng, 3) == 0) {
				e = uzram_write(dev, buf, n * PG,
						(base + p) * PG);
				if (e)
					record_failure("shared %d: rewrite: %d",
						       w->id, e);
			}
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
	/* the unchanged-rewrite path ran, under all of the above */
	assert_true(st.pages_unchanged > 0);
	printf("   workers: %llu/%llu/%llu reads/writes/zeroings (worker 0); "
	       "shared readers saw %llu pages; %llu compactions, %llu "
	       "observations; %llu pages compacted, %llu unchanged\n",
	       (unsigned long long)w[0].reads, (unsigned long long)w[0].writes,
	       (unsigned long long)w[0].zeroes,
	       (unsigned long long)(w[NPRIV].pages_seen +
				    w[NPRIV + 1].pages_seen),
	       (unsigned long long)ncompact, (unsigned long long)nobserve,
	       (unsigned long long)st.pages_compacted,
	       (unsigned long long)st.pages_unchanged);
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

/*
 * Partial writes to the same pages from several threads: the device is cut
 * into CHUNK-byte pieces dealt round-robin to the threads (so most pages
 * have four owners and some pieces straddle two pages). Each thread
 * rewrites, zeroes and reads back only its own pieces; a read-modify-write
 * that lost another thread's bytes shows up as a piece with the wrong
 * contents, in the thread's own reads or in the final check.
 */
#define CHUNK 100
#define SP_PAGES 16
#define SP_THREADS 4

struct piece_worker {
	pthread_t th;
	struct uzram *dev;
	int id;
	uint64_t ops;
	uint8_t *ref;
};

static void *piece_worker(void *arg)
{
	struct piece_worker *w = arg;
	const uint64_t nchunks = SP_PAGES * PG / CHUNK;
	uint64_t rng = 0xabcdefull + (uint64_t)w->id, k, c, off, i;
	uint8_t buf[CHUNK];
	int e = 0;

	for (k = 0; k < w->ops && !atomic_load(&stop); k++) {
		c = rnd(&rng, nchunks / SP_THREADS) * SP_THREADS +
		    (uint64_t)w->id;
		off = c * CHUNK;
		switch (rnd(&rng, 6)) {
		case 0: case 1: case 2:
			for (i = 0; i < CHUNK; i++)
				buf[i] = (uint8_t)(k + i * (uint64_t)(w->id + 1));
			e = uzram_write(w->dev, buf, CHUNK, off);
			memcpy(w->ref + off, buf, CHUNK);
			break;
		case 3:
			e = rnd(&rng, 2) ? uzram_discard(w->dev, CHUNK, off) :
			    uzram_write_zeroes(w->dev, CHUNK, off,
					       UZRAM_ZERO_NO_HOLE);
			memset(w->ref + off, 0, CHUNK);
			break;
		default:
			e = uzram_read(w->dev, buf, CHUNK, off);
			if (!e && memcmp(buf, w->ref + off, CHUNK))
				record_failure("thread %d op %llu: piece at %llu "
					       "lost its bytes", w->id,
					       (unsigned long long)k,
					       (unsigned long long)off);
			break;
		}
		if (e)
			record_failure("thread %d op %llu: %d at %llu", w->id,
				       (unsigned long long)k, e,
				       (unsigned long long)off);
	}
	return NULL;
}

static void test_partial_same_page(void **state)
{
	struct piece_worker w[SP_THREADS];
	struct uzram_config cfg;
	struct uzram *d = NULL;
	uint8_t *buf;
	uint64_t c, owner;
	int i;

	(void)state;
	atomic_store(&stop, 0);
	uzram_config_init(&cfg);
	cfg.size = SP_PAGES * PG;
	assert_int_equal(uzram_open(&cfg, &d), 0);
	for (i = 0; i < SP_THREADS; i++) {
		w[i].dev = d;
		w[i].id = i;
		w[i].ops = tu_scaled(OPS);
		w[i].ref = calloc(1, SP_PAGES * PG);
		assert_non_null(w[i].ref);
	}
	for (i = 0; i < SP_THREADS; i++)
		assert_int_equal(pthread_create(&w[i].th, NULL, piece_worker,
						&w[i]), 0);
	for (i = 0; i < SP_THREADS; i++)
		pthread_join(w[i].th, NULL);
	if (fail_text[0])
		fail_msg("%s", fail_text);
	buf = malloc(SP_PAGES * PG);
	assert_non_null(buf);
	assert_int_equal(uzram_read(d, buf, SP_PAGES * PG, 0), 0);
	for (c = 0; c < SP_PAGES * PG / CHUNK; c++) {
		owner = c % SP_THREADS;
		if (memcmp(buf + c * CHUNK, w[owner].ref + c * CHUNK, CHUNK))
			fail_msg("piece %llu (bytes %llu..%llu, thread %llu) "
				 "differs at the end", (unsigned long long)c,
				 (unsigned long long)(c * CHUNK),
				 (unsigned long long)(c * CHUNK + CHUNK - 1),
				 (unsigned long long)owner);
	}
	for (i = 0; i < SP_THREADS; i++)
		free(w[i].ref);
	free(buf);
	uzram_close(d);
}

/*
 * The memory limit under contention: four threads write incompressible and
 * real pages into their own regions of a device whose limit holds about a
 * quarter of them, discarding some as they go. Every -ENOSPC must leave a
 * prefix of the request written and the rest old (each thread checks by
 * reading back), the failures must all be counted, and the limit must hold
 * with only the allocator's descriptors as slack.
 */
#define LT_REGION 256
#define LT_LIMIT (1ull << 20)
#define LT_SLACK (64ull << 10)

struct limit_worker {
	pthread_t th;
	struct uzram *dev;
	int id;
	uint64_t ops, failures, ok;
	uint8_t *ref;
};

static void *limit_worker(void *arg)
{
	struct limit_worker *w = arg;
	const uint64_t base = (uint64_t)w->id * LT_REGION * PG;
	uint64_t rng = 0x5151ull * (uint64_t)(w->id + 3), k, p, n, q, i, v;
	uint8_t *buf = malloc(2 * PG), *chk = malloc(PG);
	int e;

	if (!buf || !chk) {
		record_failure("limit worker %d: out of memory", w->id);
		goto out;
	}
	for (k = 0; k < w->ops && !atomic_load(&stop); k++) {
		p = rnd(&rng, LT_REGION);
		n = p + 1 < LT_REGION ? 1 + rnd(&rng, 2) : 1;
		switch (rnd(&rng, 5)) {
		case 0: case 1: case 2:
			if (rnd(&rng, 2)) {
				for (i = 0; i < n * PG; i += 8) {
					v = tu_rand(&rng);
					memcpy(buf + i, &v, 8);
				}
			} else {
				memcpy(buf, corpus + rnd(&rng, corpus_len -
							 2 * PG), n * PG);
			}
			e = uzram_write(w->dev, buf, n * PG, base + p * PG);
			if (e == 0) {
				memcpy(w->ref + p * PG, buf, n * PG);
				w->ok++;
				break;
			}
			if (e != -ENOSPC) {
				record_failure("limit worker %d: write: %d",
					       w->id, e);
				break;
			}
			w->failures++;
			for (q = 0; q < n; q++) {
				if (uzram_read(w->dev, chk, PG,
					       base + (p + q) * PG))
					record_failure("limit worker %d: read",
						       w->id);
				if (memcmp(chk, buf + q * PG, PG))
					break;
				memcpy(w->ref + (p + q) * PG, chk, PG);
			}
			for (; q < n; q++) {
				if (uzram_read(w->dev, chk, PG,
					       base + (p + q) * PG))
					record_failure("limit worker %d: read",
						       w->id);
				if (memcmp(chk, w->ref + (p + q) * PG, PG))
					record_failure("limit worker %d op %llu:"
						       " page %llu lost its old "
						       "bytes after -ENOSPC",
						       w->id,
						       (unsigned long long)k,
						       (unsigned long long)
						       (base / PG + p + q));
			}
			break;
		case 3:
			n = 1 + rnd(&rng, 8);
			if (p + n > LT_REGION)
				n = LT_REGION - p;
			if (uzram_discard(w->dev, n * PG, base + p * PG))
				record_failure("limit worker %d: discard",
					       w->id);
			memset(w->ref + p * PG, 0, n * PG);
			break;
		default:
			if (uzram_read(w->dev, chk, PG, base + p * PG))
				record_failure("limit worker %d: read", w->id);
			else if (memcmp(chk, w->ref + p * PG, PG))
				record_failure("limit worker %d op %llu: page "
					       "%llu differs", w->id,
					       (unsigned long long)k,
					       (unsigned long long)
					       (base / PG + p));
			break;
		}
	}
out:
	free(buf);
	free(chk);
	return NULL;
}

static void test_limit_threads(void **state)
{
	struct limit_worker w[4];
	struct uzram_config cfg;
	struct uzram_stats st;
	struct uzram *d = NULL;
	uint64_t failures = 0, ok = 0;
	uint8_t *buf;
	int i;

	(void)state;
	atomic_store(&stop, 0);
	uzram_config_init(&cfg);
	cfg.size = 4 * LT_REGION * PG;
	cfg.mem_limit = LT_LIMIT;
	assert_int_equal(uzram_open(&cfg, &d), 0);
	for (i = 0; i < 4; i++) {
		w[i].dev = d;
		w[i].id = i;
		w[i].ops = tu_scaled(OPS / 4);
		w[i].failures = w[i].ok = 0;
		w[i].ref = calloc(1, LT_REGION * PG);
		assert_non_null(w[i].ref);
	}
	for (i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&w[i].th, NULL, limit_worker,
						&w[i]), 0);
	for (i = 0; i < 4; i++) {
		pthread_join(w[i].th, NULL);
		failures += w[i].failures;
		ok += w[i].ok;
	}
	if (fail_text[0])
		fail_msg("%s", fail_text);
	buf = malloc(LT_REGION * PG);
	assert_non_null(buf);
	for (i = 0; i < 4; i++) {
		assert_int_equal(uzram_read(d, buf, LT_REGION * PG,
					    (uint64_t)i * LT_REGION * PG), 0);
		if (memcmp(buf, w[i].ref, LT_REGION * PG))
			fail_msg("limit region %d differs at the end", i);
		free(w[i].ref);
	}
	free(buf);
	assert_int_equal(uzram_stats(d, &st, sizeof(st)), 0);
	printf("   limit: %llu writes fit, %llu hit -ENOSPC; mem_used_max "
	       "%llu of %llu\n", (unsigned long long)ok,
	       (unsigned long long)failures,
	       (unsigned long long)st.mem_used_max,
	       (unsigned long long)LT_LIMIT);
	if (failures == 0 || ok == 0)
		fail_msg("the limit was never (or always) reached");
	assert_int_equal(st.failed_writes, failures);
	if (st.mem_used_max > LT_LIMIT + LT_SLACK)
		fail_msg("mem_used_max %llu passed the limit %llu",
			 (unsigned long long)st.mem_used_max,
			 (unsigned long long)LT_LIMIT);
	uzram_close(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_partial_same_page),
		cmocka_unit_test(test_limit_threads),
	};

	return tu_run_tests(tests, load, unload);
}
