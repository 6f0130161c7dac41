# SPDX-License-Identifier: MIT
# v10-ext4.sh - the kernel's NBD client as a file system's disk: mkfs.ext4
# on /dev/nbd0 served by uzram in the guest (Unix socket), an untar of the
# corpus, a file-by-file compare against the same untar on tmpfs after a
# remount (so the reads come from the device, not the page cache), and
# e2fsck of the unmounted device.
# vm-mem: 512
# vm-timeout: 300
# vm-modules: nbd ext4
# vm-data: files.tar
source /guest-lib.sh

uzram_start ext4 --size 256M || { fail serve "uzram serve did not start"; finish; }
check attach nbd_attach /dev/nbd0 /run/ext4.sock -b 4096
check mkfs bounded 60 mke2fs -q -t ext4 -F /dev/nbd0
mkdir -p /mnt/a /tmp/ref
check mount mount -t ext4 /dev/nbd0 /mnt/a
check mkdir mkdir /mnt/a/c
check untar bounded 120 tar -xf /data/files.tar -C /mnt/a/c
tar -xf /data/files.tar -C /tmp/ref
check umount umount /mnt/a
# Drop the page cache: the compare reads what the server holds.
echo 3 > /proc/sys/vm/drop_caches
check remount mount -t ext4 -o ro /dev/nbd0 /mnt/a
n=$(find /tmp/ref -type f | wc -l)
if bounded 120 diff -r --no-dereference /tmp/ref /mnt/a/c > /tmp/diff.out 2>&1; then
	pass compare "$n files and their symlinks equal"
else
	fail compare "$(head -n 5 /tmp/diff.out)"
fi
check umount-ro umount /mnt/a
check e2fsck bounded 60 e2fsck -fn /dev/nbd0
figure orig_data_size "$(stat_field /run/ext4.sock orig_data_size)" bytes
figure mem_used_total "$(stat_field /run/ext4.sock mem_used_total)" bytes
check detach bounded 30 nbd-client -d /dev/nbd0
uzram_stop
finish
