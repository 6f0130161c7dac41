# SPDX-License-Identifier: MIT
# v31-swapon.sh - `uzram swapon` and `uzram swapoff` on 6.1, which has no
# ublk (v42 is swapon on ublk): the default transport is nbd, with
# zram-generator's defaults (min(RAM / 2, 4 GiB), zstd, priority 100),
# --transport ublk is refused, a second device beside the first, and
# swapoff taking every piece down: no swap, no client, no server, no
# files left.
# vm-mem: 256
# vm-timeout: 240
# vm-modules: nbd
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
pid=$(cat /run/uzram/swap/nbd0.pid)
check server-oom-protected test "$(cat /proc/$pid/oom_score_adj)" = -1000
# /run/uzram as uzram mount wants it, whoever made it first (at boot,
# uzram-swap@ and uzram-mount@ start side by side)
check runtime-dir-private test "$(stat -c %a /run/uzram)" = 700
check server-locked bash -c "grep -q 'VmLck:[[:space:]]*[1-9]' /proc/$pid/status"
# field 41 of stat: the policy, 2 = SCHED_RR, for every thread (serve_swap.c)
check server-realtime bash -c "! awk '{ sub(/.*\\) /, \"\"); if (\$39 != 2) print }' /proc/$pid/task/*/stat | grep -q ."
# 6.1 has no ublk: auto took nbd above; asked for, ublk is refused by name
check ublk-refused bash -c '! uzram swapon --transport ublk 2> /tmp/ublk.err && grep -q ublk_drv /tmp/ublk.err'
info "$(cat /tmp/ublk.err)"
check second-device bounded 120 uzram swapon --size 32M --algorithm lz4 --priority 5
check second-on-nbd1 bash -c "awk '\$1 == \"/dev/nbd1\" && \$5 == 5' /proc/swaps | grep -q nbd1"
check swapoff-all bounded 300 uzram swapoff
check no-swap-left test "$(tail -n +2 /proc/swaps | wc -l)" -eq 0
check no-server-left bash -c '! pidof uzram'
check no-client-left bash -c '! ls /sys/block/nbd0/pid /sys/block/nbd1/pid 2>/dev/null | grep -q .'
check no-files-left bash -c 'test -z "$(ls /run/uzram/swap/ | grep -v "\.log$")"'
check swapoff-none-fails bash -c '! uzram swapoff 2>/dev/null'
finish
