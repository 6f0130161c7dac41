/* SPDX-License-Identifier: MIT */
/*
 * uapi.h - the kernel's ublk interface as uzram uses it: Debian 12's
 * <linux/ublk_cmd.h> (Linux 6.1), plus what later kernels added, taken
 * from the kernel's include/uapi/linux/ublk_cmd.h as facts (numbers and
 * layouts are ABI and never change). Whether the running kernel has a
 * feature is asked at run time (UBLK_U_CMD_GET_FEATURES, ctrl.c), never
 * assumed from these definitions.
 *
 * The control command is declared here rather than taken from the 6.1
 * header: since 6.4 its second data word carries dev_path_len (the
 * unprivileged devices' path prefix), which the 6.1 layout calls data[1].
 */
#ifndef UZRAM_UBLK_UAPI_H
#define UZRAM_UBLK_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>
#include <linux/ublk_cmd.h>

/* The control command, in sqe->cmd of a 128-byte SQE (since 6.4's layout). */
struct ublk_ctrl_cmd {
	__u32 dev_id;       /* the device, or (u32)-1 for ADD_DEV's choice */
	__u16 queue_id;     /* (u16)-1 unless the command is for a queue */
	__u16 len;          /* bytes at addr */
	__u64 addr;         /* the command's buffer, in or out */
	__u64 data[1];      /* inline argument */
	__u16 dev_path_len; /* unprivileged devices: "/dev/ublkcN\0" at addr */
	__u16 pad;
	__u32 reserved;
};
_Static_assert(sizeof(struct ublk_ctrl_cmd) == 32, "ublksrv_ctrl_cmd is 32 bytes");

#ifndef UBLK_CMD_GET_DEV_INFO2
#define UBLK_CMD_GET_DEV_INFO2 0x12 /* 6.5 */
#endif

/* ioctl-encoded opcodes (6.3's UBLK_F_CMD_IOCTL_ENCODE) */
#define UZ_UBLK_U_CMD(nr, dir) dir('u', nr, struct ublk_ctrl_cmd)
#define UZ_CMD_GET_DEV_INFO     UZ_UBLK_U_CMD(0x02, _IOR)
#define UZ_CMD_ADD_DEV          UZ_UBLK_U_CMD(0x04, _IOWR)
#define UZ_CMD_DEL_DEV          UZ_UBLK_U_CMD(0x05, _IOWR)
#define UZ_CMD_START_DEV        UZ_UBLK_U_CMD(0x06, _IOWR)
#define UZ_CMD_STOP_DEV         UZ_UBLK_U_CMD(0x07, _IOWR)
#define UZ_CMD_SET_PARAMS       UZ_UBLK_U_CMD(0x08, _IOWR)
#define UZ_CMD_GET_PARAMS       UZ_UBLK_U_CMD(0x09, _IOR)
#define UZ_CMD_START_USER_RECOVERY UZ_UBLK_U_CMD(0x10, _IOWR)
#define UZ_CMD_END_USER_RECOVERY   UZ_UBLK_U_CMD(0x11, _IOWR)
#define UZ_CMD_GET_DEV_INFO2    UZ_UBLK_U_CMD(0x12, _IOR)
#define UZ_CMD_GET_FEATURES     UZ_UBLK_U_CMD(0x13, _IOR)

#define UZ_IO_FETCH_REQ \
	_IOWR('u', UBLK_IO_FETCH_REQ, struct ublksrv_io_cmd)
#define UZ_IO_COMMIT_AND_FETCH_REQ \
	_IOWR('u', UBLK_IO_COMMIT_AND_FETCH_REQ, struct ublksrv_io_cmd)

/* Features after 6.1 (UBLK_F_*; the kernel says which it has). */
#ifndef UBLK_F_UNPRIVILEGED_DEV
#define UBLK_F_UNPRIVILEGED_DEV (1ULL << 5)   /* 6.5 */
#endif
#ifndef UBLK_F_CMD_IOCTL_ENCODE
#define UBLK_F_CMD_IOCTL_ENCODE (1ULL << 6)   /* 6.3 */
#endif
#ifndef UBLK_F_USER_COPY
#define UBLK_F_USER_COPY        (1ULL << 7)   /* 6.5 */
#endif
#ifndef UBLK_F_USER_RECOVERY_FAIL_IO
#define UBLK_F_USER_RECOVERY_FAIL_IO (1ULL << 9) /* 6.11 */
#endif
#ifndef UBLK_F_AUTO_BUF_REG
#define UBLK_F_AUTO_BUF_REG     (1ULL << 11)  /* 6.16 */
#endif

#ifndef UBLK_S_DEV_FAIL_IO
#define UBLK_S_DEV_FAIL_IO 3
#endif

/* UBLK_F_USER_COPY: the request's bytes at this offset of /dev/ublkcN. */
#define UZ_UBLK_BUF_OFF    25 /* UBLK_TAG_OFF: a buffer is at most 32 MiB */
#define UZ_UBLK_QID_OFF    41 /* UBLK_QID_OFF: 16 bits of tag above it */
static inline __u64 uz_ublk_user_copy_pos(unsigned q, unsigned tag)
{
	return UBLKSRV_IO_BUF_OFFSET + ((__u64)q << UZ_UBLK_QID_OFF) +
	       ((__u64)tag << UZ_UBLK_BUF_OFF);
}

/* The descriptors of queue q are mapped from this offset of /dev/ublkcN. */
static inline __u64 uz_ublk_desc_pos(unsigned q, size_t page)
{
	size_t per_queue = UBLK_MAX_QUEUE_DEPTH * sizeof(struct ublksrv_io_desc);

	per_queue = (per_queue + page - 1) / page * page;
	return UBLKSRV_CMD_BUF_OFFSET + (__u64)q * per_queue;
}

#endif /* UZRAM_UBLK_UAPI_H */
