/* SPDX-License-Identifier: MIT */
/*
 * lib_message.h - the library's messages as the programs show them
 * (lib_message.c), shared by cli/ and server/.
 */
#ifndef UZRAM_COMMON_LIB_MESSAGE_H
#define UZRAM_COMMON_LIB_MESSAGE_H

/* lib_message.c */

/*
 * msg (uzram_last_error()'s text) without the name of the library call
 * that set it: "train_dictionary: no dictionary from ..." gives "no
 * dictionary from ...". The library names its calls for a program's
 * author; a command's user knows what they asked for, and the command
 * says it. Returns a pointer into msg.
 */
const char *lib_message(const char *msg);

#endif
