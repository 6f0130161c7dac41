/*
 * device.h - making a device (src/device/): the one layer that knows
 * every subsystem; it creates them, in order, and installs the hooks by
 * which the store reaches the layers above it (core.h). Private to the
 * library.
 */
#ifndef UZRAM_DEVICE_H
#define UZRAM_DEVICE_H

#include "uzram.h"

/*
 * device.c: create an empty device from a checked copy of the config;
 * uzram_open() without an image, and the image loader, both use it.
 */
int device_create(const struct uzram_config *c, struct uzram **devp);

/*
 * device.c: open the tier of dev on target (tier_open()), install its
 * hooks in dev->hooks, and start its policy thread; uzram_open() with a
 * backing store, and the image loader once the image is in. 0, or a
 * negative errno with the error set (uzram_close() undoes the rest).
 */
int device_tier_open(struct uzram *dev, const char *target, unsigned high,
		     unsigned low);

#endif
