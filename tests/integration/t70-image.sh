#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t70-image.sh - images through the server and the command line:
# `uzram serve --image` creates the device when the file does not exist and
# saves it on SIGTERM; restarted on the image it serves every byte again
# (nbdcopy and cmp), with its algorithm and cluster size; `uzram ctl save`
# saves a live device (to --image or to a path, relative to the caller);
# options that conflict with the image are refused; a corrupt image is
# refused with a message and left as it was; and `uzram load --save` killed
# with SIGKILL at 24 random moments of its run, and a server killed at 12
# random moments of a `uzram ctl save`, always leave an image that opens
# with the old contents or the new ones, exactly.
source "$(dirname "$0")/functions.sh"
require nbdcopy nbdinfo qemu-io cmp timeout python3
real_server || skip_all "images are a uzram serve feature"

MiB=$((1024 * 1024))
IMG=$T/dev.img
tsize=$(stat -c %s "$TAR")          # $TAR: functions.sh, at most 24 MiB
# halves of the core image for the second kill test, at most 32 MiB each
half=$(($(stat -c %s "$CORPUS/heap-python.core") / MiB / 2))
((half <= 32)) || half=32

# expect FILE SIZE [OFFSET SRC LEN | OFFSET pattern:BYTE LEN]...: a file
# of SIZE zero bytes with those ranges filled in.
expect()
{
	python3 - "$@" <<'PY'
import sys
path, size, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
buf = bytearray(size)
for i in range(0, len(rest), 3):
    off, src, n = int(rest[i]), rest[i + 1], int(rest[i + 2])
    if src.startswith("pattern:"):
        buf[off:off + n] = bytes([int(src[8:], 0)]) * n
    else:
        buf[off:off + n] = open(src, "rb").read(n)
open(path, "wb").write(buf)
PY
}

# contents IMAGE OUT: serve IMAGE captive and copy the device out to OUT.
contents()
{
	timeout 120 "${SANITIZER_RUN[@]}" "$UZRAM" serve --image "$1" \
		--socket "$T/c.sock" --run "nbdcopy \"\$uri\" '$2'" \
		>"$T/c.out" 2>"$T/c.err" ||
		fail "serving $1 failed: $(cat "$T/c.err")"
}

step "serve --image creates the device when the file does not exist"
start_server a --size 64M --algorithm zstd --cluster 16K --image "$IMG"
[[ ! -e $IMG ]] || fail "the image exists before any save"
nbdcopy --flush "$TAR" "${URI[a]}"
qio "${URI[a]}" "write -P 0xab $((40 * MiB)) $MiB" "write -z $((48 * MiB)) $MiB"
expect "$T/want" $((64 * MiB)) 0 "$TAR" "$tsize" $((40 * MiB)) pattern:0xab $MiB
stored=$(stat_field a pages_stored)
compr=$(stat_field a compr_data_size)
stop_server a
grep -q "saved $IMG" "${ERR[a]}" || fail "no save reported: $(cat "${ERR[a]}")"
[[ -s $IMG ]] || fail "no image after SIGTERM"
[[ -z $(compgen -G "$IMG.tmp.*" || true) ]] || fail "temporary file left"

step "restarted on the image, every byte comes back"
start_server b --image "$IMG"
assert_eq "$(nbdinfo --size "${URI[b]}")" $((64 * MiB)) "size"
nbdcopy "${URI[b]}" "$T/back"
cmp "$T/want" "$T/back" || fail "the reopened device differs"
assert_eq "$(stat_field b algorithm)" zstd "algorithm"
assert_eq "$(stat_field b pages_stored)" "$stored" "pages_stored"
assert_eq "$(stat_field b compr_data_size)" "$compr" "compr_data_size"
size=$(stat -c %s "$IMG")
((size < compr + compr / 50 + 4096)) ||
	fail "image of $size bytes for $compr compressed bytes"

step "ctl save saves the live device, to --image or to a path"
qio "${URI[b]}" "write -P 0x5c $((20 * MiB)) $MiB" "discard 0 $MiB"
cp "$T/want" "$T/want2"
python3 - "$T/want2" <<'PY'
import sys
f = open(sys.argv[1], "r+b")
f.write(bytes(1 << 20))
f.seek(20 << 20)
f.write(b"\x5c" * (1 << 20))
PY
server_ctl b save >"$T/ctl.out" || fail "ctl save failed"
grep -q "^ok: saved $IMG in " "$T/ctl.out" || fail "reply: $(cat "$T/ctl.out")"
(cd "$T" && uzram ctl --socket "${SOCK[b]}" save rel.img >/dev/null) ||
	fail "ctl save to a relative path failed"
[[ -s $T/rel.img ]] || fail "ctl save rel.img did not write $T/rel.img"
assert_fails "ctl save into a missing directory" \
	uzram ctl --socket "${SOCK[b]}" save "$T/no/such/x.img"
grep -q "no/such" "$T/last-fail.out" || fail "message: $(cat "$T/last-fail.out")"
assert_alive b
contents "$T/rel.img" "$T/back2"
cmp "$T/want2" "$T/back2" || fail "the image saved by ctl differs"

step "--read-only on the image: served, refused writes, the image not rewritten at the end"
cp -p "$T/rel.img" "$T/ro-before.img"
touch -d @1000000000 "$T/rel.img"
start_server ro --image "$T/rel.img" --read-only
nbdcopy "${URI[ro]}" "$T/ro-back"
cmp "$T/want2" "$T/ro-back" || fail "the read-only device differs"
qio_fails "${URI[ro]}" "write -P 0x11 0 4096"
stop_server ro
assert_eq "$(stat -c %Y "$T/rel.img")" 1000000000 "the image's mtime after a read-only run"
cmp -s "$T/rel.img" "$T/ro-before.img" || fail "the image changed under --read-only"
grep -q "saved" "${ERR[ro]}" && fail "a read-only server saved: $(cat "${ERR[ro]}")"

