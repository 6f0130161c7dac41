// SPDX-License-Identifier: MIT
/*
 * transmission.c - the transmission phase: requests in, replies out, with
 * many requests in flight per connection.
 *
 * Threading model: leader/follower, per connection.
 *
 *   client --requests--> [ leader ] reads header (+ payload), checks it
 *                           |  nothing else running and the request is
 *                           |  small: runs it and replies itself, still
 *                           |  leading (no thread hand-off at all)
 *                           |  otherwise: passes the lead on, then runs
 *                           v  it while another thread reads the next one
 *   client <--replies--  [ send_lock ] one writev() per reply frame
 *
 * A connection owns up to NBD_MAX_THREADS threads, started lazily: a new
 * one only when a leader passes the lead and nobody is waiting to take it,
 * or when a cut read (below) finds no idle thread to help.
 * A client at queue depth 1 is served by one thread that never hands a
 * request to another: one read() and one writev() per request, which is
 * what keeps 4K latency low on a 2-core machine. As soon as one request is
 * running elsewhere, every further one is handed off too, so a pipelining
 * client (qemu, nbdcopy, fio at depth) gets its requests run in parallel,
 * replies in completion order, and a slow request (a large write to
 * compress, a trim of gigabytes) never holds up the reading.
 * The threads of one connection never wait for another connection's: a
 * slow client only stalls its own threads, and the device needs no server
 * lock (libuzram is thread-safe per page).
 *
 * A large read on an otherwise idle connection (a client at depth 1, say
 * fio or qemu reading 1 MiB at a time) is cut into pieces:
 *
 *   leader: reads the request, publishes it as the connection's read job
 *     piece 0 | piece 1 | piece 2 | ...   claimed one by one (c->lock) by
 *        the leader and by idle threads woken to help; each is decoded into
 *        the request's buffer and sent at once as its own OFFSET_DATA (or
 *        HOLE) chunks, in any order; the piece that goes out last carries
 *        NBD_REPLY_FLAG_DONE (decided under send_lock)
 *
 * so decoding runs on several cores and overlaps the client's receiving,
 * instead of the client waiting for the whole buffer; it pays only when a
 * core is free to help. Helpers: one per CPU beyond the first. Only when
 * nothing else is running and no further request is buffered: at depth,
 * requests already run in parallel, and more chunks would only cost the
 * client more system calls.
 *
 * Bounds: a request holds at most max_block bytes of buffer (the maximum
 * block size we advertise); the leader waits before reading a payload or
 * starting a read if the connection already holds conn_inflight bytes, or
 * if the server's buffer budget (limits.c) is spent, so a client that
 * sends faster than we reply is paused by the socket's flow control. Each
 * thread keeps its buffer for reuse (up to KEEP_BUF bytes) while busy, and
 * gives it back to the budget once idle for IDLE_RELEASE_MS; only the
 * leader keeps a buffer of MIN_BUF or less while it waits for a request,
 * so an idle connection holds at most MIN_BUF. Buffers are mapped, not
 * malloc()ed, so that what is given back leaves the process at once.
 *
 * Not for swap (nbd_shared.resident_buffers, `serve --swap`): there a
 * thread's buffer is mapped resident (MAP_POPULATE), at least SWAP_BUF,
 * and kept until the thread ends. munmap() and mmap() take the process's
 * mmap lock for writing, which the swap server's refill thread may hold
 * for reading in a fault that waits in reclaim for this device's writes,
 * and a buffer that faults in as a request lands allocates exactly then
 * (doc/block-device.md; the same hang as ublk's, v32 on 2026-12-04). A
 * buffer grows, once, for a request larger than any before it. And the
 * NBD_MAX_THREADS threads a connection may add start with it, each mapping its
 * buffer and making its codec contexts (uzram_thread_prepare()) before it
 * reads a request: without --swap they start as requests overlap, which
 * under pressure is the moment not to make a thread.
 *
 * Shutdown: a request read once the server's stopping flag is set is
 * answered with NBD_ESHUTDOWN (its payload skipped), as the spec asks;
 * requests read before run normally.
 *
 * Locks (see struct nbd_conn): c->lock guards the leader/thread/inflight
 * state and the read job's claims; c->send_lock orders whole reply frames
 * (and chunk groups) and guards send_failed.
 * The input buffer belongs to whoever leads. Never acquire c->lock while
 * holding c->send_lock.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "transmission.h"

static void *thread_main(void *arg);
static void buf_release(struct worker *w);

/* Wait on cv for at most ms milliseconds (cv uses CLOCK_REALTIME). */
static int timed_wait(pthread_cond_t *cv, pthread_mutex_t *m, int ms)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	return pthread_cond_timedwait(cv, m, &t);
}

