/* SPDX-License-Identifier: MIT */
/*
 * nbd-proto.h - wire constants of the NBD protocol (fixed newstyle
 * handshake, simple and structured replies) and big-endian helpers.
 *
 * Numbers follow doc/proto.md of the NetworkBlockDevice/nbd project. All
 * integers on the wire are big-endian. Messages are packed byte by byte
 * with the put/get helpers below, so no padding or alignment question can
 * arise; each message's size and the offset of each field in it are named
 * here (NBD_<MESSAGE>_SIZE, NBD_<MESSAGE>_<FIELD>), in the order of the
 * fields on the wire.
 */
#ifndef UZRAM_NBD_PROTO_H
#define UZRAM_NBD_PROTO_H

#include <stdint.h>

/* Handshake. */
#define NBD_MAGIC            0x4e42444d41474943ull /* "NBDMAGIC" */
#define NBD_IHAVEOPT         0x49484156454f5054ull /* "IHAVEOPT" */
#define NBD_REP_MAGIC        0x0003e889045565a9ull

/* Server greeting: NBDMAGIC, IHAVEOPT, handshake flags. */
#define NBD_GREETING_SIZE        18
#define NBD_GREETING_IHAVEOPT    8
#define NBD_GREETING_FLAGS       16
#define NBD_CLIENT_FLAGS_SIZE    4  /* the client's answer: its flags */

/* Option request: IHAVEOPT, option, data length; the data follows. */
#define NBD_OPTION_SIZE          16
#define NBD_OPTION_OPT           8
#define NBD_OPTION_LENGTH        12

/* Option reply: REP_MAGIC, option, reply type, data length; data follows. */
#define NBD_OPT_REPLY_SIZE       20
#define NBD_OPT_REPLY_OPT        8
#define NBD_OPT_REPLY_TYPE       12
#define NBD_OPT_REPLY_LENGTH     16

/*
 * NBD_OPT_EXPORT_NAME's reply: export size, transmission flags, then
 * NBD_EXPORT_REPLY_ZEROES zero bytes unless the client chose NO_ZEROES.
 */
#define NBD_EXPORT_REPLY_SIZE    10
#define NBD_EXPORT_REPLY_FLAGS   8
#define NBD_EXPORT_REPLY_ZEROES  124

/*
 * NBD_REP_INFO data: an info type (NBD_INFO_TYPE_SIZE bytes), then for
 * NBD_INFO_EXPORT the export size and transmission flags, for
 * NBD_INFO_BLOCK_SIZE the minimum, preferred and maximum block sizes, for
 * NAME and DESCRIPTION a string. NBD_OPT_INFO and NBD_OPT_GO ask for info
 * types as a list of NBD_INFO_TYPE_SIZE-byte numbers.
 */
#define NBD_INFO_TYPE_SIZE       2
#define NBD_INFO_EXPORT_SIZE     10
#define NBD_INFO_EXPORT_FLAGS    8
#define NBD_INFO_BLOCK_SIZE_SIZE 12
#define NBD_INFO_BLOCK_PREFERRED 4
#define NBD_INFO_BLOCK_MAXIMUM   8

/* NBD_REP_SERVER data: name length, name. */
#define NBD_REP_SERVER_NAME      4
/* NBD_REP_META_CONTEXT data: context id, name. */
#define NBD_REP_META_NAME        4

#define NBD_FLAG_FIXED_NEWSTYLE   (1u << 0) /* server handshake flags */
#define NBD_FLAG_NO_ZEROES        (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0) /* client flags */
#define NBD_FLAG_C_NO_ZEROES      (1u << 1)

enum nbd_opt {
	NBD_OPT_EXPORT_NAME = 1,
	NBD_OPT_ABORT = 2,
	NBD_OPT_LIST = 3,
	NBD_OPT_PEEK_EXPORT = 4,
	NBD_OPT_STARTTLS = 5,
	NBD_OPT_INFO = 6,
	NBD_OPT_GO = 7,
	NBD_OPT_STRUCTURED_REPLY = 8,
	NBD_OPT_LIST_META_CONTEXT = 9,
	NBD_OPT_SET_META_CONTEXT = 10,
	NBD_OPT_EXTENDED_HEADERS = 11,
};

#define NBD_REP_ERR(n) ((1u << 31) | (n))
enum nbd_rep {
	NBD_REP_ACK = 1,
	NBD_REP_SERVER = 2,
	NBD_REP_INFO = 3,
	NBD_REP_META_CONTEXT = 4,
	NBD_REP_ERR_UNSUP = NBD_REP_ERR(1),
	NBD_REP_ERR_POLICY = NBD_REP_ERR(2),
	NBD_REP_ERR_INVALID = NBD_REP_ERR(3),
	NBD_REP_ERR_PLATFORM = NBD_REP_ERR(4),
	NBD_REP_ERR_TLS_REQD = NBD_REP_ERR(5),
	NBD_REP_ERR_UNKNOWN = NBD_REP_ERR(6),
	NBD_REP_ERR_SHUTDOWN = NBD_REP_ERR(7),
	NBD_REP_ERR_BLOCK_SIZE_REQD = NBD_REP_ERR(8),
	NBD_REP_ERR_TOO_BIG = NBD_REP_ERR(9),
};

enum nbd_info {
	NBD_INFO_EXPORT = 0,
	NBD_INFO_NAME = 1,
	NBD_INFO_DESCRIPTION = 2,
	NBD_INFO_BLOCK_SIZE = 3,
};

