# SPDX-License-Identifier: MIT
# v00-boot.sh - the bench itself: the guest boots, loads nbd and zram, and
# uzram runs (its libraries are all there).
# vm-mem: 256
# vm-timeout: 120
# vm-modules: nbd zram
source /guest-lib.sh
check modules-loaded test -e /sys/module/nbd -a -e /sys/module/zram
check uzram-runs bash -c 'uzram --help > /dev/null 2>&1 || uzram help > /dev/null 2>&1'
check nbd-client-runs bash -c 'nbd-client -V 2>&1 | grep -q "This is nbd-client"'
finish
