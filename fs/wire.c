// SPDX-License-Identifier: MIT
/*
 * wire.c - the bytes between libfuse and /dev/fuse, for what libfuse 3.14
 * (Debian 12's) does not pass on: FUSE_HANDLE_KILLPRIV_V2,
 * FUSE_DIRECT_IO_ALLOW_MMAP and FUSE_STATX.
 *
 * Why. Before each write and truncate the kernel asks the file system
 * whether the file has a security.capability (a GETXATTR), unless the
 * inode carries S_NOSEC; it sets S_NOSEC only on a super block with
 * SB_NOSEC, and FUSE gives its super block SB_NOSEC only when the file
 * system takes FUSE_HANDLE_KILLPRIV_V2 (Linux 5.11+). Then the kernel asks
 * once per file until its attributes are next refreshed (a setattr, a
 * getattr), and it no longer clears set-user-ID and set-group-ID bits
 * itself: it flags the requests on which the file system must
 * (FUSE_WRITE_KILL_SUIDGID on WRITE, FATTR_KILL_SUIDGID on SETATTR of the
 * size or owner, FUSE_OPEN_KILL_SUIDGID on OPEN and CREATE with O_TRUNC).
 * libfuse 3.14 knows none of it (3.17 does): it neither offers the flag
 * in its INIT reply nor hands WRITE's write_flags to the file system.
 *
 * How. libfuse's custom I/O (fuse_session_custom_io(), in 3.14) lets us
 * read and write /dev/fuse for it, on the same descriptor:
 *
 *   kernel --read()--> wire_read:   INIT: did the kernel offer the flag?
 *                                   WRITE: its write_flags, kept for this
 *                                   thread (the thread that reads a
 *                                   request also serves it, in our loop
 *                                   and in libfuse's)
 *   kernel <-writev()- wire_writev: the INIT reply: the flag added when
 *                                   the kernel offered it
 *
 * SETATTR's flag needs nothing of ours: FATTR_KILL_SUIDGID is bit 11,
 * which libfuse passes on as FUSE_SET_ATTR_KILL_SUID. OPEN and CREATE do
 * not come (the kernel opens without asking: fs->no_open; where it cannot,
 * O_TRUNC comes as a SETATTR since we do not take atomic O_TRUNC, and a
 * CREATE makes a new file, whose bits stay). What the file system then
 * does is in ops_file.c (kill_privs()). A kernel that does not offer the
 * flag sees the INIT reply unchanged, and clears the bits itself as before.
 *
 * FUSE_STATX (Linux 6.6+, protocol 7.39): a statx(2) that asks for
 * STATX_BTIME (stat(1) does) comes as a STATX rather than a GETATTR, and
 * the kernel gives the birth time it answers to the caller (and keeps it
 * for the next). libfuse 3.14 answers ENOSYS, after which the kernel asks
 * no more and statx has no btime, where tmpfs has one. So wire_read
 * answers STATX itself, from the node (node_statx()), and reads the next
 * request for libfuse: on a non-blocking /dev/fuse (reqloop.c) that may
 * be EAGAIN, which libfuse's receive takes as nothing yet.
 *
 * FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6+, in flags2) lets a file opened
 * with FOPEN_DIRECT_IO be mapped shared, and with it the kernel writes
 * back and drops the page cache of a direct write's range first, so what
 * other descriptors cached or mapped of the file stays right. So a
 * created file gets direct I/O only where the kernel took the flag
 * (ops_name.c's op_create says why it pays).
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uzfs_impl.h"

#ifndef FUSE_DIRECT_IO_ALLOW_MMAP /* Linux 6.6's FUSE_DIRECT_IO_RELAX */
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif
#define DIO_MMAP_FLAGS2 ((uint32_t)(FUSE_DIRECT_IO_ALLOW_MMAP >> 32))

/* The WRITE this thread is serving asked for the set-ID bits to go. */
static _Thread_local bool write_kills;

bool wire_write_kills(void)
{
	return write_kills;
}

static void inspect(struct uzfs *fs, const char *buf, size_t len)
{
	const struct fuse_in_header *h = (const void *)buf;
	const char *arg = buf + sizeof *h;
	size_t alen = len - sizeof *h;

	write_kills = false;
	if (h->opcode == FUSE_WRITE &&
	    alen >= offsetof(struct fuse_write_in, write_flags) + 4) {
		const struct fuse_write_in *w = (const void *)arg;

		write_kills = w->write_flags & FUSE_WRITE_KILL_SUIDGID;
	} else if (h->opcode == FUSE_INIT &&
		   alen >= offsetof(struct fuse_init_in, flags) + 4) {
		const struct fuse_init_in *in = (const void *)arg;

		atomic_store(&fs->init_unique, h->unique);
		atomic_store(&fs->kernel_killpriv, in->major == 7 &&
			     in->minor >= 33 &&
			     (in->flags & FUSE_HANDLE_KILLPRIV_V2));
		atomic_store(&fs->kernel_dio_mmap, in->major == 7 &&
			     (in->flags & FUSE_INIT_EXT) &&
			     alen >= offsetof(struct fuse_init_in, flags2) + 4 &&
			     (in->flags2 & DIO_MMAP_FLAGS2));
		atomic_store(&fs->init_pending, true);
	}
}

