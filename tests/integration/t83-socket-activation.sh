#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t83-socket-activation.sh - `uzram serve` started as systemd starts it:
# sockets passed by systemd-socket-activate (LISTEN_FDS, LISTEN_FDNAMES, the
# protocol of sd_listen_fds(3), from systemd itself), the server started by
# the first client, data through it, the control socket passed (named ctl)
# or made by the server, TCP, a clean SIGTERM that leaves systemd's
# sockets in place, READY=1 on $NOTIFY_SOCKET (sd_notify(3)), and what is
# refused: --socket with passed sockets, a passed file that is no
# listening socket.
source "$(dirname "$0")/functions.sh"
require systemd-socket-activate nbdinfo nbdcopy python3

MiB=$((1024 * 1024))

# activate NAME ARGS...: systemd-socket-activate ARGS in the background,
# its pid (the server's, once it execs) in ${PID[NAME]}, killed at exit.
activate()
{
	local name=$1
	shift
	systemd-socket-activate "$@" >"$T/$name.out" 2>"$T/$name.err" </dev/null &
	PID[$name]=$!
	on_exit _kill_pid "${PID[$name]}"
}

# comm PID: the name the process runs under now.
comm() { cat "/proc/$1/comm" 2>/dev/null; }

# term NAME: SIGTERM, then exit status 0 within 15 s.
term()
{
	local pid=${PID[$1]} rc=0
	kill -TERM "$pid"
	timeout 15 tail --pid="$pid" -f /dev/null || fail "$1 did not exit on SIGTERM"
	wait "$pid" || rc=$?
	assert_eq "$rc" 0 "exit status of $1 after SIGTERM: $(cat "$T/$1.err")"
	unset "PID[$1]"
}

step "nbd and ctl sockets passed: nothing runs until a client comes"
activate a -l "$T/a.sock" -l "$T/a.sock.ctl" --fdname=nbd:ctl \
	"$UZRAM" serve --size 64M
wait_for 10 "the sockets of systemd-socket-activate" test -S "$T/a.sock.ctl"
[[ $(comm "${PID[a]}") == systemd-socket* ]] ||
	fail "something else runs before the first client: $(comm "${PID[a]}")"
uri="nbd+unix:///?socket=$T/a.sock"
assert_eq "$(timeout 20 nbdinfo --size "$uri")" $((64 * MiB)) "size through the passed socket"
assert_eq "$(comm "${PID[a]}")" uzram "the process after the first client"
grep -q "^uri: $uri\$" "$T/a.out" || fail "the banner names another URI: $(cat "$T/a.out")"

step "data through the passed socket"
head -c $((16 * MiB)) "$CORPUS/files.tar" >"$T/in"
n=$(stat -c %s "$T/in")
nbdcopy "$T/in" "$uri"
nbdcopy "$uri" "$T/back"
cmp -n "$n" "$T/in" "$T/back" || fail "the data read back differs"

step "uzram stat on the passed control socket"
written=$(uzram stat --socket "$T/a.sock" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["orig_data_size"])')
((written > 0)) || fail "orig_data_size $written after a $n-byte write"

step "SIGTERM: exit 0, systemd's sockets stay where systemd made them"
term a
[[ -S $T/a.sock && -S $T/a.sock.ctl ]] ||
	fail "the server removed a socket it did not make: $(ls "$T")"

step "only the NBD socket passed: the server makes SOCK.ctl and removes it"
activate b -l "$T/b.sock" "$UZRAM" serve --size 8M
wait_for 10 "the socket" test -S "$T/b.sock"
assert_eq "$(nbdinfo --size "nbd+unix:///?socket=$T/b.sock")" $((8 * MiB)) size
wait_for 10 "SOCK.ctl" test -S "$T/b.sock.ctl"
uzram stat --socket "$T/b.sock" >/dev/null
term b
[[ -S $T/b.sock ]] || fail "systemd's NBD socket was removed"
[[ ! -e $T/b.sock.ctl ]] || fail "the server's own SOCK.ctl was left behind"

step "TCP: a passed TCP socket, the control socket found by uzram stat --tcp"
port=$(free_port)
export XDG_RUNTIME_DIR=$T/xdg
mkdir -m 0700 "$XDG_RUNTIME_DIR"
# systemd-socket-activate passes on only the variables named with -E
activate c -l "127.0.0.1:$port" -E XDG_RUNTIME_DIR "$UZRAM" serve --size 4M
wait_for 10 "port $port" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
assert_eq "$(nbdinfo --size "nbd://127.0.0.1:$port")" $((4 * MiB)) "size over TCP"
wait_for 10 "the control socket" test -S "$XDG_RUNTIME_DIR/uzram/tcp-$port.ctl"
uzram stat --tcp "$port" >/dev/null
term c

step "READY=1 on NOTIFY_SOCKET once the server listens"
python3 - "$T/notify" >"$T/notify.msg" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
print(s.recv(4096).decode())
PY
npid=$!
on_exit _kill_pid "$npid"
wait_for 10 "the notify socket" test -S "$T/notify"
NOTIFY_SOCKET=$T/notify activate d -l "$T/d.sock" -E NOTIFY_SOCKET \
	"$UZRAM" serve --size 4M
wait_for 10 "the socket" test -S "$T/d.sock"
nbdinfo --size "nbd+unix:///?socket=$T/d.sock" >/dev/null
wait "$npid" || fail "no message on NOTIFY_SOCKET"
grep -qx READY=1 "$T/notify.msg" || fail "no READY=1 in: $(cat "$T/notify.msg")"
grep -qx "STATUS=serving nbd+unix:///?socket=$T/d.sock" "$T/notify.msg" ||
	fail "no STATUS with the URI in: $(cat "$T/notify.msg")"
term d

step "refused: --socket beside passed sockets, a passed file that is no socket"
activate e -l "$T/e.sock" "$UZRAM" serve --socket "$T/other.sock"
wait_for 10 "the socket" test -S "$T/e.sock"
nbdinfo --size "nbd+unix:///?socket=$T/e.sock" >/dev/null 2>&1 || true
rc=0
timeout 10 tail --pid="${PID[e]}" -f /dev/null
wait "${PID[e]}" || rc=$?
unset "PID[e]"
assert_eq "$rc" 2 "exit status of serve --socket with passed sockets"
grep -q 'LISTEN_FDS.*--socket and --tcp cannot be used' "$T/e.err" ||
	fail "no clear message: $(cat "$T/e.err")"
: >"$T/plain"
rc=0
bash -c 'exec 3<"$1"; export LISTEN_PID=$$ LISTEN_FDS=1; exec "$2" serve --size 1M' \
	_ "$T/plain" "$UZRAM" >/dev/null 2>"$T/f.err" || rc=$?
assert_eq "$rc" 1 "exit status with a plain file as fd 3"
grep -q 'passed file descriptor 3 (unknown) is not a listening stream socket' "$T/f.err" ||
	fail "no clear message: $(cat "$T/f.err")"