/* ---- leadership and the in-flight budget (c->lock) ---- */

/* Help with the read job's pieces, if any; called and returns with c->lock. */
static bool tx_help_locked(struct worker *w)
{
	struct nbd_conn *c = w->c;
	struct read_job *j = c->job;
	int i;

	if (!j || j->next >= j->npieces)
		return false;
	i = j->next++;
	pthread_mutex_unlock(&c->lock);
	tx_read_piece(w, j, i);
	pthread_mutex_lock(&c->lock);
	if (--j->unfinished == 0)
		pthread_cond_signal(&c->job_cv);
	return true;
}

/* Wait to lead; an idle thread helps with a cut read meanwhile. */
static bool lead(struct worker *w)
{
	struct nbd_conn *c = w->c;
	bool ok;

	pthread_mutex_lock(&c->lock);
	while (c->leader_busy && !c->closing) {
		if (tx_help_locked(w))
			continue;
		c->idle++;
		if (!w->buf || c->exp->shared->resident_buffers) {
			pthread_cond_wait(&c->lead_cv, &c->lock);
		} else if (timed_wait(&c->lead_cv, &c->lock, IDLE_RELEASE_MS) ==
			   ETIMEDOUT) {
			pthread_mutex_unlock(&c->lock);
			buf_release(w);
			pthread_mutex_lock(&c->lock);
		}
		c->idle--;
	}
	ok = !c->closing;
	if (ok)
		c->leader_busy = true;
	pthread_mutex_unlock(&c->lock);
	return ok;
}

static void tx_spawn_locked(struct nbd_conn *c)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, NBD_THREAD_STACK);
	if (!pthread_create(&c->threads[c->nspawned], &attr, thread_main, c)) {
		/* for ps and the hang reports; a failure changes nothing */
		(void)pthread_setname_np(c->threads[c->nspawned], "uzram-nbd-req");
		c->nspawned++;
		c->nthreads++;
	}
	pthread_attr_destroy(&attr);
}

/* Pass the lead on to run a request in parallel with further reading. */
static void unlead(struct nbd_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->leader_busy = false;
	c->running++;
	if (c->idle > 0)
		pthread_cond_signal(&c->lead_cv);
	else if (!c->closing && c->nspawned < NBD_MAX_THREADS)
		tx_spawn_locked(c);
	pthread_mutex_unlock(&c->lock);
}

static void stop_reading(struct nbd_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->closing = true;
	c->leader_busy = false;
	pthread_cond_broadcast(&c->lead_cv);
	pthread_mutex_unlock(&c->lock);
}

/* Called by the leader only, so a waiting leader pauses all reading. */
static void budget_acquire(struct nbd_conn *c, size_t n)
{
	pthread_mutex_lock(&c->lock);
	while (c->inflight > 0 &&
	       c->inflight + n > c->exp->shared->conn_inflight)
		pthread_cond_wait(&c->budget_cv, &c->lock);
	c->inflight += n;
	pthread_mutex_unlock(&c->lock);
}

