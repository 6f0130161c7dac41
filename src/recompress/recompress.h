/* SPDX-License-Identifier: MIT */
/*
 * recompress.h - one pass over the table re-encoding clusters, shared by
 * uzram_recompress() and the dictionary changes of dict.c. Private to the
 * library.
 */
#ifndef UZRAM_RECOMPRESS_H
#define UZRAM_RECOMPRESS_H

#include <stdbool.h>
#include <stdint.h>

struct uzram;

struct recomp_pass {
	unsigned prio;       /* encode with this priority's current codec */
	unsigned flags;      /* UZRAM_RECOMP_*: which clusters of lower ones */
	uint32_t threshold;  /* objects of at least this many bytes */
	unsigned min_age;    /* clusters at least this many ticks old (tier.h) */
	/*
	 * Instead: every object of prio itself made in its other codec
	 * bank, kept whatever its new size (a dictionary change).
	 */
	bool reencode;
	/*
	 * Or: keep the new object even if no smaller than the old one, and
	 * raw if it does not compress (reencode.c's passes, so that nothing
	 * is tried again); one walk, no bands.
	 */
	bool promote;
	/*
	 * NULL, or called after each cluster the pass encoded (worked) and
	 * every 4096 slots it walks (!worked); false stops the pass there.
	 */
	bool (*pace)(struct uzram *dev, bool worked);
	/*
	 * NULL, or a buffer of a cluster's bytes: then each new object is
	 * stored with the slot unlocked (no allocation waits for memory
	 * while holding a lock the I/O path may need: swap,
	 * doc/block-device.md), the old object copied here and compared
	 * under the lock again before the swap; objects dedup shares are
	 * skipped.
	 */
	void *copy;
};

/*
 * Run the pass alongside reads and writes, one slot lock at a time,
 * largest objects first (but for a re-encode, which takes them all).
 * Returns the pages re-encoded, or a negative errno with
 * uzram_last_error() set (-EIO once the walk is over if an object was
 * corrupt, which is left as it is).
 */
long recompress_pass(struct uzram *dev, const struct recomp_pass *p);

/* uzram_recompress() of clusters at least min_age ticks old (recompress.c). */
long recompress_run(struct uzram *dev, int prio, unsigned flags,
		    uint32_t threshold, unsigned min_age);

/*
 * reencode.c: start the thread that re-encodes clusters idle for at least
 * age_seconds with the priority-1 codec, and stop it (before the device's
 * layers go; NULL-safe).
 */
int reencode_start(struct uzram *dev, uint32_t age_seconds);
void reencode_stop(struct uzram *dev);

/*
 * Make the calling thread's buffers and its codec context of priority
 * prio now, so that a pass allocates none of them under a slot lock.
 * 0 or a negative errno (recompress.c).
 */
int recompress_warm(struct uzram *dev, unsigned prio);

/* dict.c: free the codecs taken out of their banks, at close */
void dict_retired_free(struct uzram *dev);

#endif
