# SPDX-License-Identifier: MIT
# v43-ublk-swapon-fast.sh - `uzram swapon --fast-algorithm lz4:8` on ublk
# (Linux 6.12), write fast, re-encode later on swap (issue 30 item 2): a
# hog of 1.5x the memory available swaps out with lz4:8 and reads every
# page back while the server's thread ("uzram-reenc", SCHED_RR like every
# other) re-encodes to zstd; once the hog is done the thread has re-encoded
# pages by itself; `uzram swapoff` leaves nothing.
# Not in make test nor make test-vm (run it by name): of five runs on a
# host at load 7 to 15, the first passed (the hog in 11 s) and four
# stalled, kswapd0 and a server thread blocked for over 120 s, two of them
# after the re-encoder stopped allocating under slot locks; with
# --reencode-age 512 (nothing re-encoded during the hog) it passed once
# (doc/block-device.md). Since the server locks its files on tmpfs
# (dfec314) it has passed every run (6 of 6 up to 2026-12-04, load 1.6-10);
# kept off by default on swap for time, not safety (BENCHMARKS.md, "Write
# fast or pin the queues?").
# vm-kernel: 6.12
# vm-mem: 256
# vm-timeout: 240
# vm-modules: ublk_drv
# vm-programs: hog
# vm-data: heap-python.core:64:8
source /guest-lib.sh

sysctl -q -w vm.min_free_kbytes=16384

check swapon-fast bounded 120 uzram swapon --algorithm zstd --fast-algorithm lz4:8
line=$(awk '$1 ~ /^\/dev\/ublkb[0-9]+$/' /proc/swaps)
dev=$(echo "$line" | awk '{ print $1 }')
check on-ublk test -n "$dev" -a -b "${dev:-/nonexistent}"
f=/run/uzram/swap/${dev#/dev/}
pid=$(cat "$f.pid")
check reencoder-thread bash -c "grep -qx uzram-reenc /proc/$pid/task/*/comm"
check queue-threads-named bash -c "grep -qx uzram-ublk-q0 /proc/$pid/task/*/comm"
check server-realtime bash -c "! awk '{ sub(/.*\\) /, \"\"); if (\$39 != 2) print }' /proc/$pid/task/*/stat | grep -q ."

avail_mib=$(($(awk '/MemAvailable/ { print $2 }' /proc/meminfo) / 1024))
hog_mib=$((avail_mib * 3 / 2))
info "MemAvailable $avail_mib MiB: hog of $hog_mib MiB"
t0=$(now)
bounded 150 hog $hog_mib /data/heap-python.core 1 > /tmp/hog.out 2>&1
rc=$?
cat /tmp/hog.out
check hog-completes test "$rc" = 0
info "hog: status $rc in $(elapsed "$t0") s"
info "stat: $(uzram stat --socket "$f.sock" --all | awk '$1 ~ /^(pages_stored|pages_recompressed|compr_data_size|mem_used_total|mem_used_max|failed_writes)$/' | tr -s ' \n' ' ')"
check pages-reencoded test "$(stat_field "$f.sock" pages_recompressed)" -gt 0

check swapoff bounded 300 uzram swapoff
check no-swap-left test "$(tail -n +2 /proc/swaps | wc -l)" -eq 0
check no-server-left bash -c '! pidof uzram'
finish
