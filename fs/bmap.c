// SPDX-License-Identifier: MIT
/*
 * bmap.c - a regular file's bytes on the device. File block i (bytes
 * i*bsize to (i+1)*bsize, bsize the device's cluster size) lives in one
 * device block, or nowhere (a hole, read as zeros). The map is a two-level
 * table, grown only as far as the highest block written, so a sparse file
 * of any size costs nothing:
 *
 *   n->chunks[i / 1024] --> [ blk+1 | 0 | blk+1 | ... ]  1024 entries
 *
 * A block belongs to one file; no two files share one, so a cluster is
 * never read-modified-written for another file, and freeing a file's
 * block gives its memory back (alloc.c discards it). Reads and writes
 * gather the blocks that lie in a row on the device into one uzram_read()
 * or uzram_write() call: a file written in order is one long run.
 *
 * Invariant: the bytes of a mapped block past the file's size are zeros
 * (truncate zeroes them), so a file grown later shows zeros there.
 *
 * The staged tail. Programs write files in pieces (tar 10 KiB at a time,
 * and the kernel splits each piece at a page it does not hold whole), so
 * the last block of a file being written would be compressed once per
 * piece, the whole cluster each time (16 KiB by default: under callgrind
 * an untar of /usr/include/linux cost the device's write path 113 M
 * instructions against 60 M with 4 KiB clusters). Instead, a write that
 * ends inside a block it covers from the block's start, at the end of the
 * file, leaves that block's bytes in fs->stage_buf (the block is mapped,
 * so ENOSPC still comes from the write); the next write that appends to
 * it fills it further, and the block goes to the device once, whole,
 * when it is full, when any other write or a read, truncate or hole
 * punch comes, or within a second (the compactor thread), or before
 * a save. One block is staged at a time, for the whole file system, and
 * none on a device with a memory limit (cfg->no_stage: there the device's
 * ENOSPC must come from the write itself):
 *
 *   write(a, 0..10K)   blocks 0 (none whole)  -> stage a:0, 10K
 *   write(a, 10K..20K) stage a:0 gets 6K, full -> device; 4K -> stage a:1
 *   write(b, 0..3K)    stage a:1 -> device (zeros after 4K); b:0 staged
 *   read(b)            stage b:0 -> device, then the read
 *
 * Another node's staged block is written without that node's lock: every
 * path that changes a node's map or its blocks' bytes (bmap_write,
 * bmap_zero, bmap_truncate, bmap_release) deals with the stage under
 * stage_lock first, so the staged device block stays the node's until
 * then. A node's lock is taken before stage_lock, never the reverse.
 *
 * The caller holds the node's lock: for writing around every call that
 * changes the map, for reading around bmap_get/bmap_read/bmap_seek.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "uzfs_impl.h"

uint64_t bmap_get(const struct node *n, uint64_t fblk)
{
	uint64_t c = fblk / BMAP_CHUNK;

	if (c >= n->nchunks || !n->chunks[c])
		return 0;
	return n->chunks[c][fblk % BMAP_CHUNK];
}

/* The entry of fblk, its chunk made if missing; NULL when out of memory. */
uint32_t *bmap_slot(struct node *n, uint64_t fblk)
{
	uint64_t c = fblk / BMAP_CHUNK;

	if (c >= n->nchunks) {
		uint64_t want = c + 1 > n->nchunks * 2 ? c + 1 : n->nchunks * 2;
		uint32_t **p = realloc(n->chunks, want * sizeof *p);

		if (!p)
			return NULL;
		memset(p + n->nchunks, 0, (want - n->nchunks) * sizeof *p);
		n->chunks = p;
		n->nchunks = want;
	}
	if (!n->chunks[c]) {
		n->chunks[c] = calloc(BMAP_CHUNK, sizeof **n->chunks);
		if (!n->chunks[c])
			return NULL;
	}
	return &n->chunks[c][fblk % BMAP_CHUNK];
}

