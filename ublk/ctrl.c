// SPDX-License-Identifier: MIT
/*
 * ctrl.c - the ublk control device /dev/ublk-control: each command is an
 * io_uring passthrough (IORING_OP_URING_CMD) of a 32-byte struct in a
 * 128-byte SQE, run synchronously; and `uzram ublk list` / `del`.
 *
 * Opcodes: kernels since 6.3 take them ioctl-encoded (_IOWR('u', nr)),
 * and since 6.5 answer UBLK_U_CMD_GET_FEATURES with the UBLK_F_* they
 * have; a kernel built without BLKDEV_UBLK_LEGACY_OPCODES takes only the
 * encoded ones. So GET_FEATURES is asked first: if it answers, every
 * command is encoded; if not (6.0 to 6.4), the plain numbers are used and
 * only the 6.0 features are assumed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/report.h"
#include "ublk_impl.h"

/* The encoded form of control command nr (see uapi.h). */
static unsigned ctrl_opcode(const struct ublk_ctrl *c, unsigned nr)
{
	if (!c->ioctl_encode)
		return nr;
	switch (nr) {
	case UBLK_CMD_GET_DEV_INFO: return UZ_CMD_GET_DEV_INFO;
	case UBLK_CMD_ADD_DEV: return UZ_CMD_ADD_DEV;
	case UBLK_CMD_DEL_DEV: return UZ_CMD_DEL_DEV;
	case UBLK_CMD_START_DEV: return UZ_CMD_START_DEV;
	case UBLK_CMD_STOP_DEV: return UZ_CMD_STOP_DEV;
	case UBLK_CMD_SET_PARAMS: return UZ_CMD_SET_PARAMS;
	case UBLK_CMD_GET_PARAMS: return UZ_CMD_GET_PARAMS;
	case UBLK_CMD_START_USER_RECOVERY: return UZ_CMD_START_USER_RECOVERY;
	case UBLK_CMD_END_USER_RECOVERY: return UZ_CMD_END_USER_RECOVERY;
	case UBLK_CMD_GET_DEV_INFO2: return UZ_CMD_GET_DEV_INFO2;
	default: return nr;
	}
}

static int ctrl_submit(struct ublk_ctrl *c, unsigned op, uint32_t id,
		       void *buf, uint16_t len, uint64_t data,
		       uint16_t path_len)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	struct io_uring_cqe *cqe;
	struct ublk_ctrl_cmd *cmd;
	int r;

	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof *sqe); /* a 128-byte SQE */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = c->fd;
	sqe->cmd_op = op;
	cmd = (struct ublk_ctrl_cmd *)sqe->cmd;
	cmd->dev_id = id;
	cmd->queue_id = (uint16_t)-1;
	cmd->addr = (uint64_t)(uintptr_t)buf;
	cmd->len = len;
	cmd->data[0] = data;
	cmd->dev_path_len = path_len;
	r = io_uring_submit(&c->ring);
	if (r < 0)
		return r;
	do
		r = io_uring_wait_cqe(&c->ring, &cqe);
	while (r == -EINTR);
	if (r < 0)
		return r;
	r = cqe->res;
	io_uring_cqe_seen(&c->ring, cqe);
	return r;
}

int ctrl_cmd(struct ublk_ctrl *c, unsigned nr, uint32_t id, void *buf,
	     uint16_t len, uint64_t data, const char *devpath)
{
	size_t plen;
	char *tmp;
	int r;

	if (!devpath)
		return ctrl_submit(c, ctrl_opcode(c, nr), id, buf, len, data, 0);
	/* unprivileged: "/dev/ublkcN\0" then the command's own bytes */
	plen = strlen(devpath) + 1;
	if (plen + len > UINT16_MAX)
		return -ENAMETOOLONG;
	tmp = calloc(1, plen + len);
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, devpath, plen);
	if (len)
		memcpy(tmp + plen, buf, len);
	r = ctrl_submit(c, ctrl_opcode(c, nr), id, tmp, (uint16_t)(plen + len),
			data, (uint16_t)plen);
	if (r >= 0 && len)
		memcpy(buf, tmp + plen, len);
	free(tmp);
	return r;
}

