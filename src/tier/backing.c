// SPDX-License-Identifier: MIT
/*
 * backing.c - the targets a tier writes to, behind struct backing_ops:
 *
 *   file, block device   pread/pwrite on one descriptor; a freed range is
 *                        punched out (a hole in a file, a discard on a
 *                        device that supports it); asynchronous writes
 *                        go to a pool of BACKING_WRITERS threads
 *   file on its blocks   the same, but the file allocated whole at open
 *                        and its bytes moved on the device under it
 *                        (backing_blocks.c); nothing is punched out
 *   nbd:// nbd+unix://   libnbd's synchronous calls on one handle, which
 *                        libnbd makes safe to share between threads, and
 *                        its aio calls for asynchronous writes; a freed
 *                        range is trimmed if the server allows it
 *
 * A regular file is created sparse and grows only as far as segments are
 * used (tier.c takes the lowest free segment first); it must be empty when
 * opened, because the tier owns every byte of it, and is truncated to
 * nothing at close. On its blocks, one that a dead server left (it reads
 * as zeros: blockmap_left_over(); immutable, if it was guarded:
 * blockmap_take_guarded()) is taken over. Short transfers are
 * retried; a read past the end of what was written is corruption (-EIO).
 *
 * The writer pool: submit appends to a queue under pool.lock and signals
 * `work`; a writer takes the head, writes it with no lock held, stores the
 * result and broadcasts `done`, on which backing_wait() sleeps. Writers
 * start at the first submit (a device that never writes back has none)
 * and block every signal, as the tier's thread does.
 *
 * NBD: a submit is nbd_aio_pwrite(), which queues the request on the
 * handle and returns its cookie; the wait polls the handle until
 * nbd_aio_command_completed() says the reply came. A synchronous read of
 * another thread may run the handle meanwhile and take that reply in: the
 * wait finds the command completed all the same, and its poll has a
 * timeout so that it never sleeps on a reply already taken. A connection
 * that dies fails every command in flight (libnbd retires them with an
 * error), so the wait returns -EIO.
 */
#include <errno.h>
#include <fcntl.h>
#include <libnbd.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier.h"
#include "base/base.h"

#define BACKING_WRITERS 4
#define NBD_POLL_MS 10

struct writer_pool {
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	struct backing_aio *head, *tail;
	pthread_t th[BACKING_WRITERS];
	unsigned n;                     /* writers started */
	bool stop;
};

struct backing_fd {
	struct backing b;
	int fd;
	int regular;
	struct blockmap *map;           /* UZRAM_BACKING_BLOCKS: or NULL */
	struct writer_pool pool;
};

struct backing_nbd {
	struct backing b;
	struct nbd_handle *nbd;
	int can_trim;
};

static int fault(_Atomic int *left)
{
	int n = atomic_load_explicit(left, memory_order_relaxed);

	while (n > 0)
		if (atomic_compare_exchange_weak(left, &n, n - 1))
			return 1;
	return 0;
}

int backing_pread(struct backing *b, void *buf, size_t len, uint64_t off)
{
	if (fault(&b->fail_reads))
		return -EIO;
	return b->ops->pread(b, buf, len, off);
}

static int write_fault(struct backing *b)
{
	return !fault(&b->pass_writes) && fault(&b->fail_writes);
}

int backing_pwrite(struct backing *b, const void *buf, size_t len,
		   uint64_t off)
{
	if (write_fault(b))
		return -EIO;
	return b->ops->pwrite(b, buf, len, off);
}

int backing_submit(struct backing *b, struct backing_aio *io)
{
	io->done = false;
	io->ret = 0;
	io->failed = write_fault(b);
	return io->failed ? 0 : b->ops->submit(b, io);
}

int backing_wait(struct backing *b, struct backing_aio *io)
{
	return io->failed ? -EIO : b->ops->wait(b, io);
}

