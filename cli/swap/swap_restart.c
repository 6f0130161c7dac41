// SPDX-License-Identifier: MIT
/*
 * swap_restart.c - `uzram swapon --restart`: a planned restart of a swap
 * device's server under its keeper (serve --keeper, doc/keep.md), from the
 * uzram program on disk now, with the device in swap throughout.
 *
 *   swapon --restart --device D   SIGUSR2 to D's keeper (DEV.pid) ->
 *            the keeper starts a standby from its program's path, which
 *            gets ready -> SIGUSR2 to the server, which finishes the
 *            requests it holds and leaves the device -> the standby
 *            adopts the store and takes the device over
 *
 * The keeper reports each step in DEV.log; this command follows the log
 * from where it ended when the signal went out, until the new server
 * serves the block device (0), or a step failed or RESTART_WAIT_S passed
 * (1, with the log's line).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "swap.h"

#define RESTART_WAIT_S 180

/* Whether the file at path holds text, from byte off on. */
static bool log_has(const char *path, long off, const char *text,
		    char *line, size_t n)
{
	FILE *f = fopen(path, "re");
	bool found = false;

	if (!f)
		return false;
	if (fseek(f, off, SEEK_SET) == 0)
		while (!found && fgets(line, (int)n, f))
			found = strstr(line, text) != NULL;
	fclose(f);
	if (found)
		line[strcspn(line, "\n")] = '\0';
	return found;
}

int swap_restart(const char *dev, pid_t keeper, const char *log)
{
	static const char *const failed[] = {
		"restart failed", "cannot take over", "giving up",
	};
	char line[512];
	struct stat st;
	long off;

	if (keeper <= 0 || kill(keeper, 0) != 0 ||
	    !log_has(log, 0, "--keeper: the server is pid", line, sizeof line)) {
		report_error("swapon", "--restart: %s's server does not run "
			"under a keeper (%s): only a device that swapon made "
			"keeps its store", dev, log);
		return 1;
	}
	off = stat(log, &st) == 0 ? (long)st.st_size : 0;
	if (kill(keeper, SIGUSR2) != 0) {
		report_error("swapon", "--restart: pid %ld: %s", (long)keeper,
			strerror(errno));
		return 1;
	}
	for (int i = 0; i < RESTART_WAIT_S * 10; i++) {
		for (size_t k = 0; k < sizeof failed / sizeof *failed; k++)
			if (log_has(log, off, failed[k], line, sizeof line)) {
				report_error("swapon", "--restart: %s: %s",
					dev, line);
				return 1;
			}
		if (log_has(log, off, "restart: the server (pid", line,
			    sizeof line) &&
		    log_has(log, off, "block device /dev/", line, sizeof line)) {
			(void)log_has(log, off, "--keeper: the server is pid",
				      line, sizeof line);
			printf("uzram swapon: %s restarted (%s)\n", dev,
			       strstr(line, "the server"));
			return 0;
		}
		if (kill(keeper, 0) != 0)
			break;
		swap_sleep_ms(100);
	}
	report_error("swapon", "--restart: %s: no new server within %d s "
		"(see %s)", dev, RESTART_WAIT_S, log);
	return 1;
}
