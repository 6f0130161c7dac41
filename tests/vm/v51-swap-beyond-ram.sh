# SPDX-License-Identifier: MIT
# v51-swap-beyond-ram.sh - swap beyond RAM (issue 30, item 5): a hog of 3x
# the guest's RAM (768 MiB in 256 MiB) on `uzram swapon` with a memory
# limit below RAM (64 MiB) and a backing store on a disk of the guest
# (run.sh's vm-disk, /dev/vda): the policy thread moves the cold clusters
# there by itself, and every page must read back right. The backing store
# is the disk itself, as zram's writeback device is, or (VMT_BACKING=file)
# a file on ext4 on it, which the server writes on the blocks under it as
# the kernel writes a swap file (src/tier/backing_blocks.c; e2fsck checks
# the file system after). Written through ext4 instead, as before, the
# file deadlocked when the hog's pages compressed badly (the file's
# writeback, ext4's flusher and jbd2, allocated, reclaimed by swapping to
# our device and waited for bios only our server frees, while the server
# waited for the file; doc/block-device.md).
# Beside it, in the same boot, first: the guest's zram without a backing
# device (as on WSL2), the same size and codec (zstd, 1 GiB), which has
# only RAM to hold the hog's compressed pages. Half of each of the hog's
# pages is pseudo-random (hog's NOISE 8), so that no codec stores the hog
# in less than 384 MiB, more than the guest's RAM, whatever the corpus
# holds (with the Python core image alone, zstd took the 768 MiB into
# 126 MB and zram completed). What happens to zram (the hog's status, the
# OOM killer's line) is printed; that it fails is checked. Figures: time,
# swap-ins and -outs, what the server wrote to the file and its peak
# memory, against zram's. Knobs: VMT_BEYOND_RUNS (default "zram uzram"),
# VMT_HOG_MIB, VMT_HOG_NOISE (default 8), VMT_MEM_LIMIT (default 64M),
# VMT_BEYOND_HOG (random: tests/vm/rhog.c's two processes rewriting random
# pages instead of the hog's passes in order; no noise, so zram may
# complete),
# VMT_SWAPON_OPTS (more options of swapon), VMT_BACKING (device or
# file). Not in make test: 10 minutes and more under TCG (make
# test-vm-swap-beyond-ram).
# vm-kernel: 6.12
# vm-mem: 256
# vm-cpus: 2
# vm-disk: 2048
# vm-timeout: 1200
# vm-modules: ublk_drv zram virtio_blk ext4
# vm-programs: hog rhog swapwatch mkfs.ext4 e2fsck
# vm-data: heap-python.core:64:8
source /guest-lib.sh

runs=${VMT_BEYOND_RUNS:-zram uzram}
hog_mib=${VMT_HOG_MIB:-768}
noise=${VMT_HOG_NOISE:-8}
hog_kind=${VMT_BEYOND_HOG:-sequential}
backing_kind=${VMT_BACKING:-device}
mem_limit=${VMT_MEM_LIMIT:-64M}
sysctl -q -w vm.min_free_kbytes=16384
sysctl -q -w vm.swappiness=100
vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
ram_mib=$(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo)
info "MemTotal $(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo) MiB," \
	"MemAvailable $(awk '/MemAvailable/ { print int($2 / 1024) }' /proc/meminfo) MiB: hog of $hog_mib MiB"

# run_hog NAME: the hog and its figures; its status
run_hog()
{
	local out0 in0 t0 rc secs
	out0=$(vmstat pswpout); in0=$(vmstat pswpin)
	t0=$(now)
	if [[ $hog_kind == random ]]; then
		bounded 900 rhog "$hog_mib" /data/heap-python.core 2 1 > "/tmp/hog.$1" 2>&1
	else
		bounded 900 hog "$hog_mib" /data/heap-python.core 1 "$noise" > "/tmp/hog.$1" 2>&1
	fi
	rc=$?
	secs=$(elapsed "$t0")
	cat "/tmp/hog.$1"
	info "$1: the hog's status $rc after $secs s"
	figure "$1-seconds" "$secs" s
	figure "$1-status" "$rc"
	figure "$1-pswpout" "$(($(vmstat pswpout) - out0))" pages
	figure "$1-pswpin" "$(($(vmstat pswpin) - in0))" pages
	return $rc
}

