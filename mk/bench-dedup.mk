# SPDX-License-Identifier: MIT
# bench-dedup.mk - `make bench-dedup`: what dedup saves and costs (bench/dedup.sh):
# memory for the corpus twice and alone, fill throughput of unique data with
# 1 and 2 writers, nbdcopy of a VM-like image to two offsets through
# `uzram serve --dedup`, each with dedup off and on, targets marked met or
# missed. Writes bench/out/dedup.json and bench/sections/dedup.md.

.PHONY: bench-dedup

$(BUILD)/bench-dedup-fill: bench/dedup-fill.c include/uzram.h $(BUILD)/libuzram.a
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -Iinclude -o $@ $< $(BUILD)/libuzram.a $(LDLIBS_ALL)

bench-dedup: all deps-bench $(BUILD)/bench-dedup-fill $(BENCH_CORPUS_READY)
	bash bench/dedup.sh $(abspath $(BUILD)) $(BENCH_CORPUS_DIR)
