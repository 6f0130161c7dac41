# SPDX-License-Identifier: MIT
# bench-dict.mk - `make bench-dict`: what a trained dictionary buys (memory) and
# costs (training, 4K random reads) per codec and cluster size, on the
# benchmarks' corpus (or CORPUS=DIR). Writes bench/out/dict.json and
# bench/sections/dict.md, and puts that section into BENCHMARKS.md.

.PHONY: bench-dict

bench-dict: all deps-bench $(BENCH_CORPUS_READY)
	bash bench/dict.sh $(abspath $(BUILD)/uzram) $(BENCH_CORPUS_DIR)
