/* SPDX-License-Identifier: MIT */
/*
 * uzram.h - the public interface of libuzram, a compressed RAM block device
 * that lives in the calling process (zram in userspace).
 *
 * This is the only header a program includes. Everything else under src/
 * is private and may change between releases.
 *
 * Model
 *   A device is an array of `size` bytes, split into pages of 4096 bytes.
 *   Each page is in one of five states:
 *     - unwritten (a hole): reads as zeros, costs no memory;
 *     - same-filled: one 8-byte value repeated, kept in the slot table;
 *     - compressed: an object in the device's allocator;
 *     - huge: a page that did not compress, kept raw in the allocator;
 *     - written back: its object moved to the device's backing store
 *       (cfg.backing; see uzram_writeback()).
 *   Reads and writes take any byte offset and length inside the device;
 *   partial pages are read-modify-written.
 *
 * Errors
 *   Every call that can fail returns 0 (or a count) on success and a
 *   negative errno value on failure. The values below are a contract and
 *   will not change. uzram_strerror() turns one into a message, and
 *   uzram_last_error() gives the detailed message of the last failure in the
 *   calling thread (e.g. which algorithms are known).
 *
 * Threads
 *   Every function taking a struct uzram is thread-safe, except
 *   uzram_close(), which must not race with any other call on the device.
 *   Reads of different pages never wait for each other, and a write locks
 *   only the pages it touches; see src/core/store.c for the lock rules.
 */
#ifndef UZRAM_H
#define UZRAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(UZRAM_BUILDING) && defined(__GNUC__)
#define UZRAM_API __attribute__((visibility("default")))
#else
#define UZRAM_API
#endif

#define UZRAM_VERSION_MAJOR 0
#define UZRAM_VERSION_MINOR 1
#define UZRAM_VERSION_PATCH 0
#define UZRAM_VERSION_NUMBER \
	(UZRAM_VERSION_MAJOR * 10000 + UZRAM_VERSION_MINOR * 100 + UZRAM_VERSION_PATCH)

/* The version of the library actually linked, as UZRAM_VERSION_NUMBER. */
UZRAM_API unsigned uzram_version_number(void);
/* The same as a "MAJOR.MINOR.PATCH" string with static storage. */
UZRAM_API const char *uzram_version_string(void);

/* Size of a device page. Device sizes are rounded up to a multiple of it. */
#define UZRAM_PAGE_SIZE 4096u

/* The largest device size, 16 TiB (2^32 pages); uzram_open() refuses more. */
#define UZRAM_SIZE_MAX (UINT64_C(1) << 44)

struct uzram;

/*
 * Configuration for uzram_open(). Always initialise it with
 * uzram_config_init(), which sets struct_size and every default; then change
 * the fields you care about. Fields are only ever added at the end, so a
 * program built against an older header keeps working.
 */
struct uzram_config {
	size_t struct_size;    /* sizeof(struct uzram_config), set by _init */
	uint64_t size;         /* device size in bytes (required, > 0) */
	const char *algorithm; /* "lz4" (default), "lz4hc", "zstd", "deflate" */
	int level;             /* codec level; 0 selects the codec's default */
	uint64_t mem_limit;    /* max bytes of memory: the allocator's
				* (stats.mem_used_total) and the page
				* table's (stats.table_bytes) together;
				* 0: no limit */
	uint32_t cluster_size; /* bytes per compression unit: 0 or 4096 (the
				* default) compresses each page alone, as zram
				* does; a power of two up to 65536 compresses
				* that many bytes as one object: a better ratio,
				* but reading any byte of a cluster decodes all
				* of it, and a write smaller than a cluster is
				* a read-modify-write of the cluster. With
				* clusters, "page" in the states above and in
				* holes, discard, block status and the failure
				* rules below means cluster. */
	/* Since 0.2: */
	const void *dict;      /* a dictionary for the algorithm (lz4, zstd),
				* as zram's algorithm_params dict=; NULL for
				* none. Copied by uzram_open(). */
	size_t dict_size;      /* its bytes: 0, or 256 to 1 MiB */
	/* The tier; see uzram_writeback(): */
	const char *backing;   /* the backing store: a path (a block device,
				* or a regular file, created if missing and
				* then empty) or an nbd:// or nbd+unix:// URI;
				* NULL (the default) for none. Read only by
				* uzram_open(). */
	uint32_t high_watermark; /* with mem_limit and a backing store, the
				  * percentage of mem_limit past which the
				  * device moves cold clusters out by itself;
				  * 0: 90 */
	uint32_t low_watermark;  /* ... down to this percentage; 0: 10
				  * below the high one */
	const char *image;     /* NULL (the default), or the path of an image
				* written by uzram_save(): the device opens
				* with the image's contents and geometry.
				* Its size, cluster size, algorithm, level,
				* secondary algorithms and dictionaries are
				* the image's; a
				* non-zero size that differs from the image's
				* is refused (-EINVAL), while algorithm, level,
				* cluster_size and dict are ignored. mem_limit
				* applies. See uzram_save(). */
	/* Since 0.3: */
	uint32_t dedup;        /* non-zero: a whole cluster whose bytes equal
				* a stored one's (an XXH3 match confirmed by a
				* byte compare) is stored as a reference to
				* that object; a write to one of the clusters
				* never changes the others. Costs an index of
				* about 10 to 13 bytes per stored object.
				* 0 (the default): off. */
	uint32_t threads;      /* helper threads, 0 (the default) to
				* UZRAM_MAX_THREADS: with n > 0, a write
				* of several whole clusters is compressed
				* and stored on the calling thread and on
				* those of the device's n threads that are
				* free, each cluster on one thread (see
				* uzram_write()). 0: on the caller's thread
				* only, as the kernel's zram does. */
	/* Since 0.4: write fast, re-encode later. */
	const char *fast_algorithm; /* NULL (the default): writes compress
				* with `algorithm`, as before. Else writes
				* compress with this codec at fast_level (e.g.
				* "lz4" at a high acceleration), and a thread
				* of the device re-encodes each stored cluster
				* with `algorithm` at `level` once it has been
				* neither written nor read for reencode_age
				* seconds. `algorithm` is then the device's
				* secondary algorithm of priority 1
				* (uzram_algorithm(dev, 1)) and fast_algorithm
				* its priority 0; the re-encode is
				* uzram_recompress()'s, so a cluster is
				* replaced only by a smaller object. The
				* thread paces itself while reads or writes
				* arrive (and for 100 ms after the last): at
				* most one cluster per millisecond (see
				* uzram_reencode_wait()). Not with a dict
				* (-EINVAL); ignored with an image, as the
				* algorithm is. */
	int fast_level;        /* the fast codec's level; 0: its default */
	uint32_t reencode_age; /* seconds a cluster must have been idle
				* before it is re-encoded, counted in the
				* device's 4-second ticks (rounded up; at most
				* 512); 0: as soon as the thread gets to it */
	/* Since 0.5: */
	int keep_fd;           /* -1 (the default): the device's memory is
				* this process's. Else a memfd
				* (memfd_create(2)) that holds the device's
				* store, so that it outlives the process: an
				* empty one gets a new store of this config;
				* one that holds a store, left by a process
				* that may have died at any instant, is
				* adopted: its size (a non-zero size must be
				* the same), algorithm and level are the
				* store's. The caller keeps the fd (a keeper
				* process holds it between servers). A kept
				* store has one-page clusters, and no dedup,
				* backing store, dictionary or image
				* (-EOPNOTSUPP); a store that does not check
				* out is refused with -EUCLEAN, and nothing is
				* served. doc/keep.md has the design. */
	/* Since 0.6: */
	uint64_t backing_flags; /* UZRAM_BACKING_* below, or'ed; 0 (the
				* default): none. Read only by uzram_open(). */
};

