/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - the control channel (ctl/): `uzram stat` and `uzram ctl`
 * against a running server, its figures as text, JSON and Prometheus
 * text, and --metrics over HTTP.
 *
 *   ctl_proto.c     the control channel's protocol: a request line parsed
 *   ctl_server.c    its server side: requests run, one thread per client
 *   ctl_client.c    its client (nbd_server_ctl)
 *   ctl_alone.c     the control channel without an NBD server (mount --via fs)
 *   ctl_path.c      where the control socket lives, and whether it is safe
 *   ctl_stats.c     the figures, as text or JSON (figures.h: their list)
 *   metrics.c       the figures as Prometheus text
 *   metrics_http.c  --metrics: the same over HTTP
 */
#ifndef UZRAM_CTL_H
#define UZRAM_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uzram.h"
#include "../listen/listen.h"

/*
 * Send one request line ("json\n", "text\n", "compact\n", "mem-limit
 * BYTES\n", "reset-max\n", "save [PATH]\n"; see ctl_proto.c) to the control
 * socket ctl_path (from ctl_path_find()) and print its reply, on stderr
 * through report_error(who, ...) if it is an error. Returns the exit status.
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

/* ctl_alone.c */

struct nbd_ctl_alone;

/*
 * Serve the control channel (uzram stat, uzram ctl) for dev on the Unix
 * socket ctl_path, without an NBD server, from a thread of its own;
 * algorithm is what the figures name. Returns the handle, or NULL after a
 * message on stderr. The caller keeps dev open until nbd_ctl_alone_stop().
 */
struct nbd_ctl_alone *nbd_ctl_alone_start(struct uzram *dev,
					  const char *algorithm,
					  const char *ctl_path);

/* Stop it, wait for the requests running, remove the socket. NULL is fine. */
void nbd_ctl_alone_stop(struct nbd_ctl_alone *c);

/* ctl_path.c */

/*
 * The control socket's path, into out: ctl_socket if not NULL, else
 * SOCKET.ctl for a server on the Unix socket socket_path, else
 * RUNDIR/tcp-PORT.ctl in a private directory (made if create). Checked as
 * ctl_path_check() does. 0, or -1 after a message by report_error(who, ...).
 */
int ctl_path_find(const char *ctl_socket, const char *socket_path,
		  const char *tcp_port, bool create, const char *who,
		  char *out, size_t n);

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

#endif /* UZRAM_CTL_H */
