#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t54-signals-ctl.sh - signals and the control channel (issue 13, items 7
# and 8):
#   - SIGHUP drains and removes the sockets, as SIGTERM does;
#   - silent control clients (connected, sending nothing) delay neither new
#     NBD clients nor `uzram stat` nor SIGTERM;
#   - a recompress running on the control channel does not keep new
#     clients out, and SIGTERM during it still ends the server cleanly;
#   - control requests are parsed strictly: a sign, a blank, an overflow or
#     trailing junk gets an error and changes nothing, on the socket and in
#     `uzram ctl`.
source "$(dirname "$0")/functions.sh"
require nbdcopy nbdinfo qemu-io python3 timeout
real_server || skip_all "uzram-only control channel"

MiB=$((1024 * 1024))

# silent CTL-PATH N SECONDS: N control clients that connect and say nothing
# for SECONDS, in the background; their pid in $silent_pid. Returns once
# all of them are connected.
silent()
{
	rm -f "$T/silent.ready"
	python3 - "$@" "$T/silent.ready" <<'PY' &
import socket, sys, time
conns = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    conns.append(s)
open(sys.argv[4], "w").write("ready")
time.sleep(float(sys.argv[3]))
PY
	silent_pid=$!
	on_exit quiet_kill "$silent_pid"
	wait_for 10 "$2 silent control clients" test -s "$T/silent.ready"
}
quiet_kill() { kill "$1" 2>/dev/null || true; }

step "SIGHUP drains like SIGTERM and removes the sockets"
start_server h --size 16M
head -c $MiB "$CORPUS/files.tar" >"$T/pattern"
nbdcopy --flush "$T/pattern" "${URI[h]}"
kill -HUP "${PID[h]}"
rc=0
for ((i = 0; i < 100; i++)); do kill -0 "${PID[h]}" 2>/dev/null || break; sleep 0.1; done
wait "${PID[h]}" || rc=$?
((rc == 0)) || fail "server exited with $rc after SIGHUP"
grep -q "got SIGHUP, finishing requests in flight" "${ERR[h]}" ||
	fail "no drain message after SIGHUP: $(cat "${ERR[h]}")"
[[ -z $(compgen -G "${SOCK[h]}*" || true) ]] ||
	fail "SIGHUP left sockets behind: $(compgen -G "${SOCK[h]}*")"
unset "PID[h]"

# A server that serves the control channel in its main thread waits a
# second for each silent client in turn: 20 of them hold a new `uzram stat`
# (and each new NBD connection) back for about 20 s. The bound below is
# generous; what is checked is that the silent clients do not queue up.
step "20 silent control clients delay neither new NBD clients nor stat"
start_server s --size 16M
silent "${SOCK[s]}.ctl" 20 30
assert_ok "3 nbdinfo while control clients are silent" timeout 8 bash -c \
	'for i in 1 2 3; do nbdinfo --size "$0" >/dev/null || exit 1; done' \
	"${URI[s]}"
assert_ok "uzram stat while control clients are silent" timeout 8 bash -c \
	'until "$@" >/dev/null 2>&1; do sleep 0.1; done' _ \
	"${SANITIZER_RUN[@]}" "$UZRAM" stat --socket "${SOCK[s]}"

step "SIGTERM with silent control clients connected ends the server in time"
silent "${SOCK[s]}.ctl" 20 30
stop_server s

step "strict parsing: signs, blanks, overflow and junk are refused"
start_server p --size 16M --mem-limit 8M
python3 - "${SOCK[p]}.ctl" <<'PY'
import socket, sys
bad = (b"mem-limit  -1\n", b"mem-limit -1\n", b"mem-limit +5\n",
       b"mem-limit  5\n", b"mem-limit 5 \n", b"mem-limit 5x\n",
       b"mem-limit 0x10\n", b"mem-limit 18446744073709551616\n",
       b"mem-limit 99999999999999999999999\n", b"mem-limit\n",
       b"mem-limit 5\0junk\n", b"recompress 1 0 -1\n",
       b"recompress +1 0 0\n", b"recompress 1 0 4294967296\n",
       b"recompress 1  0 0\n", b"recompress 1 0 0 0\n", b"compact junk\n")
for req in bad:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(req)
    got = s.recv(4096)
    s.close()
    if not got.startswith(b"error: "):
        sys.exit("%r was accepted: %r" % (req, got))
    print("  %-40r %s" % (req, got.decode().strip()[:70]))
PY
assert_eq "$(stat_field p mem_limit)" $((8 * MiB)) "mem_limit after bad requests"
for v in +5 " 5" -1 1e3 0x10 nan 5x ""; do
	assert_fails "uzram ctl mem-limit '$v'" \
		uzram ctl --socket "${SOCK[p]}" mem-limit "$v"
done
assert_fails "uzram ctl recompress priority=+1" \
	uzram ctl --socket "${SOCK[p]}" recompress priority=+1
assert_eq "$(stat_field p mem_limit)" $((8 * MiB)) "mem_limit after bad ctl"
server_ctl p mem-limit 4M >/dev/null
assert_eq "$(stat_field p mem_limit)" $((4 * MiB)) "mem_limit after a good ctl"
stop_server p

step "a recompress on the control channel keeps out neither clients nor SIGTERM"
start_server r --size 64M --recomp-algorithm zstd:19
head -c $((4 * MiB)) "$CORPUS/heap-python.core" >"$T/core"
nbdcopy --flush "$T/core" "${URI[r]}"
server_ctl r recompress >"$T/recompress.out" 2>&1 &
rpid=$!
sleep 0.5
assert_ok "nbdinfo during a recompress" timeout 5 nbdinfo --size "${URI[r]}"
if kill -0 "$rpid" 2>/dev/null; then
	echo "  recompress still running after nbdinfo: checked during it"
else
	echo "  note: recompress already done, nbdinfo ran after it"
fi
stop_server r
wait "$rpid" || fail "recompress failed: $(cat "$T/recompress.out")"
grep -q "^ok: [0-9]* pages re-encoded" "$T/recompress.out" ||
	fail "recompress: $(cat "$T/recompress.out")"
