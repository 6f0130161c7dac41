# SPDX-License-Identifier: MIT
# fuzz.mk - the NBD protocol fuzzer and the image loader fuzzer (libFuzzer,
# clang, ASan+UBSan).
#
#   make fuzz-smoke   build build-fuzz/fuzz_nbd, run every committed seed,
#                     then fuzz for FUZZ_SMOKE_TIME seconds; the same for
#                     build-fuzz/fuzz_image for FUZZ_IMAGE_SMOKE_TIME seconds
#                     (part of make test, which runs the two halves,
#                     fuzz-smoke-nbd and fuzz-smoke-image, side by side)
#   make fuzz         the same for FUZZ_TIME seconds each (600 by default)
#
# fuzz_image's seeds are in tests/fuzz/corpus/image (regenerate them with
# tests/fuzz/make-image-seeds.sh); its new inputs go to
# build-fuzz/corpus-image.
#
# The fuzz binary compiles the library and the server sources itself with
# the fuzzer's flags, so coverage reaches into libuzram. New inputs go to
# build-fuzz/corpus-nbd; the committed seeds in tests/fuzz/corpus/nbd are
# only read (regenerate them with tests/fuzz/make-seeds.py).

FUZZ_CC ?= clang
FUZZ_DIR := build-fuzz
FUZZ_TIME ?= 600
FUZZ_SMOKE_TIME ?= 60
FUZZ_IMAGE_SMOKE_TIME ?= 20
FUZZ_SEEDS := tests/fuzz/corpus/nbd
FUZZ_IMAGE_SEEDS := tests/fuzz/corpus/image
FUZZ_IMAGE_SRCS := $(sort $(wildcard src/*/*.c)) tests/fuzz/fuzz_image.c
FUZZ_SRCS := $(sort $(wildcard src/*/*.c) $(wildcard nbd/*.c) $(wildcard listen/*.c) \
	$(wildcard ctl/*.c) $(wildcard server/*.c) $(wildcard common/*.c)) \
	tests/fuzz/fuzz_nbd.c
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-Wall -Wextra -Iinclude -Isrc -Ictl -DUZRAM_BUILDING
# Sanitizer runtimes here need address randomisation off (see Makefile).
FUZZ_RUN := setarch $(shell uname -m) -R

$(FUZZ_DIR)/fuzz_nbd: $(FUZZ_SRCS) $(wildcard src/*/*.h nbd/*.h listen/*.h ctl/*.h server/*.h common/*.h) include/uzram.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPS_CFLAGS) $(SERVER_CFLAGS) -o $@ $(FUZZ_SRCS) \
		$(DEPS_LIBS) $(SERVER_LIBS) -lpthread -lm

$(FUZZ_DIR)/fuzz_image: $(FUZZ_IMAGE_SRCS) $(wildcard src/*/*.h) include/uzram.h \
		tests/fuzz/image_fixup.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPS_CFLAGS) -o $@ $(FUZZ_IMAGE_SRCS) \
		$(DEPS_LIBS) -lpthread -lm

define fuzz_image_run
	@mkdir -p $(FUZZ_DIR)/corpus-image
	$(FUZZ_RUN) $(FUZZ_DIR)/fuzz_image -runs=0 $(FUZZ_IMAGE_SEEDS)/*
	$(FUZZ_RUN) nice $(FUZZ_DIR)/fuzz_image -max_total_time=$(1) \
		-max_len=65536 -timeout=20 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-image \
		$(FUZZ_IMAGE_SEEDS)
endef

define fuzz_run
	@mkdir -p $(FUZZ_DIR)/corpus-nbd
	$(FUZZ_RUN) $(FUZZ_DIR)/fuzz_nbd -runs=0 $(FUZZ_SEEDS)/*
	$(FUZZ_RUN) nice $(FUZZ_DIR)/fuzz_nbd -max_total_time=$(1) -max_len=16384 \
		-timeout=20 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ \
		$(FUZZ_DIR)/corpus-nbd $(FUZZ_SEEDS)
endef

.PHONY: fuzz-smoke-nbd fuzz-smoke-image
fuzz-smoke: fuzz-smoke-nbd fuzz-smoke-image

fuzz-smoke-nbd: deps-test $(FUZZ_DIR)/fuzz_nbd
	$(call fuzz_run,$(FUZZ_SMOKE_TIME))
	@mkdir -p $(dir $(TEST_RESULTS)) && echo $@ >> $(TEST_RESULTS)

fuzz-smoke-image: deps-test $(FUZZ_DIR)/fuzz_image
	$(call fuzz_image_run,$(FUZZ_IMAGE_SMOKE_TIME))
	@mkdir -p $(dir $(TEST_RESULTS)) && echo $@ >> $(TEST_RESULTS)

fuzz: deps-test $(FUZZ_DIR)/fuzz_nbd $(FUZZ_DIR)/fuzz_image
	$(call fuzz_run,$(FUZZ_TIME))
	$(call fuzz_image_run,$(FUZZ_TIME))
