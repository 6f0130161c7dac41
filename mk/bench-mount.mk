# SPDX-License-Identifier: MIT
# bench-mount.mk - `uzram mount` against tmpfs and the kernel's zram.
#
#   make bench-mount   bench/mount.sh as root: untar + sync, find | xargs
#                      cat, rm -rf on tmpfs, uzram mount (root, and user
#                      nobody) and zram with ext4; seconds and memory held.
#                      MOUNT_TAR=FILE picks the tar (default: the test
#                      corpus's files.tar).
#   make bench-fs      bench/fs.sh as root: uzram's own file system as user
#                      nobody beside tmpfs: untar, grep -r, rm -rf of
#                      /usr/include, 1 GiB dd write and read, memory.

.PHONY: bench-mount bench-fs

bench-mount: all $(CORPUS_DIR)/MANIFEST
	@scripts/deps.sh run
	UZRAM=$(abspath $(BUILD)/uzram) bash bench/mount.sh \
		$(or $(MOUNT_TAR),$(CORPUS_DIR)/files.tar)

bench-fs: all $(CORPUS_DIR)/MANIFEST
	@scripts/deps.sh run
	UZRAM=$(abspath $(BUILD)/uzram) CORPUS_TAR=$(CORPUS_DIR)/files.tar \
		bash bench/fs.sh
