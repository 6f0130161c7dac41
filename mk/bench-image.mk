# SPDX-License-Identifier: MIT
# bench-image.mk - `make bench-image`: saving and opening an image (lz4 with 4 KiB
# clusters, zstd with 32 KiB), beside filling the device from the raw file
# and beside cp of the image file, and the latency of writes during a live
# save under fio. On the benchmarks' corpus (or CORPUS=DIR; bench/image.sh
# explains each figure); prints a table and writes bench/out/image.json.

.PHONY: bench-image

bench-image: all deps-bench $(BENCH_CORPUS_READY)
	bash bench/image.sh $(abspath $(BUILD)/uzram) $(BENCH_CORPUS_DIR)/files.tar \
		$(abspath bench/out/image.json)
