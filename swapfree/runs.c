// SPDX-License-Identifier: MIT
/*
 * runs.c - freed swap slots to discards (runs.h). Slot 0 holds the swap
 * header, which the kernel never frees: a run that names it, or reaches
 * past the device's end, is not ours to act on (another device's event,
 * or a ring gone wrong), so it is only counted. A pending run grows while
 * the next run starts where it ends, so a cluster freed slot by slot (6.9+
 * emits one event a slot) costs one discard, not 512.
 */
#include "runs.h"

void freed_runs_init(struct freed_runs *r, struct uzram *dev, uint64_t page)
{
	*r = (struct freed_runs){
		.dev = dev,
		.page = page,
		.nslots = uzram_size(dev) / page,
	};
}

void freed_runs_flush(struct freed_runs *r)
{
	if (!r->len)
		return;
	(void)uzram_discard(r->dev, r->len * r->page, r->start * r->page);
	r->len = 0;
}

void freed_runs_add(struct freed_runs *r, uint64_t slot, uint64_t count)
{
	if (!count)
		return;
	if (slot == 0 || slot >= r->nslots || count > r->nslots - slot) {
		r->outside += count;
		return;
	}
	r->slots += count;
	if (r->len && slot == r->start + r->len &&
	    r->len + count <= FREED_RUN_MAX) {
		r->len += count;
		return;
	}
	freed_runs_flush(r);
	r->start = slot;
	r->len = count;
}
