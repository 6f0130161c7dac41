// SPDX-License-Identifier: MIT
/*
 * commands.c - one request run on the device and its reply: simple
 * replies, structured replies whose data comes as OFFSET_DATA and
 * OFFSET_HOLE chunks (the runs uzram_block_status() reports), one piece
 * of a cut read (transmission.c cuts reads and hands out the pieces),
 * base:allocation block status, and the errno mapping.
 *
 * Every reply frame (or chunk group) goes out whole under c->send_lock;
 * the first failed send marks the connection send_failed and shuts its
 * read side, so the leader stops reading requests nobody will see answered.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "transmission.h"

/* ---- replies ---- */

static void send_locked(struct nbd_conn *c, struct iovec *iov, int n)
{
	if (!c->send_failed && conn_send(c, iov, n) < 0) {
		c->send_failed = true;
		(void)shutdown(c->in_fd, SHUT_RD); /* wake the reading leader */
	}
}

static void send_frame(struct nbd_conn *c, struct iovec *iov, int n)
{
	pthread_mutex_lock(&c->send_lock);
	send_locked(c, iov, n);
	pthread_mutex_unlock(&c->send_lock);
}

static void reply_simple(struct nbd_conn *c, const struct nbd_request *rq,
			 uint32_t err, void *data, size_t len)
{
	unsigned char hdr[NBD_SIMPLE_REPLY_SIZE];
	struct iovec iov[2] = { { hdr, sizeof hdr }, { data, len } };

	put32(hdr, NBD_SIMPLE_REPLY_MAGIC);
	put32(hdr + NBD_SIMPLE_REPLY_ERROR, err);
	put64(hdr + NBD_SIMPLE_REPLY_COOKIE, rq->cookie);
	if (err)
		ctr_add(&c->ctr->errors, 1);
	send_frame(c, iov, err || !len ? 1 : 2);
}

static void put_chunk_hdr(unsigned char *p, const struct nbd_request *rq,
			  uint16_t flags, uint16_t type, uint32_t len)
{
	put32(p, NBD_STRUCTURED_REPLY_MAGIC);
	put16(p + NBD_CHUNK_FLAGS, flags);
	put16(p + NBD_CHUNK_TYPE, type);
	put64(p + NBD_CHUNK_COOKIE, rq->cookie);
	put32(p + NBD_CHUNK_LENGTH, len);
}

#define ERROR_CHUNK_SIZE (NBD_CHUNK_HDR_SIZE + NBD_ERROR_PAYLOAD)

/* The final ERROR chunk of a structured reply, without a message. */
static void put_error_chunk(struct nbd_conn *c, unsigned char *p,
			    const struct nbd_request *rq, uint32_t err)
{
	put_chunk_hdr(p, rq, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR,
		      NBD_ERROR_PAYLOAD);
	put32(p + NBD_CHUNK_HDR_SIZE, err);
	put16(p + NBD_CHUNK_HDR_SIZE + NBD_ERROR_MSG_LENGTH, 0);
	ctr_add(&c->ctr->errors, 1);
}

/* Errors of READ and BLOCK_STATUS need a structured chunk once negotiated. */
static void reply_error(struct nbd_conn *c, const struct nbd_request *rq,
			uint32_t err)
{
	unsigned char p[ERROR_CHUNK_SIZE];
	struct iovec iov = { p, sizeof p };

	if (!c->structured || (rq->type != NBD_CMD_READ &&
			       rq->type != NBD_CMD_BLOCK_STATUS)) {
		reply_simple(c, rq, err, NULL, 0);
		return;
	}
	put_error_chunk(c, p, rq, err);
	send_frame(c, &iov, 1);
}

static uint32_t nbd_err(int r)
{
	switch (r) {
	case 0:
		return 0;
	case -ENOSPC:
		return NBD_ENOSPC;
	case -ENOMEM:
		return NBD_ENOMEM;
	case -EINVAL:
	case -ERANGE:
		return NBD_EINVAL;
	default:
		return NBD_EIO;
	}
}

/* ---- commands ---- */

