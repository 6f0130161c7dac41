/* SPDX-License-Identifier: MIT */
/*
 * listen.h - the listening side's ground (listen/): the configuration of
 * one `uzram serve` (struct nbd_server_config), the state of one running
 * server (struct server) that the control channel (ctl/) reads and the
 * main loop (server/) owns, and where clients find it (sockets.c: the
 * listening sockets, the URI, the banner).
 */
#ifndef UZRAM_LISTEN_H
#define UZRAM_LISTEN_H

#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "../nbd/nbd.h"

/*
 * Another front end on the same device (cli/serve/serve.c's --ublk): start runs
 * once the sockets listen, before the banner or --run's command (0, or
 * -1 after a message: the server then stops); stop runs at the drain,
 * after the NBD clients and control requests are done and before the
 * --image save. leave (NULL: none) runs instead of stop after SIGUSR2:
 * the front end lets go of its device without ending it, for a new server
 * to take over (a planned restart under `serve --keeper`, doc/keep.md).
 */
struct nbd_frontend {
	int (*start)(void *arg);
	void (*stop)(void *arg);
	void *arg;
	void (*leave)(void *arg);
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
	bool resident_buffers;    /* --swap: nbd_shared.resident_buffers */
	const char *ctl_socket;   /* --ctl-socket, or NULL: see ctl_path.c */
	const char *image;        /* save the device here at a clean end and
				   * for `uzram ctl save`; NULL: none */
	const char *no_save;      /* why `uzram ctl save` is refused, or
				   * NULL (a mount's keeper: ctl_alone.c) */
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

#define DRAIN_SECS 10  /* how long in-flight requests may take at exit */
#define LISTEN_BACKLOG 128 /* connections the kernel queues for accept() */
#define NBD_MAX_LISTEN 8   /* NBD sockets systemd may pass (activation.c) */

struct client;

/*
 * Lock rule: lock guards the client list and the count of control
 * threads (see server.c); everything else is set before the main loop
 * and then read, or is atomic (ctr).
 */
struct server {
	const struct nbd_server_config *cfg;
	struct nbd_export export; /* cfg's, with the shared state */
	struct nbd_shared shared;
	unsigned ctl_running;     /* control threads, under lock */
	struct nbd_counters ctr;
	time_t started;
	pthread_mutex_t lock;
	pthread_cond_t gone_cv; /* a client left */
	struct client *clients; /* under lock */
	unsigned nclients;      /* under lock */
	char sock_path[PATH_MAX];
	char tcp_host[NI_MAXHOST]; /* with tcp: the address in the URI */
	char tcp_port[NI_MAXSERV]; /* the port bound (--tcp PORT may be 0) */
	char ctl_path[PATH_MAX + 8];
	char uri[PATH_MAX + 600];
	pid_t child;            /* --run's command, 0 if none or reaped */
	int sfd;                /* signalfd of the signals the server handles */
	int lfd[NBD_MAX_LISTEN]; /* the export's listening sockets: one, */
	unsigned nlfd;          /* or those systemd passed */
	int cfd;                /* the control socket */
	int mfd;                /* --metrics' listening socket, or -1 */
	char metrics_path[PATH_MAX]; /* its Unix socket, or "" */
	/* where --metrics answers, for the banner and stat: "" if nowhere,
	 * "http://HOST:PORT/metrics" (the port bound, --metrics :0 too) or
	 * "unix:PATH" */
	char metrics_addr[PATH_MAX + NI_MAXHOST + 32];
	bool tcp;               /* lfd[0] is TCP, not a Unix socket */
	bool activated;         /* systemd made lfd (activation.c) */
	bool own_ctl;           /* we bound cfd at ctl_path: unlink it */
	bool frontend_up;       /* cfg->frontend started (or there is none) */
	bool leaving;           /* SIGUSR2: frontend->leave, not stop */
};

/*
 * Start fn(arg) in a detached thread with the server's stack size; 0, or
 * pthread_create()'s error (then fn does not run).
 */
static inline int start_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t tid;
	int r;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, NBD_THREAD_STACK);
	r = pthread_create(&tid, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return r;
}


/* sockets.c: listen on the Unix socket path; the fd, or -1 after a message. */
int listen_unix(const char *path);
/* sockets.c: the same on TCP; plaintext: warn when not on loopback. */
/* port_out: the port bound, as a string of at least 6 bytes. */
int listen_tcp(const char *host, const char *port, bool plaintext,
	       char *port_out);
/* sockets.c: path made absolute into out; 0 or -1. */
int abs_path(const char *path, char *out, size_t n);
/* sockets.c: srv->uri, from the configuration and srv->sock_path. */
void make_uri(struct server *srv);
/* sockets.c: how to connect, on stdout, ending with "ready". */
void print_banner(struct server *srv);

#endif /* UZRAM_LISTEN_H */
