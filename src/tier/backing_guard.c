// SPDX-License-Identifier: MIT
/*
 * backing_guard.c - a backing file on its blocks guarded while the tier
 * uses it, as the kernel guards a swap file.
 *
 * The tier writes such a file's blocks on the device under it
 * (backing_blocks.c), so whoever writes, truncates, punches or
 * defragments the file meanwhile breaks the tier, or hands its blocks to
 * another file. The kernel marks a swap file S_SWAPFILE against all of
 * that; the nearest a program has is the immutable flag (chattr +i,
 * FS_IMMUTABLE_FL), which ext4 and XFS both keep: no open for writing,
 * truncate, fallocate, rename or unlink, and neither e4defrag
 * (EXT4_IOC_MOVE_EXT) nor xfs_fsr (XFS_IOC_SWAPEXT) moves an immutable
 * file's blocks. Setting it needs CAP_LINUX_IMMUTABLE; without it (a
 * container's root) the file goes unguarded, as before there was a guard.
 *
 * Unlike S_SWAPFILE, the flag is on disk: a server that dies leaves it.
 * The extended attribute GUARD_XATTR, set before the flag, tells a file a
 * server guarded from one a user made immutable, so that the next server
 * clears the flag of the first (blockmap_take_guarded(); backing.c then
 * takes the file over if it is all unwritten, as it takes any a dead
 * server left) and refuses the second. The order at the start: xattr, then flag; at the end: flag
 * off, then xattr off; so a file with the flag and without the attribute
 * was never ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tier.h"
#include "base/base.h"

#define GUARD_XATTR "user.uzram.backing"
#define GUARD_VALUE "blocks"

/* fd's inode flags with FS_IMMUTABLE_FL set or cleared: 0, or -errno. */
static int set_immutable(int fd, bool on)
{
	int flags;

	if (ioctl(fd, FS_IOC_GETFLAGS, &flags))
		return -errno;
	flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
	return ioctl(fd, FS_IOC_SETFLAGS, &flags) ? -errno : 0;
}

static bool is_immutable(int fd)
{
	int flags;

	return !ioctl(fd, FS_IOC_GETFLAGS, &flags) && (flags & FS_IMMUTABLE_FL);
}

static bool guarded_by_us(int fd)
{
	char v[sizeof GUARD_VALUE];
	ssize_t n = fgetxattr(fd, GUARD_XATTR, v, sizeof v);

	return n == (ssize_t)strlen(GUARD_VALUE) &&
	       !memcmp(v, GUARD_VALUE, (size_t)n);
}

bool blockmap_guard(int fd)
{
	if (fsetxattr(fd, GUARD_XATTR, GUARD_VALUE, strlen(GUARD_VALUE), 0))
		return false;
	if (!set_immutable(fd, true))
		return true;
	(void)fremovexattr(fd, GUARD_XATTR);
	return false;
}

void blockmap_unguard(int fd)
{
	if (!set_immutable(fd, false))
		(void)fremovexattr(fd, GUARD_XATTR);
}

int blockmap_take_guarded(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0 || !is_immutable(fd)) {
		ret = uzram_set_error(-EPERM, "backing store %s: cannot open "
				      "it for writing: %s", path,
				      strerror(EPERM));
		goto out;
	}
	if (!guarded_by_us(fd)) {
		ret = uzram_set_error(-EPERM, "backing file %s is immutable "
				      "(chattr +i), and not by a uzram "
				      "server: left as it is", path);
		goto out;
	}
	ret = set_immutable(fd, false);
	if (ret) {
		ret = uzram_set_error(ret, "backing file %s: a server that "
				      "ended left it immutable, and its flag "
				      "cannot be cleared: %s", path,
				      strerror(-ret));
		goto out;
	}
	(void)fremovexattr(fd, GUARD_XATTR);
	ret = open(path, O_RDWR | O_CLOEXEC);
	if (ret < 0)
		ret = uzram_set_error(-errno, "backing store %s: cannot open "
				      "it for writing: %s", path,
				      strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	return ret;
}
