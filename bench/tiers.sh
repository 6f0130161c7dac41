#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tiers.sh [SIZE_MIB [LIMIT_MIB]] - the second tier's figures (make
# bench-tiers; defaults 512 and 128, the issue's sizes):
#
#   fill     nbdcopy of SIZE MiB of the corpus (files.tar, then the python
#            core) into `uzram serve` with no limit, into `uzram serve
#            --mem-limit LIMIT --backing FILE` with the policy on, and the
#            same with nbdkit's memory plugin over a Unix socket as the
#            backing store: MB/s, the
#            peak RSS (VmHWM) of the server, what went to the backing store,
#            and a byte-for-byte read back with nbdcopy
#   randread 4K random reads of written-back data (`uzram load --backing
#            --randread`, one thread, in-process), to a backing file and to
#            nbdkit, beside fio psync 4K random reads, one job, of a file as
#            large as what the backing store holds (the tier's own limit;
#            both files in the page cache), and beside the same reads of
#            the same data held in memory (the codec's own limit)
#   churn    rewrites and discards of 256 KiB runs at random places of a
#            device written back, with `ctl writeback` after each round:
#            bytes of backing store used / live compressed bytes on it,
#            before and after `ctl backing-compact`; file and nbdkit
#   shared   the data twice at two offsets, written back, with and without
#            --dedup: what the backing store holds (writeback writes a
#            shared object once)
#
# Prints a small table; writes bench/out/tiers.txt and
# bench/sections/tiers.md (which bench/report.py copies into BENCHMARKS.md),
# and puts that section into BENCHMARKS.md now.
# The machine should be otherwise idle for the figures to mean anything;
# the section says the load average it ran under.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
UZRAM=$PWD/$BUILD/uzram
CORPUS=${BENCH_CORPUS:-$PWD/build/corpus}
SIZE=$((${1:-512} << 20))
LIMIT=$((${2:-128} << 20))
out=$PWD/bench/out
mkdir -p "$out" bench/sections
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
T=$(mktemp -d /tmp/uzram-bench-tiers.XXXXXX)
source bench/servers.sh
server_pid=
trap 'stop_server; [[ -f $T/nbdkit.pid ]] && kill "$(cat "$T/nbdkit.pid")"; rm -rf "$T"' EXIT

head -c "$SIZE" "$CORPUS/files.tar" >"$T/data"
head -c $((SIZE - $(stat -c %s "$T/data"))) "$CORPUS/heap-python.core" >>"$T/data"
SIZE=$(stat -c %s "$T/data")
DEV=$(( (SIZE >> 20) + 64 ))M

now() { date +%s.%N; }
stat_json() { "$UZRAM" stat --socket "$T/s.sock" --json; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])" <"$T/stat.json"; }
hwm() { echo $(($(awk '/^VmHWM:/ {print $2}' "/proc/$1/status") * 1024)); }

# serve ARGS...: start a server on $T/s.sock
serve() {
	rm -f "$T/s.sock"
	"$UZRAM" serve --socket "$T/s.sock" --size "$DEV" "$@" >/dev/null 2>"$T/serve.err" &
	server_pid=$!
	wait_socket "$T/s.sock" "$server_pid" || { cat "$T/serve.err"; exit 1; }
}
uri="nbd+unix:///?socket=$T/s.sock"

# fill NAME ARGS...: time the nbdcopy in, read back, figures into $NAME_*
fill() {
	local name=$1 t0 t1
	shift
	serve "$@"
	t0=$(now)
	nbdcopy --flush "$T/data" "$uri"
	t1=$(now)
	stat_json >"$T/stat.json"
	printf -v "${name}_mbs" %.1f "$(echo "$SIZE / ($t1 - $t0) / 1000000" | bc -l)"
	printf -v "${name}_hwm" %d "$(hwm "$server_pid")"
	printf -v "${name}_bd" %d "$(field bd_count)"
	printf -v "${name}_errors" %d "$(field errors)"
	printf -v "${name}_memmax" %d "$(field mem_used_max)"
	nbdcopy "$uri" "$T/back"
	cmp -n "$SIZE" "$T/data" "$T/back" || { echo "$name: read back differs"; exit 1; }
	stop_server
	rm -f "$T/back"
}