/* FUSE_STATX (protocol 7.39), for headers older than it */
#define WIRE_STATX 52
struct wire_sx_time {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};
struct wire_statx_out {
	uint64_t attr_valid;
	uint32_t attr_valid_nsec, flags;
	uint64_t spare[2];
	struct {
		uint32_t mask, blksize;
		uint64_t attributes;
		uint32_t nlink, uid, gid;
		uint16_t mode, spare0;
		uint64_t ino, size, blocks, attributes_mask;
		struct wire_sx_time atime, btime, ctime, mtime;
		uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
		uint64_t spare2[14];
	} stat;
};

static struct wire_sx_time sx_time(struct timespec ts)
{
	return (struct wire_sx_time){ .tv_sec = ts.tv_sec,
				      .tv_nsec = (uint32_t)ts.tv_nsec };
}

/* Answer the STATX request h (a node's attributes, as GETATTR's, and its
 * birth time) on fd. */
static void statx_reply(struct uzfs *fs, int fd, const struct fuse_in_header *h)
{
	struct fuse_out_header oh = { .len = sizeof oh + sizeof(struct wire_statx_out),
				      .unique = h->unique };
	struct wire_statx_out out = { .attr_valid = (uint64_t)ENTRY_TIMEOUT };
	struct node *n = node_of(fs, h->nodeid);
	struct timespec btime;
	struct iovec iov[2] = { { &oh, sizeof oh }, { &out, sizeof out } };
	struct stat st;

	pthread_rwlock_rdlock(&n->lock);
	node_fill_attr(fs, n, &st);
	btime = n->btime;
	pthread_rwlock_unlock(&n->lock);
	out.stat.mask = STATX_BASIC_STATS | STATX_BTIME;
	out.stat.blksize = (uint32_t)st.st_blksize;
	out.stat.nlink = (uint32_t)st.st_nlink;
	out.stat.uid = st.st_uid;
	out.stat.gid = st.st_gid;
	out.stat.mode = (uint16_t)st.st_mode;
	out.stat.ino = st.st_ino;
	out.stat.size = (uint64_t)st.st_size;
	out.stat.blocks = (uint64_t)st.st_blocks;
	out.stat.atime = sx_time(st.st_atim);
	out.stat.btime = sx_time(btime);
	out.stat.ctime = sx_time(st.st_ctim);
	out.stat.mtime = sx_time(st.st_mtim);
	out.stat.rdev_major = major(st.st_rdev);
	out.stat.rdev_minor = minor(st.st_rdev);
	if (writev(fd, iov, 2) < 0) {
		/* ENOENT: the request was interrupted; nothing to answer */
	}
}

static ssize_t wire_read(int fd, void *buf, size_t len, void *userdata)
{
	for (;;) {
		ssize_t r = read(fd, buf, len);
		const struct fuse_in_header *h = buf;

		if (r < (ssize_t)sizeof *h)
			return r;
		if (h->opcode != WIRE_STATX) {
			inspect(userdata, buf, (size_t)r);
			return r;
		}
		statx_reply(userdata, fd, h);
	}
}

/* The INIT reply in iov (the header, then fuse_init_out) with the flags
 * the kernel offered added, into out and arg; false when iov is not that
 * reply or nothing is added. */
static bool init_reply(struct uzfs *fs, const struct iovec *iov, int count,
		       struct iovec *out, struct fuse_init_out *arg)
{
	const struct fuse_out_header *h = iov[0].iov_base;
	bool killpriv = atomic_load(&fs->kernel_killpriv);
	bool dio = atomic_load(&fs->kernel_dio_mmap);

	if (!atomic_load(&fs->init_pending) || count != 2 ||
	    iov[0].iov_len < sizeof *h ||
	    h->unique != atomic_load(&fs->init_unique))
		return false;
	atomic_store(&fs->init_pending, false);
	if (h->error || iov[1].iov_len > sizeof *arg ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags) + 4)
		return false;
	dio = dio && iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + 4;
	memcpy(arg, iov[1].iov_base, iov[1].iov_len);
	if (arg->major != 7 || !(killpriv || dio))
		return false; /* libfuse waits for the INIT of 7.x */
	if (killpriv)
		arg->flags |= FUSE_HANDLE_KILLPRIV_V2;
	if (dio) {
		arg->flags |= FUSE_INIT_EXT;
		arg->flags2 |= DIO_MMAP_FLAGS2;
	}
	out[0] = iov[0];
	out[1] = (struct iovec){ .iov_base = arg, .iov_len = iov[1].iov_len };
	atomic_store(&fs->killpriv, killpriv);
	atomic_store(&fs->dio_create, dio);
	return true;
}

static ssize_t wire_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fuse_init_out arg;
	struct iovec out[2];

	if (init_reply(userdata, iov, count, out, &arg))
		return writev(fd, out, 2);
	return writev(fd, iov, count);
}

int wire_attach(struct uzfs *fs)
{
	static const struct fuse_custom_io io = {
		.read = wire_read,
		.writev = wire_writev,
	};

	return fuse_session_custom_io(fs->se, &io, fuse_session_fd(fs->se));
}
