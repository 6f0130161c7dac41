// SPDX-License-Identifier: MIT
/*
 * hungwatch.c - the VM bench's hang reporter, started by /init in every
 * guest: when the kernel reports a hung task, a lockup, a stall or RT
 * throttling, the stacks that explain it reach the serial console log.
 *
 *   hungwatch
 *
 * The guests boot with loglevel=4: the console shows only errors, and the
 * kernel prints the stack of a hung task (`INFO: task X blocked for more
 * than N seconds`, hung_task.c) and sysrq's task lists at KERN_INFO, and
 * "sched: RT throttling activated" at KERN_WARNING: the log of one
 * v42 hang (issue 30's swapon on ublk) had the first line and nothing else. This reads every record
 * of /dev/kmsg as it comes; on one of the lines below it writes it to
 * /dev/console with the records that follow it (the stack) at every level,
 * each as "KMSG <text>", then asks the kernel for the blocked tasks
 * (sysrq w), every CPU's backtrace (sysrq l) and, the first time, every
 * task (sysrq t) with the console's level raised to 7 for 5 s, so the
 * kernel prints them itself (its console printing may be a thread of its
 * own on new kernels, hence the 5 s). At most MAX_REPORTS a boot; after
 * each, the count of reports so far in /run/hungwatch.reports (for
 * tests/vm/v16-hang-report.sh).
 *
 *   ring buffer --/dev/kmsg--> hungwatch --trigger?--> /dev/console (KMSG)
 *                                  |
 *                                  +--> sysrq w, l, t (console level 7)
 *
 * It also reports a test that stands still: guest-lib.sh's check, pass,
 * fail and info append a byte to /run/vm-steps, and when a test has made
 * no step for STEP_STALL_S seconds, the same report follows a line that
 * says so, with the memory (sysrq m). The kernel misses that stall: a
 * task waiting for a swap-in waits killable, which hung_task.c skips, and
 * a watcher in bash is as likely as the test to have its pages on the
 * device that stands still (v44 stood 300 s with nothing on the console,
 * 2026-12-04).
 *
 * It must run when the guest is short of memory, since that is when hangs
 * come: it locks what it maps, its buffers are static, it runs SCHED_FIFO
 * at 60 (above the swap server's SCHED_RR 1) and allocates as the
 * kernel's I/O path does (PR_SET_IO_FLUSHER). It costs nothing while
 * nothing is reported: it sleeps in read().
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/klog.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif
#define SYSLOG_ACTION_CONSOLE_LEVEL 8

enum { MAX_REPORTS = 4, STEP_STALL_S = 120, STEP_POLL_MS = 10000 };

#define STEP_FILE "/run/vm-steps"

static const char *const triggers[] = {
	"blocked for more than",   /* hung_task.c */
	"blocked in I/O wait for more than", /* hung_task.c, newer kernels (7.3) */
	"soft lockup",             /* watchdog.c */
	"hard LOCKUP",
	"detected stalls on CPUs", /* RCU */
	"self-detected stall",
	"RT throttling activated", /* sched/rt.c */
	NULL,
};

static char rec[8192];
static char line[8448];
static int con = -1, sysrq = -1;
static int level = 4;  /* the console's log level at start */

/* A line on the console, through no buffer of stdio's. */
static void say(const char *text)
{
	if (write(con, text, strlen(text)) < 0)
		return;
}

/* sysrq c on the descriptor opened at start: nothing to allocate */
static void ask(char c)
{
	if (write(sysrq, &c, 1) < 0)
		say("HUNGWATCH sysrq failed\n");
}

/* One /dev/kmsg record ("prio,seq,usec,flags;text\n KEY=VALUE..."), the
 * first line of its text, as "KMSG [secs] text" on the console. */
static void mirror(const char *r)
{
	const char *text = strchr(r, ';');
	unsigned long long usec = 0;
	int n;

	if (!text)
		return;
	sscanf(r, "%*d,%*u,%llu", &usec);
	text++;
	n = snprintf(line, sizeof line, "KMSG [%llu.%06llu] %.*s\n", usec / 1000000,
		     usec % 1000000, (int)strcspn(text, "\n"), text);
	if (n > (int)sizeof line - 1)
		n = sizeof line - 1;
	if (write(con, line, n) < 0)
		return;
}

