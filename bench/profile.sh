#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# profile.sh RAWDIR - a perf profile of the in-process 4K random read (qd1,
# one job): fio fills the device with the corpus through the uzram engine,
# then, once the fill is done (its stats line appears), perf samples the
# fio process for a few seconds of random reads. Writes
# RAWDIR/perf-randread.txt (flat profile by library and symbol, self time). Called by run.sh with
# its environment (UZ_*).
set -euo pipefail
raw=$1
cd "$(dirname "$0")/.."
job=$raw/profile.fio
stats=$raw/profile.stats.jsonl
rm -f "$stats"
cat bench/jobs/target-uzram.fio bench/jobs/fill.fio bench/jobs/workloads.fio > "$job"
export UZ_ALGO=lz4 UZ_STATS=$stats UZ_RUNTIME=8 UZ_RAMP=0 UZ_QD_ENGINE=external:$UZ_ENGINE_SO
fio --section=fill-tar --section=fill-core --section=randread-qd1 \
	--output-format=json --output="$raw/profile.json" "$job" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 600); do
	grep -qs '"fill-core"' "$stats" && break
	kill -0 $pid 2>/dev/null || exit 1
	sleep 0.1
done
sleep 1
perf record -F 2000 -g -p $pid -o "$raw/perf.data" -- sleep 5 >/dev/null 2>&1
wait $pid
trap - EXIT
perf report -i "$raw/perf.data" --stdio --no-children --sort dso,sym \
	--fields overhead,dso,sym --percent-limit 0.5 -g none 2>/dev/null |
	grep -v '^#' | grep -v '^$' | sort -rn | head -25 > "$raw/perf-randread.txt"
