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
#                      /usr/include, a C build (uzram's library), 2 GiB
#                      dd write and read, memory and what rm -rf gives
#                      back; the ratios against issue 32's targets.
#   make bench-fs-rtt  bench/fs-rtt.sh as root: one operation's round trip
#                      (stat of a new name, create+write+close) on tmpfs
#                      and on uzram's file system blocking and spinning,
#                      the keeper on the program's CPU and on another.

.PHONY: bench-mount bench-fs bench-fs-rtt

bench-mount: all $(CORPUS_DIR)/MANIFEST
	@scripts/deps.sh run
	UZRAM=$(abspath $(BUILD)/uzram) bash bench/mount.sh \
		$(or $(MOUNT_TAR),$(CORPUS_DIR)/files.tar)

bench-fs: all $(CORPUS_DIR)/MANIFEST
	@scripts/deps.sh run
	UZRAM=$(abspath $(BUILD)/uzram) CORPUS_TAR=$(CORPUS_DIR)/files.tar \
		bash bench/fs.sh

$(BUILD)/fs-rtt: bench/fs-rtt.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $<

bench-fs-rtt: all $(BUILD)/fs-rtt
	UZRAM=$(abspath $(BUILD)/uzram) RTT=$(abspath $(BUILD)/fs-rtt) \
		bash bench/fs-rtt.sh
