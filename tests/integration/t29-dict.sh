#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t29-dict.sh - dictionaries from the command line: `uzram serve --dict` and
# `--recomp-algorithm ALGO:LEVEL:dict=FILE` serve the same bytes to nbdcopy
# after a recompression, `uzram load --train-dict` round-trips and reports
# what it measured, and a dictionary the codec cannot take (deflate, too
# large, missing, a corrupt zstd dictionary) is refused with a message
# naming what is wrong.
source "$(dirname "$0")/functions.sh"
require nbdcopy python3 head
real_server || skip_all "dictionaries are a uzram serve feature"

MiB=$((1024 * 1024))
corpus_data "$T/data" $((8 * MiB))
# a raw-content dictionary: 32 KiB from the middle of the data
dd if="$T/data" of="$T/dict" bs=32768 skip=128 count=1 status=none

step "serve lz4 with a dictionary, zstd with one for recompression"
start_server a --size 16M --dict "$T/dict" \
	--recomp-algorithm "zstd:3:dict=$T/dict"
nbdcopy --flush "$T/data" "${URI[a]}"
assert_eq "$(stat_field a dict_bytes)" 32768 "dict_bytes"
(($(stat_field a dict_pages) > 0)) || fail "no page encoded with the dictionary"
server_ctl a recompress >"$T/ctl.out" || fail "ctl recompress: $(cat "$T/ctl.out")"

step "ctl train-dict: kept or not, the data stays the same"
server_ctl a train-dict size=16K >"$T/train.out" ||
	fail "ctl train-dict: $(cat "$T/train.out")"
grep -Eq '^ok: (kept a dictionary of [0-9]+ bytes|not kept: )' "$T/train.out" ||
	fail "train-dict reply: $(cat "$T/train.out")"
if grep -q '^ok: kept' "$T/train.out"; then
	assert_eq "$(stat_field a dict_bytes)" "$(sed -n 's/^ok: kept a dictionary of \([0-9]*\) bytes.*/\1/p' "$T/train.out")" \
		"dict_bytes after train-dict"
	assert_eq "$(stat_field a dict_pages_previous)" 0 "pages left on the old dictionary"
fi
assert_fails "train-dict priority=7" "$UZRAM" ctl --socket "${SOCK[a]}" train-dict priority=7
nbdcopy "${URI[a]}" "$T/back"
assert_same_data "$T/data" "$T/back" $((8 * MiB))
assert_zero "$T/back" $((8 * MiB)) $((8 * MiB))
stop_server a

step "load --train-dict: a round trip, and a report that agrees with itself"
"$UZRAM" load "$T/data" --algorithm zstd --train-dict=16K --json >"$T/load.json"
python3 - "$T/load.json" <<'PY' || fail "load --train-dict: $(cat "$T/load.json")"
import json, sys
r = json.load(open(sys.argv[1]))
t = r["train_dict"]
assert r["round_trip"] == "ok", r["round_trip"]
assert t["train_bytes"] > 0 and t["test_bytes"] > 0, t
if t["kept"]:
    assert t["dict_size"] <= 16384 and t["bytes_with"] * 100 <= t["bytes_without"] * 98, t
    assert t["pages_reencoded"] > 0, t
else:
    assert t["pages_reencoded"] == 0, t
PY

step "dictionaries refused, with the reason"
assert_fails "deflate with a dictionary" "$UZRAM" load "$T/data" --algorithm deflate --dict "$T/dict"
grep -q "deflate takes no dictionary" "$T/last-fail.out" ||
	fail "deflate: $(cat "$T/last-fail.out")"
head -c $((2 * MiB)) "$T/data" >"$T/big"
assert_fails "a 2 MiB dictionary" "$UZRAM" load "$T/data" --dict "$T/big"
grep -q "dictionary of .* bytes is outside" "$T/last-fail.out" ||
	fail "too large: $(cat "$T/last-fail.out")"
assert_fails "a missing dictionary" "$UZRAM" load "$T/data" --dict "$T/nosuch"
grep -q "cannot open dictionary" "$T/last-fail.out" ||
	fail "missing: $(cat "$T/last-fail.out")"
{ printf '\x37\xa4\x30\xec'; head -c 4096 /dev/urandom; } >"$T/corrupt"
assert_fails "a corrupt zstd dictionary" "$UZRAM" load "$T/data" --algorithm zstd --dict "$T/corrupt"
grep -q "dictionary is not one the codec accepts" "$T/last-fail.out" ||
	fail "corrupt: $(cat "$T/last-fail.out")"
assert_fails "serve with lz4hc and a dictionary" \
	uzram serve --size 1M --socket "$T/b.sock" --algorithm lz4hc --dict "$T/dict" --run true
grep -q "lz4hc takes no dictionary" "$T/last-fail.out" ||
	fail "lz4hc: $(cat "$T/last-fail.out")"
[[ ! -e $T/b.sock ]] || fail "a refused server left its socket"

