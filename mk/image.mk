# image.mk - `make bench-image`: saving and opening an image (lz4 with 4 KiB
# clusters, zstd with 32 KiB), beside filling the device from the raw file
# and beside cp of the image file, and the latency of writes during a live
# save under fio. On the corpus `make bench` uses (bench/image.sh explains
# each figure); prints a table and writes bench/out/image.json.

IMAGE_CORPUS ?= $(abspath build/bench-corpus)

.PHONY: bench-image

bench-image: all deps-bench $(IMAGE_CORPUS)/MANIFEST
	bash bench/image.sh $(abspath $(BUILD)/uzram) $(IMAGE_CORPUS)/files.tar \
		$(abspath bench/out/image.json)