/* Transmission flags, sent with the export size. */
enum nbd_tflag {
	NBD_FLAG_HAS_FLAGS = 1u << 0,
	NBD_FLAG_READ_ONLY = 1u << 1,
	NBD_FLAG_SEND_FLUSH = 1u << 2,
	NBD_FLAG_SEND_FUA = 1u << 3,
	NBD_FLAG_ROTATIONAL = 1u << 4,
	NBD_FLAG_SEND_TRIM = 1u << 5,
	NBD_FLAG_SEND_WRITE_ZEROES = 1u << 6,
	NBD_FLAG_SEND_DF = 1u << 7,
	NBD_FLAG_CAN_MULTI_CONN = 1u << 8,
	NBD_FLAG_SEND_RESIZE = 1u << 9,
	NBD_FLAG_SEND_CACHE = 1u << 10,
	NBD_FLAG_SEND_FAST_ZERO = 1u << 11,
};

/* Transmission. */
#define NBD_REQUEST_MAGIC    0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

/* Request: magic, flags, type, cookie, offset, length; a write's data follows. */
#define NBD_REQUEST_SIZE      28
#define NBD_REQUEST_FLAGS     4
#define NBD_REQUEST_TYPE      6
#define NBD_REQUEST_COOKIE    8
#define NBD_REQUEST_OFFSET    16
#define NBD_REQUEST_LENGTH    24

/* Simple reply: magic, error, cookie; a read's data follows. */
#define NBD_SIMPLE_REPLY_SIZE   16
#define NBD_SIMPLE_REPLY_ERROR  4
#define NBD_SIMPLE_REPLY_COOKIE 8

/* Structured reply chunk: magic, flags, type, cookie, payload length. */
#define NBD_CHUNK_HDR_SIZE    20
#define NBD_CHUNK_FLAGS       4
#define NBD_CHUNK_TYPE        6
#define NBD_CHUNK_COOKIE      8
#define NBD_CHUNK_LENGTH      16

/*
 * Chunk payloads, after the header. OFFSET_DATA: offset, then the data.
 * OFFSET_HOLE: offset, length. ERROR: error, message length (then the
 * message; ours have none). BLOCK_STATUS: context id, then descriptors of
 * length and status flags.
 */
#define NBD_DATA_PAYLOAD_HDR  8
#define NBD_HOLE_PAYLOAD      12
#define NBD_HOLE_LENGTH       8
#define NBD_ERROR_PAYLOAD     6
#define NBD_ERROR_MSG_LENGTH  4
#define NBD_BS_PAYLOAD_HDR    4
#define NBD_BS_DESC_SIZE      8
#define NBD_BS_DESC_FLAGS     4

enum nbd_cmd {
	NBD_CMD_READ = 0,
	NBD_CMD_WRITE = 1,
	NBD_CMD_DISC = 2,
	NBD_CMD_FLUSH = 3,
	NBD_CMD_TRIM = 4,
	NBD_CMD_CACHE = 5,
	NBD_CMD_WRITE_ZEROES = 6,
	NBD_CMD_BLOCK_STATUS = 7,
	NBD_CMD_NR = 8, /* commands we count by type; others are "other" */
};

enum nbd_cmd_flag {
	NBD_CMD_FLAG_FUA = 1u << 0,
	NBD_CMD_FLAG_NO_HOLE = 1u << 1,
	NBD_CMD_FLAG_DF = 1u << 2,
	NBD_CMD_FLAG_REQ_ONE = 1u << 3,
	NBD_CMD_FLAG_FAST_ZERO = 1u << 4,
};

#define NBD_REPLY_FLAG_DONE (1u << 0)
enum nbd_reply_type {
	NBD_REPLY_TYPE_NONE = 0,
	NBD_REPLY_TYPE_OFFSET_DATA = 1,
	NBD_REPLY_TYPE_OFFSET_HOLE = 2,
	NBD_REPLY_TYPE_BLOCK_STATUS = 5,
	NBD_REPLY_TYPE_ERROR = (1u << 15) | 1,
	NBD_REPLY_TYPE_ERROR_OFFSET = (1u << 15) | 2,
};

/* Error values on the wire; not the host's errno numbers by definition. */
enum nbd_errno {
	NBD_EPERM = 1,
	NBD_EIO = 5,
	NBD_ENOMEM = 12,
	NBD_EINVAL = 22,
	NBD_ENOSPC = 28,
	NBD_EOVERFLOW = 75,
	NBD_ENOTSUP = 95,
	NBD_ESHUTDOWN = 108,
};

#define NBD_STATE_HOLE (1u << 0)
#define NBD_STATE_ZERO (1u << 1)

#define NBD_META_BASE_ALLOCATION "base:allocation"

/* Each message's last field ends where its size says. */
_Static_assert(NBD_GREETING_FLAGS + 2 == NBD_GREETING_SIZE, "greeting");
_Static_assert(NBD_OPTION_LENGTH + 4 == NBD_OPTION_SIZE, "option");
_Static_assert(NBD_OPT_REPLY_LENGTH + 4 == NBD_OPT_REPLY_SIZE, "option reply");
_Static_assert(NBD_REQUEST_LENGTH + 4 == NBD_REQUEST_SIZE, "request");
_Static_assert(NBD_SIMPLE_REPLY_COOKIE + 8 == NBD_SIMPLE_REPLY_SIZE, "reply");
_Static_assert(NBD_CHUNK_LENGTH + 4 == NBD_CHUNK_HDR_SIZE, "chunk header");
_Static_assert(NBD_HOLE_LENGTH + 4 == NBD_HOLE_PAYLOAD, "hole payload");
_Static_assert(NBD_ERROR_MSG_LENGTH + 2 == NBD_ERROR_PAYLOAD, "error payload");

static inline void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static inline void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static inline void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static inline uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

#endif /* UZRAM_NBD_PROTO_H */
