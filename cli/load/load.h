/* SPDX-License-Identifier: MIT */
/*
 * load.h - what `uzram load` (load.c: the options, the run) and its
 * reports (load_report.c: a table or --json) share.
 */
#ifndef UZRAM_CLI_LOAD_H
#define UZRAM_CLI_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "uzram.h"

#include "../base/base.h"

#define MIB (1024.0 * 1024.0)

struct load_opts {
	const char *file;
	const char *algorithm;
	int level;
	unsigned long long mem_limit;
	unsigned long long cluster;
	unsigned long long randread; /* random 4 KiB reads to time */
	const char *recomp;          /* secondary algorithm, or NULL */
	const char *backing;         /* backing store, or NULL */
	int recomp_level;
	const char *dict;            /* dictionary file for the algorithm */
	const char *recomp_dict;     /* and for the secondary one */
	unsigned long long train;    /* train a dictionary of this size */
	const char *save;            /* image to save to, or NULL */
	unsigned long long threads;  /* the device's worker threads */
	bool json;
	bool dedup;
};

struct load_result {
	uint64_t file_size;
	uint64_t dev_size;
	uint32_t cluster_size;
	struct uzram_stats st;
	double write_s, read_s, randread_s, recomp_s, train_s, wb_s;
	double write_cpu_s;          /* CPU seconds of the process then */
	uint64_t compr_before, mem_before; /* before recompression */
	uint64_t train_compr_before, train_mem_before; /* before training */
	struct uzram_train_report train;
	bool match;
	uint64_t mismatch_at; /* first differing byte when !match */
	/* --save: the image's size, save and open times, the memory of the
	 * device opened from it, and its own read back */
	uint64_t image_size, mem_opened;
	double save_s, open_s;
};

/* The reports of a run: as aligned rows, or as one JSON object. */
void print_table(const struct load_opts *o, const struct load_result *r);
void print_json(const struct load_opts *o, const struct load_result *r);

extern const struct cli_command load_cmd;
int cmd_load(int argc, char **argv);   /* load.c */

#endif
