// SPDX-License-Identifier: MIT
/*
 * swapwatch.c - a watchdog for the VM bench's swap tests: what the swap
 * server's threads are doing while the guest swaps to it.
 *
 *   swapwatch SECONDS PID...
 *
 * Every SECONDS, writes one report to /dev/console: the guest's free
 * memory and swap counters, then for each PID its VmRSS, VmLck and VmSwap,
 * and for each of its threads the state, wchan, system call and kernel
 * stack (/proc/PID/task/TID/stack). When pswpout has not moved since the
 * last report, also asks the kernel for its blocked tasks (sysrq w, with
 * the console's log level raised for it).
 *
 * It must keep running when the guest is short of memory, or it would
 * report nothing of a stall: it locks all it maps (mlockall without
 * ONFAULT, its buffer is static and touched first), runs SCHED_FIFO, and
 * allocates as the kernel's I/O path does (PR_SET_IO_FLUSHER).
 */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

static char out[1 << 16];
static size_t len;
static char tmp[8192];

static void add(const char *s)
{
	size_t n = strlen(s);

	if (len + n >= sizeof out)
		n = sizeof out - 1 - len;
	memcpy(out + len, s, n);
	len += n;
}

/* The text of a file, or "" ; at most sizeof tmp - 1 bytes. */
static const char *slurp(const char *path)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = -1;

	if (fd >= 0) {
		n = read(fd, tmp, sizeof tmp - 1);
		close(fd);
	}
	tmp[n > 0 ? n : 0] = 0;
	return tmp;
}

/* The lines of path that begin with one of the keys, each prefixed. */
static void lines(const char *path, const char *const *keys, const char *prefix)
{
	char *s = (char *)slurp(path), *nl;
	int i;

	for (; s && *s; s = nl) {
		nl = strchr(s, '\n');
		if (nl)
			*nl++ = 0;
		for (i = 0; keys[i]; i++) {
			if (!strncmp(s, keys[i], strlen(keys[i]))) {
				add(prefix);
				add(s);
				add("\n");
				break;
			}
		}
	}
}

static long pswpout(void)
{
	const char *s = strstr(slurp("/proc/vmstat"), "pswpout ");

	return s ? atol(s + 8) : -1;
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);

	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			add("WATCH  write failed\n");
		close(fd);
	}
}

/* The blocked tasks' stacks, on the console: they print at KERN_INFO. */
static void sysrq_w(void)
{
	char level[64];

	snprintf(level, sizeof level, "%s", slurp("/proc/sys/kernel/printk"));
	put("/proc/sys/kernel/printk", "7");
	put("/proc/sysrq-trigger", "w");
	put("/proc/sys/kernel/printk", level);
}

int main(int argc, char **argv)
{
	static const char *const mem[] = { "MemFree", "SwapFree", NULL };
	static const char *const vm[] = { "pswpin", "pswpout", "allocstall", NULL };
	static const char *const st[] = { "VmRSS", "VmLck", "VmSwap", "Threads", NULL };
	struct sched_param sp = { .sched_priority = 50 };
	char path[600], line[600];
	long last = -2, now;
	int con, i, secs, tick = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: swapwatch SECONDS PID...\n");
		return 2;
	}
	secs = atoi(argv[1]);
	memset(out, 0, sizeof out);
	memset(tmp, 0, sizeof tmp);
	prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0);
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		perror("swapwatch: mlockall");
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		perror("swapwatch: SCHED_FIFO");
	con = open("/dev/console", O_WRONLY | O_NOCTTY);
	if (con < 0) {
		perror("swapwatch: /dev/console");
		return 1;
	}
	for (;;) {
		sleep(secs);
		len = 0;
		snprintf(line, sizeof line, "WATCH %d\n", tick++);
		add(line);
		lines("/proc/meminfo", mem, "WATCH  ");
		lines("/proc/vmstat", vm, "WATCH  ");
		for (i = 2; i < argc; i++) {
			DIR *d;
			struct dirent *e;

			snprintf(path, sizeof path, "/proc/%s/status", argv[i]);
			snprintf(line, sizeof line, "WATCH  pid %s ", argv[i]);
			lines(path, st, line);
			snprintf(path, sizeof path, "/proc/%s/task", argv[i]);
			d = opendir(path);
			while (d && (e = readdir(d))) {
				const char *s;

				if (e->d_name[0] == '.')
					continue;
				snprintf(path, sizeof path, "/proc/%s/task/%s/stat",
					 argv[i], e->d_name);
				s = strchr(slurp(path), ')');
				snprintf(line, sizeof line, "WATCH  tid %s state %c ",
					 e->d_name, s && s[1] ? s[2] : '?');
				add(line);
				snprintf(path, sizeof path, "/proc/%s/task/%s/wchan",
					 argv[i], e->d_name);
				add("wchan ");
				add(slurp(path));
				snprintf(path, sizeof path, "/proc/%s/task/%s/syscall",
					 argv[i], e->d_name);
				add(" syscall ");
				add(slurp(path));
				snprintf(path, sizeof path, "/proc/%s/task/%s/stack",
					 argv[i], e->d_name);
				add(slurp(path));
			}
			if (d)
				closedir(d);
		}
		now = pswpout();
		if (now == last) {
			add("WATCH  pswpout still: sysrq w\n");
			sysrq_w();
		}
		last = now;
		if (write(con, out, len) < 0)
			return 1;
	}
}
