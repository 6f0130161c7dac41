/* SPDX-License-Identifier: MIT */
/*
 * image.h - the image file format (version 1) and what the store, the
 * device and the image code share about it. Private to the library (and to
 * the image fuzzer, which repairs checksums with these definitions).
 *
 * The format is described for people in src/image-format.md; this header
 * is its definition for the code. Every integer is little-endian.
 *
 *   header   header_len bytes (IMG_HEADER_MIN and up: codecs, their
 *            dictionaries), its last 8 an XXH3-64 of the rest
 *   block    IMG_BLOCK_HEAD bytes, payload_len bytes of records, then an
 *   ...      XXH3-64 (seeded with the header's) of head and payload
 *   trailer  IMG_TRAILER_LEN bytes, its last 8 an XXH3-64 (same seed)
 *
 *   record   u64 cluster index, u32 slot flags (core.h), u32 size, then
 *            size bytes: the object as stored, or the 8-byte value of a
 *            same-filled cluster
 */
#ifndef UZRAM_IMAGE_H
#define UZRAM_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "uzram.h"

#define IMG_MAGIC "UZRAMIMG"
#define IMG_VERSION 2u      /* what a save writes */
#define IMG_VERSION_MIN 1u  /* the oldest a reader reads: 1 has no shared
			     * records, and is otherwise the same */

/*
 * Header fields, by byte offset. The codecs: for each priority (0 the
 * device's algorithm, 1..3 recompression's) its two banks (core.h), an
 * entry each; then the dictionaries of the entries that have one, in entry
 * order; then the checksum, the header's last 8 bytes.
 */
#define IMG_H_MAGIC 0         /* 8 bytes */
#define IMG_H_VERSION 8       /* u32 */
#define IMG_H_HEADER_LEN 12   /* u32: bytes of the header, checksum included */
#define IMG_H_INCOMPAT 16     /* u32: features a reader must know; 0 */
#define IMG_H_COMPAT 20       /* u32: features a reader may ignore; 0 */
#define IMG_H_SIZE 24         /* u64: device size in bytes */
#define IMG_H_CLUSTER 32      /* u32: cluster size in bytes */
#define IMG_H_CUR 36          /* u32: bit p: priority p's current bank */
#define IMG_H_CODECS 40       /* 8 entries: [prio][bank] */
#define IMG_CODEC_NAME 16     /* name[16] (NUL-padded; empty: none) */
#define IMG_CODEC_LEVEL 16    /* i32 */
#define IMG_CODEC_DICT 20     /* u32: dictionary bytes, 0: none */
#define IMG_CODEC_LEN 24
#define IMG_CODECS ((UZRAM_MAX_RECOMP + 1) * 2)
#define IMG_H_DICTS (IMG_H_CODECS + IMG_CODECS * IMG_CODEC_LEN)  /* 232 */
#define IMG_HEADER_MIN (IMG_H_DICTS + 8)
#define IMG_DICT_MAX (1u << 20)   /* the largest dictionary (zcomp.h) */
#define IMG_HEADER_MAX (IMG_HEADER_MIN + IMG_CODECS * IMG_DICT_MAX)

/* Blocks. */
#define IMG_BLOCK_MAGIC 0x4b425a55u  /* "UZBK" */
#define IMG_B_MAGIC 0         /* u32 */
#define IMG_B_RECORDS 4       /* u32: records in the block, >= 1 */
#define IMG_B_PAYLOAD 8       /* u32: bytes of records */
#define IMG_B_RESERVED 12     /* u32: 0 */
#define IMG_BLOCK_HEAD 16
#define IMG_SUM_LEN 8         /* the checksum after the payload */
#define IMG_BLOCK_TARGET (1u << 20)  /* a writer ends a block past this */
#define IMG_RECORD_HEAD 16
#define IMG_OBJECT_MAX (1u << 16)    /* the largest cluster */
/* The longest payload a reader accepts. */
#define IMG_PAYLOAD_MAX (IMG_BLOCK_TARGET + IMG_RECORD_HEAD + IMG_OBJECT_MAX)

/* The trailer. */
#define IMG_TRAILER_MAGIC 0x4e455a55u /* "UZEN" */
#define IMG_T_MAGIC 0         /* u32 */
#define IMG_T_RESERVED 4      /* u32: 0 */
#define IMG_T_BLOCKS 8        /* u64: blocks before the trailer */
#define IMG_T_RECORDS 16      /* u64: records in them */
#define IMG_T_SUM 24          /* u64 */
#define IMG_TRAILER_LEN 32

static inline uint32_t img_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t img_get64(const unsigned char *p)
{
	return (uint64_t)img_get32(p) | (uint64_t)img_get32(p + 4) << 32;
}

static inline void img_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void img_put64(unsigned char *p, uint64_t v)
{
	img_put32(p, (uint32_t)v);
	img_put32(p + 4, (uint32_t)(v >> 32));
}

/* XXH3-64 of n bytes, with a seed (0 for the header); image_save.c. */
uint64_t img_sum(const void *p, size_t n, uint64_t seed);

struct content;
struct uzram;

/* image_open.c: uzram_open() with cfg->image set. */
int image_open(const struct uzram_config *cfg, struct uzram **devp);


#endif
