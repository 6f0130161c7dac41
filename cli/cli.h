/*
 * cli.h - the subcommands of the uzram program. Each one parses its own
 * arguments (argv[0] is the subcommand name) and returns the exit status.
 * They use only the public API in uzram.h.
 */
#ifndef UZRAM_CLI_H
#define UZRAM_CLI_H

#include <stddef.h>

int cmd_load(int argc, char **argv);   /* cli/load.c */
int cmd_serve(int argc, char **argv);  /* cli/serve.c */
int cmd_stat(int argc, char **argv);   /* cli/serve.c: ask a running server */
int cmd_ctl(int argc, char **argv);    /* cli/serve.c: control a running server */
int cmd_mount(int argc, char **argv);  /* cli/mount.c: a file system at DIR */
int cmd_umount(int argc, char **argv); /* cli/mount.c: take it down */

/*
 * The socket of the server behind `uzram mount DIR` into out (n bytes);
 * 0, or -1 with a message when DIR is not mounted by uzram mount.
 */
int mount_socket_path(const char *dir, char *out, size_t n);

/* options.c */

/* Parse "123", "4K", "1.5G" (powers of 1024) into bytes; 0 or -EINVAL. */
int parse_size(const char *s, unsigned long long *out);

/*
 * A compression level: decimal, from -UZRAM_CLI_MAX_LEVEL to
 * UZRAM_CLI_MAX_LEVEL (each codec then checks its own range). 0 or -EINVAL.
 */
#define UZRAM_CLI_MAX_LEVEL 1000
int parse_level(const char *s, int *level);

/*
 * Parse "NAME" or "NAME:LEVEL" (an algorithm and its level, 0 if none) in
 * place: *name points into s afterwards. 0 or -EINVAL.
 */
int parse_algo_level(char *s, const char **name, int *level);

/*
 * The same for "NAME[:LEVEL][:dict=PATH]": *dict points at PATH in s, or
 * is NULL. 0 or -EINVAL.
 */
int parse_algo_spec(char *s, const char **name, int *level, const char **dict);

/*
 * Read the dictionary file at path into a new buffer (*buf, *len; the
 * caller frees it), up to one byte more than the library takes, so that
 * its own check names a file too large. Says what failed on stderr,
 * prefixed by "uzram CMD:". 0 or a negative errno.
 */
int read_dict(const char *cmd, const char *path, void **buf, size_t *len);

#endif
