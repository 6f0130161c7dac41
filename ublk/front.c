// SPDX-License-Identifier: MIT
/*
 * front.c - one ublk device's life, for `uzram serve --ublk`.
 *
 *   start: GET_FEATURES (ctrl_open) -> ADD_DEV (queues, depth, buffer
 *          size, flags) -> SET_PARAMS (size and block sizes from the
 *          device: logical 4K as zram, physical and io_min/io_opt one
 *          cluster, max_sectors a whole number of clusters, discard
 *          granularity one cluster) -> open /dev/ublkcN -> a thread per
 *          queue fetches every tag -> START_DEV: /dev/ublkbN appears
 *   recover: GET_DEV_INFO must say quiesced (the old server
 *          died with UBLK_F_USER_RECOVERY) and GET_PARAMS the same size
 *          -> START_USER_RECOVERY -> queues as above -> END_USER_RECOVERY:
 *          the requests that waited run
 *   stop:  STOP_DEV (the disk goes; requests in flight finish on the
 *          queues, which still run) -> the driver aborts the queues'
 *          commands and their threads return -> close /dev/ublkcN ->
 *          DEL_DEV, which waits for that close
 *   leave: (a device with recovery, handed over to a new server) the
 *          eventfd each queue polls -> the queues commit what they ran
 *          and park, their rings open -> the process exits: to the
 *          driver, a dead server, torn down by the kernel's path for a
 *          kill; the device waits, quiesced, for the next one's
 *          START_USER_RECOVERY (the same path as after a SIGKILL, less
 *          the requests cut short)
 *
 * Not root: the device is made with UBLK_F_UNPRIVILEGED_DEV where the
 * kernel has it (6.5+; /dev/ublk-control must be ours by a udev rule),
 * and every command on it then carries its /dev/ublkcN path. The driver
 * refuses UBLK_F_USER_COPY for such devices, so they copy in the kernel.
 *
 * The device has no volatile cache (UBLK_ATTR_VOLATILE_CACHE is not set):
 * a write is in the uzram device when its request completes, so the block
 * layer sends no flush, and FUA needs nothing more.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../common/report.h"
#include "ublk_impl.h"

#define UBLK_MAX_IO     (256u << 10) /* bytes per request we ask for */
#define UBLK_MAX_DISCARD (1u << 30)  /* bytes per discard: one call holds
				      * its queue that long */
#define CDEV_WAIT_MS    5000         /* for udev to make /dev/ublkcN */
#define BUSY_REPORT_MS  2000       /* then say who holds the cdev */
#define RECOVER_SETTLE_MS 200      /* for the driver's quiesce work */
#define LEAVE_WAIT_MS   10000      /* for a queue's last request: then
				    * it is cut short, as by a kill */
#define RECOVER_WAIT_MS 120000     /* for a dead server to be gone: a big
				    * one exits slowly under memory
				    * pressure (tests/vm/v43) */

struct ublk_front {
	struct ublk_ctrl ctrl;
	struct uzram *dev;
	struct ublksrv_ctrl_dev_info info;
	int id;
	int cdev;
	int leave_fd;         /* eventfd for ublk_front_leave(), or -1 */
	char cdev_path[32];
	const char *devpath;  /* cdev_path for an unprivileged device */
	unsigned nq;          /* queues started */
	struct ublk_queue *q;
};

int ublk_front_id(const struct ublk_front *f)
{
	return f->id;
}

static int cmd(struct ublk_front *f, unsigned nr, void *buf, uint16_t len,
	       uint64_t data)
{
	return ctrl_cmd(&f->ctrl, nr, (uint32_t)f->id, buf, len, data,
			f->devpath);
}

static unsigned ilog2u(uint64_t v)
{
	unsigned n = 0;

	while (v >>= 1)
		n++;
	return n;
}

