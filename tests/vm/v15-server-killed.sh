# SPDX-License-Identifier: MIT
# v15-server-killed.sh - the server killed with SIGKILL under I/O: the
# guest's readers and writers of /dev/nbd0 fail with EIO within the NBD
# timeout (-timeout 10), every process ends, and the device detaches and
# can be attached to a new server.
# vm-mem: 512
# vm-timeout: 240
# vm-modules: nbd
source /guest-lib.sh

timeout_s=10
uzram_start k --size 256M || { fail serve "uzram serve did not start"; finish; }
check attach nbd_attach /dev/nbd0 /run/k.sock -b 4096 -timeout $timeout_s
# A writer and a reader that would run for minutes.
dd if=/dev/urandom of=/dev/nbd0 bs=64k oflag=direct status=none 2> /tmp/w.err &
w=$!
(while dd if=/dev/nbd0 of=/dev/null bs=64k iflag=direct status=none; do :; done) 2> /tmp/r.err &
r=$!
sleep 2
t0=$(now)
kill -KILL "$UZRAM_PID"
wait "$UZRAM_PID" 2>/dev/null
# Both must end by themselves within the timeout, and a bit for TCG.
for i in $(seq $(((timeout_s + 20) * 10))); do
	kill -0 $w 2>/dev/null || kill -0 $r 2>/dev/null || break
	sleep 0.1
done
took=$(elapsed "$t0")
if kill -0 $w 2>/dev/null || kill -0 $r 2>/dev/null; then
	fail io-ended "a reader or writer still runs $took s after the kill"
	kill -KILL $w $r 2>/dev/null
else
	pass io-ended "in $took s"
fi
wait $w; wrc=$?
wait $r
check writer-failed test $wrc -ne 0
check writer-eio grep -q 'Input/output error' /tmp/w.err
check reader-eio grep -q 'Input/output error' /tmp/r.err
check read-fails-now bash -c '! dd if=/dev/nbd0 of=/dev/null bs=4k count=1 iflag=direct status=none'
bounded 30 nbd-client -d /dev/nbd0 > /dev/null 2>&1
check detached bash -c 'test "$(cat /sys/block/nbd0/size)" -eq 0'
uzram_start k2 --size 16M || fail serve2 "the second server did not start"
check attach-new nbd_attach /dev/nbd0 /run/k2.sock -b 4096
check new-device-works bash -c 'dd if=/dev/zero of=/dev/nbd0 bs=1M count=4 oflag=direct status=none && cmp -n 4194304 /dev/nbd0 /dev/zero'
check detach bounded 30 nbd-client -d /dev/nbd0
uzram_stop
finish
