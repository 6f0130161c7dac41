// SPDX-License-Identifier: MIT
/*
 * content.c - what a slot's contents hold, counted and given back: the
 * statistics a cluster's contents add to (or take from) and the freeing
 * of its object, in the allocator or on the backing store. Below the
 * store's write path (store.c), the save's copy on write (image_save.c)
 * and the image loader (image_open.c), which all use it.
 */
#include "core.h"
#include "zpool/zpool.h"

static uint64_t content_handle_size(const struct content *c)
{
	return c->val >> 32;
}

void content_account(struct uzram *dev, const struct content *c,
		     int64_t sign, size_t len)
{
	struct stats *st = &dev->stats;
	int64_t pages = sign * (int64_t)(len >> PAGE_SHIFT);

	switch ((enum slot_state)(c->flags & SLOT_STATE_MASK)) {
	case SLOT_EMPTY:
		return;
	case SLOT_SAME:
		stats_add(&st->same_pages, pages);
		break;
	case SLOT_HUGE:
		stats_add(&st->huge_pages, pages);
		/* fall through */
	case SLOT_OBJ:
		stats_add(&st->compr_data_size,
			  sign * (int64_t)content_handle_size(c));
		break;
	case SLOT_BACKED:
		stats_add(&st->bd_count, pages);
		stats_add(&st->bd_bytes, sign * (int64_t)backed_size(c->val));
		break;
	}
	stats_add(&st->pages_stored, pages);
}

void content_free(struct uzram *dev, const struct content *c)
{
	enum slot_state state = (enum slot_state)(c->flags & SLOT_STATE_MASK);

	if (state == SLOT_OBJ || state == SLOT_HUGE) {
		if (dev->hooks.drop_object)
			dev->hooks.drop_object(dev, c->flags, (uint32_t)c->val,
					     (uint32_t)content_handle_size(c));
		else
			zpool_free(dev->pool, (uint32_t)c->val);
	} else if (state == SLOT_BACKED &&
		   (!(c->flags & SLOT_SHARED) ||
		    dev->hooks.drop_backed(dev, c->flags,
					       backed_off(c->val),
					       backed_size(c->val)))) {
		dev->hooks.backed_free(dev, backed_off(c->val),
				       round16(backed_size(c->val)));
	}
}

void content_release(struct uzram *dev, const struct content *old,
		     size_t len)
{
	content_free(dev, old);
	content_account(dev, old, -1, len);
}
