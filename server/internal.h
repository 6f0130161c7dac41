/*
 * internal.h - the listening side of `uzram serve`, private to server/:
 * the state of one running server (struct server) and what its files
 * give each other.
 *
 *   server.c    the main loop, the client list, setup and drain
 *   sockets.c   listening sockets, the export's URI, the banner
 *   captive.c   --run: the command the server runs and waits for
 *   ctl.c       the control channel: server side (requests, threads) and
 *               client side (nbd_server_ctl)
 *   stats.c     the figures, as text or JSON
 */
#ifndef UZRAM_SERVER_INTERNAL_H
#define UZRAM_SERVER_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "server.h"

#define DRAIN_SECS 10  /* how long in-flight requests may take at exit */
#define LISTEN_BACKLOG 128 /* connections the kernel queues for accept() */

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
	char ctl_path[PATH_MAX + 8];
	char uri[PATH_MAX + 600];
	pid_t child;            /* --run's command, 0 if none or reaped */
	int sfd;                /* signalfd of the signals the server handles */
	int lfd;                /* the export's listening socket */
	int cfd;                /* the control socket */
	bool tcp;               /* lfd is TCP, not a Unix socket */
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

/* stats.c: the figures of srv into out, as JSON or text; 0, or -1 if cut. */
int format_stats(struct server *srv, bool json, char *out, size_t n);

/* ctl.c: save the device to path (the --image one if NULL); the reply in out. */
int save_image(struct server *srv, const char *path, char *out, size_t n);
/* ctl.c: accept one control client on lfd, served by a thread of its own. */
void serve_ctl(struct server *srv, int lfd);
/* ctl.c: wait (at most DRAIN_SECS) for control requests still running. */
void drain_ctl(struct server *srv);

/* sockets.c: listen on the Unix socket path; the fd, or -1 after a message. */
int listen_unix(const char *path);
/* sockets.c: the same on TCP; plaintext: warn when not on loopback. */
int listen_tcp(const char *host, const char *port, bool plaintext);
/* sockets.c: path made absolute into out; 0 or -1. */
int abs_path(const char *path, char *out, size_t n);
/* sockets.c: srv->uri, from the configuration and srv->sock_path. */
void make_uri(struct server *srv);
/* sockets.c: how to connect, on stdout, ending with "ready". */
void print_banner(struct server *srv);

/* captive.c: --run: start the command; 0 or -1 after a message. */
int start_command(struct server *srv);
/* captive.c: whether the command exited; if so, *status as sh reports it. */
bool command_exited(struct server *srv, int *status);

#endif /* UZRAM_SERVER_INTERNAL_H */
