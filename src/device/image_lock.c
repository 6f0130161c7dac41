// SPDX-License-Identifier: MIT
/*
 * image_lock.c - one device per image.
 *
 * Two devices on one image lose data without a word: each saves its own
 * contents over the other's when it closes. So a device holds a lock on
 * its image for as long as it has it (from uzram_open() with cfg.image,
 * or uzram_image_claim(), to uzram_close()), and uzram_save() to any other
 * path holds that path's lock for the length of the save. Whoever finds
 * the lock held fails with -EBUSY.
 *
 * The lock cannot live on the image's own inode: a save writes a new file
 * and rename(2)s it over the path, and a lock on the old inode says
 * nothing about the new one. It lives on a file beside it, PATH.lock,
 * which no save replaces:
 *
 *     d.img        the image (a new inode after every save)
 *     d.img.lock   F_OFD_SETLK write lock held by the device; holds the
 *                  holder's pid, in decimal, for the message of the loser
 *
 * An open file description lock (not a POSIX record lock) so that two
 * devices of one process conflict too, and that closing some other
 * descriptor of the file does not drop it. The kernel drops it when the
 * holder dies, so a lock file left by a kill -9 is free to take.
 *
 * The holder removes the file when it lets go, while still holding the
 * lock. A taker can therefore lock a file that was just unlinked: after
 * locking it checks that the path still names the inode it locked, and
 * starts again if not. A path whose directory nobody may write (a
 * read-only mount, a directory of another user's) cannot be replaced by
 * a save, so there the image is opened without a lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uzram.h"
#include "base/base.h"
#include "core/core.h"
#include "device.h"

struct image_lock {
	int fd;
	dev_t dev;
	ino_t ino;
	char path[]; /* the lock file's */
};

static int lock_path(char *buf, size_t n, const char *path)
{
	if ((size_t)snprintf(buf, n, "%s.lock", path) >= n)
		return uzram_set_error(-ENAMETOOLONG, "path too long: %s",
				       path);
	return 0;
}

/* Whether the directory that holds path can be written by anyone we are. */
static bool dir_writable(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash)
		return access(".", W_OK) == 0;
	if ((size_t)(slash - path) >= sizeof dir)
		return true;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash == path ? 1 : slash - path] = '\0';
	if (slash == path)
		dir[0] = '/';
	return access(dir, W_OK) == 0;
}

/* The message for a lock held by another: the pid it wrote, where it can. */
static int held(int fd, const char *path, const char *what)
{
	char buf[24] = "";
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	long pid = n > 0 ? strtol(buf, NULL, 10) : 0;

	if (pid <= 0)
		return uzram_set_error(-EBUSY, "%s: image %s is in use by "
				       "another device", what, path);
	return uzram_set_error(-EBUSY, "%s: image %s is in use by %s %ld "
			       "(it holds %s.lock)", what, path,
			       pid == (long)getpid() ? "another device of "
			       "this process, pid" : "pid", pid, path);
}

int image_lock_acquire(const char *path, const char *what,
		       struct image_lock **lockp)
{
	char lp[PATH_MAX];
	int ret = lock_path(lp, sizeof lp, path);

	*lockp = NULL;
	if (ret)
		return ret;
	/* A loop only while holders let go under us: bounded, to be safe. */
	for (int tries = 0; tries < 1000; tries++) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		struct stat fs, ps;
		struct image_lock *l;
		char pid[24];
		int fd, len;

		fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 && (errno == EROFS ||
			       (errno == EACCES && !dir_writable(path))))
			return 0;
		if (fd < 0)
			return uzram_set_error(-errno, "%s: cannot create the "
					       "lock file %s of image %s: %s",
					       what, lp, path, strerror(errno));
		if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
			ret = errno == EAGAIN || errno == EACCES ?
				held(fd, path, what) :
				uzram_set_error(-errno, "%s: cannot lock %s: "
						"%s", what, lp,
						strerror(errno));
			close(fd);
			return ret;
		}
		if (fstat(fd, &fs) < 0 || stat(lp, &ps) < 0 ||
		    fs.st_dev != ps.st_dev || fs.st_ino != ps.st_ino) {
			close(fd); /* its holder removed it: take the new one */
			continue;
		}
		len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
		if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)len, 0) !=
		    len) {
			ret = uzram_set_error(-errno, "%s: cannot write the "
					      "lock file %s: %s", what, lp,
					      strerror(errno));
			unlink(lp);
			close(fd);
			return ret;
		}
		l = malloc(sizeof *l + strlen(lp) + 1);
		if (!l) {
			unlink(lp);
			close(fd);
			return uzram_set_error(-ENOMEM, "%s: out of memory",
					       what);
		}
		l->fd = fd;
		l->dev = fs.st_dev;
		l->ino = fs.st_ino;
		strcpy(l->path, lp);
		*lockp = l;
		return 0;
	}
	return uzram_set_error(-EBUSY, "%s: the lock file %s of image %s "
			       "keeps changing", what, lp, path);
}

bool image_lock_covers(const struct image_lock *lock, const char *path)
{
	char lp[PATH_MAX];
	struct stat st;

	return lock && !lock_path(lp, sizeof lp, path) && stat(lp, &st) == 0 &&
	       st.st_dev == lock->dev && st.st_ino == lock->ino;
}

void image_lock_release(struct image_lock *lock)
{
	if (!lock)
		return;
	unlink(lock->path); /* first, still holding it: see the top */
	close(lock->fd);
	free(lock);
}

void image_lock_give(struct uzram *dev, struct image_lock *lock)
{
	atomic_store(&dev->image_lock, lock);
}

UZRAM_API int uzram_image_claim(struct uzram *dev, const char *path)
{
	struct image_lock *lock, *none = NULL;
	int ret;

	if (!dev || !path)
		return uzram_set_error(-EINVAL, "claim: NULL %s",
				       dev ? "path" : "device");
	if (image_lock_covers(atomic_load(&dev->image_lock), path))
		return 0;
	if (atomic_load(&dev->image_lock))
		return uzram_set_error(-EEXIST, "claim: the device holds "
				       "another image already, not %s", path);
	ret = image_lock_acquire(path, "claim", &lock);
	if (ret || !lock)
		return ret;
	if (!atomic_compare_exchange_strong(&dev->image_lock, &none, lock)) {
		image_lock_release(lock);
		return uzram_set_error(-EEXIST, "claim: the device holds "
				       "another image already, not %s", path);
	}
	return 0;
}
