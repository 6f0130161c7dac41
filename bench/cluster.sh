#!/bin/bash
# SPDX-License-Identifier: MIT
# cluster.sh - what multi-page clusters buy and cost, measured in one run
# against the kernel's zram (lz4) and nbdkit's memory plugin (zstd).
#
#	bash bench/cluster.sh [UZRAM] [CORPUS_DIR] [OUT_JSON]
#	(defaults: build/uzram, build/bench-corpus as `make bench` makes it,
#	bench/out/cluster.json; `make bench-cluster` runs it)
#
# Data: files.tar (first 512 MiB) followed by heap-python.core (its first
# whole MiBs), the same bytes `make bench` fills its targets with. Per
# codec (lz4, zstd) and cluster size (4K .. 64K):
#   load   `uzram load --json --randread N`: compr_data_size,
#          mem_used_total, sequential write and read MB/s (1 MiB requests,
#          in-process) and the mean time of a random 4 KiB read;
#   serve  `uzram serve` filled by nbdcopy: the server's VmRSS.
# Then, on the same data: kernel zram lz4 (dd oflag=direct, mm_stat; needs
# root and the zram module, skipped otherwise; zram0 is always reset after)
# and nbdkit memory allocator=zstd filled by nbdcopy (its VmRSS).
# Prints a table and writes JSON (default bench/out/cluster.json).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
uzram=${1:-$root/build/uzram}
corpus=${2:-$root/build/bench-corpus}
out=${3:-$root/bench/out/cluster.json}
clusters=${UZ_CLUSTERS:-4096 8192 16384 32768 65536}
algos=${UZ_ALGOS:-lz4 zstd}
randreads=${UZ_RANDREADS:-20000}

