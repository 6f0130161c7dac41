// SPDX-License-Identifier: MIT
/*
 * backing_blocks.c - a backing file written on the blocks under it, as the
 * kernel writes a swap file (mm/swapfile.c's swap extents, filled by
 * iomap_swapfile_activate()): UZRAM_BACKING_BLOCKS.
 *
 * Why: the server of a swap device must not wait on anything that waits
 * on swap. A tier written through a file system does: the file's dirty
 * pages are written by the flusher and the journal, which allocate,
 * reclaim by swapping to the very device the tier serves, and wait for
 * bios only its server completes, while the server waits for the file's
 * inode lock (doc/block-device.md, "--backing"). The kernel's own swap
 * files never go through their file system after swapon; neither does
 * this.
 *
 * At open the whole file is allocated (fallocate: no holes, as swapon(2)
 * wants), mapped with FIEMAP, and the block device that holds it opened
 * with O_DIRECT. What has no fixed place on one device is refused: a
 * file system without a block device of its own (btrfs, tmpfs, overlayfs,
 * NFS), one that moves a file's blocks by itself (f2fs's and bcachefs's
 * garbage collection: the kernel pins a swap file's there, which a
 * program cannot), an XFS realtime file (its extents are on another
 * device), delayed, inline, encoded, encrypted or shared extents, holes.
 * So only ext4 and XFS are taken, the file systems whose files stay where
 * they are unless someone defragments them.
 *
 *   the tier's offsets   0            e1.logical        e2.logical
 *   the file's extents   [ extent 0  ][ extent 1       ][ extent 2 ]
 *   its device           ..[ext 1]........[ext 0]...........[ext 2].....
 *
 * Each transfer goes through the calling thread's bounce buffer (O_DIRECT
 * wants aligned memory and the tier's buffers are not), in units of the
 * device's logical block size. A thread makes it before it serves
 * (blockmap_thread_prepare(): the queue threads through
 * uzram_thread_prepare(), the tier's own threads as they start), else at
 * its first transfer, and frees it when it exits. BOUNCE_BYTES stays
 * below glibc's mmap threshold (128 KiB), so that it comes from the heap,
 * which a swap server grows and locks before it serves (serve_swap.c's
 * swap_malloc()), not from a new mapping and the mmap lock. The tier packs its objects at 16 bytes, so two writes may share
 * a block: a write that starts or ends inside a block reads that block
 * first and writes it back, under edge_lock, which every such write
 * takes. A block wholly inside one write belongs to it alone (the tier
 * never writes a range twice at once) and is written without the lock;
 * a read meanwhile sees the block's old or new bytes, equal in its range.
 *
 * The blocks stay the file's while it is open: nothing here punches a
 * hole, as a freed block could go to another file while the tier still
 * writes there, and the file is immutable meanwhile (backing_guard.c), so
 * that nobody else writes, truncates or defragments it either. Its page
 * cache never shows the tier's bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "tier.h"
#include "base/base.h"

#define BOUNCE_BYTES (64u << 10)
#define EXT4_MAGIC 0xEF53u              /* linux/magic.h's EXT4_SUPER_MAGIC */
#define XFS_MAGIC 0x58465342u           /* and XFS_SUPER_MAGIC */
#define FIEMAP_BATCH 128u

/* Extent flags with no fixed place on the device to write to. */
#define FIEMAP_UNFIT (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | \
		      FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_ENCRYPTED | \
		      FIEMAP_EXTENT_NOT_ALIGNED | FIEMAP_EXTENT_DATA_INLINE | \
		      FIEMAP_EXTENT_DATA_TAIL | FIEMAP_EXTENT_SHARED)

struct bm_extent {
	uint64_t logical;       /* the file's offset of its first byte */
	uint64_t physical;      /* and the device's */
	uint64_t len;
};

struct blockmap {
	int dev_fd;                     /* O_DIRECT */
	uint32_t lbs;                   /* the device's logical block size */
	uint64_t size;                  /* the file's bytes, all mapped */
	struct bm_extent *ext;          /* by logical, no gaps */
	size_t n;
	pthread_mutex_t edge_lock;      /* read-modify-writes of blocks */
	int guard_fd;                   /* the file, guarded; or -1 */
};

static void bounce_free(void *p)
{
	free(p);
}

static struct thread_cache bounce_cache = THREAD_CACHE_INIT(bounce_free);
static _Thread_local unsigned char *bounce;

/* The calling thread's bounce buffer, or NULL if none can be made. */
static unsigned char *bounce_get(void)
{
	void *p;

	if (bounce)
		return bounce;
	if (posix_memalign(&p, 4096, BOUNCE_BYTES))
		return NULL;
	if (thread_cache_set(&bounce_cache, p)) {
		free(p);
		return NULL;
	}
	bounce = p;
	return bounce;
}

