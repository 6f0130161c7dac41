// SPDX-License-Identifier: MIT
/*
 * image_open.c - uzram_open() from an image: check it whole and fill a
 * fresh device with its objects as they are, at the speed of reading the
 * file (nothing is decoded or re-encoded).
 *
 *   open, read the header         magic, length, checksum, version, then
 *        |                        the geometry and the codec banks
 *        v
 *   device_create() with the image's geometry; every codec bank set,
 *        |                        dictionaries included
 *        |
 *        v
 *   block by block: read head,    checksum of head and payload (seeded
 *   payload and checksum into     with the header's, so no block of
 *   one buffer (1 MiB reads)      another image fits), then each record:
 *        |                        index, flags, size against the cluster,
 *        v                        no cluster twice
 *   zpool_store() each object, set its slot's flags and value as saved
 *        |
 *        v
 *   trailer: block and record counts match, nothing after it
 *
 * Nothing is served before the whole file passed: the device is built
 * privately and closed on the first error, which says what and where
 * (-EBADMSG for damage, -EINVAL for what is not a version 1 or 2 image).
 * A shared record (version 2) takes one more reference to the object an
 * earlier record stored, or, on a device without dedup, a copy of it. The
 * checksums make damage show before any byte of a block is used; the
 * checks on each record hold even against a file made to pass them, so
 * that no input can make the store read outside an object (a forged
 * object can at worst fail to decode, -EIO, as a corrupt one in memory
 * would).
 *
 * Lock rules: none; the device is not shared until it is returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uzram.h"
#include "dedup/dedup.h"
#include "device/device.h"
#include "base/base.h"
#include "image.h"
#include "core/core.h"
#include "tier/tier.h"
#include "zcomp/zcomp.h"
#include "zpool/zpool.h"

struct reader {
	int fd;
	const char *path;
	uint64_t off;            /* of the next byte in the file */
	uint64_t seed;           /* the header's checksum */
	unsigned char *buf;      /* one block */
	uint64_t blocks, records;
	uint32_t version;
};

/* What the header says; names and dictionaries point into its bytes. */
struct geometry {
	uint64_t size;
	uint32_t cluster;
	uint32_t cur;            /* bit p: priority p's current bank */
	const char *name[IMG_CODECS];   /* [prio * 2 + bank], "" for none */
	int level[IMG_CODECS];
	const unsigned char *dict[IMG_CODECS];
	uint32_t dict_len[IMG_CODECS];
};

/* Read up to n bytes; the count read (short only at the end), or -errno. */
static ssize_t read_full(struct reader *r, void *dst, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = read(r->fd, (unsigned char *)dst + got, n - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return uzram_set_error(-errno, "open: cannot read image "
					       "%s at offset %llu: %s", r->path,
					       (unsigned long long)(r->off + got),
					       strerror(errno));
		if (k == 0)
			break;
		got += (size_t)k;
	}
	r->off += got;
	return (ssize_t)got;
}

static int truncated(const struct reader *r, const char *what)
{
	return uzram_set_error(-EBADMSG, "open: image %s is truncated: it "
			       "ends at byte %llu, inside %s", r->path,
			       (unsigned long long)r->off, what);
}

/* Read exactly n bytes of `what`: 0, -EBADMSG at the end, or -errno. */
static int read_exact(struct reader *r, void *dst, size_t n, const char *what)
{
	ssize_t got = read_full(r, dst, n);

	if (got < 0)
		return (int)got;
	return (size_t)got == n ? 0 : truncated(r, what);
}

static int bad(const struct reader *r, const char *fmt, const char *detail)
{
	return uzram_set_error(-EBADMSG, "open: image %s is corrupt: %s%s",
			       r->path, fmt, detail);
}

static bool version_known(uint32_t version)
{
	return version >= IMG_VERSION_MIN && version <= IMG_VERSION;
}

static int version_refused(const struct reader *r, uint32_t version)
{
	return uzram_set_error(-EINVAL, "open: image %s has format version "
			       "%u; this library reads versions %u to %u",
			       r->path, version, IMG_VERSION_MIN, IMG_VERSION);
}

/*
 * Read the header whole into *hp (malloc'ed, *hlen bytes) and check its
 * magic, version, length and checksum. A version this library does not
 * read is -EINVAL once its checksum holds (or its length cannot be
 * checked); anything else wrong is damage, -EBADMSG.
 */