int bmap_map(struct uzfs *fs, struct node *n, uint64_t fblk, uint64_t *blk)
{
	uint32_t *s = bmap_slot(n, fblk);
	uint64_t hint = fblk ? bmap_get(n, fblk - 1) : 0;
	int r;

	if (!s)
		return -ENOMEM;
	if (*s) {
		*blk = *s - 1;
		return 0;
	}
	r = alloc_block(fs, hint ? hint : UINT64_MAX, blk);
	if (r < 0)
		return r;
	*s = (uint32_t)(*blk + 1);
	n->blocks++;
	return 0;
}

/* ---- the staged tail ---- */

/* Write the staged block whole (zeros after stage_len) and forget it; the
 * caller holds stage_lock. On failure it stays staged. */
static int stage_flush_locked(struct uzfs *fs)
{
	int r;

	if (!fs->stage_node)
		return 0;
	memset(fs->stage_buf + fs->stage_len, 0, fs->bsize - fs->stage_len);
	r = uzram_write(fs->dev, fs->stage_buf, fs->bsize,
			fs->stage_blk * fs->bsize);
	if (!r)
		fs->stage_node = NULL;
	return r;
}

int bmap_stage_flush(struct uzfs *fs, const struct node *n)
{
	int r = 0;

	pthread_mutex_lock(&fs->stage_lock);
	if (fs->stage_node && (!n || fs->stage_node == n))
		r = stage_flush_locked(fs);
	pthread_mutex_unlock(&fs->stage_lock);
	return r;
}

/* Forget n's staged block: n's blocks are being freed. */
static void stage_drop(struct uzfs *fs, const struct node *n)
{
	pthread_mutex_lock(&fs->stage_lock);
	if (fs->stage_node == n)
		fs->stage_node = NULL;
	pthread_mutex_unlock(&fs->stage_lock);
}

/*
 * A write of n at off: its first bytes into n's staged block if they
 * append to it (returns how many), else whatever is staged onto the
 * device first (returns 0); a negative errno if n's own staged block
 * could not be written (another node's stays staged, tried again later).
 */
static long stage_continue(struct uzfs *fs, struct node *n, const char *buf,
			   size_t len, uint64_t off)
{
	size_t k = 0;
	int r = 0;

	pthread_mutex_lock(&fs->stage_lock);
	if (fs->stage_node == n && off == n->size &&
	    off == fs->stage_fblk * fs->bsize + fs->stage_len) {
		k = fs->bsize - fs->stage_len < len ? fs->bsize - fs->stage_len :
						     len;
		memcpy(fs->stage_buf + fs->stage_len, buf, k);
		fs->stage_len += (uint32_t)k;
		if (fs->stage_len == fs->bsize &&
		    (r = stage_flush_locked(fs)) < 0) {
			fs->stage_len -= (uint32_t)k;
			k = 0;
		}
	} else if (fs->stage_node) {
		r = stage_flush_locked(fs);
		if (r < 0 && fs->stage_node != n)
			r = 0;
	}
	pthread_mutex_unlock(&fs->stage_lock);
	return r < 0 ? r : (long)k;
}

/* The last `tail` bytes of a write, src, which start file block fblk at
 * the end of n: staged if the stage is free, else written. */
static int stage_new(struct uzfs *fs, struct node *n, const char *src,
		     size_t tail, uint64_t fblk)
{
	uint64_t blk;
	bool staged = false;
	int r = bmap_map(fs, n, fblk, &blk);

	if (r < 0)
		return r;
	pthread_mutex_lock(&fs->stage_lock);
	if (!fs->stage_node && !fs->no_stage) {
		memcpy(fs->stage_buf, src, tail);
		fs->stage_node = n;
		fs->stage_fblk = fblk;
		fs->stage_blk = blk;
		fs->stage_len = (uint32_t)tail;
		staged = true;
	}
	pthread_mutex_unlock(&fs->stage_lock);
	return staged ? 0 : uzram_write(fs->dev, src, tail, blk * fs->bsize);
}

