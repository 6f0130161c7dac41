// SPDX-License-Identifier: MIT
/*
 * figures.h - every figure of `uzram stat`, written once. ctl_stats.c
 * expands this list into the figures' table and their values (the JSON and
 * --all text); metrics.c prints the same entries in Prometheus's format.
 * Adding a figure is adding one entry here; the order here is the order of
 * every output.
 *
 *   X(STAT, PROM, TYPE, UNIT, HELP, VALUE)
 *
 *   STAT   the name in `uzram stat --json` and --all
 *   PROM   the Prometheus name, after uzram_: the base unit in the name
 *          (_bytes, _seconds), _total on counters and only on them
 *   TYPE   FIG_GAUGE or FIG_COUNTER
 *   UNIT   FIG_ONE, or FIG_NS: a count of nanoseconds, printed to
 *          Prometheus as seconds
 *   HELP   the Prometheus HELP text; metrics.c adds "(stat: STAT)"
 *   VALUE  an expression of the snapshot stats_figures() takes: st (struct
 *          uzram_stats), di (struct uzram_dict_info), c (the server's
 *          struct nbd_counters) and srv; put it in parentheses if it has
 *          a comma
 *
 * Only ctl_stats.c includes this file: VALUE names its locals.
 */
#ifndef UZRAM_SERVER_FIGURES_H
#define UZRAM_SERVER_FIGURES_H

