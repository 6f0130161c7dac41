# SPDX-License-Identifier: MIT
# v30-swap.sh - swap on uzram with its server in the same guest, beside
# swap on the guest kernel's own zram, in the same boot.
#
# A 384 MiB guest runs a hog of 768 MiB (2x its RAM; of its 335 MB the
# initramfs, uzram's libraries and all, holds about 70) that fills every page
# with real data (8 MiB of the corpus's Python core image, the kind of
# anonymous memory swap holds), then checks and rewrites every page, and checks them
# once more (tests/vm/hog.c): every pass swaps out and in. Once on
# zram (lz4, the kernel's), once on /dev/nbd0 attached by the kernel's NBD
# client (-swap) to `uzram serve --swap` (lz4) in this guest: the case where
# a server that needs memory to take a page out deadlocks. Each run must
# complete and read back every page right; the figures (time, pages
# swapped in and out per second, the memory the swapped data took) are
# printed as FIGURE lines for BENCHMARKS.md. vm.min_free_kbytes is raised
# as doc/block-device.md advises, for both. While the hog runs on uzram,
# tests/vm/swapwatch.c reports every 30 s what the server's threads are doing
# (state, wchan, kernel stack) and, if swap-out stopped, the kernel's
# blocked tasks: a stall leaves its cause in the log (issue 22 found it so).
# uzram's swap is on with discard, as `uzram swapon` does: freed swap
# clusters reach the server as trims (zram hears of each freed slot). So
# the server keeps a freed slot's page until the slot is written again or
# its whole cluster is free: its stale pages are bounded by the swap space
# that is not in use. Both devices are 896 MiB, what the hog and the
# guest's own swapped files take at the peak (875 MB) and a little more,
# as one sizes swap for a workload; with 1 GiB, uzram's peak memory went
# from 236 to 273 MB between two runs and the second was OOM-killed.
# The body is tests/vm/guest-swap.sh, shared with v32-swap-ublk.sh (the same
# on /dev/ublkbN in bookworm-backports' 6.12).
# vm-mem: 384
# vm-cpus: 2
# vm-timeout: 2100
# vm-modules: nbd zram lz4 zstd
# vm-programs: hog rhog swapwatch
# vm-data: heap-python.core:64:8
SWAP_TRANSPORT=nbd
source /guest-swap.sh
