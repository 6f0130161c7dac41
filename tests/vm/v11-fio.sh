# SPDX-License-Identifier: MIT
# v11-fio.sh - fio through the kernel's NBD client with verify: random
# writes of mixed block sizes with a checksum in each block, read back and
# checked by fio, on /dev/nbd0 served by uzram in the guest.
# vm-mem: 768
# vm-timeout: 300
# vm-modules: nbd
# vm-programs: fio
source /guest-lib.sh

uzram_start fio --size 128M || { fail serve "uzram serve did not start"; finish; }
check attach nbd_attach /dev/nbd0 /run/fio.sock -b 4096
# verify=crc32c writes a header and checksum into every block; the
# verify pass after the writes reads all of them back. libaio direct I/O
# goes to the device, not the page cache; buffer_compress_percentage makes
# the blocks compressible, as a device of uzram's is meant for.
if bounded 200 fio --name=verify --filename=/dev/nbd0 --ioengine=libaio --direct=1 \
	--rw=randwrite --bsrange=4k-64k --size=64M --iodepth=8 --numjobs=1 \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --buffer_compress_percentage=50 \
	--refill_buffers=1 --randrepeat=0 --output-format=terse > /tmp/fio.out 2> /tmp/fio.err; then
	pass fio-verify "$(awk -F';' '{printf "write %s KiB/s, read %s KiB/s", $48, $7}' /tmp/fio.out)"
else
	fail fio-verify "$(tail -n 5 /tmp/fio.err)"
fi
failed=$(stat_field /run/fio.sock failed_writes)
check no-failed-writes test "$failed" = 0
check detach bounded 30 nbd-client -d /dev/nbd0
uzram_stop
finish
