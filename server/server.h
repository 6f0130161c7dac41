/* SPDX-License-Identifier: MIT */
/*
 * server.h - what cli/ uses to run `uzram serve` (server/): the NBD
 * engine (nbd/) behind listening sockets (listen/), with the control
 * channel (ctl/) beside it. The configuration is listen.h's struct
 * nbd_server_config.
 */
#ifndef UZRAM_SERVER_H
#define UZRAM_SERVER_H

#include <stdbool.h>

#include "../listen/listen.h"

/*
 * Listen, print how to connect, serve until SIGINT, SIGTERM or SIGHUP, then drain
 * and clean up. Returns the exit status. *busy is set when a client or
 * control thread did not finish in time: it may still use cfg->export's
 * device and TLS credentials, so the caller must not free them (and the
 * status is 1); otherwise they are the caller's again, whatever the status.
 *
 * With cfg->run, print nothing and instead run the command with sh -c once
 * the server listens, with $uri (and $unixsocket, or $port), $exportname
 * in its environment, as nbdkit --run does; when it exits, stop as for
 * SIGTERM and return its exit status (128 + N if signal N killed it).
 *
 * With cfg->image, the device is saved there (uzram_save) once the
 * clients are gone, after SIGINT, SIGTERM or the end of --run's command;
 * a failed save makes the exit status 1.
 */
int nbd_server_run(const struct nbd_server_config *cfg, bool *busy);

/* activation.c */

/*
 * Whether systemd passed this process listening sockets (LISTEN_PID,
 * LISTEN_FDS): nbd_server_run() then serves on them, and the config's
 * socket_path and tcp_port must be NULL.
 */
bool nbd_socket_activated(void);

#endif /* UZRAM_SERVER_H */
