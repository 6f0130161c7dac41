// SPDX-License-Identifier: MIT
/*
 * tls.c - TLS for NBD connections, through GnuTLS, as nbdkit does it.
 *
 *   client                                server
 *   NBD_OPT_STARTTLS  ---- plaintext --->  (handshake.c) NBD_REP_ACK
 *   ClientHello ... Finished  <-------->  tls_session_start()
 *   options, requests ---- records ---->  tls_recv() / tls_sendv()
 *   close_notify      <-----------------  tls_session_end()
 *
 * The credentials (a PSK file in psktool's `username:hexkey` format, or an
 * X.509 directory with ca-cert.pem, server-cert.pem, server-key.pem and an
 * optional ca-crl.pem) are loaded once by nbd_tls_new() and shared by every
 * session; GnuTLS reads them concurrently, which it allows. GnuTLS re-reads
 * the PSK file on each handshake, so a key added to it takes effect for
 * the next client.
 *
 * Transport: the session reads with read() on in_fd and writes with
 * writev() on out_fd, as conn.c does in plaintext, so the fuzzer can feed a
 * memfd to a STARTTLS too. One thread receives (the handshake thread, then
 * the leader) while others send under send_lock: GnuTLS allows one reader
 * and one writer on a session at the same time.
 *
 * Large replies: GnuTLS sends at most one record (16 KiB) per
 * gnutls_record_send(). tls_sendv() corks the session, adds the pieces of a
 * reply frame and uncorks every TLS_FLUSH bytes, so a small header goes in
 * the same record as the payload after it, several records go out in one
 * writev(), and the session never holds more than about TLS_FLUSH bytes of
 * a 32 MiB reply (why TLS_FLUSH is 64 KiB: bench/notes.md, "Server
 * design figures").
 *
 * Errors are logged on stderr with GnuTLS's message, except a client that
 * simply went away.
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "nbd.h"

#define TLS_FLUSH (64u << 10)
#define PSK_PRIORITY "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK"

struct nbd_tls {
	enum nbd_tls_mode mode;
	bool verify_peer;
	gnutls_psk_server_credentials_t psk;     /* or */
	gnutls_certificate_credentials_t x509;
};

/* ---- credentials ---- */

static int tls_fail(const char *what, const char *path, int err)
{
	fprintf(stderr, "uzram serve: %s%s%s: %s\n", what, path ? " " : "",
		path ? path : "", gnutls_strerror(err));
	return -1;
}

static int load_psk(struct nbd_tls *t, const char *file)
{
	int r;

	/* GnuTLS opens the file only at the first handshake: fail now. */
	if (access(file, R_OK) < 0) {
		fprintf(stderr, "uzram serve: --tls-psk %s: %s\n", file,
			strerror(errno));
		return -1;
	}
	r = gnutls_psk_allocate_server_credentials(&t->psk);
	if (r < 0)
		return tls_fail("cannot allocate PSK credentials", NULL, r);
	r = gnutls_psk_set_server_credentials_file(t->psk, file);
	if (r < 0)
		return tls_fail("cannot use the PSK file", file, r);
	(void)gnutls_psk_set_server_known_dh_params(t->psk,
						    GNUTLS_SEC_PARAM_MEDIUM);
	return 0;
}

