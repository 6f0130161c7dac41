/* SPDX-License-Identifier: MIT */
/*
 * zpool.h - the allocator of compressed objects (zsmalloc's role).
 *
 * Objects of 1 byte up to zpool's max object size are packed into
 * "zspages": runs of 1..16 pages that are contiguous in our address space,
 * carved from one region reserved at creation. An object that crosses a
 * 4 KiB boundary is therefore read in place, with no bounce copy.
 *
 * Objects are named by handles, an indirection that lets compaction move
 * them. A handle is a non-zero 32-bit number; 0 is never a valid handle.
 *
 * Concurrency contract (the rules themselves live at the top of zpool.c):
 *  - zpool_store(), zpool_free(), zpool_compact() and zpool_stats() may be
 *    called from any thread at any time.
 *  - zpool_map() pins the object's zspage against reuse until
 *    zpool_unmap(); it never waits, neither for other readers nor for a
 *    compaction that is moving that very zspage.
 *  - The caller guarantees that a handle is not freed while it is mapped,
 *    and is freed once (the store's page lock does both).
 */
#ifndef UZRAM_ZPOOL_H
#define UZRAM_ZPOOL_H

#include <stddef.h>
#include <stdint.h>

struct zpool;

/* ---- zpool_region.c: the pool's lifetime, limit and figures ---- */

/*
 * Create a pool for objects of at most max_object bytes (a multiple of 16,
 * at most 64 KiB) that may hold up to max_objects live objects at once;
 * max_objects sizes the address-space reservation and the handle table,
 * not memory. Storing more fails with -ENOSPC.
 * Returns 0 and stores the pool in *out, -EINVAL or -ENOMEM.
 */
int zpool_create(uint64_t max_objects, size_t max_object, struct zpool **out);
void zpool_destroy(struct zpool *pool);          /* NULL is accepted */

/*
 * A pool over a file (a kept store's memfd, src/device/keep.c) instead of
 * private memory: its frame table, cells and region are mapped MAP_SHARED
 * from fd at off and on, in that order, each part starting on a multiple of
 * ZPOOL_FILE_ALIGN; zpool_file_bytes() is how many bytes of the file past off
 * the pool uses. The address space is never halved as zpool_create()'s is,
 * so that the same arguments always give the same layout. Freed pages are
 * given back by punching holes in the file. What the file holds is read only
 * by zpool_adopt_*() (zpool_adopt.c). Returns 0, -EINVAL or -ENOMEM.
 */
#define ZPOOL_FILE_ALIGN (UINT64_C(2) << 20)
struct zpool_file {
	int fd;
	uint64_t off;
};
uint64_t zpool_file_bytes(uint64_t max_objects, size_t max_object);
int zpool_create_file(uint64_t max_objects, size_t max_object,
		      const struct zpool_file *file, struct zpool **out);

/*
 * zpool_adopt.c: take over the objects of a pool made by another process on
 * the same file (zpool_create_file() with the same arguments), which may
 * have been killed at any instant. A pool just created on the file calls
 * zpool_adopt_begin(), zpool_adopt_object() once for each object still
 * named (by the slots), and then zpool_adopt_end(), which rebuilds what lived in the old process
 * only (descriptors, lists, free handles, counters) and frees every object
 * that was not claimed. No store, free or map may run before the end.
 *
 * zpool_adopt_object(): claim handle h, whose object must be `size` bytes.
 * Returns 0, or -EUCLEAN (and claims nothing) if the cell does not hold a
 * valid object of that size: the handle is out of range, the offset outside
 * the region, the frame's class unknown, the object not on a spot of its
 * class, or the spot already claimed.
 * zpool_adopt_begin(), zpool_adopt_end(): 0 or -ENOMEM. All three are
 * single-threaded.
 */
int zpool_adopt_begin(struct zpool *pool);
int zpool_adopt_object(struct zpool *pool, uint32_t h, uint32_t size);
int zpool_adopt_end(struct zpool *pool);

/* Limit the memory the pool holds (mem_used below); 0 removes the limit. */
void zpool_set_limit(struct zpool *pool, uint64_t bytes);

/*
 * Make frames for `bytes` of zspages resident now (within the limit), put
 * them in the pool's cache, and keep at least that many pages cached from
 * now on: stores take them with no page fault and no system call until
 * the pool holds `bytes`. 0 gives the reserve up (the cache trims as
 * before). Returns 0, -ENOSPC (the limit or the region is reached first:
 * what fitted stays reserved) or -ENOMEM. Not for concurrent callers of
 * itself; stores and frees may run meanwhile. (zpool_reserve.c)
 */
