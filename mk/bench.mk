# SPDX-License-Identifier: MIT
# bench.mk - `make bench` and `make bench-quick`: the same fio workloads
# against libuzram in-process (a fio external ioengine), the kernel's zram,
# `uzram serve` and nbdkit's memory plugin, in one run. Writes BENCHMARKS.md,
# bench/results.json and bench/chart.png; raw outputs go to bench/out/.
#
# The fio engine is compiled against the headers and config-host.h of the
# installed fio: bench/fio-src.sh unpacks its Debian source into
# $(BUILD)/fio-src at bench time (fio's sources are never committed).

FIO_SRC := $(BUILD)/fio-src/current
BENCH_BINS := $(BUILD)/uzram-fio.so $(BUILD)/codec-limit $(BUILD)/bench-fill

.PHONY: bench-tools

$(FIO_SRC)/config-host.h:
	bash bench/fio-src.sh $(BUILD)/fio-src >/dev/null

# fio's headers need its configure output and GNU C; -isystem keeps their
# own warnings out of ours. The engine links libuzram statically, and
# -z nodelete keeps the shared device alive across fio's dlclose() calls.
$(BUILD)/uzram-fio.so: bench/uzram-fio.c include/uzram.h $(BUILD)/libuzram.a \
		$(FIO_SRC)/config-host.h
	$(CC) -std=gnu11 -D_GNU_SOURCE -D_LARGEFILE_SOURCE -D_FILE_OFFSET_BITS=64 \
		$(OPT) $(WARNINGS) -fPIC -shared -Iinclude \
		-include $(FIO_SRC)/config-host.h -isystem $(FIO_SRC) \
		-Wl,-z,nodelete -o $@ $< $(BUILD)/libuzram.a $(LDLIBS_ALL)

$(BUILD)/codec-limit: bench/codec-limit.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< $(LDLIBS_ALL)

$(BUILD)/bench-fill: bench/fill.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(shell pkg-config --cflags libnbd 2>/dev/null) \
		-o $@ $< $(shell pkg-config --libs libnbd 2>/dev/null)

bench-tools: $(BENCH_BINS)

bench: deps-bench all bench-tools
	BUILD=$(BUILD) BENCH_CORPUS=$(if $(CORPUS),$(abspath $(CORPUS))) bash bench/run.sh full

bench-quick: deps-bench all bench-tools
	BUILD=$(BUILD) BENCH_CORPUS=$(if $(CORPUS),$(abspath $(CORPUS))) bash bench/run.sh quick
