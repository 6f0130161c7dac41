// SPDX-License-Identifier: MIT
/*
 * queue.c - one ublk hardware queue: one thread, one io_uring, `depth`
 * tags. Each tag has one buffer of max_io bytes, made once when the queue
 * starts and given to the driver once per fetch, and the thread's codec
 * contexts are made before its first request (uzram_thread_prepare()):
 * nothing is allocated or mapped per request.
 *
 *   start:   FETCH_REQ for every tag (the driver holds the commands)
 *   request: its CQE (user_data = tag) -> the descriptor desc[tag] says
 *            op, sector, length -> run it on the device -> COMMIT_AND_FETCH
 *            with the result, which also fetches the tag's next request
 *   end:     the driver completes the held commands with UBLK_IO_RES_ABORT
 *            (stop, delete, or the process dying); once none is held, the
 *            thread returns
 *   leave:   (a hand-over to a new server) leave_fd becomes readable: the
 *            thread runs the requests it has, submits their commits and
 *            parks with its ring open; the process then exits, which the
 *            driver takes as the server's death (the kernel's own path for
 *            a kill: each thread's io_uring requests cancelled in its
 *            do_exit, then the rings closed): the device waits for the
 *            next one (USER_RECOVERY); what came after, unread, is sent to
 *            it again (REISSUE). It closed its ring itself, before: on
 *            6.12 the ring's exit work and the thread's exit then cancelled
 *            the driver's commands side by side, and one was completed
 *            twice (ci9, v44: __put_task_struct's warning in the thread's
 *            do_exit, then kernel BUG at mm/slub.c:547 in
 *            io_ring_exit_work: a panic)
 *
 * Copy modes: by default (UBLK_COPY_KERNEL) the driver copies a write's
 * bytes into the tag's buffer before the CQE and a read's bytes out of it
 * after the commit, so reads decode straight into the buffer the kernel
 * copies from. With UBLK_F_USER_COPY the driver does not touch the buffer
 * and the thread moves the bytes itself with pread/pwrite on /dev/ublkcN
 * at the tag's offset: the same one copy, plus a system call. As the
 * thread then holds a request's bytes only while it runs it, and runs one
 * at a time, the queue has one buffer for all its tags (buf_of()): max_io
 * bytes a queue instead of depth x max_io, which is why `serve --swap`
 * prefers it (UBLK_COPY_LEAST_MEMORY).
 *
 * The requests of one CQE batch are run in order and their commits are
 * submitted together with the wait for the next batch (one system call
 * per batch). A write of several clusters is spread over the device's
 * worker threads (--threads) by uzram_write itself.
 *
 * The threads are not pinned to their queues' CPUs (ublksrv pins them):
 * measured on swap (issue 30, BENCHMARKS.md "Write fast or pin the
 * queues?"), pinning won nothing beyond the host's noise, and may lose
 * where the workload leaves a CPU free (the sequential 2x-RAM hog: an
 * unpinned queue thread decodes there beside it).
 *
 * Buffers go back when idle: a tag's buffer becomes resident as far as its
 * largest request reached (up to max_io, 256 KiB), and a queue that once
 * served large writes would keep depth x max_io. So when a queue has had
 * no request for IDLE_MS, the pages of every buffer that went past its
 * first KEEP bytes are given back (the next request faults them in), and
 * the thread then sleeps with no timeout until the next request. Under
 * mlockall the kernel refuses MADV_DONTNEED, so the range would be
 * unlocked, dropped and locked again on fault.
 *
 * But not for swap (ublk_opts.resident_buffers, `uzram serve --swap`):
 * there the buffers are made resident before the first request and stay
 * so (one of max_io per queue with user copy, swap's default). A queue
 * thread that faults in its buffer allocates while the kernel is short of
 * memory and waits on its own device, and munlock() takes the mmap lock
 * for writing, which the server's refill thread may hold for reading in a
 * fault that waits in reclaim for this very queue: a queue thread so
 * waited for ever (v32 on 6.12, make test of 2026-12-04).
 */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ublk_impl.h"

#define IDLE_MS 1000
#define LEAVE_DATA UINT64_MAX /* user_data of the poll on leave_fd */
#define KEEP    (16u << 10)

/* Give back the pages of tag buffers that went past KEEP. */
/* The buffers: one per tag, or one for all with user copy. */
static unsigned nbufs(const struct ublk_queue *q)
{
	return q->user_copy ? 1 : q->depth;
}

static unsigned buf_of(const struct ublk_queue *q, unsigned tag)
{
	return q->user_copy ? 0 : tag;
}

static void queue_release(struct ublk_queue *q)
{
	for (unsigned b = 0; b < nbufs(q); b++) {
		char *p = q->buf + (size_t)b * q->max_io + KEEP;
		size_t len = q->touched[b] - KEEP;

		if (q->touched[b] <= KEEP)
			continue;
		q->touched[b] = KEEP;
		if (!madvise(p, len, MADV_DONTNEED) || errno != EINVAL)
			continue;
		if (munlock(p, len) == 0) {
			madvise(p, len, MADV_DONTNEED);
			mlock2(p, len, MLOCK_ONFAULT);
		}
	}
	q->idle_released = true;
}

