// SPDX-License-Identifier: MIT
/*
 * report.c - report_error(): the programs' one way to say what went wrong
 * (report.h). One fprintf per piece, no buffer: it must work when memory
 * is short, and a swap server's messages come exactly then.
 */
#include <stdarg.h>
#include <stdio.h>

#include "report.h"

void report_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "uzram %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
