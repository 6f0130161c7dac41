/* SPDX-License-Identifier: MIT */
/*
 * nbd.h - the NBD connection engine (nbd/): the export a server offers,
 * the TLS credentials, one client connection (struct nbd_conn) and what
 * serves it: the limits on what a client controls, the state all
 * connections share, the server's counters, and the functions of conn.c,
 * transport.c, handshake.c, tls.c and transmission.c. The engine uses
 * only include/uzram.h; its files stack as:
 *
 *   conn.c          one client connection: setup and teardown
 *   handshake.c     option negotiation (fixed newstyle only)
 *   transmission.c  requests: threads, reading and checking (transmission.h)
 *   commands.c      requests run on the device, replies
 *   tls.c           credentials, one TLS session per connection
 *   transport.c     a connection's bytes in and out
 *   limits.c        what all connections share: the buffer budget,
 *                   timeouts, the shutdown flag
 *
 * nbd_conn_serve() works on any pair of file descriptors, which lets the
 * fuzzer feed a connection from a memfd and send its replies to /dev/null.
 */
#ifndef UZRAM_NBD_H
#define UZRAM_NBD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "uzram.h"
#include "nbd-proto.h"

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

/* Limits on what a client controls. */
#define NBD_MAX_BLOCK       (32u << 20) /* largest READ/WRITE payload */
#define NBD_MAX_OPTION_LEN  (64u << 10) /* longer options are skipped */
#define NBD_MAX_OPTIONS     4096        /* options per handshake */
#define NBD_INFLIGHT_BYTES  (64u << 20) /* payload bytes held per connection */
#define NBD_MAX_THREADS     8           /* request threads per connection */
#define NBD_HANDSHAKE_SECS  30          /* idle limit before transmission */
#define NBD_IBUF_SIZE       (64u << 10) /* connection input buffer */
#define NBD_UNIX_SNDBUF     (4 << 20)   /* SO_SNDBUF of a Unix socket client */
#define NBD_META_ID_ALLOC   1           /* our id for base:allocation */
#define NBD_IDLE_BUF        (128u << 10) /* buffer an idle connection keeps */
#define NBD_THREAD_STACK    (256u << 10) /* every server thread's stack */
/* NBD_MAX_STRING (export names, queries) is in server.h: cli/ checks it. */

/* limits.c */

/*
 * What every connection of one server shares and may change: the budget
 * of request and reply buffers (limits.c), the timeouts, and the flag that
 * says shutdown has begun. Lock rule: lock guards buf_used only, and is
 * never held while waiting for anything but buf_cv; nothing else is taken
 * under it. The other fields are set by nbd_shared_init() and then read.
 */
struct nbd_shared {
	pthread_mutex_t lock;
	pthread_cond_t buf_cv;    /* buffers came back */
	size_t buf_limit;         /* bytes of buffers, all connections */
	size_t buf_used;          /* under lock */
	size_t conn_inflight;     /* payload bytes one connection may hold */
	uint32_t max_block;       /* largest READ/WRITE payload, advertised */
	unsigned handshake_secs;  /* whole handshake, from accept */
	unsigned idle_secs;       /* --timeout: no request for this long, 0 off */
	bool resident_buffers;    /* serve --swap: request buffers made
				   * resident when mapped and kept while the
				   * connection lasts (transmission.c) */
	_Atomic bool stopping;    /* shutdown began: answer NBD_ESHUTDOWN */
};

/*
 * The most connections a budget can serve without starving: the buffers
 * idle connections keep (NBD_IDLE_BUF each) take at most half of it.
 */
unsigned nbd_max_connections_for(size_t buf_limit);
/* Set up *sh; buf_limit must be at least 1 MiB. 0 or -1. */
int nbd_shared_init(struct nbd_shared *sh, size_t buf_limit,
		    unsigned handshake_secs, unsigned idle_secs);
void nbd_shared_destroy(struct nbd_shared *sh);
/*
 * Take n bytes of the buffer budget, waiting for other connections to give
 * some back if needed. -1 at once if n can never fit (above buf_limit).
 */
int nbd_budget_get(struct nbd_shared *sh, size_t n);
void nbd_budget_put(struct nbd_shared *sh, size_t n);

struct gnutls_session_int; /* gnutls_session_t, without gnutls.h */

/* Server-wide figures; every connection adds to them with relaxed atomics. */
struct nbd_counters {
	_Atomic uint64_t conns_current;
	_Atomic uint64_t conns_total;
	_Atomic uint64_t conns_refused;   /* over --max-connections */
	_Atomic uint64_t requests[NBD_CMD_NR + 1]; /* by type, last: unknown */
	_Atomic uint64_t bytes_read;      /* payload sent to clients */
	_Atomic uint64_t bytes_written;   /* payload received and stored */
	_Atomic uint64_t errors;          /* requests answered with an error */
	_Atomic uint64_t proto_errors;    /* clients dropped for bad input */
};

