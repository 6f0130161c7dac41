# SPDX-License-Identifier: MIT
# bench-tiers.mk - `make bench-tiers`: the second tier's figures (bench/tiers.sh):
# the mem-limit fill beside the same fill with no limit, random reads of
# written-back data beside fio on the backing file, backing bytes after
# churn. Writes bench/sections/tiers.md and puts it into BENCHMARKS.md.
# TIERS_SIZE and TIERS_LIMIT in MiB (defaults: the issue's 512, 128), of
# the benchmarks' 512 MiB corpus (or CORPUS=DIR), as bench-dedup.
TIERS_SIZE ?= 512
TIERS_LIMIT ?= 128

.PHONY: bench-tiers
bench-tiers: deps-bench all $(BENCH_CORPUS_READY)
	BUILD=$(BUILD) BENCH_CORPUS=$(BENCH_CORPUS_DIR) \
		bash bench/tiers.sh $(TIERS_SIZE) $(TIERS_LIMIT)
