#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t24-messages.sh - what a new user is told on a bad input (issue 33, bugs
# 5 and 6): each message names the real problem, in the command's words,
# and a size that makes no sense is refused before anything starts.
#   serve --threads 10000      the limit (64), not "a whole number"
#   ctl --mount DIR            calls itself uzram ctl, not uzram stat
#   --size 0, 100, 5000        that 0 is the problem; at least 4K; whole pages
#   --cluster 0                refused (it meant the default), serve, load, mount
#   --freed-slots              needs --swap, and so does --freed-slots-fds
#   --freed-slots-fds of no probe   said, and the server serves without
#   mount --mem-limit 1K       refused at once, not inside mkfs.ext4
#   load FIFO with no writer   refused at once, not blocked forever
#   swapon with no modprobe    says so, not that modprobe found nothing
#   the library's call names   (train_dictionary:, set_writeback_limit:,
#                              claim:, "leave it 0") do not show
source "$(dirname "$0")/functions.sh"
real_server || skip_all "the messages are uzram's"

# says WANT [NOT] -- CMD...: CMD fails (not with a signal, not after 10 s),
# its stderr has WANT, and not NOT if given. CMD uzram is $UZRAM.
says()
{
	local want=$1 not=$2 rc=0
	shift 3
	[[ $1 != uzram ]] || set -- "${SANITIZER_RUN[@]}" "$UZRAM" "${@:2}"
	timeout 10 "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
	((rc != 0 && rc < 124)) || fail "$* exited $rc: $(cat "$T/err")"
	grep -qF -- "$want" "$T/err" || fail "$*: no '$want' in: $(cat "$T/err")"
	[[ -z $not ]] || ! grep -qF -- "$not" "$T/err" ||
		fail "$*: '$not' in: $(cat "$T/err")"
}

step "serve --threads above the limit names the limit"
says "want at most 64" "whole number" -- uzram serve --threads 10000

step "ctl --mount calls itself uzram ctl"
mkdir "$T/plain"
says "uzram ctl: $T/plain is not mounted" "uzram stat" -- \
	uzram ctl --mount "$T/plain" compact

step "--size 0, too small, not whole pages: refused with the reason"
for cmd in serve mount swapon; do
	says "bad value '0' for --size; want more than 0 bytes" "" -- \
		uzram "$cmd" ${cmd/#mount/mount "$T/plain"} --size 0
done
says "bad value '100' for --size; want at least 4K" "" -- uzram serve --size 100
says "bad value '5000' for --size; want whole 4K pages, such as 8K" "" -- \
	uzram serve --size 5000
says "bad value '8M' for --size; want at least 16M" "" -- \
	uzram mount "$T/plain" --size 8M

step "--size and --mem-limit as a share of RAM (tmpfs's size=N%), whole pages"
# MemTotal is the kernel's totalram_pages, sysconf's _SC_PHYS_PAGES
share=$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB$/\1/p' /proc/meminfo) * 1024 / 100 / 4096 * 4096))
"$UZRAM" serve --size 1% --mem-limit 0.5% --dry-run >"$T/out" 2>&1 ||
	fail "serve --size 1% --dry-run: $(cat "$T/out")"
grep -q "a $share-byte lz4 device" "$T/out" ||
	fail "--size 1% is not $share bytes: $(cat "$T/out")"
for bad in 1%% x% 1.5.% %; do
	says "bad value '$bad' for --size; want bytes, a number with K, M, G or T (powers of 1024), or a share of RAM" "" -- \
		uzram serve --size "$bad"
done
says "bad value '0%' for --size; want more than 0 bytes" "" -- uzram serve --size 0%
says "bad value 'x%' for --mem-limit" "" -- uzram swapon --mem-limit x%

step "--cluster 0 (and 3K) refused, not taken for the default"
for bad in 0 3K 128K; do
	says "bad value '$bad' for --cluster; want a power of two from 4K to 64K" "" -- \
		uzram serve --cluster "$bad"
	says "bad value '$bad' for --cluster" "" -- uzram load /etc/hostname --cluster "$bad"
	says "bad value '$bad' for --cluster" "" -- uzram mount "$T/plain" --cluster "$bad"
done

step "--freed-slots without --swap refused"
says "--freed-slots needs --swap" "" -- uzram serve --freed-slots /dev/null
says "--freed-slots needs --swap" "" -- uzram serve --freed-slots-fds 3,4

# a keeper's server takes the probe's ring and globals by fd: fds that are
# not those (here stdin and stdout; "x" is not even a number) are named,
# and the server serves, hearing of no freed slots; --swap needs root's
# CAP_SYS_RESOURCE (PR_SET_IO_FLUSHER), which a container may not grant
capeff=$(awk '$1 == "CapEff:" { print $2 }' /proc/self/status)
if (((16#${capeff:-0} >> 24) & 1)); then
	for fds in 0,1 x; do
		step "--freed-slots-fds $fds: said, and the server serves"
		start_server "fds${fds%,*}" --swap --size 16M \
			--freed-slots /dev/null --freed-slots-fds "$fds"
		grep -qF "freed swap slots: $fds: not the ring and the globals of a keeper's probe" \
			"${ERR[fds${fds%,*}]}" || fail "no message: $(cat "${ERR[fds${fds%,*}]}")"
		nbdsh -u "${URI[fds${fds%,*}]}" -c 'h.pwrite(b"k" * 4096, 0); assert h.pread(4096, 0) == b"k" * 4096' ||
			fail "the server did not serve"
		stop_server "fds${fds%,*}"
	done
fi

step "mount --mem-limit 1K refused before anything is made"
says "bad value '1K' for --mem-limit; want 0 (no limit) or at least 18M" "mkfs" -- \
	uzram mount "$T/plain" --mem-limit 1K
! grep -qF " $T/plain " /proc/self/mountinfo || fail "$T/plain was mounted"

step "load of a FIFO with no writer is refused at once"
mkfifo "$T/fifo"
says "not a regular file" "" -- uzram load "$T/fifo"

step "the library's call names do not show"
start_server w --size 16M --image "$T/w.img"
rc=0
server_ctl w writeback-limit 5 >"$T/out" 2>&1 || rc=$?
((rc != 0)) || fail "writeback-limit without a backing store succeeded"
grep -q "writeback-limit: the device has no backing store" "$T/out" &&
	! grep -q "set_writeback_limit" "$T/out" || fail "writeback-limit: $(cat "$T/out")"
server_ctl w train-dict >"$T/out" 2>&1 || true
grep -q "not kept\|train-dict" "$T/out" && ! grep -q "train_dictionary" "$T/out" ||
	fail "train-dict: $(cat "$T/out")"
# a second server on the image the first holds
says "is in use by pid ${PID[w]}" "claim:" -- \
	uzram serve --size 16M --image "$T/w.img" --socket "$T/x.sock"
stop_server w
says "--size conflicts with image $T/w.img (16777216 bytes" "leave it 0" -- \
	uzram serve --size 32M --image "$T/w.img" --socket "$T/x.sock"

if ((EUID == 0)); then
	step "swapon where there is no modprobe says so"
	if [[ -e /sys/module/nbd || -e /sys/module/ublk_drv ]]; then
		echo "t24-messages: nbd or ublk_drv is loaded: swapon would run; skipped"
	else
		mkdir "$T/empty"
		says "there is no modprobe to load it (Debian: apt-get install kmod)" \
			"found no" -- env PATH="$T/empty" "$UZRAM" swapon --size 16M
	fi
fi
