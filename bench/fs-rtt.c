// SPDX-License-Identifier: MIT
/*
 * fs-rtt.c - the round trip of a file system, one operation at a time:
 * fs-rtt DIR OP N runs N operations on new names in DIR and prints the
 * mean and percentiles of one, in microseconds. OP is stat (of a name
 * that is not there: one LOOKUP on FUSE) or create (open O_CREAT|O_EXCL,
 * a 10 KiB write, close: on uzram's file system LOOKUP, MKNOD, GETXATTR,
 * WRITE and the directory's GETATTR). bench/fs-rtt.sh runs it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int one(const char *op, const char *path, const char *buf, size_t len)
{
	struct stat st;
	int fd;

	if (!strcmp(op, "stat"))
		return stat(path, &st) == 0 ? -1 : 0; /* the name must be new */
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, buf, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	return close(fd);
}

int main(int argc, char **argv)
{
	static char buf[10240];
	char path[4096];
	double *lat, t0, total;
	int n;

	if (argc != 4 || (strcmp(argv[2], "stat") && strcmp(argv[2], "create")) ||
	    (n = atoi(argv[3])) < 1) {
		fprintf(stderr, "usage: fs-rtt DIR stat|create N\n");
		return 2;
	}
	lat = malloc(sizeof *lat * (size_t)n);
	if (!lat)
		return 1;
	memset(buf, 'x', sizeof buf);
	t0 = now_us();
	for (int i = 0; i < n; i++) {
		double t;

		snprintf(path, sizeof path, "%s/rtt.%d.%d", argv[1], (int)getpid(), i);
		t = now_us();
		if (one(argv[2], path, buf, sizeof buf) < 0) {
			perror(path);
			return 1;
		}
		lat[i] = now_us() - t;
	}
	total = now_us() - t0;
	qsort(lat, (size_t)n, sizeof *lat, cmp);
	printf("%s mean %.1f p10 %.1f p50 %.1f p90 %.1f p99 %.1f us\n", argv[2],
	       total / n, lat[n / 10], lat[n / 2], lat[n * 9 / 10], lat[n * 99 / 100]);
	free(lat);
	return 0;
}
