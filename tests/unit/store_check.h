/* SPDX-License-Identifier: MIT */
/*
 * store_check.h - the checking kit shared by the tests of the public API
 * (test_store.c and test_states.c for what calls do, test_errors.c for what
 * they refuse).
 *
 * They keep a plain reference copy of the device and compare it whole with
 * the device after every change (check_dev), writing through dev_write so
 * the copy follows each successful write. Their pages come from the real
 * data corpus (tu_corpus()), loaded once per binary by the group setup
 * load_corpus/free_corpus and picked by the properties a test needs
 * (data_page()), or are made same-filled (fill_same) or
 * incompressible (fill_rand) on purpose.
 *
 * Everything here is static: include it from one .c file per test binary.
 */
#ifndef UZRAM_STORE_CHECK_H
#define UZRAM_STORE_CHECK_H

#include <lz4.h>

#include "uzram.h"
#include "testutil.h"

#define PG ((uint64_t)UZRAM_PAGE_SIZE)
#define SAME_VALUE 0xdeadbeefcafebabeull
/* The most a limit may be overrun by: one zspage of 16 pages. */
#define ZSPAGE_MAX (16 * PG)

static uint8_t *tar;       /* files.tar, whole */
static size_t tar_len;
static uint8_t *core;      /* the start of heap-python.core */
static size_t core_len;

static inline struct uzram *dev_open(uint64_t size, const char *algo, int level,
				     uint64_t limit)
{
	struct uzram_config cfg;

	uzram_config_init(&cfg);
	cfg.size = size;
	if (algo)
		cfg.algorithm = algo;
	cfg.level = level;
	cfg.mem_limit = limit;
	return tu_open(&cfg, "dev_open");
}

static inline struct uzram_stats get_stats(struct uzram *dev)
{
	struct uzram_stats st;

	memset(&st, 0xa5, sizeof(st));
	assert_int_equal(uzram_stats(dev, &st, sizeof(st)), 0);
	return st;
}

static inline int is_same_filled(const uint8_t *p)
{
	uint64_t v, w;
	size_t i;

	memcpy(&v, p, 8);
	for (i = 8; i < PG; i += 8) {
		memcpy(&w, p + i, 8);
		if (w != v)
			return 0;
	}
	return 1;
}

static inline int has_data(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return 1;
	return 0;
}

/*
 * Data pages: real pages of the corpus (files.tar's, then the core's) that
 * have the properties the tests rely on, so that no test depends on which
 * files a machine has installed: not same-filled, non-zero first and last
 * bytes and data in the first and last 128 bytes (a partial zeroing never
 * leaves a zero page, a 1-byte write never writes a zero), and LZ4
 * compresses them to less than half (never huge, with any codec and level).
 */
#define DATA_PAGES_MAX 4096
static const uint8_t *data_pages[DATA_PAGES_MAX];
static size_t data_pages_n;

static inline int is_data_page(const uint8_t *p)
{
	char out[LZ4_COMPRESSBOUND(PG)];

	if (!p[0] || !p[PG - 1] || is_same_filled(p) || !has_data(p, 128) ||
	    !has_data(p + PG - 128, 128))
		return 0;
	return LZ4_compress_default((const char *)p, out, (int)PG,
				    (int)sizeof(out)) < (int)PG / 2;
}

/*
 * What the device stores for page p with lz4, its default: LZ4's output,
 * or the page raw when that would save less than 1/64 (huge).
 */
static inline uint64_t lz4_stored_size(const uint8_t *p)
{
	char out[LZ4_COMPRESSBOUND(PG)];
	int n = LZ4_compress_default((const char *)p, out, (int)PG,
				     (int)sizeof(out));

	return n > 0 && n <= (int)(PG - PG / 64) ? (uint64_t)n : PG;
}

static inline void find_data_pages(void)
{
	const uint8_t *const bufs[] = { tar, core };
	const size_t lens[] = { tar_len, core_len };

	data_pages_n = 0;
	for (size_t b = 0; b < 2; b++)
		for (size_t i = 0; i + PG <= lens[b] &&
				   data_pages_n < DATA_PAGES_MAX; i += PG)
			if (is_data_page(bufs[b] + i))
				data_pages[data_pages_n++] = bufs[b] + i;
}

static inline const uint8_t *data_page(size_t n)
{
	if (n >= data_pages_n)
		fail_msg("the corpus has only %zu data pages (compressible, not "
			 "same-filled, non-zero ends); this test needs %zu",
			 data_pages_n, n + 1);
	return data_pages[n];
}

/* n data pages from the first-th on, one after another, into buf. */
static inline void data_pages_copy(uint8_t *buf, size_t first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		memcpy(buf + i * PG, data_page(first + i), PG);
}