#define FIGURES(X) \
	X("disksize", "disksize_bytes", FIG_GAUGE, FIG_ONE, \
	  "the device's size", st.disksize) \
	X("orig_data_size", "orig_data_bytes", FIG_GAUGE, FIG_ONE, \
	  "uncompressed bytes of the stored pages", st.orig_data_size) \
	X("compr_data_size", "compr_data_bytes", FIG_GAUGE, FIG_ONE, \
	  "compressed bytes of the stored objects", st.compr_data_size) \
	X("mem_used_total", "mem_used_bytes", FIG_GAUGE, FIG_ONE, \
	  "memory the allocator holds, with its metadata", st.mem_used_total) \
	X("mem_limit", "mem_limit_bytes", FIG_GAUGE, FIG_ONE, \
	  "the memory limit, 0 for none", st.mem_limit) \
	X("mem_used_max", "mem_used_max_bytes", FIG_GAUGE, FIG_ONE, \
	  "the most memory the allocator held since start or reset-max", \
	  st.mem_used_max) \
	X("same_pages", "same_pages", FIG_GAUGE, FIG_ONE, \
	  "pages kept as one repeated value", st.same_pages) \
	X("pages_compacted", "pages_compacted_total", FIG_COUNTER, FIG_ONE, \
	  "allocator pages emptied by compaction", st.pages_compacted) \
	X("huge_pages", "huge_pages", FIG_GAUGE, FIG_ONE, \
	  "pages kept raw because they do not compress", st.huge_pages) \
	X("pages_stored", "pages_stored", FIG_GAUGE, FIG_ONE, \
	  "pages that are not holes", st.pages_stored) \
	X("failed_reads", "failed_reads_total", FIG_COUNTER, FIG_ONE, \
	  "reads that failed", st.failed_reads) \
	X("failed_writes", "failed_writes_total", FIG_COUNTER, FIG_ONE, \
	  "writes that failed", st.failed_writes) \
	X("invalid_io", "invalid_io_total", FIG_COUNTER, FIG_ONE, \
	  "requests rejected as out of range", st.invalid_io) \
	X("table_bytes", "table_bytes", FIG_GAUGE, FIG_ONE, \
	  "the slot table, counted against the memory limit", st.table_bytes) \
	X("pages_unchanged", "pages_unchanged_total", FIG_COUNTER, FIG_ONE, \
	  "pages written with the bytes they already held", \
	  st.pages_unchanged) \
	X("pages_recompressed", "pages_recompressed_total", FIG_COUNTER, \
	  FIG_ONE, "pages re-encoded smaller by recompression", \
	  st.pages_recompressed) \
	X("dict_bytes", "dict_bytes", FIG_GAUGE, FIG_ONE, \
	  "the device's compression dictionary", di.dict_size) \
	X("dict_pages", "dict_pages", FIG_GAUGE, FIG_ONE, \
	  "pages encoded with the dictionary", di.dict_size ? di.pages : 0) \
	X("dict_pages_previous", "dict_pages_previous", FIG_GAUGE, FIG_ONE, \
	  "pages still encoded with a previous dictionary", di.pages_previous) \
	X("bd_capacity", "bd_capacity_bytes", FIG_GAUGE, FIG_ONE, \
	  "bytes the backing store may hold", st.bd_capacity) \
	X("bd_count", "bd_pages", FIG_GAUGE, FIG_ONE, \
	  "pages whose data is on the backing store", st.bd_count) \
	X("bd_bytes", "bd_bytes", FIG_GAUGE, FIG_ONE, \
	  "live bytes of their objects on the backing store", st.bd_bytes) \
	X("bd_space", "bd_space_bytes", FIG_GAUGE, FIG_ONE, \
	  "bytes of the backing store in use, live or dead", st.bd_space) \
	X("bd_reads", "bd_reads_total", FIG_COUNTER, FIG_ONE, \
	  "pages read from the backing store", st.bd_reads) \
	X("bd_writes", "bd_writes_total", FIG_COUNTER, FIG_ONE, \
	  "pages written to the backing store", st.bd_writes) \
	X("bd_failed_reads", "bd_failed_reads_total", FIG_COUNTER, FIG_ONE, \
	  "reads of the backing store that failed", st.bd_failed_reads) \
	X("bd_failed_writes", "bd_failed_writes_total", FIG_COUNTER, FIG_ONE, \
	  "writes to the backing store that failed", st.bd_failed_writes) \
	X("bd_wb_limit", "bd_wb_limit_pages", FIG_GAUGE, FIG_ONE, \
	  "pages writeback may still write under its limit", st.bd_wb_limit) \
	X("bd_compacted", "bd_compacted_bytes_total", FIG_COUNTER, FIG_ONE, \
	  "live bytes moved by backing store compaction", st.bd_compacted) \
	X("pages_written_back", "pages_written_back_total", FIG_COUNTER, \
	  FIG_ONE, "pages moved to the backing store by writeback", \
	  st.pages_written_back) \
	X("pages_written_through", "pages_written_through_total", FIG_COUNTER, \
	  FIG_ONE, \
	  "pages written straight to the backing store as memory was full", \
	  st.pages_written_through) \
	X("policy_runs", "policy_runs_total", FIG_COUNTER, FIG_ONE, \
	  "times the tier policy found memory past the high watermark", \
	  st.policy_runs) \
	X("policy_recompressed", "policy_recompressed_total", FIG_COUNTER, \
	  FIG_ONE, "pages the tier policy re-encoded", st.policy_recompressed) \
	X("policy_written_back", "policy_written_back_total", FIG_COUNTER, \
	  FIG_ONE, "pages the tier policy wrote back", st.policy_written_back) \
	X("pages_deduped", "pages_deduped", FIG_GAUGE, FIG_ONE, \
	  "pages stored as a reference to another cluster's object", \
	  st.pages_deduped) \
	X("dedup_bytes_saved", "dedup_saved_bytes", FIG_GAUGE, FIG_ONE, \
	  "compressed bytes those references would have stored", \
	  st.dedup_bytes_saved) \
	X("dedup_index_bytes", "dedup_index_bytes", FIG_GAUGE, FIG_ONE, \
	  "the dedup index, counted against the memory limit", \
	  st.dedup_index_bytes) \
	X("slot_lock_waits", "slot_lock_waits_total", FIG_COUNTER, FIG_ONE, \
	  "writers that waited for a cluster's lock", st.slot_lock_waits) \
	X("slot_lock_wait_ns", "slot_lock_wait_seconds_total", FIG_COUNTER, \
	  FIG_NS, "time writers waited for a cluster's lock", \
	  st.slot_lock_wait_ns) \
	X("slot_read_waits", "slot_read_waits_total", FIG_COUNTER, FIG_ONE, \
	  "readers that waited for a writer of the cluster", \
	  st.slot_read_waits) \
	X("slot_read_wait_ns", "slot_read_wait_seconds_total", FIG_COUNTER, \
	  FIG_NS, "time readers waited for a writer of the cluster", \
	  st.slot_read_wait_ns) \
	X("class_lock_waits", "class_lock_waits_total", FIG_COUNTER, FIG_ONE, \
	  "waits for an allocator size class", st.class_lock_waits) \
	X("class_lock_wait_ns", "class_lock_wait_seconds_total", FIG_COUNTER, \
	  FIG_NS, "time spent waiting for an allocator size class", \
	  st.class_lock_wait_ns) \
	X("frame_waits", "frame_waits_total", FIG_COUNTER, FIG_ONE, \
	  "times compaction waited for readers to unpin a zspage", \
	  st.frame_waits) \
	X("frame_wait_ns", "frame_wait_seconds_total", FIG_COUNTER, FIG_NS, \
	  "time compaction waited for readers to unpin a zspage", \
	  st.frame_wait_ns) \
	X("refill_waits", "refill_waits_total", FIG_COUNTER, FIG_ONE, \
	  "writes that found the no-fault pool empty and waited", \
	  st.refill_waits) \
	X("refill_wait_ns", "refill_wait_seconds_total", FIG_COUNTER, FIG_NS, \
	  "time writes waited for the no-fault pool's refill", \
	  st.refill_wait_ns) \
	X("refill_misses", "refill_misses_total", FIG_COUNTER, FIG_ONE, \
	  "writes that failed: the no-fault pool stayed empty", \
	  st.refill_misses) \
	X("refill_made", "refill_made_bytes_total", FIG_COUNTER, FIG_ONE, \
	  "bytes the refill thread made resident for the pool", \
	  st.refill_made) \
	X("refill_target", "refill_target_bytes", FIG_GAUGE, FIG_ONE, \
	  "bytes the refill keeps the no-fault pool at (0: off)", \
	  st.refill_target) \
	X("pool_cached", "pool_cached_bytes", FIG_GAUGE, FIG_ONE, \
	  "free frames kept resident for new zspages (in mem_used_total)", \
	  st.pool_cached) \
	X("connections_current", "connections", FIG_GAUGE, FIG_ONE, \
	  "NBD clients connected now", atomic_load(&c->conns_current)) \
	X("connections_total", "connections_total", FIG_COUNTER, FIG_ONE, \
	  "NBD clients accepted", atomic_load(&c->conns_total)) \
	X("connections_refused", "connections_refused_total", FIG_COUNTER, \
	  FIG_ONE, "NBD clients refused (too many)", \
	  atomic_load(&c->conns_refused)) \
	X("bytes_read", "read_bytes_total", FIG_COUNTER, FIG_ONE, \
	  "bytes NBD clients read", atomic_load(&c->bytes_read)) \
	X("bytes_written", "written_bytes_total", FIG_COUNTER, FIG_ONE, \
	  "bytes NBD clients wrote", atomic_load(&c->bytes_written)) \
	X("errors", "errors_total", FIG_COUNTER, FIG_ONE, \
	  "NBD requests answered with an error", atomic_load(&c->errors)) \
	X("protocol_errors", "protocol_errors_total", FIG_COUNTER, FIG_ONE, \
	  "NBD clients dropped for breaking the protocol", \
	  atomic_load(&c->proto_errors)) \
	X("uptime_seconds", "uptime_seconds", FIG_GAUGE, FIG_ONE, \
	  "seconds since the server started", \
	  (uint64_t)(time(NULL) - srv->started))

#endif
