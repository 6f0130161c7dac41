// SPDX-License-Identifier: MIT
/*
 * fuzz_image.c - libFuzzer target for the image loader: the input is an
 * image file, opened with uzram_open() and cfg.image as any program would.
 *
 * Input layout: byte 0 holds options, the rest is the file.
 *   bit 0  recompute every checksum first (image_fixup.h), so mutations
 *          reach the checks behind them: record bounds, flags, sizes,
 *          duplicates, counts, the trailer
 *   bit 1  after a successful open, save the device and open that image
 *          too: both must hold the same bytes
 *   bit 2  open with dedup (cfg.dedup): shared records share an object
 *          instead of copying it
 * The file goes to a memfd, opened through /proc/self/fd. The oracles: the
 * sanitizers; an open either succeeds or fails with -EBADMSG, -EINVAL,
 * -ENOENT, -ENOSPC or -ENOMEM and a message; a device that opened reads
 * back whole with 0 or -EIO (a forged object may not decode, never more).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uzram.h"
#include "image_fixup.h"

#define READ_MAX (16u << 20)   /* bytes of a device read back */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int in_fd = -1;
static char in_path[64], save_dir[64], save_path[96];
static unsigned char *buf, *buf2;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	in_fd = memfd_create("image-input", MFD_CLOEXEC);
	buf = malloc(READ_MAX);
	buf2 = malloc(READ_MAX);
	snprintf(save_dir, sizeof save_dir, "%s/uzram-fuzz-image.XXXXXX",
		 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
	if (in_fd < 0 || !buf || !buf2 || !mkdtemp(save_dir))
		abort();
	snprintf(in_path, sizeof in_path, "/proc/self/fd/%d", in_fd);
	snprintf(save_path, sizeof save_path, "%s/saved.img", save_dir);
	return 0;
}

static struct uzram *open_image(const char *path, int dedup, int *ret)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;

	uzram_config_init(&cfg);
	cfg.image = path;
	cfg.mem_limit = 64u << 20;
	cfg.dedup = (uint32_t)dedup;
	*ret = uzram_open(&cfg, &dev);
	if (*ret && (!*uzram_last_error() ||
		     (*ret != -EBADMSG && *ret != -EINVAL && *ret != -ENOENT &&
		      *ret != -ENOSPC && *ret != -ENOMEM))) {
		fprintf(stderr, "open: unexpected %d: %s\n", *ret,
			uzram_last_error());
		abort();
	}
	return dev;
}

/* Read the start of the device; 0 or -EIO only. */
static size_t read_back(struct uzram *dev, unsigned char *dst)
{
	uint64_t n = uzram_size(dev) < READ_MAX ? uzram_size(dev) : READ_MAX;
	int r = uzram_read(dev, dst, (size_t)n, 0);

	if (r && r != -EIO)
		abort();
	return r ? 0 : (size_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct uzram *dev, *again;
	unsigned char *img;
	size_t n;
	int ret;

	if (size < 1)
		return 0;
	img = malloc(size);
	if (!img)
		return 0;
	memcpy(img, data + 1, size - 1);
	if (data[0] & 1)
		image_fixup(img, size - 1);
	if (ftruncate(in_fd, 0) < 0 ||
	    pwrite(in_fd, img, size - 1, 0) != (ssize_t)(size - 1))
		abort();
	free(img);
	dev = open_image(in_path, data[0] & 4, &ret);
	if (!dev)
		return 0;
	n = read_back(dev, buf);
	if (n && (data[0] & 2)) {
		if (uzram_save(dev, save_path, 0))
			abort();
		again = open_image(save_path, data[0] & 4, &ret);
		if (!again || read_back(again, buf2) != n || memcmp(buf, buf2, n))
			abort();
		uzram_close(again);
		unlink(save_path);
	}
	uzram_close(dev);
	return 0;
}
