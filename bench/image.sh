#!/bin/bash
# SPDX-License-Identifier: MIT
# image.sh - what saving and opening an image costs, beside filling the
# device and copying the image file, measured in one run.
#
#	bash bench/image.sh [UZRAM] [FILE] [OUT_JSON]
#	(defaults: build/uzram, build/bench-corpus/files.tar as `make bench`
#	makes it, bench/out/image.json; `make bench-image` runs it)
#
# Per configuration (lz4 with 4 KiB clusters, zstd with 32 KiB clusters):
#   fill   `uzram load FILE --json`: the time to store FILE in a fresh
#          device (in-process, the file mapped beforehand);
#   save   uzram_save() of that device to an image in $TMPDIR, fsync and
#          rename included (`uzram load --save`, same run);
#   open   uzram_open() of the image just written (so from the page cache:
#          the caches are not dropped, other users share the machine);
#   cp     cp of the image file and a sync of the copy: the disk's
#          sequential speed for that file, the limit a save can reach;
#   sizes  image bytes against compr_data_size, and mem_used_total of the
#          opened device against the device's before the save.
# Then the wait of writes during a live save: `uzram serve` holding FILE,
# fio randwrite (4 KiB, 4 jobs, nbd engine) for UZ_FIO_SECS seconds, once
# alone and once with `uzram ctl save` started after one second; the
# completion latency percentiles of both runs.
# Prints a table and writes JSON.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
uzram=${1:-$root/build/uzram}
file=${2:-$root/build/bench-corpus/files.tar}
out=${3:-$root/bench/out/image.json}
fio_secs=${UZ_FIO_SECS:-5}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/uzram-image.XXXXXX")
server_pid=
cleanup() {
	[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	[[ -n ${UZ_KEEP:-} ]] || rm -rf "$tmp"
}
trap cleanup EXIT
source "$root/bench/servers.sh"

log() { echo "image.sh: $*" >&2; }
now() { date +%s.%N; }

[[ -f $file ]] || { log "no $file (make bench-image builds it)"; exit 1; }
mkdir -p "$(dirname "$out")"

rows=()
for conf in "lz4 4096" "zstd 32768"; do
	read -r algo cluster <<<"$conf"
	log "$algo, $cluster-byte clusters: fill, save, open"
	"$uzram" load "$file" --algorithm "$algo" --cluster "$cluster" \
		--save "$tmp/dev.img" --json >"$tmp/load.json"
	t0=$(now)
	cp "$tmp/dev.img" "$tmp/copy.img"
	sync "$tmp/copy.img"
	t1=$(now)
	rm -f "$tmp/copy.img"
	rows+=("$(python3 - "$tmp/load.json" "$t0" "$t1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
cp = float(sys.argv[3]) - float(sys.argv[2])
size = j["image_size"]
r = {
    "algorithm": j["algorithm"], "cluster_size": j["cluster_size"],
    "file_size": j["file_size"], "image_size": size,
    "compr_data_size": j["compr_data_size"],
    "mem_used_before_save": j["mem_used_total"],
    "mem_used_opened": j["mem_used_opened"],
    "fill_seconds": j["write_seconds"], "save_seconds": j["save_seconds"],
    "open_seconds": j["open_seconds"], "cp_seconds": cp,
}
r["fill_mb_s"] = j["file_size"] / r["fill_seconds"] / 1e6
r["save_mb_s"] = size / r["save_seconds"] / 1e6
r["open_mb_s"] = size / r["open_seconds"] / 1e6
r["cp_mb_s"] = size / cp / 1e6
print(json.dumps(r))
PY
)")
	rm -f "$tmp/dev.img"
done

# fio_run NAME: randwrite against the server; its JSON in $tmp/NAME.json
fio_run() {
	fio --name=randwrite --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/s.sock" \
		--thread --rw=randwrite --bs=4k --iodepth=8 --numjobs=4 \
		--time_based --runtime="$fio_secs" --group_reporting \
		--output-format=json --output="$tmp/$1.json" >/dev/null
}

log "writes during a live save: fio randwrite for ${fio_secs} s, alone, then with a save"
"$uzram" serve --size "$(stat -c %s "$file")" --socket "$tmp/s.sock" \
	>"$tmp/serve.out" 2>"$tmp/serve.err" &
server_pid=$!
wait_socket "$tmp/s.sock" "$server_pid"
nbdcopy "$file" "nbd+unix:///?socket=$tmp/s.sock"
fio_run alone
fio_run during &
fio_pid=$!
sleep 1
t0=$(now)
"$uzram" ctl --socket "$tmp/s.sock" save "$tmp/live.img" >"$tmp/ctl.out"
t1=$(now)
wait "$fio_pid"
stop_server

python3 - "$out" "$tmp/alone.json" "$tmp/during.json" "$t0" "$t1" \
	"$(stat -c %s "$tmp/live.img")" "$fio_secs" "${rows[@]}" <<'PY'
import json, sys
out, alone, during, t0, t1, live_size, secs = sys.argv[1:8]
rows = [json.loads(r) for r in sys.argv[8:]]

def lat(path):
    text = open(path).read()   # fio's nbd engine prints lines before it
    w = json.loads(text[text.index("{"):])["jobs"][0]["write"]
    p = w["clat_ns"]["percentile"]
    return {"iops": round(w["iops"]), "p50_us": p["50.000000"] / 1e3,
            "p99_us": p["99.000000"] / 1e3, "p99.9_us": p["99.900000"] / 1e3,
            "max_us": w["clat_ns"]["max"] / 1e3}

live = {"fio_seconds": int(secs), "alone": lat(alone), "during_save": lat(during),
        "save_seconds": float(t1) - float(t0), "image_size": int(live_size)}
json.dump({"configs": rows, "live_save": live}, open(out, "w"), indent=2)

MB = 1e6
print("%-5s %7s %9s %9s %9s %9s %10s %8s %10s" % (
    "algo", "cluster", "fill s", "save s", "open s", "cp s",
    "image/compr", "open/fill", "mem open/before"))
for r in rows:
    print("%-5s %7d %9.3f %9.3f %9.3f %9.3f %11.4f %9.3f %15.4f" % (
        r["algorithm"], r["cluster_size"], r["fill_seconds"],
        r["save_seconds"], r["open_seconds"], r["cp_seconds"],
        r["image_size"] / r["compr_data_size"],
        r["open_seconds"] / r["fill_seconds"],
        r["mem_used_opened"] / r["mem_used_before_save"]))
    print("      MB/s: fill %.0f (of the file), save %.0f, open %.0f, cp %.0f "
          "(of the image); save/cp %.2f" % (
        r["fill_mb_s"], r["save_mb_s"], r["open_mb_s"], r["cp_mb_s"],
        r["save_mb_s"] / r["cp_mb_s"]))
print("live save of %d bytes in %.3f s under fio randwrite (4 jobs, qd 8):"
      % (live["image_size"], live["save_seconds"]))
for k in ("alone", "during_save"):
    l = live[k]
    print("  %-12s %7d IOPS  clat p50 %7.1f us  p99 %8.1f us  p99.9 %8.1f us  max %9.1f us"
          % (k, l["iops"], l["p50_us"], l["p99_us"], l["p99.9_us"], l["max_us"]))
PY
log "wrote $out"
