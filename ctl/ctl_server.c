// SPDX-License-Identifier: MIT
/*
 * ctl_server.c - the control channel's server side: a parsed request
 * (ctl_proto.c) run on the device, and the threads that serve control
 * clients.
 *
 * The main loop only accepts on the control socket: each control client
 * is served by a detached thread of its own (at most CTL_MAX at once; more
 * get "error: busy"), which waits up to CTL_WAIT_MS for the request line
 * and runs it. So a silent control client, or a compact or recompress
 * that runs for seconds, never delays new NBD clients or a signal.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "../common/lib_message.h"

/* train-dict: train, keep if it pays, re-encode, and say what was measured. */
static void train_dict(struct uzram *dev, const struct nbd_ctl_req *rq,
		       char *out, size_t n)
{
	struct uzram_train_report rep;
	int r = uzram_train_dictionary(dev, (int)rq->prio, (size_t)rq->bytes,
				       UZRAM_DICT_REENCODE, &rep);

	if (r < 0)
		snprintf(out, n, "error: train-dict: %s\n",
			 lib_message(uzram_last_error()));
	else if (r == 0)
		snprintf(out, n, "ok: not kept: %s\n",
			 lib_message(uzram_last_error()));
	else
		snprintf(out, n, "ok: kept a dictionary of %llu bytes: %llu -> "
			 "%llu bytes on the test sample, %llu pages re-encoded\n",
			 (unsigned long long)rep.dict_size,
			 (unsigned long long)rep.bytes_without,
			 (unsigned long long)rep.bytes_with,
			 (unsigned long long)rep.pages_reencoded);
}

/* The reply to a request that returns a count r of what, or an error. */
static void reply_count(char *out, size_t n, long r, const char *what)
{
	if (r < 0)
		snprintf(out, n, "error: %s\n",
			 lib_message(uzram_last_error()));
	else
		snprintf(out, n, "ok: %ld %s\n", r, what);
}

void nbd_ctl_execute(struct uzram *dev, const struct nbd_ctl_req *rq,
		     char *out, size_t n)
{
	struct uzram_stats st;
	long r;

	switch (rq->op) {
	case NBD_CTL_COMPACT:
		r = uzram_compact(dev);
		if (r < 0)
			snprintf(out, n, "error: compact: %s\n",
				 uzram_strerror((int)r));
		else
			snprintf(out, n, "ok: %ld pages given back\n", r);
		return;
	case NBD_CTL_MEM_LIMIT:
		if (uzram_set_mem_limit(dev, rq->bytes) < 0)
			snprintf(out, n, "error: mem-limit: %s\n",
				 lib_message(uzram_last_error()));
		else
			snprintf(out, n, "ok: mem_limit %llu\n",
				 (unsigned long long)rq->bytes);
		return;
	case NBD_CTL_RECOMPRESS:
		r = uzram_recompress(dev, (int)rq->prio, rq->flags, rq->threshold);
		reply_count(out, n, r, "pages re-encoded");
		return;
	case NBD_CTL_IDLE:
		snprintf(out, n, "ok: %ld pages marked idle\n",
			 uzram_mark_idle(dev));
		return;
	case NBD_CTL_RESET_MAX:
		(void)uzram_reset_mem_used_max(dev);
		(void)uzram_stats(dev, &st, sizeof st);
		snprintf(out, n, "ok: mem_used_max %llu\n",
			 (unsigned long long)st.mem_used_max);
		return;
	case NBD_CTL_IDLE_AGE:
		r = uzram_mark_idle_age(dev, rq->threshold);
		reply_count(out, n, r, "pages marked idle");
		return;
	case NBD_CTL_WRITEBACK:
		r = uzram_writeback(dev, rq->flags, rq->first, rq->last,
				    rq->bytes);
		reply_count(out, n, r, "pages written back");
		return;
	case NBD_CTL_WRITEBACK_LIMIT:
		if (uzram_set_writeback_limit(dev, rq->flags != 0, rq->bytes) < 0)
			snprintf(out, n, "error: writeback-limit: %s\n",
				 lib_message(uzram_last_error()));
		else if (rq->flags)
			snprintf(out, n, "ok: writeback limited to %llu pages\n",
				 (unsigned long long)rq->bytes);
		else
			snprintf(out, n, "ok: writeback not limited\n");
		return;
	case NBD_CTL_BACKING_COMPACT:
		r = uzram_backing_compact(dev);
		reply_count(out, n, r, "bytes of backing store freed");
		return;
	case NBD_CTL_TRAIN_DICT:
		train_dict(dev, rq, out, n);
		return;
	case NBD_CTL_JSON:
	case NBD_CTL_TEXT:
	case NBD_CTL_PROMETHEUS:
		break;
	}
	snprintf(out, n, "error: not a device command\n");
}

/* ---- the server side: one thread per control client ---- */

