/* SPDX-License-Identifier: MIT */
/*
 * runs.h - the freed slots the ring names, as discards of the device:
 * adjacent runs become one discard (up to FREED_RUN_MAX slots), and a
 * run that is not wholly on the device is counted and left alone. For
 * swapfree.c, which feeds it under its lock; alone, for tests/unit.
 */
#ifndef UZRAM_SWAPFREE_RUNS_H
#define UZRAM_SWAPFREE_RUNS_H

#include <stdint.h>

#include "uzram.h"

#define FREED_RUN_MAX (1u << 16)  /* slots in one discard at most */

struct freed_runs {
	struct uzram *dev;
	uint64_t page;               /* bytes of a slot */
	uint64_t nslots;             /* slots the device holds */
	uint64_t start, len;         /* adjacent slots not yet discarded */
	uint64_t slots;              /* slots taken (discarded or pending) */
	uint64_t outside;            /* slots past the end, or slot 0 */
};

/* Runs of dev, whose page n is slot n, page bytes each. */
void freed_runs_init(struct freed_runs *r, struct uzram *dev, uint64_t page);

/* Slots [slot, slot + count) were freed: discarded now or at the flush. */
void freed_runs_add(struct freed_runs *r, uint64_t slot, uint64_t count);

/* Discard the pending run. A failed discard leaves the copies stored. */
void freed_runs_flush(struct freed_runs *r);

#endif /* UZRAM_SWAPFREE_RUNS_H */
