/* SPDX-License-Identifier: MIT */
/*
 * json.h - JSON output shared by cli/ and server/ (json.c).
 */
#ifndef UZRAM_COMMON_JSON_H
#define UZRAM_COMMON_JSON_H

#include <stddef.h>

/* json.c */

/*
 * s as the inside of a JSON string (quotes, backslashes and control
 * characters escaped) into out, cut to fit its n bytes; returns out.
 * Nothing is cut when n is at least JSON_ESCAPED_MAX(strlen(s)).
 */
#define JSON_ESCAPED_MAX(len) (6 * (size_t)(len) + 8)
const char *json_escape(const char *s, char *out, size_t n);

#endif
