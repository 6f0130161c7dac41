// SPDX-License-Identifier: MIT
/*
 * load_report.c - what `uzram load` prints once a run is over: aligned
 * rows, or with --json one JSON object; the device's figures both show
 * come from one table (stat_rows).
 */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "load.h"
#include "../../common/json.h"

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

static double mb_s(uint64_t bytes, double s)
{
	return s > 0 ? (double)bytes / s / 1e6 : 0;
}

/* s as a JSON string; the values printed are paths and names. */
static void json_string(const char *s)
{
	char buf[JSON_ESCAPED_MAX(PATH_MAX)];

	printf("\"%s\"", json_escape(s, buf, sizeof buf));
}

static void json_u64(const char *key, uint64_t v)
{
	printf("  \"%s\": %llu,\n", key, (unsigned long long)v);
}

/* A ratio, or null when the denominator is 0 (nothing compressed). */
static void json_ratio(const char *key, uint64_t a, uint64_t b)
{
	if (b)
		printf("  \"%s\": %.4f,\n", key, ratio(a, b));
	else
		printf("  \"%s\": null,\n", key);
}

static void row_size(const char *name, uint64_t v)
{
	printf("  %-18s %15llu bytes %12.2f MiB\n", name,
	       (unsigned long long)v, (double)v / MIB);
}

static void row_count(const char *name, uint64_t v)
{
	printf("  %-18s %15llu\n", name, (unsigned long long)v);
}

static void row_ratio(const char *name, uint64_t a, uint64_t b)
{
	if (b)
		printf("  %-18s %15.3f\n", name, ratio(a, b));
	else
		printf("  %-18s %15s\n", name, "-");
}

/*
 * The device's figures both reports show, in their order: the JSON key,
 * the table's label (NULL: JSON only), and the field(s) of uzram_stats.
 */
enum row_kind { ROW_SIZE, ROW_COUNT, ROW_RATIO };
#define ST(f) offsetof(struct uzram_stats, f)
static const struct stat_row {
	const char *key, *label;
	enum row_kind kind;
	size_t a, b; /* ROW_RATIO: a / b */
} stat_rows[] = {
	{ "disksize", NULL, ROW_SIZE, ST(disksize), 0 },
	{ "orig_data_size", "orig_data_size", ROW_SIZE, ST(orig_data_size), 0 },
	{ "compr_data_size", "compr_data_size", ROW_SIZE, ST(compr_data_size), 0 },
	{ "mem_used_total", "mem_used_total", ROW_SIZE, ST(mem_used_total), 0 },
	{ "mem_used_max", "mem_used_max", ROW_SIZE, ST(mem_used_max), 0 },
	{ "ratio_compr", "ratio orig/compr", ROW_RATIO, ST(orig_data_size),
	  ST(compr_data_size) },
	{ "ratio_mem", "ratio orig/mem", ROW_RATIO, ST(orig_data_size),
	  ST(mem_used_total) },
	{ "same_pages", "same_pages", ROW_COUNT, ST(same_pages), 0 },
	{ "huge_pages", "huge_pages", ROW_COUNT, ST(huge_pages), 0 },
	{ "pages_stored", "pages_stored", ROW_COUNT, ST(pages_stored), 0 },
	{ "table_bytes", NULL, ROW_SIZE, ST(table_bytes), 0 },
	{ "pages_deduped", NULL, ROW_COUNT, ST(pages_deduped), 0 },
	{ "dedup_bytes_saved", NULL, ROW_SIZE, ST(dedup_bytes_saved), 0 },
	{ "dedup_index_bytes", NULL, ROW_SIZE, ST(dedup_index_bytes), 0 },
	{ "slot_lock_waits", NULL, ROW_COUNT, ST(slot_lock_waits), 0 },
	{ "slot_lock_wait_ns", NULL, ROW_COUNT, ST(slot_lock_wait_ns), 0 },
	{ "class_lock_waits", NULL, ROW_COUNT, ST(class_lock_waits), 0 },
	{ "class_lock_wait_ns", NULL, ROW_COUNT, ST(class_lock_wait_ns), 0 },
};
#undef ST