static int header_read(struct reader *r, unsigned char **hp, uint32_t *hlen)
{
	unsigned char first[IMG_HEADER_MIN], *h;
	ssize_t got = read_full(r, first, sizeof first);
	uint32_t version;

	if (got < 0)
		return (int)got;
	if (memcmp(first, IMG_MAGIC, got < 8 ? (size_t)got : 8))
		return uzram_set_error(-EINVAL, "open: %s is not a uzram "
				       "image (no %s magic)", r->path,
				       IMG_MAGIC);
	if (got < IMG_H_HEADER_LEN + 4)
		return truncated(r, "the header");
	version = img_get32(first + IMG_H_VERSION);
	r->version = version;
	*hlen = img_get32(first + IMG_H_HEADER_LEN);
	if (*hlen < IMG_HEADER_MIN || *hlen > IMG_HEADER_MAX)
		return !version_known(version) ? version_refused(r, version) :
		       bad(r, "header length out of range", "");
	if ((size_t)got < sizeof first)
		return truncated(r, "the header");
	h = malloc(*hlen);
	if (!h)
		return uzram_set_error(-ENOMEM, "open: out of memory");
	memcpy(h, first, sizeof first);
	*hp = h;
	got = read_exact(r, h + sizeof first, *hlen - sizeof first,
			 "the header");
	if (got)
		return (int)got;
	if (img_get64(h + *hlen - IMG_SUM_LEN) !=
	    img_sum(h, *hlen - IMG_SUM_LEN, 0))
		return bad(r, "header checksum mismatch", "");
	return version_known(version) ? 0 : version_refused(r, version);
}

/* The codec entries and their dictionaries, into g. */
static int codecs_parse(const struct reader *r, const unsigned char *h,
			uint32_t hlen, struct geometry *g)
{
	uint64_t at = IMG_H_DICTS;

	for (unsigned i = 0; i < IMG_CODECS; i++) {
		const unsigned char *c = h + IMG_H_CODECS + i * IMG_CODEC_LEN;

		if (c[IMG_CODEC_NAME - 1])
			return bad(r, "an algorithm name is not terminated",
				   "");
		g->name[i] = (const char *)c;
		g->level[i] = (int)img_get32(c + IMG_CODEC_LEVEL);
		g->dict_len[i] = img_get32(c + IMG_CODEC_DICT);
		if (g->dict_len[i] > IMG_DICT_MAX ||
		    (g->dict_len[i] && !c[0]))
			return bad(r, "a dictionary of no algorithm, or too "
				   "long", "");
		g->dict[i] = g->dict_len[i] ? h + at : NULL;
		at += g->dict_len[i];
	}
	if (at + IMG_SUM_LEN != hlen)
		return bad(r, "header length does not match its dictionaries",
			   "");
	for (unsigned prio = 0; prio <= UZRAM_MAX_RECOMP; prio++) {
		unsigned cur = g->cur >> prio & 1;

		if (!g->name[prio * 2 + cur][0] &&
		    (prio == 0 || g->name[prio * 2 + !cur][0]))
			return bad(r, "a priority's current codec is missing",
				   "");
	}
	return 0;
}

/* The rest of a header that header_read() accepted. */
static int header_parse(const struct reader *r, const unsigned char *h,
			uint32_t hlen, struct geometry *g)
{
	uint32_t incompat = img_get32(h + IMG_H_INCOMPAT);

	if (incompat)
		return uzram_set_error(-EINVAL, "open: image %s uses features "
				       "%#x that this library does not read",
				       r->path, incompat);
	g->size = img_get64(h + IMG_H_SIZE);
	g->cluster = img_get32(h + IMG_H_CLUSTER);
	g->cur = img_get32(h + IMG_H_CUR);
	if (!g->size || g->size > MAX_PAGES * PAGE || (g->size & PAGE_MASK))
		return bad(r, "device size is not a multiple of 4096 "
			   "from 4096 to 16 TiB", "");
	if (g->cluster < (1u << CLUSTER_MIN_SHIFT) ||
	    g->cluster > (1u << CLUSTER_MAX_SHIFT) ||
	    (g->cluster & (g->cluster - 1)))
		return bad(r, "cluster size is not a power of two from "
			   "4096 to 65536", "");
	if (g->cur >> (UZRAM_MAX_RECOMP + 1))
		return bad(r, "current banks of priorities that do not "
			   "exist", "");
	return codecs_parse(r, h, hlen, g);
}