/*
 * uzram_config.backing_flags:
 *
 * UZRAM_BACKING_BLOCKS: a regular file as the backing store is used as
 *   the kernel uses a swap file. uzram_open() allocates all of it at once
 *   (fallocate: room for every cluster of the device raw, plus a few
 *   MiB), maps its blocks (FIEMAP), and the tier then reads and writes
 *   them on the file system's block device with O_DIRECT, never through
 *   the file system or its page cache: no block allocation, journal or
 *   inode lock on the tier's path, and no page cache filled with what the
 *   tier moves out of memory. What the server of a swap device needs
 *   (doc/block-device.md). Needs ext4 or XFS, whose files stay where they
 *   are on their block device (-EOPNOTSUPP for others: btrfs, tmpfs,
 *   overlayfs and NFS have no block device of their own, f2fs and
 *   bcachefs move a file's blocks by themselves), room for the whole file
 *   (-ENOSPC), and write access to that block device (root; -EACCES). As
 *   for a swap file: while the device is open the file is immutable
 *   (FS_IMMUTABLE_FL, with CAP_LINUX_IMMUTABLE; else unguarded), so that
 *   nothing else writes, truncates, removes or defragments it, and
 *   reading it through the file system shows none of the tier's bytes.
 *   uzram_close() empties it and clears the flag; one that a process left
 *   when it died (nothing of it written through the file system: it reads
 *   as zeros; immutable, with the attribute user.uzram.backing) is taken
 *   over, while any other file that is not empty is refused (-EEXIST),
 *   as without the flag, and one a user made immutable too (-EPERM). A
 *   block device or an NBD URI is used as without the flag.
 */
enum uzram_backing_flag {
	UZRAM_BACKING_BLOCKS = 1u << 0,
};

/* The largest uzram_config.threads. */
#define UZRAM_MAX_THREADS 64

/*
 * Fill *cfg with defaults: no size, lz4 at its default level, no limit,
 * clusters of one page.
 */
UZRAM_API void uzram_config_init(struct uzram_config *cfg);

/*
 * Create a device. On success stores it in *devp and returns 0.
 * Errors:
 *   -EINVAL  cfg or devp is NULL, cfg->struct_size is not one this library
 *            knows, the size is 0 or above 16 TiB, the cluster size is not
 *            0 or a power of two from 4096 to 65536, the level is out of
 *            the codec's range, the dictionary size is outside 256 B to
 *            1 MiB, or it is a zstd dictionary that libzstd refuses;
 *   -EOPNOTSUPP  a dictionary for an algorithm that takes none;
 *   -ENOENT  the algorithm is unknown; uzram_last_error() lists known ones;
 *   -ENOMEM  memory for the slot table could not be reserved.
 * The algorithm string is copied; the caller keeps ownership of cfg.
 */
UZRAM_API int uzram_open(const struct uzram_config *cfg, struct uzram **devp);

/* Free the device and all memory it holds. NULL is accepted. */
UZRAM_API void uzram_close(struct uzram *dev);

