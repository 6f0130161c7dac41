// SPDX-License-Identifier: MIT
/*
 * tier.c - the second tier's space and its I/O on the store's paths: the
 * segments of the backing store (the layout is drawn in tier.h), the read
 * of a backed cluster, the write-through of a cluster when memory is full,
 * and the wake-up of the policy thread (tier_kick()).
 *
 * Reading a backed cluster is one read of its object, under the slot lock
 * held shared by the caller, so a rewrite cannot free the place while it
 * is read; a raw object is read straight into the destination, a
 * compressed one into the thread's scratch and decoded with the codec of
 * the slot's priority. A failed read fails that request only: the object
 * stays where it is.
 *
 * Write-through is the policy's last resort, taken by a writer whose
 * object the allocator refused for the memory limit: the object (already
 * compressed) is appended on head 1 with one write and the slot names it
 * directly; the background thread is woken to make room in memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "base/base.h"
#include "core/core.h"
#include "tier.h"
#include "zcomp/zcomp.h"

/* The lowest free segment, made OPEN; -ENOSPC if none. Under sp->lock. */
static int seg_alloc(struct space *sp, uint64_t *seg)
{
	for (uint64_t i = 0; i < sp->nsegs; i++) {
		if (sp->state[i] == SEG_FREE) {
			sp->state[i] = SEG_OPEN;
			sp->used++;
			*seg = i;
			return 0;
		}
	}
	return -ENOSPC;
}

int space_alloc(struct space *sp, unsigned head, uint32_t len, uint64_t *off)
{
	int ret = 0;

	pthread_mutex_lock(&sp->lock);
	if (!sp->open[head] || sp->fill[head] + len > SEG_BYTES) {
		uint64_t seg;

		ret = seg_alloc(sp, &seg);
		if (ret)
			goto out;
		if (sp->open[head]) {
			/* a segment left with nothing live is freed by the
			 * space_free() that takes its last byte; an empty one
			 * never held anything */
			uint64_t old = sp->head[head];

			sp->state[old] = SEG_FULL;
			if (!sp->live[old]) {
				sp->state[old] = SEG_FREE;
				sp->used--;
			}
		}
		sp->head[head] = seg;
		sp->fill[head] = 0;
		sp->open[head] = true;
	}
	*off = (sp->head[head] << SEG_SHIFT) + sp->fill[head];
	sp->fill[head] += len;
	sp->live[sp->head[head]] += len;
out:
	pthread_mutex_unlock(&sp->lock);
	return ret;
}

void space_free(struct tier *t, uint64_t off, uint32_t len)
{
	struct space *sp = &t->sp;
	uint64_t seg = off >> SEG_SHIFT;

	pthread_mutex_lock(&sp->lock);
	sp->live[seg] -= len;
	if (!sp->live[seg] && sp->state[seg] == SEG_FULL) {
		/* the discard runs under the lock: once the segment is free
		 * a head may take it, and must not lose bytes to a late hole */
		backing_discard(t->b, SEG_BYTES, seg << SEG_SHIFT);
		sp->state[seg] = SEG_FREE;
		sp->used--;
	}
	pthread_mutex_unlock(&sp->lock);
}

void tier_free(struct uzram *dev, uint64_t off, uint32_t len)
{
	space_free(dev->tier, off, len);
}

int tier_thread_prepare(struct uzram *dev)
{
	return dev->tier ? backing_thread_prepare(dev->tier->b) : 0;
}

uint64_t space_used(struct space *sp)
{
	uint64_t n;

	pthread_mutex_lock(&sp->lock);
	n = sp->used;
	pthread_mutex_unlock(&sp->lock);
	return n << SEG_SHIFT;
}

int tier_read(struct uzram *dev, const struct slot *s, unsigned char *dst,
	      size_t len, unsigned char *scratch)
{
	uint32_t size = backed_size(s->val);
	uint64_t off = backed_off(s->val);
	int ret;

	if (size > len || !size)
		return -EIO;
	ret = backing_pread(dev->tier->b, size == len ? dst : scratch, size,
			    off);
	if (ret) {
		stats_inc(&dev->stats.bd_failed_reads);
		return -EIO;
	}
	stats_addu(&dev->stats.bd_reads, len >> PAGE_SHIFT);
	if (size == len)
		return 0;
	return zcomp_decompress(comp_of(dev, slot_flags(s)),
				scratch, size, dst, len);
}

int tier_write_through(struct uzram *dev, const void *obj, uint32_t size,
		       size_t len, uint64_t *val)
{
	struct tier *t = dev->tier;
	uint64_t off;
	int ret;

	ret = space_alloc(&t->sp, HEAD_THROUGH, round16(size), &off);
	if (ret)
		return ret;     /* both tiers are full */
	ret = backing_pwrite(t->b, obj, size, off);
	if (ret) {
		space_free(t, off, round16(size));
		stats_inc(&dev->stats.bd_failed_writes);
		return ret;
	}
	*val = backed_val(off, size);
	stats_addu(&dev->stats.bd_writes, len >> PAGE_SHIFT);
	stats_addu(&dev->stats.wt_pages, len >> PAGE_SHIFT);
	tier_kick(t);
	return 0;
}

void tier_kick(struct tier *t)
{
	pthread_mutex_lock(&t->lock);
	t->kick = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

/* 0 if dev has a tier; else the error for the call named what. */
int tier_need(struct uzram *dev, const char *what)
{
	if (!dev)
		return uzram_set_error(-EINVAL, "%s: NULL device", what);
	if (!dev->tier)
		return uzram_set_error(-ENODEV, "%s: the device has no backing "
				       "store", what);
	return 0;
}
