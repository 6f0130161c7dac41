#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dict.sh [UZRAM] [CORPUS_DIR] - `make bench-dict`: what a trained dictionary
# buys (memory) and costs (training time, 4K random reads) on the corpus,
# per codec and cluster size, without and with `uzram load --train-dict`,
# in one run on the same data.
#
# For each data set (files.tar, heap-python.core, the two together), each
# codec (lz4, zstd at levels 1 and 3) and each cluster size (4, 16, 32 KiB):
# one `uzram load --json --randread N` without a dictionary and one with
# --train-dict (a 64 KiB dictionary trained from the stored data, kept only
# if it saves UZRAM_DICT_MIN_GAIN percent on a second sample, then every
# cluster re-encoded with it). Writes bench/out/dict.json and
# bench/sections/dict.md, a section that bench/report.py copies into
# BENCHMARKS.md, and puts the same section into BENCHMARKS.md now.
#
# Environment: DICT_RANDREAD (random 4 KiB reads per load, default 50000),
# DICT_MIB (MiB of each file used, default 256).
set -euo pipefail
cd "$(dirname "$0")/.."
uzram=${1:-build/uzram}
corpus=${2:-build/bench-corpus}
reads=${DICT_RANDREAD:-50000}
mib=${DICT_MIB:-256}
out=bench/out
mkdir -p "$out" bench/sections
tmp=$(mktemp -d /tmp/uzram-dict.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for f in files.tar heap-python.core; do
	[[ -s $corpus/$f ]] || { echo "dict.sh: no $corpus/$f" >&2; exit 1; }
done
head -c $((mib << 20)) "$corpus/files.tar" > "$tmp/tar"
head -c $((mib << 20)) "$corpus/heap-python.core" > "$tmp/core"
cat "$tmp/tar" "$tmp/core" > "$tmp/both"

: > "$tmp/runs.jsonl"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for data in tar core both; do
	for codec in lz4 zstd:1 zstd:3; do
		for cluster in 4K 16K 32K; do
			for dict in none trained; do
				args=(--algorithm "${codec%%:*}" --cluster "$cluster"
				      --randread "$reads" --json)
				[[ $codec == *:* ]] && args+=(--level "${codec##*:}")
				[[ $dict == trained ]] && args+=(--train-dict)
				echo "dict.sh: $data $codec $cluster $dict" >&2
				"$uzram" load "$tmp/$data" "${args[@]}" > "$tmp/one.json"
				python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r.update(data=sys.argv[2], codec=sys.argv[3], dict=sys.argv[4]); print(json.dumps(r))' \
					"$tmp/one.json" "$data" "$codec" "$dict" >> "$tmp/runs.jsonl"
			done
		done
	done
done

python3 - "$tmp/runs.jsonl" "$out/dict.json" bench/sections/dict.md "$mib" "$reads" \
	"$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" <<'PY'
import json, sys, datetime
runs = [json.loads(l) for l in open(sys.argv[1])]
json.dump(runs, open(sys.argv[2], "w"), indent=1)
mib, reads = sys.argv[4], sys.argv[5]
load_start, load_end, cpus = sys.argv[6], sys.argv[7], sys.argv[8]
key = lambda r: (r["data"], r["codec"], r["cluster_size"])
by = {}
for r in runs:
    by.setdefault(key(r), {})[r["dict"]] = r
L = []
w = L.append
w("## Dictionaries (`make bench-dict`)")
w("")
w("`bench/dict.sh`, run %s UTC: the first %s MiB of files.tar and of heap-python.core, and the two "
  "together, each loaded into a fresh device with `uzram load`, once without a dictionary and once "
  "with `--train-dict` (a 64 KiB dictionary trained by libzstd's ZDICT from a sample of the stored "
  "clusters, measured against none on a second sample, kept only if it saves 2%%, then every cluster "
  "re-encoded with it). Compressed is compr_data_size, the bytes of the objects; memory is "
  "mem_used_total after the training's compaction; a random read is one 4 KiB "
  "`uzram_read` at a random page, the mean of %s; training is the whole step (sampling, ZDICT, the "
  "measure, re-encoding every cluster, compaction). Load average (1, 5, 15 min) on %s CPUs: "
  "%s at the start, %s at the end; compressed sizes do not depend on it, times do."
  % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), mib, reads, cpus, load_start, load_end))
w("")
w("| data | codec | cluster | compressed without | with | change | kept | memory with | 4K read without | with | training |")
w("|---|---|---|---|---|---|---|---|---|---|---|")
for k in sorted(by):
    d = by[k]
    if "none" not in d or "trained" not in d:
        continue
    a, b = d["none"], d["trained"]
    t = b["train_dict"]
    w("| %s | %s | %d KiB | %.1f MB | %.1f MB | %+.1f%% | %s | %.1f MB | %.2f us | %.2f us | %.2f s |"
      % (k[0], k[1], k[2] // 1024, a["compr_data_size"] / 1e6, b["compr_data_size"] / 1e6,
         100.0 * (b["compr_data_size"] - a["compr_data_size"]) / a["compr_data_size"],
         "yes" if t["kept"] else "no", b["mem_used_total"] / 1e6,
         a["randread_4k_us"], b["randread_4k_us"], t["seconds"]))
w("")
open(sys.argv[3], "w").write("\n".join(L) + "\n")
PY

# The same section in BENCHMARKS.md now, in place of an older one.
python3 bench/section.py BENCHMARKS.md bench/sections/dict.md
cat bench/sections/dict.md
