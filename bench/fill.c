// SPDX-License-Identifier: MIT
/*
 * fill.c - copy a corpus file onto a block device or an NBD export with
 * sequential writes of one size at queue depth 1, and time it.
 *
 *	bench-fill SRC DEST OFFSET LENGTH [BS]
 *
 * DEST is a block device (written with O_DIRECT, like fio's direct=1) or an
 * NBD URI such as nbd+unix:///?socket=/tmp/s (written with libnbd's
 * synchronous nbd_pwrite, one request in flight). LENGTH bytes of SRC from
 * its start go to DEST at OFFSET, BS bytes at a time (default 1 MiB);
 * LENGTH must be a multiple of BS. Prints one JSON object:
 *	{"bytes": N, "seconds": S, "MBps": M, "cpu_seconds": C}
 * with MB = 10^6 bytes, and C this process's CPU time (user and system)
 * over the writes: the kernel's zram compresses in the writer's context,
 * so for /dev/zram0 that is the fill's whole cost.
 *
 * fio can only write generated patterns, so the benchmark fills the kernel
 * and NBD targets with this, and the in-process target through the fio
 * engine's uzram_src option, both with the same request size and depth.
 */
#include <errno.h>
#include <fcntl.h>
#include <libnbd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || end == s || *end ? -1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t off, len, bs = 1u << 20, done = 0;
	struct nbd_handle *nbd = NULL;
	int src, dst = -1, ret = 1;
	void *buf = NULL;
	double t0, t, cpu0;

	if (argc < 5 || argc > 6 || parse_u64(argv[3], &off) ||
	    parse_u64(argv[4], &len) || (argc == 6 && parse_u64(argv[5], &bs)) ||
	    !bs || len % bs) {
		fprintf(stderr, "usage: bench-fill SRC DEST OFFSET LENGTH [BS]\n");
		return 2;
	}
	src = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (src < 0) {
		fprintf(stderr, "bench-fill: cannot open %s: %s\n", argv[1],
			strerror(errno));
		return 1;
	}
	if (posix_memalign(&buf, 4096, bs)) {
		fprintf(stderr, "bench-fill: out of memory\n");
		goto out;
	}
	if (!strncmp(argv[2], "nbd", 3)) {
		nbd = nbd_create();
		if (!nbd || nbd_connect_uri(nbd, argv[2]) == -1) {
			fprintf(stderr, "bench-fill: %s: %s\n", argv[2],
				nbd_get_error());
			goto out;
		}
	} else {
		dst = open(argv[2], O_WRONLY | O_DIRECT | O_CLOEXEC);
		if (dst < 0) {
			fprintf(stderr, "bench-fill: cannot open %s: %s\n",
				argv[2], strerror(errno));
			goto out;
		}
	}
	t0 = now();
	cpu0 = cpu_now();
	while (done < len) {
		ssize_t got = pread(src, buf, bs, done);

		if (got != (ssize_t)bs) {
			fprintf(stderr, "bench-fill: short read of %s at %llu\n",
				argv[1], (unsigned long long)done);
			goto out;
		}
		if (nbd ? nbd_pwrite(nbd, buf, bs, off + done, 0) == -1 :
			  pwrite(dst, buf, bs, off + done) != (ssize_t)bs) {
			fprintf(stderr, "bench-fill: write at %llu failed: %s\n",
				(unsigned long long)(off + done),
				nbd ? nbd_get_error() : strerror(errno));
			goto out;
		}
		done += bs;
	}
	t = now() - t0;
	printf("{\"bytes\": %llu, \"seconds\": %.4f, \"MBps\": %.1f, "
	       "\"cpu_seconds\": %.4f}\n", (unsigned long long)done, t,
	       done / t / 1e6, cpu_now() - cpu0);
	ret = 0;
out:
	if (nbd) {
		nbd_shutdown(nbd, 0);
		nbd_close(nbd);
	}
	if (dst >= 0)
		close(dst);
	close(src);
	free(buf);
	return ret;
}
