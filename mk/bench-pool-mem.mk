# SPDX-License-Identifier: MIT
# bench-pool-mem.mk - `make bench-pool-mem`: the memory the no-fault pool
# (serve --swap) holds, in-process: v32's writes with lz4 to a device
# without the pool and with it (bench/pool-mem.c). Prints two lines.

.PHONY: bench-pool-mem

$(BUILD)/bench-pool-mem: bench/pool-mem.c include/uzram.h $(BUILD)/libuzram.a
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -Iinclude -o $@ $< $(BUILD)/libuzram.a $(LDLIBS_ALL)

bench-pool-mem: all $(BUILD)/bench-pool-mem $(CORPUS_READY)
	$(BUILD)/bench-pool-mem $(CORPUS_DIR)/heap-python.core
