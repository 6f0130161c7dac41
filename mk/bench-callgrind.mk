# SPDX-License-Identifier: MIT
# bench-callgrind.mk - `make bench-callgrind [REV=main]`: the library's
# instructions per page written and per 4 KiB read under callgrind
# (bench/callgrind.sh), and with REV the same against REV's library: a
# check, independent of the machine's load, that a change leaves the hot
# path as it was.

.PHONY: bench-callgrind

$(BUILD)/bench-callgrind: bench/callgrind.c include/uzram.h $(BUILD)/libuzram.a
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< $(BUILD)/libuzram.a $(LDLIBS_ALL)

bench-callgrind: lib $(BUILD)/bench-callgrind
	BUILD=$(BUILD) bash bench/callgrind.sh $(REV)