static int codec_make(const struct reader *r, const struct geometry *g,
		      unsigned i, struct zcomp **zc)
{
	char what[80];
	int ret = zcomp_create_dict(g->name[i], g->level[i], g->dict[i],
				    g->dict_len[i], zc);

	if (!ret)
		return 0;
	if (ret == -ENOENT)
		return uzram_set_error(ret, "open: image %s uses algorithm "
				       "'%s', which this library does not "
				       "have (known: %s)", r->path, g->name[i],
				       zcomp_known());
	/* no save writes one; uzram.h: a codec refusing a dictionary */
	if (ret == -EOPNOTSUPP)
		return uzram_set_error(-EINVAL, "open: image %s gives "
				       "algorithm '%s' a dictionary, which it "
				       "does not take", r->path, g->name[i]);
	snprintf(what, sizeof what, "open: image %.40s", r->path);
	return codec_error(what, g->name[i], g->level[i], g->dict_len[i], ret);
}

/*
 * Create the device the header describes in *devp, with the codec of
 * every bank the image names, dictionaries included.
 */
static int device_from_header(struct reader *r, const struct uzram_config *cfg,
			      struct uzram **devp)
{
	struct uzram_config c = *cfg;
	unsigned char *h = NULL;
	struct zcomp *zc = NULL;
	struct geometry g;
	uint32_t hlen = 0;
	unsigned first = 0;
	int ret = header_read(r, &h, &hlen);

	if (!ret)
		ret = header_parse(r, h, hlen, &g);
	if (!ret && cfg->size &&
	    ((cfg->size + PAGE_MASK) & ~PAGE_MASK) != g.size)
		ret = uzram_set_error(-EINVAL, "open: size %llu conflicts with "
				      "the size of image %s, %llu bytes "
				      "(leave it 0)",
				      (unsigned long long)cfg->size, r->path,
				      (unsigned long long)g.size);
	/* the primary codec first, for a message that names the image */
	if (!ret) {
		first = g.cur & 1;
		ret = codec_make(r, &g, first, &zc);
	}
	zcomp_destroy(zc);
	if (ret) {
		free(h);
		return ret;
	}
	r->seed = img_get64(h + hlen - IMG_SUM_LEN);
	c.size = g.size;
	c.cluster_size = g.cluster;
	c.algorithm = g.name[first];
	c.level = g.level[first];
	c.dict = NULL;
	c.dict_size = 0;
	c.backing = NULL;       /* opened once the records are in: image_open() */
	ret = device_create(&c, devp);
	for (unsigned i = 0; !ret && i < IMG_CODECS; i++) {
		struct zcomp *old;

		zc = NULL;
		if (g.name[i][0])
			ret = codec_make(r, &g, i, &zc);
		old = atomic_exchange_explicit(&(*devp)->comp[i / 2][i % 2],
					       zc, memory_order_relaxed);
		zcomp_destroy(old);
	}
	for (unsigned prio = 0; !ret && prio <= UZRAM_MAX_RECOMP; prio++)
		atomic_store_explicit(&(*devp)->cur[prio], g.cur >> prio & 1,
				      memory_order_relaxed);
	free(h);
	return ret;
}

/* Check one record's flags and size for cluster idx; NULL if fine. */
static const char *record_check(const struct reader *r, struct uzram *dev,
				uint64_t idx, uint32_t flags, uint32_t size)
{
	size_t len;
	bool codec = flags & (SLOT_PRIO_MASK | SLOT_BANK);

	if (idx >= dev->nclusters)
		return "a cluster index past the end of the device";
	len = cluster_len(dev, idx);
	if (flags & SLOT_SHARED) {
		enum slot_state st = (enum slot_state)(flags & SLOT_STATE_MASK);

		if (r->version < 2)
			return "the shared flag, which version 1 has not";
		return size != 8 || (st != SLOT_OBJ && st != SLOT_HUGE) ?
		       "a bad shared record" : NULL;
	}
	switch ((enum slot_state)(flags & SLOT_STATE_MASK)) {
	case SLOT_SAME:
		return size != 8 || codec ? "a bad same-filled record" : NULL;
	case SLOT_HUGE:
		/* the priority bits of a raw cluster name the strongest codec
		 * that failed to shrink it (recompress.c); no bank */
		return size != len || (flags & SLOT_BANK) ?
		       "a bad raw cluster record" : NULL;
	case SLOT_OBJ:
		if (!size || size > HUGE_LIMIT(len))
			return "an object size out of range for its cluster";
		return comp_of(dev, flags) ? NULL :
		       "an object of an algorithm the header does not name";
	default:
		return "a record of an unknown state";
	}
}

