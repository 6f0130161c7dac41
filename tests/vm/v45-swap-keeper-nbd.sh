# SPDX-License-Identifier: MIT
# v45-swap-keeper-nbd.sh - v44 over the kernel's NBD client on Debian 12's
# 6.1 (issue 31): `uzram swapon --transport nbd` under its keeper, which
# attaches /dev/nbdN to each new server through netlink
# (NBD_CMD_RECONFIGURE, cli/serve/serve_nbdlink.c); a hog of twice the
# memory available, four SIGKILLs of the server (one during an adoption)
# and a planned restart from a replaced program; the requests in flight on
# the dead socket are sent again by the kernel, and every page of the hog
# reads back right. Before, one kill failed the device's I/O (EIO) and with
# it every process that had pages in swap. The body is
# tests/vm/guest-keeper.sh.
# vm-mem: 256
# vm-timeout: 720
# vm-modules: nbd
# vm-programs: hog
# vm-data: heap-python.core:64:8
SWAP_TRANSPORT=nbd
SWAP_HOG_PASSES=1
SWAP_HOG_WAIT=480
source /guest-keeper.sh
