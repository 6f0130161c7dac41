// SPDX-License-Identifier: MIT
/*
 * reqloop.c - the one-thread request loop: libfuse's low-level session
 * read by hand, with a short, adaptive spin on /dev/fuse before sleeping.
 *
 * Why. A small-file workload (tar x, rm -rf, a build) is a chain of
 * round trips: the program asks, sleeps until the reply, asks again. With
 * a blocking read, every request wakes the keeper's thread and every reply
 * wakes the program; on an idle 2-vCPU VM (haltpoll, no guest polling) a
 * wake-up of a halted vCPU costs tens of microseconds, more than the
 * request's own work (BENCHMARKS.md, "uzram's own file system").
 *
 * How. /dev/fuse is made non-blocking. After each reply the loop keeps
 * reading (EAGAIN: nothing yet) for up to a window of w microseconds,
 * yielding the CPU at each turn (the program may be waiting for this very
 * CPU); only when nothing came within it does it sleep in poll(). The
 * window adapts as haltpoll's does, so an idle mount costs no CPU:
 *
 *   a request came while spinning        w stays
 *   slept, and the request came within   w doubles (at least SPIN_START),
 *   max after the last reply               up to max
 *   slept longer than max                w halves; below SPIN_START, 0
 *
 * On a busy CPU the spin is a loss: its yield hands the CPU to other
 * programs for a whole slice, and its CPU time makes the scheduler serve
 * the keeper later. So when a turn of the spin finds it was away longer
 * than max, the loop stops spinning for the next SPIN_SKIP requests.
 *
 * Measured (2 vCPUs, load 2.6, a program on CPU 0 doing open(O_CREAT)+
 * write+close, 5 round trips each, p50): the keeper on the other CPU
 * 179-499 us blocking, 87-153 us spinning 100 us; both on one CPU 68-73
 * us blocking, 53-56 us spinning with the yield (without it the p90 rose
 * from 80 to 160 us: the spinner held the CPU the program needed).
 *
 * Not after a READ or WRITE of 64 KiB or more: its requester copies that
 * much before it asks again, and on a busy machine the spin then only
 * takes the CPU the requester or the device's compression thread needs.
 * Measured (2 cores, load 4.5-4.9, 512 MiB dd bs=1M, three alternating
 * pairs, root mount): 157-321 MB/s written and 635-1024 MB/s read with
 * the spin, 343-430 and 1110-1509 without it after large requests.
 *
 * A mount that gets one request a second spins after the first few (100,
 * 50, 25, 12 us) and not at all after the rest. Unmount makes read() fail with
 * ENODEV (libfuse then exits the session), poll() wakes with POLLERR, and
 * a signal (libfuse's handlers exit the session) interrupts poll(); the
 * spin checks fuse_session_exited() at every turn, so it ends with them.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "uzfs_impl.h"

#define SPIN_START 8u   /* us: the smallest window worth spinning */
#define BIG_IO (64u << 10) /* bytes: a request after which not to spin */
#define SPIN_SKIP 4096u /* requests served without spinning once the CPU
			 * was taken from the spin: it is busy */

struct spin {
	unsigned w;     /* the window, us */
	unsigned max;   /* its ceiling, us */
	unsigned skip;  /* requests still to serve without spinning */
};

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* Read until a request comes or the window after last closes; 1 with a
 * request, 0 to sleep, or what fuse_session_receive_buf() failed with. */
static int spin(struct fuse_session *se, struct fuse_buf *buf,
		struct spin *s, uint64_t last)
{
	uint64_t prev = last, t;
	int r;

	for (;;) {
		r = fuse_session_receive_buf(se, buf);
		if (r > 0)
			return 1;
		if (r != -EAGAIN)
			return r == -EINTR ? 0 : r; /* r 0: unmounted */
		if (fuse_session_exited(se) || !s->w || s->skip)
			return 0;
		t = now_us();
		if (t - prev > s->max) { /* the yield gave the CPU away */
			s->skip = SPIN_SKIP;
			return 0;
		}
		if (t - last >= s->w)
			return 0;
		prev = t;
		sched_yield(); /* the requester may wait for this CPU */
	}
}

/*
 * The next request into buf: 1 and the request, 0 when the session has
 * ended, or a negative errno. Spins up to s->w us after last (the end of
 * the previous reply; not at all after a big one), then sleeps; updates s
 * as the top of the file says.
 */
static int next_request(struct fuse_session *se, struct fuse_buf *buf,
			struct spin *s, uint64_t last, bool big)
{
	int fd = fuse_session_fd(se);
	uint64_t gap;
	int r;

	if (s->skip)
		s->skip--;
	r = big ? 0 : spin(se, buf, s, last);
	if (r != 0)
		return r;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (fuse_session_exited(se))
			return 0;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -errno;
		if (fuse_session_exited(se))
			return 0;
		r = fuse_session_receive_buf(se, buf);
		if (r > 0)
			break;
		if (r != -EAGAIN && r != -EINTR)
			return r;
	}
	gap = now_us() - last;
	if (gap <= s->max)
		s->w = s->w * 2 > s->max ? s->max :
		       s->w * 2 < SPIN_START ? SPIN_START : s->w * 2;
	else
		s->w = s->w / 2 < SPIN_START ? 0 : s->w / 2;
	return 1;
}

/* A READ or WRITE of BIG_IO bytes or more: its requester copies that
 * much before it asks again, so no spin after it (BENCHMARKS.md: 1 MiB
 * reads were slower with the spin in every pair measured). */
static bool is_big(const struct fuse_buf *buf)
{
	const struct fuse_in_header *h = buf->mem;
	const struct fuse_read_in *rd = (const void *)(h + 1);

	if (buf->flags & FUSE_BUF_IS_FD || buf->size < sizeof *h)
		return false;
	if (h->opcode == FUSE_WRITE)
		return h->len >= BIG_IO;
	return h->opcode == FUSE_READ && buf->size >= sizeof *h + sizeof *rd &&
	       rd->size >= BIG_IO;
}

int reqloop_run(struct fuse_session *se, unsigned spin_us)
{
	struct fuse_buf buf = { .mem = NULL };
	int fd = fuse_session_fd(se), fl = fcntl(fd, F_GETFL);
	struct spin s = { .w = spin_us, .max = spin_us };
	bool big = false;
	int r = 0;

	if (spin_us && (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
		spin_us = 0; /* spin_us 0: a plain blocking loop */
	while (!fuse_session_exited(se)) {
		uint64_t last = now_us();

		if (spin_us)
			r = next_request(se, &buf, &s, last, big);
		else
			r = fuse_session_receive_buf(se, &buf);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		big = spin_us && is_big(&buf);
		fuse_session_process_buf(se, &buf);
	}
	free(buf.mem);
	if (spin_us)
		fcntl(fd, F_SETFL, fl);
	fuse_session_reset(se);
	return r < 0 && r != -EINTR ? r : 0;
}
