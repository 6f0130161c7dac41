// SPDX-License-Identifier: MIT
/*
 * handshake.c - option negotiation of the fixed newstyle NBD handshake.
 *
 *   S: NBDMAGIC IHAVEOPT flags(16)        C: client flags(32)
 *   C: IHAVEOPT option(32) length(32) data    (repeated)
 *   S: REP_MAGIC option(32) type(32) length(32) data   (one or more)
 *   ... until NBD_OPT_GO / NBD_OPT_EXPORT_NAME (transmission) or ABORT.
 *
 * Everything the client sends is bounds-checked before use: an option's
 * data is read into one buffer of NBD_MAX_OPTION_LEN bytes, allocated once;
 * a longer option is skipped without storing it and refused with
 * NBD_REP_ERR_TOO_BIG. Strings inside options are checked against the
 * option length before they are looked at. The number of options per
 * handshake is bounded too, so a client cannot keep a thread forever.
 *
 * The only meta context is "base:allocation" (id NBD_META_ID_ALLOC).
 *
 * TLS (exp->tls set): NBD_OPT_STARTTLS is acked in plaintext, then the
 * connection's bytes go through a TLS session (tls.c) and negotiation
 * starts over: what was agreed before (structured replies, meta context)
 * is forgotten, as a man in the middle may have sent it. A client that
 * sent anything after STARTTLS before our ack is dropped for the same
 * reason. Under --tls=require every option before TLS except STARTTLS and
 * ABORT gets NBD_REP_ERR_TLS_REQD, and NBD_OPT_EXPORT_NAME, which has no
 * error reply, ends the connection.
 */
#include <stdlib.h>
#include <string.h>

#include "nbd.h"

struct opt_reader {
	const unsigned char *p;
	uint32_t left;
};

static int read32(struct opt_reader *r, uint32_t *v)
{
	if (r->left < 4)
		return -1;
	*v = get32(r->p);
	r->p += 4;
	r->left -= 4;
	return 0;
}

static int read16(struct opt_reader *r, uint16_t *v)
{
	if (r->left < 2)
		return -1;
	*v = get16(r->p);
	r->p += 2;
	r->left -= 2;
	return 0;
}

/* A length-prefixed string of at most NBD_MAX_STRING bytes. */
static int read_string(struct opt_reader *r, const unsigned char **s,
		       uint32_t *len)
{
	if (read32(r, len) < 0 || *len > r->left || *len > NBD_MAX_STRING)
		return -1;
	*s = r->p;
	r->p += *len;
	r->left -= *len;
	return 0;
}

static bool export_matches(const struct nbd_conn *c, const unsigned char *name,
			   uint32_t len)
{
	size_t n = strlen(c->exp->name);

	return len == 0 || (len == n && !memcmp(name, c->exp->name, n));
}

static int send_reply(struct nbd_conn *c, uint32_t opt, uint32_t type,
		      const void *data, uint32_t len)
{
	unsigned char hdr[NBD_OPT_REPLY_SIZE];
	struct iovec iov[2] = {
		{ hdr, sizeof hdr },
		{ (void *)(uintptr_t)data, len },
	};

	put64(hdr, NBD_REP_MAGIC);
	put32(hdr + NBD_OPT_REPLY_OPT, opt);
	put32(hdr + NBD_OPT_REPLY_TYPE, type);
	put32(hdr + NBD_OPT_REPLY_LENGTH, len);
	return conn_send(c, iov, len ? 2 : 1);
}

static uint16_t transmission_flags(const struct nbd_conn *c)
{
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
		     NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_CACHE |
		     NBD_FLAG_CAN_MULTI_CONN;

	if (c->exp->read_only)
		f |= NBD_FLAG_READ_ONLY;
	else
		f |= NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
		     NBD_FLAG_SEND_FAST_ZERO;
	if (c->structured)
		f |= NBD_FLAG_SEND_DF;
	return f;
}

/* NBD_OPT_EXPORT_NAME: no reply on error, the connection just ends. */
static int opt_export_name(struct nbd_conn *c, const unsigned char *d,
			   uint32_t len)
{
	static const unsigned char zeroes[NBD_EXPORT_REPLY_ZEROES];
	unsigned char msg[NBD_EXPORT_REPLY_SIZE];
	struct iovec iov[2] = {
		{ msg, sizeof msg },
		{ (void *)(uintptr_t)zeroes, sizeof zeroes },
	};

	if (len > NBD_MAX_STRING || !export_matches(c, d, len))
		return -1;
	c->tflags = transmission_flags(c);
	put64(msg, c->exp->size);
	put16(msg + NBD_EXPORT_REPLY_FLAGS, c->tflags);
	if (conn_send(c, iov, c->no_zeroes ? 1 : 2) < 0)
		return -1;
	return 1;
}

