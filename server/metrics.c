// SPDX-License-Identifier: MIT
/*
 * metrics.c - the figures of `uzram stat` (ctl_stats.c) in the Prometheus text
 * exposition format, version 0.0.4, for `uzram stat --prometheus` (the
 * control request "prometheus") and for the HTTP listener of `uzram serve
 * --metrics` (GET /metrics, on a Unix socket or a TCP address).
 *
 * Names follow Prometheus's conventions: uzram_ and the figure, the base
 * unit in the name (_bytes, _seconds), _total for counters, no _total on
 * gauges. Each metric has HELP and TYPE lines, and its HELP ends with
 * "(stat: NAME)", the figure's name in `uzram stat --json`, which is how
 * tests/integration/t76-metrics.sh ties the two together. Every series has
 * the label export. A figure this table does not know is still printed,
 * as uzram_NAME of type untyped, so adding one to ctl_stats.c loses nothing;
 * t76 fails until it is named here.
 *
 * metrics_http.c serves the same text over HTTP.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

enum { GAUGE, COUNTER };

static const struct metric {
	const char *figure; /* the name in ctl_stats.c */
	const char *name;   /* uzram_... */
	int type;
	bool ns;            /* the figure is in nanoseconds: print seconds */
	const char *help;
} metrics[] = {
	{ "disksize", "disksize_bytes", GAUGE, false, "the device's size" },
	{ "orig_data_size", "orig_data_bytes", GAUGE, false,
	  "uncompressed bytes of the stored pages" },
	{ "compr_data_size", "compr_data_bytes", GAUGE, false,
	  "compressed bytes of the stored objects" },
	{ "mem_used_total", "mem_used_bytes", GAUGE, false,
	  "memory the allocator holds, with its metadata" },
	{ "mem_limit", "mem_limit_bytes", GAUGE, false,
	  "the memory limit, 0 for none" },
	{ "mem_used_max", "mem_used_max_bytes", GAUGE, false,
	  "the most memory the allocator held since start or reset-max" },
	{ "same_pages", "same_pages", GAUGE, false,
	  "pages kept as one repeated value" },
	{ "pages_compacted", "pages_compacted_total", COUNTER, false,
	  "allocator pages emptied by compaction" },
	{ "huge_pages", "huge_pages", GAUGE, false,
	  "pages kept raw because they do not compress" },
	{ "pages_stored", "pages_stored", GAUGE, false,
	  "pages that are not holes" },
	{ "failed_reads", "failed_reads_total", COUNTER, false,
	  "reads that failed" },
	{ "failed_writes", "failed_writes_total", COUNTER, false,
	  "writes that failed" },
	{ "invalid_io", "invalid_io_total", COUNTER, false,
	  "requests rejected as out of range" },
	{ "table_bytes", "table_bytes", GAUGE, false,
	  "the slot table, counted against the memory limit" },
	{ "pages_unchanged", "pages_unchanged_total", COUNTER, false,
	  "pages written with the bytes they already held" },
	{ "pages_recompressed", "pages_recompressed_total", COUNTER, false,
	  "pages re-encoded smaller by recompression" },
	{ "dict_bytes", "dict_bytes", GAUGE, false,
	  "the device's compression dictionary" },
	{ "dict_pages", "dict_pages", GAUGE, false,
	  "pages encoded with the dictionary" },
	{ "dict_pages_previous", "dict_pages_previous", GAUGE, false,
	  "pages still encoded with a previous dictionary" },
	{ "bd_capacity", "bd_capacity_bytes", GAUGE, false,
	  "bytes the backing store may hold" },
	{ "bd_count", "bd_pages", GAUGE, false,
	  "pages whose data is on the backing store" },
	{ "bd_bytes", "bd_bytes", GAUGE, false,
	  "live bytes of their objects on the backing store" },
	{ "bd_space", "bd_space_bytes", GAUGE, false,
	  "bytes of the backing store in use, live or dead" },
	{ "bd_reads", "bd_reads_total", COUNTER, false,
	  "pages read from the backing store" },
	{ "bd_writes", "bd_writes_total", COUNTER, false,
	  "pages written to the backing store" },
	{ "bd_failed_reads", "bd_failed_reads_total", COUNTER, false,
	  "reads of the backing store that failed" },
	{ "bd_failed_writes", "bd_failed_writes_total", COUNTER, false,
	  "writes to the backing store that failed" },
	{ "bd_wb_limit", "bd_wb_limit_pages", GAUGE, false,
	  "pages writeback may still write under its limit" },
	{ "bd_compacted", "bd_compacted_bytes_total", COUNTER, false,
	  "live bytes moved by backing store compaction" },
	{ "pages_written_back", "pages_written_back_total", COUNTER, false,
	  "pages moved to the backing store by writeback" },
	{ "pages_written_through", "pages_written_through_total", COUNTER, false,
	  "pages written straight to the backing store as memory was full" },
	{ "policy_runs", "policy_runs_total", COUNTER, false,
	  "times the tier policy found memory past the high watermark" },
	{ "policy_recompressed", "policy_recompressed_total", COUNTER, false,
	  "pages the tier policy re-encoded" },
	{ "policy_written_back", "policy_written_back_total", COUNTER, false,
	  "pages the tier policy wrote back" },
	{ "pages_deduped", "pages_deduped", GAUGE, false,
	  "pages stored as a reference to another cluster's object" },
	{ "dedup_bytes_saved", "dedup_saved_bytes", GAUGE, false,
	  "compressed bytes those references would have stored" },
	{ "dedup_index_bytes", "dedup_index_bytes", GAUGE, false,
	  "the dedup index, counted against the memory limit" },
	{ "slot_lock_waits", "slot_lock_waits_total", COUNTER, false,
	  "writers that waited for a cluster's lock" },
	{ "slot_lock_wait_ns", "slot_lock_wait_seconds_total", COUNTER, true,
	  "time writers waited for a cluster's lock" },
	{ "slot_read_waits", "slot_read_waits_total", COUNTER, false,
	  "readers that waited for a writer of the cluster" },
	{ "slot_read_wait_ns", "slot_read_wait_seconds_total", COUNTER, true,
	  "time readers waited for a writer of the cluster" },
	{ "class_lock_waits", "class_lock_waits_total", COUNTER, false,
	  "waits for an allocator size class" },
	{ "class_lock_wait_ns", "class_lock_wait_seconds_total", COUNTER, true,
	  "time spent waiting for an allocator size class" },
	{ "frame_waits", "frame_waits_total", COUNTER, false,
	  "times compaction waited for readers to unpin a zspage" },
	{ "frame_wait_ns", "frame_wait_seconds_total", COUNTER, true,
	  "time compaction waited for readers to unpin a zspage" },
	{ "connections_current", "connections", GAUGE, false,
	  "NBD clients connected now" },
	{ "connections_total", "connections_total", COUNTER, false,
	  "NBD clients accepted" },
	{ "connections_refused", "connections_refused_total", COUNTER, false,
	  "NBD clients refused (too many)" },
	{ "bytes_read", "read_bytes_total", COUNTER, false,
	  "bytes NBD clients read" },
	{ "bytes_written", "written_bytes_total", COUNTER, false,
	  "bytes NBD clients wrote" },
	{ "errors", "errors_total", COUNTER, false,
	  "NBD requests answered with an error" },
	{ "protocol_errors", "protocol_errors_total", COUNTER, false,
	  "NBD clients dropped for breaking the protocol" },
	{ "uptime_seconds", "uptime_seconds", GAUGE, false,
	  "seconds since the server started" },
};

