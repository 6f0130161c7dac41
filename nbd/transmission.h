/* SPDX-License-Identifier: MIT */
/*
 * transmission.h - what the two halves of the transmission phase share:
 * transmission.c (threads, leadership, reading requests, the request
 * loop) and commands.c (running a request on the device and replying).
 * Private to server/.
 */
#ifndef UZRAM_TRANSMISSION_H
#define UZRAM_TRANSMISSION_H

#include "nbd.h"

#define MAX_CHUNKS   64            /* structured read reply chunks */
#define MAX_DESC     1024          /* block status descriptors per reply */
#define INLINE_MAX   (64u << 10)   /* requests the leader may run itself */
#define SPLIT_MIN    (256u << 10)  /* reads cut into pieces when idle */
#define PIECE        (128u << 10)  /* bytes per piece of a cut read */
#define MIN_BUF      NBD_IDLE_BUF  /* smallest buffer, kept while waiting */
#define KEEP_BUF     (4u << 20)
#define IDLE_RELEASE_MS 250        /* idle this long: give the buffer back */
#define SWAP_BUF     (1u << 20)    /* the least a swap server's thread maps */

struct nbd_request {
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t off;
	uint32_t len;
	bool split;      /* a read cut into pieces (transmission.c) */
};

/*
 * A read cut into pieces; lives on the leader's stack while it runs, and
 * is reachable from c->job only then.
 */
struct read_job {
	const struct nbd_request *rq;
	unsigned char *buf;  /* rq->len bytes: the leader's request buffer */
	int npieces;
	int next;            /* under c->lock: first unclaimed piece */
	int unfinished;      /* under c->lock: pieces claimed or not, not done */
	int unsent;          /* under c->send_lock: pieces not yet sent */
	uint32_t err;        /* under c->send_lock: first error, 0 if none */
};

struct chunk {
	uint64_t off;
	uint64_t len;
	bool zero;
};

/* Per-thread scratch, allocated once when the thread starts. */
struct worker {
	struct nbd_conn *c;
	unsigned char *buf;
	size_t cap;
	struct chunk ch[MAX_CHUNKS];
	/* a chunk's header, and its payload but for the data */
	unsigned char hdr[MAX_CHUNKS][NBD_CHUNK_HDR_SIZE + NBD_HOLE_PAYLOAD];
	struct iovec iov[2 * MAX_CHUNKS];
	unsigned char desc[NBD_BS_PAYLOAD_HDR + NBD_BS_DESC_SIZE * MAX_DESC];
};

/*
 * commands.c: run rq (or answer it with err, if not 0) and reply; a cut
 * read (rq->split) is transmission.c's, which calls tx_read_piece().
 */
void tx_execute(struct worker *w, const struct nbd_request *rq, uint32_t err);
/* commands.c: piece i of a cut read: decode it and send it. */
void tx_read_piece(struct worker *w, struct read_job *j, int i);

#endif /* UZRAM_TRANSMISSION_H */
