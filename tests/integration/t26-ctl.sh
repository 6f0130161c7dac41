#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t26-ctl.sh - `uzram ctl` on a live server, as zram's sysfs files are used:
# mem-limit lowered under what the export holds refuses writes that need
# memory (the client gets an error, the bytes stay) while unchanged rewrites
# go on; mem-limit 0 lifts it; compact gives memory back after a trim;
# reset-max restarts mem_used_max. Bad requests get an error and change
# nothing; ctl without a server fails with a message.
source "$(dirname "$0")/functions.sh"
require nbdcopy qemu-io python3 head
real_server || skip_all "uzram ctl needs the real server"

MiB=$((1024 * 1024))
N=$((8 * MiB))

field() { stat_field a "$1"; }
ctl() { server_ctl a "$@"; }

step "start a 64 MiB export holding 8 MiB of the corpus"
start_server a --size 64M
corpus_data "$T/data" "$N"
head -c "$MiB" /dev/urandom >"$T/random"
nbdcopy --flush "$T/data" "${URI[a]}"
used=$(field mem_used_total)
((used > 0)) || fail "nothing stored"

step "mem-limit under what the export holds"
ctl mem-limit 64K >"$T/ctl.out" || fail "ctl mem-limit failed"
grep -q "^ok: mem_limit 65536$" "$T/ctl.out" || fail "reply: $(cat "$T/ctl.out")"
assert_eq "$(field mem_limit)" 65536 "mem_limit in stat"
failed=$(field failed_writes)

step "a write that needs memory fails and leaves the bytes"
qio_fails "${URI[a]}" "write -s $T/random $((32 * MiB)) $MiB"
(($(field failed_writes) > failed)) || fail "failed_writes did not rise"
nbdcopy "${URI[a]}" "$T/out"
assert_same_data "$T/data" "$T/out" "$N"
assert_zero "$T/out" $((32 * MiB)) "$MiB"

step "rewriting the same bytes still succeeds"
nbdcopy --flush "$T/data" "${URI[a]}"

step "mem-limit 0 lifts the limit"
ctl mem-limit 0 >/dev/null
assert_eq "$(field mem_limit)" 0 "mem_limit after 0"
qio "${URI[a]}" "write -s $T/random $((32 * MiB)) $MiB"
nbdcopy "${URI[a]}" "$T/out"
assert_same_range "$T/out" $((32 * MiB)) "$T/random" 0 "$MiB"

step "trim, compact, reset-max"
qio "${URI[a]}" "discard 0 $((6 * MiB))"
ctl compact >"$T/ctl.out" || fail "ctl compact failed"
grep -qE "^ok: [0-9]+ pages given back$" "$T/ctl.out" ||
	fail "reply: $(cat "$T/ctl.out")"
(($(field mem_used_total) < used + MiB)) || fail "memory not given back"
(($(field mem_used_max) > $(field mem_used_total))) ||
	fail "mem_used_max is not above the current use after the trim"
ctl reset-max >/dev/null
assert_eq "$(field mem_used_max)" "$(field mem_used_total)" "mem_used_max after reset-max"

step "bad requests: an error each, nothing changes"
nbdcopy "${URI[a]}" "$T/before"
assert_fails "ctl with no command" uzram ctl --socket "${SOCK[a]}"
assert_fails "ctl bogus" uzram ctl --socket "${SOCK[a]}" bogus
assert_fails "ctl mem-limit abc" uzram ctl --socket "${SOCK[a]}" mem-limit abc
python3 - "${SOCK[a]}.ctl" <<'PY'
import socket, sys
for req, want in ((b"frobnicate\n", b"error: unknown request"),
                  (b"mem-limit -5\n", b"error: mem-limit"),
                  (b"mem-limit 12x\n", b"error: mem-limit"),
                  (b"x" * 200, b"error: unknown request")):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(req)
    got = s.recv(4096)
    s.close()
    if not got.startswith(want):
        sys.exit("%r: got %r, want %r..." % (req[:20], got, want))
PY
assert_eq "$(field mem_limit)" 0 "mem_limit after bad requests"
nbdcopy "${URI[a]}" "$T/after"
assert_same_data "$T/before" "$T/after"
assert_alive a

step "ctl without a server fails with a message"
rc=0
uzram ctl --socket "$T/nosuch.sock" compact 2>"$T/ns.err" || rc=$?
((rc != 0)) || fail "ctl on a missing socket exited 0"
[[ -s $T/ns.err ]] || fail "ctl on a missing socket printed no message"

stop_server a
