/*
 * backing.h - the backing store of a device's second tier: one open
 * target, a regular file, a block device or an NBD export, behind a small
 * table of operations (backing.c). Private to the library.
 *
 * Every operation is positional and thread-safe; none keeps state between
 * calls but the target itself. Errors are negative errnos: -EIO for a
 * failed transfer (including a vanished NBD server), -ENOSPC when the file
 * system under a file is full.
 *
 * Writes can also be asynchronous, so that writeback keeps several in
 * flight: backing_submit() starts one and backing_wait() ends it. A file
 * or a block device hands them to a small pool of writer threads (started
 * at the first submit); an NBD export sends them with libnbd's aio calls
 * on the handle the synchronous calls share, and backing_wait() drives the
 * handle until the write's reply came.
 */
#ifndef UZRAM_BACKING_H
#define UZRAM_BACKING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backing;

/*
 * One asynchronous write. The caller fills buf, len and off and keeps the
 * struct and buf untouched from backing_submit() to backing_wait().
 */
struct backing_aio {
	const void *buf;
	size_t len;
	uint64_t off;
	/* private to backing.c */
	int ret;
	bool failed;                  /* a fault injected (fail_writes) */
	bool done;                    /* the writer pool's, under its lock */
	int64_t cookie;               /* nbd */
	struct backing_aio *next;     /* the writer pool's queue */
};

struct backing_ops {
	int (*pread)(struct backing *b, void *buf, size_t len, uint64_t off);
	int (*pwrite)(struct backing *b, const void *buf, size_t len,
		      uint64_t off);
	/* Give the space of a range back (a hole, a trim); may do nothing. */
	void (*discard)(struct backing *b, uint64_t len, uint64_t off);
	/* Start a write: 0, or a negative errno and nothing in flight. */
	int (*submit)(struct backing *b, struct backing_aio *io);
	/* Wait for a submitted write: its result. */
	int (*wait)(struct backing *b, struct backing_aio *io);
	void (*close)(struct backing *b);
};

struct backing {
	const struct backing_ops *ops;
	uint64_t capacity;   /* bytes the tier may use */
	const char *kind;    /* "file", "block device", "nbd" */
	/*
	 * Tests only: the next fail_reads reads, or fail_writes writes after
	 * pass_writes more that succeed, fail with -EIO (an asynchronous one
	 * at its wait, as a real failure would).
	 */
	_Atomic int fail_reads, fail_writes, pass_writes;
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

/*
 * Start an asynchronous write of io->len bytes at io->off from io->buf:
 * 0, and backing_wait() must follow; or a negative errno (nothing in
 * flight, no wait). Safe from any thread; a given io is waited for by
 * the thread that submitted it.
 */
int backing_submit(struct backing *b, struct backing_aio *io);
/* Wait for a write started by backing_submit(): 0 or a negative errno. */
int backing_wait(struct backing *b, struct backing_aio *io);

static inline void backing_discard(struct backing *b, uint64_t len,
				   uint64_t off)
{
	b->ops->discard(b, len, off);
}

#endif
