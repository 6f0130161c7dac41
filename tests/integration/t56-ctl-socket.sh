#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t56-ctl-socket.sh - where the control socket lives and who may own it.
# A TCP server puts it in a private directory ($XDG_RUNTIME_DIR/uzram, or
# $TMPDIR/uzram-UID, made 0700), never in the current directory, and
# `uzram stat --tcp` / `uzram ctl --tcp` find it there; --ctl-socket names
# it for server and clients. A control socket is refused, by the server and
# by the clients, when its directory belongs to another user or is writable
# by others without the sticky bit, when the private directory is not
# private, and when the socket itself belongs to another user (an impostor
# that bound the name first). The cases that need another user (nobody)
# run as root only.
source "$(dirname "$0")/functions.sh"
require python3 setpriv
real_server || skip_all "the control socket is uzram's"

HOST=127.0.0.1

# serve_fails WHAT PATTERN ARGS...: uzram serve ARGS exits 1 with a message
# matching PATTERN, and leaves no control socket behind.
serve_fails()
{
	local what=$1 pattern=$2 rc=0
	shift 2
	uzram serve --size 1M "$@" >/dev/null 2>"$T/fail.err" || rc=$?
	assert_eq "$rc" 1 "exit status: $what"
	grep -qE "$pattern" "$T/fail.err" ||
		fail "$what: message: $(cat "$T/fail.err")"
}

step "TCP: the default control socket is in \$XDG_RUNTIME_DIR/uzram, not ."
mkdir -m 0700 "$T/run" "$T/cwd"
export XDG_RUNTIME_DIR=$T/run
cd "$T/cwd"
start_server_tcp tcp "$HOST:0" --size 4M
cd "$T"
P=${PORT[tcp]}
ctl=$T/run/uzram/tcp-$P.ctl
[[ -S $ctl ]] || fail "no control socket at $ctl: $(ls -la "$T/run" "$T/cwd")"
[[ -z $(ls -A "$T/cwd") ]] || fail "the server wrote into its cwd: $(ls -A "$T/cwd")"
assert_eq "$(stat -c %a "$T/run/uzram")" 700 "mode of the private directory"
grep -q "uzram stat --ctl-socket $ctl" "${OUT[tcp]}" ||
	fail "the banner does not name the control socket: $(cat "${OUT[tcp]}")"
uzram stat --tcp "$HOST:$P" --json >"$T/stat.json"
assert_eq "$(json_get "$T/stat.json" "j['disksize']")" $((4 << 20)) "stat --tcp"
uzram ctl --tcp "$P" reset-max | grep -q "^ok: mem_used_max" ||
	fail "ctl --tcp PORT failed"
uzram stat --ctl-socket "$ctl" >/dev/null
assert_fails "--tcp and --ctl-socket together" uzram stat --tcp "$P" --ctl-socket "$ctl"
stop_server tcp
[[ ! -e $ctl ]] || fail "$ctl left behind"

step "TCP without XDG_RUNTIME_DIR: \$TMPDIR/uzram-UID"
unset XDG_RUNTIME_DIR
mkdir -m 0700 "$T/tmp"
TMPDIR=$T/tmp start_server_tcp t2 "$HOST:0" --size 4M
P=${PORT[t2]}
ctl=$T/tmp/uzram-$(id -u)/tcp-$P.ctl
[[ -S $ctl ]] || fail "no control socket at $ctl"
TMPDIR=$T/tmp uzram stat --tcp "$P" >/dev/null
stop_server t2

step "--ctl-socket PATH, for a TCP and a Unix socket server"
start_server_tcp t3 "$HOST:0" --size 4M --ctl-socket "$T/t3.ctl"
[[ -S $T/t3.ctl ]] || fail "--ctl-socket not used"
uzram stat --ctl-socket "$T/t3.ctl" >/dev/null
stop_server t3
[[ ! -e $T/t3.ctl ]] || fail "$T/t3.ctl left behind"
start_server u --size 4M --ctl-socket "$T/u-control"
[[ -S $T/u-control && ! -e ${SOCK[u]}.ctl ]] ||
	fail "--ctl-socket not used for a Unix socket server"
uzram ctl --ctl-socket "$T/u-control" reset-max >/dev/null
stop_server u

step "refused: a directory of another user, or writable by others"
# Each server below refuses its control socket before it listens on $P.
mkdir "$T/other" "$T/shared"
chmod 0777 "$T/shared"
if ((EUID == 0)); then
	chown nobody "$T/other"
	serve_fails "directory owned by nobody" "its directory $T/other belongs to uid" \
		--tcp "$HOST:$P" --ctl-socket "$T/other/c.ctl"
fi
serve_fails "world-writable directory" "$T/shared is writable by others" \
	--tcp "$HOST:$P" --ctl-socket "$T/shared/c.ctl"
serve_fails "group-writable directory, Unix socket" "writable by others" \
	--socket "$T/shared/s.sock"
assert_fails "stat in a world-writable directory" \
	uzram stat --ctl-socket "$T/shared/c.ctl"
grep -q "writable by others" "$T/last-fail.out" ||
	fail "stat: message: $(cat "$T/last-fail.out")"

step "refused: the private directory is not private"
mkdir -m 0700 "$T/run2" && mkdir -m 0755 "$T/run2/uzram"
XDG_RUNTIME_DIR=$T/run2 serve_fails "a 0755 runtime directory" \
	"refusing $T/run2/uzram .*mode 0700" --tcp "$HOST:$P"
mkdir -m 0700 "$T/run3" "$T/elsewhere" && ln -s "$T/elsewhere" "$T/run3/uzram"
XDG_RUNTIME_DIR=$T/run3 serve_fails "a symbolic link" "not a directory" \
	--tcp "$HOST:$P"
XDG_RUNTIME_DIR=$T/run2 assert_fails "stat --tcp with a 0755 directory" \
	uzram stat --tcp "$P"

((EUID == 0)) || {
	echo "$ITEST_NAME: note: not root, no other user to play the impostor"
	exit 0
}
step "refused: an impostor's socket in a sticky directory"
chmod 0711 "$T"		# let nobody reach $T/pub, not list $T
mkdir -m 1777 "$T/pub"
setpriv --reuid=nobody --regid=nogroup --clear-groups "$PYTHON" -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
open(sys.argv[2], "w").close()
time.sleep(60)' "$T/pub/c.ctl" "$T/pub/impostor-ready" &
impostor=$!
on_exit kill "$impostor"
wait_for 10 "the impostor" test -e "$T/pub/impostor-ready"
serve_fails "a control socket of nobody" "$T/pub/c.ctl: it belongs to uid" \
	--tcp "$HOST:$P" --ctl-socket "$T/pub/c.ctl"
assert_fails "stat on an impostor's socket" uzram stat --ctl-socket "$T/pub/c.ctl"
grep -q "belongs to uid" "$T/last-fail.out" ||
	fail "stat: message: $(cat "$T/last-fail.out")"
step "a sticky directory is fine for our own control socket"
start_server_tcp t4 "$HOST:0" --size 4M --ctl-socket "$T/pub/mine.ctl"
uzram stat --ctl-socket "$T/pub/mine.ctl" >/dev/null
stop_server t4
