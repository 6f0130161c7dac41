// SPDX-License-Identifier: MIT
/*
 * callgrind.c - the library's instructions per page written and per 4 KiB
 * read, for callgrind (bench/callgrind.sh runs it).
 *
 *	bench-callgrind write|read [PAGES]
 *
 * Opens a device of PAGES (default 4096) pages with the default
 * configuration, writes every page once with text-like data (words of a
 * fixed list in an order from a fixed seed, so every machine writes the
 * same bytes: compressible about as well as source code, with 1 page in 16
 * zero-filled as swap and file systems have them), then reads PAGES pages
 * at random offsets. The mode says which of the two the script counts:
 * callgrind's --toggle-collect names uzram_write or uzram_read, so the
 * figure is the library's own work, not this program's.
 *
 * Exits non-zero if a call fails or a page reads back wrong.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"

#define PAGE 4096

static uint64_t next(uint64_t *s)
{
	/* xorshift64*: the same sequence everywhere */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void fill_page(unsigned char *p, uint64_t n)
{
	static const char *const words[] = {
		"static ", "int ", "return ", "struct ", "uint64_t ", "if (",
		") {\n", "}\n", "\t", "page", "len", "off", " = ", "->", ";\n",
		"cluster", "0", "1", "dev", "NULL", "const ", "void ", "* ",
		"for (", "size_t ", "++", " < ", "/* ", " */\n", "err",
	};
	uint64_t s = n * 0x9e3779b97f4a7c15ull + 1;
	size_t at = 0;

	if (n % 16 == 15) {
		memset(p, 0, PAGE);
		return;
	}
	while (at < PAGE) {
		const char *w = words[next(&s) % (sizeof(words) / sizeof(*words))];
		size_t k = strlen(w);

		if (k > PAGE - at)
			k = PAGE - at;
		memcpy(p + at, w, k);
		at += k;
	}
}

int main(int argc, char **argv)
{
	uint64_t pages = argc > 2 ? strtoull(argv[2], NULL, 0) : 4096;
	unsigned char buf[PAGE], want[PAGE];
	struct uzram_config cfg;
	struct uzram *dev;
	uint64_t s = 42;
	int r;

	if (argc < 2 || (strcmp(argv[1], "write") && strcmp(argv[1], "read")) ||
	    !pages) {
		fprintf(stderr, "usage: bench-callgrind write|read [PAGES]\n");
		return 2;
	}
	uzram_config_init(&cfg);
	cfg.size = pages * PAGE;
	r = uzram_open(&cfg, &dev);
	if (r < 0) {
		fprintf(stderr, "bench-callgrind: open: %s\n", uzram_strerror(r));
		return 1;
	}
	for (uint64_t i = 0; i < pages; i++) {
		fill_page(buf, i);
		r = uzram_write(dev, buf, PAGE, i * PAGE);
		if (r < 0) {
			fprintf(stderr, "bench-callgrind: write: %s\n",
				uzram_strerror(r));
			return 1;
		}
	}
	for (uint64_t i = 0; i < pages; i++) {
		uint64_t n = next(&s) % pages;

		r = uzram_read(dev, buf, PAGE, n * PAGE);
		fill_page(want, n);
		if (r < 0 || memcmp(buf, want, PAGE)) {
			fprintf(stderr, "bench-callgrind: page %llu reads back "
				"wrong\n", (unsigned long long)n);
			return 1;
		}
	}
	uzram_close(dev);
	return 0;
}
