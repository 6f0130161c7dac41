#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t20-nbdinfo.sh - what `uzram serve` advertises, as nbdinfo sees it: the
# export size (given and default), the transmission flags, read-only
# exports, export listing, base:allocation maps before and after writes,
# TCP listening, --max-connections, bad options refused, and a clean
# SIGTERM.
source "$(dirname "$0")/functions.sh"
require nbdinfo qemu-io python3

MiB=$((1024 * 1024))
SIZE=$((64 * MiB))

step "start a 64 MiB export"
start_server a --size 64M
if real_server; then
	step "the URI printed on stdout connects"
	printed=$(grep -m1 -oE "nbd(\+unix)?://[^ ']+" "${OUT[a]}") ||
		fail "no nbd:// or nbd+unix:// URI on stdout: $(cat "${OUT[a]}")"
	assert_eq "$(nbdinfo --size "$printed")" "$SIZE" "size through $printed"
fi

# export_info URI EXPR: EXPR of nbdinfo's JSON about the export, as `e`.
export_info()
{
	nbdinfo --json "$1" >"$T/info.json"
	json_get "$T/info.json" "(lambda e: $2)(j['exports'][0])"
}

step "nbdinfo: size and flags"
assert_eq "$(export_info "${URI[a]}" 'e["export-size"]')" "$SIZE" export-size
for flag in can_trim can_zero can_fua can_flush can_cache can_multi_conn; do
	assert_eq "$(export_info "${URI[a]}" "e['$flag']")" True "$flag"
done
assert_eq "$(export_info "${URI[a]}" 'e["is_read_only"]')" False is_read_only
assert_eq "$(export_info "${URI[a]}" '"base:allocation" in e["contexts"]')" \
	True "base:allocation context"

step "nbdinfo --map: a fresh device is one hole+zero extent"
nbdinfo --map --json "${URI[a]}" >"$T/map.json"
assert_eq "$(json_get "$T/map.json" \
	'[(e["offset"], e["length"], e["type"]) for e in j]')" \
	"[[0, $SIZE, 3]]" "map of a fresh device"

step "nbdinfo --map: written ranges are data, the rest stays holes"
qio "${URI[a]}" "write -P 0xa5 $((4 * MiB)) $MiB" \
	"write -P 0x3c $((40 * MiB + 100)) 5000"
assert_eq "$(map_types "${URI[a]}" $((4 * MiB)) $MiB)" 0 "type of [4M, 5M)"
assert_eq "$(map_types "${URI[a]}" 0 $((4 * MiB)))" 3 "type of [0, 4M)"
assert_eq "$(map_types "${URI[a]}" $((5 * MiB)) $((35 * MiB)))" 3 \
	"type of [5M, 40M)"
# 5000 bytes at 40M+100 touch the 4 KiB pages [40M, 40M+8K) (the stand-in
# nbdkit keeps 32 KiB pages).
grain=8192
real_server || grain=32768
assert_eq "$(map_types "${URI[a]}" $((40 * MiB)) $grain)" 0 \
	"type of the unaligned write"
assert_eq "$(map_types "${URI[a]}" $((40 * MiB + grain)) \
	$((24 * MiB - grain)))" 3 "type after the unaligned write"

step "nbdinfo --map: write-zeroes and trim make zero ranges again"
qio "${URI[a]}" "write -P 0x11 $((8 * MiB)) $MiB" "write -z $((8 * MiB)) $MiB" \
	"write -P 0x22 $((16 * MiB)) $MiB" "discard $((16 * MiB)) $MiB"
assert_zero_bit "${URI[a]}" $((8 * MiB)) $MiB "after write -z"
assert_eq "$(map_types "${URI[a]}" $((16 * MiB)) $MiB)" 3 "type after discard"

step "nbdinfo --map: pages written with zero bytes read as zero"
qio "${URI[a]}" "write -P 0 $((24 * MiB)) $MiB"
assert_zero_bit "${URI[a]}" $((24 * MiB)) $MiB "after writing zero bytes"

step "SIGTERM ends the server cleanly"
stop_server a

step "default size is 1 GiB"
start_server d
assert_eq "$(nbdinfo --size "${URI[d]}")" $((1024 * MiB)) "default export size"
stop_server d

step "a named export: --list, connecting by name, unknown names refused"
start_server n --size 16M --export disk0
assert_eq "$(nbdinfo --size "${URI[n]}")" $((16 * MiB)) "size of export disk0"
if real_server; then
	nbdinfo --list --json "${URI[n]}" >"$T/list.json"
	assert_eq "$(json_get "$T/list.json" \
		'[e["export-name"] for e in j["exports"]]')" '["disk0"]' \
		"exports listed"
	assert_fails "connect to an unknown export" \
		nbdinfo --size "nbd+unix:///nosuch?socket=${SOCK[n]}"
fi
assert_alive n
stop_server n

step "--read-only: is_read_only and writes refused"
start_server r --size 8M --read-only
assert_eq "$(export_info "${URI[r]}" 'e["is_read_only"]')" True is_read_only
# qemu-io opens read-write unless -r, which the read-only flag must refuse.
qio_fails "${URI[r]}" "write -P 1 0 4096"
qio -r "${URI[r]}" "read -P 0 0 8M"
stop_server r

step "--tcp HOST:PORT"
start_server_tcp t 127.0.0.1:0 --size 4M
assert_eq "$(nbdinfo --size "${URI[t]}")" $((4 * MiB)) "size over TCP"
qio "${URI[t]}" "write -P 7 0 64k" "read -P 7 0 64k"
stop_server t

step "--max-connections 2: a third client is turned away, later ones served"
start_server c --size 4M --max-connections 2
python3 - "$ITEST_DIR" "${SOCK[c]}" "${URI[c]}" <<'PY'
import subprocess, sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import nbd_bad_client as nbd
held = [nbd.Conn(sys.argv[2]).open("") for _ in range(2)]
for c in held:
    c.read(0, 4096)
r = subprocess.run(["nbdinfo", "--size", sys.argv[3]], capture_output=True,
                   timeout=10)
if r.returncode == 0:
    sys.exit("a third connection was served with --max-connections 2")
for c in held:
    c.disconnect()
PY
wait_for 5 "a client after the limit was freed" nbdinfo --size "${URI[c]}"
stop_server c

if real_server; then
	step "bad serve options fail with a message"
	for bad in "--algorithm nosuch" "--size 0" "--size banana" \
		"--algorithm zstd --level 999"; do
		rc=0
		# shellcheck disable=SC2086
		timeout 10 "${SANITIZER_RUN[@]}" "$UZRAM" serve \
			--socket "$T/bad.sock" $bad \
			>"$T/bad.out" 2>"$T/bad.err" </dev/null || rc=$?
		((rc != 0 && rc != 124)) ||
			fail "uzram serve $bad: exit status $rc (124: still running)"
		[[ -s $T/bad.err ]] ||
			fail "uzram serve $bad: no message on stderr"
		[[ ! -e $T/bad.sock ]] ||
			fail "uzram serve $bad left a socket behind"
	done
fi