/* What uzram_open() found in a kept store (uzram_config.keep_fd). */
struct uzram_keep_info {
	int kept;        /* 1: the device's store is in keep_fd */
	int adopted;     /* 1: it was adopted from a store already there */
	uint64_t slots;  /* adopted: clusters holding data */
	uint64_t torn;   /* adopted: clusters whose write the old process
			  * left half done (kept if whole, else a hole);
			  * a front end that resends requests in flight
			  * (ublk's RECOVERY_REISSUE) writes them again */
	uint64_t reserve; /* adopted: bytes of the old process's reserve
			   * (uzram_reserve()) found resident and kept as
			   * this one's */
};

/* Fill *info; 0, or -EINVAL for NULL. Thread-safe. */
UZRAM_API int uzram_keep_info(const struct uzram *dev,
			      struct uzram_keep_info *info);

/* The device size in bytes, as rounded up by uzram_open(). */
UZRAM_API uint64_t uzram_size(const struct uzram *dev);

/*
 * The device's compression unit in bytes (4096 unless the config asked for
 * more), or 0 for NULL. Requests aligned to it and sized in multiples of it
 * avoid read-modify-write: an NBD server advertises it as the preferred
 * block size. The last cluster may be shorter (the device size is only
 * rounded up to a page).
 */
UZRAM_API uint32_t uzram_cluster_size(const struct uzram *dev);

/*
 * Copy len bytes at byte offset off of the device into buf.
 * Returns 0, or:
 *   -EINVAL  dev or buf is NULL;
 *   -ERANGE  off + len is past the end of the device, or overflows;
 *   -EIO     a stored object failed to decompress (corruption), or the
 *            backing store failed to read a written-back cluster (counted
 *            in bd_failed_reads; the data stays there for a later read);
 *            buf is undefined, the device is unchanged.
 * A zero len is valid and does nothing.
 */
UZRAM_API int uzram_read(struct uzram *dev, void *buf, size_t len, uint64_t off);

/*
 * Write len bytes from buf at byte offset off. Pages are written one by one;
 * a failure leaves the failing page and all later pages with their old bytes,
 * and earlier pages written: each page holds all its old bytes or all its
 * new ones, never a mix. On a device with threads, the whole pages of a
 * write may be written in any order and at once: a failure then leaves the
 * failing page (the first that failed) with its old bytes, every earlier
 * page written, and each later page with its old or its new bytes, never
 * a mix. (A failed write to a disk, to the kernel's zram or over NBD leaves
 * its whole range unspecified; this is stronger.)
 * Returns 0, or:
 *   -EINVAL  dev or buf is NULL;
 *   -ERANGE  off + len is past the end of the device, or overflows;
 *   -ENOSPC  the memory limit (or the allocator's address space) is reached,
 *            and the backing store, if the device has one, is full too;
 *   -ENOMEM  the system is out of memory;
 *   -EIO     a partial page could not be read back for the merge, or memory
 *            was full and the backing store failed the write-through.
 */
UZRAM_API int uzram_write(struct uzram *dev, const void *buf, size_t len,
			  uint64_t off);

/*
 * Drop the contents of [off, off + len): afterwards it reads as zeros. Whole
 * pages in the range become holes and give their memory back; the partial
 * pages at either end are zeroed in place (which may need memory).
 * Returns 0, -EINVAL (dev NULL), -ERANGE, or the errors of uzram_write()
 * for the partial pages.
 */
UZRAM_API int uzram_discard(struct uzram *dev, size_t len, uint64_t off);

/* Flags for uzram_write_zeroes(). */
enum uzram_zero_flags {
	/* Keep whole pages allocated as zero-filled instead of making holes. */
	UZRAM_ZERO_NO_HOLE = 1u << 0,
};

/*
 * Make [off, off + len) read as zeros. Without UZRAM_ZERO_NO_HOLE whole pages
 * become holes, as with uzram_discard(); with it they become same-filled zero
 * pages, which still cost no allocator memory. Errors as uzram_discard(), and
 * -EINVAL for unknown flags.
 */
UZRAM_API int uzram_write_zeroes(struct uzram *dev, size_t len, uint64_t off,
				 unsigned flags);

/* Page states reported by uzram_block_status(). */
enum uzram_status_flags {
	UZRAM_STATUS_HOLE = 1u << 0, /* never written or discarded */
	UZRAM_STATUS_ZERO = 1u << 1, /* reads as zeros (holes always do) */
};

/*
 * Describe the run of bytes starting at off that share one status, looking at
 * no more than len bytes. Stores the run length (> 0, <= len) in *run and its
 * UZRAM_STATUS_* flags in *flags. Runs are measured in whole pages, clipped
 * to [off, off + len). The answer is a snapshot: concurrent writes may change
 * it at once. Returns 0, -EINVAL (NULL argument or len 0) or -ERANGE.
 */
UZRAM_API int uzram_block_status(struct uzram *dev, uint64_t off, uint64_t len,
				 uint64_t *run, unsigned *flags);

/*
 * Counters, modelled on zram's mm_stat and io_stat. All sizes are in bytes.
 * The *_pages counts stay in 4 KiB pages whatever the cluster size: a
 * cluster of n pages counts n. Fields are only ever added at the end; pass
 * sizeof(struct uzram_stats).
 */