/*
 * A shared record of cluster idx, checked: the cluster (data) of an earlier
 * record of the same object, and its slot (same state, codec and tag); a
 * reference to that object with dedup, else a copy of it. -EBADMSG with
 * *why, or -ENOMEM.
 */
static int record_share(struct uzram *dev, uint64_t idx, uint32_t flags,
			const unsigned char *data, struct content *c,
			const char **why)
{
	uint64_t first = img_get64(data);
	struct slot *t = first < dev->nclusters ? slot_peek(dev, first) : NULL;
	uint32_t same = SLOT_STATE_MASK | SLOT_BANK | 0xffffu << SLOT_TAG_SHIFT;
	struct store_scratch *sc;
	const void *obj;
	uint32_t handle;
	int ret;

	/* a raw object's priority bits are its slot's, not the object's */
	if ((flags & SLOT_STATE_MASK) == SLOT_OBJ)
		same |= SLOT_PRIO_MASK;
	if (!t || ((slot_flags(t) ^ flags) & same) ||
	    cluster_len(dev, first) != cluster_len(dev, idx)) {
		*why = "a shared record naming no earlier record of its object";
		return -EBADMSG;
	}
	c->val = t->val;
	if (dev->dedup)
		return dedup_share(dev, slot_flags(t), slot_handle(t)) ? 0 :
		       -ENOMEM;
	c->flags &= ~SLOT_SHARED;
	sc = store_scratch_get(dev->csize);
	if (!sc)
		return -ENOMEM;
	obj = zpool_map(dev->pool, slot_handle(t));
	memcpy(sc->cbuf, obj, slot_size(t));
	zpool_unmap(dev->pool, obj);
	ret = zpool_store(dev->pool, sc->cbuf, slot_size(t), &handle);
	c->val = (uint64_t)slot_size(t) << 32 | handle;
	return ret;
}

/* Store one checked record in the fresh device; -EBADMSG with *why. */
static int record_load(struct reader *r, struct uzram *dev, uint64_t idx,
		       uint32_t flags, const unsigned char *data, uint32_t size,
		       const char **why)
{
	int ret = -ENOMEM;
	struct slot *s = slot_get(dev, idx, &ret);
	struct content c = { .flags = flags, .bank = -1 };
	uint32_t handle;

	if (!s)
		return uzram_set_error(ret, "open: %s", ret == -ENOSPC ?
				       "the slot table does not fit in the "
				       "memory limit" : "out of memory");
	if (slot_state(s) != SLOT_EMPTY)
		return -EBADMSG;      /* seen before; the caller says where */
	if ((flags & SLOT_STATE_MASK) == SLOT_SAME) {
		memcpy(&c.val, data, sizeof c.val);
	} else {
		if (flags & SLOT_SHARED)
			ret = record_share(dev, idx, flags, data, &c, why);
		else
			ret = zpool_store(dev->pool, data, size, &handle);
		if (ret == -EBADMSG)
			return ret;
		if (ret == -ENOSPC)
			return uzram_set_error(ret, "open: image %s does not "
					       "fit in the memory limit of "
					       "%llu bytes", r->path,
					       (unsigned long long)dev->mem_limit);
		if (ret)
			return uzram_set_error(ret, "open: out of memory");
		if (!(flags & SLOT_SHARED))
			c.val = (uint64_t)size << 32 | handle;
	}
	if (dev->dedup && (flags & SLOT_STATE_MASK) != SLOT_SAME &&
	    !(flags & SLOT_SHARED))
		dedup_insert_loaded(dev, &c, cluster_len(dev, idx));
	s->val = c.val;
	slot_set_flags(s, c.flags);
	content_account(dev, &c, 1, cluster_len(dev, idx));
	return 0;
}

/* Parse and store the records of a checked block. */
static int block_load(struct reader *r, struct uzram *dev, uint32_t nrec,
		      uint32_t plen)
{
	const unsigned char *p = r->buf + IMG_BLOCK_HEAD, *end = p + plen;
	char where[96];

	for (uint32_t i = 0; i < nrec; i++) {
		uint64_t idx;
		uint32_t flags, size;
		const char *why = NULL;
		int ret;

		if ((size_t)(end - p) < IMG_RECORD_HEAD)
			why = "a record past the end of its block";
		idx = why ? 0 : img_get64(p);
		flags = why ? 0 : img_get32(p + 8);
		size = why ? 0 : img_get32(p + 12);
		if (!why && size > (size_t)(end - p) - IMG_RECORD_HEAD)
			why = "a record past the end of its block";
		if (!why)
			why = record_check(r, dev, idx, flags, size);
		ret = why ? -EBADMSG : record_load(r, dev, idx, flags,
						   p + IMG_RECORD_HEAD, size,
						   &why);
		if (ret == -EBADMSG) {
			snprintf(where, sizeof where, " (record %u of block "
				 "%llu)", i, (unsigned long long)r->blocks);
			return bad(r, why ? why : "a cluster appears twice",
				   where);
		}
		if (ret)
			return ret;
		p += IMG_RECORD_HEAD + size;
	}
	if (p != end)
		return bad(r, "bytes after the last record of a block", "");
	r->records += nrec;
	return 0;
}

