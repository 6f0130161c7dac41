// SPDX-License-Identifier: MIT
/*
 * test_framing.c - the NBD server's framing helpers, alone: the
 * big-endian field accessors of nbd/nbd-proto.h, and a connection's
 * buffered input and whole-frame output (nbd/transport.c) over a real
 * socket pair, with frames split across reads, payloads on the direct
 * path (16 KiB or more), skips, end of file, the input deadline and
 * conn_wait_input().
 *
 * CMOCKA_TEST_FILTER='test_split*' runs one test.
 */
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "nbd/nbd.h"

static void test_fields(void **state)
{
	unsigned char b[8];

	(void)state;
	put32(b, NBD_REQUEST_MAGIC);
	assert_memory_equal(b, "\x25\x60\x95\x13", 4);
	assert_int_equal(get32(b), NBD_REQUEST_MAGIC);
	put16(b, 0xbeef);
	assert_memory_equal(b, "\xbe\xef", 2);
	assert_int_equal(get16(b), 0xbeef);
	put64(b, UINT64_C(0x0102030405060708));
	assert_memory_equal(b, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	assert_true(get64(b) == UINT64_C(0x0102030405060708));
	put64(b, UINT64_MAX);
	assert_true(get64(b) == UINT64_MAX);
}

struct pair {
	int fd[2];              /* [0]: the connection's, [1]: the peer's */
	struct nbd_conn c;
};

static void pair_open(struct pair *p)
{
	memset(p, 0, sizeof *p);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fd), 0);
	p->c.in_fd = p->c.out_fd = p->fd[0];
	p->c.ibuf = malloc(NBD_IBUF_SIZE);
	assert_non_null(p->c.ibuf);
}

static void pair_close(struct pair *p)
{
	close(p->fd[0]);
	if (p->fd[1] >= 0)
		close(p->fd[1]);
	free(p->c.ibuf);
}

static void request(unsigned char *h, uint16_t type, uint64_t cookie,
		    uint64_t off, uint32_t len)
{
	put32(h, NBD_REQUEST_MAGIC);
	put16(h + NBD_REQUEST_FLAGS, 0);
	put16(h + NBD_REQUEST_TYPE, type);
	put64(h + NBD_REQUEST_COOKIE, cookie);
	put64(h + NBD_REQUEST_OFFSET, off);
	put32(h + NBD_REQUEST_LENGTH, len);
}

/* The peer's bytes, written in pieces of `piece` with a pause between. */
struct writer {
	int fd;
	const unsigned char *buf;
	size_t len, piece;
};

static void *write_slowly(void *arg)
{
	struct writer *w = arg;
	const struct timespec pause = { 0, 200000 };

	for (size_t at = 0; at < w->len; at += w->piece) {
		size_t n = w->len - at < w->piece ? w->len - at : w->piece;

		if (write(w->fd, w->buf + at, n) != (ssize_t)n)
			break;
		nanosleep(&pause, NULL);
	}
	close(w->fd);
	return NULL;
}

/*
 * Three requests, a write's 20 KiB payload (read directly), a 5000-byte
 * one skipped: each header comes back whole whatever the pieces the peer
 * wrote, then the end of the stream is -1.
 */
static void check_stream(size_t piece)
{
	enum { BIG = 20 << 10, SKIP = 5000 };
	size_t len = 3 * NBD_REQUEST_SIZE + BIG + SKIP;
	unsigned char *buf = malloc(len), *pay = malloc(BIG), h[NBD_REQUEST_SIZE];
	struct writer w;
	struct pair p;
	pthread_t t;
	uint64_t seed = piece;

	assert_non_null(buf);
	assert_non_null(pay);
	request(buf, NBD_CMD_WRITE, 1, 4096, BIG);
	for (size_t i = 0; i < BIG; i++)
		buf[NBD_REQUEST_SIZE + i] = (unsigned char)tu_rand(&seed);
	request(buf + NBD_REQUEST_SIZE + BIG, NBD_CMD_WRITE, 2, 0, SKIP);
	memset(buf + 2 * NBD_REQUEST_SIZE + BIG, 0x5a, SKIP);
	request(buf + 2 * NBD_REQUEST_SIZE + BIG + SKIP, NBD_CMD_READ, 3,
		UINT64_C(1) << 40, 512);

	pair_open(&p);
	w = (struct writer){ p.fd[1], buf, len, piece };
	p.fd[1] = -1;           /* the writer closes it */
	assert_int_equal(pthread_create(&t, NULL, write_slowly, &w), 0);

	assert_int_equal(conn_recv(&p.c, h, sizeof h), 0);
	assert_int_equal(get32(h), NBD_REQUEST_MAGIC);
	assert_int_equal(get16(h + NBD_REQUEST_TYPE), NBD_CMD_WRITE);
	assert_true(get64(h + NBD_REQUEST_COOKIE) == 1);
	assert_int_equal(get32(h + NBD_REQUEST_LENGTH), BIG);
	assert_int_equal(conn_recv(&p.c, pay, BIG), 0);
	assert_memory_equal(pay, buf + NBD_REQUEST_SIZE, BIG);

	assert_int_equal(conn_recv(&p.c, h, sizeof h), 0);
	assert_true(get64(h + NBD_REQUEST_COOKIE) == 2);
	assert_int_equal(conn_skip(&p.c, get32(h + NBD_REQUEST_LENGTH)), 0);

	assert_int_equal(conn_recv(&p.c, h, sizeof h), 0);
	assert_int_equal(get16(h + NBD_REQUEST_TYPE), NBD_CMD_READ);
	assert_true(get64(h + NBD_REQUEST_COOKIE) == 3);
	assert_true(get64(h + NBD_REQUEST_OFFSET) == UINT64_C(1) << 40);
	assert_int_equal(conn_recv(&p.c, h, 0), 0);
	assert_int_equal(conn_recv(&p.c, h, 1), -1);   /* end of stream */

	pthread_join(t, NULL);
	pair_close(&p);
	free(buf);
	free(pay);
}

