// SPDX-License-Identifier: MIT
/*
 * conn.c - one client connection: setup, the handshake then the
 * transmission phase, and teardown. Its bytes go through transport.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "nbd.h"

/* Bound how long a client may sit in the handshake (a socket only). */
static void set_recv_timeout(int fd, int secs)
{
	struct timeval tv = { .tv_sec = secs };

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* A client that stops reading our handshake replies is cut off too. */
static void set_send_timeout(int fd, int secs)
{
	struct timeval tv = { .tv_sec = secs };

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void conn_free(struct nbd_conn *c)
{
	if (!c)
		return;
	pthread_cond_destroy(&c->job_cv);
	pthread_cond_destroy(&c->done_cv);
	pthread_cond_destroy(&c->budget_cv);
	pthread_cond_destroy(&c->lead_cv);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	free(c->ibuf);
	free(c);
}

static struct nbd_conn *conn_new(const struct nbd_export *exp,
				 struct nbd_counters *ctr, int in_fd, int out_fd)
{
	struct nbd_conn *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->in_fd = in_fd;
	c->out_fd = out_fd;
	c->exp = exp;
	c->ctr = ctr;
	c->ibuf = malloc(NBD_IBUF_SIZE);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->lead_cv, NULL);
	pthread_cond_init(&c->budget_cv, NULL);
	pthread_cond_init(&c->done_cv, NULL);
	pthread_cond_init(&c->job_cv, NULL);
	if (!c->ibuf) {
		conn_free(c);
		return NULL;
	}
	return c;
}

int nbd_conn_serve(const struct nbd_export *exp, struct nbd_counters *ctr,
		   int in_fd, int out_fd)
{
	return nbd_conn_serve_peer(exp, ctr, in_fd, out_fd, NULL);
}

int nbd_conn_serve_peer(const struct nbd_export *exp, struct nbd_counters *ctr,
			int in_fd, int out_fd, const char *peer)
{
	struct nbd_conn *c = conn_new(exp, ctr, in_fd, out_fd);
	int r;

	if (!c)
		return -1;
	if (peer)
		snprintf(c->peer, sizeof c->peer, "%s", peer);
	set_recv_timeout(in_fd, NBD_HANDSHAKE_SECS);
	set_send_timeout(out_fd, (int)exp->shared->handshake_secs);
	clock_gettime(CLOCK_MONOTONIC, &c->deadline);
	c->deadline.tv_sec += exp->shared->handshake_secs;
	r = nbd_handshake(c);
	c->deadline = (struct timespec){ 0 };
	set_send_timeout(out_fd, 0);
	if (r > 0) {
		set_recv_timeout(in_fd, 0);
		nbd_transmission(c);
		r = c->send_failed ? -1 : 0;
	}
	tls_session_end(c, r >= 0);
	conn_free(c);
	return r;
}
