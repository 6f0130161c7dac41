/* SPDX-License-Identifier: MIT */
/*
 * image_fixup.h - recompute every checksum of an image in place, so that a
 * test or the fuzzer can change a field and still reach the checks behind
 * the checksums. It walks the file as the loader does (image.h), trusting
 * the lengths it finds, and stops where they make no sense.
 */
#ifndef UZRAM_IMAGE_FIXUP_H
#define UZRAM_IMAGE_FIXUP_H

#include "image/image.h"

static inline void image_fixup(unsigned char *p, size_t n)
{
	uint64_t seed;
	size_t off;

	if (n < IMG_HEADER_MIN)
		return;
	off = img_get32(p + IMG_H_HEADER_LEN);
	if (off < IMG_HEADER_MIN || off > n)
		return;
	seed = img_sum(p, off - IMG_SUM_LEN, 0);
	img_put64(p + off - IMG_SUM_LEN, seed);
	while (n - off >= IMG_BLOCK_HEAD) {
		uint32_t plen = img_get32(p + off + IMG_B_PAYLOAD);

		if (img_get32(p + off) == IMG_TRAILER_MAGIC) {
			if (n - off >= IMG_TRAILER_LEN)
				img_put64(p + off + IMG_T_SUM,
					  img_sum(p + off, IMG_T_SUM, seed));
			return;
		}
		if (plen > n - off - IMG_BLOCK_HEAD ||
		    n - off - IMG_BLOCK_HEAD - plen < IMG_SUM_LEN)
			return;
		img_put64(p + off + IMG_BLOCK_HEAD + plen,
			  img_sum(p + off, IMG_BLOCK_HEAD + plen, seed));
		off += IMG_BLOCK_HEAD + plen + IMG_SUM_LEN;
	}
}

#endif