struct uzram_stats {
	uint64_t disksize;        /* device size */
	uint64_t orig_data_size;  /* uncompressed bytes of stored pages */
	uint64_t compr_data_size; /* compressed bytes of stored objects */
	uint64_t mem_used_total;  /* memory the allocator holds from the OS,
				   * including its own metadata */
	uint64_t mem_limit;       /* the configured limit, 0 for none */
	uint64_t mem_used_max;    /* high-water mark of mem_used_total */
	uint64_t same_pages;      /* pages kept as one repeated value */
	uint64_t pages_compacted; /* allocator pages emptied by compaction,
				   * total */
	uint64_t huge_pages;      /* pages kept raw because they do not compress */
	uint64_t pages_stored;    /* pages that are not holes */
	uint64_t failed_reads;    /* reads that returned -EIO */
	uint64_t failed_writes;   /* writes that failed for lack of memory
				   * (in both tiers), or with -EIO */
	uint64_t invalid_io;      /* requests rejected as out of range */
	uint64_t table_bytes;     /* the slot table (16 bytes a cluster, made
				   * per 16384 clusters on first write, the
				   * device's last ones in whole pages), not
				   * counted in mem_used_total but counted
				   * against mem_limit: a write (even of
				   * zeros) that needs a new piece of table
				   * past the limit fails with -ENOSPC */
	uint64_t pages_unchanged; /* pages written with the bytes they already
				   * held, found by a 16-bit hash kept in the
				   * slot table and a byte compare: nothing
				   * was compressed or stored (a running
				   * total) */
	uint64_t pages_recompressed; /* pages re-encoded smaller by
				      * uzram_recompress() (a running total) */
	/* The backing store (zram's bd_stat and more), since 0.2: */
	uint64_t bd_capacity;     /* bytes the tier may use on it */
	uint64_t bd_count;        /* pages whose data is on it */
	uint64_t bd_bytes;        /* bytes of their objects (live) */
	uint64_t bd_space;        /* bytes of it in use: segments holding
				   * objects, live or dead */
	uint64_t bd_reads;        /* pages read from it (a running total) */
	uint64_t bd_writes;       /* pages written to it (a running total) */
	uint64_t bd_failed_reads; /* reads of it that failed */
	uint64_t bd_failed_writes; /* writes to it that failed */
	uint64_t bd_wb_limit;     /* pages writeback may still write while
				   * the writeback limit is enabled */
	uint64_t bd_compacted;    /* bytes of live objects moved by backing
				   * store compaction (a running total) */
	uint64_t pages_written_back; /* pages moved by writeback, by hand or
				      * by the policy (a running total) */
	uint64_t pages_written_through; /* pages written straight to it
				      * because memory was full */
	uint64_t policy_runs;     /* times the policy found memory past the
				   * high watermark */
	uint64_t policy_recompressed; /* pages it re-encoded */
	uint64_t policy_written_back; /* pages it wrote back */
	/* Dedup (cfg.dedup), since 0.3: */
	uint64_t pages_deduped;   /* pages stored as a reference to an object
				   * another cluster holds, not as an object
				   * of their own (a running uzram_save()
				   * holds such references too) */
	uint64_t dedup_bytes_saved; /* compressed bytes those references would
				     * have stored, in memory or on the
				     * backing store (not in compr_data_size
				     * or bd_bytes) */
	uint64_t dedup_index_bytes; /* the dedup index, about 10 to 13 bytes
				     * per stored object: like the slot table,
				     * not in mem_used_total but counted
				     * against mem_limit */
	/*
	 * Since 0.3: lock waits, as zram's debug_stat. Each pair counts the
	 * times a thread found a lock taken and had to wait, and the total
	 * nanoseconds it waited; a lock taken at once is not counted. They
	 * are the whole process's, every device in it together (each thread
	 * counts its own waits, summed here).
	 */
	uint64_t slot_lock_waits;   /* writers waiting for a cluster's lock */
	uint64_t slot_lock_wait_ns;
	uint64_t slot_read_waits;   /* readers waiting for a writer of the
				     * cluster to finish */
	uint64_t slot_read_wait_ns;
	uint64_t class_lock_waits;  /* waits for an allocator size class */
	uint64_t class_lock_wait_ns;
	uint64_t frame_waits;       /* compaction waiting for the readers of
				     * a zspage to unpin it (readers never
				     * wait for compaction) */
	uint64_t frame_wait_ns;
	/* The no-fault pool (uzram_set_refill()), since 0.1.x: */
	uint64_t refill_waits;      /* writes that found it empty and waited
				     * for the refill */
	uint64_t refill_misses;     /* of those, writes that failed with
				     * -ENOSPC, nothing stored: none came
				     * in time (also in failed_writes) */
	uint64_t refill_made;       /* bytes the refill made resident (a
				     * running total) */
	uint64_t refill_target;     /* bytes it keeps cached now; 0: off */
	uint64_t refill_wait_ns;    /* the time those waits took, in total
				     * (after refill_target: a newer field) */
	uint64_t pool_cached;       /* bytes of free frames the allocator
				     * keeps resident for new zspages (the
				     * no-fault pool's, and those frees
				     * left): part of mem_used_total, none
				     * of it data (a newer field) */
};

/*
 * Fill *st (of st_size bytes, normally sizeof *st) with a snapshot of the
 * counters. A smaller st_size from an older caller gets a prefix.
 * Returns 0 or -EINVAL.
 */
UZRAM_API int uzram_stats(struct uzram *dev, struct uzram_stats *st,
			  size_t st_size);

