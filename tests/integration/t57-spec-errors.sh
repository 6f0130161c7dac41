#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t57-spec-errors.sh - the answers doc/proto.md asks for (issue 13, items 6
# and 9), with the raw-protocol client nbd_bad_client.py:
#   - zero-length READ and WRITE succeed as the first request of a
#     connection; a simple-reply READ over the maximum block size gets
#     EINVAL; TRIM past the end gets EINVAL; a failed SET_META_CONTEXT
#     clears the earlier selection;
#   - requests read after shutdown began (SIGTERM) get NBD_ESHUTDOWN, while
#     those taken in before finish, and the server still exits cleanly;
#   - a 1 MiB write at the memory limit leaves each cluster all old or all
#     new (the README's failure rule).
# After each case the data written before must be unchanged.
source "$(dirname "$0")/functions.sh"
require nbdcopy qemu-io python3
real_server || skip_all "the stand-in answers differently"

BAD=$ITEST_DIR/nbd_bad_client.py
MiB=$((1024 * 1024))

# bad NAME CASE [ARGS]: one nbd_bad_client.py case against server NAME.
bad()
{
	local name=$1 case=$2
	shift 2
	python3 "$BAD" --socket "${SOCK[$name]}" --pid "${PID[$name]}" "$@" "$case" ||
		fail "nbd_bad_client.py $case failed (see above)"
}

step "start a 128 MiB export and write 4 MiB of real data at 64 MiB"
start_server s --size 128M
head -c $((4 * MiB)) "$CORPUS/files.tar" >"$T/pattern"
qemu-io -f raw -c "write -s $T/pattern $((64 * MiB)) $((4 * MiB))" "${URI[s]}" >/dev/null

check_data()
{
	nbdcopy "${URI[s]}" "$T/out"
	assert_same_range "$T/out" $((64 * MiB)) "$T/pattern" 0 $((4 * MiB))
}

step "zero-length requests, READ over the maximum block, TRIM past the end, failed SET_META_CONTEXT"
bad s spec-errors
assert_alive s
check_data

step "requests after SIGTERM get NBD_ESHUTDOWN; the server still exits cleanly"
bad s eshutdown
pid=${PID[s]}
rc=0
for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "server still running 10 s after SIGTERM"
wait "$pid" || rc=$?
unset "PID[s]"
((rc == 0)) || fail "server exited with $rc: $(tail -n 5 "${ERR[s]}")"
[[ -z $(compgen -G "${SOCK[s]}*" || true) ]] || fail "sockets left behind"

step "a failed multi-cluster write: every cluster old or new"
start_server m --size 64M --mem-limit 8M
bad m partial-write --mem-limit $((8 * MiB)) --start $((4 * MiB))
stop_server m
