#!/usr/bin/env bash
# dedup.sh [BUILD] [CORPUS_DIR] - `make bench-dedup`: what dedup (cfg.dedup,
# `uzram serve --dedup`) saves and costs, with dedup off and on in one run
# on the same data, and the issue's targets marked met or missed:
#
#  1. memory for files.tar twice, the second copy at another offset
#     (bench-dedup-fill FILE 2 1): with dedup <= 0.52x of without;
#  2. memory for files.tar alone (FILE 1 1): <= 1.01x (the index must pay
#     for itself);
#  3. fill throughput of files.tar (unique data) with 1 and 2 writer
#     threads: >= 0.95x. DEDUP_REPS rounds (default 7), each a run without
#     and a run with dedup back to back on a fresh device, in the order
#     off-on, then on-off in the next round, so that a change of load or
#     a trend hits both alike. The verdict is the median of the rounds'
#     ratios, shown with their spread, in wall-clock time, per CPU second
#     of the writers, and "busy" (the writers' time less the time they
#     waited for a CPU that other jobs held; bench/dedup-fill.c), with
#     the writers' sleeps, which a lock of ours would show;
#  4. nbdcopy of a VM-like image (an ext4 file system made by mke2fs -d
#     from the members of files.tar, DEDUP_IMAGE_MIB of them) to offset 0
#     and to offset IMAGE of one export of `uzram serve` (the second
#     through nbdkit's offset filter), both read back and compared; the
#     memory the server holds and the copy times.
#
# Memory is everything the device holds: mem_used_total + table_bytes +
# dedup_index_bytes (what mem_limit caps). Writes bench/out/dedup.json and
# bench/sections/dedup.md, which bench/report.py copies into BENCHMARKS.md,
# and puts the section into BENCHMARKS.md now.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
corpus=${2:-build/bench-corpus}
reps=${DEDUP_REPS:-7}
image_mib=${DEDUP_IMAGE_MIB:-256}
fill=$build/bench-dedup-fill
uzram=$build/uzram
tar=$corpus/files.tar
out=bench/out
mkdir -p "$out" bench/sections
tmp=$(mktemp -d /tmp/uzram-dedup.XXXXXX)
pids=()
cleanup()
{
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
for t in "$fill" "$uzram"; do
	[[ -x $t ]] || { echo "dedup.sh: no $t" >&2; exit 1; }
done
[[ -s $tar ]] || { echo "dedup.sh: no $tar" >&2; exit 1; }
for c in nbdcopy nbdkit mke2fs; do
	command -v "$c" >/dev/null || { echo "dedup.sh: no $c" >&2; exit 1; }
done
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$tmp/runs.jsonl"

# run NAME ARGS...: one bench-dedup-fill, its JSON tagged with NAME.
run()
{
	local name=$1
	shift
	echo "dedup.sh: $name" >&2
	"$fill" "$@" | python3 -c 'import json,sys; r=json.load(sys.stdin); r["name"]=sys.argv[1]; print(json.dumps(r))' \
		"$name" >> "$tmp/runs.jsonl"
}

run twice-off "$tar" 2 1 0
run twice-on "$tar" 2 1 1
for ((i = 0; i < reps; i++)); do
	for w in 1 2; do
		if ((i % 2)); then order="1 0"; else order="0 1"; fi
		for d in $order; do
			run "alone-$w-$( ((d)) && echo on || echo off)" "$tar" 1 "$w" "$d"
		done
	done
done

# A VM-like image: ext4 holding the complete members of files.tar.
echo "dedup.sh: making a ${image_mib} MiB-of-files ext4 image" >&2
mkdir "$tmp/root"
head -c $((image_mib << 20)) "$tar" | tar -x -C "$tmp/root" 2>/dev/null || true
img_bytes=$(( (image_mib * 5 / 4 + 64) << 20 ))
mke2fs -q -t ext4 -d "$tmp/root" "$tmp/vm.img" $((img_bytes >> 10))k >/dev/null
rm -rf "$tmp/root"

# nbdcopy_pair MODE: the image at 0 and at img_bytes, times and memory.
nbdcopy_pair()
{
	local mode=$1 sock=$tmp/$1.sock args=() t0 t1 t2
	[[ $mode == on ]] && args=(--dedup)
	"$uzram" serve --socket "$sock" --size $((2 * img_bytes)) "${args[@]}" \
		> "$tmp/$mode.out" 2>&1 &
	pids+=($!)
	for ((i = 0; i < 100; i++)); do [[ -S $sock ]] && break; sleep 0.1; done
	local uri="nbd+unix:///?socket=$sock"
	t0=$(date +%s.%N)
	nbdcopy "$tmp/vm.img" "$uri"
	t1=$(date +%s.%N)
	nbdcopy "$tmp/vm.img" -- [ nbdkit --exit-with-parent --filter=offset nbd \
		uri="$uri" offset="$img_bytes" range="$img_bytes" ]
	t2=$(date +%s.%N)
	nbdcopy "$uri" "$tmp/back"
	cmp -n "$img_bytes" "$tmp/vm.img" "$tmp/back"
	cmp -n "$img_bytes" -i "0:$img_bytes" "$tmp/vm.img" "$tmp/back"
	rm -f "$tmp/back"
	"$uzram" stat --socket "$sock" --json > "$tmp/stat.json"
	python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(json.dumps({"name": "nbdcopy-"+sys.argv[2], "first_s": float(sys.argv[3]), "second_s": float(sys.argv[4]), "mem": s["mem_used_total"]+s["table_bytes"]+s.get("dedup_index_bytes",0), "mem_used_total": s["mem_used_total"], "pages_deduped": s.get("pages_deduped",0), "dedup_index_bytes": s.get("dedup_index_bytes",0), "image_bytes": int(sys.argv[5]), "pages_stored": s["pages_stored"]}))' \
		"$tmp/stat.json" "$mode" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" \
		"$img_bytes" >> "$tmp/runs.jsonl"
	kill "${pids[-1]}"
	wait "${pids[-1]}" || true
}
echo "dedup.sh: nbdcopy without and with --dedup" >&2
nbdcopy_pair off
nbdcopy_pair on

python3 - "$tmp/runs.jsonl" "$out/dedup.json" bench/sections/dedup.md "$reps" \
	"$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" "$image_mib" <<'PY'
import json, statistics, sys, datetime
runs = [json.loads(l) for l in open(sys.argv[1])]
json.dump(runs, open(sys.argv[2], "w"), indent=1)
reps, load0, load1, cpus, image_mib = sys.argv[4:9]
by = {}
for r in runs:
    by.setdefault(r["name"], []).append(r)
one = lambda n: by[n][0]
MB = lambda b: "%.1f MB" % (b / 1e6)
L = []
w = L.append
def target(name, value, ok, want):
    w("| %s | %s | %s | %s |" % (name, value, want, "met" if ok else "**missed**"))
w("## Dedup (`make bench-dedup`)")
w("")
w("`bench/dedup.sh`, run %s UTC on %s CPUs, load average (1, 5, 15 min) %s at the start and %s at the "
  "end. Memory is everything the device holds (mem_used_total + table_bytes + dedup_index_bytes, the "
  "figure mem_limit caps); files.tar is the benchmarks' corpus, written in 1 MiB requests by "
  "`bench-dedup-fill` (bench/dedup-fill.c, the public API in process); throughput from %s rounds "
  "(below the tables). Memory figures do not depend on the load; throughput does."
  % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), cpus, load0, load1, reps))