/*
 * Change the memory limit of a live device, as writing to zram's mem_limit
 * does: bytes of memory (mem_used_total) the device may hold, 0 for no
 * limit. A limit below what the device holds now is accepted: writes that
 * need more memory then fail with -ENOSPC and keep the old bytes, while
 * discards, same-filled pages and rewrites of unchanged data still
 * succeed (unless they need a new piece of slot table: the limit covers
 * mem_used_total + table_bytes), until discards and uzram_compact() bring
 * it under. With a
 * backing store, the device's policy moves cold clusters out at once
 * instead (see uzram_writeback()).
 * Returns 0 or -EINVAL (NULL device).
 */
UZRAM_API int uzram_set_mem_limit(struct uzram *dev, uint64_t bytes);

/*
 * Make `bytes` of the allocator's memory resident now and keep it with the
 * device, for a device that must not wait for the kernel to store a page
 * (swap, `uzram serve --swap`): stores then take their memory from this
 * reserve, with no page fault and no system call, until the compressed
 * data reaches `bytes`. Past it, stores allocate as usual (or fail with
 * -ENOSPC at mem_limit: give a reserve equal to mem_limit for a device
 * that never allocates after this call, but for the slot table's chunks,
 * 16 bytes per cluster, allocated as the disk fills, or all at once by
 * uzram_set_refill()). Lock the
 * process's memory (mlockall) to keep the reserve from being swapped out.
 * The reserve counts in mem_used_total. 0 ends it. Thread-safe with I/O;
 * not with itself. Returns 0, -EINVAL (NULL device), -ENOSPC (mem_limit or
 * the allocator's address space came first: what fitted stays reserved)
 * or -ENOMEM.
 */
UZRAM_API int uzram_reserve(struct uzram *dev, uint64_t bytes);

/*
 * The no-fault pool, for a device whose writes must never fault memory in
 * (swap: a write may come from the kernel's reclaim, and a queue thread
 * that faults then allocates exactly when memory is short). After
 * uzram_set_refill(dev, min, max, wait_ms) with min > 0, the whole slot
 * table is made resident at once (16 bytes a cluster, as the kernel's zram
 * allocates its table when its size is set), and writes take the
 * allocator's memory only from resident frames kept cached (the reserve's
 * and those frees leave), never from a page fault or a system call; a
 * thread of the caller's (not a thread that serves I/O: it faults, and
 * may wait in reclaim) calls uzram_refill() in a loop to keep the cache
 * filled, to a target between min and max bytes that follows the rate of
 * writes. A write that finds no frame wakes it and waits up to wait_ms;
 * then it fails with -ENOSPC, the cluster's old data kept, and counts in
 * stats.refill_misses and failed_writes (with a backing store it is
 * written through instead, as at mem_limit). In this mode writes,
 * discards and uzram_compact() never give memory back to the system (that
 * takes the process's mmap lock, which the refilling thread may hold in a
 * fault): uzram_refill() does, once the cache passes its cap. min 0 ends
 * the mode.
 * Returns 0, -EINVAL (NULL device, min > max), -ENOSPC (mem_limit cannot
 * hold the slot table) or -ENOMEM. Thread-safe with I/O; not with itself.
 *
 * uzram_refill(): wait up to timeout_ms until the pool falls under half
 * its target or a write found no frame of its size, then fill it to the
 * target (and trim a cache past its cap). Returns the
 * bytes made resident (0: none needed), -ENOSPC (mem_limit or the address
 * space came first), -ENOMEM, or -EINVAL (NULL device, the mode off).
 * For one thread at a time.
 */
UZRAM_API int uzram_set_refill(struct uzram *dev, uint64_t min, uint64_t max,
			       unsigned wait_ms);
UZRAM_API long long uzram_refill(struct uzram *dev, unsigned timeout_ms);

/*
 * Make the calling thread ready to serve dev: its buffers and its codec
 * contexts (those of the device's algorithm and of each recompression
 * algorithm, whose objects it may read), and with a backing file on its
 * blocks (UZRAM_BACKING_BLOCKS) its buffer for that, which a thread
 * otherwise makes at its first request, allocating then. A thread that serves a no-fault
 * device (swap) calls it before its first request, as the kernel's zram
 * makes its compression streams when the device is set up, never on the
 * I/O path; the device's own write threads (uzram_config.threads) are made
 * ready at open. A codec added later (uzram_add_recomp_algorithm(), a new
 * dictionary) is not covered: call again. Thread-safe. Returns 0, -EINVAL
 * (NULL device) or -ENOMEM.
 */
UZRAM_API int uzram_thread_prepare(struct uzram *dev);

/*
 * Restart stats.mem_used_max from the current mem_used_total, as writing 0
 * to zram's mem_used_max does. Returns 0 or -EINVAL (NULL device).
 */
UZRAM_API int uzram_reset_mem_used_max(struct uzram *dev);

/*
 * Recompression, as zram's recomp_algorithm and recompress: a device
 * writes with its own algorithm, fast, and re-encodes what it stores later
 * with a stronger one to save memory. Reads decode each cluster with the
 * algorithm that made it.
 *
 * uzram_add_recomp_algorithm() adds a secondary algorithm and returns its
 * priority, 1 for the first, up to UZRAM_MAX_RECOMP; or -EINVAL (NULL, or
 * level out of range), -ENOENT (unknown algorithm), -ENOSPC (all taken),
 * -ENOMEM. Algorithms stay until the device is closed.
 */
#define UZRAM_MAX_RECOMP 3
UZRAM_API int uzram_add_recomp_algorithm(struct uzram *dev,
					 const char *algorithm, int level);

