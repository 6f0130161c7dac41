#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t25-stat.sh - `uzram stat --socket PATH [--json]` on a live server: the
# JSON parses and holds the uzram_stats fields, the connection count and
# the requests by type; the counters rise with real traffic (nbdcopy,
# qemu-io) and describe what was stored, a second copy of the same file is
# counted as unchanged pages, except its zero pages (holes: nbdcopy sends
# them as write-zeroes); stat fails cleanly without a server.
source "$(dirname "$0")/functions.sh"
require nbdcopy qemu-io python3
real_server || skip_all "uzram stat needs the real server"

MiB=$((1024 * 1024))
TARSZ=$(stat -c %s "$TAR")

# stat_json NAME FILE: take a JSON snapshot of server NAME into FILE.
stat_json()
{
	uzram stat --socket "${SOCK[$1]}" --json >"$2" ||
		fail "uzram stat --json on server $1 failed"
	python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$2" ||
		fail "uzram stat --json printed no valid JSON: $(head -c 300 "$2")"
}

# stat_cmp BEFORE AFTER EXPR...: each EXPR (python, with b and a the two
# snapshots) must hold.
stat_cmp()
{
	local before=$1 after=$2
	shift 2
	python3 - "$before" "$after" "$@" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
a = json.load(open(sys.argv[2]))
for expr in sys.argv[3:]:
    try:
        ok = eval(expr)
    except (KeyError, TypeError) as e:
        sys.exit("stat: %s: missing or wrong field %s" % (expr, e))
    if not ok:
        sys.exit("stat: %s does not hold\nbefore: %s\nafter:  %s" %
                 (expr, json.dumps(b), json.dumps(a)))
PY
}

step "start a 64 MiB export with a 32 MiB limit"
start_server a --size 64M --mem-limit 32M --algorithm zstd

step "stat --json: the fields are there"
stat_json a "$T/s0.json"
fields=(disksize orig_data_size compr_data_size mem_used_total mem_limit
	mem_used_max same_pages pages_compacted huge_pages pages_stored
	failed_reads failed_writes invalid_io table_bytes pages_unchanged)
checks=()
for f in "${fields[@]}"; do
	checks+=("isinstance(a['$f'], int)")
done
for r in read write flush trim write_zeroes block_status; do
	checks+=("isinstance(a['requests']['$r'], int)")
done
stat_cmp "$T/s0.json" "$T/s0.json" "${checks[@]}" \
	"a['disksize'] == $((64 * MiB))" "a['mem_limit'] == $((32 * MiB))" \
	"a['orig_data_size'] == 0" "a['pages_stored'] == 0" \
	"a['connections_current'] == 0"

