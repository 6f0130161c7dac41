#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t59-ublk-cli.sh - what `uzram serve --ublk` and `uzram ublk` say before any
# device exists, on any machine: the --ublk-* options need --ublk, bad values
# and commands are refused with status 2, and where the kernel has no ublk
# driver (most hosts; the VM bench's tests/vm/v40-ublk.sh and
# v41-ublk-faults.sh use the device) --ublk fails with status 1, names the
# driver, and leaves no socket behind.
source "$(dirname "$0")/functions.sh"
real_server || skip_all "--ublk is a uzram serve option"

# expect RC PATTERN ARGS...: uzram ARGS exits RC and says PATTERN on stderr
expect()
{
	local want=$1 pattern=$2 rc=0
	shift 2
	timeout 60 "$UZRAM" "$@" > "$T/out" 2> "$T/err" || rc=$?
	((rc == want)) || fail "uzram $* exited $rc, want $want; stderr: $(cat "$T/err")"
	grep -q -- "$pattern" "$T/err" ||
		fail "uzram $*: no '$pattern' in: $(cat "$T/err")"
}

step "the --ublk-* options need --ublk"
expect 2 "need --ublk" serve --size 16M --socket "$T/a.sock" --ublk-depth 8
expect 2 "need --ublk" serve --size 16M --socket "$T/a.sock" --ublk-recovery

step "bad values are refused"
expect 2 "bad value 'disk' for --ublk-copy" serve --ublk --ublk-copy disk
expect 2 "bad value '0' for --ublk-queues" serve --ublk --ublk-queues 0
expect 2 "bad value '5000' for --ublk-depth" serve --ublk --ublk-depth 5000
expect 2 "bad device number 'x'" ublk del x
expect 2 "unknown or incomplete command 'frob'" ublk frob
expect 2 "unknown or incomplete command 'del'" ublk del

if [[ ! -e /dev/ublk-control ]]; then
	step "no ublk driver: a clear error, nothing left"
	expect 1 "no ublk driver in this kernel" serve --ublk --size 16M \
		--socket "$T/b.sock"
	[[ ! -e $T/b.sock && ! -e $T/b.sock.ctl ]] ||
		fail "sockets left behind: $(ls "$T")"
	expect 1 "no ublk driver in this kernel" ublk list
fi
