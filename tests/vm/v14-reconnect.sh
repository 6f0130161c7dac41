# SPDX-License-Identifier: MIT
# v14-reconnect.sh - disconnect and reconnect: data written through one
# attachment of /dev/nbd0 is there, byte for byte, through the next one to
# the same server; the device is empty (size 0) between the two; and a
# second device attached beside it sees the same data.
# vm-mem: 512
# vm-timeout: 240
# vm-modules: nbd
# vm-data: files.tar
source /guest-lib.sh

uzram_start rc --size 64M || { fail serve "uzram serve did not start"; finish; }
s=/run/rc.sock
size=$(stat -c %s /data/files.tar)
check attach nbd_attach /dev/nbd0 $s -b 4096
check write bounded 60 dd if=/data/files.tar of=/dev/nbd0 bs=1M oflag=direct status=none
check detach bounded 30 nbd-client -d /dev/nbd0
check size-zero-detached test "$(cat /sys/block/nbd0/size)" -eq 0
check reattach nbd_attach /dev/nbd0 $s -b 4096
check read-back cmp -n "$size" /data/files.tar /dev/nbd0
check attach-second nbd_attach /dev/nbd1 $s -b 4096
check read-second cmp -n "$size" /data/files.tar /dev/nbd1
check detach-second bounded 30 nbd-client -d /dev/nbd1
for i in 1 2 3; do
	bounded 30 nbd-client -d /dev/nbd0 > /dev/null &&
		nbd_attach /dev/nbd0 $s -b 4096 > /dev/null || break
done
check three-more-cycles test "$i" -eq 3
check read-back-again cmp -n "$size" /data/files.tar /dev/nbd0
check detach bounded 30 nbd-client -d /dev/nbd0
uzram_stop
finish
