/* SPDX-License-Identifier: MIT */
/*
 * ublk_impl.h - what the files of ublk/ give each other (ublk.h lists
 * them). Nothing here is seen outside ublk/.
 */
#ifndef UZRAM_UBLK_IMPL_H
#define UZRAM_UBLK_IMPL_H

#include <liburing.h>
#include <pthread.h>
#include <stddef.h>

#include "uapi.h"
#include "ublk.h"

/* ctrl.c */

/*
 * The control device and a ring for its commands, used by one thread at
 * a time (the front end's setup and teardown, `uzram ublk`).
 */
struct ublk_ctrl {
	int fd;                 /* /dev/ublk-control */
	struct io_uring ring;   /* 128-byte SQEs: the command is 32 bytes */
	uint64_t features;      /* UBLK_F_* the kernel has */
	bool ioctl_encode;      /* opcodes as _IOWR('u', ...), else 6.0's */
};

/* Open the control device and ask its features; 0, or -1 after a message. */
int ctrl_open(struct ublk_ctrl *c, const char *who);
void ctrl_close(struct ublk_ctrl *c);

/*
 * Run control command nr (UBLK_CMD_*) on device id with len bytes at buf
 * (in, out or both) and the inline argument data. For a device made with
 * UBLK_F_UNPRIVILEGED_DEV, devpath (its /dev/ublkcN) goes before the
 * bytes, as the kernel wants; NULL otherwise. The command's result: 0 or
 * more, or a negative errno.
 */
int ctrl_cmd(struct ublk_ctrl *c, unsigned nr, uint32_t id, void *buf,
	     uint16_t len, uint64_t data, const char *devpath);

/* The device's information (GET_DEV_INFO); 0 or a negative errno. */
int ctrl_dev_info(struct ublk_ctrl *c, uint32_t id,
		  struct ublksrv_ctrl_dev_info *info);

/* UBLK_S_DEV_* as a word. */
const char *ctrl_state_name(unsigned state);

/* queue.c */

/*
 * One hardware queue: its thread, ring, descriptors and buffers. The
 * thread alone touches the ring, the descriptors and the buffers once it
 * runs; ready and err are under lock, for the starter's wait.
 */
struct ublk_queue {
	struct uzram *dev;
	int cdev;                 /* /dev/ublkcN, shared by the queues */
	unsigned id, depth;
	size_t max_io;            /* bytes of the largest request */
	bool user_copy;
	unsigned op_fetch, op_commit; /* FETCH_REQ, COMMIT_AND_FETCH_REQ as
				       * the kernel takes them */
	pthread_t thread;
	struct io_uring ring;
	const struct ublksrv_io_desc *desc; /* the driver's, read-only */
	size_t desc_len;
	char *buf;                /* buffers of max_io bytes: one per tag, or
				   * one for all with user_copy (queue.c) */
	uint32_t *touched;        /* per buffer: bytes that may be resident */
	int leave_fd;             /* eventfd: readable when the server hands
				   * the device over (-1: none) */
	bool idle_released;       /* buffers given back, no request since */
	bool resident;            /* buffers resident for good (ublk_opts) */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool ready;               /* every tag fetched, or failed (err) */
	bool parked;              /* left: commits submitted, ring kept open
				   * until the process exits (queue.c) */
	int err;                  /* the setup's negative errno, or 0 */
	const char *what;         /* which setup step failed */
};

/*
 * Start q's thread: it maps the descriptors, sets up its ring, fetches
 * every tag, then serves requests until the driver aborts them all (the
 * device stopped or deleted). Returns 0 once it fetched every tag, or a
 * negative errno (q->what says what failed; the thread is joined).
 */
int queue_start(struct ublk_queue *q);
/* Wait for q's thread to end and free what it holds. */
void queue_join(struct ublk_queue *q);
/*
 * After leave_fd fired: wait until q's thread has submitted its last
 * commits and parked (or ended), at most ms milliseconds; 0, or -ETIMEDOUT.
 * A parked thread never returns: the process must exit (queue.c).
 */
int queue_wait_parked(struct ublk_queue *q, int ms);

#endif /* UZRAM_UBLK_IMPL_H */
