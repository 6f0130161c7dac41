# SPDX-License-Identifier: MIT
# v42-ublk-swapon.sh - `uzram swapon` where the kernel has ublk (Linux 6.12):
# the default transport is ublk (/dev/ublkbN, made by the server itself, no
# nbd-client), with zram-generator's defaults as v31 checks them and the
# server held as `serve --swap` holds it (oom_score_adj -1000, memory
# locked, every thread SCHED_RR, the ublk queue threads included); a hog
# of 1.5x the memory available swaps to it and reads every page back, and
# so does one in a memory cgroup of a third of its size (a container);
# `--transport nbd` still works beside it; `uzram swapoff` then
# leaves no swap, no server, no ublk device or node and no pid file. The
# server's program, on the guest's tmpfs, must be locked whole.
# vm-kernel: 6.12
# vm-mem: 256
# vm-timeout: 360
# vm-modules: ublk_drv nbd
# vm-programs: hog
# vm-data: heap-python.core:64:8
source /guest-lib.sh

# as doc/block-device.md advises for small machines
sysctl -q -w vm.min_free_kbytes=16384
vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }

ram_kib=$(awk '/MemTotal/ { print $2 }' /proc/meminfo)
check swapon-defaults bounded 120 uzram swapon
line=$(awk '$1 ~ /^\/dev\/ublkb[0-9]+$/' /proc/swaps)
info "/proc/swaps: $line"
dev=$(echo "$line" | awk '{ print $1 }')
check default-is-ublk test -n "$dev" -a -b "${dev:-/nonexistent}"
f=/run/uzram/swap/${dev#/dev/}
size_kib=$(echo "$line" | awk '{ print $3 }')
prio=$(echo "$line" | awk '{ print $5 }')
# mkswap keeps one page for its header
check size-half-ram test "${size_kib:-0}" -ge $((ram_kib / 2 - 8)) -a "${size_kib:-0}" -le $((ram_kib / 2))
check priority-100 test "$prio" = 100
check algorithm-zstd test "$(stat_field "$f.sock" algorithm)" = zstd
check no-nbd-client bash -c '! ls /sys/block/nbd*/pid 2>/dev/null | grep -q .'
check runtime-dir-private test "$(stat -c %a /run/uzram)" = 700
pid=$(cat "$f.pid")
# under its keeper (serve --keeper, doc/keep.md), which DEV.pid names
check under-keeper grep -q '^uzram serve: --keeper: the server is pid ' "$f.log"
pid=$(sed -n 's/^uzram serve: --keeper: the server is pid //p' "$f.log" | tail -n 1)
for p in $(pidof uzram); do proc_memory "$p"; done
# the keeper and the standby hold a balloon each (serve_keep.c), of RAM /
# 64 and at least 2 MiB: with its own MiB or two, no more than 2 MiB past
# that (a fixed 8 MiB each was 16 of the 73 MiB available here)
check keeper-standby-small bash -c "for p in \$(pidof uzram); do test \$p = $pid && continue
	a=\$(awk '/^RssAnon:/ { print \$2 }' /proc/\$p/status)
	echo \"# pid \$p: RssAnon \$a kB\"; test \$a -le \$(($ram_kib / 64 + 4096)) || exit 1; done"
check server-oom-protected test "$(cat /proc/$pid/oom_score_adj)" = -1000
check server-locked bash -c "grep -q 'VmLck:[[:space:]]*[1-9]' /proc/$pid/status"
# field 41 of stat: the policy, 2 = SCHED_RR, for every thread (serve_swap.c)
check server-realtime bash -c "! awk '{ sub(/.*\\) /, \"\"); if (\$39 != 2) print }' /proc/$pid/task/*/stat | grep -q ."
info "server threads: $(ls /proc/$pid/task | wc -l); $(grep -h 'memory locked' "$f.log")"
# without --mem-limit the reserve is RAM / 64 within 4..16 MiB, and past
# it no queue thread faults memory in: a no-fault pool of RAM / 256
# (1..4 MiB) up to RAM / 64 (4..16 MiB) kept filled by a refill thread
# (serve.h; a reserve of RAM / 64 that the queue threads grew past by
# faulting deadlocked v50 on 7.3)
share() { local b=$((ram_kib * 1024 / $1)); ((b < $2 << 20)) && b=$(($2 << 20)); ((b > $3 << 20)) && b=$(($3 << 20)); echo $((b / 4096 * 4096)); }
reserved=$(sed -n 's/.*), \([0-9]*\) MiB reserved.*/\1/p' "$f.log" | tail -n 1)
check reserve-ram-64 test "${reserved:-0}" -eq $(($(share 64 4 16) >> 20))
pool=$(sed -n 's/.*a no-fault pool of \([0-9]*-[0-9]*\) KiB.*/\1/p' "$f.log" | tail -n 1)
check no-fault-pool test "$pool" = "$(($(share 256 1 4) >> 10))-$(($(share 64 4 16) >> 10))"
# the guest's root is tmpfs: every page of the server's program is locked,
# not only those it ran (a page it first runs under pressure could be
# swapped out to its own device; doc/block-device.md, the hang of v42):
# each of its mappings locked (VmFlags lo) and resident whole (Rss = Size).
# Not smaps' Locked:, which is the Pss of a locked mapping, a share of the
# pages that the keeper and the standby map too
check program-locked awk '/^[0-9a-f]+-/ { m = $NF == "/usr/bin/uzram" } m && /^Size:/ { s += $2 }
	m && /^Rss:/ { r += $2 } m && /^VmFlags:/ && !/ lo( |$)/ { u++ }
	END { print "# program: " s " kB, resident " r " kB, " u + 0 " mappings unlocked"; exit !(s > 0 && r == s && !u) }' "/proc/$pid/smaps"

# a hog of 1.5x the memory available: it must swap, and fit beside the
# device (RAM / 2; 1.5x the guest's RAM would not: its RAM is 210 MiB, of
# which the initramfs holds about 70 and the server's program more)
avail_mib=$(($(awk '/MemAvailable/ { print $2 }' /proc/meminfo) / 1024))
hog_mib=$((avail_mib * 3 / 2))
info "MemTotal $((ram_kib / 1024)) MiB, MemAvailable $avail_mib MiB: hog of $hog_mib MiB"
out0=$(vmstat pswpout); in0=$(vmstat pswpin)
t0=$(now)
bounded 150 hog $hog_mib /data/heap-python.core 1 > /tmp/hog.out 2>&1
rc=$?
out=$(($(vmstat pswpout) - out0)); in=$(($(vmstat pswpin) - in0))
cat /tmp/hog.out
check hog-completes test "$rc" = 0
info "hog: status $rc in $(elapsed "$t0") s, pswpout $out, pswpin $in"
check hog-swapped test "$out" -gt 1000
info "server: $(grep -E 'VmRSS|VmLck' /proc/$pid/status | tr -s ' \t\n' ' ')"
info "stat: $(uzram stat --socket "$f.sock" --all | awk '$1 ~ /^(pages_stored|mem_used_total|mem_used_max|failed_writes|refill_.*)$/' | tr -s ' \n' ' ')"
for k in refill_waits refill_misses refill_made; do
	figure "$k" "$(stat_field "$f.sock" $k)" ""
done

# a hog in a memory cgroup whose limit is a third of it (a container, or a
# service with MemoryMax=): it swaps by its cgroup's reclaim while the
# guest has memory to spare, and reads every page back; the cgroup never
# meets its OOM killer
grep -q " /sys/fs/cgroup cgroup2 " /proc/mounts || mount -t cgroup2 none /sys/fs/cgroup
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/hog
cg_mib=$((avail_mib / 2))
echo $(((cg_mib / 3) << 20)) > /sys/fs/cgroup/hog/memory.max
out0=$(vmstat pswpout); in0=$(vmstat pswpin)
t0=$(now)
bounded 150 sh -c 'echo $$ > /sys/fs/cgroup/hog/cgroup.procs && exec hog "$1" /data/heap-python.core 1' \
	sh "$cg_mib" > /tmp/cghog.out 2>&1
rc=$?
out=$(($(vmstat pswpout) - out0)); in=$(($(vmstat pswpin) - in0))
cat /tmp/cghog.out
check cgroup-hog-completes test "$rc" = 0
info "hog of $cg_mib MiB in a cgroup of $((cg_mib / 3)) MiB: status $rc in $(elapsed "$t0") s, pswpout $out, pswpin $in"
check cgroup-hog-swapped test "$out" -gt 1000
check cgroup-no-oom test "$(awk '$1 == "oom_kill" { print $2 }' /sys/fs/cgroup/hog/memory.events)" = 0
rmdir /sys/fs/cgroup/hog

# the NBD transport, beside it
check swapon-nbd bounded 120 uzram swapon --transport nbd --size 32M --algorithm lz4 --priority 5
check nbd-on-nbd0 bash -c "awk '\$1 == \"/dev/nbd0\" && \$5 == 5' /proc/swaps | grep -q nbd0"
check nbd-pid-file test -s /run/uzram/swap/nbd0.pid
# a server that does not start: swapon fails and leaves nothing of it
check failed-swapon-undone bash -c '! timeout -s KILL 60 uzram swapon --algorithm nosuch 2> /tmp/bad.err &&
	! ls /run/uzram/swap/ | grep -q "^ublkb1\.pid" && ! test -e /sys/class/ublk-char/ublkc1'
info "$(cat /tmp/bad.err)"
check device-transport-mismatch bash -c '! uzram swapon --transport nbd --device /dev/ublkb7 2>/dev/null'

check swapoff-all bounded 300 uzram swapoff
check no-swap-left test "$(tail -n +2 /proc/swaps | wc -l)" -eq 0
check no-server-left bash -c '! pidof uzram'
check no-ublk-node-left bash -c '! ls /dev | grep -q "^ublk[bc][0-9]"'
check no-ublk-device-left test -z "$(ls /sys/class/ublk-char/ 2>/dev/null)"
check no-client-left bash -c '! ls /sys/block/nbd*/pid 2>/dev/null | grep -q .'
check no-files-left bash -c 'test -z "$(ls /run/uzram/swap/ | grep -v "\.log$")"'
check swapoff-none-fails bash -c '! uzram swapoff 2>/dev/null'
finish
