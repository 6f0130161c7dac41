#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t15-cluster.sh - devices whose compression unit is larger than a page:
# `uzram load --cluster` round-trips the corpus in 8, 16 and 64 KiB clusters
# and stores it in fewer compressed bytes than in pages; bad cluster sizes
# fail with a message that says why; `uzram serve --cluster 16K` takes
# nbdcopy traffic (several connections, unaligned file end, zero runs over
# old data) and gives back the same bytes.
source "$(dirname "$0")/functions.sh"
require python3

MiB=$((1024 * 1024))

# load_json ALGO CLUSTER BYTES: load files.tar with --cluster CLUSTER, check
# the report (a cluster of BYTES) and print its compr_data_size.
load_json()
{
	local out=$T/load-$1-$2.json
	"$UZRAM" load "$TAR" --algorithm "$1" --cluster "$2" --json \
		--randread 100 >"$out" || fail "uzram load --cluster $2 failed"
	python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
assert j["round_trip"] == "ok", j["round_trip"]
assert j["cluster_size"] == want, j["cluster_size"]
assert j["randread_4k"] == 100 and j["randread_4k_us"] > 0
assert j["orig_data_size"] == j["disksize"], (j["orig_data_size"], j["disksize"])
print(j["compr_data_size"])' "$out" "$3" || fail "bad report: $(cat "$out")"
}

for algo in lz4 zstd; do
	step "load files.tar with $algo in clusters of 4, 8, 16 and 64 KiB"
	base=$(load_json "$algo" 4K 4096)
	for c in 8192 16K:16384 64KiB:65536; do
		n=$(load_json "$algo" "${c%:*}" "${c#*:}")
		((n < base)) ||
			fail "$algo cluster $c: $n compressed bytes, not below $base"
	done
done

step "bad cluster sizes are refused with the reason"
for c in 0 2048 12K 128K; do
	assert_fails "--cluster $c" "$UZRAM" load "$TAR" --cluster "$c"
	grep -q "want a power of two from 4K to 64K" "$T/last-fail.out" ||
		fail "--cluster $c: no reason given: $(cat "$T/last-fail.out")"
done

real_server || { step "the stand-in server has no clusters: done"; exit 0; }
require nbdcopy
SIZE=$((64 * MiB))
head -c $((48 * MiB)) "$CORPUS/heap-python.core" >"$T/core48"

step "serve with 16 KiB clusters: nbdcopy in over 4 connections, back over 1"
start_server a --size 64M --cluster 16K
if command -v nbdinfo >/dev/null; then
	pref=$(nbdinfo "${URI[a]}" | sed -n 's/^[[:space:]]*block_size_preferred: //p')
	[[ $pref == 16384 ]] ||
		fail "preferred block size is '$pref', not the 16384-byte cluster"
fi
nbdcopy --connections=4 --requests=16 "$TAR" "${URI[a]}"
nbdcopy --connections=1 "${URI[a]}" "$T/out"
assert_same_data "$TAR" "$T/out"
assert_zero "$T/out" "$(stat -c %s "$TAR")" $((SIZE - $(stat -c %s "$TAR")))

step "the core, then zero runs over old data, 4 connections both ways"
{
	head -c $((8 * MiB)) "$T/core48"
	head -c $((3 * MiB + 4096 + 100)) /dev/zero
	tail -c $((5 * MiB)) "$T/core48"
} >"$T/mixed"
nbdcopy --connections=4 "$T/core48" "${URI[a]}"
nbdcopy --connections=4 "$T/mixed" "${URI[a]}"
nbdcopy --connections=4 "${URI[a]}" "$T/out2"
assert_same_data "$T/mixed" "$T/out2"
mixsz=$(stat -c %s "$T/mixed")
assert_same_range "$T/core48" "$mixsz" "$T/out2" "$mixsz" $((48 * MiB - mixsz))
stop_server a