static inline void ctr_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/*
 * One client connection. The handshake runs in a single thread; the
 * transmission phase in up to NBD_MAX_THREADS (see transmission.c for the
 * leader/follower model and which lock guards what).
 */
struct nbd_conn {
	int in_fd, out_fd;
	const struct nbd_export *exp;
	struct nbd_counters *ctr;

	/* Negotiated in the handshake, constant afterwards. */
	bool structured;  /* NBD_OPT_STRUCTURED_REPLY acked */
	bool meta_alloc;  /* base:allocation selected */
	bool no_zeroes;   /* NBD_FLAG_C_NO_ZEROES */
	uint16_t tflags;  /* transmission flags sent to the client */
	/* After STARTTLS: all input and output go through it (tls.c). */
	struct gnutls_session_int *tls;

	/*
	 * Input. Only the thread that reads requests (the handshake thread,
	 * later the current leader) touches these.
	 */
	unsigned char *ibuf;
	size_t ipos, iend;

	/* Output: reply frames go out whole under send_lock. */
	pthread_mutex_t send_lock;
	bool send_failed; /* under send_lock: stop writing, client is gone */

	/* Leader/follower state, all under lock. */
	pthread_mutex_t lock;
	pthread_cond_t lead_cv;    /* a follower may take the lead */
	pthread_cond_t budget_cv;  /* inflight bytes went down */
	pthread_cond_t done_cv;    /* a thread finished */
	pthread_cond_t job_cv;     /* a piece of the read job is done */
	struct read_job *job;      /* the leader's cut read, or NULL */
	int helpers;               /* threads that may help with one: CPUs - 1 */
	bool leader_busy;
	bool closing;              /* no more requests will be read */
	int idle;                  /* threads waiting to lead */
	int nthreads;              /* threads running */
	int nspawned;              /* entries used in threads[] */
	int running;               /* requests handed off and not yet done */
	size_t inflight;           /* buffer bytes held by requests */
	pthread_t threads[NBD_MAX_THREADS];

	/* Input must arrive before this (CLOCK_MONOTONIC); 0: no deadline. */
	struct timespec deadline;
	/* who the client is, for messages: "HOST port PORT" from accept() */
	char peer[80];
};

/* conn.c */

/*
 * Serve one client on in_fd/out_fd (the same socket, normally) until it
 * disconnects: handshake, then transmission. Does not close the fds.
 * Returns 0 after a clean end, -1 if the client was dropped for an error.
 */
int nbd_conn_serve(const struct nbd_export *exp, struct nbd_counters *ctr,
		   int in_fd, int out_fd);
/* The same, for a client that accept() named peer (NULL: unknown). */
int nbd_conn_serve_peer(const struct nbd_export *exp, struct nbd_counters *ctr,
			int in_fd, int out_fd, const char *peer);

/* transport.c */

/* Read exactly n bytes of input; 0, or -1 on EOF or error. */
int conn_recv(struct nbd_conn *c, void *dst, size_t n);
/* Read and drop n bytes of input without allocating; 0 or -1. */
int conn_skip(struct nbd_conn *c, uint64_t n);
/* Write all iovecs (modified in place); 0 or -1. Caller serialises. */
int conn_send(struct nbd_conn *c, struct iovec *iov, int iovcnt);
/*
 * Wait at most ms milliseconds (-1: no limit) for input: 1 when some is
 * buffered or the next read will not block (data, EOF or an error to
 * report), 0 on timeout. Reads what is there into the input buffer first,
 * so a client with a request waiting costs no extra system call.
 */
int conn_wait_input(struct nbd_conn *c, int ms);

/* handshake.c */

/*
 * Negotiate options. Returns 1 when the client entered transmission,
 * 0 when it ended the handshake itself (NBD_OPT_ABORT), -1 on error.
 */
int nbd_handshake(struct nbd_conn *c);

/* tls.c */

/* Whether options other than STARTTLS and ABORT wait for TLS. */
bool nbd_tls_required(const struct nbd_tls *tls);

/*
 * Upgrade c to TLS with c->exp->tls: the handshake, bounded by
 * NBD_HANDSHAKE_SECS. 0, or -1 after logging why. Sets c->tls.
 */
int tls_session_start(struct nbd_conn *c);
/*
 * Whether c has TLS input decrypted and waiting in its session: poll() on
 * the socket does not see it, so whoever waits for input must ask first.
 */
bool tls_pending(const struct nbd_conn *c);
/* gnutls_record_recv(): >0 bytes, 0 at the end, -1 on error (logged). */
ssize_t tls_recv(struct nbd_conn *c, void *dst, size_t n);
/* Send all iovecs as TLS records; 0 or -1 (logged). Caller serialises. */
int tls_sendv(struct nbd_conn *c, const struct iovec *iov, int iovcnt);
/* Send close_notify if clean, free the session; no-op without one. */
void tls_session_end(struct nbd_conn *c, bool clean);

/* transmission.c */

/* Serve requests until the client leaves; returns when all threads ended. */
void nbd_transmission(struct nbd_conn *c);

#endif /* UZRAM_NBD_H */