static int triggered(const char *r)
{
	int i;

	for (i = 0; triggers[i]; i++)
		if (strstr(r, triggers[i]))
			return 1;
	return 0;
}

/* The next record, waiting at most ms (-1: for ever); 0 when none came. */
static ssize_t next(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	for (;;) {
		if (poll(&p, 1, ms) <= 0)
			return 0;
		n = read(fd, rec, sizeof rec - 1);
		if (n > 0) {
			rec[n] = 0;
			return n;
		}
		/* EPIPE: records were overwritten before we read them */
		if (n < 0 && errno != EPIPE && errno != EINTR && errno != EAGAIN)
			return -1;
	}
}

/*
 * The report. Nothing here opens a file or allocates: a hang under memory
 * pressure may be one where no allocation returns (v51's first hang
 * stopped this program in an open() of /proc/sys/kernel/printk). The
 * console's level is set with syslog(2), the sysrq descriptor was opened
 * at start.
 */
static void report(int fd, int first, const char *why)
{
	if (why) {
		say(why);
	} else {
		mirror(rec);
		/* the rest of the kernel's report: what came within a second */
		while (next(fd, 1000) > 0)
			mirror(rec);
	}
	say(first ? "HUNGWATCH the blocked tasks, the CPUs, every task:\n" :
		    "HUNGWATCH the blocked tasks, the CPUs:\n");
	klogctl(SYSLOG_ACTION_CONSOLE_LEVEL, NULL, 7);
	ask('w');
	ask('l');
	if (why)
		ask('m');
	if (first)
		ask('t');
	sleep(5);
	klogctl(SYSLOG_ACTION_CONSOLE_LEVEL, NULL, level);
	/* what sysrq printed went to the console by itself */
	while (next(fd, 0) > 0)
		;
	say("HUNGWATCH end of report\n");
}

/*
 * 1 when the test's last step (STEP_FILE's mtime) is STEP_STALL_S old,
 * once a step: stat() allocates nothing of ours.
 */
static int stood_still(time_t *reported)
{
	struct stat st;

	if (stat(STEP_FILE, &st) < 0 || st.st_mtime == *reported ||
	    time(NULL) - st.st_mtime < STEP_STALL_S)
		return 0;
	*reported = st.st_mtime;
	return 1;
}

int main(void)
{
	struct sched_param sp = { .sched_priority = 60 };
	int fd, count, reports = 0;
	time_t reported = 0;
	ssize_t n;
	char counts[16];
	FILE *f;

	memset(rec, 0, sizeof rec);
	memset(line, 0, sizeof line);
	prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0);
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		perror("hungwatch: mlockall");
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		perror("hungwatch: SCHED_FIFO");
	f = fopen("/proc/sys/kernel/printk", "r");
	if (f) {
		if (fscanf(f, "%d", &level) != 1)
			level = 4;
		fclose(f);
	}
	con = open("/dev/console", O_WRONLY | O_NOCTTY);
	sysrq = open("/proc/sysrq-trigger", O_WRONLY);
	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	count = open("/run/hungwatch.reports", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (con < 0 || sysrq < 0 || fd < 0 || count < 0) {
		perror("hungwatch: /dev/console, /proc/sysrq-trigger, /dev/kmsg or /run/hungwatch.reports");
		return 1;
	}
	while (reports < MAX_REPORTS) {
		n = next(fd, STEP_POLL_MS);
		if (n < 0)
			return 1;
		if (n > 0 && triggered(rec))
			report(fd, reports == 0, NULL);
		else if (stood_still(&reported))
			report(fd, reports == 0, "HUNGWATCH the test has made no step for 120 s\n");
		else
			continue;
		snprintf(counts, sizeof counts, "%d\n", ++reports);
		if (write(count, counts, strlen(counts)) < 0)
			say("HUNGWATCH cannot count\n");
	}
	return 0;
}
