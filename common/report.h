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

/*
 * From now on report_error(from, ...) says "uzram as: ": `uzram ublk add`
 * is `uzram serve --ublk`, whose units (cli/serve/, server/, nbd/,
 * listen/, ublk/) name "serve", and its messages name the command the user
 * typed. One pair a process; call it before any thread starts (not locked).
 */
void report_rename(const char *from, const char *as);

/* The name report_error() prints for cmd: cmd, or report_rename()'s as. */
const char *report_name(const char *cmd);

#endif