int zpool_reserve(struct zpool *pool, uint64_t bytes);

/* The bytes the cache keeps as the reserve now. (zpool_reserve.c) */
uint64_t zpool_reserved(const struct zpool *pool);

/*
 * The no-fault pool (zpool_reserve.c): from now on zpool_store() never
 * makes memory resident, nor mallocs. It takes a frame of the cache (the
 * reserve's, or one a free left), and a new zspage's descriptor from a
 * stock where the zspage's tail cannot hold it; when there is none, it
 * wakes the refill and waits for it up to wait_ms, then fails with -ENOSPC
 * and nothing stored. A thread of the caller's calls zpool_refill() in a
 * loop, which keeps the cache between half of a target and the target;
 * the target is between min and max bytes and follows the stores' demand.
 * min 0 ends the mode (stores make frames themselves again). Returns 0 or
 * -EINVAL (min > max).
 * Thread-safe with stores and frees; not with itself.
 *
 * zpool_refill(): wait up to timeout_ms until the cache falls under half
 * the target or a store waits, then make frames resident (faulting, and
 * waiting in reclaim if the kernel makes it) until the cache holds the
 * target. Returns the pages made (0: nothing was needed), -ENOSPC (the
 * limit or the region: no frame could be made) or -ENOMEM; -EINVAL when
 * the mode is off. For one thread at a time.
 */
int zpool_set_refill(struct zpool *pool, uint64_t min, uint64_t max,
		     unsigned wait_ms);
long zpool_refill(struct zpool *pool, unsigned timeout_ms);

struct zpool_refill_stats {
	uint64_t waits;   /* stores that found no frame and waited */
	uint64_t misses;  /* of those, stores that failed (-ENOSPC) */
	uint64_t wait_ns; /* the time those waits took, in total */
	uint64_t made;    /* bytes the refill made resident, in total */
	uint64_t target;  /* bytes it fills the cache to now; 0: mode off */
	uint64_t cached;  /* bytes of resident frames cached now */
};
void zpool_refill_stats(const struct zpool *pool, struct zpool_refill_stats *st);

/* Restart the high-water mark (mem_used_max) from the current mem_used. */
void zpool_reset_max(struct zpool *pool);

/* ---- zpool.c: objects ---- */

/*
 * Allocate an object of `size` bytes (1..max_object), copy `data` into it and
 * store its handle in *handle. Returns 0, or:
 *   -ENOSPC  the limit, or the reserved address space, would be exceeded;
 *            or, in a no-fault pool, no resident frame came in time;
 *   -ENOMEM  metadata could not be allocated;
 *   -EINVAL  size is 0 or above max_object.
 * Nothing is allocated when it fails.
 */
int zpool_store(struct zpool *pool, const void *data, size_t size,
		uint32_t *handle);

/*
 * The size an object was stored with. The caller guarantees, as for
 * zpool_map(), that the handle is not freed meanwhile. Lock-free.
 */
uint32_t zpool_obj_size(struct zpool *pool, uint32_t handle);

/* Free an object. The handle may be reused by a later zpool_store(). */
void zpool_free(struct zpool *pool, uint32_t handle);

/*
 * Return the address of the object, pinned in place until zpool_unmap().
 * The memory is read-only to the caller. Lock-free; no allocation, no
 * syscall. Every zpool_map() needs exactly one zpool_unmap() of the address
 * it returned (compaction may have given the handle another one meanwhile).
 */
const void *zpool_map(struct zpool *pool, uint32_t handle);
void zpool_unmap(struct zpool *pool, const void *obj);

/* ---- zpool_compact.c ---- */

/*
 * Move objects from sparse zspages into fuller ones of the same size class
 * and give every page that holds no object back to the OS: emptied zspages
 * and the pool's cache of resident empty frames. Returns the number of
 * pages given back. zpool_free() also compacts a size class by itself, a
 * little at a time, once that class wastes more than a threshold; what
 * that empties stays cached, within a bound of mem_used / 256.
 */
long zpool_compact(struct zpool *pool);

/* zpool_region.c */
struct zpool_stats {
	uint64_t mem_used;        /* bytes held from the OS: zspage pages
				   * plus the pool's own metadata */
	uint64_t mem_used_max;    /* high-water mark of mem_used */
	uint64_t obj_bytes;       /* sum of the sizes passed to zpool_store() */
	uint64_t objects;         /* live objects */
	uint64_t pages_compacted; /* pages of zspages emptied by
				   * compaction, total */
};

void zpool_stats(struct zpool *pool, struct zpool_stats *st);

#endif
