/* SPDX-License-Identifier: MIT */
/*
 * report.h - the one way a program reports an error (report.c): every
 * unit of the programs (cli/, server/, nbd/, ctl/, listen/, ublk/, fs/)
 * prints its messages through report_error(), so they all read
 * "uzram CMD: what went wrong".
 */
#ifndef UZRAM_COMMON_REPORT_H
#define UZRAM_COMMON_REPORT_H

/*
 * "uzram " cmd ": " (cmd is the subcommand's name, "mount"), the message
 * made from fmt as printf() does, and a newline, on stderr. The caller
 * then returns its error; scripts/report-error.py turns hand-typed
 * prefixes into this call.
 */
void report_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
