#!/usr/bin/env bash
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
#            --randread`, one thread, in-process) beside fio psync 4K random
#            reads, one job, of a file as large as what the backing store
#            holds: the tier's own limit; both files in the page cache
#   churn    rewrites and discards of 256 KiB runs at random places of a
#            device written back, with `ctl writeback` after each round:
#            bytes of backing store used / live compressed bytes on it,
#            before and after `ctl backing-compact`
#
# Prints a small table; writes bench/out/tiers.txt. The machine should be
# otherwise idle for the figures to mean anything.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
UZRAM=$PWD/$BUILD/uzram
CORPUS=${BENCH_CORPUS:-$PWD/build/corpus}
SIZE=$((${1:-512} << 20))
LIMIT=$((${2:-128} << 20))
out=$PWD/bench/out
mkdir -p "$out"
T=$(mktemp -d /tmp/uzram-bench-tiers.XXXXXX)
source bench/servers.sh
server_pid=
trap 'stop_server; rm -rf "$T"' EXIT

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

fill nolimit
fill limit --mem-limit "$LIMIT" --backing "$T/backing"
# the same with nbdkit's memory plugin over a Unix socket as the backing store
nbdkit -U "$T/nbdkit.sock" -P "$T/nbdkit.pid" memory $((SIZE * 2))
fill nbd --mem-limit "$LIMIT" --backing "nbd+unix:///?socket=$T/nbdkit.sock"
kill "$(cat "$T/nbdkit.pid")"

# randread: uzram load --backing, then fio on a file of bd_space bytes
N=200000
rm -f "$T/lb"
"$UZRAM" load "$T/data" --backing "$T/lb" --randread "$N" --json >"$T/load.json"
us=$(python3 -c "import json; print(json.load(open('$T/load.json'))['randread_4k_us'])")
space=$(python3 -c "import json; print(json.load(open('$T/load.json'))['bd_space'])")
tier_iops=$(echo "1000000 / $us" | bc)
head -c "$space" "$T/data" >"$T/ref"
cat "$T/ref" >/dev/null
fio --name=ref --filename="$T/ref" --rw=randread --bs=4k --ioengine=psync \
	--numjobs=1 --invalidate=0 --time_based --runtime=5 --output-format=json \
	>"$T/fio.json"
fio_iops=$(python3 -c "import json; print(int(json.load(open('$T/fio.json'))['jobs'][0]['read']['iops']))")

# churn
serve --backing "$T/churn"
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
			dd if="$T/data" of="$T/chunk$i" bs=256k skip="$src" count=1 \
				status=none
			cmds+=(-c "write -s $T/chunk$i $off 256k")
		fi
	done
	qemu-io -f raw "${cmds[@]}" "$uri" >/dev/null
	"$UZRAM" ctl --socket "$T/s.sock" writeback >/dev/null
done
stat_json >"$T/stat.json"
churn_before=$(echo "$(field bd_space) / $(field bd_bytes)" | bc -l)
"$UZRAM" ctl --socket "$T/s.sock" backing-compact >/dev/null
stat_json >"$T/stat.json"
churn_after=$(echo "$(field bd_space) / $(field bd_bytes)" | bc -l)
stop_server

{
	echo "tiers bench: $((SIZE >> 20)) MiB of the corpus, mem limit $((LIMIT >> 20)) MiB, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
	printf '%-44s %12s %12s %12s\n' "" "no limit" "limit+file" "limit+nbdkit"
	printf '%-44s %12s %12s %12s\n' "fill MB/s (nbdcopy)" "$nolimit_mbs" "$limit_mbs" "$nbd_mbs"
	printf '%-44s %12s %12s %12s\n' "server peak RSS MiB" "$((nolimit_hwm >> 20))" \
		"$((limit_hwm >> 20))" "$((nbd_hwm >> 20))"
	printf '%-44s %12s %12s %12s\n' "mem_used_max MiB" "$((nolimit_memmax >> 20))" \
		"$((limit_memmax >> 20))" "$((nbd_memmax >> 20))"
	printf '%-44s %12s %12s %12s\n' "pages on the backing store" "$nolimit_bd" "$limit_bd" "$nbd_bd"
	printf '%-44s %12s %12s %12s\n' "failed requests" "$nolimit_errors" "$limit_errors" \
		"$nbd_errors"
	printf '%-44s %12s\n' "4K random reads of written-back data, IOPS" "$tier_iops"
	printf '%-44s %12s\n' "fio psync 4K random reads of the file, IOPS" "$fio_iops"
	printf '%-44s %12.2f\n' "tier / fio" "$(echo "$tier_iops / $fio_iops" | bc -l)"
	printf '%-44s %12.3f\n' "backing bytes / live bytes after churn" "$churn_before"
	printf '%-44s %12.3f\n' "... after ctl backing-compact" "$churn_after"
} | tee "$out/tiers.txt"
