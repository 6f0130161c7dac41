#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t58-tcp-port.sh - `serve --tcp` ports: one out of 1-65535 (99999, which
# once listened on 99999 mod 65536) or not a number is refused with exit
# status 2 and a message; port 0 picks a free port, and the banner's URI,
# its nbd-client line, --run's $uri and $port and the control socket's
# name all carry the port actually bound, which a client reaches.
source "$(dirname "$0")/functions.sh"
require nbdinfo timeout
real_server || skip_all "port checks are a uzram serve feature"

step "ports out of range are refused"
for bad in 127.0.0.1:99999 127.0.0.1:65536 127.0.0.1:-1 :nbd 127.0.0.1:; do
	rc=0
	timeout 10 "${SANITIZER_RUN[@]}" "$UZRAM" serve --size 1M --tcp "$bad" \
		>"$T/bad.out" 2>"$T/bad.err" </dev/null || rc=$?
	assert_eq "$rc" 2 "exit status of serve --tcp $bad"
	grep -q "bad --tcp '$bad'.*1-65535" "$T/bad.err" ||
		fail "no message for --tcp $bad: $(cat "$T/bad.err")"
done

step "port 0: everything names the port bound"
export XDG_RUNTIME_DIR=$T/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
timeout 30 "${SANITIZER_RUN[@]}" "$UZRAM" serve --size 1M --tcp 127.0.0.1:0 \
	--run 'echo "uri=$uri"; echo "port=$port"; ls "$XDG_RUNTIME_DIR/uzram";
	       nbdinfo --size "$uri"' >"$T/run.out" 2>"$T/run.err" </dev/null ||
	fail "serve --tcp 127.0.0.1:0 --run failed: $(cat "$T/run.err")"
port=$(sed -n 's/^port=//p' "$T/run.out")
[[ $port =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) ||
	fail "\$port is '$port': $(cat "$T/run.out")"
grep -qx "uri=nbd://127.0.0.1:$port/" "$T/run.out" ||
	fail "\$uri does not carry port $port: $(cat "$T/run.out")"
grep -qx "tcp-$port.ctl" "$T/run.out" ||
	fail "the control socket is not tcp-$port.ctl: $(cat "$T/run.out")"
grep -qx 1048576 "$T/run.out" || fail "nbdinfo did not reach port $port"

step "port 0: the banner names the port bound"
"${SANITIZER_RUN[@]}" "$UZRAM" serve --size 1M --tcp 127.0.0.1:0 \
	>"$T/b.out" 2>"$T/b.err" </dev/null &
PID[b]=$!
wait_for 10 "the banner" grep -qx ready "$T/b.out"
port=$(sed -n 's#^uri: nbd://127.0.0.1:\([0-9]*\)/$#\1#p' "$T/b.out")
[[ -n $port && $port != 0 ]] || fail "banner: $(cat "$T/b.out")"
grep -q "nbdinfo 'nbd://127.0.0.1:$port/'" \
	"$T/b.out" || fail "the nbdinfo line does not name port $port: $(cat "$T/b.out")"
grep -q "tcp-$port.ctl" "$T/b.out" ||
	fail "the banner's control socket is not tcp-$port.ctl: $(cat "$T/b.out")"
nbdinfo --size "nbd://127.0.0.1:$port/" >/dev/null
