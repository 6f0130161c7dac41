#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t27-run.sh - `uzram serve --run COMMAND`, the captive mode of nbdkit --run:
# the command sees $uri, $unixsocket (or $port) and $exportname, can copy
# data in and out through them, runs with default signal handling (SIGPIPE
# and a working SIGTERM), and when it exits the server stops, removes its
# sockets and exits with the command's status (128 + N for signal N).
source "$(dirname "$0")/functions.sh"
require nbdcopy nbdinfo timeout
real_server || skip_all "--run is a uzram serve option"


# run_captive RC ARGS...: uzram serve ARGS in the foreground; its exit
# status must be RC.
run_captive()
{
	local want=$1 rc=0
	shift
	timeout 120 "${SANITIZER_RUN[@]}" "$UZRAM" serve "$@" \
		>"$T/run.out" 2>"$T/run.err" || rc=$?
	((rc == want)) ||
		fail "uzram serve $* exited $rc, want $want; stderr: $(cat "$T/run.err")"
}

step "the command copies a file in and out through \$uri"
run_captive 0 --size 64M --socket "$T/a.sock" --run \
	"nbdcopy '$TAR' \"\$uri\" && nbdcopy \"\$uri\" '$T/back.img'"
assert_same_data "$TAR" "$T/back.img" "$(stat -c %s "$TAR")"
[[ ! -e $T/a.sock && ! -e $T/a.sock.ctl ]] ||
	fail "sockets left behind after the command exited"
[[ ! -s $T/run.out ]] || fail "captive mode printed: $(cat "$T/run.out")"

step "the environment names the export"
run_captive 0 --size 8M --socket "$T/b.sock" --export disk1 --run \
	"printf '%s|%s|%s\n' \"\$uri\" \"\$unixsocket\" \"\$exportname\" >'$T/env';
	 nbdinfo --size \"\$uri\" >>'$T/env'"
assert_eq "$(head -1 "$T/env")" \
	"nbd+unix:///disk1?socket=$T/b.sock|$T/b.sock|disk1" "uri|unixsocket|exportname"
assert_eq "$(sed -n 2p "$T/env")" "$((8 * 1024 * 1024))" "size through \$uri"

step "TCP: \$port instead of \$unixsocket"
port=$(free_port)
run_captive 0 --size 8M --tcp "127.0.0.1:$port" --run \
	"[ \"\$port\" = $port ] && [ -z \"\${unixsocket-}\" ] && nbdinfo --size \"\$uri\" >'$T/tcp'"
assert_eq "$(cat "$T/tcp")" "$((8 * 1024 * 1024))" "size over TCP"

step "the command's exit status is the server's"
run_captive 3 --size 8M --socket "$T/c.sock" --run "exit 3"
run_captive $((128 + 9)) --size 8M --socket "$T/c.sock" --run 'kill -9 $$'
[[ ! -e $T/c.sock ]] || fail "socket left behind after the command was killed"

step "the command runs with default signal dispositions and mask"
# SIGPIPE ignored would make yes(1) report a write error; SIGTERM blocked
# would leave sleep running for its 60 s.
run_captive 0 --size 8M --socket "$T/d.sock" --run \
	"yes 2>'$T/yes.err' | head -c 1 >/dev/null;
	 sleep 60 & p=\$!; kill -TERM \$p; wait \$p; echo \$? >'$T/term'"
[[ ! -s $T/yes.err ]] || fail "yes saw: $(cat "$T/yes.err")"
assert_eq "$(cat "$T/term")" 143 "sleep's status after SIGTERM"

step "a bad option is refused before anything runs"
rc=0
"${SANITIZER_RUN[@]}" "$UZRAM" serve --size 0 --socket "$T/e.sock" \
	--run "touch '$T/ran'" 2>"$T/bad.err" || rc=$?
((rc != 0)) || fail "--size 0 with --run exited 0"
[[ ! -e $T/ran ]] || fail "the command ran although the server never started"
