# SPDX-License-Identifier: MIT
# v01-boot-6.12.sh - the backports kernel boots, and has ublk_drv: the bench
# for tests of a ublk server.
# vm-kernel: 6.12
# vm-mem: 256
# vm-timeout: 120
# vm-modules: nbd ublk_drv
source /guest-lib.sh
check ublk-control test -c /dev/ublk-control
check kernel-6.12 bash -c 'uname -r | grep -q "^6\.12\."'
check uzram-runs bash -c 'uzram --help > /dev/null 2>&1 || uzram help > /dev/null 2>&1'
finish
