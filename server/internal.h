/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the listening side of `uzram serve`, private to server/:
 * the state of one running server (struct server) and what its files
 * give each other.
 *
 *   server.c    the main loop, the client list, setup and drain
 *   sockets.c   listening sockets, the export's URI, the banner
 *   captive.c   --run: the command the server runs and waits for
 *   ctl_proto.c   the control channel's protocol: a request line parsed
 *   ctl_server.c  its server side: requests run, one thread per client
 *   ctl_client.c  its client (nbd_server_ctl, server.h)
 *   ctl_stats.c   the figures, as text or JSON (figures.h: their list)
 *   metrics.c     the figures as Prometheus text
 *   metrics_http.c  --metrics: the same over HTTP
 */
#ifndef UZRAM_SERVER_INTERNAL_H
#define UZRAM_SERVER_INTERNAL_H

#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "conn.h"

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

/* ctl_stats.c */

/* What a figure is: one entry of figures.h's list, made a table in
 * ctl_stats.c and read by metrics.c. */
enum figure_type { FIG_GAUGE, FIG_COUNTER };
enum figure_unit { FIG_ONE, FIG_NS };
struct figure_def {
	const char *stat;    /* the name in `uzram stat --json` and --all */
	const char *prom;    /* the Prometheus name, after uzram_ */
	enum figure_type type;
	enum figure_unit unit;
	const char *help;    /* Prometheus's HELP, without "(stat: ...)" */
};
/* One figure of `uzram stat`: what it is and its value. */
struct figure {
	const struct figure_def *def;
	uint64_t v;
};
#define STATS_MAX_FIGURES 96
/* The longest reply of the control channel (the Prometheus text is ~12 KiB). */
#define CTL_REPLY_MAX NBD_CTL_REPLY_MAX
/* The request types, as the figures name them ("read", ..., "unknown"). */
extern const char *const stats_cmd_names[NBD_CMD_NR + 1];
/* The figures of srv (a snapshot) into out, at most max; how many. */
size_t stats_figures(struct server *srv, struct figure *out, size_t max);
/* The figures of srv into out, as JSON or text; 0, or -1 if cut. */
int format_stats(struct server *srv, bool json, char *out, size_t n);

/* metrics.c: the figures in Prometheus's text format; 0, or -1 if cut. */
int format_prometheus(struct server *srv, char *out, size_t n);
/* metrics_http.c: --metrics: listen where srv->cfg says; 0, or -1 after a
 * message. */
int metrics_listen(struct server *srv);
/* metrics_http.c: accept an HTTP client on srv->mfd, answer it in a thread. */
void serve_metrics(struct server *srv);
/* metrics_http.c: close srv->mfd and remove its Unix socket, if any. */
void metrics_close(struct server *srv);

/* ctl_server.c: save the device to path (the --image one if NULL); the reply in out. */
int save_image(struct server *srv, const char *path, char *out, size_t n);
/* ctl_server.c: accept one control client on lfd, served by a thread of its own. */
void serve_ctl(struct server *srv, int lfd);
/*
 * ctl_server.c: serve the accepted client fd with handle(srv, fd) in a thread
 * counted as a control thread (drain_ctl() waits for it), which then
 * closes fd; when CTL_MAX run already, send busy and close fd instead.
 */
void start_ctl_thread(struct server *srv, int fd,
		      void (*handle)(struct server *srv, int fd),
		      const char *busy);
/* ctl_server.c: wait (at most DRAIN_SECS) for control requests still running. */
void drain_ctl(struct server *srv);

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

/*
 * activation.c: take the sockets systemd passed into srv (lfd, nlfd, cfd,
 * the address), once; the number taken, 0 if none, or -1 after a message.
 */
int activation_take(struct server *srv);
/* activation.c: tell systemd the server is ready (Type=notify). */
void notify_ready(const struct server *srv);

/* captive.c: --run: start the command; 0 or -1 after a message. */
int start_command(struct server *srv);
/* captive.c: whether the command exited; if so, *status as sh reports it. */
bool command_exited(struct server *srv, int *status);

/* ctl_path.c */

/*
 * Refuse a control socket another user could have put there: path, if it
 * exists, and its directory must belong to us or root, and the directory
 * must not be writable by others unless sticky. 0, or -1 after a message.
 */
int ctl_path_check(const char *path, const char *who);

/* ctl_proto.c */

enum nbd_ctl_op {
	NBD_CTL_JSON, NBD_CTL_TEXT, NBD_CTL_COMPACT, NBD_CTL_MEM_LIMIT,
	NBD_CTL_RESET_MAX, NBD_CTL_IDLE, NBD_CTL_RECOMPRESS,
	NBD_CTL_IDLE_AGE, NBD_CTL_WRITEBACK, NBD_CTL_WRITEBACK_LIMIT,
	NBD_CTL_BACKING_COMPACT, NBD_CTL_TRAIN_DICT, NBD_CTL_PROMETHEUS,
};

struct nbd_ctl_req {
	enum nbd_ctl_op op;
	uint64_t bytes;           /* mem-limit; writeback's and
				   * writeback-limit's pages; train-dict's
				   * dictionary size */
	unsigned prio, flags;     /* recompress, writeback, writeback-limit's
				   * enable, train-dict */
	uint32_t threshold;       /* recompress; idle's seconds */
	uint64_t first, last;     /* writeback's pages (all: 0, UINT64_MAX) */
};

/*
 * Parse one control request of len bytes (a line, its "\n" or "\r\n"
 * optional): 0, or -1 with a message for the client ("error: ...\n") in
 * err. Numbers are decimal digits only: no sign, no blank, no overflow.
 */
int nbd_ctl_parse(const char *line, size_t len, struct nbd_ctl_req *rq,
		  char *err, size_t n);
/*
 * ctl_server.c: run a parsed request other than json, text and prometheus
 * on dev; the reply in out.
 */
void nbd_ctl_execute(struct uzram *dev, const struct nbd_ctl_req *rq,
		     char *out, size_t n);

#endif /* UZRAM_SERVER_INTERNAL_H */
