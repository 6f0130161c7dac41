// SPDX-License-Identifier: MIT
/*
 * serve_keep.c - `uzram serve --keeper`: a small process that holds the
 * memfd of a kept store (uzram_config.keep_fd; doc/keep.md) and runs the
 * server on it, again and again.
 *
 *   keeper: memfd_create() (inherited by its children), oom_score_adj
 *           -1000, its own pages locked as it touches them
 *     |
 *     +-- fork, exec: uzram serve ARGS --keep-fd FD        (the server)
 *     |     dies of a signal (SIGKILL, a crash, the OOM killer)
 *     +-- fork, exec: uzram serve ARGS --keep-fd FD --ublk-take-over N
 *     |     adopts the store and recovers /dev/ublkbN: the requests that
 *     |     waited, and those in flight at the death (RECOVERY_REISSUE),
 *     |     are served from the same data
 *     ...
 *   SIGTERM, SIGINT, SIGHUP to the keeper: passed on to the server; the
 *   keeper exits with the server's status once it has stopped.
 *
 * A server that exits by itself (an error: a store it refuses, a take-over
 * that fails) ends the keeper: with ublk, the keeper then deletes the
 * device, so that the I/O waiting on it fails instead of waiting for ever
 * (serving data the store cannot vouch for would be worse). So does a
 * server that dies KEEP_DEATHS times within KEEP_WINDOW_S seconds.
 *
 * The keeper allocates nothing after it starts the first server and does
 * no I/O but the wait, so that it runs when memory is short; the store's
 * pages are locked by the server that maps them (serve --swap), not by the
 * keeper, which never maps them (doc/keep.md: the window between a death
 * and the adoption).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uzram.h"
#include "cli.h"
#include "../ublk/ublk.h"

#define KEEP_DEATHS 5
#define KEEP_WINDOW_S 10

char **serve_keep_args(int argc, char **argv)
{
	char **copy = calloc((size_t)argc + 1, sizeof *copy);

	if (copy)
		memcpy(copy, argv, (size_t)argc * sizeof *copy);
	return copy;
}

void serve_keep_report(struct uzram *dev)
{
	struct uzram_keep_info info;

	if (uzram_keep_info(dev, &info) < 0 || !info.kept)
		return;
	if (info.adopted)
		printf("uzram serve: adopted the kept store: %llu clusters "
		       "hold data, %llu writes were cut short\n",
		       (unsigned long long)info.slots,
		       (unsigned long long)info.torn);
	else
		printf("uzram serve: the device's store is kept (--keep-fd)\n");
	fflush(stdout);
}

/* The server's command line: args without --keeper, and the fd (and id). */
static char **child_argv(char **args, char *self, char *fd, char *take_over)
{
	size_t n = 0, k = 0;
	char **v;

	while (args[n])
		n++;
	v = calloc(n + 7, sizeof *v);
	if (!v)
		return NULL;
	v[k++] = self;
	v[k++] = "serve";
	for (size_t i = 1; i < n; i++)
		if (strcmp(args[i], "--keeper"))
			v[k++] = args[i];
	v[k++] = "--keep-fd";
	v[k++] = fd;
	if (take_over) {
		v[k++] = "--ublk-take-over";
		v[k++] = take_over;
	}
	return v;
}

static pid_t start(char **argv, const sigset_t *old)
{
	pid_t pid = fork();

	if (pid == 0) {
		sigprocmask(SIG_SETMASK, old, NULL);
		execv(argv[0], argv);
		fprintf(stderr, "uzram serve --keeper: cannot run %s: %s\n",
			argv[0], strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		fprintf(stderr, "uzram serve --keeper: fork: %s\n", strerror(errno));
	return pid;
}

/* Wait for the server; a stop signal is passed on. Its wait status. */
static int wait_server(pid_t pid, const sigset_t *set, int *stopping)
{
	int ws;

	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(set, &si);

		if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
			*stopping = 1;
			kill(pid, sig);
		}
		if (waitpid(pid, &ws, WNOHANG) == pid)
			return ws;
	}
}

/* A server that will not come back: the device fails its I/O. */
static void give_up(int ublk_id)
{
	if (ublk_id >= 0)
		(void)ublk_del_device(ublk_id, "uzram serve --keeper");
}

static void keeper_setup(void)
{
	FILE *f = fopen("/proc/self/oom_score_adj", "w");

	if (f) {
		fputs("-1000", f);
		fclose(f);
	}
	(void)mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT);
}

int serve_keeper(char **args, bool ublk, int ublk_id)
{
	char self[4096], fdbuf[16], idbuf[16];
	char **first = NULL, **again = NULL;
	time_t window = 0;
	int fd, deaths = 0, stopping = 0, ws, rc = 1;
	sigset_t set, old;
	ssize_t len;
	pid_t pid;

	if (ublk && ublk_id < 0) {
		fprintf(stderr, "uzram serve: --keeper --ublk needs --ublk-id\n");
		return 2;
	}
	len = readlink("/proc/self/exe", self, sizeof self - 1);
	fd = memfd_create("uzram-store", 0);
	if (len < 0 || fd < 0 || !args) {
		fprintf(stderr, "uzram serve --keeper: %s: %s\n",
			fd < 0 ? "memfd_create" : "/proc/self/exe",
			strerror(errno));
		return 1;
	}
	self[len] = '\0';
	snprintf(fdbuf, sizeof fdbuf, "%d", fd);
	snprintf(idbuf, sizeof idbuf, "%d", ublk_id);
	first = child_argv(args, self, fdbuf, NULL);
	again = child_argv(args, self, fdbuf, ublk ? idbuf : NULL);
	if (!first || !again)
		goto out;
	keeper_setup();
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old);
	for (pid = start(first, &old); pid > 0; pid = start(again, &old)) {
		ws = wait_server(pid, &set, &stopping);
		if (stopping || WIFEXITED(ws)) {
			rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
			if (!stopping && rc && deaths)
				give_up(ublk ? ublk_id : -1);
			goto out;
		}
		if (time(NULL) - window > KEEP_WINDOW_S) {
			window = time(NULL);
			deaths = 0;
		}
		if (++deaths > KEEP_DEATHS) {
			fprintf(stderr, "uzram serve --keeper: the server died "
				"%d times in %d s: giving up\n", deaths,
				KEEP_WINDOW_S);
			give_up(ublk ? ublk_id : -1);
			goto out;
		}
		fprintf(stderr, "uzram serve --keeper: the server (pid %ld) "
			"died of signal %d; starting one that adopts the "
			"store\n", (long)pid, WTERMSIG(ws));
	}
out:
	free(first);
	free(again);
	close(fd);
	return rc;
}
