/* SPDX-License-Identifier: MIT */
/*
 * ublk.h - the ublk front end: a uzram device as the kernel's block device
 * /dev/ublkbN, its requests served from io_uring (Linux 6.0+, ublk_drv).
 * What cli/ uses; it reaches the device through include/uzram.h only.
 *
 *   ctrl.c    the control device /dev/ublk-control: features, add, set
 *             parameters, start, stop, delete, recovery, list
 *   queue.c   one thread and one io_uring per hardware queue: fetch a
 *             request, run it on the device, commit the result and fetch
 *             the next in one command
 *   front.c   one device's life: add (or recover), queues, start; stop,
 *             and delete
 *
 *   kernel blk-mq queue q  --(descriptor mmap + uring_cmd CQE)-->  queue
 *   thread q: uzram_read/write/discard/write_zeroes on the tag's buffer
 *   --(COMMIT_AND_FETCH uring_cmd)--> the kernel completes the request
 *
 * A killed server's requests fail with EIO (or, with recovery, wait for a
 * new server: ublk_front_start() with recover set recovers the device).
 */
#ifndef UZRAM_UBLK_H
#define UZRAM_UBLK_H

#include <stdbool.h>
#include <stdint.h>

#include "uzram.h"

enum ublk_copy {
	UBLK_COPY_KERNEL, /* the driver copies between the request and a
			   * buffer of ours given once per tag */
	UBLK_COPY_USER,   /* we pread/pwrite the request through
			   * /dev/ublkcN (UBLK_F_USER_COPY) */
	UBLK_COPY_LEAST_MEMORY, /* USER where the kernel has it, else
				 * KERNEL: one buffer per queue instead
				 * of one per tag (serve --swap) */
};

struct ublk_opts {
	int dev_id;           /* -1: the kernel chooses */
	unsigned queues;      /* hardware queues, 1 to 64; 0: one per CPU, up to 4 */
	unsigned depth;       /* requests in flight per queue; 0: UBLK_DEFAULT_DEPTH */
	enum ublk_copy copy;
	bool recovery;        /* UBLK_F_USER_RECOVERY: I/O waits for a new server */
	bool reissue;         /* with recovery, and where the kernel has it:
			       * UBLK_F_USER_RECOVERY_REISSUE, the requests
			       * the dead server had are sent to the new one
			       * (for a store that outlives the server) */
	bool recover;         /* recover dev_id, left by a killed server */
	bool read_only;
	bool resident_buffers; /* buffers made resident at the start and
				* never given back when idle: a queue thread
				* then neither faults nor takes the mmap lock
				* (serve --swap; queue.c) */
};

#define UBLK_DEFAULT_DEPTH 64
#define UBLK_MAX_QUEUES    64
#define UBLK_MAX_DEPTH     4096 /* the driver's UBLK_MAX_QUEUE_DEPTH */

struct ublk_front;

/*
 * Make /dev/ublkbN for dev (or, with o->recover, serve the existing
 * device o->dev_id again) and start serving it. 0 and *out, or -1 after a
 * message by report_error(who, ...) (what failed, and what to do about it:
 * no driver, not root, a device in use). dev must outlive the front end.
 */
int ublk_front_start(struct uzram *dev, const struct ublk_opts *o,
		     const char *who, struct ublk_front **out);

/* The device number N of /dev/ublkbN. */
int ublk_front_id(const struct ublk_front *f);

/*
 * Stop the block device (its requests in flight finish first), end the
 * queue threads and delete the device: no thread, ring or node is left.
 * Accepts NULL. 0, or -1 after a message (the device is then left for
 * `uzram ublk del`).
 */
int ublk_front_stop(struct ublk_front *f, const char *who);

/*
 * Hand the device over (a planned restart): the queues run and commit the
 * requests they hold and stop; the process must then exit (exit(),
 * _exit()), which lets go of the device as a death does: it stays,
 * quiesced, for another server's take-over (ublk_front_start() with
 * recover set); nothing is deleted. Only for a device with recovery
 * (o->recovery or o->recover); -1 and nothing done for another (stop it
 * instead). On success f is the process's until it exits (its queue
 * threads never return); accepts NULL.
 */
int ublk_front_leave(struct ublk_front *f);

/* ctrl.c: `uzram ublk list` and `uzram ublk del N`; the exit status. */
int ublk_list_devices(const char *who);
int ublk_del_device(int id, const char *who);

#endif /* UZRAM_UBLK_H */
