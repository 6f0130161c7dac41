// SPDX-License-Identifier: MIT
/*
 * stat_text.c - what `uzram stat` prints for people, as zramctl does for
 * the kernel's zram: sizes in units, the ratios, and the few figures that
 * matter, from the server's JSON (the same reply as `uzram stat --json`).
 * Lines about a part that is off (the backing store, dedup, a dictionary,
 * errors, --metrics) appear only when it is on or non-zero. --bytes keeps
 * the sizes in bytes; --all (the server's own text) and --json have every
 * figure.
 *
 *   algorithm    lz4
 *   disk size    64M
 *   data         8M           what was written, less what was trimmed
 *   compressed   4.4M         ratio 1.81
 *   memory       5.5M         ratio 1.46 to the data; peak 5.5M; no limit
 *   ...
 *
 * The JSON is the server's own (ctl/ctl_stats.c): one object of
 * "name":number and "name":"string" members, and "requests":{...}. It is
 * read as such; a figure that is missing reads as 0.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The number after "NAME": in json, or 0. */
static uint64_t num(const char *json, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof key, "\"%s\":", name);
	p = strstr(json, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* The string after "NAME": in json into out (n bytes), unescaped; "" if none. */
static void str(const char *json, const char *name, char *out, size_t n)
{
	char key[64];
	const char *p;
	size_t j = 0;

	snprintf(key, sizeof key, "\"%s\":\"", name);
	p = strstr(json, key);
	for (p = p ? p + strlen(key) : ""; *p && *p != '"' && j + 1 < n; p++) {
		if (*p == '\\' && p[1])
			p++;
		out[j++] = *p;
	}
	out[j] = '\0';
}

/* bytes as zramctl prints them (4K, 4.4M, 512B), or in bytes. */
static const char *size(uint64_t v, bool bytes, char buf[32])
{
	static const char units[] = "KMGTPE";
	double d = (double)v;
	int u = -1;

	if (bytes || v < 1024) {
		snprintf(buf, 32, bytes ? "%" PRIu64 : "%" PRIu64 "B", v);
		return buf;
	}
	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	snprintf(buf, 32, d < 10 && d != (uint64_t)d ? "%.1f%c" : "%.0f%c", d,
		 units[u]);
	return buf;
}

/* "ratio 1.81", or "" when there is nothing to divide. */
static const char *ratio(uint64_t a, uint64_t b, char buf[32])
{
	if (!a || !b)
		return "";
	snprintf(buf, 32, "ratio %.2f", (double)a / (double)b);
	return buf;
}

/* The device's own lines: sizes, ratios, pages. */
static void device_lines(const char *j, bool bytes, FILE *f)
{
	uint64_t data = num(j, "orig_data_size"), compr = num(j, "compr_data_size");
	uint64_t mem = num(j, "mem_used_total"), limit = num(j, "mem_limit");
	char a[32], b[32], c[32], d[32];

	fprintf(f, "%-12s %s\n", "disk size", size(num(j, "disksize"), bytes, a));
	fprintf(f, "%-12s %s\n", "data", size(data, bytes, a));
	fprintf(f, "%-12s %-12s %s\n", "compressed", size(compr, bytes, a),
		ratio(data, compr, b));
	fprintf(f, "%-12s %-12s %s%speak %s; %s%s\n", "memory", size(mem, bytes, a),
		ratio(data, mem, b), data && mem ? " to the data; " : "",
		size(num(j, "mem_used_max"), bytes, c),
		limit ? "limit " : "no limit", limit ? size(limit, bytes, d) : "");
	fprintf(f, "%-12s %" PRIu64 " stored, %" PRIu64 " same-filled, %" PRIu64
		" incompressible\n", "pages", num(j, "pages_stored"),
		num(j, "same_pages"), num(j, "huge_pages"));
}

/* The parts that are on: backing store, dedup, dictionary. */
static void part_lines(const char *j, bool bytes, FILE *f)
{
	char a[32], b[32];

	if (num(j, "bd_capacity"))
		fprintf(f, "%-12s %s of %s; %" PRIu64 " reads, %" PRIu64
			" writes\n", "backing", size(num(j, "bd_space"), bytes, a),
			size(num(j, "bd_capacity"), bytes, b), num(j, "bd_reads"),
			num(j, "bd_writes"));
	if (num(j, "pages_deduped"))
		fprintf(f, "%-12s %" PRIu64 " pages shared, %s saved\n", "dedup",
			num(j, "pages_deduped"),
			size(num(j, "dedup_bytes_saved"), bytes, a));
	if (num(j, "dict_bytes"))
		fprintf(f, "%-12s %s, %" PRIu64 " pages use it\n", "dictionary",
			size(num(j, "dict_bytes"), bytes, a), num(j, "dict_pages"));
}

/* The server's lines: clients, requests, errors, metrics. */
static void server_lines(const char *j, FILE *f)
{
	uint64_t fr = num(j, "failed_reads"), fw = num(j, "failed_writes");
	uint64_t err = num(j, "errors") + num(j, "protocol_errors");
	uint64_t up = num(j, "uptime_seconds");
	const char *req = strstr(j, "\"requests\":");
	char metrics[512];

	fprintf(f, "%-12s %" PRIu64 " now, %" PRIu64 " in all\n", "clients",
		num(j, "connections_current"), num(j, "connections_total"));
	if (req)
		fprintf(f, "%-12s %" PRIu64 " reads, %" PRIu64 " writes, %" PRIu64
			" trims\n", "requests", num(req, "read"), num(req, "write"),
			num(req, "trim"));
	if (fr || fw || err)
		fprintf(f, "%-12s %" PRIu64 " failed reads, %" PRIu64 " failed "
			"writes, %" PRIu64 " request errors\n", "errors", fr, fw, err);
	str(j, "metrics", metrics, sizeof metrics);
	if (metrics[0])
		fprintf(f, "%-12s %s\n", "metrics", metrics);
	fprintf(f, "%-12s %" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s\n", "uptime",
		up / 3600, up / 60 % 60, up % 60);
}

int stat_summary(const char *json, bool bytes, FILE *f)
{
	char export[512], algo[64];

	if (json[0] != '{') {
		cli_error("stat", "the server's reply is not JSON: %.60s",
			json);
		return 1;
	}
	str(json, "export", export, sizeof export);
	str(json, "algorithm", algo, sizeof algo);
	if (export[0])
		fprintf(f, "%-12s %s\n", "export", export);
	fprintf(f, "%-12s %s\n", "algorithm", algo);
	device_lines(json, bytes, f);
	part_lines(json, bytes, f);
	server_lines(json, f);
	return ferror(f) ? 1 : 0;
}