nbdkit_start() {
	rm -f "$T/nbdkit.sock"
	nbdkit -U "$T/nbdkit.sock" -P "$T/nbdkit.pid" memory $((SIZE * 2))
}
nbdkit_stop() { kill "$(cat "$T/nbdkit.pid")"; rm -f "$T/nbdkit.pid"; }
nbd_backing="nbd+unix:///?socket=$T/nbdkit.sock"

fill nolimit
fill limit --mem-limit "$LIMIT" --backing "$T/backing"
nbdkit_start
fill nbd --mem-limit "$LIMIT" --backing "$nbd_backing"
nbdkit_stop

# randread NAME ARGS...: uzram load ARGS --randread N: ${NAME}_iops, and
# ${NAME}_space, what the backing store held
N=200000
randread() {
	local name=$1 us
	shift
	"$UZRAM" load "$T/data" "$@" --randread "$N" --json >"$T/load.json"
	us=$(python3 -c "import json; print(json.load(open('$T/load.json'))['randread_4k_us'])")
	printf -v "${name}_iops" %d "$(echo "1000000 / $us" | bc)"
	printf -v "${name}_space" %d "$(python3 -c "import json; print(json.load(open('$T/load.json')).get('bd_space', 0))")"
}
rm -f "$T/lb"
randread rr_file --backing "$T/lb"
rm -f "$T/lb"
randread rr_mem
nbdkit_start
randread rr_nbd --backing "$nbd_backing"
nbdkit_stop
head -c "$rr_file_space" "$T/data" >"$T/ref"
cat "$T/ref" >/dev/null
fio --name=ref --filename="$T/ref" --rw=randread --bs=4k --ioengine=psync \
	--numjobs=1 --invalidate=0 --time_based --runtime=5 --output-format=json \
	>"$T/fio.json"
fio_iops=$(python3 -c "import json; print(int(json.load(open('$T/fio.json'))['jobs'][0]['read']['iops']))")
rm -f "$T/ref"

# churn NAME BACKING: ${NAME}_before and ${NAME}_after
churn() {
	local name=$1 round i off src cmds runs
	serve --backing "$2"
	nbdcopy "$T/data" "$uri"
	"$UZRAM" ctl --socket "$T/s.sock" writeback >/dev/null
	RANDOM=12345
	runs=$((SIZE / (256 << 10)))
	for round in 1 2 3 4; do
		cmds=()
		for i in $(seq 64); do
			off=$(( (RANDOM * 32768 + RANDOM) % runs * (256 << 10) ))
			src=$(( (RANDOM * 32768 + RANDOM) % runs ))
			if ((RANDOM % 3 == 0)); then
				cmds+=(-c "discard $off 256k")
			else
				dd if="$T/data" of="$T/chunk$i" bs=256k skip="$src" \
					count=1 status=none
				cmds+=(-c "write -s $T/chunk$i $off 256k")
			fi
		done
		qemu-io -f raw "${cmds[@]}" "$uri" >/dev/null
		"$UZRAM" ctl --socket "$T/s.sock" writeback >/dev/null
	done
	stat_json >"$T/stat.json"
	printf -v "${name}_before" %.3f "$(echo "$(field bd_space) / $(field bd_bytes)" | bc -l)"
	"$UZRAM" ctl --socket "$T/s.sock" backing-compact >/dev/null
	stat_json >"$T/stat.json"
	printf -v "${name}_after" %.3f "$(echo "$(field bd_space) / $(field bd_bytes)" | bc -l)"
	stop_server
}
churn ch_file "$T/churn"
nbdkit_start
churn ch_nbd "$nbd_backing"
nbdkit_stop