static int load_x509(struct nbd_tls *t, const char *dir)
{
	char ca[PATH_MAX], cert[PATH_MAX], key[PATH_MAX], crl[PATH_MAX];
	int r;

	if (snprintf(ca, sizeof ca, "%s/ca-cert.pem", dir) >= (int)sizeof ca ||
	    snprintf(cert, sizeof cert, "%s/server-cert.pem", dir) >= (int)sizeof cert ||
	    snprintf(key, sizeof key, "%s/server-key.pem", dir) >= (int)sizeof key ||
	    snprintf(crl, sizeof crl, "%s/ca-crl.pem", dir) >= (int)sizeof crl) {
		fprintf(stderr, "uzram serve: --tls-certificates: path too long\n");
		return -1;
	}
	r = gnutls_certificate_allocate_credentials(&t->x509);
	if (r < 0)
		return tls_fail("cannot allocate X.509 credentials", NULL, r);
	r = gnutls_certificate_set_x509_trust_file(t->x509, ca,
						   GNUTLS_X509_FMT_PEM);
	if (r <= 0)
		return tls_fail("cannot load the CA certificate", ca,
				r ? r : GNUTLS_E_FILE_ERROR);
	if (access(crl, F_OK) == 0) {
		r = gnutls_certificate_set_x509_crl_file(t->x509, crl,
							 GNUTLS_X509_FMT_PEM);
		if (r < 0)
			return tls_fail("cannot load the CRL", crl, r);
	}
	r = gnutls_certificate_set_x509_key_file(t->x509, cert, key,
						 GNUTLS_X509_FMT_PEM);
	if (r < 0) {
		fprintf(stderr, "uzram serve: cannot load %s and %s: %s\n",
			cert, key, gnutls_strerror(r));
		return -1;
	}
	(void)gnutls_certificate_set_known_dh_params(t->x509,
						     GNUTLS_SEC_PARAM_MEDIUM);
	return 0;
}

struct nbd_tls *nbd_tls_new(const struct nbd_tls_config *cfg)
{
	struct nbd_tls *t = calloc(1, sizeof *t);
	int r;

	if (!t) {
		perror("uzram serve: tls");
		return NULL;
	}
	t->mode = cfg->mode;
	t->verify_peer = cfg->verify_peer;
	r = cfg->psk_file ? load_psk(t, cfg->psk_file)
			  : load_x509(t, cfg->certificates);
	if (r < 0) {
		nbd_tls_free(t);
		return NULL;
	}
	return t;
}

void nbd_tls_free(struct nbd_tls *t)
{
	if (!t)
		return;
	if (t->psk)
		gnutls_psk_free_server_credentials(t->psk);
	if (t->x509)
		gnutls_certificate_free_credentials(t->x509);
	free(t);
}

bool nbd_tls_required(const struct nbd_tls *t)
{
	return t && t->mode == NBD_TLS_REQUIRE;
}

/* ---- transport ---- */

static ssize_t pull(gnutls_transport_ptr_t p, void *buf, size_t n)
{
	const struct nbd_conn *c = p;

	return read(c->in_fd, buf, n);
}

static ssize_t push(gnutls_transport_ptr_t p, const giovec_t *iov, int n)
{
	const struct nbd_conn *c = p;

	return writev(c->out_fd, (const struct iovec *)iov, n);
}

static int pull_timeout(gnutls_transport_ptr_t p, unsigned int ms)
{
	const struct nbd_conn *c = p;
	struct pollfd pf = { .fd = c->in_fd, .events = POLLIN };

	return poll(&pf, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

/* Log a TLS failure on c, naming the client's address (accept()'s). */
static void conn_tls_fail(const struct nbd_conn *c, const char *what, int err)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	char host[NI_MAXHOST] = "a client", port[NI_MAXSERV] = "";

	if (c->peer[0]) {
		fprintf(stderr, "uzram serve: %s with %s: %s\n", what, c->peer,
			gnutls_strerror(err));
		return;
	}
	if (getpeername(c->in_fd, (struct sockaddr *)&ss, &len) == 0 &&
	    (ss.ss_family == AF_INET || ss.ss_family == AF_INET6))
		(void)getnameinfo((struct sockaddr *)&ss, len, host, sizeof host,
				  port, sizeof port,
				  NI_NUMERICHOST | NI_NUMERICSERV);
	else if (len && ss.ss_family == AF_UNIX)
		snprintf(host, sizeof host, "a Unix socket client");
	fprintf(stderr, "uzram serve: %s with %s%s%s: %s\n", what, host,
		port[0] ? " port " : "", port, gnutls_strerror(err));
}

/* A client that closed the connection, as opposed to a TLS failure. */
static bool client_left(int r)
{
	return r == GNUTLS_E_PREMATURE_TERMINATION || r == GNUTLS_E_PUSH_ERROR ||
	       r == GNUTLS_E_PULL_ERROR;
}

static int session_setup(struct nbd_conn *c, gnutls_session_t s)
{
	const struct nbd_tls *t = c->exp->tls;
	const char *where = NULL;
	int r;

	if (t->psk) {
		r = gnutls_priority_set_direct(s, PSK_PRIORITY, &where);
		if (r >= 0)
			r = gnutls_credentials_set(s, GNUTLS_CRD_PSK, t->psk);
	} else {
		r = gnutls_set_default_priority(s);
		if (r >= 0)
			r = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE,
						   t->x509);
		if (r >= 0 && t->verify_peer) {
			gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
			gnutls_session_set_verify_cert(s, NULL, 0);
		}
	}
	if (r < 0)
		return r;
	gnutls_transport_set_ptr(s, c);
	gnutls_transport_set_pull_function(s, pull);
	gnutls_transport_set_vec_push_function(s, push);
	gnutls_transport_set_pull_timeout_function(s, pull_timeout);
	gnutls_handshake_set_timeout(s, NBD_HANDSHAKE_SECS * 1000);
	return 0;
}

