#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t10-load.sh - `uzram load` on the real test corpus with every algorithm:
# the JSON report says the round trip matched and the data shrank; the
# human table says the same; bad algorithms, levels and a memory limit too
# small fail with a message that says why.
source "$(dirname "$0")/functions.sh"
require python3

# check_json FILE JSON: the report of loading FILE is complete and good.
check_json()
{
	python3 -c '
import json, os, sys
path, report = sys.argv[1], sys.argv[2]
j = json.load(open(report))
keys = ("file algorithm level mem_limit file_size disksize orig_data_size "
        "compr_data_size mem_used_total mem_used_max ratio_compr ratio_mem "
        "same_pages huge_pages pages_stored table_bytes write_seconds "
        "read_seconds write_mb_s read_mb_s first_mismatch round_trip").split()
missing = [k for k in keys if k not in j]
assert not missing, "missing keys %s" % missing
size = os.path.getsize(path)
pages = (size + 4095) // 4096
assert j["round_trip"] == "ok" and j["first_mismatch"] is None, j["round_trip"]
assert j["file_size"] == size, (j["file_size"], size)
assert j["disksize"] == pages * 4096, j["disksize"]
assert 0 < j["compr_data_size"] < j["orig_data_size"] <= pages * 4096, \
    (j["compr_data_size"], j["orig_data_size"])
assert j["ratio_compr"] > 1.0, j["ratio_compr"]
assert 0 < j["pages_stored"] <= pages, j["pages_stored"]
assert j["mem_used_max"] >= j["mem_used_total"] > 0
assert j["write_mb_s"] > 0 and j["read_mb_s"] > 0
' "$1" "$2" || fail "bad report for $1: $(cat "$2")"
}

for algo in lz4 lz4hc zstd deflate; do
	for f in files.tar heap-python.core; do
		step "load $f with $algo"
		"$UZRAM" load "$CORPUS/$f" --algorithm "$algo" --json \
			>"$T/$algo-$f.json"
		check_json "$CORPUS/$f" "$T/$algo-$f.json"
		assert_eq "$(json_get "$T/$algo-$f.json" 'j["algorithm"]')" \
			"$algo" algorithm
	done
done

step "levels are passed through"
"$UZRAM" load "$CORPUS/files.tar" --algorithm zstd --level -5 --json \
	>"$T/zstd-5.json"
check_json "$CORPUS/files.tar" "$T/zstd-5.json"
assert_eq "$(json_get "$T/zstd-5.json" 'j["level"]')" -5 level

step "the human table reports a good round trip"
"$UZRAM" load "$CORPUS/files.tar" >"$T/table.txt"
grep -Eq '^  round trip +ok$' "$T/table.txt" ||
	fail "no 'round trip ok' line in: $(cat "$T/table.txt")"
grep -Eq '^  compr_data_size +[0-9]+ bytes +[0-9.]+ MiB$' "$T/table.txt" ||
	fail "no compr_data_size row in: $(cat "$T/table.txt")"

step "an unknown algorithm fails and lists the known ones"
assert_fails "unknown algorithm" "$UZRAM" load "$CORPUS/files.tar" --algorithm lzo
grep -q "lzo" "$T/last-fail.out" ||
	fail "message does not name 'lzo': $(cat "$T/last-fail.out")"
grep -qw "lz4" "$T/last-fail.out" ||
	fail "message does not list lz4: $(cat "$T/last-fail.out")"

step "a level out of range fails"
assert_fails "level 13" "$UZRAM" load "$CORPUS/files.tar" --algorithm deflate --level 13
grep -q "level" "$T/last-fail.out" ||
	fail "message does not mention the level: $(cat "$T/last-fail.out")"

step "a memory limit too small fails with a message"
assert_fails "mem-limit 1M" "$UZRAM" load "$CORPUS/files.tar" --mem-limit 1M
grep -q "memory limit" "$T/last-fail.out" ||
	fail "message does not mention the limit: $(cat "$T/last-fail.out")"

step "usage errors"
assert_fails "no file" "$UZRAM" load
assert_fails "missing file" "$UZRAM" load "$T/does-not-exist"
grep -q "does-not-exist" "$T/last-fail.out" ||
	fail "message does not name the file: $(cat "$T/last-fail.out")"
assert_fails "bad option" "$UZRAM" load "$CORPUS/files.tar" --bogus
