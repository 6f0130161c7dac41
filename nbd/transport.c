// SPDX-License-Identifier: MIT
/*
 * transport.c - the bytes of one connection: buffered input and
 * whole-frame output, below the handshake and the transmission phase.
 *
 * Input goes through a 64 KiB buffer so that a pipelining client's small
 * requests cost one read() for many headers; payloads of 16 KiB or more are
 * read straight into the request buffer, skipping the copy. Output is one
 * writev() per reply frame (looping only on short writes). Only read() and
 * writev() are used, so the same code serves a socket, or a memfd and
 * /dev/null in the fuzzer. SIGPIPE is ignored by the server.
 *
 * Time limits: while c->deadline is set (the handshake, which must end
 * within handshake_secs of the accept however slowly the client trickles
 * its bytes in), every read first waits in poll() for what is left of it.
 * After the handshake, conn_wait_input() lets the request loop wait with a
 * timeout (to give idle buffers back, and for --timeout) without costing a
 * system call when the next request is already there.
 *
 * After NBD_OPT_STARTTLS the same functions go through the connection's
 * TLS session instead (tls.c); without TLS that costs one test of c->tls
 * per system call, and none on the buffered path.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nbd.h"

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

/* Wait for input until c->deadline, if set; 0, or -1 when it passed. */
static int wait_deadline(struct nbd_conn *c)
{
	struct pollfd p = { .fd = c->in_fd, .events = POLLIN };
	struct timespec now;
	long long ms;
	int r;

	if (!c->deadline.tv_sec || tls_pending(c))
		return 0;
	do {
		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (long long)(c->deadline.tv_sec - now.tv_sec) * 1000 +
		     (c->deadline.tv_nsec - now.tv_nsec) / 1000000;
		if (ms <= 0)
			return -1;
		r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
	} while (r < 0 && errno == EINTR);
	return r == 0 ? -1 : 0;
}

/* Refill the empty input buffer: the bytes read, or -1 (EOF, error, deadline). */
static ssize_t refill(struct nbd_conn *c)
{
	ssize_t r;

	if (wait_deadline(c) < 0)
		return -1;
	r = read_some(c, c->ibuf, NBD_IBUF_SIZE);
	return r > 0 ? r : -1;
}

int conn_wait_input(struct nbd_conn *c, int ms)
{
	struct pollfd p = { .fd = c->in_fd, .events = POLLIN };
	ssize_t r;

	if (c->ipos < c->iend || tls_pending(c))
		return 1;
	/* with TLS the socket holds records, for the session to read */
	r = c->tls ? -1 : recv(c->in_fd, c->ibuf, NBD_IBUF_SIZE, MSG_DONTWAIT);
	if (r > 0) {
		c->ipos = 0;
		c->iend = (size_t)r;
		return 1;
	}
	if (!c->tls && (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
				   errno != EINTR)))
		return 1; /* EOF, an error, or not a socket: read() tells */
	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r != 0;
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
		if (wait_deadline(c) < 0)
			return -1;
		r = read_some(c, d, n);
		if (r <= 0)
			return -1;
		d += r;
		n -= (size_t)r;
	}
	while (n > 0) {
		r = refill(c);
		if (r < 0)
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
		r = refill(c);
		if (r < 0)
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