step "options that conflict with the image are refused"
# a copy: server b holds $IMG itself (t72 checks that refusal)
cp "$IMG" "$T/conflict.img"
for opt in "--algorithm lz4" "--cluster 4K" "--size 32M"; do
	rc=0
	# shellcheck disable=SC2086
	uzram serve --image "$T/conflict.img" --socket "$T/x.sock" $opt >/dev/null \
		2>"$T/x.err" || rc=$?
	((rc != 0)) || fail "serve --image with $opt started"
	grep -q "conflicts" "$T/x.err" || fail "$opt: $(cat "$T/x.err")"
done

rc=0
uzram serve --image "$T/no/such/dir.img" --socket "$T/x.sock" >/dev/null \
	2>"$T/x.err" || rc=$?
((rc != 0)) || fail "serve --image in a missing directory started"
grep -q "cannot write" "$T/x.err" || fail "missing directory: $(cat "$T/x.err")"

step "a corrupt image is refused with a message and left as it was"
cp "$IMG" "$T/bad.img"
printf '\x01' | dd of="$T/bad.img" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
sum=$(sha "$T/bad.img")
rc=0
uzram serve --image "$T/bad.img" --socket "$T/x.sock" >/dev/null 2>"$T/x.err" || rc=$?
((rc != 0)) || fail "a corrupt image was served"
grep -q "corrupt" "$T/x.err" || fail "message: $(cat "$T/x.err")"
assert_eq "$(sha "$T/bad.img")" "$sum" "the corrupt image after the refusal"
stop_server b

step "SIGKILL at random moments of a save leaves an image that opens"
head -c $((16 * MiB)) "$CORPUS/heap-python.core" >"$T/new"
# A whole number of pages: a device holds whole pages, so a shorter tail
# would read back with zeros after it (a 6 MiB corpus' tar ends mid-page).
n=$(($(stat -c %s "$TAR") / 4096 * 4096))
head -c $((n < 8 * MiB ? n : 8 * MiB)) "$TAR" >"$T/old"
KIMG=$T/k.img
uzram load "$T/old" --save "$KIMG" >/dev/null
t0=$(date +%s%N)
uzram load "$T/new" --save "$T/timing.img" >/dev/null
span=$((($(date +%s%N) - t0) / 1000))   # microseconds of one whole run
prev=old olds=0 news=0
for ((i = 0; i < 24; i++)); do
	delay=$((RANDOM * 32768 + RANDOM))
	delay=$((delay % (span + span / 5 + 1)))
	"${SANITIZER_RUN[@]}" "$UZRAM" load "$T/new" --save "$KIMG" >/dev/null 2>&1 &
	pid=$!
	sleep "$(printf '%d.%06d' $((delay / 1000000)) $((delay % 1000000)))"
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$KIMG".tmp.*
	contents "$KIMG" "$T/k.out"
	if cmp -s "$T/k.out" "$T/old"; then
		[[ $prev == old ]] || fail "kill $i: the image went back to the old contents"
		olds=$((olds + 1))
	elif cmp -s "$T/k.out" "$T/new"; then
		prev=new
		news=$((news + 1))
	else
		fail "kill $i after ${delay} us: the image holds neither the old nor the new contents"
	fi
	# start the next round from the old contents half of the time
	if ((news > 0 && i % 2)); then
		uzram load "$T/old" --save "$KIMG" >/dev/null
		prev=old
	fi
done
echo "  24 kills within ${span} us runs: $olds left the old image, $news the new one"


step "SIGKILL of the server during ctl save leaves an image that opens"
dd if="$CORPUS/heap-python.core" bs=1M skip="$half" count="$half" of="$T/old" status=none
dd if="$CORPUS/heap-python.core" bs=1M count="$half" of="$T/new" status=none
uzram load "$T/old" --save "$T/old.img" >/dev/null
SIMG=$T/s.img
olds=0 news=0
for ((i = 0; i < 12; i++)); do
	cp "$T/old.img" "$SIMG"
	start_server k --image "$SIMG"
	nbdcopy "$T/new" "${URI[k]}"
	if ((i == 0)); then
		server_ctl k save "$T/probe.img" >"$T/probe.out"
		span=$(sed -n 's/.* in \([0-9.]*\) s$/\1/p' "$T/probe.out" |
			awk '{ printf "%d", $1 * 1500000 + 1000 }')
	fi
	delay=$(((RANDOM * 32768 + RANDOM) % span))
	server_ctl k save >/dev/null 2>&1 &
	cpid=$!
	sleep "$(printf '%d.%06d' $((delay / 1000000)) $((delay % 1000000)))"
	kill -KILL "${PID[k]}"
	wait "${PID[k]}" 2>/dev/null || true
	unset "PID[k]"
	wait "$cpid" 2>/dev/null || true
	rm -f "$SIMG".tmp.* "${SOCK[k]}" "${SOCK[k]}.ctl"
	contents "$SIMG" "$T/k.out"
	if cmp -s "$T/k.out" "$T/old"; then
		olds=$((olds + 1))
	elif cmp -s "$T/k.out" "$T/new"; then
		news=$((news + 1))
	else
		fail "kill $i after ${delay} us: the image holds neither the old nor the new contents"
	fi
done
echo "  12 kills within ${span} us (1.5 times a save): $olds left the old image, $news the new one"