static int fd_pread(struct backing *b, void *buf, size_t len, uint64_t off)
{
	struct backing_fd *f = (struct backing_fd *)b;
	char *p = buf;

	if (f->map)
		return blockmap_pread(f->map, buf, len, off);
	while (len) {
		ssize_t r = pread(f->fd, p, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int fd_pwrite(struct backing *b, const void *buf, size_t len,
		     uint64_t off)
{
	struct backing_fd *f = (struct backing_fd *)b;
	const char *p = buf;

	if (f->map)
		return blockmap_pwrite(f->map, buf, len, off);
	while (len) {
		ssize_t r = pwrite(f->fd, p, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == ENOSPC || errno == EDQUOT ? -ENOSPC
								  : -EIO;
		if (r == 0)
			return -EIO;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static void fd_discard(struct backing *b, uint64_t len, uint64_t off)
{
	struct backing_fd *f = (struct backing_fd *)b;

	/* the file's blocks must stay its own while the tier writes there */
	if (f->map)
		return;
	/* Only space is at stake: a failure leaves the bytes allocated. */
	(void)fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)off, (off_t)len);
}

static void *writer_main(void *arg)
{
	struct backing_fd *f = arg;
	struct writer_pool *p = &f->pool;
	struct backing_aio *io;

	/* without it, the first write makes it (and fails if it cannot) */
	(void)backing_thread_prepare(&f->b);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->work, &p->lock);
		if (!p->head)
			break;
		io = p->head;
		p->head = io->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);
		io->ret = fd_pwrite(&f->b, io->buf, io->len, io->off);
		pthread_mutex_lock(&p->lock);
		io->done = true;
		pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Start the writers if none runs yet; under p->lock. */
static int pool_start(struct backing_fd *f)
{
	struct writer_pool *p = &f->pool;
	sigset_t all, old;
	int ret = 0;

	if (p->n)
		return 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (p->n < BACKING_WRITERS) {
		ret = pthread_create(&p->th[p->n], NULL, writer_main, f);
		if (ret)
			break;
		p->n++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return p->n ? 0 : -ret;
}

static int fd_submit(struct backing *b, struct backing_aio *io)
{
	struct backing_fd *f = (struct backing_fd *)b;
	struct writer_pool *p = &f->pool;
	int ret;

	pthread_mutex_lock(&p->lock);
	ret = pool_start(f);
	if (!ret) {
		io->next = NULL;
		if (p->tail)
			p->tail->next = io;
		else
			p->head = io;
		p->tail = io;
		pthread_cond_signal(&p->work);
	}
	pthread_mutex_unlock(&p->lock);
	return ret;
}

static int fd_wait(struct backing *b, struct backing_aio *io)
{
	struct writer_pool *p = &((struct backing_fd *)b)->pool;

	pthread_mutex_lock(&p->lock);
	while (!io->done)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
	return io->ret;
}

static void fd_close(struct backing *b)
{
	struct backing_fd *f = (struct backing_fd *)b;
	struct writer_pool *p = &f->pool;

	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->n; i++)
		pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	blockmap_close(f->map);
	if (f->regular && ftruncate(f->fd, 0) < 0) {
		/* the file keeps bytes nobody will read: nothing to undo */
	}
	close(f->fd);
	free(f);
}

static const struct backing_ops fd_ops = {
	fd_pread, fd_pwrite, fd_discard, fd_submit, fd_wait, fd_close,
};

int backing_thread_prepare(struct backing *b)
{
	if (b->ops != &fd_ops || !((struct backing_fd *)b)->map)
		return 0;
	return blockmap_thread_prepare();
}

static int open_path(const char *path, uint64_t want, uint64_t flags,
		     struct backing **out)
{
	struct backing_fd *f;
	struct stat sb;
	uint64_t size = 0;
	int fd, ret;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EPERM && (flags & UZRAM_BACKING_BLOCKS))
		fd = blockmap_take_guarded(path);       /* a dead server's */
	else if (fd < 0)
		fd = uzram_set_error(-errno, "backing store %s: cannot open "
				     "it for writing: %s", path,
				     strerror(errno));
	if (fd < 0)
		return fd;
	if (fstat(fd, &sb) < 0)
		goto errno_out;
	if (S_ISBLK(sb.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &size) < 0)
			goto errno_out;
	} else if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return uzram_set_error(-EINVAL, "backing store %s is neither "
				       "a regular file nor a block device",
				       path);
	} else if (sb.st_size != 0 && (!(flags & UZRAM_BACKING_BLOCKS) ||
					!blockmap_left_over(fd, path) ||
					ftruncate(fd, 0) < 0)) {
		close(fd);
		return uzram_set_error(-EEXIST, "backing file %s is not empty "
				       "(%lld bytes); the tier would overwrite "
				       "it", path, (long long)sb.st_size);
	}
	f = calloc(1, sizeof *f);
	if (!f) {
		close(fd);
		return uzram_set_error(-ENOMEM, "backing store: out of memory");
	}
	f->fd = fd;
	f->regular = S_ISREG(sb.st_mode);
	pthread_mutex_init(&f->pool.lock, NULL);
	pthread_cond_init(&f->pool.work, NULL);
	pthread_cond_init(&f->pool.done, NULL);
	if (f->regular && (flags & UZRAM_BACKING_BLOCKS) &&
	    (ret = blockmap_open(fd, path, want, &f->map))) {
		f->map = NULL;
		fd_close(&f->b);        /* empties the file, closes fd */
		return ret;
	}
	f->b.ops = &fd_ops;
	/* a file on its blocks is for swap: its writers and their buffers
	 * are made now, not at the first write-back, under pressure */
	if (f->map) {
		pthread_mutex_lock(&f->pool.lock);
		ret = pool_start(f);
		pthread_mutex_unlock(&f->pool.lock);
		if (ret) {
			fd_close(&f->b);
			return uzram_set_error(ret, "backing store: cannot start "
					       "its writer threads");
		}
	}
	f->b.kind = f->map ? "file on its blocks" :
		    f->regular ? "file" : "block device";
	f->b.capacity = f->regular ? want : size;
	*out = &f->b;
	return 0;

errno_out:
	size = (uint64_t)errno;
	close(fd);
	return uzram_set_error(-(int)size, "backing store %s: %s", path,
			       strerror((int)size));
}