#define CTL_WAIT_MS 1000
#define CTL_MAX 16     /* control requests served at once */

/* Save the device to path (the --image one if NULL); the reply in out. */
int save_image(struct server *srv, const char *path, char *out,
		      size_t n)
{
	struct timespec t0, t1;
	int r;

	if (!path) {
		snprintf(out, n, "error: save: no path given, and the server "
			 "has no --image\n");
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = uzram_save(srv->cfg->export.dev, path, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r < 0) {
		snprintf(out, n, "error: %s\n",
			 lib_message(uzram_last_error()));
		return -1;
	}
	snprintf(out, n, "ok: saved %s in %.3f s\n", path,
		 (double)(t1.tv_sec - t0.tv_sec) +
		 (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}

/*
 * "save" (to the server's --image) or "save PATH" (an absolute path): the
 * one request ctl_proto.c does not parse, as it needs the server's --image.
 */
static void save_request(struct server *srv, const char *req, size_t len,
			 char *out, size_t n)
{
	char path[PATH_MAX];

	if (srv->cfg->no_save) {
		snprintf(out, n, "error: save: %s\n", srv->cfg->no_save);
		return;
	}
	while (len > 4 && (req[len - 1] == '\n' || req[len - 1] == '\r'))
		len--;
	if (len == 4) {
		save_image(srv, srv->cfg->image, out, n);
		return;
	}
	if (len - 5 >= sizeof path || req[5] != '/' ||
	    memchr(req + 5, '\0', len - 5)) {
		snprintf(out, n, "error: save wants an absolute path\n");
		return;
	}
	memcpy(path, req + 5, len - 5);
	path[len - 5] = '\0';
	save_image(srv, path, out, n);
}

/* One request line of len bytes from the control socket; the reply in out. */
static void ctl_request(struct server *srv, const char *req, size_t len,
			char *out, size_t n)
{
	struct nbd_ctl_req rq;

	if (len >= 4 && !memcmp(req, "save", 4) &&
	    (len == 4 || req[4] == ' ' || req[4] == '\n' || req[4] == '\r')) {
		save_request(srv, req, len, out, n);
		return;
	}
	if (nbd_ctl_parse(req, len, &rq, out, n) < 0)
		return;
	if (rq.op == NBD_CTL_JSON || rq.op == NBD_CTL_TEXT)
		format_stats(srv, rq.op == NBD_CTL_JSON, out, n);
	else if (rq.op == NBD_CTL_PROMETHEUS)
		format_prometheus(srv, out, n);
	else
		nbd_ctl_execute(srv->cfg->export.dev, &rq, out, n);
}

struct ctl_client {
	struct server *srv;
	int fd;
	void (*handle)(struct server *srv, int fd);
};

/* One control request on fd, and its reply. */
static void ctl_handle(struct server *srv, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char req[PATH_MAX + 16], out[CTL_REPLY_MAX];
	ssize_t r;

	if (poll(&p, 1, CTL_WAIT_MS) == 1) {
		r = recv(fd, req, sizeof req, MSG_DONTWAIT);
		if (r > 0) {
			ctl_request(srv, req, (size_t)r, out, sizeof out);
			(void)send(fd, out, strlen(out),
				   MSG_NOSIGNAL | MSG_DONTWAIT);
		}
	}
}

static void *ctl_main(void *arg)
{
	struct ctl_client *cc = arg;
	struct server *srv = cc->srv;

	cc->handle(srv, cc->fd);
	close(cc->fd);
	free(cc);
	pthread_mutex_lock(&srv->lock);
	srv->ctl_running--;
	pthread_cond_broadcast(&srv->gone_cv);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

void start_ctl_thread(struct server *srv, int fd,
		      void (*handle)(struct server *srv, int fd),
		      const char *busy)
{
	struct ctl_client *cc = malloc(sizeof *cc);
	bool started = false;

	pthread_mutex_lock(&srv->lock);
	if (cc && srv->ctl_running < CTL_MAX) {
		*cc = (struct ctl_client){ srv, fd, handle };
		started = !start_detached(ctl_main, cc);
		srv->ctl_running += started;
	}
	pthread_mutex_unlock(&srv->lock);
	if (!started) {
		(void)send(fd, busy, strlen(busy), MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		free(cc);
	}
}

/* Accept one control client and hand it to a thread of its own. */
void serve_ctl(struct server *srv, int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd >= 0)
		start_ctl_thread(srv, fd, ctl_handle, "error: busy, try again\n");
}

/* Wait (at most DRAIN_SECS) for control requests still running. */
void drain_ctl(struct server *srv)
{
	struct timespec deadline;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += DRAIN_SECS;
	pthread_mutex_lock(&srv->lock);
	while (srv->ctl_running > 0 &&
	       pthread_cond_timedwait(&srv->gone_cv, &srv->lock,
				      &deadline) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&srv->lock);
}
