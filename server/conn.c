/*
 * conn.c - one client connection: setup and teardown, buffered input and
 * whole-frame output.
 *
 * Input goes through a 64 KiB buffer so that a pipelining client's small
 * requests cost one read() for many headers; payloads of 16 KiB or more are
 * read straight into the request buffer, skipping the copy. Output is one
 * writev() per reply frame (looping only on short writes). Only read() and
 * writev() are used, so the same code serves a socket, or a memfd and
 * /dev/null in the fuzzer. SIGPIPE is ignored by the server.
 *
 * After NBD_OPT_STARTTLS the same functions go through the connection's
 * TLS session instead (tls.c); without TLS that costs one test of c->tls
 * per system call, and none on the buffered path.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server.h"

#define DIRECT_READ_MIN (16u << 10)

static ssize_t read_some(struct nbd_conn *c, void *dst, size_t n)
{
	ssize_t r;

	if (c->tls)
		return tls_recv(c, dst, n);
	do
		r = read(c->in_fd, dst, n);
	while (r < 0 && errno == EINTR);
	return r;
}

int conn_recv(struct nbd_conn *c, void *dst, size_t n)
{
	unsigned char *d = dst;
	size_t have = c->iend - c->ipos;
	ssize_t r;

	if (n == 0)
		return 0;
	if (have >= n) {
		memcpy(d, c->ibuf + c->ipos, n);
		c->ipos += n;
		return 0;
	}
	memcpy(d, c->ibuf + c->ipos, have);
	d += have;
	n -= have;
	c->ipos = c->iend = 0;
	while (n >= DIRECT_READ_MIN) {
		r = read_some(c, d, n);
		if (r <= 0)
			return -1;
		d += r;
		n -= (size_t)r;
	}
	while (n > 0) {
		r = read_some(c, c->ibuf, NBD_IBUF_SIZE);
		if (r <= 0)
			return -1;
		c->iend = (size_t)r;
		c->ipos = n < (size_t)r ? n : (size_t)r;
		memcpy(d, c->ibuf, c->ipos);
		d += c->ipos;
		n -= c->ipos;
	}
	return 0;
}

int conn_skip(struct nbd_conn *c, uint64_t n)
{
	size_t have = c->iend - c->ipos;
	ssize_t r;

	if (have >= n) {
		c->ipos += (size_t)n;
		return 0;
	}
	n -= have;
	c->ipos = c->iend = 0;
	while (n > 0) {
		r = read_some(c, c->ibuf, NBD_IBUF_SIZE);
		if (r <= 0)
			return -1;
		if ((uint64_t)r > n) {
			c->ipos = (size_t)n;
			c->iend = (size_t)r;
			return 0;
		}
		n -= (uint64_t)r;
	}
	return 0;
}

int conn_send(struct nbd_conn *c, struct iovec *iov, int iovcnt)
{
	ssize_t r;

	if (c->tls)
		return tls_sendv(c, iov, iovcnt);
	while (iovcnt > 0) {
		r = writev(c->out_fd, iov, iovcnt > IOV_MAX ? IOV_MAX : iovcnt);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		while (iovcnt > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

/* Bound how long a client may sit in the handshake (a socket only). */
static void set_recv_timeout(int fd, int secs)
{
	struct timeval tv = { .tv_sec = secs };

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
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
	struct nbd_conn *c = conn_new(exp, ctr, in_fd, out_fd);
	int r;

	if (!c)
		return -1;
	set_recv_timeout(in_fd, NBD_HANDSHAKE_SECS);
	r = nbd_handshake(c);
	if (r > 0) {
		set_recv_timeout(in_fd, 0);
		nbd_transmission(c);
		r = c->send_failed ? -1 : 0;
	}
	tls_session_end(c, r >= 0);
	conn_free(c);
	return r;
}
