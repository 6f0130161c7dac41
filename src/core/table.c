// SPDX-License-Identifier: MIT
/*
 * table.c - the slot table's chunks: slot_get(), which finds a cluster's
 * slot and makes its chunk on the first write into the chunk's range.
 *
 * The table is sparse because holes must cost nothing, even to look at:
 * reading never-written memory faults pages in on some kernels, so a
 * reader, block status or discard of a hole must not touch the table.
 * A chunk is created by the first write into its range, published with a
 * compare-and-swap, and kept until the device is closed. The table counts
 * against mem_limit: a chunk that would take mem_used_total + table_bytes
 * past the limit is not made, and the write needing it fails with -ENOSPC
 * (otherwise zeroing a large device with NO_HOLE grew the table, 16 bytes
 * a cluster, outside any limit), unless a tier can write enough back first
 * (the make_room hook: tier_make_room()). The allocator's own limit is
 * kept at mem_limit minus the table (table_limit_apply()).
 *
 * A chunk's room is held out of the allocator while it is made
 * (dev->table_pending, which table_limit_apply() subtracts too), so that
 * the room the tier makes for it is not taken by writers on other threads
 * first (chunk_room()).
 *
 * A device in the no-fault mode (uzram_set_refill()) has its whole table
 * made and resident when the mode begins (table_make_all()), as the
 * kernel's zram allocates its table when its size is set: a chunk made
 * by a write would be an mmap() (the mmap lock, for writing) and page
 * faults in a thread that serves swap I/O. v32 on 6.12 hung so: a queue
 * thread's mmap() of a chunk queued for the lock behind the refill
 * thread's munlock(), which waited for a fault in reclaim, which waited
 * for that queue.
 *
 * Locks: none. The directory's entries are published with a
 * compare-and-swap; of two threads making one chunk, the loser unmaps its
 * copy and takes the winner's.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include "uzram.h"
#include "base/base.h"
#include "core.h"

/*
 * Room for chunk i within mem_limit, with the allocator and the table as
 * they are. The chunk's bytes are first held out of the allocator
 * (table_pending), so that the room a tier makes for it is not taken by
 * the writers of other threads before it is made: without that, a write
 * that crossed into a new chunk's range with others in flight failed with
 * -ENOSPC although the tier could write back (t69). Returns with the hold
 * taken; chunk_room_done() gives it back.
 */
static bool chunk_room(struct uzram *dev, uint64_t i)
{
	uint64_t need = chunk_bytes(dev, i);

	atomic_fetch_add_explicit(&dev->table_pending, need,
				  memory_order_relaxed);
	table_limit_apply(dev);
	/* a step of the tier frees about what it aims at: try a few */
	for (int tries = 0; tries < 4; tries++) {
		uint64_t held = atomic_load_explicit(&dev->table_pending,
						     memory_order_relaxed);

		if (mem_fits(dev, held))
			return true;
		/* memory is full: the tier, if any, makes room in this thread */
		if (!dev->hooks.make_room)
			return false;
		dev->hooks.make_room(dev, table_bytes(dev) + held);
	}
	return mem_fits(dev, atomic_load_explicit(&dev->table_pending,
						  memory_order_relaxed));
}

static void chunk_room_done(struct uzram *dev, uint64_t i)
{
	atomic_fetch_sub_explicit(&dev->table_pending, chunk_bytes(dev, i),
				  memory_order_relaxed);
	table_limit_apply(dev);
}

/*
 * The slot of cluster idx, creating its chunk if needed; NULL with *err
 * -ENOSPC (the limit) or -ENOMEM.
 */
struct slot *slot_get(struct uzram *dev, uint64_t idx, int *err)
{
	struct slot *_Atomic *entry = &dev->dir[idx >> CHUNK_SHIFT];
	struct slot *chunk = atomic_load_explicit(entry, memory_order_acquire);
	struct slot *expected = NULL;
	bool room;

	if (__builtin_expect(chunk != NULL, 1))
		return &chunk[idx & (CHUNK_SLOTS - 1)];
	room = chunk_room(dev, idx >> CHUNK_SHIFT);
	/*
	 * Anonymous memory is zeroed, and a zero slot is an unlocked hole;
	 * so is a kept store's file where no chunk was made.
	 */
	if (!room)
		chunk = MAP_FAILED;
	else if (dev->table_map)
		chunk = dev->table_map + (idx >> CHUNK_SHIFT) * CHUNK_SLOTS;
	else
		chunk = mmap(NULL, CHUNK_BYTES, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (chunk == MAP_FAILED) {
		chunk_room_done(dev, idx >> CHUNK_SHIFT);
		*err = room ? -ENOMEM : -ENOSPC;
		return NULL;
	}
	if (atomic_compare_exchange_strong_explicit(entry, &expected, chunk,
						    memory_order_acq_rel,
						    memory_order_acquire)) {
		atomic_fetch_add_explicit(&dev->chunks_used, 1,
					  memory_order_relaxed);
	} else {
		if (!dev->table_map)
			munmap(chunk, CHUNK_BYTES);
		chunk = expected;
	}
	chunk_room_done(dev, idx >> CHUNK_SHIFT);
	return &chunk[idx & (CHUNK_SLOTS - 1)];
}

/*
 * Make the page p resident and writable without changing it: an atomic or
 * of 0 is a write for the MMU, and a slot's lock word may be in use.
 */
static void page_touch_write(void *p)
{
	atomic_fetch_or_explicit((_Atomic uint32_t *)p, 0, memory_order_relaxed);
}

int table_make_all(struct uzram *dev)
{
	for (uint64_t i = 0; i < dev->nchunks; i++) {
		int err = 0;
		struct slot *s = slot_get(dev, i << CHUNK_SHIFT, &err);
		unsigned char *p = (unsigned char *)s;
		size_t len = chunk_bytes(dev, i);

		if (!s)
			return err;
		if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
			continue;
		if (errno != EINVAL) /* EINVAL: a kernel before 5.14 */
			return -ENOMEM;
		for (size_t off = 0; off < len; off += PAGE)
			page_touch_write(p + off);
	}
	return 0;
}
