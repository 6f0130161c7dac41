# SPDX-License-Identifier: MIT
# v41-ublk-faults.sh - a killed `uzram serve --ublk`: without recovery the
# device's I/O fails with EIO and nothing hangs, and `uzram ublk del`
# removes what is left; with --ublk-recovery, I/O issued after the kill
# waits, a new server started with --ublk-take-over and the image the old
# one saved serves the same /dev/ublkbN, and the waiting read completes
# with the saved bytes. Bad uses fail with a clear message.
# vm-kernel: 6.12
# vm-mem: 768
# vm-timeout: 600
# vm-modules: ublk_drv
# vm-programs: cmp setpriv
# vm-data: files.tar
source /guest-lib.sh

ublk_of() { sed -n 's/^uzram serve: block device //p' "/run/$1.out"; }
# $1's exit status, waiting at most $2 seconds (then it is killed: 137).
# It polls rather than leaving a killer behind in the background: once, under
# make test's load, the take-over's new server died of a SIGKILL that
# nothing in uzram sends, right after the previous wait here (ci13 of
# a785916), and a killer that outlives its wait is one sender fewer.
wait_bounded()
{
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$1" 2>/dev/null && kill -KILL "$1"
	wait "$1"
}
dd if=/data/files.tar of=/tmp/data bs=1M count=8 2>/dev/null
test "$(wc -c < /tmp/data)" = 8388608 || fail data "no 8 MiB of corpus"

# ---- SIGKILL without recovery: EIO, no hang ----
if uzram_start k1 --ublk --size 64M; then
	dev=$(ublk_of k1); id=${dev#/dev/ublkb}
	bounded 60 dd if=/tmp/data of="$dev" bs=1M oflag=direct 2>/dev/null
	# a reader with the device open, which must end with EIO once the
	# server is gone (it passes the device's end only after minutes)
	dd if="$dev" of=/dev/null bs=4k iflag=direct count=100000000 2> /tmp/reader.err &
	reader=$!
	sleep 1
	kill -KILL "$UZRAM_PID"; wait "$UZRAM_PID" 2>/dev/null
	wait_bounded "$reader" 60
	rc=$?
	info "the reader: status $rc, $(tail -c 200 /tmp/reader.err)"
	check reader-eio bash -c "(( $rc != 0 && $rc != 137 )) && grep -qi 'input/output error' /tmp/reader.err"
	bounded 30 dd if="$dev" of=/dev/null bs=4k count=1 iflag=direct 2> /tmp/dd.err
	rc=$?
	info "a new read: status $rc, $(head -c 200 /tmp/dd.err)"
	check new-read-fails test "$rc" -ne 0 -a "$rc" -ne 137
	check listed-dead bash -c "uzram ublk list | awk '\$1 == $id' | grep -qv live"
	check del bounded 30 uzram ublk del "$id"
	check del-leaves-nothing bash -c "! test -e /sys/class/ublk-char/ublkc$id && ! test -e $dev"
	check del-again-fails bash -c "! uzram ublk del $id 2> /tmp/del.err && grep -q 'no such device' /tmp/del.err"
else
	fail start-k1 "uzram serve --ublk did not start"
fi

# ---- SIGKILL with recovery: a new server takes the device over ----
rm -f /tmp/r.img
if uzram_start r1 --ublk --ublk-recovery --size 64M --image /tmp/r.img; then
	dev=$(ublk_of r1); id=${dev#/dev/ublkb}
	bounded 60 dd if=/tmp/data of="$dev" bs=1M oflag=direct 2>/dev/null
	check save bounded 60 uzram ctl --socket /run/r1.sock save
	r1_pid=$UZRAM_PID
	kill -KILL "$UZRAM_PID"; wait "$UZRAM_PID" 2>/dev/null
	sleep 1
	check quiesced bash -c "uzram ublk list | awk '\$1 == $id { print \$2 }' | grep -qx quiesced"
	rm -f /tmp/back
	bounded 120 dd if="$dev" of=/tmp/back bs=1M count=8 iflag=direct 2>/tmp/dd-wait.err &
	reader=$!
	sleep 2
	check read-waits kill -0 "$reader"
	rm -f /run/r1.sock
	if uzram_start r2 --ublk --ublk-take-over "$id" --image /tmp/r.img; then
		check same-device test "$(ublk_of r2)" = "$dev"
		check waiting-read-done wait_bounded "$reader" 60
		check recovered-data cmp /tmp/back /tmp/data
		info "read while waiting: $(wc -c < /tmp/back) bytes; $(cmp /tmp/back /tmp/data 2>&1 | head -c 200)"
		bounded 60 dd if="$dev" of=/tmp/back2 bs=1M count=8 iflag=direct 2>/tmp/dd2.err
		check read-after-take-over cmp /tmp/back2 /tmp/data
		if ! cmp -s /tmp/back2 /tmp/data; then
			# once seen under make test's load (2026-12-05): the new
			# server gone, the device waiting again; what to look at
			info "r1 was pid $r1_pid, r2 is pid $UZRAM_PID ($(kill -0 "$UZRAM_PID" 2>/dev/null && echo alive || echo gone));" \
				"dd: $(head -c 200 /tmp/dd2.err); devices: $(uzram ublk list 2>&1 | tr '\n' ' ')"
			info "r2's messages: $(tail -c 800 /run/r2.err | tr '\n' ' ')"
		fi
		check write-after bounded 60 dd if=/tmp/data of="$dev" bs=1M seek=16 oflag=direct
		kill -TERM "$UZRAM_PID"
		check stop-r2 wait_bounded "$UZRAM_PID" 60
		check nothing-left bash -c "! test -e /sys/class/ublk-char/ublkc$id && ! test -e $dev"
	else
		fail take-over "$(cat /run/r2.err)"
		uzram ublk del "$id"
	fi
else
	fail start-r1 "uzram serve --ublk --ublk-recovery did not start"
fi

# ---- clear errors ----
check take-over-none bash -c "! uzram serve --socket /run/x.sock --ublk --ublk-take-over 77 2> /tmp/e && grep -q 'no such ublk device' /tmp/e"
check options-need-ublk bash -c "! uzram serve --socket /run/x.sock --ublk-depth 8 2> /tmp/e && grep -q 'need --ublk' /tmp/e"
# not root, and /dev/ublk-control is root's (0600): say that root is needed
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
nobody uzram ublk list > /dev/null 2> /tmp/e
rc=$?
check not-root-message bash -c "(( $rc == 1 )) && grep -q 'need root' /tmp/e"
info "not root: $(cat /tmp/e)"
check nothing-at-all bash -c "! ls /sys/class/ublk-char/ | grep -q ."
finish
