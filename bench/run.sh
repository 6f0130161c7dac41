#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh full|quick - the driver behind `make bench` and `make bench-quick`.
#
# Runs the same fio workloads (bench/jobs/workloads.fio) against every target
# present, one after the other, on the same corpus:
#
#   target        how it is reached                      algorithm
#   uzram-lz4     build/uzram-fio.so, in-process         lz4
#   uzram-zstd    build/uzram-fio.so, in-process         zstd
#   uzram-lz4-c16k   the same, 16 KiB clusters            lz4
#   uzram-lz4-pool   the same, 1 worker thread, fill only lz4
#   uzram-zstd-c32k  the same, 32 KiB clusters            zstd
#   zram-lz4      /dev/zram0, psync direct=1 (root)      lz4
#   serve-lz4     `uzram serve`, fio nbd engine, Unix    lz4
#   serve-zstd    `uzram serve`, fill and memory only    zstd
#   serve-zstd-c32k  the same with --cluster 32K          zstd
#   nbdkit-sparse nbdkit memory allocator=sparse          none
#   nbdkit-zstd   nbdkit memory allocator=zstd            zstd
#   nbdcopy       bench/nbdcopy.sh: nbdcopy in/over/out of serve-lz4 and
#                 nbdkit sparse/zstd, each on its own fresh 1 GiB device
#
# Each target: a fresh 2 GiB device, the fill (files.tar at 0, the core image
# right after it, sequential 1 MiB writes at qd1), the memory it holds, then
# the workloads. A target that cannot run is skipped with the reason, which
# the report prints. The codec limit (build/codec-limit) runs on the same
# pages first. Raw outputs go to bench/out/raw/; bench/report.py turns them
# into bench/results.json, BENCHMARKS.md and bench/chart.png.
#
# Environment: BUILD (build dir, default build), BENCH_CORPUS (a corpus
# folder of one's own, holding files.tar and heap-python.core, used as it
# is instead of the one scripts/corpus.sh builds: make bench CORPUS=DIR),
# BENCH_TARGETS (space-separated subset of the names above), BENCH_NICE (a
# nice value for the whole run and everything it starts, e.g. -5 as root on
# a machine busy with other work; the report records it).
set -euo pipefail
mode=${1:-full}
cd "$(dirname "$0")/.."
root=$PWD
BUILD=${BUILD:-build}
build=$root/$BUILD
out=$root/bench/out
raw=$out/raw

case $mode in
full)
	corpus=$root/build/bench-corpus mib=512 cap_mib=0
	runtime=5 ramp=1 mix_runtime=10 write_runtime=3 wsize=256m codec_s=1.5
	targets="uzram-lz4 uzram-lz4-pool uzram-zstd uzram-lz4-c16k uzram-zstd-c32k zram-lz4 serve-lz4 serve-zstd serve-zstd-c32k nbdkit-sparse nbdkit-zstd nbdcopy"
	nbdcopy_reps=3
	;;
quick)
	corpus=$root/build/bench-corpus-quick mib=64 cap_mib=64
	runtime=500ms ramp=0 mix_runtime=1 write_runtime=500ms wsize=32m codec_s=0.25
	targets="uzram-lz4 uzram-lz4-pool zram-lz4 serve-lz4 serve-zstd nbdkit-sparse nbdkit-zstd nbdcopy"
	nbdcopy_reps=1
	;;
*)
	echo "usage: run.sh full|quick" >&2
	exit 2
	;;
esac
targets=${BENCH_TARGETS:-$targets}
corpus=${BENCH_CORPUS:-$corpus}

if [[ -n ${BENCH_NICE:-} ]]; then
	renice -n "$BENCH_NICE" -p $$ >/dev/null
fi

t_start=$(date +%s)
log() { printf '[bench %4ss] %s\n' "$(($(date +%s) - t_start))" "$*"; }
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"

rm -rf "$raw"
mkdir -p "$raw"
tmp=$(mktemp -d /tmp/uzram-bench.XXXXXX)
server_pid=
zram_configured=

