/*
 * error.c - messages for the library's negative errno returns.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "uzram.h"
#include "error.h"
#include "zcomp.h"

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

/* Explain a zcomp_create_dict() failure for `what`; returns err. */
int codec_error(const char *what, const char *algorithm, int level,
		size_t dict_size, int err)
{
	int min, max;

	switch (err) {
	case -ENOENT:
		return uzram_set_error(err, "%s: unknown algorithm '%s' "
				       "(known: %s)", what, algorithm,
				       zcomp_known());
	case -EINVAL:
		if (zcomp_level_range(algorithm, &min, &max) == 0 &&
		    level != 0 && (level < min || level > max))
			return min == max ?
				uzram_set_error(err, "%s: level %d: %s has one "
						"level, %d (or 0, its default)",
						what, level, algorithm, min) :
				uzram_set_error(err, "%s: level %d is outside "
						"%s's levels, %d to %d (or 0, "
						"its default)", what, level,
						algorithm, min, max);
		return uzram_set_error(err, "%s: %s at level %d: %s", what,
				       algorithm, level, dict_size ?
				       "the dictionary is not one the codec "
				       "accepts" : "the codec refused it");
	case -EOPNOTSUPP:
		return uzram_set_error(err, "%s: %s takes no dictionary (lz4 "
				       "and zstd do)", what, algorithm);
	case -ERANGE:   /* zcomp's word for a size out of range */
		return uzram_set_error(-EINVAL, "%s: a dictionary of %zu bytes "
				       "is outside %u..%u bytes", what,
				       dict_size, ZCOMP_DICT_MIN, ZCOMP_DICT_MAX);
	default:
		return uzram_set_error(err, "%s: %s at level %d: %s", what,
				       algorithm, level, uzram_strerror(err));
	}
}
