// SPDX-License-Identifier: MIT
/*
 * keep.c - a kept store: a device whose memory lives in a memfd that
 * outlives the process, and its adoption by a new process after the old
 * one died at any instant (uzram_config.keep_fd; the design and why it is
 * consistent: doc/keep.md).
 *
 *   the file (sparse; each part starts on ZPOOL_FILE_ALIGN)
 *   +--------+----------------------+-------------------------------------+
 *   | header | slot table           | the allocator (zpool_create_file()): |
 *   | 1 page | nchunks * 256 KiB    | frame table | cells | region         |
 *   +--------+----------------------+-------------------------------------+
 *   0        table_off              pool_off
 *
 * The header holds a magic, a version, the geometry and the codec, and the
 * XXH3 of those bytes; it is written once, when the file is new, before
 * anything else. Everything in the file is an offset or a number, never a
 * pointer, so a process maps it anywhere.
 *
 * Adoption (keep_adopt()) reads the header back and checks it against a
 * layout computed from its own geometry, maps the parts, and scans the slot
 * table where it has pages (SEEK_DATA: a hole was never written). Each
 * slot's object is claimed in the allocator (zpool_adopt_object(), which
 * checks the cell against the class geometry); what no slot claims is free
 * (zpool_adopt_end()). A slot whose lock has the writer bit was being
 * written when the process died: its request had not completed and is sent
 * again (ublk's RECOVERY_REISSUE), so it is kept if it makes sense, else
 * made a hole, and counted as torn. Any other slot that does not check out
 * refuses the whole store (-EUCLEAN): better no device than wrong data.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uzram.h"
#include "base/base.h"
#include "core/core.h"
#include "device.h"
#include "zpool/zpool.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define KEEP_MAGIC "uzramKS1"
#define KEEP_VERSION 1u

struct keep_header {
	char magic[8];
	uint32_t version;
	uint32_t header_bytes;       /* sizeof(struct keep_header) */
	uint64_t size;               /* the device's bytes */
	uint32_t cshift;
	int32_t level;
	char algorithm[32];
	uint64_t nclusters, nchunks;
	uint64_t max_objects, max_object;
	uint64_t table_off, pool_off, pool_bytes, file_bytes;
	uint64_t sum;                /* XXH3 of the bytes above */
};

static uint64_t align_up(uint64_t n)
{
	return (n + ZPOOL_FILE_ALIGN - 1) & ~(ZPOOL_FILE_ALIGN - 1);
}

/* The layout of a store for a device of `size` bytes of 4 KiB clusters. */
static int layout(uint64_t size, const char *algorithm, int level,
		  struct keep_header *h)
{
	memset(h, 0, sizeof *h);
	memcpy(h->magic, KEEP_MAGIC, sizeof h->magic);
	h->version = KEEP_VERSION;
	h->header_bytes = sizeof *h;
	h->size = (size + PAGE_MASK) & ~PAGE_MASK;
	h->cshift = PAGE_SHIFT;
	h->level = level;
	if (strlen(algorithm) >= sizeof h->algorithm)
		return -EINVAL;
	strcpy(h->algorithm, algorithm);
	h->nclusters = h->size >> PAGE_SHIFT;
	h->nchunks = (h->nclusters + CHUNK_SLOTS - 1) >> CHUNK_SHIFT;
	h->max_objects = 2 * h->nclusters;     /* as device.c's */
	h->max_object = PAGE;
	h->table_off = ZPOOL_FILE_ALIGN;
	h->pool_off = h->table_off + align_up(h->nchunks * CHUNK_BYTES);
	h->pool_bytes = zpool_file_bytes(h->max_objects, h->max_object);
	h->file_bytes = h->pool_off + h->pool_bytes;
	h->sum = XXH3_64bits(h, offsetof(struct keep_header, sum));
	return h->pool_bytes ? 0 : -EINVAL;
}

/* What a kept store cannot hold (yet): doc/keep.md says why. */
static int keep_refuse(const struct uzram_config *c)
{
	const char *what = c->dedup ? "dedup" : c->backing ? "a backing store" :
			   c->dict ? "a dictionary" : c->image ? "an image" :
			   c->cluster_size > PAGE ? "clusters bigger than a page" :
			   c->fast_algorithm ? "a fast algorithm (its "
					       "re-encoded objects)" :
			   NULL;

	if (!what)
		return 0;
	return uzram_set_error(-EOPNOTSUPP, "keep: a kept store cannot have %s "
			       "(yet)", what);
}

