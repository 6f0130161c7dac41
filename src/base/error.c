// SPDX-License-Identifier: MIT
/*
 * error.c - messages for the library's negative errno returns.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "uzram.h"
#include "base.h"

static _Thread_local char last_error[256];

int uzram_set_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
	return err;
}

UZRAM_API const char *uzram_last_error(void)
{
	return last_error;
}

UZRAM_API const char *uzram_strerror(int err)
{
	switch (err) {
	case 0:		return "success";
	case -EINVAL:	return "invalid argument";
	case -ERANGE:	return "request outside the device";
	case -ENOSPC:	return "memory limit reached (and the backing store full, if any)";
	case -ENOMEM:	return "out of memory";
	case -EIO:	return "stored data is corrupt, or the backing store failed";
	case -ENOENT:	return "unknown compression algorithm";
	case -EOPNOTSUPP: return "the algorithm takes no dictionary";
	case -EBUSY:	return "stored data still uses the previous dictionary";
	case -ENODEV:	return "the device has no backing store";
	case -EEXIST:	return "the backing file is not empty";
	case -EBADMSG:	return "image is corrupt or truncated";
	case -EALREADY:	return "a save is already in progress";
	case -EAGAIN:	return "the device changed in a way a save cannot follow";
	default:	return "unknown error";
	}
}

UZRAM_API unsigned uzram_version_number(void)
{
	return UZRAM_VERSION_NUMBER;
}

#define UZRAM_STR2(x) #x
#define UZRAM_STR(x) UZRAM_STR2(x)

UZRAM_API const char *uzram_version_string(void)
{
	return UZRAM_STR(UZRAM_VERSION_MAJOR) "." UZRAM_STR(UZRAM_VERSION_MINOR)
		"." UZRAM_STR(UZRAM_VERSION_PATCH);
}
