/* SPDX-License-Identifier: MIT */
/*
 * device.h - making a device (src/device/): the one layer that knows
 * every subsystem; it creates them, in order, and installs the hooks by
 * which the store reaches the layers above it (core.h). Private to the
 * library.
 */
#ifndef UZRAM_DEVICE_H
#define UZRAM_DEVICE_H

#include <stdbool.h>

#include "uzram.h"

/*
 * device.c: create an empty device from a checked copy of the config;
 * uzram_open() without an image, and the image loader, both use it.
 */
int device_create(const struct uzram_config *c, struct uzram **devp);

/*
 * device.c: the same, with the allocator over a file (zpool_create_file()):
 * the kept store's (keep.c), which maps the slot table itself.
 */
struct zpool_file;
int device_create_file(const struct uzram_config *c,
		       const struct zpool_file *file, struct uzram **devp);

/*
 * keep.c: open a device whose store is kept in the memfd c->keep_fd
 * (doc/keep.md): a new store if the file is empty, else adopt the one it
 * holds, with its geometry and codec (a non-zero c->size must match).
 * Returns 0, or -EOPNOTSUPP (a feature a kept store cannot have), -EUCLEAN
 * (the file is not a store this library can trust: nothing is served),
 * -EINVAL, -ENOMEM, with the error set. Fills dev->keep.
 */
int keep_open(const struct uzram_config *c, struct uzram **devp);

/*
 * device.c: open the tier of dev on target (tier_open()), install its
 * hooks in dev->hooks, and start its policy thread; uzram_open() with a
 * backing store, and the image loader once the image is in. 0, or a
 * negative errno with the error set (uzram_close() undoes the rest).
 */
int device_tier_open(struct uzram *dev, const char *target, uint64_t flags,
		     unsigned high, unsigned low);

/*
 * image_lock.c: one device per image, the lock a device holds on the path
 * of its image (dev->image_lock, released by uzram_close()).
 */
struct image_lock;

/*
 * Take the lock on the image at path, for an operation named by `what`
 * ("open", "save"). Returns 0 with *lockp set, -EBUSY when another device
 * (in this process or another) holds it, with uzram_last_error() naming
 * the holder's pid, or the negative errno of creating the lock file.
 * *lockp is NULL after a success only where the lock cannot be taken as
 * nobody can write path's directory (then nobody can replace the image).
 */
int image_lock_acquire(const char *path, const char *what,
		       struct image_lock **lockp);

/* Whether lock (NULL: none) is the lock of the image at path. */
bool image_lock_covers(const struct image_lock *lock, const char *path);

/* Release the lock and remove its file; NULL is a no-op. */
void image_lock_release(struct image_lock *lock);

/*
 * Give dev, which holds no image lock yet, the lock (NULL: none) that
 * uzram_open() took before opening its image: uzram_close() releases it.
 */
void image_lock_give(struct uzram *dev, struct image_lock *lock);

#endif
