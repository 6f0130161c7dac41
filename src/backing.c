/*
 * backing.c - the targets a tier writes to, behind struct backing_ops:
 *
 *   file, block device   pread/pwrite on one descriptor; a freed range is
 *                        punched out (a hole in a file, a discard on a
 *                        device that supports it)
 *   nbd:// nbd+unix://   libnbd's synchronous calls on one handle, which
 *                        libnbd makes safe to share between threads; a
 *                        freed range is trimmed if the server allows it
 *
 * A regular file is created sparse and grows only as far as segments are
 * used (tier.c takes the lowest free segment first); it must be empty when
 * opened, because the tier owns every byte of it, and is truncated to
 * nothing at close. Short transfers are retried; a read past the end of
 * what was written is corruption (-EIO).
 */
#include <errno.h>
#include <fcntl.h>
#include <libnbd.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "error.h"

struct backing_fd {
	struct backing b;
	int fd;
	int regular;
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

int backing_pwrite(struct backing *b, const void *buf, size_t len,
		   uint64_t off)
{
	if (fault(&b->fail_writes))
		return -EIO;
	return b->ops->pwrite(b, buf, len, off);
}

static int fd_pread(struct backing *b, void *buf, size_t len, uint64_t off)
{
	struct backing_fd *f = (struct backing_fd *)b;
	char *p = buf;

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

	/* Only space is at stake: a failure leaves the bytes allocated. */
	(void)fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)off, (off_t)len);
}

static void fd_close(struct backing *b)
{
	struct backing_fd *f = (struct backing_fd *)b;

	if (f->regular)
		(void)ftruncate(f->fd, 0);
	close(f->fd);
	free(f);
}

static const struct backing_ops fd_ops = {
	fd_pread, fd_pwrite, fd_discard, fd_close,
};

static int open_path(const char *path, uint64_t want, struct backing **out)
{
	struct backing_fd *f;
	struct stat sb;
	uint64_t size = 0;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return uzram_set_error(-errno, "backing store %s: cannot open "
				       "it for writing: %s", path,
				       strerror(errno));
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
	} else if (sb.st_size != 0) {
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
	f->b.ops = &fd_ops;
	f->b.kind = f->regular ? "file" : "block device";
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
	nbdb_pread, nbdb_pwrite, nbdb_discard, nbdb_close,
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

int backing_open(const char *target, uint64_t want, struct backing **out)
{
	if (!strncmp(target, "nbd://", 6) || !strncmp(target, "nbd+unix://", 11) ||
	    !strncmp(target, "nbds://", 7) || !strncmp(target, "nbds+unix://", 12))
		return open_nbd(target, out);
	return open_path(target, want, out);
}

void backing_close(struct backing *b)
{
	if (b)
		b->ops->close(b);
}
