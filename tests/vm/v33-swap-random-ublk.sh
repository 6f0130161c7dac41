# SPDX-License-Identifier: MIT
# v33-swap-random-ublk.sh - issue 30's random workload on swap: two
# processes fill 640 MiB (1.67x the guest's 384 MiB) with real memory-image
# pages (1/16 zero, 1/16 random), read and rewrite random pages, then check
# every page (tests/vm/rhog.c). Once on the guest's zram (lz4), once on
# `uzram serve --swap --ublk` with zstd (`uzram swapon`'s default codec)
# in the same boot, devices of 896 MiB (the issue's), bookworm-backports'
# 6.12. Before the server heard of freed slots (swapfree/), it kept stale
# copies of them up to the swap space not in use (doc/block-device.md):
# with lz4 it was OOM-killed in every boot at 896 MiB (and completed at
# 640), and zstd made those copies cheap enough to complete (BENCHMARKS.md,
# "Random rewrites"; VMT_SERVE_OPTS and VMT_SWAP_SIZE=640M run the old
# comparison). Besides time and peak memory, it prints what each device
# still holds once the hog exited (swap in use, pages stored, the discards
# the kernel sent; guest-swap.sh checks that the server stores no more
# than swap uses), and again after the kernel was asked to reclaim. The
# body is tests/vm/guest-swap.sh.
# vm-kernel: 6.12
# vm-mem: 384
# vm-cpus: 2
# vm-timeout: 2100
# vm-modules: ublk_drv zram lz4 zstd
# vm-programs: hog rhog swapwatch
# vm-data: heap-python.core:64:8
SWAP_TRANSPORT=ublk
SWAP_WORKLOAD=random
SWAP_SIZE=896M
SWAP_SERVE_OPTS="--algorithm zstd"
source /guest-swap.sh
