#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t59-ublk-cli.sh - what `uzram serve --ublk` and `uzram ublk` say before any
# device exists, on any machine: the --ublk-* options need --ublk, bad values
# and commands are refused with status 2, and where the kernel has no ublk
# driver (most hosts; the VM bench's tests/vm/v40-ublk.sh and
# v41-ublk-faults.sh use the device) --ublk fails with status 1, names the
# driver, and leaves no socket behind. `uzram ublk add`, which runs `uzram
# serve --ublk`, names `uzram ublk add` in every message and in its --help, not
# `uzram serve`.
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

# expect_ublk RC PATTERN ARGS...: expect, and every line says `uzram ublk add`, the command
# typed, and never serve
expect_ublk()
{
	expect "$@"
	! grep -q 'serve' "$T/err" ||
		fail "uzram ${*:3} names serve: $(cat "$T/err")"
	! grep -v '^uzram ublk add: ' "$T/err" | grep -vq '^see `uzram ublk add --help`$' ||
		fail "uzram ${*:3}: a line not from uzram ublk add: $(cat "$T/err")"
}

step "uzram ublk add's messages and --help name uzram ublk add"
expect_ublk 2 "^uzram ublk add: unknown option '--bogus'" ublk add --bogus
expect_ublk 2 "^uzram ublk add: bad value 'x' for --size" ublk add --size x
expect_ublk 2 "^uzram ublk add: --keeper --ublk needs --ublk-id" \
	ublk add --size 16M --keeper
expect_ublk 1 "^uzram ublk add: --image $T/none/i: cannot write" \
	ublk add --size 16M --image "$T/none/i"
expect_ublk 1 "^uzram ublk add: cannot create the device: backing store" \
	ublk add --size 16M --backing "$T/none/b"
"$UZRAM" ublk add --size 16M --dry-run > "$T/out" ||
	fail "ublk add --dry-run failed"
grep -q '^uzram ublk add: --dry-run: a 16777216-byte' "$T/out" ||
	fail "ublk add --dry-run: $(cat "$T/out")"
"$UZRAM" ublk add --help > "$T/out" || fail "ublk add --help failed"
head -1 "$T/out" | grep -qx 'usage: uzram ublk add \[OPTION\]\.\.\.' &&
	grep -q -- '--ublk-queues' "$T/out" && ! grep -q 'over NBD until' "$T/out" ||
	fail "ublk add --help is not its own: $(head -3 "$T/out")"

if [[ ! -e /dev/ublk-control ]]; then
	step "no ublk driver: a clear error, nothing left"
	expect 1 "no ublk driver in this kernel" serve --ublk --size 16M \
		--socket "$T/b.sock"
	[[ ! -e $T/b.sock && ! -e $T/b.sock.ctl ]] ||
		fail "sockets left behind: $(ls "$T")"
	expect 1 "no ublk driver in this kernel" ublk list
	expect_ublk 1 "^uzram ublk add: /dev/ublk-control: no ublk driver" \
		ublk add --size 16M --socket "$T/c.sock"
fi
