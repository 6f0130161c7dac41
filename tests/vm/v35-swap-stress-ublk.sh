# SPDX-License-Identifier: MIT
# v35-swap-stress-ublk.sh - stress-ng's vm stressors on swap, as a user
# would try a swap device: two workers, 512 MiB between them (1.5x the
# 384 MiB guest's RAM), every method in turn (--vm-method all: walks,
# gray codes, bit flips, random writes, ...), each checking what it wrote
# (--verify), a fixed amount of work (400,000 bogo ops) so the time
# compares. Once on the guest's zram (lz4), then on `uzram serve --swap
# --ublk` at zstd (`uzram swapon`'s codec) in the same boot,
# bookworm-backports' 6.12. A worker killed by the OOM killer fails the run
# (guest-swap.sh, stress_run). The body is tests/vm/guest-swap.sh.
#
# Devices of 448 MiB: the workers keep 240-340 MiB in swap, and every
# pass rewrites what it swaps in, so the kernel frees slots all the time.
# Before the server heard of freed slots (swapfree/), it kept a stale copy
# of each up to the device's size: at 896 MiB up to 40,000 pages more, the
# workers got that much less RAM and swapped 7-10x as many pages in, and
# the OOM killer ended one in one boot of two (2026-12-05, BENCHMARKS.md);
# VMT_SWAP_SIZE=896M runs it so. guest-swap.sh checks that the server
# stores no more than swap uses once the workers are gone.
# vm-kernel: 6.12
# vm-mem: 384
# vm-cpus: 2
# vm-timeout: 2100
# vm-modules: ublk_drv zram lz4 zstd
# vm-programs: swapwatch stress-ng
SWAP_TRANSPORT=ublk
SWAP_WORKLOAD=stress
SWAP_SIZE=448M
SWAP_SERVE_OPTS="--algorithm zstd"
source /guest-swap.sh
