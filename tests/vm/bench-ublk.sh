# SPDX-License-Identifier: MIT
# bench-ublk.sh - one run, side by side in one guest: the kernel's zram
# (lz4), `uzram serve --ublk` (the driver copying, and --ublk-copy=user),
# and `uzram serve` through the kernel's NBD client on a Unix socket. Each
# device is made and filled with 128 MiB of the corpus (files.tar, 16
# times; the fill's time and the memory the data takes are figures), then
# the same fio jobs run on each: 4K random read at queue depth 1 and 16,
# 4K random write, 1M sequential read and write; then the same server at
# queue depths 8 to 128 (the measurement behind --ublk-depth's default).
# The devices take turns,
# BENCH_ROUNDS times per job, and the median is the figure, so that a
# machine whose load changes during the run (TCG on a shared host) moves
# every device alike. Prints FIGURE lines; it asserts only that each
# device worked. Not in make test: tests/vm/run.sh tests/vm/bench-ublk.sh
# (doc/ublk.md).
# vm-kernel: 6.12
# vm-mem: 1536
# vm-cpus: 2
# vm-timeout: 2400
# vm-modules: ublk_drv nbd zram
# vm-programs: fio
# vm-data: files.tar
source /guest-lib.sh

# Knobs (VMT_* from the host, tests/vm/run.sh): VMT_BENCH_QUICK=1 runs
# only the 4K jobs of the table (no 1M jobs, no depth series);
# VMT_BENCH_ROUNDS the rounds of each job (default 3).
RUNTIME=5
ROUNDS=${VMT_BENCH_ROUNDS:-3}
SIZE=256M
FILL_COPIES=16
declare -A dev pid

# fio ARGS...: one job on $1; its terse (v3) line
job()
{
	local d=$1; shift
	bounded $((RUNTIME + 60)) fio --name=b --filename="$d" --direct=1 \
		--ioengine=io_uring --time_based=1 --runtime="$RUNTIME" \
		--ramp_time=1 --size=128M --buffer_compress_percentage=50 \
		--buffer_compress_chunk=4k --refill_buffers=1 --randrepeat=0 \
		--minimal "$@" 2>/dev/null | tail -n1
}

# Write the corpus FILL_COPIES times at the start of device $1's; figure.
fill()
{
	local name=$1 t0 i
	t0=$(now)
	for i in $(seq 0 $((FILL_COPIES - 1))); do
		dd if=/data/files.tar of="${dev[$name]}" bs=1M seek=$((i * 8)) \
			count=8 oflag=direct 2>/dev/null || return 1
	done
	figure "$name-fill" "$(elapsed "$t0")" s
}

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
uzram_mem() { uzram stat --socket "/run/$1.sock" --all | awk '$1 == "mem_used_total" { print $2 }'; }

names=()
echo lz4 > /sys/block/zram0/comp_algorithm && echo $SIZE > /sys/block/zram0/disksize &&
	dev[zram]=/dev/zram0 && names+=(zram)
for mode in kernel user; do
	if uzram_start "ublk-$mode" --size $SIZE --ublk --ublk-copy "$mode"; then
		dev[ublk-$mode]=$(sed -n 's/^uzram serve: block device //p' "/run/ublk-$mode.out")
		pid[ublk-$mode]=$UZRAM_PID
		names+=("ublk-$mode")
	else
		fail "ublk-$mode-start" "$(cat "/run/ublk-$mode.err")"
	fi
done
if uzram_start nbd --size $SIZE && nbd_attach /dev/nbd0 /run/nbd.sock -b 4096; then
	dev[nbd]=/dev/nbd0; pid[nbd]=$UZRAM_PID; names+=(nbd)
else
	fail nbd-start "$(cat /run/nbd.err)"
fi
info "devices: ${names[*]}"

for n in "${names[@]}"; do
	check "$n-fill" fill "$n"
	if [[ $n == zram ]]; then
		figure zram-mem "$(awk '{ print $3 }' /sys/block/zram0/mm_stat)" bytes
	else
		figure "$n-mem" "$(uzram_mem "$n")" bytes
		figure "$n-rss" "$(rss_kib "${pid[$n]}")" KiB
	fi
done

# JOB FIELD DIVISOR UNIT FIO-ARGS...: the median over the rounds, per device
measure()
{
	local jobname=$1 field=$2 div=$3 unit=$4 n r t; shift 4
	declare -A got
	for r in $(seq "$ROUNDS"); do
		for n in "${names[@]}"; do
			t=$(job "${dev[$n]}" "$@")
			got[$n]+="$(cut -d';' -f"$field" <<< "$t" | awk -v d="$div" '{ printf "%d", $1 / d }') "
		done
	done
	for n in "${names[@]}"; do
		figure "$n-$jobname" "$(tr ' ' '\n' <<< "${got[$n]}" | grep . | sort -n |
			awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')" "$unit"
		info "$n-$jobname rounds: ${got[$n]}"
	done
}
measure randread4k-qd1 8 1 IOPS --rw=randread --bs=4k --iodepth=1
measure randread4k-qd16 8 1 IOPS --rw=randread --bs=4k --iodepth=16
measure randwrite4k-qd1 49 1 IOPS --rw=randwrite --bs=4k --iodepth=1
if [[ ${VMT_BENCH_QUICK:-0} != 1 ]]; then
measure seqread1m 7 1024 MiB/s --rw=read --bs=1M --iodepth=1
measure seqwrite1m 48 1024 MiB/s --rw=write --bs=1M --iodepth=1
fi

[[ -n ${dev[nbd]:-} ]] && bounded 30 nbd-client -d /dev/nbd0
for n in "${!pid[@]}"; do
	kill -TERM "${pid[$n]}"; wait "${pid[$n]}"
done
echo 1 > /sys/block/zram0/reset
[[ ${VMT_BENCH_QUICK:-0} == 1 ]] && finish

# ---- the queue depth (--ublk-depth's default) ----
# The same server at depths 8 to 128 under jobs that keep 64 requests in
# flight. A depth below that makes the block layer queue the rest; past
# it, a larger depth only costs buffer memory (depth x 256 KiB per queue,
# as requests touch it).
dev=(); pid=(); names=()
for d in 8 16 32 64 128; do
	if uzram_start "depth$d" --size $SIZE --ublk --ublk-depth "$d"; then
		dev[depth$d]=$(sed -n 's/^uzram serve: block device //p' "/run/depth$d.out")
		pid[depth$d]=$UZRAM_PID
		names+=("depth$d")
		check "depth$d-fill" fill "depth$d"
	else
		fail "depth$d-start" "$(cat "/run/depth$d.err")"
	fi
done
measure randread4k-qd64 8 1 IOPS --rw=randread --bs=4k --iodepth=64
measure seqwrite1m-2x32 48 1024 MiB/s --rw=write --bs=1M --iodepth=32 \
	--numjobs=2 --offset_increment=64M --size=64M --group_reporting=1
for n in "${names[@]}"; do
	figure "$n-rss" "$(rss_kib "${pid[$n]}")" KiB
	kill -TERM "${pid[$n]}"; wait "${pid[$n]}"
done
finish