# shared NAME ARGS...: the data at offset 0 and at offset OFF2 of one export
# with a backing file, then `ctl writeback` of everything (timed): what the
# backing store holds, ${NAME}_bd (bd_bytes) and ${NAME}_space (bd_space);
# both copies read back and compared
OFF2=$(( (SIZE + (1 << 20) - 1) >> 20 << 20 ))
shared() {
	local name=$1 t0 t1 DEV=$(( (OFF2 + SIZE) / (1 << 20) + 64 ))M
	shift
	serve --backing "$T/shared" "$@"
	nbdcopy "$T/data" "$uri"
	nbdcopy "$T/data" -- [ nbdkit --exit-with-parent --filter=offset nbd \
		socket="$T/s.sock" offset="$OFF2" range="$SIZE" ]
	t0=$(now)
	"$UZRAM" ctl --socket "$T/s.sock" writeback >/dev/null
	t1=$(now)
	stat_json >"$T/stat.json"
	printf -v "${name}_bd" %d "$(field bd_bytes)"
	printf -v "${name}_space" %d "$(field bd_space)"
	printf -v "${name}_s" %.2f "$(echo "$t1 - $t0" | bc -l)"
	nbdcopy "$uri" "$T/back"
	cmp -n "$SIZE" "$T/data" "$T/back" &&
		cmp -n "$SIZE" -i 0:"$OFF2" "$T/data" "$T/back" ||
		{ echo "$name: read back differs"; exit 1; }
	stop_server
	rm -f "$T/back" "$T/shared"
}
shared sh_plain
shared sh_dedup --dedup

mib() { echo $(($1 >> 20)); }
ratio() { printf %.2f "$(echo "$1 / $2" | bc -l)"; }
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
{
	echo "tiers bench: $((SIZE >> 20)) MiB of the corpus, mem limit $((LIMIT >> 20)) MiB, $(nproc) cores, load $load_start at the start, $load_end at the end"
	printf '%-44s %12s %12s %12s\n' "" "no limit" "limit+file" "limit+nbdkit"
	printf '%-44s %12s %12s %12s\n' "fill MB/s (nbdcopy)" "$nolimit_mbs" "$limit_mbs" "$nbd_mbs"
	printf '%-44s %12s %12s %12s\n' "server peak RSS MiB" "$(mib "$nolimit_hwm")" \
		"$(mib "$limit_hwm")" "$(mib "$nbd_hwm")"
	printf '%-44s %12s %12s %12s\n' "mem_used_max MiB" "$(mib "$nolimit_memmax")" \
		"$(mib "$limit_memmax")" "$(mib "$nbd_memmax")"
	printf '%-44s %12s %12s %12s\n' "pages on the backing store" "$nolimit_bd" "$limit_bd" "$nbd_bd"
	printf '%-44s %12s %12s %12s\n' "failed requests" "$nolimit_errors" "$limit_errors" \
		"$nbd_errors"
	printf '%-44s %12s %12s %12s\n' "4K random reads (memory/file/nbdkit), IOPS" \
		"$rr_mem_iops" "$rr_file_iops" "$rr_nbd_iops"
	printf '%-44s %12s\n' "fio psync 4K random reads of the file, IOPS" "$fio_iops"
	printf '%-44s %12s %12s %12s\n' "  / fio" "$(ratio "$rr_mem_iops" "$fio_iops")" \
		"$(ratio "$rr_file_iops" "$fio_iops")" "$(ratio "$rr_nbd_iops" "$fio_iops")"
	printf '%-44s %12s %12s %12s\n' "backing bytes / live bytes after churn" "" \
		"$ch_file_before" "$ch_nbd_before"
	printf '%-44s %12s %12s %12s\n' "... after ctl backing-compact" "" \
		"$ch_file_after" "$ch_nbd_after"
	printf '%-44s %12s %12s %12s\n' "data twice, written back: bd_bytes MiB" "" \
		"$(mib "$sh_plain_bd")" "$(mib "$sh_dedup_bd")"
	printf '%-44s %12s %12s %12s\n' "  (without / with --dedup) bd_space MiB" "" \
		"$(mib "$sh_plain_space")" "$(mib "$sh_dedup_space")"
} | tee "$out/tiers.txt"

