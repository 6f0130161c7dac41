#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t72-image-lock.sh - one server per image: a second `uzram serve --image`
# on the image another server holds is refused, naming the holder's pid,
# both when the image exists and when the first server will create it; a
# `ctl save` of another server to that image is refused too; and the data
# the first server was given is in the image after it stops (before the
# lock, the second server's save of an empty device replaced it).
source "$(dirname "$0")/functions.sh"
require nbdcopy cmp timeout
real_server || skip_all "images are a uzram serve feature"

IMG=$T/d.img

# second_refused: a second server on $IMG fails with a message naming a's pid.
second_refused()
{
	local rc=0
	timeout 20 "${SANITIZER_RUN[@]}" "$UZRAM" serve --size 64M --image "$IMG" \
		--socket "$T/b.sock" >"$T/b.out" 2>"$T/b.err" </dev/null || rc=$?
	((rc != 0)) || fail "a second server on $IMG started"
	((rc != 124)) || fail "a second server on $IMG ran until the timeout"
	grep -q "in use by pid ${PID[a]}" "$T/b.err" ||
		fail "the refusal does not name pid ${PID[a]}: $(cat "$T/b.err")"
}

step "a second server on an image the first will create is refused"
start_server a --size 64M --image "$IMG"
second_refused
nbdcopy --flush "$TAR" "${URI[a]}"

step "another server's ctl save to that image is refused"
start_server c --size 64M
if server_ctl c save "$IMG" >"$T/ctl.out" 2>"$T/ctl.err"; then
	fail "ctl save to an image another server holds succeeded"
fi
grep -q "in use by pid ${PID[a]}" "$T/ctl.out" "$T/ctl.err" ||
	fail "the refused save does not name pid ${PID[a]}:" \
		"$(cat "$T/ctl.out" "$T/ctl.err")"
stop_server c

step "the first server's save holds its data"
stop_server a
[[ ! -e $IMG.lock ]] || fail "the lock file is left behind"
start_server a --image "$IMG"
second_refused
nbdcopy "${URI[a]}" "$T/back"
cmp -n "$(stat -c %s "$TAR")" "$TAR" "$T/back" ||
	fail "the image does not hold what the first server was given"
stop_server a
