# cluster.mk - `make bench-cluster`: what multi-page clusters buy (memory)
# and cost (MB/s, random 4 KiB read time) per codec and cluster size, on
# the corpus `make bench` uses, against the kernel's zram and nbdkit's zstd
# allocator in the same run. Prints a table and writes
# bench/out/cluster.json. About five minutes; the zram row needs root.

# CORPUS=DIR: a corpus folder of one's own instead (see the Makefile).

.PHONY: bench-cluster

ifeq ($(CORPUS),)
CLUSTER_CORPUS := $(abspath build/bench-corpus)
CLUSTER_READY := $(CLUSTER_CORPUS)/MANIFEST
$(CLUSTER_READY):
	bash scripts/corpus.sh $(CLUSTER_CORPUS) 512 >/dev/null
else
CLUSTER_CORPUS := $(CORPUS_DIR)
CLUSTER_READY := $(CORPUS_READY)
endif

bench-cluster: all deps-bench $(CLUSTER_READY)
	bash bench/cluster.sh $(abspath $(BUILD)/uzram) $(CLUSTER_CORPUS) \
		$(abspath bench/out/cluster.json)