static void queue_prep(struct ublk_queue *q, unsigned tag, unsigned op,
		       int result)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct ublksrv_io_cmd *cmd;

	/* the ring has depth entries and a tag has one command at a time */
	assert(sqe);
	memset(sqe, 0, sizeof *sqe);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = 0; /* q->cdev, registered */
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->cmd_op = op;
	sqe->user_data = tag;
	cmd = (struct ublksrv_io_cmd *)sqe->cmd;
	cmd->q_id = (uint16_t)q->id;
	cmd->tag = (uint16_t)tag;
	cmd->result = result;
	cmd->addr = q->user_copy ? 0 :
		    (uint64_t)(uintptr_t)(q->buf + (size_t)buf_of(q, tag) * q->max_io);
}

/* Run the request at tag on the device: bytes done, or a negative errno. */
static int queue_run(struct ublk_queue *q, unsigned tag)
{
	const struct ublksrv_io_desc *d = &q->desc[tag];
	uint64_t off = d->start_sector << 9;
	size_t len = (size_t)d->nr_sectors << 9;
	unsigned b = buf_of(q, tag);
	char *buf = q->buf + (size_t)b * q->max_io;
	off_t pos = (off_t)uz_ublk_user_copy_pos(q->id, tag);
	unsigned flags = ublksrv_get_flags(d);
	ssize_t n;
	int r;

	q->idle_released = false;
	switch (ublksrv_get_op(d)) {
	case UBLK_IO_OP_READ:
		if (len > q->max_io)
			return -EIO;
		if (len > q->touched[b])
			q->touched[b] = (uint32_t)len;
		r = uzram_read(q->dev, buf, len, off);
		if (r < 0)
			return r;
		if (q->user_copy) {
			n = pwrite(q->cdev, buf, len, pos);
			if (n != (ssize_t)len)
				return n < 0 ? -errno : -EIO;
		}
		return (int)len;
	case UBLK_IO_OP_WRITE:
		if (len > q->max_io)
			return -EIO;
		if (len > q->touched[b])
			q->touched[b] = (uint32_t)len;
		if (q->user_copy) {
			n = pread(q->cdev, buf, len, pos);
			if (n != (ssize_t)len)
				return n < 0 ? -errno : -EIO;
		}
		/* FUA: a write is in the device once uzram_write returns */
		r = uzram_write(q->dev, buf, len, off);
		return r < 0 ? r : (int)len;
	case UBLK_IO_OP_FLUSH:
		return 0; /* nothing is cached above the device */
	case UBLK_IO_OP_DISCARD:
		return uzram_discard(q->dev, len, off);
	case UBLK_IO_OP_WRITE_ZEROES:
		return uzram_write_zeroes(q->dev, len, off,
					  flags & UBLK_IO_F_NOUNMAP ?
					  UZRAM_ZERO_NO_HOLE : 0);
	default:
		return -EOPNOTSUPP;
	}
}

static void queue_ready(struct ublk_queue *q, int err, const char *what)
{
	pthread_mutex_lock(&q->lock);
	q->err = err;
	q->what = what;
	q->ready = true;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->lock);
}

/* Map the descriptors, make the buffers and the ring; 0 or -errno. */
static int queue_setup(struct ublk_queue *q)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p;
	int r;

	q->desc_len = (q->depth * sizeof *q->desc + page - 1) / page * page;
	p = mmap(NULL, q->desc_len, PROT_READ, MAP_SHARED | MAP_POPULATE,
		 q->cdev, (off_t)uz_ublk_desc_pos(q->id, page));
	if (p == MAP_FAILED) {
		q->what = "mmap of the descriptors";
		return -errno;
	}
	q->desc = p;
	/* touched only where requests land: unused tags cost no memory */
	p = mmap(NULL, (size_t)nbufs(q) * q->max_io, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		q->what = "the buffers";
		return -errno;
	}
	q->buf = p;
	q->touched = calloc(nbufs(q), sizeof *q->touched);
	if (!q->touched) {
		q->what = "the buffers";
		return -ENOMEM;
	}
	if (q->resident) {
		/* written, not only read: a read maps the shared zero page */
		memset(q->buf, 0, (size_t)nbufs(q) * q->max_io);
		for (unsigned b = 0; b < nbufs(q); b++)
			q->touched[b] = (uint32_t)q->max_io;
	}
	/* the codec contexts too (zstd at level 3: 186 KiB, malloc'ed) */
	r = uzram_thread_prepare(q->dev);
	if (r < 0) {
		q->what = "the codec contexts";
		return r;
	}
	/*
	 * One thread submits and reaps: the driver's completions run as task
	 * work when the thread waits for them, with no interrupt to deliver
	 * them (DEFER_TASKRUN, 6.1); older kernels get a plain ring.
	 */
	r = io_uring_queue_init(q->depth + 1, &q->ring,
				IORING_SETUP_SINGLE_ISSUER |
				IORING_SETUP_DEFER_TASKRUN);
	if (r == -EINVAL)
		r = io_uring_queue_init(q->depth + 1, &q->ring, 0);
	if (r < 0) {
		q->what = "io_uring_queue_init";
		return r;
	}
	r = io_uring_register_files(&q->ring, &q->cdev, 1);
	if (r < 0) {
		q->what = "io_uring_register_files";
		io_uring_queue_exit(&q->ring);
		return r;
	}
	return 0;
}

