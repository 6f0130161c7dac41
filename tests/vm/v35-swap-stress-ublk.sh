# SPDX-License-Identifier: MIT
# v35-swap-stress-ublk.sh - stress-ng's vm stressors on swap, as a user
# would try a swap device: two workers, 512 MiB between them (1.5x the
# 384 MiB guest's RAM), every method in turn (--vm-method all: walks,
# gray codes, bit flips, random writes, ...), each checking what it wrote
# (--verify), a fixed number of passes so the time compares. Once on the
# guest's zram (lz4), then on `uzram serve --swap --ublk` at zstd
# (`uzram swapon`'s codec) in the same boot, devices of 896 MiB,
# bookworm-backports' 6.12. A worker killed by the OOM killer fails the run
# (guest-swap.sh, stress_run). The body is tests/vm/guest-swap.sh.
# vm-kernel: 6.12
# vm-mem: 384
# vm-cpus: 2
# vm-timeout: 2100
# vm-modules: ublk_drv zram lz4 zstd
# vm-programs: swapwatch stress-ng
SWAP_TRANSPORT=ublk
SWAP_WORKLOAD=stress
SWAP_SIZE=896M
SWAP_SERVE_OPTS="--algorithm zstd"
source /guest-swap.sh