/* The trailer, whose magic is in r->buf already. */
static int trailer_check(struct reader *r)
{
	unsigned char *t = r->buf, extra;
	ssize_t got;
	int ret = read_exact(r, t + IMG_BLOCK_HEAD,
			     IMG_TRAILER_LEN - IMG_BLOCK_HEAD, "the trailer");

	if (ret)
		return ret;
	if (img_get64(t + IMG_T_SUM) != img_sum(t, IMG_T_SUM, r->seed))
		return bad(r, "trailer checksum mismatch", "");
	if (img_get64(t + IMG_T_BLOCKS) != r->blocks ||
	    img_get64(t + IMG_T_RECORDS) != r->records)
		return bad(r, "blocks are missing", "");
	got = read_full(r, &extra, 1);
	if (got < 0)
		return (int)got;
	return got ? bad(r, "bytes after the trailer", "") : 0;
}

/* Every block, then the trailer. */
static int blocks_load(struct reader *r, struct uzram *dev)
{
	for (;;) {
		unsigned char *b = r->buf;
		uint32_t magic, nrec, plen;
		int ret = read_exact(r, b, IMG_BLOCK_HEAD, "a block header "
				     "or the trailer");

		if (ret)
			return ret;
		magic = img_get32(b + IMG_B_MAGIC);
		if (magic == IMG_TRAILER_MAGIC)
			return trailer_check(r);
		nrec = img_get32(b + IMG_B_RECORDS);
		plen = img_get32(b + IMG_B_PAYLOAD);
		if (magic != IMG_BLOCK_MAGIC || !nrec || !plen ||
		    plen > IMG_PAYLOAD_MAX)
			return uzram_set_error(-EBADMSG, "open: image %s is "
				"corrupt: bad block header at offset %llu",
				r->path,
				(unsigned long long)(r->off - IMG_BLOCK_HEAD));
		ret = read_exact(r, b + IMG_BLOCK_HEAD, plen + IMG_SUM_LEN,
				 "a block");
		if (ret)
			return ret;
		if (img_get64(b + IMG_BLOCK_HEAD + plen) !=
		    img_sum(b, IMG_BLOCK_HEAD + plen, r->seed))
			return uzram_set_error(-EBADMSG, "open: image %s is "
				"corrupt: checksum mismatch in block %llu "
				"(bytes %llu to %llu)", r->path,
				(unsigned long long)r->blocks,
				(unsigned long long)(r->off - plen -
					IMG_BLOCK_HEAD - IMG_SUM_LEN),
				(unsigned long long)r->off);
		ret = block_load(r, dev, nrec, plen);
		if (ret)
			return ret;
		r->blocks++;
	}
}

int image_open(const struct uzram_config *cfg, struct uzram **devp)
{
	struct reader r = { .path = cfg->image };
	struct uzram *dev = NULL;
	int ret;

	r.fd = open(cfg->image, O_RDONLY | O_CLOEXEC);
	if (r.fd < 0)
		return uzram_set_error(-errno, "open: cannot open image %s: %s",
				       cfg->image, strerror(errno));
	(void)posix_fadvise(r.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	r.buf = malloc(IMG_BLOCK_HEAD + IMG_PAYLOAD_MAX + IMG_SUM_LEN);
	if (!r.buf)
		ret = uzram_set_error(-ENOMEM, "open: out of memory");
	else
		ret = device_from_header(&r, cfg, &dev);
	if (!ret)
		ret = blocks_load(&r, dev);
	/* the tier's thread may walk the table: only once it is loaded */
	if (!ret && cfg->backing)
		ret = device_tier_open(dev, cfg->backing, cfg->backing_flags,
				       cfg->high_watermark, cfg->low_watermark);
	free(r.buf);
	close(r.fd);
	if (ret) {
		uzram_close(dev);
		return ret;
	}
	*devp = dev;
	return 0;
}