static void test_split_frames(void **state)
{
	(void)state;
	check_stream(1u << 20);  /* all at once */
	check_stream(4096);
	check_stream(7);         /* every header split across reads */
}

/* A stream that ends inside a frame, or inside a skip, is -1. */
static void test_cut_frames(void **state)
{
	unsigned char h[NBD_REQUEST_SIZE], half[50] = { 0 };
	struct pair p;

	(void)state;
	pair_open(&p);
	request(h, NBD_CMD_WRITE, 9, 0, 100);
	assert_int_equal(write(p.fd[1], h, 10), 10);
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_int_equal(conn_recv(&p.c, h, sizeof h), -1);
	pair_close(&p);

	pair_open(&p);
	request(h, NBD_CMD_WRITE, 9, 0, 100);
	assert_int_equal(write(p.fd[1], h, sizeof h), (ssize_t)sizeof h);
	assert_int_equal(write(p.fd[1], half, 50), 50);   /* 50 of 100 */
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_int_equal(conn_recv(&p.c, h, sizeof h), 0);
	assert_int_equal(conn_skip(&p.c, 100), -1);
	pair_close(&p);
}

/* Input must come before c->deadline: a silent peer makes conn_recv -1. */
static void test_deadline(void **state)
{
	unsigned char h[4];
	struct pair p;

	(void)state;
	pair_open(&p);
	clock_gettime(CLOCK_MONOTONIC, &p.c.deadline);
	p.c.deadline.tv_nsec += 50000000;     /* 50 ms from now */
	if (p.c.deadline.tv_nsec >= 1000000000) {
		p.c.deadline.tv_sec++;
		p.c.deadline.tv_nsec -= 1000000000;
	}
	assert_int_equal(conn_recv(&p.c, h, sizeof h), -1);
	pair_close(&p);
}

static void test_wait_input(void **state)
{
	unsigned char h[3];
	struct pair p;

	(void)state;
	pair_open(&p);
	assert_int_equal(conn_wait_input(&p.c, 0), 0);       /* nothing yet */
	assert_int_equal(write(p.fd[1], "abc", 3), 3);
	assert_int_equal(conn_wait_input(&p.c, 1000), 1);
	assert_int_equal(conn_wait_input(&p.c, 0), 1);       /* buffered */
	assert_int_equal(conn_recv(&p.c, h, 3), 0);
	assert_memory_equal(h, "abc", 3);
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_int_equal(conn_wait_input(&p.c, 0), 1);       /* EOF: read tells */
	assert_int_equal(conn_recv(&p.c, h, 1), -1);
	pair_close(&p);
}

/* A reply frame of several pieces arrives whole and in order. */
static void test_send_frame(void **state)
{
	unsigned char hdr[NBD_SIMPLE_REPLY_SIZE], got[NBD_SIMPLE_REPLY_SIZE + 300];
	unsigned char data[300];
	struct iovec iov[2] = { { hdr, sizeof hdr }, { data, sizeof data } };
	struct pair p;

	(void)state;
	pair_open(&p);
	put32(hdr, NBD_SIMPLE_REPLY_MAGIC);
	put32(hdr + NBD_SIMPLE_REPLY_ERROR, 0);
	put64(hdr + NBD_SIMPLE_REPLY_COOKIE, 77);
	memset(data, 0xc3, sizeof data);
	assert_int_equal(conn_send(&p.c, iov, 2), 0);
	assert_int_equal(read(p.fd[1], got, sizeof got), (ssize_t)sizeof got);
	assert_int_equal(get32(got), NBD_SIMPLE_REPLY_MAGIC);
	assert_true(get64(got + NBD_SIMPLE_REPLY_COOKIE) == 77);
	assert_memory_equal(got + sizeof hdr, data, sizeof data);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_split_frames),
		cmocka_unit_test(test_cut_frames),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_wait_input),
		cmocka_unit_test(test_send_frame),
	};

	return tu_run_tests(tests, NULL, NULL);
}