int blockmap_thread_prepare(void)
{
	return bounce_get() ? 0 : -ENOMEM;
}

/* The extent holding logical offset off (< m->size). */
static const struct bm_extent *extent_of(const struct blockmap *m,
					 uint64_t off)
{
	size_t lo = 0, hi = m->n;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->ext[mid].logical <= off)
			lo = mid;
		else
			hi = mid;
	}
	return &m->ext[lo];
}

/* Move len aligned bytes at aligned logical off, extent by extent. */
static int dev_io(struct blockmap *m, bool write, unsigned char *p,
		  size_t len, uint64_t off)
{
	if (off > m->size || len > m->size - off)
		return -EIO;
	while (len) {
		const struct bm_extent *e = extent_of(m, off);
		uint64_t in = off - e->logical;
		size_t n = len < e->len - in ? len : (size_t)(e->len - in);
		ssize_t r = write ?
			pwrite(m->dev_fd, p, n, (off_t)(e->physical + in)) :
			pread(m->dev_fd, p, n, (off_t)(e->physical + in));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && write && errno == ENOSPC)
			return -ENOSPC;
		if (r <= 0 || r % m->lbs)
			return -EIO;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/*
 * The next piece of a transfer of len bytes at off that fits the bounce
 * buffer: span aligned bytes at a, of which [head, head + n) are the
 * caller's.
 */
struct chunk {
	uint64_t a;
	size_t head, n, span;
};

static struct chunk chunk_at(const struct blockmap *m, uint64_t off,
			     size_t len)
{
	struct chunk c;

	c.a = off & ~(uint64_t)(m->lbs - 1);
	c.head = (size_t)(off - c.a);
	c.n = len < BOUNCE_BYTES - c.head ? len : BOUNCE_BYTES - c.head;
	c.span = (c.head + c.n + m->lbs - 1) & ~(size_t)(m->lbs - 1);
	return c;
}

int blockmap_pread(struct blockmap *m, void *buf, size_t len, uint64_t off)
{
	unsigned char *b = bounce_get(), *dst = buf;

	if (!b)
		return -ENOMEM;
	while (len) {
		struct chunk c = chunk_at(m, off, len);
		int ret = dev_io(m, false, b, c.span, c.a);

		if (ret)
			return ret;
		memcpy(dst, b + c.head, c.n);
		dst += c.n;
		len -= c.n;
		off += c.n;
	}
	return 0;
}

/*
 * One chunk of a write from src, through the bounce buffer b: the partial
 * blocks at either end are read first, under edge_lock.
 */
static int write_chunk(struct blockmap *m, unsigned char *b, const void *src,
		       const struct chunk *c)
{
	bool first = c->head != 0, last = (c->head + c->n) % m->lbs != 0;
	int ret = 0;

	if (!first && !last) {
		memcpy(b, src, c->n);
		return dev_io(m, true, b, c->span, c->a);
	}
	pthread_mutex_lock(&m->edge_lock);
	if (first)
		ret = dev_io(m, false, b, m->lbs, c->a);
	if (!ret && last && (c->span > m->lbs || !first))
		ret = dev_io(m, false, b + c->span - m->lbs, m->lbs,
			     c->a + c->span - m->lbs);
	if (!ret) {
		memcpy(b + c->head, src, c->n);
		ret = dev_io(m, true, b, c->span, c->a);
	}
	pthread_mutex_unlock(&m->edge_lock);
	return ret;
}

int blockmap_pwrite(struct blockmap *m, const void *buf, size_t len,
		    uint64_t off)
{
	unsigned char *b = bounce_get();
	const unsigned char *src = buf;

	if (!b)
		return -ENOMEM;
	while (len) {
		struct chunk c = chunk_at(m, off, len);
		int ret = write_chunk(m, b, src, &c);

		if (ret)
			return ret;
		src += c.n;
		len -= c.n;
		off += c.n;
	}
	return 0;
}

/* Add [logical, +len) at physical, merged with the last if contiguous. */
static int extent_add(struct blockmap *m, size_t *cap, uint64_t logical,
		      uint64_t physical, uint64_t len)
{
	struct bm_extent *last = m->n ? &m->ext[m->n - 1] : NULL;

	if (last && last->physical + last->len == physical) {
		last->len += len;
		return 0;
	}
	if (m->n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct bm_extent *e = realloc(m->ext, c * sizeof *e);

		if (!e)
			return -ENOMEM;
		m->ext = e;
		*cap = c;
	}
	m->ext[m->n++] = (struct bm_extent){ logical, physical, len };
	return 0;
}

/*
 * Call fn on each extent of fd's bytes [0, length) in order, as FIEMAP
 * (after a sync) reports them, until fn returns non-zero (< 0 an error,
 * > 0 enough), a hole's end of the report or the last extent. 0, or a
 * negative errno (FIEMAP's own failure with the error set for path).
 */
static int extents_walk(int fd, const char *path, uint64_t length,
			int (*fn)(const struct fiemap_extent *fe, void *arg),
			void *arg)
{
	size_t bytes = sizeof(struct fiemap) +
		       FIEMAP_BATCH * sizeof(struct fiemap_extent);
	struct fiemap *fm = malloc(bytes);
	uint64_t next = 0;
	int ret = 0;

	if (!fm)
		return uzram_set_error(-ENOMEM, "backing store: out of memory");
	while (!ret && next < length) {
		memset(fm, 0, bytes);
		fm->fm_start = next;
		fm->fm_length = length - next;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			ret = uzram_set_error(errno == ENOTTY ? -EOPNOTSUPP :
				-errno, "backing file %s: cannot map its blocks "
				"(FIEMAP): %s", path, strerror(errno));
			break;
		}
		if (!fm->fm_mapped_extents)
			break;
		for (unsigned i = 0; !ret && i < fm->fm_mapped_extents; i++) {
			const struct fiemap_extent *fe = &fm->fm_extents[i];

			ret = fn(fe, arg);
			next = fe->fe_logical + fe->fe_length;
			if (fe->fe_flags & FIEMAP_EXTENT_LAST)
				ret = ret ? ret : 1;
		}
	}
	free(fm);
	return ret < 0 ? ret : 0;
}

