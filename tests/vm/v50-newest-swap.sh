# SPDX-License-Identifier: MIT
# v50-newest-swap.sh - swap on the newest Debian kernel (trixie-backports',
# 7.3 on 2026-12-03; tests/vm/fetch-kernel.sh) beside *its* zram, in one
# boot: a hog of 1.5x the memory available (as v42) first on the guest's
# zram (zstd, RAM / 2, priority 100: what `uzram swapon` sets up by
# default), then on `uzram swapon` with its defaults (ublk there). Each
# must complete with every page right; their times and swap-outs are
# printed as FIGURE lines (TCG: a ratio within this boot only). Then
# `uzram swapoff` leaves no swap, server or ublk device.
# make test runs it (test-vm-ublk, 1-1.5 min under TCG); `VM_KERNEL=trixie-backports
# make test-vm VM_TESTS=...` runs the other ublk tests on this kernel.
# vm-kernel: trixie-backports
# vm-mem: 256
# vm-timeout: 480
# vm-modules: ublk_drv zram
# vm-programs: hog
# vm-data: heap-python.core:64:8
source /guest-lib.sh

sysctl -q -w vm.min_free_kbytes=16384
vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
# meminfo NAME: a line of /proc/meminfo's figures (MiB) once NAME's swap
# is on, and NAME-available, its MemAvailable, as a FIGURE: what uzram's
# server takes before the hog starts is the difference (zram's device
# allocates nothing until written)
meminfo()
{
	info "meminfo $1: $(awk '/^(MemFree|MemAvailable|Mlocked|Shmem|AnonPages|PageTables):/ { printf "%s %d ", $1, $2 / 1024 }' /proc/meminfo)(MiB)"
	figure "$1-available" "$(($(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) / 1024))" MiB
}
info "kernel $(uname -r)"

ram_kib=$(awk '/MemTotal/ { print $2 }' /proc/meminfo)
avail_mib=$(($(awk '/MemAvailable/ { print $2 }' /proc/meminfo) / 1024))
hog_mib=$((avail_mib * 3 / 2))
info "MemTotal $((ram_kib / 1024)) MiB, MemAvailable $avail_mib MiB: hog of $hog_mib MiB"

# run_hog NAME: the hog, its figures; 0 if every page read back right
run_hog()
{
	local out0 in0 t0 rc secs
	out0=$(vmstat pswpout); in0=$(vmstat pswpin)
	t0=$(now)
	bounded 300 hog $hog_mib /data/heap-python.core 1 > "/tmp/hog.$1" 2>&1
	rc=$?
	secs=$(elapsed "$t0")
	cat "/tmp/hog.$1"
	figure "$1-seconds" "$secs" s
	figure "$1-pswpout" "$(($(vmstat pswpout) - out0))" pages
	figure "$1-pswpin" "$(($(vmstat pswpin) - in0))" pages
	return $rc
}

# 1. the kernel's zram, as uzram swapon's defaults
if echo zstd > /sys/block/zram0/comp_algorithm &&
	echo $((ram_kib / 2))K > /sys/block/zram0/disksize &&
	mkswap /dev/zram0 > /dev/null && swapon -p 100 /dev/zram0; then
	meminfo zram
	check zram-hog run_hog zram
	figure zram-mem_used_max "$(awk '{ print $5 }' /sys/block/zram0/mm_stat)" bytes
	check zram-swapoff bounded 120 swapoff /dev/zram0
	echo 1 > /sys/block/zram0/reset
else
	fail zram-swapon "zram swap could not be set up"
fi

# 2. uzram swapon, its defaults: ublk on this kernel
check swapon bounded 120 uzram swapon
dev=$(awk '$1 ~ /^\/dev\/ublkb[0-9]+$/ { print $1 }' /proc/swaps)
check on-ublk test -n "$dev"
f=/run/uzram/swap/${dev#/dev/}
# the block layer's writeback throttling (wbt) of the device's queue: zram
# is bio-based and has none; VMT_WBT_LAT_USEC sets it (0: off)
q=/sys/block/${dev#/dev/}/queue
[[ -n ${VMT_WBT_LAT_USEC:-} ]] && echo "$VMT_WBT_LAT_USEC" > "$q/wbt_lat_usec"
info "$dev: wbt_lat_usec $(cat "$q/wbt_lat_usec" 2>/dev/null), scheduler $(cat "$q/scheduler" 2>/dev/null), nr_requests $(cat "$q/nr_requests")"
info "server: $(grep -h 'memory locked' "$f.log")"
for p in $(pidof uzram); do proc_memory "$p"; done
meminfo uzram
check uzram-hog run_hog uzram
for p in $(pidof uzram); do proc_memory "$p"; done
figure uzram-mem_used_max "$(stat_field "$f.sock" mem_used_max)" bytes
# the no-fault pool (serve_swap.c): writes that waited for its refill
# thread, writes that failed for it (the kernel keeps the page and
# retries), what the thread made resident; and the server's peak RSS
for k in refill_waits refill_misses refill_made; do
	figure "uzram-$k" "$(stat_field "$f.sock" $k)" ""
done
spid=$(sed -n 's/^uzram serve: --keeper: the server is pid //p' "$f.log" | tail -n 1)
[[ -n $spid ]] && figure uzram-server-VmHWM "$(awk '/^VmHWM:/ { print $2 }' /proc/$spid/status)" kB
check swapoff bounded 300 uzram swapoff
check no-swap-left test "$(tail -n +2 /proc/swaps | wc -l)" -eq 0
check no-server-left bash -c '! pidof uzram'
check no-ublk-device-left test -z "$(ls /sys/class/ublk-char/ 2>/dev/null)"
finish
