# SPDX-License-Identifier: MIT
# v32-swap-ublk.sh - the swap test of v30-swap.sh on ublk: the hog of 2x
# the guest's RAM on the guest kernel's zram, then on the /dev/ublkbN of
# `uzram serve --swap --ublk` in the same guest (bookworm-backports' 6.12,
# the first Debian kernel with ublk_drv). The body is tests/vm/guest-swap.sh.
# vm-kernel: 6.12
# vm-mem: 384
# vm-cpus: 2
# vm-timeout: 2100
# vm-modules: ublk_drv zram lz4 zstd
# vm-programs: hog rhog swapwatch
# vm-data: heap-python.core:64:8
SWAP_TRANSPORT=ublk
source /guest-swap.sh
