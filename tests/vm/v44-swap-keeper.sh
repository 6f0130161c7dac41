# SPDX-License-Identifier: MIT
# v44-swap-keeper.sh - swap that survives its server (issue 31, doc/keep.md)
# on ublk: `uzram swapon` under its keeper, a hog of twice the memory
# available, four SIGKILLs of the server (one during an adoption) and a
# planned restart from a replaced program; every page of the hog read back
# right. Before the keeper, one kill failed every swap I/O and panicked the
# guest ("Attempted to kill init"). The body is tests/vm/guest-keeper.sh;
# v45 is the same over the kernel's NBD client on 6.1.
# vm-kernel: 6.12
# vm-mem: 256
# vm-timeout: 420
# vm-modules: ublk_drv
# vm-programs: hog
# vm-data: heap-python.core:64:8
SWAP_TRANSPORT=ublk
source /guest-keeper.sh
