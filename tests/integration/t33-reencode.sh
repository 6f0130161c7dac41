#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t33-reencode.sh - write fast, re-encode later over NBD (issue 30): `uzram
# serve --algorithm zstd` writes lz4:8 first (its default --fast-algorithm)
# and its thread re-encodes every cluster to zstd by itself, ending with the
# compressed bytes of a server that wrote zstd directly
# (--fast-algorithm none); what nbdcopy reads back meanwhile and after is the
# same file; bad --fast-algorithm and --reencode-age values are refused.
source "$(dirname "$0")/functions.sh"
require nbdcopy python3
real_server || skip_all "write fast, re-encode later is a uzram serve feature"

N=$((8 * 1024 * 1024))
compressible_data "$T/data" "$N" >/dev/null

step "zstd written directly, and zstd after lz4:8 (the default)"
start_server z --size 64M --algorithm zstd --fast-algorithm none
start_server f --size 64M --algorithm zstd
nbdcopy --flush "$T/data" "${URI[z]}"
nbdcopy --flush "$T/data" "${URI[f]}"
want=$(stat_field z compr_data_size)
nbdcopy "${URI[f]}" "$T/out"
assert_same_data "$T/data" "$T/out" "$N"

step "the thread re-encodes everything by itself"
same_size() { [[ $(stat_field f compr_data_size) == "$want" ]]; }
wait_for 60 "compr_data_size $want (now $(stat_field f compr_data_size))" same_size
(($(stat_field f pages_recompressed) > 0)) || fail "nothing re-encoded"
assert_eq "$(stat_field z pages_recompressed)" 0 "pages_recompressed without a fast codec"
nbdcopy "${URI[f]}" "$T/out"
assert_same_data "$T/data" "$T/out" "$N"

step "new data over it is fast again, then re-encoded"
compressible_data "$T/data2" "$((N / 2))" >/dev/null
nbdcopy --flush "$T/data2" "${URI[z]}"
nbdcopy --flush "$T/data2" "${URI[f]}"
want=$(stat_field z compr_data_size)
wait_for 60 "compr_data_size $want" same_size
nbdcopy "${URI[f]}" "$T/out"
assert_same_data "$T/data2" "$T/out" "$((N / 2))"
assert_alive f
stop_server f
stop_server z

step "bad values are refused"
for bad in "--fast-algorithm lz5" "--fast-algorithm lz4:70000" \
	"--fast-algorithm lz4:dict=/dev/null" "--reencode-age 600" \
	"--reencode-age x"; do
	rc=0
	# shellcheck disable=SC2086
	uzram serve --size 1M --socket "$T/b.sock" --dry-run $bad \
		>/dev/null 2>"$T/b.err" || rc=$?
	((rc != 0)) || fail "$bad: accepted"
	[[ -s $T/b.err ]] || fail "$bad: no message"
done
uzram serve --size 1M --socket "$T/b.sock" --dry-run --algorithm zstd \
	--fast-algorithm lz4:8 --reencode-age 30 >/dev/null ||
	fail "a good --fast-algorithm refused"