/* uzram_recompress() flags */
#define UZRAM_RECOMP_HUGE 1u /* only clusters kept raw (huge pages) */
#define UZRAM_RECOMP_IDLE 2u /* only clusters idle since uzram_mark_idle() */

/*
 * Mark every stored cluster idle, as writing "all" to zram's idle file; a
 * read or write of a cluster clears its mark. Returns the number of pages
 * marked, or -EINVAL (NULL device).
 */
UZRAM_API long uzram_mark_idle(struct uzram *dev);

/*
 * Re-encode stored clusters with the secondary algorithm of priority prio:
 * those made by a lower priority, whose object is at least threshold bytes
 * (0: any), with UZRAM_RECOMP_HUGE only the huge ones, with
 * UZRAM_RECOMP_IDLE only those idle since uzram_mark_idle(). A cluster is
 * replaced, and its old object freed, only if the new object is smaller.
 * Runs alongside reads and writes: each cluster is locked while it is
 * re-encoded, as a partial write locks it. Compressed clusters that do not
 * shrink are tried again by the next call; huge ones that do not are marked
 * incompressible for that priority (see UZRAM_WB_INCOMPRESSIBLE) and not
 * tried again by it.
 * Returns the number of pages re-encoded (>= 0), or:
 *   -EINVAL  NULL device, no algorithm of that priority, unknown flags;
 *   -ENOSPC, -ENOMEM  no memory for a new object: what was re-encoded
 *            before stays so;
 *   -EIO     a stored object is corrupt; the others were processed.
 */
UZRAM_API long uzram_recompress(struct uzram *dev, int prio, unsigned flags,
				uint32_t threshold);

/*
 * On a device opened with a fast_algorithm: wait until its re-encoding
 * thread has made a pass over the table that found nothing to re-encode
 * (every cluster old enough is in its final algorithm, or no smaller
 * there), started after this call and with no write in between, or
 * until timeout_ms have passed (0: do not wait). Meanwhile the thread
 * runs unpaced, as if no write arrived. For tests, benchmarks and a
 * program that wants its memory at the final density now (uzram ctl).
 * Returns 0 once so, -ETIMEDOUT, or -EINVAL (NULL device, or a device
 * without a fast_algorithm). Thread-safe.
 */
UZRAM_API int uzram_reencode_wait(struct uzram *dev, uint32_t timeout_ms);

/*
 * Images: a device saved to a file and opened again later, with every
 * cluster as stored (compressed objects are written as they are, neither
 * decoded nor re-encoded), its state, idle mark and priority, and the
 * device's size, cluster size, algorithms and their dictionaries (both of
 * a priority that changed its dictionary). The format is documented in
 * src/image-format.md.
 *
 * uzram_save() writes an image of dev to path. The image is a point-in-time
 * copy: every cluster as it was when the call started. Reads and writes go
 * on during the save and do not wait for it: a write to a cluster the save
 * has not copied yet hands the old contents to the save instead of freeing
 * them (copy on write), so memory may grow by what is rewritten during the
 * save, and a write may then meet the memory limit sooner. The file is
 * written to a temporary file in path's directory (path.tmp.XXXXXX, mode
 * 0600), flushed with fsync(), renamed over path and the directory
 * flushed: whatever happens, even a kill -9 in the middle, path holds
 * either the old image or the new one, whole. flags must be 0.
 * Returns 0, or:
 *   -EINVAL  NULL argument or unknown flags;
 *   -EALREADY  another save of the same device is in progress;
 *   -EBUSY   another device holds path (see uzram_image_claim());
 *   -EAGAIN  a secondary algorithm or a dictionary was set, and used,
 *            during the save: save again;
 *   -ENOMEM  out of memory;
 *   the negative errno of a failed system call on the file (-EACCES,
 *            -ENOSPC for a full disk, -EIO, ...);
 * with uzram_last_error() naming the file and what failed. On failure path
 * is unchanged (unless only the final fsync of its directory failed: then
 * it is the new image, not yet durable) and no temporary file is left
 * behind. Thread-safe.
 *
 * Opening: set cfg.image and call uzram_open(). Every checksum and every
 * bound of the image is checked before the device is returned; nothing of
 * a bad image is ever served. Besides uzram_open()'s errors:
 *   -EBADMSG  the image is corrupt or truncated;
 *   -EINVAL   the file is not a uzram image, or one of a format version
 *             or with features this library does not read, or cfg.size
 *             conflicts with the image, or a codec refuses the image's
 *             level or dictionary;
 *   -ENOENT   the image uses an algorithm this library does not have;
 *   -ENOSPC   the image does not fit in cfg.mem_limit;
 *   -EBUSY    another device holds the image (see uzram_image_claim());
 *   the negative errno of a failed open() or read() of the file.
 * uzram_last_error() says which, and where in the file. Counters start
 * from the image's contents (pages_unchanged and pages_recompressed, which
 * count events, start from 0).
 */
UZRAM_API int uzram_save(struct uzram *dev, const char *path, unsigned flags);

/*
 * One device per image. A device opened with cfg.image holds a lock on
 * that path until uzram_close(); so does one that called
 * uzram_image_claim(dev, path) (for an image it will create: the path need
 * not exist). uzram_save() to a path other than the device's own holds
 * that path's lock while it writes. An open, a claim or a save that finds
 * the lock held by another device, of this process or another, fails with
 * -EBUSY and uzram_last_error() naming the holder's pid. The lock is an
 * open file description lock (F_OFD_SETLK) on the file path.lock beside
 * the image, which a save's rename does not replace; the holder removes
 * it at close, and one left by a killed process is free. Where nobody may
 * write path's directory (so no save can replace the image) the image is
 * opened without a lock.
 *
 * uzram_image_claim() returns 0 (also when dev holds path already),
 * -EBUSY, -EEXIST if dev holds another image, -EINVAL for a NULL
 * argument, or the negative errno of creating path.lock. Thread-safe.
 */