static inline int load_corpus(void **state)
{
	(void)state;
	tar = tu_corpus("files.tar", 8u << 20, &tar_len);
	core = tu_corpus("heap-python.core", 24u << 20, &core_len);
	if (tar_len < (4u << 20) || core_len < (20u << 20))
		fail_msg("corpus too small: files.tar %zu, core %zu bytes",
			 tar_len, core_len);
	find_data_pages();
	return 0;
}

static inline int free_corpus(void **state)
{
	(void)state;
	free(tar);
	free(core);
	return 0;
}

static inline void fill_same(uint8_t *p, size_t len, uint64_t v)
{
	size_t i;

	for (i = 0; i + 8 <= len; i += 8)
		memcpy(p + i, &v, 8);
}

static inline void fill_rand(uint8_t *p, size_t len, uint64_t *seed)
{
	size_t i;
	uint64_t v;

	for (i = 0; i < len; i += 8) {
		v = tu_rand(seed);
		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

/*
 * Write random (so raw) pages from page 0 on, into the device and ref,
 * until one fails: it must fail with -ENOSPC (a limit) before npages.
 * Returns the number of pages written.
 */
static inline uint64_t fill_to_limit(struct uzram *dev, uint8_t *ref,
				     uint64_t npages, uint64_t seed)
{
	uint8_t page[PG];
	uint64_t p;
	int r = 0;

	for (p = 0; p < npages; p++) {
		fill_rand(page, PG, &seed);
		r = uzram_write(dev, page, PG, p * PG);
		if (r)
			break;
		memcpy(ref + p * PG, page, PG);
	}
	assert_int_equal(r, -ENOSPC);
	return p;
}

/* Compare every byte of the device with ref; report the first difference. */
static inline void check_dev_at(struct uzram *dev, const uint8_t *ref,
				const char *what, int line)
{
	uint64_t size = uzram_size(dev), off;
	size_t chunk = 1u << 20, n, i;
	uint8_t *buf = malloc(chunk);
	int r;

	assert_non_null(buf);
	for (off = 0; off < size; off += n) {
		n = size - off < chunk ? (size_t)(size - off) : chunk;
		r = uzram_read(dev, buf, n, off);
		if (r)
			fail_msg("line %d, %s: uzram_read(%zu @ %llu) = %d",
				 line, what, n, (unsigned long long)off, r);
		if (memcmp(buf, ref + off, n) == 0)
			continue;
		for (i = 0; buf[i] == ref[off + i]; i++)
			;
		fail_msg("line %d, %s: device differs from reference at offset "
			 "%llu (page %llu): 0x%02x, want 0x%02x", line, what,
			 (unsigned long long)(off + i),
			 (unsigned long long)((off + i) / PG), buf[i],
			 ref[off + i]);
	}
	free(buf);
}

#define check_dev(dev, ref, what) check_dev_at(dev, ref, what, __LINE__)

static inline void dev_write(struct uzram *dev, uint8_t *ref, const void *buf,
			     size_t len, uint64_t off)
{
	int r = uzram_write(dev, buf, len, off);

	if (r)
		fail_msg("uzram_write(%zu @ %llu) = %d (%s)", len,
			 (unsigned long long)off, r, uzram_last_error());
	memcpy(ref + off, buf, len);
}

/* Read [off, off + len) into a buffer with guard bytes on either side. */
static inline void check_read(struct uzram *dev, const uint8_t *ref, uint64_t off,
		       size_t len)
{
	uint8_t *buf = malloc(len + 64);
	size_t i;
	int r;

	assert_non_null(buf);
	memset(buf, 0x5a, len + 64);
	r = uzram_read(dev, buf + 32, len, off);
	if (r)
		fail_msg("uzram_read(%zu @ %llu) = %d", len,
			 (unsigned long long)off, r);
	for (i = 0; i < 32; i++)
		if (buf[i] != 0x5a || buf[32 + len + i] != 0x5a)
			fail_msg("uzram_read(%zu @ %llu) wrote outside buf",
				 len, (unsigned long long)off);
	if (memcmp(buf + 32, ref + off, len))
		fail_msg("uzram_read(%zu @ %llu) returned wrong bytes", len,
			 (unsigned long long)off);
	free(buf);
}

/* The flags of every page, walked with uzram_block_status() page by page. */
static inline unsigned page_status(struct uzram *dev, uint64_t page)
{
	uint64_t run = 0;
	unsigned flags = ~0u;

	assert_int_equal(uzram_block_status(dev, page * PG, PG, &run, &flags),
			 0);
	assert_int_equal(run, PG);
	return flags;
}

#endif