tmp=$(mktemp -d /tmp/uzram-cluster.XXXXXX)
server_pid=
zram_set=
cleanup() {
	[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	[[ -n $zram_set ]] && echo 1 > /sys/block/zram0/reset 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

log() { echo "cluster.sh: $*" >&2; }
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"

[[ -x $uzram ]] || { log "no $uzram (make first)"; exit 1; }
for f in files.tar heap-python.core; do
	[[ -r $corpus/$f ]] || { log "no $corpus/$f"; exit 1; }
done
core_mib=$(( $(stat -c %s "$corpus/heap-python.core") >> 20 ))
data=$tmp/corpus.bin
{ head -c $((512 << 20)) "$corpus/files.tar"
  head -c $((core_mib << 20)) "$corpus/heap-python.core"; } > "$data"
size=$(stat -c %s "$data")
log "data: $size bytes (512 MiB of files.tar + $core_mib MiB of heap-python.core)"

# fill_nbd NAME: start a server with the rest of the arguments, nbdcopy the
# data onto it, set rss to its VmRSS in bytes as nbdcopy returns and
# rss_idle to the same 2 s later, once the server has let its connections
# (and their threads) go ("" on failure).
fill_nbd() {
	local sock=$tmp/$1.sock
	shift
	rss="" rss_idle=""
	"$@" > "$tmp/server.log" 2>&1 &
	server_pid=$!
	if ! wait_socket "$sock" "$server_pid"; then
		log "server did not start: $*"
		cat "$tmp/server.log" >&2
	elif ! nbdcopy "$data" "nbd+unix:///?socket=$sock"; then
		log "nbdcopy failed: $*"
	else
		rss=$(rss_bytes "$server_pid")
		sleep 2
		rss_idle=$(rss_bytes "$server_pid")
	fi
	stop_server
	rm -f "$sock"
}

results=$tmp/results.jsonl
: > "$results"
for a in $algos; do
	for c in $clusters; do
		log "uzram load $a cluster $c"
		"$uzram" load "$data" --json --algorithm "$a" \
			--cluster "$c" --randread "$randreads" > "$tmp/load.json"
		rss="" rss_idle=""
		if command -v nbdcopy > /dev/null; then
			log "uzram serve $a cluster $c, nbdcopy"
			fill_nbd "serve-$a-$c" "$uzram" serve --size "$size" \
				--algorithm "$a" --cluster "$c" \
				--socket "$tmp/serve-$a-$c.sock"
		fi
		python3 - "$tmp/load.json" "$a" "$c" "${rss:-null}" "${rss_idle:-null}" >> "$results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["round_trip"] == "ok", j
print(json.dumps({"target": "uzram", "algorithm": sys.argv[2],
    "cluster": int(sys.argv[3]),
    **{k: j[k] for k in ("orig_data_size", "compr_data_size",
       "mem_used_total", "table_bytes", "write_mb_s", "read_mb_s",
       "randread_4k_us")},
    "serve_rss": None if sys.argv[4] == "null" else int(sys.argv[4]),
    "serve_rss_idle": None if sys.argv[5] == "null" else int(sys.argv[5])}))
EOF
	done
done

z=/sys/block/zram0
if ((EUID == 0)) && [[ -d $z ]] && grep -qw lz4 $z/comp_algorithm &&
   { [[ $(cat $z/disksize) == 0 ]] || echo 1 > $z/reset; }; then
	log "kernel zram lz4"
	zram_set=1
	echo lz4 > $z/comp_algorithm
	echo 1G > $z/disksize
	t0=$(date +%s.%N)
	dd if="$data" of=/dev/zram0 bs=1M oflag=direct status=none
	t1=$(date +%s.%N)
	read -r -a mm < $z/mm_stat
	t2=$(date +%s.%N)
	dd if=/dev/zram0 of=/dev/null bs=1M count=$((size >> 20)) iflag=direct status=none
	t3=$(date +%s.%N)
	echo 1 > $z/reset
	zram_set=
	python3 -c '
import json, sys
mm = [int(x) for x in sys.argv[1].split()]
size, t0, t1, t2, t3 = int(sys.argv[2]), *map(float, sys.argv[3:7])
print(json.dumps({"target": "zram", "algorithm": "lz4", "cluster": 4096,
    "orig_data_size": mm[0], "compr_data_size": mm[1], "mem_used_total": mm[2],
    "write_mb_s": round(size / (t1 - t0) / 1e6, 1),
    "read_mb_s": round(size / (t3 - t2) / 1e6, 1)}))' "${mm[*]}" "$size" "$t0" "$t1" "$t2" "$t3" >> "$results"
else
	log "kernel zram skipped (needs root, /sys/block/zram0 with lz4, free)"
fi

if command -v nbdkit > /dev/null && command -v nbdcopy > /dev/null; then
	log "nbdkit memory allocator=zstd, nbdcopy"
	fill_nbd nbdkit nbdkit -f -U "$tmp/nbdkit.sock" memory size=1G allocator=zstd
	[[ -n $rss ]] && echo "{\"target\": \"nbdkit\", \"algorithm\": \"zstd\", \"cluster\": 32768, \"serve_rss\": $rss, \"serve_rss_idle\": $rss_idle}" >> "$results"
else
	log "nbdkit skipped (nbdkit or nbdcopy missing)"
fi

mkdir -p "$(dirname "$out")"
python3 - "$results" "$out" "$size" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
size = int(sys.argv[3])
zram = next((r for r in rows if r["target"] == "zram"), None)
nbdkit = next((r for r in rows if r["target"] == "nbdkit"), None)
MB = 1e6
def f(v, fmt="%.1f", scale=MB):
    return "-" if v is None else fmt % (v / scale)
print("RSS: the server's VmRSS as nbdcopy returns / 2 s later, connections closed")
print("%-7s %-5s %7s %9s %9s %8s %15s %13s %6s %6s %8s" % (
    "target", "codec", "cluster", "compr MB", "mem MB", "mem/zram",
    "RSS MB", "RSS/nbdkit", "write", "read", "4K read"))
print("%-7s %-5s %7s %9s %9s %8s %15s %13s %6s %6s %8s" % (
    "", "", "bytes", "", "", "", "at end / idle", "end / idle", "MB/s",
    "MB/s", "us"))
def vs(r, key):
    v, ref = r.get(key), nbdkit and nbdkit.get(key)
    return "%.3f" % (v / ref) if v and ref else "-"
for r in rows:
    mem = r.get("mem_used_total")
    vs_zram = "%.3f" % (mem / zram["mem_used_total"]) if zram and mem else "-"
    print("%-7s %-5s %7s %9s %9s %8s %15s %13s %6s %6s %8s" % (
        r["target"], r["algorithm"], r["cluster"],
        f(r.get("compr_data_size")), f(mem), vs_zram,
        f(r.get("serve_rss")) + " / " + f(r.get("serve_rss_idle")),
        vs(r, "serve_rss") + " / " + vs(r, "serve_rss_idle"),
        f(r.get("write_mb_s"), "%.0f", 1), f(r.get("read_mb_s"), "%.0f", 1),
        f(r.get("randread_4k_us"), "%.2f", 1)))
json.dump({"data_bytes": size, "rows": rows}, open(sys.argv[2], "w"), indent=1)
print("wrote", sys.argv[2])
EOF