void bmap_free_range(struct uzfs *fs, struct node *n, uint64_t first,
		     uint64_t end)
{
	uint64_t run = 0, len = 0;

	for (uint64_t c = first / BMAP_CHUNK; c < n->nchunks &&
	     c * BMAP_CHUNK < end; c++) {
		uint32_t *e = n->chunks[c];
		uint64_t i = c * BMAP_CHUNK < first ? first % BMAP_CHUNK : 0;
		uint64_t stop = end - c * BMAP_CHUNK < BMAP_CHUNK ?
				end - c * BMAP_CHUNK : BMAP_CHUNK;
		bool left = false;

		for (; e && i < stop; i++) {
			if (!e[i])
				continue;
			if (len && e[i] - 1 == run + len) {
				len++;
			} else {
				alloc_free_run(fs, run, len);
				run = e[i] - 1;
				len = 1;
			}
			e[i] = 0;
			n->blocks--;
		}
		for (i = 0; e && i < BMAP_CHUNK && !left; i++)
			left = e[i] != 0;
		if (e && !left) {
			free(e);
			n->chunks[c] = NULL;
		}
	}
	alloc_free_run(fs, run, len);
}

void bmap_release(struct uzfs *fs, struct node *n)
{
	stage_drop(fs, n);
	bmap_free_range(fs, n, 0, UINT64_MAX);
	free(n->chunks);
	n->chunks = NULL;
	n->nchunks = 0;
}

/* Zeros into [off, off + len) inside one block, if it is mapped. */
static int zero_part(struct uzfs *fs, struct node *n, uint64_t off, uint64_t len)
{
	uint64_t e = bmap_get(n, off / fs->bsize);

	if (!e || !len)
		return 0;
	return uzram_write_zeroes(fs->dev, (size_t)len,
				  (e - 1) * fs->bsize + off % fs->bsize, 0);
}

int bmap_zero(struct uzfs *fs, struct node *n, uint64_t off, uint64_t len)
{
	uint64_t bs = fs->bsize, end = off + len;
	uint64_t first = (off + bs - 1) / bs, last = end / bs;
	int r = bmap_stage_flush(fs, n);

	if (r < 0)
		return r;
	if (first > last) /* inside one block */
		return zero_part(fs, n, off, len);
	r = zero_part(fs, n, off, first * bs - off);
	if (!r)
		r = zero_part(fs, n, last * bs, end - last * bs);
	if (!r)
		bmap_free_range(fs, n, first, last);
	return r;
}

int bmap_truncate(struct uzfs *fs, struct node *n, uint64_t size)
{
	uint64_t bs = fs->bsize;
	int r = bmap_stage_flush(fs, n);

	if (r < 0)
		return r;
	if (size < n->size) {
		uint64_t end = (size + bs - 1) / bs * bs;

		/* the tail of the new last block reads as zeros later */
		if (end > size)
			r = zero_part(fs, n, size,
				      (n->size < end ? n->size : end) - size);
		if (r < 0)
			return r;
		bmap_free_range(fs, n, (size + bs - 1) / bs, UINT64_MAX);
	}
	n->size = size;
	return 0;
}

int bmap_read(struct uzfs *fs, const struct node *n, char *buf, size_t len,
	      uint64_t off)
{
	uint64_t bs = fs->bsize;
	size_t done = 0;
	int r = bmap_stage_flush(fs, n);

	if (r < 0)
		return r;
	while (done < len) {
		uint64_t pos = off + done, e = bmap_get(n, pos / bs);
		size_t run = (size_t)(bs - pos % bs);

		if (run > len - done)
			run = len - done;
		/* grow the run over the blocks that follow on the device */
		while (done + run < len) {
			uint64_t f = (pos + run) / bs, e2 = bmap_get(n, f);

			if (e ? e2 != e + (f - pos / bs) : e2 != 0)
				break;
			run += len - done - run < bs ? len - done - run : bs;
		}
		if (!e) {
			memset(buf + done, 0, run);
		} else {
			r = uzram_read(fs->dev, buf + done, run,
				       (e - 1) * bs + pos % bs);
			if (r < 0)
				return r;
		}
		done += run;
	}
	return 0;
}