UZRAM_API int uzram_image_claim(struct uzram *dev, const char *path);

/*
 * The name of the device's algorithm of priority prio (0: the primary one,
 * 1..UZRAM_MAX_RECOMP: secondary ones), e.g. "zstd", or NULL if there is
 * none (or dev is NULL). The string is static.
 */
UZRAM_API const char *uzram_algorithm(const struct uzram *dev, int prio);

/*
 * Move objects out of sparsely used allocator pages and give every page
 * that holds no object back to the OS, including the small cache of empty
 * pages kept resident for reuse (at most mem_used_total / 256). Safe while
 * other threads read and write; they may wait briefly for the few objects
 * being moved. Compaction also runs by itself, a little at a time, when the
 * allocator's fragmentation passes a threshold; what that empties stays in
 * the cache.
 * Returns the number of pages given back (>= 0) or -EINVAL.
 */
UZRAM_API long uzram_compact(struct uzram *dev);

/*
 * Dictionaries, as zram's algorithm_params dict= (for lz4 and zstd): each
 * cluster is still compressed on its own, against a dictionary of bytes
 * common to many clusters. Whether that pays depends on the data: it can
 * save several percent, or cost that much. So uzram_train_dictionary()
 * measures before it keeps one.
 *
 * Objects decode only with the dictionary that made them. A priority keeps
 * two codecs, the current one and the one before it, so a dictionary can
 * change while older objects are still stored; a second change needs the
 * objects of the first one re-encoded (UZRAM_DICT_REENCODE does it, one
 * cluster lock at a time alongside reads and writes).
 */
#define UZRAM_DICT_REENCODE 1u          /* re-encode what older
					 * dictionaries made */
#define UZRAM_DICT_MIN_GAIN 2           /* percent a trained dictionary
					 * must save to be kept */
#define UZRAM_DICT_DEFAULT_SIZE 65536

/*
 * Give the codec of priority prio (0: the device's algorithm, 1..3 a
 * secondary one) the dictionary dict of len bytes (copied), or none
 * (NULL, 0). New objects of that priority use it at once.
 * Returns 0, or:
 *   -EINVAL  NULL device, no algorithm of that priority, unknown flags,
 *            len not 0 and outside 256 B..1 MiB, or a zstd dictionary
 *            that libzstd refuses;
 *   -EOPNOTSUPP  the algorithm takes no dictionary (lz4hc, deflate);
 *   -EBUSY   objects made with the dictionary before the current one are
 *            still stored, and UZRAM_DICT_REENCODE was not given;
 *   -ENOSPC, -ENOMEM  re-encoding needed memory it could not get; the new
 *            dictionary may be in use with some objects left as they were.
 */
UZRAM_API int uzram_set_dictionary(struct uzram *dev, int prio,
				   const void *dict, size_t len, unsigned flags);

/* What uzram_dict_info() tells of a priority's dictionaries. */
struct uzram_dict_info {
	size_t dict_size;        /* the current dictionary, 0 for none */
	uint64_t pages;          /* pages encoded with it (or without one) */
	uint64_t pages_previous; /* pages still encoded with the one before */
};

/*
 * Fill *info for priority prio, walking the slot table (a snapshot, like
 * uzram_stats()). Returns 0 or -EINVAL.
 */
UZRAM_API int uzram_dict_info(struct uzram *dev, int prio,
			      struct uzram_dict_info *info);

/* What uzram_train_dictionary() measured. */
struct uzram_train_report {
	uint64_t train_bytes;     /* decoded clusters it trained on */
	uint64_t test_bytes;      /* other clusters it measured on */
	uint64_t bytes_without;   /* the test clusters compressed as now */
	uint64_t bytes_with;      /* the same with the trained dictionary */
	uint64_t dict_size;       /* the trained dictionary, 0 if none */
	uint64_t train_us;        /* time libzstd's trainer took */
	uint64_t pages_reencoded; /* with UZRAM_DICT_REENCODE */
	int kept;                 /* 1 if the dictionary is now in use */
};

/*
 * Train a dictionary of dict_size bytes (0: UZRAM_DICT_DEFAULT_SIZE) for
 * priority prio from the clusters the device holds, with libzstd's ZDICT
 * on a sample of them, measure it against the codec as it is on a second
 * sample, and keep it only if it saves at least UZRAM_DICT_MIN_GAIN
 * percent (uzram_last_error() then says why not). With
 * UZRAM_DICT_REENCODE, what the previous dictionaries made is re-encoded
 * with the new one. Fills *rep (may be NULL). Runs alongside reads and
 * writes. Returns 1 if the dictionary was kept, 0 if not, or the errors
 * of uzram_set_dictionary().
 */
UZRAM_API int uzram_train_dictionary(struct uzram *dev, int prio,
				     size_t dict_size, unsigned flags,
				     struct uzram_train_report *rep);

/*
 * A static message for a negative errno value returned by this library,
 * e.g. "memory limit reached" for -ENOSPC.
 */
UZRAM_API const char *uzram_strerror(int err);