static int send_info(struct nbd_conn *c, uint32_t opt, uint16_t type,
		     const void *data, size_t len)
{
	unsigned char buf[NBD_INFO_TYPE_SIZE + NBD_MAX_STRING];

	if (len > NBD_MAX_STRING)
		len = NBD_MAX_STRING;
	put16(buf, type);
	memcpy(buf + NBD_INFO_TYPE_SIZE, data, len);
	return send_reply(c, opt, NBD_REP_INFO, buf,
			  (uint32_t)(NBD_INFO_TYPE_SIZE + len));
}

/* NBD_OPT_INFO and NBD_OPT_GO: returns 1 to start transmission (GO). */
static int opt_info_go(struct nbd_conn *c, uint32_t opt,
		       const unsigned char *d, uint32_t len)
{
	struct opt_reader r = { d, len };
	const unsigned char *name, *reqs;
	unsigned char buf[NBD_INFO_BLOCK_SIZE_SIZE];
	bool want_name = false, want_desc = false;
	uint32_t namelen;
	uint16_t nreq;

	if (read_string(&r, &name, &namelen) < 0 || read16(&r, &nreq) < 0 ||
	    r.left != (uint32_t)NBD_INFO_TYPE_SIZE * nreq)
		return send_reply(c, opt, NBD_REP_ERR_INVALID, NULL, 0);
	if (!export_matches(c, name, namelen))
		return send_reply(c, opt, NBD_REP_ERR_UNKNOWN, NULL, 0);
	reqs = r.p;
	for (uint16_t i = 0; i < nreq; i++) {
		uint16_t t = get16(reqs + NBD_INFO_TYPE_SIZE * i);

		want_name |= t == NBD_INFO_NAME;
		want_desc |= t == NBD_INFO_DESCRIPTION;
	}

	c->tflags = transmission_flags(c);
	put64(buf, c->exp->size);
	put16(buf + NBD_INFO_EXPORT_FLAGS, c->tflags);
	if (send_info(c, opt, NBD_INFO_EXPORT, buf, NBD_INFO_EXPORT_SIZE) < 0)
		return -1;
	put32(buf, 1);
	/* requests of whole clusters avoid a read-modify-write */
	put32(buf + NBD_INFO_BLOCK_PREFERRED, uzram_cluster_size(c->exp->dev));
	put32(buf + NBD_INFO_BLOCK_MAXIMUM, c->exp->shared->max_block);
	if (send_info(c, opt, NBD_INFO_BLOCK_SIZE, buf,
		      NBD_INFO_BLOCK_SIZE_SIZE) < 0)
		return -1;
	if (want_name && send_info(c, opt, NBD_INFO_NAME, c->exp->name,
				   strlen(c->exp->name)) < 0)
		return -1;
	if (want_desc && send_info(c, opt, NBD_INFO_DESCRIPTION,
				   c->exp->description,
				   strlen(c->exp->description)) < 0)
		return -1;
	if (send_reply(c, opt, NBD_REP_ACK, NULL, 0) < 0)
		return -1;
	return opt == NBD_OPT_GO ? 1 : 0;
}