int ctrl_open(struct ublk_ctrl *c, const char *who)
{
	uint64_t features = 0;
	int r;

	memset(c, 0, sizeof *c);
	c->fd = open("/dev/ublk-control", O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		r = errno;
		if (r == ENOENT)
			report_error(who, "/dev/ublk-control: no ublk driver in "
				"this kernel (Linux 6.0 or later with "
				"CONFIG_BLK_DEV_UBLK; try modprobe ublk_drv)");
		else if (r == EACCES || r == EPERM)
			report_error(who, "/dev/ublk-control: %s: ublk "
				"devices need root, or a udev rule that gives "
				"you /dev/ublk-control for unprivileged ones "
				"(Linux 6.5 or later)", strerror(r));
		else
			report_error(who, "/dev/ublk-control: %s",
				strerror(r));
		return -1;
	}
	r = io_uring_queue_init(4, &c->ring, IORING_SETUP_SQE128);
	if (r < 0) {
		report_error(who, "io_uring for /dev/ublk-control: %s", strerror(-r));
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	r = ctrl_submit(c, UZ_CMD_GET_FEATURES, (uint32_t)-1, &features,
			sizeof features, 0, 0);
	if (r >= 0) {
		c->features = features;
		c->ioctl_encode = true;
	} else {
		/* before 6.5: the features of 6.0 */
		c->features = UBLK_F_URING_CMD_COMP_IN_TASK |
			      UBLK_F_NEED_GET_DATA | UBLK_F_USER_RECOVERY |
			      UBLK_F_USER_RECOVERY_REISSUE;
	}
	return 0;
}

void ctrl_close(struct ublk_ctrl *c)
{
	if (c->fd < 0)
		return;
	io_uring_queue_exit(&c->ring);
	close(c->fd);
	c->fd = -1;
}

int ctrl_dev_info(struct ublk_ctrl *c, uint32_t id,
		  struct ublksrv_ctrl_dev_info *info)
{
	char path[32];
	int r;

	memset(info, 0, sizeof *info);
	r = ctrl_cmd(c, UBLK_CMD_GET_DEV_INFO, id, info, sizeof *info, 0, NULL);
	if (r == -EPERM || r == -EACCES || r == -EINVAL) {
		/* an unprivileged device answers only with its path */
		snprintf(path, sizeof path, "/dev/ublkc%u", id);
		r = ctrl_cmd(c, UBLK_CMD_GET_DEV_INFO2, id, info, sizeof *info,
			     0, path);
	}
	return r < 0 ? r : 0;
}

const char *ctrl_state_name(unsigned state)
{
	switch (state) {
	case UBLK_S_DEV_DEAD: return "dead";
	case UBLK_S_DEV_LIVE: return "live";
	case UBLK_S_DEV_QUIESCED: return "quiesced";
	case UBLK_S_DEV_FAIL_IO: return "fail-io";
	default: return "unknown";
	}
}

/* The ublk devices there are, from sysfs, in order; the count, or -1. */
static int list_ids(int *ids, int max)
{
	DIR *d = opendir("/sys/class/ublk-char");
	struct dirent *e;
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d)) && n < max) {
		char *end;
		long v;

		if (strncmp(e->d_name, "ublkc", 5))
			continue;
		v = strtol(e->d_name + 5, &end, 10);
		if (*end || v < 0 || end == e->d_name + 5)
			continue;
		ids[n++] = (int)v;
	}
	closedir(d);
	for (int i = 1; i < n; i++) /* few: insertion sort */
		for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			int t = ids[j];

			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	return n;
}

int ublk_list_devices(const char *who)
{
	struct ublksrv_ctrl_dev_info info;
	struct ublk_ctrl c;
	int ids[1024], n;

	if (ctrl_open(&c, who) < 0)
		return 1;
	n = list_ids(ids, 1024);
	if (n < 0) {
		report_error(who, "/sys/class/ublk-char: %s",
			strerror(errno));
		ctrl_close(&c);
		return 1;
	}
	printf("%-4s %-9s %-8s %-6s %-6s %s\n", "id", "state", "pid",
	       "queues", "depth", "flags");
	for (int i = 0; i < n; i++) {
		if (ctrl_dev_info(&c, (uint32_t)ids[i], &info) < 0)
			continue; /* gone since the scan, or not ours */
		printf("%-4d %-9s %-8d %-6u %-6u 0x%llx\n", ids[i],
		       ctrl_state_name(info.state), info.ublksrv_pid,
		       info.nr_hw_queues, info.queue_depth,
		       (unsigned long long)info.flags);
	}
	ctrl_close(&c);
	return 0;
}

int ublk_del_device(int id, const char *who)
{
	struct ublksrv_ctrl_dev_info info;
	char path[32], *devpath = NULL;
	struct ublk_ctrl c;
	int r;

	if (ctrl_open(&c, who) < 0)
		return 1;
	r = ctrl_dev_info(&c, (uint32_t)id, &info);
	if (r < 0) {
		report_error(who, "ublk device %d: %s", id,
			r == -ENODEV ? "no such device" : strerror(-r));
		ctrl_close(&c);
		return 1;
	}
	if (info.state == UBLK_S_DEV_LIVE && info.ublksrv_pid > 0 &&
	    kill(info.ublksrv_pid, 0) == 0) {
		report_error(who, "ublk device %d is served by process %d: "
			"stop that one (SIGTERM) instead", id,
			info.ublksrv_pid);
		ctrl_close(&c);
		return 1;
	}
	if (info.flags & UBLK_F_UNPRIVILEGED_DEV) {
		snprintf(path, sizeof path, "/dev/ublkc%d", id);
		devpath = path;
	}
	r = ctrl_cmd(&c, UBLK_CMD_STOP_DEV, (uint32_t)id, NULL, 0, 0, devpath);
	if (r >= 0)
		r = ctrl_cmd(&c, UBLK_CMD_DEL_DEV, (uint32_t)id, NULL, 0, 0,
			     devpath);
	ctrl_close(&c);
	if (r < 0) {
		report_error(who, "cannot delete ublk device %d: %s",
			id, strerror(-r));
		return 1;
	}
	return 0;
}