/* Read the header of a store and check it against its own layout. */
static int header_read(int fd, uint64_t file_bytes, struct keep_header *h)
{
	struct keep_header want;

	if (pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h)
		return uzram_set_error(-EUCLEAN, "keep: the store's file has "
				       "no header");
	if (memcmp(h->magic, KEEP_MAGIC, sizeof h->magic))
		return uzram_set_error(-EUCLEAN, "keep: the file is not a kept "
				       "store (no magic)");
	if (h->version != KEEP_VERSION || h->header_bytes != sizeof *h)
		return uzram_set_error(-EUCLEAN, "keep: the store is of version "
				       "%u, this library knows %u", h->version,
				       KEEP_VERSION);
	if (h->sum != XXH3_64bits(h, offsetof(struct keep_header, sum)))
		return uzram_set_error(-EUCLEAN, "keep: the store's header "
				       "fails its checksum");
	h->algorithm[sizeof h->algorithm - 1] = 0;
	if (layout(h->size, h->algorithm, h->level, &want) ||
	    memcmp(&want, h, sizeof want) || h->file_bytes != file_bytes)
		return uzram_set_error(-EUCLEAN, "keep: the store's geometry "
				       "is not what its header says (a file of "
				       "%llu bytes)",
				       (unsigned long long)file_bytes);
	return 0;
}

/*
 * Whether the file is one whose maker died before it wrote the header (the
 * file sized, its first page still zeros): no device was made on it, so
 * nothing was ever served from it.
 */
static bool never_served(int fd)
{
	unsigned char first[sizeof(struct keep_header)];
	ssize_t n = pread(fd, first, sizeof first, 0);

	for (ssize_t i = 0; i < n; i++)
		if (first[i])
			return false;
	return n >= 0;
}

/* Map the slot table of the store into a device just made. */
static int table_map(struct uzram *dev, int fd, const struct keep_header *h)
{
	void *p = mmap(NULL, h->nchunks * CHUNK_BYTES, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_NORESERVE, fd, (off_t)h->table_off);

	if (p == MAP_FAILED)
		return uzram_set_error(-ENOMEM, "keep: cannot map the slot "
				       "table: %s", uzram_strerror(-errno));
	madvise(p, h->nchunks * CHUNK_BYTES, MADV_NOHUGEPAGE);
	dev->table_map = p;
	return 0;
}

/*
 * Take one slot's contents into the adopted device: its object claimed in
 * the allocator, its figures counted. 0, or -EUCLEAN with nothing done.
 */
static int slot_adopt(struct uzram *dev, struct slot *s, uint64_t idx)
{
	struct content c = { .flags = slot_flags(s), .val = s->val, .bank = -1 };
	size_t len = cluster_len(dev, idx);

	if (c.flags & (SLOT_PRIO_MASK | SLOT_SHARED | SLOT_BANK))
		return -EUCLEAN;
	switch ((enum slot_state)(c.flags & SLOT_STATE_MASK)) {
	case SLOT_EMPTY:
		return 0;
	case SLOT_SAME:
		break;
	case SLOT_OBJ:
		if (slot_size(s) >= len)
			return -EUCLEAN;
		/* fall through */
	case SLOT_HUGE:
		if ((slot_state(s) == SLOT_HUGE && slot_size(s) != len) ||
		    zpool_adopt_object(dev->pool, slot_handle(s), slot_size(s)))
			return -EUCLEAN;
		break;
	default:
		return -EUCLEAN;
	}
	content_account(dev, &c, 1, len);
	return 0;
}

struct scan {
	uint64_t *torn;              /* clusters whose write was cut short */
	uint64_t ntorn, cap;
	uint64_t slots;              /* slots holding data */
};

/* The slots [from, to) of the table, which has pages there. */
static int scan_range(struct uzram *dev, struct scan *sc, uint64_t from,
		      uint64_t to)
{
	for (uint64_t idx = from; idx < to && idx < dev->nclusters; idx++) {
		struct slot *s = &dev->table_map[idx];
		uint64_t i = idx >> CHUNK_SHIFT;

		if (!atomic_load_explicit(&dev->dir[i], memory_order_relaxed)) {
			atomic_store_explicit(&dev->dir[i], dev->table_map +
					      i * CHUNK_SLOTS, memory_order_relaxed);
			atomic_fetch_add_explicit(&dev->chunks_used, 1,
						  memory_order_relaxed);
		}
		if (atomic_load_explicit(&s->lock, memory_order_relaxed) &
		    SLOT_WRITER) {
			if (sc->ntorn == sc->cap) {
				uint64_t *n = realloc(sc->torn, (sc->cap * 2 + 16) *
						      sizeof(*n));
				if (!n)
					return uzram_set_error(-ENOMEM,
						"keep: out of memory");
				sc->torn = n;
				sc->cap = sc->cap * 2 + 16;
			}
			sc->torn[sc->ntorn++] = idx;
			continue;
		}
		/* readers the kill left behind */
		atomic_store_explicit(&s->lock, 0, memory_order_relaxed);
		if (slot_adopt(dev, s, idx))
			return uzram_set_error(-EUCLEAN, "keep: cluster %llu's "
				"slot (flags %#x, value %#llx) names no valid "
				"object: the store is not one this library can "
				"trust", (unsigned long long)idx,
				(unsigned)slot_flags(s),
				(unsigned long long)s->val);
		sc->slots += slot_state(s) != SLOT_EMPTY;
	}
	return 0;
}

