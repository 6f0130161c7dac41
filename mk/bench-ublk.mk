# SPDX-License-Identifier: MIT
# bench-ublk.mk - the ublk front end's benchmark (doc/ublk.md): the kernel's zram,
# `uzram serve --ublk` in both copy modes and `uzram serve` over the kernel's
# NBD client, side by side in one 6.12 guest of the VM bench (TCG).
#
#   make bench-ublk     prints the FIGURE lines; BENCHMARKS.md has one run
.PHONY: bench-ublk
bench-ublk: deps-vm all $(CORPUS_READY)
	UZRAM=$(abspath $(BUILD)/uzram) UZRAM_TEST_CORPUS=$(CORPUS_DIR) \
		bash tests/vm/run.sh tests/vm/bench-ublk.sh