static void budget_give(struct nbd_conn *c, size_t n, bool handed_off)
{
	if (n == 0 && !handed_off)
		return;
	pthread_mutex_lock(&c->lock);
	c->inflight -= n;
	c->running -= handed_off;
	pthread_cond_signal(&c->budget_cv);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Whether the leader runs rq itself: errors and small requests when no
 * other request is running (a client at queue depth 1 never pays for a
 * thread switch); otherwise hand off, so a pipelining client gets its
 * requests run in parallel and a slow one never holds up the reading.
 */
static bool run_inline(struct nbd_conn *c, struct nbd_request *rq,
		       uint32_t err)
{
	bool idle;

	if (err)
		return true;
	pthread_mutex_lock(&c->lock);
	idle = c->running == 0;
	pthread_mutex_unlock(&c->lock);
	if (!idle)
		return false;
	switch (rq->type) {
	case NBD_CMD_FLUSH:
	case NBD_CMD_CACHE:
	case NBD_CMD_BLOCK_STATUS:
		return true;
	case NBD_CMD_READ:
		/* c->ibuf is ours to look at: we lead. */
		rq->split = c->structured && c->helpers > 0 &&
			    rq->len >= SPLIT_MIN &&
			    !(rq->flags & NBD_CMD_FLAG_DF) && c->ipos == c->iend;
		return rq->split || rq->len <= INLINE_MAX;
	default:
		return rq->len <= INLINE_MAX;
	}
}

/* Give the thread's buffer back to the budget (and the system). */
static void buf_release(struct worker *w)
{
	if (!w->buf)
		return;
	munmap(w->buf, w->cap);
	nbd_budget_put(w->c->exp->shared, w->cap);
	w->buf = NULL;
	w->cap = 0;
}

/*
 * A buffer of at least n bytes, taken from the server's budget: may wait
 * for other connections to give buffers back. 0 or -1.
 */
static int buf_reserve(struct worker *w, size_t n)
{
	struct nbd_shared *sh = w->c->exp->shared;
	size_t cap = n < MIN_BUF ? MIN_BUF : (n + 4095) & ~(size_t)4095;
	int populate = 0;
	void *p;

	if (n == 0 || n <= w->cap)
		return 0;
	buf_release(w);
	if (sh->resident_buffers) {
		populate = MAP_POPULATE;
		if (cap < SWAP_BUF)
			cap = SWAP_BUF;
	}
	if (cap > sh->buf_limit)
		cap = n;
	if (nbd_budget_get(sh, cap) < 0)
		return -1;
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
	if (p == MAP_FAILED) {
		nbd_budget_put(sh, cap);
		return -1;
	}
	w->buf = p;
	w->cap = cap;
	return 0;
}

static void buf_trim(struct worker *w)
{
	if (w->cap > KEEP_BUF && !w->c->exp->shared->resident_buffers)
		buf_release(w);
}

/* ---- reading requests (leader only) ---- */

/* The NBD error to answer rq with, or 0 if it may run. */
static uint32_t check_request(const struct nbd_conn *c,
			      const struct nbd_request *rq)
{
	const struct nbd_export *e = c->exp;
	uint16_t ok = NBD_CMD_FLAG_FUA;
	bool modifies = false;

	switch (rq->type) {
	case NBD_CMD_READ:
		if (c->structured)
			ok |= NBD_CMD_FLAG_DF;
		/* EOVERFLOW only where the spec allows it: structured replies */
		if (rq->len > e->shared->max_block)
			return c->structured ? NBD_EOVERFLOW : NBD_EINVAL;
		break;
	case NBD_CMD_WRITE:
		modifies = true;
		if (rq->len > e->shared->max_block)
			return NBD_EINVAL;
		break;
	case NBD_CMD_TRIM:
		modifies = true;
		break;
	case NBD_CMD_WRITE_ZEROES:
		ok |= NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO;
		modifies = true;
		break;
	case NBD_CMD_BLOCK_STATUS:
		if (!c->meta_alloc || rq->len == 0)
			return NBD_EINVAL;
		ok |= NBD_CMD_FLAG_REQ_ONE;
		break;
	case NBD_CMD_FLUSH:
	case NBD_CMD_CACHE:
		break;
	default:
		return NBD_EINVAL;
	}
	if (rq->flags & ~ok)
		return NBD_EINVAL;
	if (modifies && e->read_only)
		return NBD_EPERM;
	if (rq->type != NBD_CMD_FLUSH &&
	    (rq->off > e->size || rq->len > e->size - rq->off))
		return rq->type == NBD_CMD_WRITE ||
		       rq->type == NBD_CMD_WRITE_ZEROES ? NBD_ENOSPC : NBD_EINVAL;
	return 0;
}

/*
 * Read the next request and its payload into w. Returns 0 with *err set
 * (0 to run it) and *held the budget taken, or -1 to stop reading: end of
 * input, NBD_CMD_DISC, or input we cannot resynchronise after.
 */
static int read_request(struct worker *w, struct nbd_request *rq,
			uint32_t *err, size_t *held)
{
	struct nbd_conn *c = w->c;
	unsigned char h[NBD_REQUEST_SIZE];

	*held = 0;
	if (conn_recv(c, h, sizeof h) < 0)
		return -1;
	if (get32(h) != NBD_REQUEST_MAGIC) {
		ctr_add(&c->ctr->proto_errors, 1);
		return -1;
	}
	rq->flags = get16(h + NBD_REQUEST_FLAGS);
	rq->type = get16(h + NBD_REQUEST_TYPE);
	rq->cookie = get64(h + NBD_REQUEST_COOKIE);
	rq->off = get64(h + NBD_REQUEST_OFFSET);
	rq->len = get32(h + NBD_REQUEST_LENGTH);
	rq->split = false;
	ctr_add(&c->ctr->requests[rq->type < NBD_CMD_NR ? rq->type : NBD_CMD_NR], 1);
	if (rq->type == NBD_CMD_DISC)
		return -1;

	*err = check_request(c, rq);
	if (!*err && atomic_load_explicit(&c->exp->shared->stopping,
					  memory_order_relaxed))
		*err = NBD_ESHUTDOWN;
	if (rq->type != NBD_CMD_WRITE && rq->type != NBD_CMD_READ)
		return 0;
	if (*err == 0) {
		budget_acquire(c, rq->len);
		*held = rq->len;
		if (buf_reserve(w, rq->len) < 0)
			*err = NBD_ENOMEM;
	}
	if (rq->type == NBD_CMD_READ)
		return 0;
	if (*err)
		return conn_skip(c, rq->len);
	return conn_recv(c, w->buf, rq->len);
}

static long long ms_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long long)(now.tv_sec - t0->tv_sec) * 1000 +
	       (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/*
 * Before the leader reads a request: if none is there yet, give the
 * thread's buffer back after IDLE_RELEASE_MS, and with --timeout end the
 * connection once it has been idle (nothing in flight) that long. 0 to
 * read the request, -1 to stop.
 */
static int wait_request(struct worker *w)
{
	struct nbd_conn *c = w->c;
	const long long idle_ms = (long long)c->exp->shared->idle_secs * 1000;
	struct timespec t0;
	long long waited;
	bool busy;
	int ms;

	/*
	 * A small buffer is kept while the leader blocks in read(): a client
	 * at queue depth 1 sends its next request only after our reply, so
	 * timing every wait would cost two more system calls per request.
	 */
	const bool keep = w->cap <= MIN_BUF || c->exp->shared->resident_buffers;

	if (keep && !idle_ms)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		waited = ms_since(&t0);
		ms = -1;
		if (!keep)
			ms = waited < IDLE_RELEASE_MS ?
			     (int)(IDLE_RELEASE_MS - waited) : 0;
		else if (idle_ms)
			ms = waited < idle_ms ? (int)(idle_ms - waited) : 0;
		if (conn_wait_input(c, ms) > 0)
			return 0;
		if (!keep)
			buf_release(w);
		if (!idle_ms || ms_since(&t0) < idle_ms)
			continue;
		pthread_mutex_lock(&c->lock);
		busy = c->running > 0;
		pthread_mutex_unlock(&c->lock);
		if (!busy)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &t0); /* replies still going out */
	}
}

