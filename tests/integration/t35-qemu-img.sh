#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t35-qemu-img.sh - QEMU's block layer against `uzram serve`: qemu-img info,
# convert file -> nbd (plain and parallel out-of-order), nbd -> file and
# nbd -> nbd, and qemu-img compare between the export and its source, which
# must also notice a single changed byte.
source "$(dirname "$0")/functions.sh"
require qemu-img qemu-io

MiB=$((1024 * 1024))
SIZE=$((80 * MiB))
TARSZ=$(stat -c %s "$TAR")
head -c $((64 * MiB)) "$CORPUS/heap-python.core" >"$T/core64"

step "start an 80 MiB export"
start_server a --size 80M

step "qemu-img info"
qemu-img info --output=json "${URI[a]}" >"$T/info.json"
assert_eq "$(json_get "$T/info.json" 'j["virtual-size"]')" "$SIZE" virtual-size
assert_eq "$(json_get "$T/info.json" 'j["format"]')" raw format

step "convert files.tar -> nbd, compare"
qemu-img convert -n -f raw -O raw "$TAR" "${URI[a]}"
assert_ok "qemu-img compare files.tar with the export" \
	qemu-img compare -f raw -F raw "$TAR" "${URI[a]}"

step "convert nbd -> file, compare"
qemu-img convert -f raw -O raw "${URI[a]}" "$T/out.img"
assert_eq "$(stat -c %s "$T/out.img")" "$SIZE" "size of the converted file"
assert_same_data "$TAR" "$T/out.img" "$TARSZ"
assert_zero "$T/out.img" "$TARSZ" $((SIZE - TARSZ))
assert_ok "qemu-img compare the file with the export" \
	qemu-img compare -f raw -F raw "$T/out.img" "${URI[a]}"

step "convert 64 MiB of the core -> nbd, 8 coroutines out of order, compare"
qemu-img convert -n -W -m 8 -f raw -O raw "$T/core64" "${URI[a]}"
assert_ok "qemu-img compare the core with the export" \
	qemu-img compare -f raw -F raw "$T/core64" "${URI[a]}"

step "qemu-img compare notices one changed byte"
qio "${URI[a]}" "write -P 0x5a $((33 * MiB + 17)) 1"
cmp -s -n 1 -i $((33 * MiB + 17)):0 "$T/core64" <(printf 'Z') &&
	fail "the core already has 0x5a at that offset; pick another"
rc=0
qemu-img compare -f raw -F raw "$T/core64" "${URI[a]}" >"$T/cmp.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "qemu-img compare exit status after a one-byte change"
grep -q "mismatch at offset $((33 * MiB))!" "$T/cmp.out" ||
	fail "qemu-img compare reported another offset: $(cat "$T/cmp.out")"

step "convert nbd -> nbd (uzram lz4 to uzram deflate), compare"
start_server b --size 80M --algorithm deflate
qemu-img convert -n -W -m 4 -f raw -O raw "${URI[a]}" "${URI[b]}"
assert_ok "qemu-img compare the two exports" \
	qemu-img compare -f raw -F raw "${URI[a]}" "${URI[b]}"

step "servers stop cleanly"
stop_server a
stop_server b
