/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the top of `uzram serve`, private to server/: what its
 * files give each other.
 *
 *   server.c      the main loop, the client list, setup and drain
 *   activation.c  systemd's socket activation and readiness
 *   captive.c     --run: the command the server runs and waits for
 */
#ifndef UZRAM_SERVER_INTERNAL_H
#define UZRAM_SERVER_INTERNAL_H

#include <stdbool.h>

#include "server.h"
#include "../ctl/ctl.h"
#include "../listen/listen.h"

/*
 * activation.c: adopt the sockets systemd passed into srv (lfd, nlfd, cfd,
 * the address), once; the number adopted, 0 if none, or -1 after a message.
 */
int activation_adopt(struct server *srv);
/* activation.c: tell systemd the server is ready (Type=notify). */
void notify_ready(const struct server *srv);

/* captive.c: --run: start the command; 0 or -1 after a message. */
int start_command(struct server *srv);
/* captive.c: whether the command exited; if so, *status as sh reports it. */
bool command_exited(struct server *srv, int *status);
#endif /* UZRAM_SERVER_INTERNAL_H */
