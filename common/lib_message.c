// SPDX-License-Identifier: MIT
/*
 * lib_message.c - the library's messages as the programs show them: the
 * library starts each with the call that failed ("claim: ",
 * "set_writeback_limit: "), which is a word of the API, not of the command
 * a user typed; the programs say in their own words what they were doing.
 */
#include <string.h>

#include "lib_message.h"

const char *lib_message(const char *msg)
{
	size_t n = strspn(msg, "abcdefghijklmnopqrstuvwxyz_");

	return n > 0 && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}
