# SPDX-License-Identifier: MIT
# v13-multiconn.sh - `nbd-client -connections 4`: the kernel spreads its
# requests over four sockets to one server, which must see them all as one
# device (multi-conn: a flush on one covers writes on the others). Four
# writers at once through the page cache, a flush, a read back after the
# cache is dropped.
# vm-mem: 512
# vm-timeout: 240
# vm-modules: nbd
# vm-data: files.tar
source /guest-lib.sh

uzram_start mc --size 64M || { fail serve "uzram serve did not start"; finish; }
s=/run/mc.sock
check attach nbd_attach /dev/nbd0 $s -b 4096 -connections 4
conns=$(stat_field $s connections_current)
check four-connections test "$conns" -eq 4
size=$(stat -c %s /data/files.tar)
mib=$(((size + 1048575) / 1048576))
pids=()
for i in 0 1 2 3; do
	dd if=/data/files.tar of=/dev/nbd0 bs=1M seek=$((i * mib)) conv=notrunc status=none &
	pids+=($!)
done
ok=0
for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
check four-writers test $ok -eq 4
check flush sync
echo 3 > /proc/sys/vm/drop_caches
ok=0
for i in 0 1 2 3; do
	cmp -n "$size" /data/files.tar <(dd if=/dev/nbd0 bs=1M skip=$((i * mib)) count=$mib status=none) &&
		ok=$((ok + 1))
done
check four-copies-read-back test $ok -eq 4
check detach bounded 30 nbd-client -d /dev/nbd0
uzram_stop
finish