struct map_walk {
	struct blockmap *m;
	const char *path;
	size_t cap;             /* of m->ext */
	uint64_t next;          /* the first byte not mapped yet */
};

/* extents_walk()'s fn for map_extents(): one extent into the map. */
static int map_one(const struct fiemap_extent *fe, void *arg)
{
	struct map_walk *w = arg;
	struct blockmap *m = w->m;
	uint64_t len = fe->fe_length;

	if (fe->fe_logical != w->next)
		return 1;               /* a hole: map_extents() says so */
	if (fe->fe_flags & FIEMAP_UNFIT)
		return uzram_set_error(-EOPNOTSUPP, "backing file %s: its file "
			"system keeps part of it in no fixed place on the "
			"device (extent flags 0x%x)", w->path, fe->fe_flags);
	if ((fe->fe_physical | fe->fe_logical | len) % m->lbs)
		return uzram_set_error(-EOPNOTSUPP, "backing file %s: an extent "
			"not aligned to the device's %u-byte blocks", w->path,
			m->lbs);
	if (len > m->size - w->next)
		len = m->size - w->next;
	if (extent_add(m, &w->cap, w->next, fe->fe_physical, len))
		return uzram_set_error(-ENOMEM, "backing store: out of memory");
	w->next += len;
	return w->next == m->size;
}

/* Map the file's m->size bytes: 0, or a negative errno with the error set. */
static int map_extents(struct blockmap *m, int fd, const char *path)
{
	struct map_walk w = { m, path, 0, 0 };
	int ret = extents_walk(fd, path, m->size, map_one, &w);

	if (!ret && w.next < m->size)
		ret = uzram_set_error(-EOPNOTSUPP, "backing file %s: a hole at "
				      "byte %llu after fallocate", path,
				      (unsigned long long)w.next);
	return ret;
}

/* extents_walk()'s fn for blockmap_left_over(): stop at a written one. */
static int written_one(const struct fiemap_extent *fe, void *arg)
{
	bool *zeros = arg;

	/* allocated, never written through the file system */
	*zeros = (fe->fe_flags & FIEMAP_EXTENT_UNWRITTEN) &&
		 !(fe->fe_flags & FIEMAP_UNFIT);
	return !*zeros;
}

bool blockmap_left_over(int fd, const char *path)
{
	bool zeros = true;

	return !extents_walk(fd, path, FIEMAP_MAX_OFFSET, written_one, &zeros) &&
	       zeros;
}

/*
 * Whether fd's file stays where it is on the device its file system
 * names: ext4, or XFS but for a realtime file. 0, or -EOPNOTSUPP set.
 */
