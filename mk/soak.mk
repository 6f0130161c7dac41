# SPDX-License-Identifier: MIT
# soak.mk - `make soak`: real clients against one `uzram serve` for
# SOAK_TIME seconds (default 600, at most 86400), then checks of the data,
# the server's RSS against its budget and its thread count. Not part of
# `make test`. See tests/soak.sh.
#
#   make soak                  10 minutes
#   make soak SOAK_TIME=3600   an hour

SOAK_TIME ?= 600

.PHONY: soak

soak: deps-test all $(CORPUS_READY)
	UZRAM=$(abspath $(BUILD)/uzram) UZRAM_TEST_CORPUS=$(CORPUS_DIR) \
		SOAK_TIME=$(SOAK_TIME) bash tests/soak.sh