w("")
w("| target | measured | wanted | |")
w("|---|---|---|---|")
t0, t1 = one("twice-off"), one("twice-on")
r = t1["mem"] / t0["mem"]
target("memory, files.tar twice (second copy at another offset)",
       "%.3fx (%s -> %s)" % (r, MB(t0["mem"]), MB(t1["mem"])), r <= 0.52, "<= 0.52x")
a0, a1 = one("alone-1-off"), one("alone-1-on")
r = a1["mem"] / a0["mem"]
target("memory, files.tar alone", "%.4fx (%s -> %s; index %s)" % (r, MB(a0["mem"]), MB(a1["mem"]),
       MB(a1["dedup_index_bytes"])), r <= 1.01, "<= 1.01x")
def ratios(n, f):
    """The rounds' ratios on/off of f(run), with n writers, sorted."""
    return sorted(f(b) / f(a) for a, b in zip(by["alone-%d-off" % n], by["alone-%d-on" % n]))
wall = lambda r: r["MBps"]
per_cpu = lambda r: r["bytes"] / r["cpu_s"] / 1e6
busy = lambda r: r["bytes"] / r["busy_s"] / 1e6
measures = (("wall clock", wall, "MB/s"), ("per CPU second", per_cpu, "MB per CPU s"),
            ("busy (less the wait for a CPU)", busy, "MB/s"))
