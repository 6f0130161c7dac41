// SPDX-License-Identifier: MIT
/*
 * ctl_stats.c - the figures `uzram stat` and SIGUSR1 report: the device's
 * (uzram_stats(), uzram_dict_info()) and the server's counters, as one
 * JSON object or as aligned "name value" lines (metrics.c: the same
 * figures in the Prometheus text format).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "../common/json.h"

const char *const stats_cmd_names[NBD_CMD_NR + 1] = {
	"read", "write", "disc", "flush", "trim", "cache", "write_zeroes",
	"block_status", "unknown",
};


/* The nf figures f, and the requests by type, as JSON or text into out. */
static int print_figures(struct server *srv, const struct figure *f,
			 size_t nf, bool json, char *out, size_t n)
{
	struct nbd_counters *c = &srv->ctr;
	char name[512]; /* the name, cut: the figures must fit one reply */
	size_t len = 0;

#define OUT(...) do { \
		int w_ = snprintf(out + len, len < n ? n - len : 0, __VA_ARGS__); \
		if (w_ > 0) \
			len += (size_t)w_; \
	} while (0)

	if (json) {
		OUT("{\"export\":\"%s\",\"algorithm\":\"%s\"",
		    json_escape(srv->cfg->export.name, name, sizeof name),
		    srv->cfg->algorithm);
		if (srv->metrics_addr[0])
			OUT(",\"metrics\":\"%s\"", json_escape(srv->metrics_addr,
							     name, sizeof name));
		for (size_t i = 0; i < nf; i++)
			OUT(",\"%s\":%llu", f[i].name, (unsigned long long)f[i].v);
		OUT(",\"requests\":{");
		for (int i = 0; i <= NBD_CMD_NR; i++)
			OUT("%s\"%s\":%llu", i ? "," : "", stats_cmd_names[i],
			    (unsigned long long)atomic_load(&c->requests[i]));
		OUT("}}\n");
	} else {
		if (srv->cfg->export.name[0]) /* no blank first line */
			OUT("%-22s %s\n", "export", srv->cfg->export.name);
		OUT("%-22s %s\n", "algorithm", srv->cfg->algorithm);
		if (srv->metrics_addr[0])
			OUT("%-22s %s\n", "metrics", srv->metrics_addr);
		for (size_t i = 0; i < nf; i++)
			OUT("%-22s %llu\n", f[i].name, (unsigned long long)f[i].v);
		for (int i = 0; i <= NBD_CMD_NR; i++)
			OUT("requests_%-13s %llu\n", stats_cmd_names[i],
			    (unsigned long long)atomic_load(&c->requests[i]));
	}
#undef OUT
	return len < n ? 0 : -1;
}

size_t stats_figures(struct server *srv, struct figure *out, size_t max)
{
	struct nbd_counters *c = &srv->ctr;
	struct uzram_stats st;
	struct uzram_dict_info di = { 0 };

	memset(&st, 0, sizeof st);
	(void)uzram_stats(srv->cfg->export.dev, &st, sizeof st);
	/* the device's dictionary (a walk of the table, as zram's mm_stat
	 * is not: only on request) */
	(void)uzram_dict_info(srv->cfg->export.dev, 0, &di);

	const struct figure f[] = {
		{ "disksize", st.disksize },
		{ "orig_data_size", st.orig_data_size },
		{ "compr_data_size", st.compr_data_size },
		{ "mem_used_total", st.mem_used_total },
		{ "mem_limit", st.mem_limit },
		{ "mem_used_max", st.mem_used_max },
		{ "same_pages", st.same_pages },
		{ "pages_compacted", st.pages_compacted },
		{ "huge_pages", st.huge_pages },
		{ "pages_stored", st.pages_stored },
		{ "failed_reads", st.failed_reads },
		{ "failed_writes", st.failed_writes },
		{ "invalid_io", st.invalid_io },
		{ "table_bytes", st.table_bytes },
		{ "pages_unchanged", st.pages_unchanged },
		{ "pages_recompressed", st.pages_recompressed },
		{ "dict_bytes", di.dict_size },
		{ "dict_pages", di.dict_size ? di.pages : 0 },
		{ "dict_pages_previous", di.pages_previous },
		{ "bd_capacity", st.bd_capacity },
		{ "bd_count", st.bd_count },
		{ "bd_bytes", st.bd_bytes },
		{ "bd_space", st.bd_space },
		{ "bd_reads", st.bd_reads },
		{ "bd_writes", st.bd_writes },
		{ "bd_failed_reads", st.bd_failed_reads },
		{ "bd_failed_writes", st.bd_failed_writes },
		{ "bd_wb_limit", st.bd_wb_limit },
		{ "bd_compacted", st.bd_compacted },
		{ "pages_written_back", st.pages_written_back },
		{ "pages_written_through", st.pages_written_through },
		{ "policy_runs", st.policy_runs },
		{ "policy_recompressed", st.policy_recompressed },
		{ "policy_written_back", st.policy_written_back },
		{ "pages_deduped", st.pages_deduped },
		{ "dedup_bytes_saved", st.dedup_bytes_saved },
		{ "dedup_index_bytes", st.dedup_index_bytes },
		{ "slot_lock_waits", st.slot_lock_waits },
		{ "slot_lock_wait_ns", st.slot_lock_wait_ns },
		{ "slot_read_waits", st.slot_read_waits },
		{ "slot_read_wait_ns", st.slot_read_wait_ns },
		{ "class_lock_waits", st.class_lock_waits },
		{ "class_lock_wait_ns", st.class_lock_wait_ns },
		{ "frame_waits", st.frame_waits },
		{ "frame_wait_ns", st.frame_wait_ns },
		{ "connections_current", atomic_load(&c->conns_current) },
		{ "connections_total", atomic_load(&c->conns_total) },
		{ "connections_refused", atomic_load(&c->conns_refused) },
		{ "bytes_read", atomic_load(&c->bytes_read) },
		{ "bytes_written", atomic_load(&c->bytes_written) },
		{ "errors", atomic_load(&c->errors) },
		{ "protocol_errors", atomic_load(&c->proto_errors) },
		{ "uptime_seconds", (uint64_t)(time(NULL) - srv->started) },
	};
	size_t nf = sizeof f / sizeof f[0];

	if (nf > max)
		nf = max;
	memcpy(out, f, nf * sizeof f[0]);
	return nf;
}

int format_stats(struct server *srv, bool json, char *out, size_t n)
{
	struct figure f[STATS_MAX_FIGURES];

	return print_figures(srv, f, stats_figures(srv, f, STATS_MAX_FIGURES),
			     json, out, n);
}