cleanup() {
	if [[ -n $server_pid ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
		server_pid=
	fi
	if [[ -n $zram_configured ]]; then
		echo 1 > /sys/block/zram0/reset 2>/dev/null || true
		zram_configured=
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- corpus: real data, files.tar (MIB MiB) and a Python core image ---
log "corpus: $corpus (files.tar $mib MiB + heap-python.core)"
if [[ -z ${BENCH_CORPUS:-} ]]; then
	bash scripts/corpus.sh "$corpus" "$mib" >/dev/null
fi
tar_file=$corpus/files.tar
core_file=$corpus/heap-python.core
mib_of() { # whole MiB of a file, capped
	local m=$(($(stat -c %s "$1") / 1048576))
	((cap_mib && m > cap_mib)) && m=$cap_mib
	echo $m
}
tar_mib=$(mib_of "$tar_file")
core_mib=$(mib_of "$core_file")
# Keep the corpus in the page cache so no fill waits for the disk.
cat "$tar_file" "$core_file" >/dev/null

export UZ_DEVSIZE=2g
export UZ_TAR=$tar_file UZ_CORE=$core_file
export UZ_TAR_LEN=$((tar_mib << 20)) UZ_CORE_LEN=$((core_mib << 20))
export UZ_READ_SIZE=$(((tar_mib + core_mib) << 20))
export UZ_WOFF=1g UZ_WSIZE=$wsize
export UZ_RUNTIME=$runtime UZ_RAMP=$ramp UZ_MIX_RUNTIME=$mix_runtime
export UZ_WRITE_RUNTIME=$write_runtime
export UZ_ENGINE_SO=$build/uzram-fio.so

python3 - "$raw/env.json" "$mode" "$tar_mib" "$core_mib" "$targets" "$BUILD" <<'PY'
import json, os, platform, subprocess, sys, time
def sh(cmd):
	try:
		return subprocess.run(cmd, shell=True, capture_output=True, text=True,
				      timeout=20).stdout.strip()
	except Exception:
		return ""
cpu = ""
for line in open("/proc/cpuinfo"):
	if line.startswith("model name"):
		cpu = line.split(":", 1)[1].strip()
		break
env = {
	"mode": sys.argv[2], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
	"kernel": platform.release(), "machine": platform.machine(), "cpu": cpu,
	"cpus": os.cpu_count(),
	"mem_total_mib": int(sh("awk '/MemTotal/ {print $2}' /proc/meminfo") or 0) // 1024,
	"fio": sh("fio --version"), "nbdkit": sh("nbdkit --version"),
	"libnbd": sh("nbdcopy --version | sed -n 2p"),
	"lz4": sh("pkg-config --modversion liblz4"), "zstd": sh("pkg-config --modversion libzstd"),
	"uzram": sh(sys.argv[6] + "/uzram --version"), "git": sh("git rev-parse --short HEAD"),
	"gcc": sh("cc -dumpfullversion"), "nice": os.nice(0),
	"loadavg": open("/proc/loadavg").read().split()[:3],
	"corpus_tar_mib": int(sys.argv[3]), "corpus_core_mib": int(sys.argv[4]),
	"targets": sys.argv[5].split(),
}
json.dump(env, open(sys.argv[1], "w"), indent=1)
PY

# --- the physical limit: raw LZ4 on the same pages ---
log "codec limit: LZ4 on $((tar_mib + core_mib)) MiB of 4K pages, 1 and 2 threads"
"$build/codec-limit" --seconds "$codec_s" --max-mib "$((tar_mib > core_mib ? tar_mib : core_mib))" \
	"$tar_file" "$core_file" > "$raw/codec.json" 2> "$raw/codec.log"
sed 's/^codec-limit: /  /' "$raw/codec.log"

# --- fio's own ceiling: the null engine through the same 4K random read ---
cat "$root/bench/jobs/target-null.fio" "$root/bench/jobs/workloads.fio" > "$raw/fio-null.fio"
UZ_QD_ENGINE=null fio --section=randread-qd1 --output-format=json \
	--output="$raw/fio-null.json" "$raw/fio-null.fio" > "$raw/fio-null.log" 2>&1 ||
	log "fio null engine failed, see bench/out/raw/fio-null.log"
log "fio ceiling: $(python3 "$root/bench/report.py" summary fio-null "$raw" | sed -n 's/^read: //p')"

skip() { # skip TARGET REASON
	echo "$2" > "$raw/$1.skip"
	log "$1: skipped: $2"
}

summary() { python3 "$root/bench/report.py" summary "$@" | sed 's/^/  /'; }

# fio_run TARGET HEADER [fill]: run the workloads (and the in-process fill)
fio_run() {
	local t=$1 header=$2 fill=${3:-} job=$raw/$1.fio
	cat "$root/bench/jobs/$header" > "$job"
	[[ -n $fill ]] && cat "$root/bench/jobs/fill.fio" >> "$job"
	[[ ${UZ_FILL_ONLY:-} ]] || cat "$root/bench/jobs/workloads.fio" >> "$job"
	# fio's own runtime bounds every timed job; the timeout is for a
	# target that stops answering.
	timeout 900 fio --output-format=json --output="$raw/$t.json" "$job" \
		> "$raw/$t.fio.log" 2>&1 && return 0
	log "$t: fio failed, see bench/out/raw/$t.fio.log"
	tail -5 "$raw/$t.fio.log" >&2
	# Keep what it measured: the report marks the jobs that failed.
	grep -q '"jobs"' "$raw/$t.json" 2>/dev/null
}

# fill_ext TARGET DEST: the fill of a kernel or NBD target with bench-fill
fill_ext() {
	local t=$1 dest=$2
	timeout 600 "$build/bench-fill" "$tar_file" "$dest" 0 "$UZ_TAR_LEN" \
		> "$raw/$t.fill-tar.json" &&
	timeout 600 "$build/bench-fill" "$core_file" "$dest" "$UZ_TAR_LEN" \
		"$UZ_CORE_LEN" > "$raw/$t.fill-core.json"
}

run_inproc() { # run_inproc TARGET ALGORITHM
	local t=$1
	if [[ ! -x $UZ_ENGINE_SO ]]; then
		skip "$t" "no $BUILD/uzram-fio.so (the engine did not build)"
		return
	fi
	export UZ_ALGO=$2 UZ_STATS=$raw/$t.stats.jsonl UZ_QD_ENGINE=external:$UZ_ENGINE_SO
	local what="fill + workloads"
	[[ ${UZ_FILL_ONLY:-} ]] && what="fill only"
	log "$t: libuzram in-process ($2) via fio external engine: $what"
	fio_run "$t" target-uzram.fio fill || { skip "$t" "fio failed"; return; }
	summary "$t"
}

run_zram() {
	local t=zram-lz4 z=/sys/block/zram0
	if ((EUID != 0)); then
		skip $t "not root"
		return
	fi
	if [[ ! -d $z ]]; then
		skip $t "no /sys/block/zram0 (zram module not loaded)"
		return
	fi
	if ! grep -qw lz4 $z/comp_algorithm; then
		skip $t "zram has no lz4 ($(cat $z/comp_algorithm))"
		return
	fi
	if [[ $(cat $z/disksize) != 0 ]] && ! echo 1 > $z/reset; then
		skip $t "zram0 is in use and cannot be reset"
		return
	fi
	zram_configured=1
	echo lz4 > $z/comp_algorithm
	echo 2G > $z/disksize
	log "$t: kernel zram (lz4, 2G) via fio psync direct=1: fill"
	if ! fill_ext $t /dev/zram0; then
		skip $t "fill of /dev/zram0 failed"
		echo 1 > $z/reset; zram_configured=
		return
	fi
	read -r -a mm < $z/mm_stat
	printf '{"orig_data_size": %s, "compr_data_size": %s, "mem_used_total": %s, "mem_limit": %s, "mem_used_max": %s, "same_pages": %s, "pages_compacted": %s, "huge_pages": %s}\n' \
		"${mm[@]:0:8}" > "$raw/$t.mem.json"
	export UZ_QD_ENGINE=io_uring
	log "$t: workloads"
	fio_run $t target-zram.fio || skip $t "fio failed"
	echo 1 > $z/reset
	zram_configured=
	summary $t
}

# run_nbd TARGET KIND ALGO: KIND is serve or nbdkit
run_nbd() {
	local t=$1 kind=$2 algo=$3 sock=$tmp/$1.sock
	case $kind in
	serve)
		[[ -x $build/uzram ]] || { skip "$t" "no $BUILD/uzram"; return; }
		# shellcheck disable=SC2086 # UZ_SERVE_ARGS: extra words
		"$build/uzram" serve --size 2G --algorithm "$algo" --socket "$sock" \
			${UZ_SERVE_ARGS:-} > "$raw/$t.server.log" 2>&1 &
		;;
	nbdkit)
		command -v nbdkit >/dev/null || { skip "$t" "nbdkit is not installed"; return; }
		nbdkit -f -U "$sock" memory size=2G allocator="$algo" \
			> "$raw/$t.server.log" 2>&1 &
		;;
	esac
	server_pid=$!
	if ! wait_socket "$sock" "$server_pid"; then
		skip "$t" "the server did not start (bench/out/raw/$t.server.log)"
		stop_server
		return
	fi
	export UZ_URI="nbd+unix:///?socket=$sock" UZ_QD_ENGINE=nbd
	log "$t: $kind ($algo) via fio nbd engine over a Unix socket: fill"
	if ! fill_ext "$t" "$UZ_URI"; then
		skip "$t" "fill over NBD failed"
		stop_server
		return
	fi
	{
		printf '{"rss_bytes": %s' "$(rss_bytes "$server_pid")"
		if [[ $kind == serve ]]; then
			printf ', "stat": '
			timeout 10 "$build/uzram" stat --socket "$sock" --json || printf 'null'
		fi
		printf '}\n'
	} > "$raw/$t.mem.json"
	if [[ ${UZ_FILL_ONLY:-} ]]; then
		log "$t: fill and memory only"
		: > "$raw/$t.json"
	else
		log "$t: workloads"
		fio_run "$t" target-nbd.fio || skip "$t" "fio failed"
		# memory once more after the rewrites, for the record
		printf '{"rss_bytes": %s}\n' "$(rss_bytes "$server_pid")" > "$raw/$t.mem-after.json"
	fi
	stop_server
	summary "$t"
}

# nbdcopy in, over and out of files.tar; the script starts its own servers.
run_nbdcopy() {
	log "nbdcopy: files.tar in/overwrite/out, uzram serve vs nbdkit memory, $nbdcopy_reps repetition(s)"
	if NBDCOPY_FILE=$tar_file NBDCOPY_REPS=$nbdcopy_reps BUILD=$BUILD \
		timeout 900 bash "$root/bench/nbdcopy.sh" "$raw/nbdcopy.json" > "$raw/nbdcopy.log" 2>&1; then
		sed 's/^/  /' "$raw/nbdcopy.log"
	else
		log "nbdcopy: failed, see bench/out/raw/nbdcopy.log"
		tail -5 "$raw/nbdcopy.log" >&2
	fi
}

for t in $targets; do
	case $t in
	uzram-lz4) run_inproc "$t" lz4 ;;
	uzram-zstd) run_inproc "$t" zstd ;;
	uzram-lz4-c16k) UZRAM_FIO_CLUSTER=16384 run_inproc "$t" lz4 ;;
	uzram-lz4-pool) UZRAM_FIO_THREADS=1 UZ_FILL_ONLY=1 run_inproc "$t" lz4 ;;
	uzram-zstd-c32k) UZRAM_FIO_CLUSTER=32768 run_inproc "$t" zstd ;;
	zram-lz4) run_zram ;;
	serve-lz4) run_nbd "$t" serve lz4 ;;
	serve-zstd) UZ_FILL_ONLY=1 run_nbd "$t" serve zstd ;;
	serve-zstd-c32k) UZ_FILL_ONLY=1 UZ_SERVE_ARGS="--cluster 32K" run_nbd "$t" serve zstd ;;
	nbdkit-sparse) run_nbd "$t" nbdkit sparse ;;
	nbdkit-zstd) run_nbd "$t" nbdkit zstd ;;
	nbdcopy) run_nbdcopy ;;
	*) echo "run.sh: unknown target $t" >&2; exit 2 ;;
	esac
done

# A profile of the in-process random read, for the note on any missed target.
if [[ $mode == full && " $targets " == *" uzram-lz4 "* ]] && command -v perf >/dev/null; then
	log "perf: profile of uzram-lz4 4K random read qd1"
	bash "$root/bench/profile.sh" "$raw" >/dev/null 2>"$raw/perf.log" ||
		log "perf: failed, see bench/out/raw/perf.log"
fi

cut -d' ' -f1-3 /proc/loadavg > "$raw/loadavg-end"
log "report: BENCHMARKS.md, bench/results.json, bench/chart.png"
python3 "$root/bench/report.py" build "$raw" "$root"
log "done in $(($(date +%s) - t_start)) s"
