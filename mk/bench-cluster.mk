# SPDX-License-Identifier: MIT
# bench-cluster.mk - `make bench-cluster`: what multi-page clusters buy (memory)
# and cost (MB/s, random 4 KiB read time) per codec and cluster size, on
# the corpus `make bench` uses, against the kernel's zram and nbdkit's zstd
# allocator in the same run. Prints a table and writes
# bench/out/cluster.json. About five minutes; the zram row needs root.

# CORPUS=DIR: a corpus folder of one's own instead (see the Makefile).

.PHONY: bench-cluster

bench-cluster: all deps-bench $(BENCH_CORPUS_READY)
	bash bench/cluster.sh $(abspath $(BUILD)/uzram) $(BENCH_CORPUS_DIR) \
		$(abspath bench/out/cluster.json)