/* Split [pos, end) into data and zero runs in w->ch, at most MAX_CHUNKS. */
static int map_range(struct worker *w, uint64_t pos, uint64_t end)
{
	struct uzram *dev = w->c->exp->dev;
	uint64_t run;
	unsigned fl;
	bool zero;
	int n = 0;

	while (pos < end) {
		if (n >= MAX_CHUNKS - 1 ||
		    uzram_block_status(dev, pos, end - pos, &run, &fl) < 0) {
			run = end - pos;
			zero = false;
		} else {
			zero = fl & (UZRAM_STATUS_HOLE | UZRAM_STATUS_ZERO);
		}
		if (n > 0 && w->ch[n - 1].zero == zero) {
			w->ch[n - 1].len += run;
		} else {
			w->ch[n] = (struct chunk){ pos, run, zero };
			n++;
		}
		pos += run;
	}
	return n;
}

/*
 * Read [off, off+len) of rq into buf (rq's buffer, indexed from rq->off)
 * and build its reply chunks in w->iov, none flagged DONE; *last is the
 * header of the final one. Returns the iovec count, or 0 with *err set.
 */
static int build_chunks(struct worker *w, const struct nbd_request *rq,
			unsigned char *buf, uint64_t off, uint64_t len,
			uint32_t *err, unsigned char **last)
{
	struct nbd_conn *c = w->c;
	int n, iovcnt = 0, r;

	if (rq->flags & NBD_CMD_FLAG_DF) {
		w->ch[0] = (struct chunk){ off, len, false };
		n = 1;
	} else {
		n = map_range(w, off, off + len);
	}
	for (int i = 0; i < n; i++) {
		const struct chunk *ch = &w->ch[i];
		unsigned char *h = w->hdr[i];
		unsigned char *dst = buf + (ch->off - rq->off);

		*last = h;
		if (ch->zero) {
			put_chunk_hdr(h, rq, 0, NBD_REPLY_TYPE_OFFSET_HOLE,
				      NBD_HOLE_PAYLOAD);
			put64(h + NBD_CHUNK_HDR_SIZE, ch->off);
			put32(h + NBD_CHUNK_HDR_SIZE + NBD_HOLE_LENGTH,
			      (uint32_t)ch->len);
			w->iov[iovcnt++] = (struct iovec){
				h, NBD_CHUNK_HDR_SIZE + NBD_HOLE_PAYLOAD };
			continue;
		}
		r = uzram_read(c->exp->dev, dst, ch->len, ch->off);
		if (r < 0) {
			*err = nbd_err(r);
			return 0;
		}
		put_chunk_hdr(h, rq, 0, NBD_REPLY_TYPE_OFFSET_DATA,
			      (uint32_t)(NBD_DATA_PAYLOAD_HDR + ch->len));
		put64(h + NBD_CHUNK_HDR_SIZE, ch->off);
		w->iov[iovcnt++] = (struct iovec){
			h, NBD_CHUNK_HDR_SIZE + NBD_DATA_PAYLOAD_HDR };
		w->iov[iovcnt++] = (struct iovec){ dst, ch->len };
	}
	return iovcnt;
}

static void do_read_structured(struct worker *w, const struct nbd_request *rq)
{
	struct nbd_conn *c = w->c;
	unsigned char *last = w->hdr[0];
	uint32_t err = 0;
	int iovcnt;

	if (rq->len == 0) {
		put_chunk_hdr(w->hdr[0], rq, NBD_REPLY_FLAG_DONE,
			      NBD_REPLY_TYPE_NONE, 0);
		w->iov[0] = (struct iovec){ w->hdr[0], NBD_CHUNK_HDR_SIZE };
		send_frame(c, w->iov, 1);
		return;
	}
	iovcnt = build_chunks(w, rq, w->buf, rq->off, rq->len, &err, &last);
	if (err) {
		reply_error(c, rq, err);
		return;
	}
	put16(last + 4, NBD_REPLY_FLAG_DONE);
	ctr_add(&c->ctr->bytes_read, rq->len);
	send_frame(c, w->iov, iovcnt);
}

/*
 * Piece i of a cut read, by its leader or a helper: decode, then send at
 * once. The piece sent last ends the reply: with DONE on its final chunk,
 * or, if any piece failed, with one ERROR chunk in its place.
 */
