/* SPDX-License-Identifier: MIT */
/*
 * server.h - what cli/ uses of the NBD server: the configuration of one
 * `uzram serve`, running it, the TLS credentials, and the control
 * channel's client. The rest of server/ reads from the top down:
 *
 *   server.c        the main loop, the client list      \  internal.h:
 *   sockets.c       listening sockets, URI, banner      |  the listening
 *   captive.c       --run's command                     |  side, struct
 *   ctl_server.c    the control channel's server side   |  server
 *   ctl_proto.c     its requests, parsed                |
 *   ctl_stats.c     the figures, as text or JSON        |
 *   metrics.c       ... as Prometheus text              |
 *   metrics_http.c  --metrics: the same over HTTP       /
 *   ctl_client.c    the control channel's client (nbd_server_ctl)
 *   ctl_path.c      where the control socket lives, and whether it is safe
 *      |  accepts a client, then calls nbd_conn_serve() in a new thread
 *   conn.c          one client connection: setup and teardown  \  conn.h:
 *   handshake.c     option negotiation (fixed newstyle only)   |  one
 *   transmission.c  requests: threads, reading and checking    |  connection,
 *   commands.c      requests run on the device, replies        |  struct
 *   tls.c           credentials, one TLS session per connection |  nbd_conn
 *   transport.c     a connection's bytes in and out            |
 *   limits.c        what all connections share: the buffer     /
 *                   budget, timeouts, the shutdown flag
 *
 * Only include/uzram.h is used to reach the device. nbd_conn_serve() works
 * on any pair of file descriptors, which lets the fuzzer feed a connection
 * from a memfd and send its replies to /dev/null.
 */
#ifndef UZRAM_SERVER_H
#define UZRAM_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uzram.h"

#define NBD_MAX_STRING 4096 /* export names, queries: longest a client may send */

/* limits.c */

/* The default --buffer-limit: 1/16 of physical memory, in [64M, 1G]. */
size_t nbd_default_buffer_limit(void);
/* The default --max-connections for a budget: 8 MiB each, 4 to 128. */
unsigned nbd_default_max_connections(size_t buf_limit);

struct nbd_shared;
struct nbd_tls;

/* The one export a server offers. Read-only once serving starts. */
struct nbd_export {
	struct uzram *dev;
	uint64_t size;
	const char *name;        /* clients may also ask for "" */
	const char *description;
	bool read_only;
	struct nbd_shared *shared; /* the server's; never NULL */
	const struct nbd_tls *tls; /* NULL: NBD_OPT_STARTTLS is unsupported */
};

/* tls.c */

enum nbd_tls_mode {
	NBD_TLS_OFF,
	NBD_TLS_ON,      /* offer STARTTLS, serve plaintext clients too */
	NBD_TLS_REQUIRE, /* refuse every option but STARTTLS and ABORT before it */
};

struct nbd_tls_config {
	enum nbd_tls_mode mode;
	const char *certificates; /* X.509 directory, or */
	const char *psk_file;     /* psktool's username:hexkey lines */
	bool verify_peer;         /* X.509: require a client certificate */
};

/*
 * Load the credentials of cfg (mode ON or REQUIRE, exactly one of
 * certificates and psk_file). NULL after a message on stderr. The result
 * is read-only and shared by every connection; nbd_tls_free() accepts NULL.
 */
struct nbd_tls *nbd_tls_new(const struct nbd_tls_config *cfg);
void nbd_tls_free(struct nbd_tls *tls);

/* server.c */

/*
 * Another front end on the same device (cli/serve.c's --ublk): start runs
 * once the sockets listen, before the banner or --run's command (0, or
 * -1 after a message: the server then stops); stop runs at the drain,
 * after the NBD clients and control requests are done and before the
 * --image save.
 */
struct nbd_frontend {
	int (*start)(void *arg);
	void (*stop)(void *arg);
	void *arg;
};

struct nbd_server_config {
	struct nbd_export export;
	const char *socket_path;  /* Unix socket, or NULL with tcp_port */
	const char *tcp_host;
	const char *tcp_port;
	unsigned max_connections;
	const char *algorithm;    /* shown in the statistics */
	const char *run;          /* captive mode: a shell command, or NULL */
	size_t buffer_limit;      /* request/reply buffers, all clients */
	unsigned handshake_secs;  /* whole handshake; 0: NBD_HANDSHAKE_SECS */
	unsigned idle_secs;       /* --timeout; 0: none */
	const char *ctl_socket;   /* --ctl-socket, or NULL: see ctl_path.c */
	const char *image;        /* save the device here at a clean end and
				   * for `uzram ctl save`; NULL: none */
	/* --metrics: HTTP GET /metrics on a Unix socket (metrics_path) or
	 * on TCP (metrics_host, metrics_port); all NULL: none (metrics.c) */
	const char *metrics_path;
	const char *metrics_host;
	const char *metrics_port;
	bool image_opened;        /* the device came from image (else image
				   * is made at the end) */
	const char *prog;         /* the banner's name for the uzram
				   * program (argv[0]); NULL: "uzram" */
	const struct nbd_frontend *frontend; /* NULL: none */
};

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

/*
 * Send one request line ("json\n", "text\n", "compact\n", "mem-limit
 * BYTES\n", "reset-max\n", "save [PATH]\n"; see ctl_proto.c) to the control
 * socket ctl_path (from ctl_path_find()) and print its reply, on stderr
 * after "who: " if it is an error. Returns the exit status.
 */
int nbd_server_ctl(const char *ctl_path, const char *request,
		   const char *who);
/*
 * The same, the reply into reply (n bytes, NBD_CTL_REPLY_MAX is enough,
 * NUL-terminated) instead of stdout. 0, or the exit status after a
 * message on stderr.
 */
#define NBD_CTL_REPLY_MAX 32768
int nbd_server_ask(const char *ctl_path, const char *request, const char *who,
		   char *reply, size_t n);

/* ctl_path.c */

/*
 * The control socket's path, into out: ctl_socket if not NULL, else
 * SOCKET.ctl for a server on the Unix socket socket_path, else
 * RUNDIR/tcp-PORT.ctl in a private directory (made if create). Checked as
 * ctl_path_check() does. 0, or -1 after a message on stderr after "who: ".
 */
int ctl_path_find(const char *ctl_socket, const char *socket_path,
		  const char *tcp_port, bool create, const char *who,
		  char *out, size_t n);

#endif /* UZRAM_SERVER_H */
