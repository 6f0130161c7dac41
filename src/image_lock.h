/*
 * image_lock.h - one device per image: the lock a device holds on the path
 * of its image (image_lock.c).
 */
#ifndef UZRAM_IMAGE_LOCK_H
#define UZRAM_IMAGE_LOCK_H

#include <stdbool.h>

struct image_lock;

/*
 * Take the lock on the image at path, for an operation named by `what`
 * ("open", "save"). Returns 0 with *lockp set, -EBUSY when another device
 * (in this process or another) holds it, with uzram_last_error() naming
 * the holder's pid, or the negative errno of creating the lock file.
 * *lockp is NULL after a success only where the lock cannot be taken as
 * nobody can write path's directory (then nobody can replace the image).
 */
int image_lock_take(const char *path, const char *what,
		    struct image_lock **lockp);

/* Whether lock (NULL: none) is the lock of the image at path. */
bool image_lock_covers(const struct image_lock *lock, const char *path);

/* Release the lock and remove its file; NULL is a no-op. */
void image_lock_release(struct image_lock *lock);

#endif