static void queue_unmap(struct ublk_queue *q)
{
	if (q->buf)
		munmap(q->buf, (size_t)nbufs(q) * q->max_io);
	if (q->desc)
		munmap((void *)(uintptr_t)q->desc, q->desc_len);
	free(q->touched);
	q->buf = NULL;
	q->desc = NULL;
	q->touched = NULL;
}

/*
 * Submit and wait for a CQE, at most IDLE_MS; at the time limit, give the
 * buffers back (the loop then waits with no limit). As
 * io_uring_submit_and_wait's result.
 */
static int queue_wait_idle(struct ublk_queue *q)
{
	struct __kernel_timespec ts = { .tv_sec = IDLE_MS / 1000,
					.tv_nsec = (IDLE_MS % 1000) * 1000000L };
	struct io_uring_cqe *cqe;
	int r = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts, NULL);

	if (r == -ETIME) {
		queue_release(q);
		return 0;
	}
	return r < 0 ? r : 0;
}

static void *queue_main(void *arg)
{
	struct ublk_queue *q = arg;
	struct io_uring_cqe *cqe;
	unsigned held, head, seen;
	bool leaving = false;
	int r;

	r = queue_setup(q);
	if (r < 0) {
		queue_unmap(q);
		queue_ready(q, r, q->what);
		return NULL;
	}
	for (unsigned tag = 0; tag < q->depth; tag++)
		queue_prep(q, tag, q->op_fetch, 0);
	if (q->leave_fd >= 0) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

		io_uring_prep_poll_add(sqe, q->leave_fd, POLLIN);
		sqe->user_data = LEAVE_DATA;
	}
	r = io_uring_submit(&q->ring);
	if (r != (int)q->depth + (q->leave_fd >= 0)) {
		/* the driver holds what it took; the ring's end aborts them */
		io_uring_queue_exit(&q->ring);
		queue_unmap(q);
		queue_ready(q, r < 0 ? r : -EIO, "the fetch commands");
		return NULL;
	}
	queue_ready(q, 0, NULL);
	held = q->depth;
	while (held > 0 && !leaving) {
		if (q->idle_released || q->resident)
			r = io_uring_submit_and_wait(&q->ring, 1);
		else
			r = queue_wait_idle(q);
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
			fprintf(stderr, "ublk queue %u: io_uring: %s\n", q->id,
				strerror(-r));
			break;
		}
		seen = 0;
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			unsigned tag = (unsigned)cqe->user_data;

			seen++;
			if (cqe->user_data == LEAVE_DATA) {
				leaving = true;
				continue;
			}
			held--;
			if (cqe->res != UBLK_IO_RES_OK || tag >= q->depth)
				continue; /* aborted: the queue is going away */
			queue_prep(q, tag, q->op_commit,
				   queue_run(q, tag));
			held++;
		}
		io_uring_cq_advance(&q->ring, seen);
	}
	if (leaving) {
		/* the last commits: the driver ends their requests inside
		 * the submit; then park, ring open, until the process exits */
		(void)io_uring_submit(&q->ring);
		pthread_mutex_lock(&q->lock);
		q->parked = true;
		pthread_cond_broadcast(&q->cv);
		for (;;)
			pthread_cond_wait(&q->cv, &q->lock);
	}
	io_uring_queue_exit(&q->ring);
	queue_unmap(q);
	pthread_mutex_lock(&q->lock);
	q->parked = true;       /* for queue_wait_parked(): nothing held */
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int queue_start(struct ublk_queue *q)
{
	char name[16];
	int r;

	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->ready = false;
	q->parked = false;
	r = pthread_create(&q->thread, NULL, queue_main, q);
	if (r) {
		q->what = "pthread_create";
		return -r;
	}
	/* a name for ps and top (15 bytes at most); a failure changes nothing */
	snprintf(name, sizeof name, "uzram-ublk-q%u", q->id % 1000);
	(void)pthread_setname_np(q->thread, name);
	pthread_mutex_lock(&q->lock);
	while (!q->ready)
		pthread_cond_wait(&q->cv, &q->lock);
	r = q->err;
	pthread_mutex_unlock(&q->lock);
	if (r < 0)
		pthread_join(q->thread, NULL);
	return r;
}

int queue_wait_parked(struct ublk_queue *q, int ms)
{
	struct timespec until;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&q->lock);
	while (!q->parked && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&q->cv, &q->lock, &until);
	r = q->parked ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&q->lock);
	return r;
}

void queue_join(struct ublk_queue *q)
{
	pthread_join(q->thread, NULL);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cv);
}