void tx_read_piece(struct worker *w, struct read_job *j, int i)
{
	struct nbd_conn *c = w->c;
	const struct nbd_request *rq = j->rq;
	uint64_t off = rq->off + (uint64_t)i * PIECE;
	uint64_t len = rq->off + rq->len - off;
	unsigned char *last = w->hdr[0];
	uint32_t err = 0;
	int iovcnt;

	if (len > PIECE)
		len = PIECE;
	iovcnt = build_chunks(w, rq, j->buf, off, len, &err, &last);
	pthread_mutex_lock(&c->send_lock);
	if (err && !j->err)
		j->err = err;
	if (--j->unsent == 0) {
		if (j->err) {
			put_error_chunk(c, w->hdr[0], rq, j->err);
			w->iov[0] = (struct iovec){ w->hdr[0], ERROR_CHUNK_SIZE };
			iovcnt = 1;
		} else {
			put16(last + 4, NBD_REPLY_FLAG_DONE);
		}
	}
	if (iovcnt > 0)
		send_locked(c, w->iov, iovcnt);
	pthread_mutex_unlock(&c->send_lock);
}

static void do_read(struct worker *w, const struct nbd_request *rq)
{
	int r;

	if (w->c->structured) {
		do_read_structured(w, rq);
		return;
	}
	r = rq->len ? uzram_read(w->c->exp->dev, w->buf, rq->len, rq->off) : 0;
	if (r == 0)
		ctr_add(&w->c->ctr->bytes_read, rq->len);
	reply_simple(w->c, rq, nbd_err(r), w->buf, rq->len);
}

static uint32_t nbd_state(unsigned fl)
{
	return (fl & UZRAM_STATUS_HOLE ? NBD_STATE_HOLE : 0) |
	       (fl & UZRAM_STATUS_ZERO ? NBD_STATE_ZERO : 0);
}

/* base:allocation extents, merged, at most MAX_DESC (one with REQ_ONE). */
static void do_block_status(struct worker *w, const struct nbd_request *rq)
{
	struct uzram *dev = w->c->exp->dev;
	uint64_t pos = rq->off, end = rq->off + rq->len, run;
	unsigned char *d = w->desc + NBD_BS_PAYLOAD_HDR, h[NBD_CHUNK_HDR_SIZE];
	struct iovec iov[2] = { { h, sizeof h }, { w->desc, 0 } };
	uint32_t st, prev = 0;
	unsigned fl;
	int n = 0;

	while (pos < end) {
		if (uzram_block_status(dev, pos, end - pos, &run, &fl) < 0)
			break;
		st = nbd_state(fl);
		if (n > 0 && st == prev) {
			unsigned char *e = d + NBD_BS_DESC_SIZE * (n - 1);

			put32(e, get32(e) + (uint32_t)run);
		} else {
			if (n == MAX_DESC ||
			    (n == 1 && (rq->flags & NBD_CMD_FLAG_REQ_ONE)))
				break;
			put32(d + NBD_BS_DESC_SIZE * n, (uint32_t)run);
			put32(d + NBD_BS_DESC_SIZE * n + NBD_BS_DESC_FLAGS, st);
			prev = st;
			n++;
		}
		pos += run;
	}
	if (n == 0) {
		reply_error(w->c, rq, NBD_EIO);
		return;
	}
	put_chunk_hdr(h, rq, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS,
		      (uint32_t)(NBD_BS_PAYLOAD_HDR + NBD_BS_DESC_SIZE * n));
	put32(w->desc, NBD_META_ID_ALLOC);
	iov[1].iov_len = NBD_BS_PAYLOAD_HDR + NBD_BS_DESC_SIZE * (size_t)n;
	send_frame(w->c, iov, 2);
}

void tx_execute(struct worker *w, const struct nbd_request *rq,
		uint32_t err)
{
	struct nbd_conn *c = w->c;
	struct uzram *dev = c->exp->dev;
	int r = 0;

	if (err) {
		reply_error(c, rq, err);
		return;
	}
	switch (rq->type) {
	case NBD_CMD_READ:
		do_read(w, rq);
		return;
	case NBD_CMD_BLOCK_STATUS:
		do_block_status(w, rq);
		return;
	case NBD_CMD_WRITE:
		if (rq->len)
			r = uzram_write(dev, w->buf, rq->len, rq->off);
		if (r == 0)
			ctr_add(&c->ctr->bytes_written, rq->len);
		break;
	case NBD_CMD_TRIM:
		r = uzram_discard(dev, rq->len, rq->off);
		break;
	case NBD_CMD_WRITE_ZEROES:
		r = uzram_write_zeroes(dev, rq->len, rq->off,
				       rq->flags & NBD_CMD_FLAG_NO_HOLE ?
				       UZRAM_ZERO_NO_HOLE : 0);
		break;
	default: /* FLUSH, CACHE: the data is in memory already */
		break;
	}
	reply_simple(c, rq, nbd_err(r), NULL, 0);
}