step "stat --all prints every figure of --json, one line each, in bytes"
uzram stat --socket "${SOCK[a]}" --all >"$T/s0.txt"
grep -qw disksize "$T/s0.txt" || fail "no disksize in: $(cat "$T/s0.txt")"
grep -qw "$((64 * MiB))" "$T/s0.txt" || fail "no size in: $(cat "$T/s0.txt")"
for f in $(python3 -c 'import json, sys
print(" ".join(k for k, v in json.load(open(sys.argv[1])).items() if isinstance(v, int)))' "$T/s0.json"); do
	grep -qE "^$f +[0-9]+$" "$T/s0.txt" || fail "stat --all has no $f line"
done
[[ -n $(head -n 1 "$T/s0.txt" | tr -d ' ') ]] || fail "stat --all starts with a blank line"

step "traffic: nbdcopy in, out and in again, qemu-io trim, write-zeroes, flush"
nbdcopy --flush "$TAR" "${URI[a]}"
nbdcopy "${URI[a]}" "$T/out"
assert_same_data "$TAR" "$T/out" "$TARSZ"
stat_json a "$T/c1.json"
# Written again, the file's pages are found unchanged, and nothing new is
# stored; except its all-zero pages, which nbdcopy may send as
# write-zeroes: those are holes, and zeroing a hole is not a write of
# stored bytes (a tar ends in at least 1 KiB of zeros, padded to 10 KiB,
# so most corpora have whole zero pages there), and same-filled pages,
# which are stored without the compare. The zero pages are counted from
# the data itself: a corpus of docs may have no other same-filled page.
zpages=$(python3 - "$TAR" <<'PY'
import sys
z = bytes(4096)
with open(sys.argv[1], "rb") as f:
    print(sum(1 for p in iter(lambda: f.read(4096), b"") if p == z))
PY
)
nbdcopy --flush "$TAR" "${URI[a]}"
stat_json a "$T/c2.json"
stat_cmp "$T/c1.json" "$T/c2.json" \
	"a['pages_unchanged'] - b['pages_unchanged'] >= $TARSZ // 4096 - $zpages - a['same_pages']" \
	"a['pages_unchanged'] - b['pages_unchanged'] <= -(-$TARSZ // 4096)" \
	"a['compr_data_size'] == b['compr_data_size']" \
	"a['pages_stored'] == b['pages_stored']"
qio "${URI[a]}" "discard $((32 * MiB)) $MiB" "write -z $((40 * MiB)) $MiB" \
	"write -P 0 $((48 * MiB)) $MiB" "flush"
stat_json a "$T/s1.json"
stat_cmp "$T/s0.json" "$T/s1.json" \
	"a['requests']['write'] > b['requests']['write']" \
	"a['requests']['read'] > b['requests']['read']" \
	"a['requests']['trim'] > b['requests']['trim']" \
	"a['requests']['write_zeroes'] > b['requests']['write_zeroes']" \
	"a['requests']['flush'] > b['requests']['flush']" \
	"a['requests']['block_status'] > b['requests']['block_status']" \
	"a['orig_data_size'] >= $TARSZ - 4096" \
	"a['pages_stored'] >= $TARSZ // 4096" \
	"0 < a['compr_data_size'] < a['orig_data_size']" \
	"a['same_pages'] >= 256" \
	"a['mem_used_total'] <= a['mem_limit']" \
	"a['mem_used_max'] >= a['mem_used_total']" \
	"a['failed_writes'] == 0 and a['failed_reads'] == 0"
stat_cmp "$T/s0.json" "$T/s1.json" \
	"'bytes_written' not in a or a['bytes_written'] - b['bytes_written'] >= $TARSZ"

step "stat for people: sizes in units, the ratios, a few lines, as zramctl"
uzram stat --socket "${SOCK[a]}" >"$T/h.txt"
uzram stat --socket "${SOCK[a]}" --bytes >"$T/b.txt"
stat_json a "$T/h.json"
[[ -n $(head -n 1 "$T/h.txt" | tr -d ' ') ]] || fail "stat starts with a blank line"
(($(wc -l <"$T/h.txt") <= 16)) || fail "stat prints $(wc -l <"$T/h.txt") lines"
grep -qE '^disk size +64M$' "$T/h.txt" || fail "no 'disk size 64M': $(cat "$T/h.txt")"
grep -qE '^data +[0-9.]+[KMG]$' "$T/h.txt" || fail "no data in units: $(cat "$T/h.txt")"
grep -qE '^compressed +[0-9.]+[KMG] +ratio [0-9]+\.[0-9][0-9]$' "$T/h.txt" ||
	fail "no compressed size and ratio: $(cat "$T/h.txt")"
grep -qE '^memory +[0-9.]+[KMG] +ratio [0-9]+\.[0-9][0-9] .*limit 32M$' "$T/h.txt" ||
	fail "no memory, ratio and limit: $(cat "$T/h.txt")"
# the ratio is the JSON's figures divided (they may move between the calls)
python3 - "$T/h.txt" "$T/h.json" <<'PY' || fail "stat's ratio disagrees with --json"
import json, re, sys
r = float(re.search(r'^compressed +\S+ +ratio ([0-9.]+)$', open(sys.argv[1]).read(), re.M).group(1))
j = json.load(open(sys.argv[2]))
assert abs(r - j['orig_data_size'] / j['compr_data_size']) < 0.02, (r, j)
PY
grep -qE "^disk size +$((64 * MiB))$" "$T/b.txt" || fail "--bytes: $(cat "$T/b.txt")"
grep -qE '^data +[0-9]+$' "$T/b.txt" || fail "--bytes: data not in bytes: $(cat "$T/b.txt")"
assert_fails "stat --all --json" uzram stat --socket "${SOCK[a]}" --all --json

step "zero pages are holes: a second write of them counts no unchanged page"
# 60 pages of the tar that are neither zero nor one repeated word, then 4
# zero pages: written twice, the 60 are found unchanged, the 4 stay holes
python3 - "$TAR" "$T/z.img" <<'PY'
import sys
out = []
with open(sys.argv[1], "rb") as f:
    for p in iter(lambda: f.read(4096), b""):
        if len(p) == 4096 and p != p[:8] * 512:
            out.append(p)
        if len(out) == 60:
            break
if len(out) < 60:
    sys.exit("the tar has fewer than 60 pages of mixed bytes")
open(sys.argv[2], "wb").write(b"".join(out) + bytes(4 * 4096))
PY
start_server z --size 256K
nbdcopy --flush "$T/z.img" "${URI[z]}"
stat_json z "$T/z1.json"
nbdcopy --flush "$T/z.img" "${URI[z]}"
stat_json z "$T/z2.json"
stat_cmp "$T/z1.json" "$T/z2.json" \
	"b['pages_stored'] == 60 and a['pages_stored'] == 60" \
	"a['same_pages'] == 0" \
	"a['pages_unchanged'] - b['pages_unchanged'] == 60"
stop_server z

step "an open connection is counted, an unknown command too"
python3 - "$ITEST_DIR" "${SOCK[a]}" "${SANITIZER_RUN[@]}" "$UZRAM" <<'PY'
import json, subprocess, sys
sys.path.insert(0, sys.argv[1])
sys.dont_write_bytecode = True
import nbd_bad_client as nbd
stat = sys.argv[3:] + ["stat", "--socket", sys.argv[2], "--json"]
c = nbd.Conn(sys.argv[2]).open("")
st = json.loads(subprocess.check_output(stat))
if st["connections_current"] < 1:
    sys.exit("connections_current is %d with a client connected" %
             st["connections_current"])
unknown = st["requests"].get("unknown", 0)
err, _ = c.cmd(0x55, 0, 0)
c.disconnect()
st = json.loads(subprocess.check_output(stat))
if st["requests"].get("unknown", 0) <= unknown:
    sys.exit("requests.unknown did not rise after an unknown command")
PY

step "stat without a server fails with a message"
rc=0
uzram stat --socket "$T/nosuch.sock" >"$T/ns.out" 2>"$T/ns.err" || rc=$?
((rc != 0)) || fail "uzram stat on a missing socket exited 0"
[[ -s $T/ns.err ]] || fail "uzram stat on a missing socket printed no message"

stop_server a