/*
 * The leader's side of a cut read: publish the job, wake idle threads to
 * help (starting one if none is idle), take pieces until none is left,
 * then wait for the helpers' pieces before the buffer is released.
 */
static void do_read_split(struct worker *w, const struct nbd_request *rq)
{
	struct nbd_conn *c = w->c;
	struct read_job j = {
		.rq = rq,
		.buf = w->buf,
		.npieces = (int)((rq->len + PIECE - 1) / PIECE),
	};
	int want;

	j.unfinished = j.unsent = j.npieces;
	want = j.npieces - 1 < c->helpers ? j.npieces - 1 : c->helpers;
	pthread_mutex_lock(&c->lock);
	assert(!c->job);
	c->job = &j;
	for (int i = 0; i < want && i < c->idle; i++)
		pthread_cond_signal(&c->lead_cv);
	if (c->idle < want && !c->closing && c->nspawned < NBD_MAX_THREADS)
		tx_spawn_locked(c);
	while (tx_help_locked(w))
		;
	while (j.unfinished > 0)
		pthread_cond_wait(&c->job_cv, &c->lock);
	c->job = NULL;
	pthread_mutex_unlock(&c->lock);
	if (!j.err)
		ctr_add(&c->ctr->bytes_read, rq->len);
}

static void serve(struct nbd_conn *c)
{
	struct worker *w = calloc(1, sizeof *w);
	struct nbd_request rq;
	bool leading = false, handed_off;
	uint32_t err;
	size_t held = 0;

	if (!w) {
		stop_reading(c);
		return;
	}
	w->c = c;
	if (c->exp->shared->resident_buffers) {
		/* what its first request would allocate, before it: failures
		 * are met again there */
		(void)uzram_thread_prepare(c->exp->dev);
		(void)buf_reserve(w, SWAP_BUF);
	}
	for (;;) {
		if (!leading && !lead(w))
			break;
		leading = true;
		if (wait_request(w) < 0 ||
		    read_request(w, &rq, &err, &held) < 0) {
			budget_give(c, held, false);
			stop_reading(c);
			break;
		}
		handed_off = !run_inline(c, &rq, err);
		if (handed_off) {
			unlead(c);
			leading = false;
		}
		if (rq.split)
			do_read_split(w, &rq);
		else
			tx_execute(w, &rq, err);
		budget_give(c, held, handed_off);
		buf_trim(w);
	}
	buf_release(w);
	free(w);
}

static void *thread_main(void *arg)
{
	struct nbd_conn *c = arg;

	serve(c);
	pthread_mutex_lock(&c->lock);
	c->nthreads--;
	pthread_cond_signal(&c->done_cv);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

void nbd_transmission(struct nbd_conn *c)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	c->helpers = ncpu > NBD_MAX_THREADS ? NBD_MAX_THREADS - 1 :
		     ncpu > 1 ? (int)ncpu - 1 : 0;
	c->nthreads = 1;
	if (c->exp->shared->resident_buffers) {
		/* swap: every thread now, none made while the kernel waits */
		pthread_mutex_lock(&c->lock);
		for (int i = 0; i < NBD_MAX_THREADS &&
				c->nspawned < NBD_MAX_THREADS; i++)
			tx_spawn_locked(c); /* a failure: made later, if ever */
		pthread_mutex_unlock(&c->lock);
	}
	serve(c);
	pthread_mutex_lock(&c->lock);
	c->nthreads--;
	while (c->nthreads > 0)
		pthread_cond_wait(&c->done_cv, &c->lock);
	pthread_mutex_unlock(&c->lock);
	for (int i = 0; i < c->nspawned; i++)
		pthread_join(c->threads[i], NULL);
}
