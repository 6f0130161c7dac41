// SPDX-License-Identifier: MIT
/*
 * open.c - the library's front door: the config struct's defaults and its
 * published layouts, and uzram_open(), which opens a fresh device
 * (device.c) or one saved in an image (image_open.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <string.h>

#include "uzram.h"
#include "base/base.h"
#include "image/image.h"
#include "device/device.h"

UZRAM_API void uzram_config_init(struct uzram_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof *cfg);
	cfg->struct_size = sizeof *cfg;
	cfg->algorithm = "lz4";
	cfg->cluster_size = PAGE;
	cfg->keep_fd = -1;
}

/*
 * The layouts published so far: the first ended with mem_limit, the
 * second adds cluster_size, the third the dictionary, the tier's backing
 * store and watermarks, and the image, the fourth dedup and the worker
 * threads, the fifth the fast algorithm and the re-encode age, the sixth
 * the kept store's fd, the seventh (the current one) the backing flags.
 * Only these sizes are known.
 */
#define CONFIG_V1_SIZE \
	(offsetof(struct uzram_config, mem_limit) + sizeof(uint64_t))
#define CONFIG_V2_SIZE offsetof(struct uzram_config, dict)
#define CONFIG_V3_SIZE offsetof(struct uzram_config, dedup)
#define CONFIG_V4_SIZE \
	(offsetof(struct uzram_config, threads) + sizeof(uint32_t))
#define CONFIG_V5_SIZE offsetof(struct uzram_config, keep_fd)
#define CONFIG_V6_SIZE offsetof(struct uzram_config, backing_flags)
#define CONFIG_V7_SIZE sizeof(struct uzram_config)

UZRAM_API int uzram_open(const struct uzram_config *cfg, struct uzram **devp)
{
	struct uzram_config c;

	if (!cfg || !devp)
		return uzram_set_error(-EINVAL, "open: NULL %s",
				       cfg ? "device pointer" : "config");
	if (cfg->struct_size != CONFIG_V1_SIZE &&
	    cfg->struct_size != CONFIG_V2_SIZE &&
	    cfg->struct_size != CONFIG_V3_SIZE &&
	    cfg->struct_size != CONFIG_V4_SIZE &&
	    cfg->struct_size != CONFIG_V5_SIZE &&
	    cfg->struct_size != CONFIG_V6_SIZE &&
	    cfg->struct_size != CONFIG_V7_SIZE)
		return uzram_set_error(-EINVAL,
			"open: config struct_size %zu is not one this library "
			"knows (use uzram_config_init)", cfg->struct_size);
	/* Fields past an older caller's struct_size keep their defaults. */
	uzram_config_init(&c);
	memcpy(&c, cfg, cfg->struct_size);
	if (c.keep_fd >= 0)
		return keep_open(&c, devp);
	if (c.image) {
		struct image_lock *lock;
		int ret = image_lock_acquire(c.image, "open", &lock);

		if (!ret)
			ret = image_open(&c, devp);
		if (ret) {
			image_lock_release(lock);
			return ret;
		}
		image_lock_give(*devp, lock);
		return 0;
	}
	return device_create(&c, devp);
}