static int opt_list(struct nbd_conn *c, uint32_t len)
{
	unsigned char buf[NBD_REP_SERVER_NAME + NBD_MAX_STRING];
	size_t n = strlen(c->exp->name);

	if (len != 0)
		return send_reply(c, NBD_OPT_LIST, NBD_REP_ERR_INVALID, NULL, 0);
	if (n > NBD_MAX_STRING)
		n = NBD_MAX_STRING;
	put32(buf, (uint32_t)n);
	memcpy(buf + NBD_REP_SERVER_NAME, c->exp->name, n);
	if (send_reply(c, NBD_OPT_LIST, NBD_REP_SERVER, buf,
		       (uint32_t)(NBD_REP_SERVER_NAME + n)) < 0)
		return -1;
	return send_reply(c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

static bool query_is(const unsigned char *q, uint32_t len, const char *s)
{
	return len == strlen(s) && !memcmp(q, s, len);
}

/* LIST_META_CONTEXT and SET_META_CONTEXT. */
static int opt_meta(struct nbd_conn *c, uint32_t opt, const unsigned char *d,
		    uint32_t len)
{
	static const char ctx[] = NBD_META_BASE_ALLOCATION;
	struct opt_reader r = { d, len };
	const bool set = opt == NBD_OPT_SET_META_CONTEXT;
	const unsigned char *name, *q;
	unsigned char buf[NBD_REP_META_NAME + sizeof ctx];
	uint32_t namelen, nq, qlen;
	bool match = false;

	if (set)
		c->meta_alloc = false; /* a failed SET selects nothing */
	if (set && !c->structured)
		return send_reply(c, opt, NBD_REP_ERR_INVALID, NULL, 0);
	if (read_string(&r, &name, &namelen) < 0 || read32(&r, &nq) < 0 ||
	    nq > r.left / 4)
		return send_reply(c, opt, NBD_REP_ERR_INVALID, NULL, 0);
	for (uint32_t i = 0; i < nq; i++) {
		if (read_string(&r, &q, &qlen) < 0)
			return send_reply(c, opt, NBD_REP_ERR_INVALID, NULL, 0);
		if (query_is(q, qlen, ctx) || (!set && query_is(q, qlen, "base:")))
			match = true;
	}
	if (r.left != 0)
		return send_reply(c, opt, NBD_REP_ERR_INVALID, NULL, 0);
	if (!export_matches(c, name, namelen))
		return send_reply(c, opt, NBD_REP_ERR_UNKNOWN, NULL, 0);
	if (!set && nq == 0)
		match = true;
	if (set)
		c->meta_alloc = match;
	if (match) {
		put32(buf, set ? NBD_META_ID_ALLOC : 0);
		memcpy(buf + NBD_REP_META_NAME, ctx, sizeof ctx - 1);
		if (send_reply(c, opt, NBD_REP_META_CONTEXT, buf,
			       (uint32_t)(NBD_REP_META_NAME + sizeof ctx - 1)) < 0)
			return -1;
	}
	return send_reply(c, opt, NBD_REP_ACK, NULL, 0);
}

static int opt_starttls(struct nbd_conn *c, uint32_t len)
{
	if (!c->exp->tls)
		return send_reply(c, NBD_OPT_STARTTLS, NBD_REP_ERR_UNSUP, NULL, 0);
	if (c->tls || len != 0)
		return send_reply(c, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID,
				  NULL, 0);
	if (send_reply(c, NBD_OPT_STARTTLS, NBD_REP_ACK, NULL, 0) < 0)
		return -1;
	if (c->ipos != c->iend) {
		ctr_add(&c->ctr->proto_errors, 1);
		return -1; /* plaintext sent after STARTTLS, before our ack */
	}
	if (tls_session_start(c) < 0)
		return -1;
	c->structured = false;
	c->meta_alloc = false;
	return 0;
}

/* One option with its data in d; returns 1 (transmission), 0 or -1. */
static int handle_option(struct nbd_conn *c, uint32_t opt,
			 const unsigned char *d, uint32_t len)
{
	if (!c->tls && opt != NBD_OPT_STARTTLS &&
	    nbd_tls_required(c->exp->tls))
		return opt == NBD_OPT_EXPORT_NAME ? -1 :
		       send_reply(c, opt, NBD_REP_ERR_TLS_REQD, NULL, 0);
	switch (opt) {
	case NBD_OPT_STARTTLS:
		return opt_starttls(c, len);
	case NBD_OPT_EXPORT_NAME:
		return opt_export_name(c, d, len);
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return opt_info_go(c, opt, d, len);
	case NBD_OPT_LIST:
		return opt_list(c, len);
	case NBD_OPT_STRUCTURED_REPLY:
		if (len != 0)
			return send_reply(c, opt, NBD_REP_ERR_INVALID, NULL, 0);
		c->structured = true;
		return send_reply(c, opt, NBD_REP_ACK, NULL, 0);
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		return opt_meta(c, opt, d, len);
	default:
		return send_reply(c, opt, NBD_REP_ERR_UNSUP, NULL, 0);
	}
}

static int negotiate(struct nbd_conn *c, unsigned char *data)
{
	unsigned char hdr[NBD_GREETING_SIZE];
	struct iovec iov = { hdr, NBD_GREETING_SIZE };
	uint32_t cflags, opt, len;
	int r;

	put64(hdr, NBD_MAGIC);
	put64(hdr + NBD_GREETING_IHAVEOPT, NBD_IHAVEOPT);
	put16(hdr + NBD_GREETING_FLAGS,
	      NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	if (conn_send(c, &iov, 1) < 0 ||
	    conn_recv(c, hdr, NBD_CLIENT_FLAGS_SIZE) < 0)
		return -1;
	cflags = get32(hdr);
	if (!(cflags & NBD_FLAG_C_FIXED_NEWSTYLE) ||
	    (cflags & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)))
		goto bad;
	c->no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;

	for (int n = 0; n < NBD_MAX_OPTIONS; n++) {
		if (conn_recv(c, hdr, NBD_OPTION_SIZE) < 0)
			return -1;
		if (get64(hdr) != NBD_IHAVEOPT)
			goto bad;
		opt = get32(hdr + NBD_OPTION_OPT);
		len = get32(hdr + NBD_OPTION_LENGTH);
		if (len > NBD_MAX_OPTION_LEN) {
			if (opt == NBD_OPT_EXPORT_NAME)
				goto bad; /* has no error reply */
			if (conn_skip(c, len) < 0 ||
			    send_reply(c, opt, NBD_REP_ERR_TOO_BIG, NULL, 0) < 0)
				return -1;
			continue;
		}
		if (conn_recv(c, data, len) < 0)
			return -1;
		if (opt == NBD_OPT_ABORT) {
			(void)send_reply(c, opt, NBD_REP_ACK, NULL, 0);
			return 0;
		}
		r = handle_option(c, opt, data, len);
		if (r != 0)
			return r;
	}
bad:
	ctr_add(&c->ctr->proto_errors, 1);
	return -1;
}

int nbd_handshake(struct nbd_conn *c)
{
	unsigned char *data = malloc(NBD_MAX_OPTION_LEN);
	int r;

	if (!data)
		return -1;
	r = negotiate(c, data);
	free(data);
	return r;
}
