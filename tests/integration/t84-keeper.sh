#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t84-keeper.sh - `uzram serve --keeper` (doc/keep.md) over NBD: what was
# written before a SIGKILL of the server reads back the same from the
# standby that adopted the store; again after a kill of the server and, at
# once, of its successor (during its adoption); writes after a kill stay
# too; a store corrupted behind the keeper's back (a slot that names no
# object) is refused with a message, and the keeper gives up after
# repeated refusals instead of serving it; a planned restart (SIGUSR2 to
# the keeper) runs the program file as it is now, with the same data;
# SIGTERM stops the keeper and every server it started.
source "$(dirname "$0")/functions.sh"
require nbdcopy
real_server || skip_all "--keeper is uzram's"

MiB=$((1024 * 1024))
corpus_data "$T/data" $((16 * MiB))
head -c $((4 * MiB)) "$CORPUS/heap-python.core" >"$T/more"

# the pid of the server the keeper last started
server() { sed -n 's/^uzram serve: --keeper: the server is pid //p' "${ERR[k]}" | tail -n 1; }
adopted() { grep -c 'adopted the kept store' "${OUT[k]}" || true; }
ready() { grep -c 'the standby (pid [0-9]*) is ready' "${ERR[k]}" || true; }
new_server() { [[ -n $(server) && $(server) != "$1" ]]; }
at_least() { (($($1) >= $2)); }

step "serve --keeper, 16 MiB in"
start_server k --size 32M --keeper
K=${PID[k]}
s1=$(server)
[[ -n $s1 && $s1 != "$K" ]] || fail "no server pid from the keeper"
grep -q "store is kept" "${OUT[k]}" || fail "the server does not keep its store"
# every page a new server's loader writes, locked in its file by the keeper
bash "$(dirname "$0")/../vm/keeper-locked.sh" "$K" || fail "the keeper leaves pages a new server needs unlocked"
nbdcopy "$T/data" "${URI[k]}"

step "SIGKILL of the server: the standby adopts the store, same bytes"
wait_for 20 "a standby" at_least ready 1
kill -KILL "$s1"
wait_for 30 "a new server" new_server "$s1"
wait_for 30 "the adoption" at_least adopted 1
wait_for 10 "the socket" test -S "${SOCK[k]}"
nbdcopy "${URI[k]}" "$T/out"
assert_same_data "$T/data" "$T/out"

step "writes after it, then the server and its successor killed"
# not --destination-is-zero: the device holds data there, and nbdcopy
# would skip the zero blocks of more
nbdcopy "$T/more" "${URI[k]}"
dd if="$T/more" of="$T/data" conv=notrunc status=none
wait_for 20 "a standby" at_least ready 2
s2=$(server)
kill -KILL "$s2"
wait_for 30 "a new server" new_server "$s2"
s3=$(server)
kill -KILL "$s3"
wait_for 60 "a third server" new_server "$s3"
wait_for 60 "its adoption" at_least adopted 3
wait_for 10 "the socket" test -S "${SOCK[k]}"
nbdcopy "${URI[k]}" "$T/out"
assert_same_data "$T/data" "$T/out"
assert_alive k

step "a corrupted store is refused, and the keeper gives up"
fd=$(ls -l /proc/"$K"/fd | awk '/memfd:uzram-store/ { print $9 }')
[[ -n $fd ]] || fail "the keeper holds no memfd:uzram-store"
# the first cluster's slot (keep.c's layout: the table at 2 MiB, 16-byte
# slots, the value at +8): a handle and a size no object has
printf '\xf0\xff\xff\x7f\x10\x00\x00\x00' |
	dd of=/proc/"$K"/fd/"$fd" bs=1 seek=$((2 * MiB + 8)) conv=notrunc status=none
kill -KILL "$(server)"
wait_for 90 "the keeper to give up" bash -c "! kill -0 $K"
grep -q "not one this library can trust" "${ERR[k]}" ||
	fail "no refusal in the servers' messages: $(tail -n 5 "${ERR[k]}")"
grep -q "giving up" "${ERR[k]}" || fail "the keeper did not say it gave up"
no_servers() { ! pgrep -f -- "--socket $1 " >/dev/null; }
wait_for 10 "no server of this keeper left" no_servers "${SOCK[k]}"
PID[k]=

step "a planned restart (SIGUSR2 to the keeper) runs the program file as it is now"
# the keeper from a copy of uzram, which is then replaced as a package
# upgrade replaces it (a new file renamed over it; one byte more at its
# end, which the loader ignores)
mkdir -p "$T/bin"
cp "$UZRAM" "$T/bin/uzram"
UZRAM=$T/bin/uzram start_server k3 --size 16M --keeper
K3=${PID[k3]}
nbdcopy "$T/more" "${URI[k3]}"
server3() { sed -n 's/^uzram serve: --keeper: the server is pid //p' "${ERR[k3]}" | tail -n 1; }
ready3() { grep -c 'the standby (pid [0-9]*) is ready' "${ERR[k3]}" || true; }
wait_for 20 "a standby" at_least ready3 1
old=$(server3)
cp "$T/bin/uzram" "$T/bin/uzram.new"
printf 't84' >>"$T/bin/uzram.new"
mv "$T/bin/uzram.new" "$T/bin/uzram"
kill -USR2 "$K3"
wait_for 60 "the hand-over" grep -q "restart: the server (pid $old) left" "${ERR[k3]}"
wait_for 30 "the new server's adoption" grep -q 'adopted the kept store' "${OUT[k3]}"
wait_for 10 "the socket" test -S "${SOCK[k3]}"
new=$(server3)
[[ $new != "$old" ]] || fail "no new server after the restart"
[[ $(stat -L -c %i "/proc/$new/exe") == $(stat -c %i "$T/bin/uzram") ]] ||
	fail "the new server (pid $new) does not run the replaced program"
assert_alive k3
nbdcopy "${URI[k3]}" "$T/out3"
cmp -n $((4 * MiB)) "$T/more" "$T/out3" || fail "the restart changed the data"
kill -TERM "$K3"
wait_for 30 "the keeper to stop" bash -c "! kill -0 $K3"
PID[k3]=

step "SIGTERM stops the keeper and its servers"
start_server k2 --size 8M --keeper
K2=${PID[k2]}
wait_for 20 "a standby" bash -c "grep -q 'is ready' '${ERR[k2]}'"
kill -TERM "$K2"
wait_for 30 "the keeper to stop" bash -c "! kill -0 $K2"
wait_for 10 "its servers to stop" bash -c "! pgrep -P $K2"
PID[k2]=
echo "$ITEST_NAME: ok"
