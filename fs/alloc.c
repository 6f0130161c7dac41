// SPDX-License-Identifier: MIT
/*
 * alloc.c - the free space of the device: one bit a device block (a
 * cluster), 1 for a block some file owns. A block is found from a hint
 * (the block after the file's previous one, so that a file written in
 * order lies in order and its reads and writes become long device runs),
 * else from a rotor that goes round the device. All under alloc_lock; the
 * scan reads 64 bits at a time.
 *
 * Block 0 is never handed out: it holds a saved tree's superblock
 * (tree_image.c).
 *
 * Every free block is a hole on the device: alloc_free_run() discards the
 * blocks before it marks them free, so their memory goes back at once and
 * a block handed out again reads as zeros (a partial write into it needs
 * no zeroing). Discarding first matters: once the bit is clear another
 * file may take the block and write it.
 */
#include <errno.h>
#include <stdlib.h>

#include "uzram.h"
#include "uzfs_impl.h"

int alloc_init(struct uzfs *fs)
{
	uint64_t words = (fs->nblocks + 63) / 64;

	fs->bitmap = calloc(words ? words : 1, sizeof *fs->bitmap);
	if (!fs->bitmap)
		return -ENOMEM;
	/* the bits past the last block are used for good */
	if (fs->nblocks % 64)
		fs->bitmap[words - 1] = ~0ull << (fs->nblocks % 64);
	/* block 0 is the superblock of a saved tree (tree_image.c) */
	fs->bitmap[0] |= 1;
	fs->nfree = fs->nblocks ? fs->nblocks - 1 : 0;
	fs->rotor = 1;
	return pthread_mutex_init(&fs->alloc_lock, NULL) ? -ENOMEM : 0;
}

void alloc_release(struct uzfs *fs)
{
	if (!fs->bitmap)
		return;
	free(fs->bitmap);
	fs->bitmap = NULL;
	pthread_mutex_destroy(&fs->alloc_lock);
}

/* The first clear bit at or after word w's bit b, or UINT64_MAX. */
static uint64_t scan(const struct uzfs *fs, uint64_t from, uint64_t to)
{
	uint64_t w = from / 64, end = (to + 63) / 64;
	uint64_t bits = fs->bitmap[w] | ((1ull << (from % 64)) - 1);

	for (;;) {
		if (~bits) {
			uint64_t blk = w * 64 + (uint64_t)__builtin_ctzll(~bits);

			return blk < to ? blk : UINT64_MAX;
		}
		if (++w >= end)
			return UINT64_MAX;
		bits = fs->bitmap[w];
	}
}

int alloc_block(struct uzfs *fs, uint64_t hint, uint64_t *blk)
{
	uint64_t b = UINT64_MAX;

	pthread_mutex_lock(&fs->alloc_lock);
	if (fs->nfree) {
		if (hint < fs->nblocks && !(fs->bitmap[hint / 64] >> (hint % 64) & 1))
			b = hint;
		if (b == UINT64_MAX)
			b = scan(fs, fs->rotor, fs->nblocks);
		if (b == UINT64_MAX)
			b = scan(fs, 0, fs->nblocks);
	}
	if (b != UINT64_MAX) {
		fs->bitmap[b / 64] |= 1ull << (b % 64);
		fs->nfree--;
		fs->rotor = b + 1 < fs->nblocks ? b + 1 : 0;
	}
	pthread_mutex_unlock(&fs->alloc_lock);
	if (b == UINT64_MAX)
		return -ENOSPC;
	*blk = b;
	return 0;
}

void alloc_free_run(struct uzfs *fs, uint64_t blk, uint64_t n)
{
	if (!n)
		return;
	/* A discard of whole clusters only drops them: it cannot fail. */
	uzram_discard(fs->dev, (size_t)(n * fs->bsize), blk * fs->bsize);
	pthread_mutex_lock(&fs->alloc_lock);
	for (uint64_t b = blk; b < blk + n; b++)
		fs->bitmap[b / 64] &= ~(1ull << (b % 64));
	fs->nfree += n;
	pthread_mutex_unlock(&fs->alloc_lock);
	atomic_fetch_add(&fs->freed, n);
}
