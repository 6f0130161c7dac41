/*
 * error.h - the library's per-thread error message.
 *
 * Functions that return a negative errno also record, with uzram_set_error(),
 * a message saying what failed and on which input; uzram_last_error() hands
 * it to the caller. The buffer is thread-local, so no lock is involved.
 */
#ifndef UZRAM_ERROR_H
#define UZRAM_ERROR_H

#include <stddef.h>

/* Record a message for the calling thread and return err (a -errno). */
int uzram_set_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Record why zcomp_create_dict() (or zcomp_create()) failed with err for
 * `what` (the call's name), on algorithm at level with a dictionary of
 * dict_size bytes (0: none); returns the errno the caller should return.
 */
int codec_error(const char *what, const char *algorithm, int level,
		size_t dict_size, int err);

#endif
