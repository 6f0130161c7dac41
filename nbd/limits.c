// SPDX-License-Identifier: MIT
/*
 * limits.c - what all connections of a server share: the budget of
 * request and reply buffers, and its defaults.
 *
 * Every READ or WRITE payload lives in a buffer of its request thread
 * (transmission.c). Without a shared bound, each connection could hold
 * NBD_INFLIGHT_BYTES and more in buffers kept for reuse, so 128 clients
 * that send large reads and never read the replies pin gigabytes outside
 * --mem-limit, and the OOM killer answers. Here one budget covers the
 * buffers of every connection:
 *
 *   leader needs n bytes --> nbd_budget_get: used + n <= limit ? take
 *                                            : wait on buf_cv
 *   buffer freed (request done and not kept, thread idle, connection
 *   gone) --> nbd_budget_put: used -= n, wake the waiters
 *
 * A request that can never fit is refused before it gets here: the server
 * advertises max_block = min(NBD_MAX_BLOCK, limit / 2) as its maximum
 * block size and answers larger requests with an error (transmission.c). A
 * waiting leader pauses only its own connection; the socket's flow control
 * then pauses its client. Threads give their buffers back when idle for a
 * moment, except that a connection waiting for its next request keeps one
 * of NBD_IDLE_BUF (so a client at queue depth 1 costs no system call to
 * time the wait). Those take at most half the budget, because the server
 * refuses more connections than nbd_max_connections_for() allows; so a
 * request, at most half the budget, waits only for requests in flight,
 * never for idle clients.
 */
#include <limits.h>
#include <unistd.h>

#include "nbd.h"

#define MiB ((size_t)1 << 20)

size_t nbd_default_buffer_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	size_t ram = pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize
					    : 1024 * MiB;
	size_t lim = ram / 16;

	if (lim < 64 * MiB)
		lim = 64 * MiB;
	if (lim > 1024 * MiB)
		lim = 1024 * MiB;
	return lim;
}

unsigned nbd_default_max_connections(size_t buf_limit)
{
	size_t n = buf_limit / (8 * MiB);

	return n < 4 ? 4 : n > 128 ? 128 : (unsigned)n;
}

unsigned nbd_max_connections_for(size_t buf_limit)
{
	size_t n = buf_limit / (2 * NBD_IDLE_BUF);

	return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}

int nbd_shared_init(struct nbd_shared *sh, size_t buf_limit,
		    unsigned handshake_secs, unsigned idle_secs)
{
	if (buf_limit < MiB)
		return -1;
	sh->buf_limit = buf_limit;
	sh->buf_used = 0;
	sh->max_block = buf_limit / 2 < NBD_MAX_BLOCK ? (uint32_t)(buf_limit / 2)
						      : NBD_MAX_BLOCK;
	/* One connection may hold half the budget, and at least a request. */
	sh->conn_inflight = buf_limit / 2;
	if (sh->conn_inflight > NBD_INFLIGHT_BYTES)
		sh->conn_inflight = NBD_INFLIGHT_BYTES;
	if (sh->conn_inflight < sh->max_block)
		sh->conn_inflight = sh->max_block;
	sh->handshake_secs = handshake_secs ? handshake_secs
					    : NBD_HANDSHAKE_SECS;
	sh->idle_secs = idle_secs;
	atomic_init(&sh->stopping, false);
	if (pthread_mutex_init(&sh->lock, NULL))
		return -1;
	if (pthread_cond_init(&sh->buf_cv, NULL)) {
		pthread_mutex_destroy(&sh->lock);
		return -1;
	}
	return 0;
}

void nbd_shared_destroy(struct nbd_shared *sh)
{
	pthread_cond_destroy(&sh->buf_cv);
	pthread_mutex_destroy(&sh->lock);
}

int nbd_budget_get(struct nbd_shared *sh, size_t n)
{
	if (n > sh->buf_limit)
		return -1;
	pthread_mutex_lock(&sh->lock);
	while (sh->buf_used + n > sh->buf_limit)
		pthread_cond_wait(&sh->buf_cv, &sh->lock);
	sh->buf_used += n;
	pthread_mutex_unlock(&sh->lock);
	return 0;
}

void nbd_budget_put(struct nbd_shared *sh, size_t n)
{
	if (n == 0)
		return;
	pthread_mutex_lock(&sh->lock);
	sh->buf_used -= n;
	pthread_cond_broadcast(&sh->buf_cv);
	pthread_mutex_unlock(&sh->lock);
}
