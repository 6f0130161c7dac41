// SPDX-License-Identifier: MIT
/*
 * collide.c - a program with names of its own that the library uses
 * inside (scripts/check-namespace.sh links it against libuzram.a and
 * libuzram.so). Each is a different kind of thing from the library's, so
 * a library that exported its internal names would fail to link, or call
 * the program's function instead of its own and fail at run time.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "uzram.h"

/* The library's names: a function of the memory limit, the store's slot
 * lookup, the device's tier pointer, a backing-store place, a writeback
 * batch. Here: other signatures, other meanings. */
int tier = 7;
double place[4] = { 1.0, 2.0, 3.0, 4.0 };
bool mem_fits(int a, int b);
const char *slot_get(void);
long batch_new(long x);

bool mem_fits(int a, int b) { return a <= b; }
const char *slot_get(void) { return "the program's slot_get"; }
long batch_new(long x) { return x * 3; }

int main(void)
{
	static unsigned char in[64 << 10], out[64 << 10];
	struct uzram_config cfg;
	struct uzram *dev;
	int ret;

	for (size_t i = 0; i < sizeof in; i++)
		in[i] = (unsigned char)(i % 251 < 128 ? i : 0);
	uzram_config_init(&cfg);
	cfg.size = 16 << 20;
	cfg.mem_limit = 8 << 20;
	ret = uzram_open(&cfg, &dev);
	if (ret) {
		fprintf(stderr, "collide: open: %s\n", uzram_last_error());
		return 1;
	}
	ret = uzram_write(dev, in, sizeof in, 4096);
	if (!ret)
		ret = uzram_read(dev, out, sizeof out, 4096);
	uzram_close(dev);
	if (ret || memcmp(in, out, sizeof in)) {
		fprintf(stderr, "collide: the device read back other bytes (%d)\n", ret);
		return 1;
	}
	if (!mem_fits(1, 2) || strcmp(slot_get(), "the program's slot_get") ||
	    batch_new(2) != 6 || tier != 7 || place[3] != 4.0) {
		fprintf(stderr, "collide: the program's own names changed\n");
		return 1;
	}
	return 0;
}
