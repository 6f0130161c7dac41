# SPDX-License-Identifier: MIT
# v31-swapon.sh - `uzram swapon` and `uzram swapoff` on 6.1, which has no
# ublk (v42 is swapon on ublk): the default transport is nbd (its server
# under a keeper, which attaches /dev/nbdN itself; v45 kills it), with
# zram-generator's defaults (min(RAM / 2, 4 GiB), zstd, priority 100),
# --transport ublk is refused, a second device beside the first with every
# device option serve takes (a backing file, recompression, dedup...), and
# swapoff taking every piece down: no swap, no client, no server, no
# files left. The backing file is on ext4 on the guest's disk, written on
# its blocks (serve --backing-blocks, which --swap implies), immutable
# while served and an ordinary file after; one on tmpfs
# (the guest's /tmp) is refused, and swapon shows why.
# vm-mem: 256
# vm-timeout: 240
# vm-disk: 128
# vm-modules: nbd virtio_pci virtio_blk ext4
# vm-programs: mkfs.ext4
source /guest-lib.sh

ram_kib=$(awk '/MemTotal/ { print $2 }' /proc/meminfo)
check swapon-defaults bounded 120 uzram swapon
line=$(awk '$1 == "/dev/nbd0"' /proc/swaps)
info "/proc/swaps: $line"
size_kib=$(echo "$line" | awk '{ print $3 }')
prio=$(echo "$line" | awk '{ print $5 }')
# mkswap keeps one page for its header
check size-half-ram test "$size_kib" -ge $((ram_kib / 2 - 8)) -a "$size_kib" -le $((ram_kib / 2))
check priority-100 test "$prio" = 100
check algorithm-zstd test "$(stat_field /run/uzram/swap/nbd0.sock algorithm)" = zstd
# DEV.pid is the keeper's (doc/keep.md): the checks below are of its
# server, which the keeper names in DEV.log
keeper=$(cat /run/uzram/swap/nbd0.pid)
pid=$(sed -n 's/^uzram serve: --keeper: the server is pid //p' /run/uzram/swap/nbd0.log | tail -n 1)
check under-keeper test -n "$pid" -a "$pid" != "$keeper"
check keeper-oom-protected test "$(cat /proc/$keeper/oom_score_adj)" = -1000
check server-oom-protected test "$(cat /proc/$pid/oom_score_adj)" = -1000
# /run/uzram as uzram mount wants it, whoever made it first (at boot,
# uzram-swap@ and uzram-mount@ start side by side)
check runtime-dir-private test "$(stat -c %a /run/uzram)" = 700
check server-locked bash -c "grep -q 'VmLck:[[:space:]]*[1-9]' /proc/$pid/status"
# the request threads a connection may add (NBD_MAX_THREADS, 8) all
# started with it: none is made while the kernel swaps
check request-threads-at-start bash -c "test \$(grep -lx uzram-nbd-req /proc/$pid/task/*/comm | wc -l) -ge 8"
# field 41 of stat: the policy, 2 = SCHED_RR, for every thread (serve_swap.c)
check server-realtime bash -c "! awk '{ sub(/.*\\) /, \"\"); if (\$39 != 2) print }' /proc/$pid/task/*/stat | grep -q ."
# 6.1 has no ublk: auto took nbd above; asked for, ublk is refused by name
check ublk-refused bash -c '! uzram swapon --transport ublk 2> /tmp/ublk.err && grep -q ublk_drv /tmp/ublk.err'
info "$(cat /tmp/ublk.err)"
# a swap server's backing file is written on its blocks: not on tmpfs
check backing-on-tmpfs-refused bash -c '! uzram swapon --size 32M --mem-limit 16M \
	--backing /tmp/swap1.backing 2> /tmp/bb.err && grep -q "no block device of its own" /tmp/bb.err'
info "$(cat /tmp/bb.err)"
rm -f /tmp/swap1.backing
check mkfs bounded 60 mkfs.ext4 -q /dev/vda
mkdir -p /mnt/disk
check mount mount -t ext4 /dev/vda /mnt/disk
# the second with every device option serve takes (issue 30 item 1)
check second-dry-run uzram swapon --dry-run --size 32M --algorithm lz4 --level 1 \
	--cluster 8K --mem-limit 16M --backing /mnt/disk/swap1.backing --recomp-algorithm zstd \
	--writeback-limit 64M --high-watermark 80 --low-watermark 60 --dedup --threads 2
check second-device bounded 120 uzram swapon --size 32M --algorithm lz4 --level 1 \
	--cluster 8K --mem-limit 16M --backing /mnt/disk/swap1.backing --recomp-algorithm zstd \
	--writeback-limit 64M --high-watermark 80 --low-watermark 60 --dedup --threads 2 \
	--priority 5
check second-on-nbd1 bash -c "awk '\$1 == \"/dev/nbd1\" && \$5 == 5' /proc/swaps | grep -q nbd1"
pid1=$(cat /run/uzram/swap/nbd1.pid)
info "server of nbd1: $(tr '\0' ' ' </proc/$pid1/cmdline)"
check second-serve-options bash -c "tr '\0' ' ' </proc/$pid1/cmdline | grep -q -- '--level 1 --cluster 8K .*--mem-limit 16777216 --backing /mnt/disk/swap1.backing --high-watermark 80 --low-watermark 60 --writeback-limit 64M --threads 2 --recomp-algorithm zstd --dedup'"
check second-mem-limit test "$(stat_field /run/uzram/swap/nbd1.sock mem_limit)" = 16777216
check second-wb-limit test "$(stat_field /run/uzram/swap/nbd1.sock bd_wb_limit)" = 16384
# allocated whole: the device's 32 MiB and the spare segments
check second-backing-file test "$(stat -c %s /mnt/disk/swap1.backing)" -gt $((32 << 20))
# and immutable while served, as a swap file is: nobody writes it
check second-backing-guarded bash -c '! dd if=/dev/zero of=/mnt/disk/swap1.backing \
	bs=4k count=1 conv=notrunc status=none 2>/dev/null'
# a memory limit past what the guest has: the reserve stops at half of
# MemAvailable, and the server starts (a reserve of the whole limit stalled
# in the NOIO allocator with no swap to reclaim to, v51 on 7.3)
avail_mib=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
check third-limit-past-ram bounded 120 uzram swapon --size 64M --mem-limit 1G --priority 1
reserved=$(sed -n 's/.*), \([0-9]*\) MiB reserved.*/\1/p' /run/uzram/swap/nbd2.log | tail -n 1)
info "MemAvailable $avail_mib MiB before; reserved ${reserved:-none} MiB"
check third-reserve-half-available test "${reserved:-999999}" -le $((avail_mib / 2))
check swapoff-all bounded 300 uzram swapoff
check backing-file-emptied test "$(stat -c %s /mnt/disk/swap1.backing)" = 0
check backing-file-unguarded bash -c 'echo x >> /mnt/disk/swap1.backing && rm /mnt/disk/swap1.backing'
check umount umount /mnt/disk
check no-swap-left test "$(tail -n +2 /proc/swaps | wc -l)" -eq 0
check no-server-left bash -c '! pidof uzram'
check no-client-left bash -c '! ls /sys/block/nbd0/pid /sys/block/nbd1/pid 2>/dev/null | grep -q .'
check no-files-left bash -c 'test -z "$(ls /run/uzram/swap/ | grep -v "\.log$")"'
check swapoff-none-fails bash -c '! uzram swapoff 2>/dev/null'
finish
