/*
 * backing.h - the backing store of a device's second tier: one open
 * target, a regular file, a block device or an NBD export, behind a small
 * table of operations (backing.c). Private to the library.
 *
 * Every operation is positional and thread-safe; none keeps state between
 * calls but the target itself. Errors are negative errnos: -EIO for a
 * failed transfer (including a vanished NBD server), -ENOSPC when the file
 * system under a file is full.
 */
#ifndef UZRAM_BACKING_H
#define UZRAM_BACKING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct backing;

struct backing_ops {
	int (*pread)(struct backing *b, void *buf, size_t len, uint64_t off);
	int (*pwrite)(struct backing *b, const void *buf, size_t len,
		      uint64_t off);
	/* Give the space of a range back (a hole, a trim); may do nothing. */
	void (*discard)(struct backing *b, uint64_t len, uint64_t off);
	void (*close)(struct backing *b);
};

struct backing {
	const struct backing_ops *ops;
	uint64_t capacity;   /* bytes the tier may use */
	const char *kind;    /* "file", "block device", "nbd" */
	/* Tests only: the next n reads or writes fail with -EIO. */
	_Atomic int fail_reads, fail_writes;
};

/*
 * Open target: "nbd://..." or "nbd+unix://..." through libnbd, else a path
 * (a block device, or a regular file, created if missing, which must be
 * empty: the tier owns it). want is the capacity a file may grow to; a
 * block device or an export offers its size. Returns 0 and *out, or a
 * negative errno with the message set (uzram_set_error).
 */
int backing_open(const char *target, uint64_t want, struct backing **out);
void backing_close(struct backing *b);          /* NULL is accepted */

int backing_pread(struct backing *b, void *buf, size_t len, uint64_t off);
int backing_pwrite(struct backing *b, const void *buf, size_t len,
		   uint64_t off);

static inline void backing_discard(struct backing *b, uint64_t len,
				   uint64_t off)
{
	b->ops->discard(b, len, off);
}

#endif