# 1. zram, no backing device
if [[ " $runs " == *" zram "* ]]; then
	if echo zstd > /sys/block/zram0/comp_algorithm && echo 1G > /sys/block/zram0/disksize &&
		mkswap /dev/zram0 > /dev/null && swapon -p 100 /dev/zram0; then
		dmesg -c > /dev/null
		run_hog zram
		rc=$?
		killed=$(dmesg | grep -a -m1 -E "Out of memory|oom-kill" || true)
		info "zram without a backing device: status $rc; ${killed:-no OOM kill}"
		# what no codec compresses is more than the guest's RAM
		[[ $hog_kind == sequential ]] && ((noise * hog_mib / 16 > ram_mib)) &&
			check zram-cannot test "$rc" -ne 0
		figure zram-mem_used_max "$(awk '{ print $5 }' /sys/block/zram0/mm_stat)" bytes
		check zram-swapoff bounded 300 swapoff /dev/zram0
		echo 1 > /sys/block/zram0/reset
	else
		fail zram-swapon "zram swap could not be set up"
	fi
fi

# 2. uzram swapon with a backing file on the guest's disk
[[ " $runs " == *" uzram "* ]] || finish
if [[ $backing_kind == file ]]; then
	mkdir -p /mnt/disk
	check mkfs bounded 120 mkfs.ext4 -q /dev/vda
	check mount mount -t ext4 /dev/vda /mnt/disk
	backing=/mnt/disk/swap.backing
else
	backing=/dev/vda
fi
# shellcheck disable=SC2086
check swapon bounded 120 uzram swapon --size 1G --mem-limit "$mem_limit" \
	--backing "$backing" ${VMT_SWAPON_OPTS:-}
dev=$(awk '$1 ~ /^\/dev\/ublkb[0-9]+$/ { print $1 }' /proc/swaps)
[[ -n $dev ]] || { ls -la /run/uzram/swap/; tail -n 40 /run/uzram/swap/*.log; dmesg | grep -v "^\[ *[0-9.]*\] *\(R[0-9A-Z]*:\|Node\|lowmem\|Code:\)" | tail -n 60; }
f=/run/uzram/swap/${dev#/dev/}
pid=$(cat "$f.pid")
info "server: $(tr '\0' ' ' < /proc/$pid/cmdline)"
stats() { uzram stat --socket "$f.sock" --all | awk '$1 ~ /^(pages_stored|mem_used_total|mem_used_max|mem_limit|bd_space|bd_writes|bd_reads|failed_writes)$/ { printf " %s=%s", $1, $2 }'; }
( while sleep 20; do info "memwatch$(stats) free_kb=$(awk '/MemFree/ { print $2 }' /proc/meminfo)"; done ) &
watch=$!
swapwatch 60 "$pid" &
swatch=$!
run_hog uzram
rc=$?
kill "$watch" "$swatch"
check uzram-hog-completes test "$rc" = 0
info "uzram after the hog:$(stats)"
figure uzram-mem_used_max "$(stat_field "$f.sock" mem_used_max)" bytes
figure uzram-VmHWM "$(awk '$1 == "VmHWM:" { print $2 * 1024 }' /proc/$pid/status)" bytes
figure uzram-bd_writes "$(stat_field "$f.sock" bd_writes)"
figure uzram-bd_reads "$(stat_field "$f.sock" bd_reads)"
figure uzram-bd_space "$(stat_field "$f.sock" bd_space)" bytes
figure uzram-failed_writes "$(stat_field "$f.sock" failed_writes)" requests
[[ $backing_kind == file ]] &&
	figure uzram-backing-file "$(du -k "$backing" | awk '{ print $1 * 1024 }')" bytes
# the cold pages went to the file by themselves: more than the limit holds
check backing-used test "$(stat_field "$f.sock" bd_writes)" -gt 0
check swapoff bounded 600 uzram swapoff
if [[ $backing_kind == file ]]; then
	check backing-file-emptied test "$(stat -c %s "$backing")" = 0
	check umount umount /mnt/disk
	check e2fsck-clean bounded 300 e2fsck -fn /dev/vda
fi
finish
