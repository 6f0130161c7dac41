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

/* dict.c: free the codecs taken out of their banks, at close */
void dict_retired_free(struct uzram *dev);

#endif