int tls_session_start(struct nbd_conn *c)
{
	gnutls_session_t s;
	int r;

	r = gnutls_init(&s, GNUTLS_SERVER);
	if (r < 0)
		return tls_fail("TLS session", NULL, r);
	r = session_setup(c, s);
	if (r < 0) {
		gnutls_deinit(s);
		return tls_fail("TLS session setup", NULL, r);
	}
	do
		r = gnutls_handshake(s);
	while (r == GNUTLS_E_INTERRUPTED ||
	       (r < 0 && r != GNUTLS_E_AGAIN && !gnutls_error_is_fatal(r)));
	if (r < 0) {
		conn_tls_fail(c, "TLS handshake failed",
			      r == GNUTLS_E_AGAIN ? GNUTLS_E_TIMEDOUT : r);
		gnutls_deinit(s);
		return -1;
	}
	c->tls = s;
	return 0;
}

bool tls_pending(const struct nbd_conn *c)
{
	return c->tls && gnutls_record_check_pending(c->tls) > 0;
}

ssize_t tls_recv(struct nbd_conn *c, void *dst, size_t n)
{
	ssize_t r;

	do
		r = gnutls_record_recv(c->tls, dst, n);
	while (r == GNUTLS_E_INTERRUPTED);
	if (r >= 0)
		return r;
	if (r == GNUTLS_E_AGAIN) {
		errno = EAGAIN; /* SO_RCVTIMEO */
		return -1;
	}
	if (!client_left((int)r))
		conn_tls_fail(c, "TLS receive failed", (int)r);
	return r == GNUTLS_E_PREMATURE_TERMINATION ? 0 : -1;
}

static int flush(struct nbd_conn *c)
{
	ssize_t r = gnutls_record_uncork(c->tls, GNUTLS_RECORD_WAIT);

	if (r < 0) {
		if (!client_left((int)r))
			conn_tls_fail(c, "TLS send failed", (int)r);
		return -1;
	}
	return 0;
}

int tls_sendv(struct nbd_conn *c, const struct iovec *iov, int iovcnt)
{
	size_t corked = 0;

	gnutls_record_cork(c->tls);
	for (int i = 0; i < iovcnt; i++) {
		const char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left > 0) {
			size_t k = left < TLS_FLUSH - corked ? left
							     : TLS_FLUSH - corked;
			ssize_t r = gnutls_record_send(c->tls, p, k);

			if (r < 0) {
				(void)gnutls_record_uncork(c->tls, 0);
				conn_tls_fail(c, "TLS send failed", (int)r);
				return -1;
			}
			p += r;
			left -= (size_t)r;
			corked += (size_t)r;
			if (corked == TLS_FLUSH) {
				if (flush(c) < 0)
					return -1;
				corked = 0;
				gnutls_record_cork(c->tls);
			}
		}
	}
	return flush(c);
}

void tls_session_end(struct nbd_conn *c, bool clean)
{
	if (!c->tls)
		return;
	/* Send close_notify; waiting for the client's could hang. */
	if (clean)
		(void)gnutls_bye(c->tls, GNUTLS_SHUT_WR);
	gnutls_deinit(c->tls);
	c->tls = NULL;
}