met=missed
(($(echo "$rr_file_iops >= 0.8 * $fio_iops" | bc))) && met=met
shared_ratio=$(ratio "$sh_dedup_space" "$sh_plain_space")
shared_met=missed
(($(echo "$shared_ratio <= 0.52" | bc))) && shared_met=met
busy=
(($(echo "${load_start%% *} > 1.5" | bc))) &&
	busy=" (the machine was busy with other jobs: the speeds are rough)"
cat >bench/sections/tiers.md <<EOF
## The second tier (\`make bench-tiers\`)

\`bench/tiers.sh $((SIZE >> 20)) $((LIMIT >> 20))\`, run $started on $(nproc) CPUs, load average $load_start at the start and $load_end at the end$busy. The first $((SIZE >> 20)) MiB of the corpus (files.tar, and the Python core after it if it is shorter) copied by \`nbdcopy --flush\` into \`uzram serve --size $DEV\` (lz4): with no limit, and with \`--mem-limit $((LIMIT >> 20))M\` and a backing store, the policy on and no operator command, the store a file or nbdkit's memory plugin over a Unix socket. Each fill was read back with nbdcopy and compared byte for byte (all matched). Peak RSS is the server's VmHWM; \`mem_used_max\` is the pool's peak (the limit covers the pool and the page table).

| | no limit | limit, file | limit, nbdkit |
|---|---|---|---|
| fill, MB/s | $nolimit_mbs | $limit_mbs | $nbd_mbs |
| server peak RSS | $(mib "$nolimit_hwm") MiB | $(mib "$limit_hwm") MiB | $(mib "$nbd_hwm") MiB |
| mem_used_max | $(mib "$nolimit_memmax") MiB | $(mib "$limit_memmax") MiB | $(mib "$nbd_memmax") MiB |
| pages on the backing store | $nolimit_bd | $limit_bd | $nbd_bd |
| failed requests | $nolimit_errors | $limit_errors | $nbd_errors |

4K random reads, one thread, in-process (\`uzram load --randread $N\`), of the same data held in memory (the codec's own limit) and written back to a file or to nbdkit, beside fio \`psync\` 4K random reads (one job) of a page-cached file as large as the backing file ($(mib "$rr_file_space") MiB). Target: the tier at least 0.8x of fio ($met).

| | in memory | written back, file | written back, nbdkit | fio psync on the file |
|---|---|---|---|---|
| IOPS | $rr_mem_iops | $rr_file_iops | $rr_nbd_iops | $fio_iops |
| / fio | $(ratio "$rr_mem_iops" "$fio_iops") | $(ratio "$rr_file_iops" "$fio_iops") | $(ratio "$rr_nbd_iops" "$fio_iops") | 1 |

Backing store used / live compressed bytes on it, after the whole corpus was written back and four rounds of 64 rewrites and discards of 256 KiB runs at random places, each round followed by \`ctl writeback\`:

| | file | nbdkit |
|---|---|---|
| after the churn | $ch_file_before | $ch_nbd_before |
| after \`ctl backing-compact\` | $ch_file_after | $ch_nbd_after |

Dedup and writeback: the same $((SIZE >> 20)) MiB at offset 0 and at offset $((OFF2 >> 20)) MiB of one export with a backing file (no limit), the second copy through nbdkit's offset filter, then \`ctl writeback\` of everything; both copies read back and compared. Writeback writes a shared object once, so with \`--dedup\` the backing store should hold one copy. Target (the one dedup has for memory): the backing store used with dedup at most 0.52x of without ($shared_met: $shared_ratio).

| | without dedup | \`--dedup\` | ratio |
|---|---|---|---|
| bd_bytes (live compressed bytes) | $(mib "$sh_plain_bd") MiB | $(mib "$sh_dedup_bd") MiB | $(ratio "$sh_dedup_bd" "$sh_plain_bd") |
| bd_space (segments in use) | $(mib "$sh_plain_space") MiB | $(mib "$sh_dedup_space") MiB | $shared_ratio |
| \`ctl writeback\`, seconds | $sh_plain_s | $sh_dedup_s | $(ratio "$sh_dedup_s" "$sh_plain_s") |
EOF
python3 bench/section.py BENCHMARKS.md bench/sections/tiers.md
echo "wrote bench/sections/tiers.md and its section of BENCHMARKS.md"