static int fit_file_system(int fd, const char *path)
{
	struct fsxattr fa = { 0 };
	struct statfs sf;

	if (fstatfs(fd, &sf))
		return uzram_set_error(-errno, "backing file %s: %s", path,
				       strerror(errno));
	if ((uint32_t)sf.f_type == XFS_MAGIC &&
	    (ioctl(fd, FS_IOC_FSGETXATTR, &fa) ||
	     (fa.fsx_xflags & FS_XFLAG_REALTIME)))
		return uzram_set_error(-EOPNOTSUPP, "backing file %s: an XFS "
			"realtime file, whose blocks are on another device",
			path);
	if ((uint32_t)sf.f_type != EXT4_MAGIC && (uint32_t)sf.f_type != XFS_MAGIC)
		return uzram_set_error(-EOPNOTSUPP, "backing file %s: its file "
			"system (0x%lx) is not ext4 or XFS, whose files stay "
			"where they are; give a block device, or a file on one "
			"of those", path, (unsigned long)sf.f_type);
	return 0;
}

/* The device of the file system under path, O_DIRECT: 0, or -errno set. */
static int open_device(struct blockmap *m, dev_t d, const char *path)
{
	char sys[64], line[256], node[300] = "";
	struct stat sb;
	FILE *f;
	int lbs;

	if (!major(d))
		return uzram_set_error(-EOPNOTSUPP, "backing file %s: its file "
			"system has no block device of its own (btrfs, tmpfs, "
			"overlayfs, NFS); put it on ext4 or XFS, or give a "
			"block device", path);
	snprintf(sys, sizeof sys, "/sys/dev/block/%u:%u/uevent", major(d),
		 minor(d));
	f = fopen(sys, "re");
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "DEVNAME=", 8)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(node, sizeof node, "/dev/%s", line + 8);
		}
	if (f)
		fclose(f);
	if (!node[0])
		return uzram_set_error(-ENODEV, "backing file %s: no name for "
			"its block device %u:%u in %s", path, major(d),
			minor(d), sys);
	m->dev_fd = open(node, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (m->dev_fd < 0) {
		int e = errno;

		return uzram_set_error(-e, "backing file %s: cannot open its "
			"block device %s to write the file's blocks on: %s%s",
			path, node, strerror(e), e != EACCES && e != EPERM ? "" :
			geteuid() ? " (root is needed)" : " (refused to root: "
			"a container's or a sandbox's rule)");
	}
	if (fstat(m->dev_fd, &sb) || !S_ISBLK(sb.st_mode) || sb.st_rdev != d)
		return uzram_set_error(-ENODEV, "backing file %s: %s is not its "
			"block device %u:%u", path, node, major(d), minor(d));
	if (ioctl(m->dev_fd, BLKSSZGET, &lbs) || lbs < 512 || lbs > 4096 ||
	    (lbs & (lbs - 1)))
		return uzram_set_error(-EOPNOTSUPP, "backing file %s: %s has no "
			"usable logical block size", path, node);
	m->lbs = (uint32_t)lbs;
	return 0;
}

int blockmap_open(int fd, const char *path, uint64_t size,
		  struct blockmap **out)
{
	struct blockmap *m = calloc(1, sizeof *m);
	struct stat sb;
	int ret;

	if (!m)
		return uzram_set_error(-ENOMEM, "backing store: out of memory");
	m->dev_fd = -1;
	m->guard_fd = -1;
	m->size = size;
	pthread_mutex_init(&m->edge_lock, NULL);
	if (fstat(fd, &sb)) {
		ret = uzram_set_error(-errno, "backing file %s: %s", path,
				      strerror(errno));
		goto fail;
	}
	ret = open_device(m, sb.st_dev, path);
	if (!ret)
		ret = fit_file_system(fd, path);
	if (ret)
		goto fail;
	if (fallocate(fd, 0, 0, (off_t)size) < 0) {
		ret = uzram_set_error(errno == ENOSPC || errno == EDQUOT ?
			-ENOSPC : -errno, "backing file %s: cannot allocate its "
			"%llu bytes: %s", path, (unsigned long long)size,
			strerror(errno));
		goto fail;
	}
	ret = fsync(fd) ? uzram_set_error(-errno, "backing file %s: fsync: %s",
					  path, strerror(errno)) :
			  map_extents(m, fd, path);
	if (ret)
		goto fail;
	/* nothing of the file is read through its page cache: drop it */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (blockmap_guard(fd))
		m->guard_fd = fd;
	*out = m;
	return 0;
fail:
	if (ftruncate(fd, 0) < 0) {
		/* it was empty when opened: a failure leaves it allocated */
	}
	blockmap_close(m);
	return ret;
}

void blockmap_close(struct blockmap *m)
{
	if (!m)
		return;
	if (m->guard_fd >= 0)
		blockmap_unguard(m->guard_fd);
	if (m->dev_fd >= 0)
		close(m->dev_fd);
	pthread_mutex_destroy(&m->edge_lock);
	free(m->ext);
	free(m);
}
