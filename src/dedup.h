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
struct store_tls;
struct uzram;

/* A new, empty index, or NULL (no memory). */
struct dedup *dedup_create(void);
void dedup_destroy(struct dedup *d);   /* NULL is accepted */

/* Bytes the index holds: counted against mem_limit, as the page table. */
uint64_t dedup_bytes(const struct dedup *d);

/*
 * Find a stored object holding exactly the len bytes src, whose XXH3 is
 * hash: the index is searched by hash and each candidate is decoded (into
 * t->unit) and compared byte for byte. On a match, takes a reference to it,
 * fills *c as slot contents naming it (with SLOT_SHARED) and returns true.
 * The reference is given back by content_free()/dedup_put().
 */
bool dedup_find(struct uzram *dev, const unsigned char *src, size_t len,
		uint64_t hash, struct store_tls *t, struct content *c);

/*
 * Index a new object, contents c made by unit_compress() from bytes whose
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

#endif
