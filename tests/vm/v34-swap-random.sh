# SPDX-License-Identifier: MIT
# v34-swap-random.sh - the random workload of v33-swap-random-ublk.sh over
# NBD: the guest's zram, then /dev/nbd0 attached by the kernel's NBD client
# to `uzram serve --swap` in the same guest (Debian 12's 6.1), with zstd,
# `uzram swapon`'s codec, as v33 (with lz4 the server's stale copies of
# freed slots got the hogs OOM-killed here as there; VMT_SERVE_OPTS runs
# another). The body is tests/vm/guest-swap.sh. Devices of 768 MiB: on 6.1
# zram itself was OOM-killed on 640 MiB (its swap full), which suffice on
# 6.12 (v33).
# vm-mem: 384
# vm-cpus: 2
# vm-timeout: 2100
# vm-modules: nbd zram lz4 zstd
# vm-programs: hog rhog swapwatch
# vm-data: heap-python.core:64:8
SWAP_TRANSPORT=nbd
SWAP_WORKLOAD=random
SWAP_SIZE=768M
SWAP_SERVE_OPTS="--algorithm zstd"
source /guest-swap.sh