/* s as a label value (backslash, double quote and newline escaped). */
static const char *label_escape(const char *s, char *out, size_t n)
{
	size_t j = 0;

	for (; *s && j + 3 < n; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			out[j++] = '\\';
			out[j++] = *s == '\n' ? 'n' : *s;
		} else {
			out[j++] = *s;
		}
	}
	out[j] = '\0';
	return out;
}

static const struct metric *find_metric(const char *figure)
{
	for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
		if (!strcmp(metrics[i].figure, figure))
			return &metrics[i];
	return NULL;
}

int format_prometheus(struct server *srv, char *out, size_t n)
{
	static const char *const types[] = { "gauge", "counter" };
	struct figure f[STATS_MAX_FIGURES];
	size_t nf = stats_figures(srv, f, STATS_MAX_FIGURES), len = 0;
	char exp[512], algo[128];

#define OUT(...) do { \
		int w_ = snprintf(out + len, len < n ? n - len : 0, __VA_ARGS__); \
		if (w_ > 0) \
			len += (size_t)w_; \
	} while (0)

	label_escape(srv->cfg->export.name, exp, sizeof exp);
	OUT("# HELP uzram_info the export and its algorithm "
	    "(stat: export, algorithm)\n"
	    "# TYPE uzram_info gauge\n"
	    "uzram_info{export=\"%s\",algorithm=\"%s\"} 1\n", exp,
	    label_escape(srv->cfg->algorithm, algo, sizeof algo));
	for (size_t i = 0; i < nf; i++) {
		const struct metric *m = find_metric(f[i].name);

		if (!m) {
			OUT("# HELP uzram_%s (stat: %s)\n# TYPE uzram_%s untyped\n"
			    "uzram_%s{export=\"%s\"} %llu\n", f[i].name,
			    f[i].name, f[i].name, f[i].name, exp,
			    (unsigned long long)f[i].v);
			continue;
		}
		OUT("# HELP uzram_%s %s (stat: %s)\n# TYPE uzram_%s %s\n",
		    m->name, m->help, f[i].name, m->name, types[m->type]);
		if (m->ns)
			OUT("uzram_%s{export=\"%s\"} %llu.%09llu\n", m->name, exp,
			    (unsigned long long)(f[i].v / 1000000000u),
			    (unsigned long long)(f[i].v % 1000000000u));
		else
			OUT("uzram_%s{export=\"%s\"} %llu\n", m->name, exp,
			    (unsigned long long)f[i].v);
	}
	OUT("# HELP uzram_requests_total NBD requests by type (stat: requests)\n"
	    "# TYPE uzram_requests_total counter\n");
	for (int i = 0; i <= NBD_CMD_NR; i++)
		OUT("uzram_requests_total{export=\"%s\",type=\"%s\"} %llu\n", exp,
		    stats_cmd_names[i],
		    (unsigned long long)atomic_load(&srv->ctr.requests[i]));
#undef OUT
	return len < n ? 0 : -1;
}