static int set_params(struct ublk_front *f, bool read_only)
{
	uint32_t cluster = uzram_cluster_size(f->dev);
	uint32_t max_io = f->info.max_io_buf_bytes / cluster * cluster;
	struct ublk_params p;

	memset(&p, 0, sizeof p);
	p.len = sizeof p;
	p.types = UBLK_PARAM_TYPE_BASIC | UBLK_PARAM_TYPE_DISCARD;
	p.basic.attrs = read_only ? UBLK_ATTR_READ_ONLY : 0;
	p.basic.logical_bs_shift = 12;
	p.basic.physical_bs_shift = (uint8_t)ilog2u(cluster);
	p.basic.io_min_shift = (uint8_t)ilog2u(cluster);
	p.basic.io_opt_shift = (uint8_t)ilog2u(cluster);
	p.basic.max_sectors = max_io >> 9;
	p.basic.dev_sectors = uzram_size(f->dev) >> 9;
	p.discard.discard_granularity = cluster;
	p.discard.max_discard_sectors = UBLK_MAX_DISCARD >> 9;
	p.discard.max_write_zeroes_sectors = UBLK_MAX_DISCARD >> 9;
	p.discard.max_discard_segments = 1;
	return cmd(f, UBLK_CMD_SET_PARAMS, &p, sizeof p, 0);
}