/*
 * The detailed message of the last call that failed in this thread, or ""
 * if none has. Valid until the next failing call in the same thread.
 */
UZRAM_API const char *uzram_last_error(void);

/*
 * The names of the compression algorithms built in, separated by spaces,
 * e.g. "lz4 lz4hc zstd deflate".
 */
UZRAM_API const char *uzram_algorithms(void);

/*
 * The tier: a device opened with cfg.backing keeps a second store on the
 * backing target, as zram's backing_dev. A cluster written back leaves
 * memory only once its object is on the backing store, written as it was
 * in memory (compressed, or raw if huge) and packed at 16-byte alignment
 * in 1 MiB segments; reading it is one read of the backing store; a
 * rewrite or discard frees its place there. Segments whose objects died are
 * reused, and the live objects of mostly dead ones are moved together
 * (uzram_backing_compact(), also run by writeback), so the backing store
 * holds about the live compressed bytes, not 4 KiB per page.
 */

/* uzram_writeback() types, as zram's writeback file */
#define UZRAM_WB_HUGE 1u  /* only clusters kept raw (huge) */
#define UZRAM_WB_IDLE 2u  /* only clusters marked idle */
/* Only huge clusters that recompression failed to shrink (tried by
 * uzram_recompress() with every priority up to the one that failed). */
#define UZRAM_WB_INCOMPRESSIBLE 4u

/*
 * Write back stored clusters in pages [first_page, last_page] (inclusive;
 * 0 and UINT64_MAX for all) that match every type flag given (none: any
 * compressed or huge cluster), largest objects first, at most max_pages
 * pages (0: no limit) and no more than the writeback limit allows. Writes
 * go out in batches of up to 1 MiB. Runs alongside reads and writes: a
 * cluster rewritten while its batch was being written stays in memory.
 * Returns the number of pages written back (>= 0), or:
 *   -EINVAL  NULL device, unknown flags, first_page > last_page;
 *   -ENODEV  the device has no backing store;
 *   -ENOSPC  the backing store is full, -EIO a write to it failed: what was
 *            written before stays written back, the rest stays in memory,
 *            and bd_failed_writes counts the failure.
 */
UZRAM_API long uzram_writeback(struct uzram *dev, unsigned flags,
			       uint64_t first_page, uint64_t last_page,
			       uint64_t max_pages);

/*
 * zram's writeback_limit_enable and writeback_limit: while enabled,
 * writeback (by hand and by the policy) writes at most `pages` more pages,
 * counted down in stats.bd_wb_limit. Returns 0, -EINVAL or -ENODEV.
 */
UZRAM_API int uzram_set_writeback_limit(struct uzram *dev, int enable,
					uint64_t pages);

/*
 * Move the live objects of backing store segments that are mostly dead
 * into fresh ones and give the emptied segments back (a hole in a file, a
 * trim on NBD). Returns the bytes of backing store freed (>= 0), -EINVAL,
 * -ENODEV, or -EIO/-ENOSPC from the backing store (nothing is lost: an
 * object moves only after its new copy is written).
 */
UZRAM_API long uzram_backing_compact(struct uzram *dev);

/*
 * Mark idle the stored clusters not read or written for at least `seconds`
 * (zram's idle file with CONFIG_ZRAM_TRACK_ENTRY_ACTIME). Each cluster
 * keeps its last access on a coarse clock of 4-second ticks, exact up to
 * 508 seconds; older ages saturate there while some table walk (this call,
 * writeback, the tier's background thread) passes within every 8 minutes.
 * seconds 0 marks everything, as uzram_mark_idle(). Returns the number of
 * pages marked, or -EINVAL.
 */
UZRAM_API long uzram_mark_idle_age(struct uzram *dev, uint32_t seconds);

/*
 * Tell the device that its reads are swap-ins (`uzram serve --swap` does).
 * The kernel frees most swap slots right after the swap-in that read them
 * and tells only its own drivers (zram's swap_slot_free_notify): a device
 * outside the kernel keeps the dead copy. With on non-zero, a read makes
 * the clusters it reads idle and of the greatest age (as if unused for
 * 512 s) instead of young, so the tier's policy, writeback of idle
 * clusters and the re-encoder take them before the clusters written and
 * not read since, which the kernel still needs. Writes stamp as always;
 * and, as the kernel writes out only pages that changed, a write is not
 * compared with what its cluster holds (the check for a rewrite of the
 * same bytes, and the hash it keeps per cluster, cost every write and
 * almost never hit on swap), unless the device dedups. On 0 goes back to
 * zram's rule and to the check. Returns 0, or -EINVAL (NULL device).
 * Thread-safe with I/O.
 */
UZRAM_API int uzram_set_swap_reads(struct uzram *dev, int on);

/*
 * Run fn(arg) at the start of every uzram_write() and uzram_write_zeroes()
 * on dev, on the writing thread, before the write looks at the device; fn
 * may call uzram_discard() on dev. For an owner that learns of dead data
 * out of band and must drop it before any later write to the same place
 * lands, and not after (`uzram serve --swap` and the swap slots the kernel
 * frees: swapfree/). fn must be thread-safe, and stay callable until the
 * device's writes have ended or it is replaced; NULL removes it. A write
 * under way when the hook changes may run the old one. Returns 0, or
 * -EINVAL (NULL device).
 */
UZRAM_API int uzram_set_write_hook(struct uzram *dev, void (*fn)(void *arg),
				   void *arg);

#ifdef __cplusplus
}
#endif

#endif /* UZRAM_H */
