/* SPDX-License-Identifier: MIT */
/*
 * serve.h - `uzram serve` (cli/serve/): an NBD server, and a ublk device
 * beside it, on one uzram device; serve_swap.c: its --swap.
 */
#ifndef UZRAM_CLI_SERVE_H
#define UZRAM_CLI_SERVE_H

#include "../base/base.h"

extern const struct cli_command serve_cmd;
int cmd_serve(int argc, char **argv);  /* cli/serve/serve.c */

/* cli/serve/serve_swap.c: `uzram serve --swap`; each 0, or -1 after a message */
struct uzram;
#define SWAP_RESERVE (16ull << 20) /* reserved when --swap has no --mem-limit */
int serve_swap_begin(void);                /* before the device exists */
struct uzram_config;
/* after: reserves of the allocator what cfg's mem_limit leaves room for */
int serve_swap_ready(struct uzram *dev, const struct uzram_config *cfg);
void serve_swap_end(void);                 /* before the device goes */

#endif /* UZRAM_CLI_SERVE_H */
