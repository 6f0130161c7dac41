#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t53-limits.sh - bounded resources of `uzram serve` (issue 13, items 3-5):
#   - 8 clients sending three 32 MiB reads each and never reading the
#     replies: the server's RSS stays within --buffer-limit plus a fixed
#     allowance; connections idle after sixteen 4 MiB reads give their
#     buffers back; the server then still serves the data unchanged;
#   - a client trickling its handshake one byte a second is cut off at the
#     handshake deadline; a client idle past --timeout is dropped and its
#     slot (--max-connections) reused; TCP clients get SO_KEEPALIVE;
#   - WRITE_ZEROES with NO_HOLE over 16 GiB under --mem-limit 1M fails with
#     ENOSPC instead of growing the slot table; the data stays.
# RSS is read from /proc/PID/status by nbd_bad_client.py.
source "$(dirname "$0")/functions.sh"
require nbdcopy nbdinfo qemu-io python3 ss
real_server || skip_all "uzram-only options"

BAD=$ITEST_DIR/nbd_bad_client.py
MiB=$((1024 * 1024))

quiet_kill() { kill "$1" 2>/dev/null || true; }

bad()
{
	local name=$1 case=$2
	shift 2
	python3 "$BAD" --socket "${SOCK[$name]}" --pid "${PID[$name]}" "$@" "$case" ||
		fail "nbd_bad_client.py $case failed (see above)"
}

# TSan's shadow memory grows with every byte the server touches, several
# times over: RSS says nothing about the server there, so the two RSS
# checks run only in the plain and ASan builds (the rest of each step runs).
rss_checks=1
if ldd "$UZRAM" 2>/dev/null | grep libtsan >/dev/null; then rss_checks=0; fi

step "buffer budget: 8 clients with unread 32 MiB reads stay within --buffer-limit 64M"
start_server b --size 128M --buffer-limit 64M
head -c $((4 * MiB)) "$CORPUS/files.tar" >"$T/pattern"
qemu-io -f raw -c "write -s $T/pattern $((100 * MiB)) $((4 * MiB))" "${URI[b]}" >/dev/null
if ((rss_checks)); then
	bad b buffer-attack --limit $((64 * MiB))
else
	echo "  TSan build: RSS not checked"
fi

step "the budget came back: a fresh client reads the data"
wait_for 30 "the attackers to be gone" \
	conns b 0
nbdcopy "${URI[b]}" "$T/out"
assert_same_range "$T/out" $((100 * MiB)) "$T/pattern" 0 $((4 * MiB))
stop_server b

step "idle connections give their buffers back (default budget)"
start_server i --size 128M
if ((rss_checks)); then bad i idle-buffers; fi
stop_server i

step "idle clients never starve a large request (--buffer-limit 1M, 4 connections)"
start_server q --size 16M --buffer-limit 1M --max-connections 4
bad q idle-starve --conns 4
assert_fails "more connections than the budget serves" \
	uzram serve --socket "$T/q2.sock" --buffer-limit 1M --max-connections 5
stop_server q

step "a handshake sent one byte a second is cut off at --handshake-timeout"
start_server h --size 16M --handshake-timeout 3
bad h slow-handshake --deadline 3
wait_for 10 "the slow client to be gone" \
	conns h 0
assert_ok "nbdinfo after the slow client" nbdinfo --size "${URI[h]}"
stop_server h

step "--timeout drops idle clients and their slots are reused"
start_server t --size 16M --timeout 2 --max-connections 2
python3 - "${SOCK[t]}" "$T/idle.pid" <<'PY' &
import os, socket, struct, sys, time
sys.path.insert(0, os.environ.get("ITEST_DIR", "."))
conns = []
for _ in range(2):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.recv(18)
    s.sendall(struct.pack(">I", 3))                       # fixed newstyle, no zeroes
    s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) +
              struct.pack(">IH", 0, 0))                   # NBD_OPT_GO ""
    conns.append(s)
open(sys.argv[2], "w").write("ready")
for s in conns:                 # wait, idle, until the server drops us
    s.settimeout(30)
    while s.recv(65536):
        pass
PY
idle_pid=$!
on_exit quiet_kill "$idle_pid"
wait_for 10 "two idle clients" test -s "$T/idle.pid"
wait_for 5 "both counted" conns t 2
assert_fails "a third client over --max-connections 2" \
	timeout 5 nbdinfo --size "${URI[t]}"
wait_for 15 "the idle clients to be dropped" \
	conns t 0
wait "$idle_pid" || fail "the idle client did not see the server close"
assert_ok "nbdinfo in a reused slot" nbdinfo --size "${URI[t]}"
stop_server t

step "TCP clients get SO_KEEPALIVE"
cd "$T" # the TCP server's control socket goes to the current directory
start_server_tcp k 127.0.0.1:0 --size 16M
kport=${PORT[k]}
python3 -c 'import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
time.sleep(30)' "$kport" &
keep_pid=$!
on_exit quiet_kill "$keep_pid"
wait_for 5 "the TCP client" \
	sh -c "ss -tnoH state established '( sport = :$kport )' | grep -q ."
ss -tnoH state established "( sport = :$kport )" >"$T/ss.out"
grep -q keepalive "$T/ss.out" ||
	fail "no keepalive timer on the server's socket: $(cat "$T/ss.out")"
kill "$keep_pid"
stop_server k

step "the slot table counts in --mem-limit: NO_HOLE zeroing of 16 GiB under 1M"
start_server z --size 16G --mem-limit 1M
if ((rss_checks)); then bad z table-limit; else bad z table-limit --no-rss; fi
table=$(stat_field z table_bytes)
used=$(stat_field z mem_used_total)
((table + used <= MiB)) || fail "table $table + memory $used over the 1 MiB limit"
stop_server z
