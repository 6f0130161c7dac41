# cluster.mk - `make bench-cluster`: what multi-page clusters buy (memory)
# and cost (MB/s, random 4 KiB read time) per codec and cluster size, on
# the corpus `make bench` uses, against the kernel's zram and nbdkit's zstd
# allocator in the same run. Prints a table and writes
# bench/out/cluster.json. About five minutes; the zram row needs root.

CLUSTER_CORPUS ?= $(abspath build/bench-corpus)

.PHONY: bench-cluster

$(CLUSTER_CORPUS)/MANIFEST:
	bash $(SHARED)/bench/make-corpus.sh $(CLUSTER_CORPUS) 512 >/dev/null

bench-cluster: all deps-bench $(CLUSTER_CORPUS)/MANIFEST
	bash bench/cluster.sh $(abspath $(BUILD)/uzram) $(CLUSTER_CORPUS) \
		$(abspath bench/out/cluster.json)