static int nbd_err(void)
{
	int e = nbd_get_errno();

	return e == ENOSPC ? -ENOSPC : -EIO;
}

static int nbdb_pread(struct backing *b, void *buf, size_t len, uint64_t off)
{
	struct backing_nbd *n = (struct backing_nbd *)b;

	return nbd_pread(n->nbd, buf, len, off, 0) < 0 ? -EIO : 0;
}

static int nbdb_pwrite(struct backing *b, const void *buf, size_t len,
		       uint64_t off)
{
	struct backing_nbd *n = (struct backing_nbd *)b;

	return nbd_pwrite(n->nbd, buf, len, off, 0) < 0 ? nbd_err() : 0;
}

static int nbdb_submit(struct backing *b, struct backing_aio *io)
{
	struct backing_nbd *n = (struct backing_nbd *)b;

	io->cookie = nbd_aio_pwrite(n->nbd, io->buf, io->len, io->off,
				    NBD_NULL_COMPLETION, 0);
	return io->cookie < 0 ? nbd_err() : 0;
}

static int nbdb_wait(struct backing *b, struct backing_aio *io)
{
	struct backing_nbd *n = (struct backing_nbd *)b;

	for (;;) {
		int r = nbd_aio_command_completed(n->nbd, (uint64_t)io->cookie);

		if (r == 1)
			return 0;
		if (r < 0)
			return nbd_err();
		if (nbd_poll(n->nbd, NBD_POLL_MS) < 0 &&
		    (nbd_aio_is_dead(n->nbd) || nbd_aio_is_closed(n->nbd)) &&
		    nbd_aio_command_completed(n->nbd, (uint64_t)io->cookie) == 0)
			return -EIO;   /* dead, and the command not retired */
	}
}

static void nbdb_discard(struct backing *b, uint64_t len, uint64_t off)
{
	struct backing_nbd *n = (struct backing_nbd *)b;

	if (n->can_trim)
		(void)nbd_trim(n->nbd, len, off, 0);
}

static void nbdb_close(struct backing *b)
{
	struct backing_nbd *n = (struct backing_nbd *)b;

	nbd_close(n->nbd);
	free(n);
}

static const struct backing_ops nbd_ops = {
	nbdb_pread, nbdb_pwrite, nbdb_discard, nbdb_submit, nbdb_wait,
	nbdb_close,
};

static int open_nbd(const char *uri, struct backing **out)
{
	struct backing_nbd *n = calloc(1, sizeof *n);
	int64_t size;
	int ret;

	if (!n)
		return uzram_set_error(-ENOMEM, "backing store: out of memory");
	n->nbd = nbd_create();
	if (!n->nbd) {
		free(n);
		return uzram_set_error(-ENOMEM, "backing store %s: %s", uri,
				       nbd_get_error());
	}
	if (nbd_connect_uri(n->nbd, uri) < 0) {
		ret = uzram_set_error(-EIO, "backing store %s: %s", uri,
				      nbd_get_error());
		goto fail;
	}
	if (nbd_is_read_only(n->nbd) == 1) {
		ret = uzram_set_error(-EROFS, "backing store %s is read-only",
				      uri);
		goto fail;
	}
	size = nbd_get_size(n->nbd);
	if (size <= 0) {
		ret = uzram_set_error(-EIO, "backing store %s: no size: %s",
				      uri, nbd_get_error());
		goto fail;
	}
	n->can_trim = nbd_can_trim(n->nbd) == 1;
	n->b.ops = &nbd_ops;
	n->b.kind = "nbd";
	n->b.capacity = (uint64_t)size;
	*out = &n->b;
	return 0;
fail:
	nbd_close(n->nbd);
	free(n);
	return ret;
}

int backing_open(const char *target, uint64_t want, uint64_t flags,
		 struct backing **out)
{
	if (!strncmp(target, "nbd://", 6) || !strncmp(target, "nbd+unix://", 11) ||
	    !strncmp(target, "nbds://", 7) || !strncmp(target, "nbds+unix://", 12))
		return open_nbd(target, out);
	return open_path(target, want, flags, out);
}

void backing_close(struct backing *b)
{
	if (b)
		b->ops->close(b);
}
