// SPDX-License-Identifier: MIT
/*
 * json.c - JSON output shared by the programs (cli/ and server/, which
 * both call it; common/ calls neither): a string escaped for the inside
 * of a JSON string.
 */
#include <stdio.h>

#include "json.h"

const char *json_escape(const char *s, char *out, size_t n)
{
	size_t j = 0;

	for (; *s && j + 7 < n; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			out[j++] = '\\';
			out[j++] = (char)ch;
		} else if (ch < 0x20) {
			j += (size_t)snprintf(out + j, n - j, "\\u%04x", ch);
		} else {
			out[j++] = (char)ch;
		}
	}
	out[j] = '\0';
	return out;
}
