#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t32-threads.sh - `uzram serve --threads` and `uzram load --threads`: a
# device whose large writes are compressed on worker threads as well as on
# the connection's. Copies in over several connections (several pooled
# writes at once), unaligned writes (partial clusters around the pooled
# whole ones), 16 KiB clusters, a write that meets the memory limit half way
# (each page old or new, never torn; the server lives on), and bad thread
# counts refused with a message; the lock figures in uzram stat --all.
source "$(dirname "$0")/functions.sh"
require nbdcopy
require qemu-io
real_server || skip_all "--threads is uzram's own"

MiB=$((1024 * 1024))
SIZE=$((64 * MiB))
# the tar, then the python core up to 24 MiB: text, binaries and a heap
cat "$TAR" >"$T/data"
head -c $((24 * MiB - $(stat -c %s "$TAR"))) "$CORPUS/heap-python.core" >>"$T/data"
[[ $(stat -c %s "$T/data") == $((24 * MiB)) ]] || fail "the corpus is under 24 MiB"

step "24 MiB of the corpus in over 4 connections to a server with 2 threads, and out"
start_server a --size 64M --threads 2
nbdcopy --connections=4 --requests=16 "$T/data" "${URI[a]}"
nbdcopy "${URI[a]}" "$T/out"
assert_same_data "$T/data" "$T/out" $((24 * MiB))
assert_zero "$T/out" $((24 * MiB)) $((40 * MiB))

step "the lock figures are in uzram stat, text and JSON"
for f in slot_lock slot_read class_lock frame; do
	for g in ${f}_waits ${f}_wait_ns; do
		[[ $(stat_field a $g) =~ ^[0-9]+$ ]] || fail "no $g in uzram stat --json"
		uzram stat --socket "${SOCK[a]}" --all | grep -qE "^$g +[0-9]+$" ||
			fail "no $g in uzram stat --all"
	done
done

step "unaligned 1 MiB writes over the data read back exactly"
qio "${URI[a]}" "write -P 0x5a 12345 1048576" "write -P 0xa5 $((5 * MiB - 7)) 3000000"
nbdcopy "${URI[a]}" "$T/out2"
python3 - "$T/out" "$T/out2" <<'PY'
import sys
a, b = bytearray(open(sys.argv[1], "rb").read()), open(sys.argv[2], "rb").read()
a[12345:12345 + 1048576] = b"\x5a" * 1048576
o = 5 * 1048576 - 7
a[o:o + 3000000] = b"\xa5" * 3000000
sys.exit(0 if a == b else "the unaligned writes did not read back")
PY
stop_server a

step "16 KiB clusters with 3 threads"
start_server c --size 64M --cluster 16K --threads 3
nbdcopy --connections=2 "$T/data" "${URI[c]}"
nbdcopy "${URI[c]}" "$T/out"
assert_same_data "$T/data" "$T/out" $((24 * MiB))
stop_server c

step "a 16 MiB write of random bytes past a 4 MiB limit: pages old or new"
head -c $((16 * MiB)) /dev/urandom >"$T/rand"
start_server l --size 32M --mem-limit 4M --threads 2
qio "${URI[l]}" "write -P 0x33 0 $((32 * MiB))"
assert_fails "a write past the memory limit" \
	nbdcopy --request-size=$((16 * MiB)) "$T/rand" "${URI[l]}"
assert_alive l
nbdcopy "${URI[l]}" "$T/out"
python3 - "$T/rand" "$T/out" <<'PY'
import sys
new, got = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
old, P, n = b"\x33" * 4096, 4096, 0
for p in range(len(new) // P):
    g = got[p * P:(p + 1) * P]
    if g == new[p * P:(p + 1) * P]:
        n += 1
    elif g != old:
        sys.exit("page %d is neither old nor new" % p)
if got[len(new):] != b"\x33" * (len(got) - len(new)):
    sys.exit("pages past the write changed")
if n == len(new) // P:
    sys.exit("every page was written despite the failure")
PY
[[ $(stat_field l failed_writes) -gt 0 ]] || fail "no failed write counted"
stop_server l

step "bad thread counts are refused with a message"
for bad in 65 -1 x; do
	assert_fails "serve --threads $bad" uzram serve --size 1M --threads "$bad" \
		--socket "$T/bad.sock"
	grep -qi "threads" "$T/last-fail.out" ||
		fail "serve --threads $bad: no message naming the option: $(cat "$T/last-fail.out")"
	assert_fails "load --threads $bad" uzram load "$T/data" --threads "$bad"
	grep -qi "threads" "$T/last-fail.out" ||
		fail "load --threads $bad: no message naming the option"
done

step "load --threads 2 stores and reads back (load compares every byte)"
uzram load "$T/data" --threads 2 --json >"$T/load.json"
grep -q '"write_cpu_seconds"' "$T/load.json" || fail "no write_cpu_seconds in load --json"