for n in (1, 2):
    for label, f, unit in measures:
        rs = ratios(n, f)
        m = statistics.median(rs)
        f0 = statistics.median(f(r) for r in by["alone-%d-off" % n])
        f1 = statistics.median(f(r) for r in by["alone-%d-on" % n])
        target("fill throughput, files.tar, %d writer%s, %s" % (n, "s" if n > 1 else "", label),
               "%.3fx (%s rounds: %.2f..%.2f; medians %.0f -> %.0f %s)"
               % (m, len(rs), rs[0], rs[-1], f0, f1, unit), m >= 0.95, ">= 0.95x")
n0, n1 = one("nbdcopy-off"), one("nbdcopy-on")
w("| nbdcopy of a VM-like image to two offsets, memory | %.3fx (%s -> %s) | (a figure, no target) | |"
  % (n1["mem"] / n0["mem"], MB(n0["mem"]), MB(n1["mem"])))
w("")
w("The VM-like image is an ext4 file system of %s made by `mke2fs -d` from the members in the first "
  "%s MiB of files.tar; `nbdcopy` writes it to offset 0 of a `uzram serve` export twice its size, "
  "then to the second half through nbdkit's offset filter; both copies are read back and compared."
  % (MB(n0["image_bytes"]), image_mib))
w("")
w("| nbdcopy | first copy | second copy | memory | pages deduplicated | index |")
w("|---|---|---|---|---|---|")
for n in (n0, n1):
    w("| %s | %.2f s | %.2f s | %s | %d | %s |" % ("--dedup" if n is n1 else "without", n["first_s"],
      n["second_s"], MB(n["mem"]), n["pages_deduped"], MB(n["dedup_index_bytes"])))
w("")
w("Fill throughput is the median over the rounds of each round's ratio (dedup on / off, two runs back to "
  "back, their order alternating), with the lowest and highest ratio; wall clock is what the issue asks "
  "for; per CPU second and busy take out what the load does to it: a writer that waits for a CPU other "
  "jobs hold loses wall time but no CPU time, and busy counts each writer's time less that wait (its run "
  "plus sleep time, from /proc/thread-self/schedstat). Sleeps are what a lock of ours would cost: the "
  "writers' time asleep, and their voluntary context switches, medians of "
  "the runs.")
w("")
w("| fill | writers | MB/s without | with | busy MB/s without | with | writers asleep without | with "
  "| sleeps without | with | memory without | with | pages deduplicated |")
w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in (1, 2):
    off, on = by["alone-%d-off" % n], by["alone-%d-on" % n]
    md = lambda runs, f: statistics.median(f(r) for r in runs)
    w("| files.tar | %d | %.0f | %.0f | %.0f | %.0f | %.3f s | %.3f s | %d | %d | %s | %s | %d |"
      % (n, md(off, wall), md(on, wall), md(off, busy), md(on, busy), md(off, lambda r: r["sleep_s"]),
         md(on, lambda r: r["sleep_s"]), md(off, lambda r: r["vcsw"]), md(on, lambda r: r["vcsw"]),
         MB(off[0]["mem"]), MB(on[0]["mem"]), on[0]["pages_deduped"]))
w("| files.tar twice | 1 | %.0f | %.0f | %.0f | %.0f | %.3f s | %.3f s | %d | %d | %s | %s | %d |"
  % (t0["MBps"], t1["MBps"], busy(t0), busy(t1), t0["sleep_s"], t1["sleep_s"], t0["vcsw"], t1["vcsw"],
     MB(t0["mem"]), MB(t1["mem"]), t1["pages_deduped"]))
w("")
open(sys.argv[3], "w").write("\n".join(L) + "\n")
PY

# The same section in BENCHMARKS.md now, in place of an older one.
python3 bench/section.py BENCHMARKS.md bench/sections/dedup.md
cat bench/sections/dedup.md
