/* SPDX-License-Identifier: MIT */
/*
 * dedup.h - one object for every cluster that holds the same bytes
 * (cfg.dedup). Private to the library; the design is at the top of dedup.c.
 *
 * Every call takes the device; with dev->dedup NULL (dedup off) they do
 * what the store did before dedup existed, or nothing. All of them may be
 * called from any thread; none takes a slot lock, so a caller may hold one
 * (the order is slot lock, then index shard).
 */
#ifndef UZRAM_DEDUP_H
#define UZRAM_DEDUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct content;
struct dedup;
struct store_scratch;
struct uzram;

/* ---- dedup.c: the index ---- */

/*
 * A new, empty index in dev->dedup: 0 or -ENOMEM. Its bytes, now and as it
 * grows, are kept in dev->index_bytes, which counts against mem_limit as
 * the slot table does (core.h's table_bytes()).
 */
int dedup_create(struct uzram *dev);
void dedup_destroy(struct dedup *d);   /* NULL is accepted */

/*
 * Find a stored object holding exactly the len bytes src, whose XXH3 is
 * hash: the index is searched by hash and each candidate is decoded (into
 * t->cbuf; src may be t->plain, where a partial write merges its cluster)
 * and compared byte for byte. On a match, takes a reference to it,
 * fills *c as slot contents naming it (with SLOT_SHARED) and returns true.
 * The reference is given back by content_free()/dedup_put().
 */
bool dedup_find(struct uzram *dev, const unsigned char *src, size_t len,
		uint64_t hash, struct store_scratch *t, struct content *c);

/*
 * Index a new object, contents c made by cluster_compress() from bytes whose
 * XXH3 is hash, before any slot names it (so no one can free it under us).
 * Best effort: an object left out is only never found.
 */
void dedup_insert(struct uzram *dev, const struct content *c, uint64_t hash);

/*
 * Drop one reference to the object (handle, size) of a slot with these
 * flags (OBJ or HUGE): the last one takes it out of the index and frees
 * it. With dedup off, frees it.
 */
void dedup_put(struct uzram *dev, uint32_t flags, uint32_t handle,
	       uint32_t size);

/*
 * Take the object of a slot with these flags out of the index before
 * recompression or writeback replaces it, unless it is shared: then
 * returns false and the caller leaves it as it is. The caller holds the
 * slot lock exclusively.
 */
bool dedup_detach(struct uzram *dev, uint32_t flags, uint32_t handle);

/*
 * Whether the object (handle) of a slot with these flags is shared now.
 * False with dedup off.
 */
bool dedup_shared(struct uzram *dev, uint32_t flags, uint32_t handle);

/*
 * If the object (handle) of a slot with these flags is shared, take one
 * more reference to it and return true; else false. The caller holds the
 * slot lock, so the object has a reference and cannot go meanwhile.
 * Writeback holds a shared object so while it moves it (writeback.c).
 */
bool dedup_hold(struct uzram *dev, uint32_t flags, uint32_t handle);

/*
 * Recompression of a shared object (recompress.c): the walk that re-encodes
 * the object old (of old_size bytes; flags: of a slot naming it) into new
 * takes one more reference to old, and holds it and new's first reference
 * until the walk ends (then dedup_put() both), so that neither handle is
 * reused while it switches the slots that name old to new, each with
 * dedup_share(new) and then dedup_put(old). old's index entry moves to
 * new if index_new (new is made by priority 0's current codec, which
 * dedup_find() decodes with), else it leaves the index. False: no memory,
 * nothing done.
 */
bool dedup_replace(struct uzram *dev, uint32_t flags, uint32_t old,
		   uint32_t old_size, uint32_t new, bool index_new);

/*
 * Index an object an image's record stored (image_open.c), as the write
 * path would have: it is decoded and hashed, and left out unless its hash
 * matches the tag in its flags (a forged image cannot plant a wrong key).
 * Best effort.
 */
void dedup_insert_loaded(struct uzram *dev, const struct content *c,
			 size_t len);

/*
 * Take one more reference to the object (handle) of a slot with these
 * flags, for an image's record that shares it (image_open.c). False: no
 * memory.
 */
bool dedup_share(struct uzram *dev, uint32_t flags, uint32_t handle);

/* ---- dedup_place.c: a save's map of shared objects ---- */

/*
 * Images keep the sharing (image-format.md, version 2): the first record of
 * a shared object holds its bytes, and later ones name that record's
 * cluster. A save keeps, per shared object it wrote, the cluster of that
 * record in a struct dedup_saved, and a reference to the object, so that
 * its handle cannot be freed and reused while the save runs. Only the
 * saving thread calls these.
 *
 * dedup_saved_find(): for the object of a slot with these flags (OBJ or
 * HUGE; handle, size) that cluster idx names: 1 with *first set if a
 * record of the save holds it already; 0 if the record of idx is to hold
 * it (noted if the object is shared); -ENOMEM.
 */
struct dedup_saved;
int dedup_saved_find(struct uzram *dev, struct dedup_saved **sv,
		     uint32_t flags, uint32_t handle, uint32_t size,
		     uint64_t idx, uint64_t *first);
/*
 * The same for a written-back cluster idx (flags, size bytes at place off):
 * a shared place (SLOT_SHARED) is held until the save ends; 1, 0 or
 * -ENOMEM as dedup_saved_find().
 */
int dedup_saved_find_place(struct uzram *dev, struct dedup_saved **sv,
			   uint32_t flags, uint64_t off, uint32_t size,
			   uint64_t idx, uint64_t *first);
/* Drop the save's references and free sv (NULL is accepted). */
void dedup_saved_free(struct uzram *dev, struct dedup_saved *sv);

/* ---- dedup_place.c: shared places on the backing store ---- */

/*
 * Shared objects on the backing store (writeback.c). Writeback writes a
 * shared object once and switches each slot that names it to that place,
 * with SLOT_SHARED: a SLOT_BACKED slot with the bit names a place whose
 * references the index counts (every such slot, the first included),
 * keyed by the place, in the shard of the slots' tag (flags: of any slot
 * naming it). A walk or a save that works with a place holds it, so that
 * it is not freed and reused under the walk while no slot names it.
 *
 * dedup_place_hold(): hold off, making its entry if it has none; false: no
 * memory. dedup_place_release(): let go of a hold.
 * dedup_place_get(): one more slot names off, which is held (false if it
 * has no entry). dedup_place_put(): one slot fewer.
 * Release and put return true when nothing names or holds the place any
 * more: the caller gives its space back (space_free(), or the store's
 * backed_free hook).
 */
bool dedup_place_hold(struct uzram *dev, uint32_t flags, uint64_t off);
bool dedup_place_release(struct uzram *dev, uint32_t flags, uint64_t off);
bool dedup_place_get(struct uzram *dev, uint32_t flags, uint64_t off,
		     uint32_t size);
bool dedup_place_put(struct uzram *dev, uint32_t flags, uint64_t off,
		     uint32_t size);

#endif