/* Map the blocks of [pos, pos + want) that lie in a row on the device;
 * the length of that row, or a negative errno when none could be. */
static long map_run(struct uzfs *fs, struct node *n, uint64_t pos, size_t want,
		    uint64_t *dev_off)
{
	uint64_t bs = fs->bsize, blk, next;
	size_t run = (size_t)(bs - pos % bs);
	int r = bmap_map(fs, n, pos / bs, &blk);

	if (r < 0)
		return r;
	*dev_off = blk * bs + pos % bs;
	if (run > want)
		run = want;
	while (run < want) {
		if (bmap_map(fs, n, (pos + run) / bs, &next) < 0 ||
		    next != blk + (pos + run) / bs - pos / bs)
			break;
		run += want - run < bs ? want - run : bs;
	}
	return (long)run;
}

/* How much of a failed run of pages went in, written again page by page. */
static size_t written_part(struct uzfs *fs, const char *buf, size_t len,
			   uint64_t dev_off)
{
	size_t done = 0;

	while (done < len) {
		size_t step = UZRAM_PAGE_SIZE - (dev_off + done) % UZRAM_PAGE_SIZE;

		if (step > len - done)
			step = len - done;
		if (uzram_write(fs->dev, buf + done, step, dev_off + done) < 0)
			break;
		done += step;
	}
	return done;
}

long bmap_write(struct uzfs *fs, struct node *n, const char *buf, size_t len,
		uint64_t off)
{
	uint64_t end = off + len;
	size_t done, tail = 0;
	long k;
	int r = 0;

	if (end > UZFS_MAX_FILE || end < off)
		return -EFBIG;
	k = stage_continue(fs, n, buf, len, off);
	if (k < 0)
		return k;
	done = (size_t)k;
	/* a last block begun here, ended inside, at the end of the file */
	if (end % fs->bsize && end - end % fs->bsize >= off + done &&
	    end >= n->size)
		tail = (size_t)(end % fs->bsize);
	while (done < len - tail) {
		uint64_t dev_off;
		long run = map_run(fs, n, off + done, len - tail - done,
				   &dev_off);

		if (run < 0) {
			r = (int)run;
			break;
		}
		r = uzram_write(fs->dev, buf + done, (size_t)run, dev_off);
		if (r < 0) {
			done += written_part(fs, buf + done, (size_t)run, dev_off);
			break;
		}
		done += (size_t)run;
	}
	if (!r && tail) {
		r = stage_new(fs, n, buf + done, tail, (end - tail) / fs->bsize);
		if (!r)
			done += tail;
	}
	if (off + done > n->size && done)
		n->size = off + done;
	if (r < 0) /* blocks mapped for bytes that did not go in */
		bmap_free_range(fs, n, (n->size + fs->bsize - 1) / fs->bsize,
				(off + len + fs->bsize - 1) / fs->bsize);
	return done || !r ? (long)done : r;
}

int64_t bmap_seek(struct uzfs *fs, const struct node *n, uint64_t off,
		  bool data)
{
	uint64_t bs = fs->bsize, size = n->size;

	for (uint64_t pos = off; pos < size;) {
		uint64_t f = pos / bs, c = f / BMAP_CHUNK;

		if (data && (c >= n->nchunks || !n->chunks[c])) {
			pos = (c + 1) * BMAP_CHUNK * bs; /* a chunk of holes */
			continue;
		}
		if ((bmap_get(n, f) != 0) == data)
			return (int64_t)pos;
		pos = (f + 1) * bs;
	}
	return data ? -ENXIO : (int64_t)size;
}
