#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t50-bad-client.sh - malformed and hostile NBD clients (nbd_bad_client.py)
# against `uzram serve`: bad magics and flags, truncated handshakes, an
# option declaring 4 GiB, unknown options, exports and commands, requests
# past the end and over 32 MiB, writes to a read-only export, half-sent
# writes, clients that vanish with replies pending, and a full memory limit.
#
# Before the cases, 4 MiB of real data is written and acknowledged; after
# EACH case the server must still run, serve a fresh client (nbdcopy, a
# real client) and return that data unchanged, with the rest of the export
# still zero.
source "$(dirname "$0")/functions.sh"
require nbdcopy nbdinfo python3

BAD=$ITEST_DIR/nbd_bad_client.py
MiB=$((1024 * 1024))
SIZE=$((48 * MiB))

# healthy NAME EXPECTED-IMAGE: the server is alive, a fresh nbdcopy reads the
# whole export, and it equals EXPECTED-IMAGE.
healthy()
{
	local name=$1 want=$2 got

	assert_alive "$name"
	got=$(nbdcopy "${URI[$name]}" - | sha256sum | cut -d' ' -f1) ||
		fail "nbdcopy from server $name failed after the case"
	[[ $got == "$(sha "$want")" ]] || {
		nbdcopy "${URI[$name]}" "$T/got.img"
		fail "server $name: data acknowledged before the case changed:" \
			"$(cmp "$want" "$T/got.img" | head -n 1)"
	}
}

# bad NAME CASE [ARGS]: run one nbd_bad_client.py case against server NAME.
bad()
{
	local name=$1 case=$2
	shift 2
	python3 "$BAD" --socket "${SOCK[$name]}" --pid "${PID[$name]}" "$@" "$case" ||
		fail "nbd_bad_client.py $case failed (see above)"
}

step "start a 48 MiB export 'data' and write 4 MiB of real data"
start_server s --size 48M --export data
head -c $((4 * MiB)) "$CORPUS/files.tar" >"$T/pattern"
cp "$T/pattern" "$T/expected.img"
truncate -s $SIZE "$T/expected.img"
nbdcopy --flush "$T/pattern" "${URI[s]}"
healthy s "$T/expected.img"

step "the NBD_OPT_EXPORT_NAME handshake and simple replies read that data"
bad s export-name --export data --expect "$T/pattern" --size $SIZE
healthy s "$T/expected.img"

step "every advertised command and flag, used right, succeeds"
bad s commands --export data --start $((8 * MiB))
healthy s "$T/expected.img"

for c in bad-magic truncated-handshake huge-option unknown-option \
	unknown-export unknown-command out-of-range too-big half-write vanish; do
	step "bad client: $c"
	bad s "$c" --export data
	healthy s "$T/expected.img"
done

step "the same server still answers real clients and stops cleanly"
assert_eq "$(nbdinfo --size "${URI[s]}")" $SIZE "export size"
stop_server s

step "bad client: read-only (writes, trims and zeroes refused with EPERM)"
# A new device starts empty, so a read-only export reads as zeros.
start_server ro --size 2M --read-only
truncate -s $((2 * MiB)) "$T/zero.img"
bad ro read-only
healthy ro "$T/zero.img"
stop_server ro

step "bad client: mem-limit (random data until ENOSPC)"
start_server m --size 64M --mem-limit 16M
head -c $MiB "$CORPUS/files.tar" >"$T/mpattern"
cp "$T/mpattern" "$T/mexpected.img"
truncate -s $((64 * MiB)) "$T/mexpected.img"
nbdcopy --flush "$T/mpattern" "${URI[m]}"
bad m mem-limit --mem-limit $((16 * MiB)) --start $MiB
healthy m "$T/mexpected.img"
stop_server m
