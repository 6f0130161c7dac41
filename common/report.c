// SPDX-License-Identifier: MIT
/*
 * report.c - report_error(): the programs' one way to say what went wrong
 * (report.h). No heap: it must work when memory is short, and a swap
 * server's messages come exactly then. One write for the whole line when
 * it fits the stack buffer: a keeper and its servers share one log, and a
 * line written in pieces was cut by another's (v45: "uzram serve: uzram
 * serve: --keeper: the server is pid N"). report_rename() gives a command
 * run as another (`uzram ublk add`, as `uzram serve --ublk`) its own name.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

static const char *rename_from, *rename_as;

void report_rename(const char *from, const char *as)
{
	rename_from = from;
	rename_as = as;
}

const char *report_name(const char *cmd)
{
	return rename_from && !strcmp(cmd, rename_from) ? rename_as : cmd;
}

void report_error(const char *cmd, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n, m = -1;

	cmd = report_name(cmd);
	n = snprintf(line, sizeof line, "uzram %s: ", cmd);

	if (n > 0 && (size_t)n < sizeof line) {
		va_start(ap, fmt);
		m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
		va_end(ap);
	}
	if (m >= 0 && (size_t)n + (size_t)m + 1 < sizeof line) {
		line[n + m] = '\n';
		fwrite(line, 1, (size_t)n + (size_t)m + 1, stderr);
		return;
	}
	fprintf(stderr, "uzram %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