static uint64_t st_get(const struct uzram_stats *st, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)st + off, sizeof v);
	return v;
}

static void print_stat_rows(const struct uzram_stats *st, bool json)
{
	for (size_t i = 0; i < sizeof stat_rows / sizeof stat_rows[0]; i++) {
		const struct stat_row *w = &stat_rows[i];
		uint64_t a = st_get(st, w->a), b = st_get(st, w->b);

		if (!json && !w->label)
			continue;
		if (w->kind == ROW_RATIO)
			json ? json_ratio(w->key, a, b) : row_ratio(w->label, a, b);
		else if (json)
			json_u64(w->key, a);
		else
			(w->kind == ROW_SIZE ? row_size : row_count)(w->label, a);
	}
}

/* --json's "recompress", "dict" and "train_dict". */
static void print_json_codec(const struct load_opts *o,
			     const struct load_result *r)
{
	const struct uzram_train_report *t = &r->train;

	printf("  \"recompress\": ");
	if (o->recomp) {
		json_string(o->recomp);
		printf(",\n  \"recompress_level\": %d,\n", o->recomp_level);
		printf("  \"recompress_seconds\": %.6f,\n", r->recomp_s);
		json_u64("pages_recompressed", r->st.pages_recompressed);
		json_u64("compr_data_size_before", r->compr_before);
		json_u64("mem_used_before", r->mem_before);
	} else {
		printf("null,\n");
	}
	printf("  \"dict\": ");
	if (o->dict)
		json_string(o->dict);
	else
		printf("null");
	printf(",\n  \"train_dict\": ");
	if (!o->train) {
		printf("null,\n");
		return;
	}
	printf("{\"kept\": %s, \"dict_size\": %llu, "
	       "\"train_bytes\": %llu, \"test_bytes\": %llu, "
	       "\"bytes_without\": %llu, \"bytes_with\": %llu, "
	       "\"train_us\": %llu, \"pages_reencoded\": %llu, "
	       "\"seconds\": %.6f, \"compr_data_size_before\": %llu, "
	       "\"mem_used_before\": %llu},\n",
	       t->kept ? "true" : "false",
	       (unsigned long long)t->dict_size,
	       (unsigned long long)t->train_bytes,
	       (unsigned long long)t->test_bytes,
	       (unsigned long long)t->bytes_without,
	       (unsigned long long)t->bytes_with,
	       (unsigned long long)t->train_us,
	       (unsigned long long)t->pages_reencoded, r->train_s,
	       (unsigned long long)r->train_compr_before,
	       (unsigned long long)r->train_mem_before);
}

void print_json(const struct load_opts *o, const struct load_result *r)
{
	const struct uzram_stats *st = &r->st;

	printf("{\n  \"file\": ");
	json_string(o->file);
	printf(",\n  \"algorithm\": ");
	json_string(o->algorithm);
	printf(",\n  \"level\": %d,\n", o->level);
	json_u64("mem_limit", o->mem_limit);
	printf("  \"cluster_size\": %u,\n", (unsigned)r->cluster_size);
	json_u64("file_size", r->file_size);
	print_stat_rows(st, true);
	print_json_codec(o, r);
	printf("  \"backing\": ");
	if (o->backing) {
		json_string(o->backing);
		printf(",\n  \"writeback_seconds\": %.6f,\n", r->wb_s);
		json_u64("bd_count", st->bd_count);
		json_u64("bd_bytes", st->bd_bytes);
		json_u64("bd_space", st->bd_space);
		json_u64("bd_reads", st->bd_reads);
	} else {
		printf("null,\n");
	}
	printf("  \"write_seconds\": %.6f,\n", r->write_s);
	printf("  \"read_seconds\": %.6f,\n", r->read_s);
	printf("  \"write_mb_s\": %.1f,\n", mb_s(r->file_size, r->write_s));
	printf("  \"write_cpu_seconds\": %.6f,\n", r->write_cpu_s);
	printf("  \"read_mb_s\": %.1f,\n", mb_s(r->dev_size, r->read_s));
	json_u64("randread_4k", o->randread);
	if (o->randread)
		printf("  \"randread_4k_us\": %.3f,\n",
		       r->randread_s * 1e6 / (double)o->randread);
	else
		printf("  \"randread_4k_us\": null,\n");
	printf("  \"image\": ");
	if (o->save) {
		json_string(o->save);
		printf(",\n");
		json_u64("image_size", r->image_size);
		printf("  \"save_seconds\": %.6f,\n", r->save_s);
		printf("  \"open_seconds\": %.6f,\n", r->open_s);
		json_u64("mem_used_opened", r->mem_opened);
	} else {
		printf("null,\n");
	}
	if (r->match)
		printf("  \"first_mismatch\": null,\n");
	else
		json_u64("first_mismatch", r->mismatch_at);
	printf("  \"round_trip\": \"%s\"\n}\n", r->match ? "ok" : "mismatch");
}