/* Whether the link or maps file at path names the cdev. */
static bool names_cdev(const char *path, const char *cdev, bool maps)
{
	char buf[4096];
	ssize_t n;
	int fd;

	if (!maps) {
		n = readlink(path, buf, sizeof buf - 1);
		return n > 0 && (buf[n] = '\0', !strcmp(buf, cdev));
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while ((n = read(fd, buf, sizeof buf - 1)) > 0) {
		buf[n] = '\0';
		if (strstr(buf, cdev)) { /* a line cut in two is missed */
			close(fd);
			return true;
		}
	}
	close(fd);
	return false;
}

/*
 * START_USER_RECOVERY still -EBUSY: say the device's state and which
 * processes hold /dev/ublkcN open or mapped (none: the kernel still
 * releases the dead server's io_uring, which holds it).
 */
static void report_busy(struct ublk_front *f, const char *who)
{
	struct ublksrv_ctrl_dev_info info;
	char path[300], held[256] = "";
	size_t len = 0;
	DIR *d = opendir("/proc"), *fds;
	struct dirent *e, *g;

	while (d && (e = readdir(d)) && len < sizeof held - 32) {
		bool hit = false;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/maps", e->d_name);
		hit = names_cdev(path, f->cdev_path, true);
		snprintf(path, sizeof path, "/proc/%s/fd", e->d_name);
		fds = hit ? NULL : opendir(path);
		while (fds && (g = readdir(fds)) && !hit) {
			snprintf(path, sizeof path, "/proc/%s/fd/%.20s",
				 e->d_name, g->d_name);
			hit = names_cdev(path, f->cdev_path, false);
		}
		if (fds)
			closedir(fds);
		if (hit)
			len += (size_t)snprintf(held + len, sizeof held - len,
						" %s", e->d_name);
	}
	if (d)
		closedir(d);
	report_error(who, "ublk device %d: START_USER_RECOVERY busy for %d "
		"s, state %s; %s open or mapped by pid%s", f->id,
		BUSY_REPORT_MS / 1000,
		ctrl_dev_info(&f->ctrl, (uint32_t)f->id, &info) < 0 ? "?" :
		ctrl_state_name(info.state), f->cdev_path,
		held[0] ? held : " none (the kernel has yet to release it)");
}

/*
 * START_USER_RECOVERY, again while it is -EBUSY: the old server's
 * /dev/ublkcN is still open. The kernel releases it after the process is
 * reaped, with the dead server's io_uring, from a workqueue. (This loop
 * once stopped at the first -EBUSY, its condition being r >= 0: a
 * take-over failed whenever the keeper saw the death before that
 * release.) 0 or -1.
 */
static int start_recovery(struct ublk_front *f, const char *who)
{
	bool started = false;
	int r = 0;

	for (int waited = 0; r >= 0 && !started; waited += 50) {
		r = cmd(f, UBLK_CMD_START_USER_RECOVERY, NULL, 0, 0);
		started = r >= 0;
		if (r == -EBUSY && waited < RECOVER_WAIT_MS)
			r = 0; /* again */
		if (started && waited)
			report_error(who, "ublk device %d: START_USER_RECOVERY "
				"busy for %d ms (the dead server's /dev/ublkc%d "
				"not yet released)", f->id, waited, f->id);
		if (started || r < 0)
			break;
		if (waited == BUSY_REPORT_MS)
			report_busy(f, who);
		(void)poll(NULL, 0, 50);
	}
	if (r < 0) {
		report_error(who, "cannot take over ublk device %d: %s%s", f->id, strerror(-r), r == -EBUSY ?
			" (its old server has not exited yet)" : "");
		return -1;
	}
	return 0;
}

/* The device for o->dev_id, left by a server that died; 0 or -1. */
static int recover_device(struct ublk_front *f, const char *who)
{
	struct ublk_params p;
	int r;

	/* the driver quiesces a dead server's device a moment after it died */
	for (int waited = 0;; waited += 50) {
		r = ctrl_dev_info(&f->ctrl, (uint32_t)f->id, &f->info);
		if (r < 0 || f->info.state != UBLK_S_DEV_LIVE ||
		    waited >= RECOVER_WAIT_MS)
			break;
		(void)poll(NULL, 0, 50);
	}
	if (r < 0) {
		report_error(who, "--ublk-recover %d: %s", f->id,
			r == -ENODEV ? "no such ublk device" : strerror(-r));
		return -1;
	}
	if (f->info.flags & UBLK_F_UNPRIVILEGED_DEV)
		f->devpath = f->cdev_path;
	if (!(f->info.flags & (UBLK_F_USER_RECOVERY |
			       UBLK_F_USER_RECOVERY_REISSUE)) ||
	    f->info.state == UBLK_S_DEV_LIVE) {
		report_error(who, "ublk device %d is %s%s: only a device "
			"made with --ublk-recovery whose server died can be "
			"taken over", f->id,
			ctrl_state_name(f->info.state),
			f->info.flags & UBLK_F_USER_RECOVERY ? "" :
			", without recovery");
		return -1;
	}
	/*
	 * Linux 6.12's driver quiesces a dead server's device in a work item
	 * that, once the device is QUIESCED and its mutex free, still
	 * cancels the queues' commands: run after our START_USER_RECOVERY and
	 * FETCH_REQs, it aborted the new server's commands and completed one
	 * twice (v44 on 6.12: refcount underflow in io_uring_cancel_generic,
	 * then a panic in __slab_free). The work is a kworker, which the new
	 * server (SCHED_RR) preempts: we let it end first.
	 */
	(void)poll(NULL, 0, RECOVER_SETTLE_MS);
	memset(&p, 0, sizeof p);
	p.len = sizeof p;
	r = cmd(f, UBLK_CMD_GET_PARAMS, &p, sizeof p, 0);
	if (r >= 0 && p.basic.dev_sectors != uzram_size(f->dev) >> 9) {
		report_error(who, "ublk device %d has %llu bytes, the uzram "
			"device %llu: give the same --size or --image",
			f->id, (unsigned long long)p.basic.dev_sectors << 9,
			(unsigned long long)uzram_size(f->dev));
		return -1;
	}
	if (r < 0) {
		report_error(who, "cannot take over ublk device %d: %s", f->id,
			strerror(-r));
		return -1;
	}
	return start_recovery(f, who);
}

/* A new device; 0 or -1. */
static int add(struct ublk_front *f, const struct ublk_opts *o,
	       const char *who)
{
	uint64_t flags = f->ctrl.ioctl_encode ? UBLK_F_CMD_IOCTL_ENCODE : 0;
	uint64_t have = f->ctrl.features;
	int r;

	if (o->copy == UBLK_COPY_USER)
		flags |= UBLK_F_USER_COPY;
	if (o->recovery)
		flags |= UBLK_F_USER_RECOVERY;
	/* without it, the requests in flight at the death fail with EIO */
	if (o->recovery && o->reissue && (have & UBLK_F_USER_RECOVERY_REISSUE))
		flags |= UBLK_F_USER_RECOVERY_REISSUE;
	if (geteuid() != 0)
		flags |= UBLK_F_UNPRIVILEGED_DEV;
	if (o->copy == UBLK_COPY_LEAST_MEMORY && (have & UBLK_F_USER_COPY) &&
	    !(flags & UBLK_F_UNPRIVILEGED_DEV))
		flags |= UBLK_F_USER_COPY;
	if ((flags & UBLK_F_UNPRIVILEGED_DEV) && !(have & UBLK_F_UNPRIVILEGED_DEV)) {
		report_error(who, "ublk devices need root on this kernel (it "
			"has no UBLK_F_UNPRIVILEGED_DEV, Linux 6.5+)");
		return -1;
	}
	if ((flags & UBLK_F_USER_COPY) && (!(have & UBLK_F_USER_COPY) ||
					   (flags & UBLK_F_UNPRIVILEGED_DEV))) {
		report_error(who, "--ublk-copy=user: %s",
			have & UBLK_F_USER_COPY ? "not for an unprivileged "
			"device (the driver refuses it)" : "this kernel has no "
			"UBLK_F_USER_COPY (Linux 6.5+)");
		return -1;
	}
	if ((flags & UBLK_F_USER_RECOVERY) && !(have & UBLK_F_USER_RECOVERY)) {
		report_error(who, "--ublk-recovery: this kernel has no "
			"UBLK_F_USER_RECOVERY");
		return -1;
	}
	memset(&f->info, 0, sizeof f->info);
	f->info.nr_hw_queues = (uint16_t)f->nq;
	f->info.queue_depth = (uint16_t)(o->depth ? o->depth : UBLK_DEFAULT_DEPTH);
	f->info.max_io_buf_bytes = UBLK_MAX_IO;
	f->info.dev_id = (uint32_t)f->id;
	f->info.ublksrv_pid = getpid();
	f->info.flags = flags;
	r = ctrl_cmd(&f->ctrl, UBLK_CMD_ADD_DEV, (uint32_t)f->id, &f->info,
		     sizeof f->info, 0, NULL);
	if (r < 0) {
		if (f->id >= 0 && r == -EEXIST)
			report_error(who, "ublk device %d exists already (see "
				"uzram ublk list)", f->id);
		else
			report_error(who, "cannot add a ublk device: %s%s", strerror(-r), r == -EPERM ?
				" (root is needed)" : "");
		return -1;
	}
	f->id = (int)f->info.dev_id;
	snprintf(f->cdev_path, sizeof f->cdev_path, "/dev/ublkc%d", f->id);
	if (f->info.flags & UBLK_F_UNPRIVILEGED_DEV)
		f->devpath = f->cdev_path;
	if ((flags & UBLK_F_USER_COPY) && !(f->info.flags & UBLK_F_USER_COPY)) {
		report_error(who, "the driver refused UBLK_F_USER_COPY");
		(void)cmd(f, UBLK_CMD_DEL_DEV, NULL, 0, 0);
		return -1;
	}
	r = set_params(f, o->read_only);
	if (r < 0) {
		report_error(who, "ublk device %d: SET_PARAMS: %s",
			f->id, strerror(-r));
		(void)cmd(f, UBLK_CMD_DEL_DEV, NULL, 0, 0);
		return -1;
	}
	return 0;
}

/* /dev/ublkcN, once udev (or devtmpfs) made it; the fd or -1. */
static int open_cdev(struct ublk_front *f, const char *who)
{
	for (int waited = 0;; waited += 10) {
		int fd = open(f->cdev_path, O_RDWR | O_CLOEXEC);

		if (fd >= 0 || errno != ENOENT || waited >= CDEV_WAIT_MS) {
			if (fd < 0)
				report_error(who, "%s: %s", f->cdev_path,
					strerror(errno));
			return fd;
		}
		(void)poll(NULL, 0, 10);
	}
}

/* The queues' commands aborted, their threads joined; the cdev closed. */
static void end_queues(struct ublk_front *f, bool stop)
{
	if (stop) /* a device never started only aborts its commands */
		(void)cmd(f, UBLK_CMD_STOP_DEV, NULL, 0, 0);
	for (unsigned i = 0; i < f->nq; i++)
		queue_join(&f->q[i]);
	f->nq = 0;
	if (f->cdev >= 0)
		close(f->cdev);
	f->cdev = -1;
}

static void front_free(struct ublk_front *f)
{
	if (f->leave_fd >= 0)
		close(f->leave_fd);
	ctrl_close(&f->ctrl);
	free(f->q);
	free(f);
}

int ublk_front_start(struct uzram *dev, const struct ublk_opts *o,
		     const char *who, struct ublk_front **out)
{
	struct ublk_front *f = calloc(1, sizeof *f);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned nq = o->queues;
	int r;

	if (!f) {
		report_error(who, "out of memory");
		return -1;
	}
	f->dev = dev;
	f->cdev = -1;
	f->leave_fd = o->recovery || o->recover ?
		      eventfd(0, EFD_CLOEXEC) : -1;
	f->id = o->dev_id;
	if (!nq)
		nq = cpus < 1 ? 1 : cpus > 4 ? 4 : (unsigned)cpus;
	f->nq = nq;
	snprintf(f->cdev_path, sizeof f->cdev_path, "/dev/ublkc%d", f->id);
	if (ctrl_open(&f->ctrl, who) < 0) {
		free(f);
		return -1;
	}
	if (o->recover ? recover_device(f, who) : add(f, o, who)) {
		front_free(f); /* add() deleted what it added */
		return -1;
	}
	nq = f->info.nr_hw_queues;
	f->q = calloc(nq, sizeof *f->q);
	f->nq = 0;
	f->cdev = f->q ? open_cdev(f, who) : -1;
	if (f->cdev < 0)
		goto fail;
	for (unsigned i = 0; i < nq; i++) {
		struct ublk_queue *q = &f->q[i];

		q->dev = dev;
		q->cdev = f->cdev;
		q->leave_fd = f->leave_fd;
		q->id = i;
		q->depth = f->info.queue_depth;
		q->max_io = f->info.max_io_buf_bytes;
		q->user_copy = f->info.flags & UBLK_F_USER_COPY;
		q->resident = o->resident_buffers;
		q->op_fetch = f->ctrl.ioctl_encode ? UZ_IO_FETCH_REQ :
			      UBLK_IO_FETCH_REQ;
		q->op_commit = f->ctrl.ioctl_encode ?
			       UZ_IO_COMMIT_AND_FETCH_REQ :
			       UBLK_IO_COMMIT_AND_FETCH_REQ;
		r = queue_start(q);
		if (r < 0) {
			report_error(who, "ublk queue %u: %s: %s", i,
				q->what, strerror(-r));
			goto fail;
		}
		f->nq++;
	}
	r = cmd(f, o->recover ? UBLK_CMD_END_USER_RECOVERY : UBLK_CMD_START_DEV,
		NULL, 0, (uint64_t)getpid());
	if (r < 0) {
		report_error(who, "ublk device %d: %s: %s", f->id,
			o->recover ? "END_USER_RECOVERY" : "START_DEV",
			strerror(-r));
		goto fail;
	}
	*out = f;
	return 0;
fail:
	end_queues(f, true);
	if (!o->recover) /* a device taken over stays for another try */
		(void)cmd(f, UBLK_CMD_DEL_DEV, NULL, 0, 0);
	front_free(f);
	return -1;
}

int ublk_front_leave(struct ublk_front *f)
{
	const uint64_t one = 1;

	if (!f)
		return 0;
	if (f->leave_fd < 0 || write(f->leave_fd, &one, sizeof one) !=
	    (ssize_t)sizeof one)
		return -1;
	/*
	 * Not end_queues(): the parked threads hold their rings and the
	 * cdev until the process exits, and f with them (never freed).
	 */
	for (unsigned i = 0; i < f->nq; i++)
		if (queue_wait_parked(&f->q[i], LEAVE_WAIT_MS) < 0)
			report_error("serve", "ublk queue %u: still running a "
				"request after %d ms: it is cut short at the "
				"exit", i, LEAVE_WAIT_MS);
	return 0;
}

int ublk_front_stop(struct ublk_front *f, const char *who)
{
	int r;

	if (!f)
		return 0;
	end_queues(f, true);
	r = cmd(f, UBLK_CMD_DEL_DEV, NULL, 0, 0);
	if (r < 0)
		report_error(who, "cannot delete ublk device %d: %s (uzram "
			"ublk del %d does it later)", f->id, strerror(-r),
			f->id);
	front_free(f);
	return r < 0 ? -1 : 0;
}
