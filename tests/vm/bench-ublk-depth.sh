# bench-ublk-depth.sh - the measurement behind --ublk-depth's default: the
# same `uzram serve --ublk` at queue depths 8 to 128, taking turns (median
# of BENCH_ROUNDS) under fio jobs that keep 64 requests in flight: 4K
# random reads, and 1M sequential writes in two jobs. A depth below what
# the jobs keep in flight makes the block layer queue the rest; past that,
# a larger depth only costs buffer memory (depth x 256 KiB per queue, as
# requests touch it). Prints FIGURE lines. Not in make test.
# vm-kernel: 6.12
# vm-mem: 1024
# vm-timeout: 1500
# vm-modules: ublk_drv
# vm-programs: fio
source /guest-lib.sh

RUNTIME=5
ROUNDS=3
depths=(8 16 32 64 128)
declare -A dev pid

job()
{
	local d=$1; shift
	bounded $((RUNTIME + 60)) fio --name=b --filename="$d" --direct=1 \
		--ioengine=io_uring --time_based=1 --runtime="$RUNTIME" \
		--ramp_time=1 --size=48M --buffer_compress_percentage=50 \
		--buffer_compress_chunk=4k --refill_buffers=1 --randrepeat=0 \
		--group_reporting=1 --minimal "$@" 2>/dev/null | tail -n1
}

for d in "${depths[@]}"; do
	if uzram_start "d$d" --size 64M --ublk --ublk-depth "$d"; then
		dev[$d]=$(sed -n 's/^uzram serve: block device //p' "/run/d$d.out")
		pid[$d]=$UZRAM_PID
		bounded 120 fio --name=fill --filename="${dev[$d]}" --direct=1 \
			--rw=write --bs=1M --size=48M --buffer_compress_percentage=50 \
			--refill_buffers=1 > /dev/null 2>&1
	else
		fail "start-d$d" "$(cat "/run/d$d.err")"
	fi
done

measure()
{
	local jobname=$1 field=$2 div=$3 unit=$4 d r t; shift 4
	declare -A got
	for r in $(seq "$ROUNDS"); do
		for d in "${!dev[@]}"; do
			t=$(job "${dev[$d]}" "$@")
			got[$d]+="$(cut -d';' -f"$field" <<< "$t" | awk -v v="$div" '{ printf "%d", $1 / v }') "
		done
	done
	for d in "${depths[@]}"; do
		[[ -n ${got[$d]:-} ]] || continue
		figure "depth$d-$jobname" "$(tr ' ' '\n' <<< "${got[$d]}" | grep . | sort -n |
			awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')" "$unit"
		info "depth$d-$jobname rounds: ${got[$d]}"
	done
}
measure randread4k-qd64 8 1 IOPS --rw=randread --bs=4k --iodepth=64
measure seqwrite1m-2x32 48 1024 MiB/s --rw=write --bs=1M --iodepth=32 --numjobs=2 --offset_increment=24M --size=24M

for d in "${depths[@]}"; do
	[[ -n ${pid[$d]:-} ]] || continue
	figure "depth$d-rss" "$(awk '/^VmRSS/ { print $2 }' "/proc/${pid[$d]}/status")" KiB
	kill -TERM "${pid[$d]}"; wait "${pid[$d]}"
	pass "depth$d"
done
finish