/* Scan the slot table where the file has pages, then the torn slots. */
static int scan(struct uzram *dev, int fd, const struct keep_header *h)
{
	uint64_t end = h->table_off + h->nchunks * CHUNK_BYTES;
	struct scan sc = { 0 };
	off_t at = (off_t)h->table_off;
	int ret = zpool_adopt_begin(dev->pool);

	while (!ret) {
		off_t data = lseek(fd, at, SEEK_DATA), hole;

		if (data < 0 || (uint64_t)data >= end)
			break;
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		ret = scan_range(dev, &sc, ((uint64_t)data - h->table_off) /
				 sizeof(struct slot),
				 ((uint64_t)hole - h->table_off) / sizeof(struct slot));
		at = hole;
	}
	/* after every other slot has claimed its object */
	for (uint64_t i = 0; !ret && i < sc.ntorn; i++) {
		struct slot *s = &dev->table_map[sc.torn[i]];

		atomic_store_explicit(&s->lock, 0, memory_order_relaxed);
		if (slot_adopt(dev, s, sc.torn[i])) {
			s->val = 0;
			slot_set_flags(s, SLOT_EMPTY);
		}
		sc.slots += slot_state(s) != SLOT_EMPTY;
	}
	if (!ret && zpool_adopt_end(dev->pool))
		ret = uzram_set_error(-ENOMEM, "keep: out of memory");
	free(sc.torn);
	dev->keep.slots = sc.slots;
	dev->keep.torn = sc.ntorn;
	return ret;
}

/* A device over the store in fd, whose header is h (written or read). */
static int keep_device(const struct uzram_config *cfg, int fd,
		       const struct keep_header *h, struct uzram **devp)
{
	struct uzram_config c = *cfg;
	struct zpool_file file = { .fd = fd, .off = h->pool_off };
	int ret;

	c.size = h->size;
	c.algorithm = h->algorithm;
	c.level = h->level;
	c.cluster_size = PAGE;
	ret = device_create_file(&c, &file, devp);
	if (!ret && (ret = table_map(*devp, fd, h))) {
		uzram_close(*devp);
		*devp = NULL;
	}
	return ret;
}

int keep_open(const struct uzram_config *c, struct uzram **devp)
{
	struct keep_header h;
	struct uzram *dev = NULL;
	struct stat st;
	int fd = c->keep_fd, ret = keep_refuse(c);

	if (ret)
		return ret;
	if (fstat(fd, &st) < 0)
		return uzram_set_error(-errno, "keep: fd %d: %s", fd,
				       uzram_strerror(-errno));
	if (st.st_size == 0 || never_served(fd)) {
		/*
		 * New: sized, then the header, then the device. A file left by
		 * a kill before its header was whole served nothing: new too.
		 */
		ret = layout(c->size, c->algorithm ? c->algorithm : "lz4",
			     c->level, &h);
		if (ret || !c->size)
			return uzram_set_error(-EINVAL, "keep: no size, or an "
					       "algorithm name too long");
		if (ftruncate(fd, (off_t)h.file_bytes) < 0 ||
		    pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
			return uzram_set_error(-errno, "keep: cannot size the "
					       "store's file: %s",
					       uzram_strerror(-errno));
		ret = keep_device(c, fd, &h, devp);
		if (!ret)
			(*devp)->keep.kept = 1;
		return ret;
	}
	ret = header_read(fd, (uint64_t)st.st_size, &h);
	if (ret)
		return ret;
	if (c->size && ((c->size + PAGE_MASK) & ~PAGE_MASK) != h.size)
		return uzram_set_error(-EINVAL, "keep: the store is a device of "
				       "%llu bytes, not %llu",
				       (unsigned long long)h.size,
				       (unsigned long long)c->size);
	ret = keep_device(c, fd, &h, &dev);
	if (!ret)
		ret = scan(dev, fd, &h);
	if (ret) {
		uzram_close(dev);
		return ret;
	}
	table_limit_apply(dev);
	dev->keep.kept = 1;
	dev->keep.adopted = 1;
	dev->keep.reserve = zpool_reserved(dev->pool);
	*devp = dev;
	return 0;
}
