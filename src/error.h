/*
 * error.h - the library's per-thread error message.
 *
 * Functions that return a negative errno also record, with uzram_set_error(),
 * a message saying what failed and on which input; uzram_last_error() hands
 * it to the caller. The buffer is thread-local, so no lock is involved.
 */
#ifndef UZRAM_ERROR_H
#define UZRAM_ERROR_H

/* Record a message for the calling thread and return err (a -errno). */
int uzram_set_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