void print_table(const struct load_opts *o, const struct load_result *r)
{
	const struct uzram_stats *st = &r->st;

	printf("uzram load %s\n", o->file);
	printf("  %-18s %15s", "algorithm", o->algorithm);
	if (o->level)
		printf(" level %d\n", o->level);
	else
		printf(" (default level)\n");
	if (o->mem_limit)
		row_size("mem_limit", o->mem_limit);
	row_count("cluster_size", r->cluster_size);
	row_size("file size", r->file_size);
	print_stat_rows(st, false);
	if (o->dedup) {
		row_count("pages_deduped", st->pages_deduped);
		row_size("dedup_bytes_saved", st->dedup_bytes_saved);
		row_size("dedup_index_bytes", st->dedup_index_bytes);
	}
	printf("  %-18s %15.1f MB/s  (%.3f s, %.3f s of CPU)\n", "write",
	       mb_s(r->file_size, r->write_s), r->write_s, r->write_cpu_s);
	if (o->recomp) {
		printf("  %-18s %15s level %d: %llu pages in %.3f s\n",
		       "recompress", o->recomp, o->recomp_level,
		       (unsigned long long)st->pages_recompressed, r->recomp_s);
		row_size("compr before", r->compr_before);
		row_size("mem_used before", r->mem_before);
	}
	if (o->dict)
		printf("  %-18s %15s\n", "dictionary", o->dict);
	if (o->train) {
		const struct uzram_train_report *t = &r->train;

		printf("  %-18s %15s %llu bytes: %llu -> %llu bytes on the "
		       "test sample, %llu pages re-encoded, %.3f s\n",
		       "train-dict", t->kept ? "kept" : "not kept",
		       (unsigned long long)t->dict_size,
		       (unsigned long long)t->bytes_without,
		       (unsigned long long)t->bytes_with,
		       (unsigned long long)t->pages_reencoded, r->train_s);
		row_size("compr before", r->train_compr_before);
		row_size("mem_used before", r->train_mem_before);
	}
	if (o->backing) {
		printf("  %-18s %15.1f MB/s  (%.3f s)\n", "writeback",
		       mb_s(r->file_size, r->wb_s), r->wb_s);
		row_count("bd_count", st->bd_count);
		row_size("bd_bytes", st->bd_bytes);
		row_size("bd_space", st->bd_space);
	}
	printf("  %-18s %15.1f MB/s  (%.3f s)\n", "read",
	       mb_s(r->dev_size, r->read_s), r->read_s);
	if (o->randread)
		printf("  %-18s %15.3f us   (%llu reads)\n", "random 4K read",
		       r->randread_s * 1e6 / (double)o->randread, o->randread);
	if (o->save) {
		row_size("image size", r->image_size);
		printf("  %-18s %15.1f MB/s  (%.3f s)\n", "save",
		       mb_s(r->image_size, r->save_s), r->save_s);
		printf("  %-18s %15.1f MB/s  (%.3f s)\n", "open image",
		       mb_s(r->image_size, r->open_s), r->open_s);
		row_size("mem_used opened", r->mem_opened);
	}
	if (r->match)
		printf("  %-18s %15s\n", "round trip", "ok");
	else
		printf("  %-18s %15s at byte %llu\n", "round trip", "MISMATCH",
		       (unsigned long long)r->mismatch_at);
}

