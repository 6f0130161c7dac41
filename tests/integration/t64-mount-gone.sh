#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t64-mount-gone.sh - a `uzram mount` whose server died (SIGKILL, as the OOM
# killer does): `uzram umount DIR` says the device had gone and that writes
# were lost, exits non-zero, leaves no mount, process or runtime directory,
# and `uzram mount DIR` works again at once. As root (the kernel's ext4 on a
# loop device, runtime directory /run/uzram or $UZRAM_RUNTIME_DIR), and as
# an unprivileged user (fuse2fs) under $XDG_RUNTIME_DIR/uzram and under
# /tmp/uzram-UID. Issue 33, bug 2.
source "$(dirname "$0")/functions.sh"
require nbdfuse mkfs.ext4 fuse2fs fusermount3 setpriv
real_server || skip_all "uzram mount is a uzram command"

AS=()	# the command prefix of the current user: empty, or setpriv
ENV=()	# the runtime directory's variables for this round
BASE=	# where the runtime directories of this round are

um() { "${AS[@]}" env "${ENV[@]}" "${SANITIZER_RUN[@]}" "$UZRAM" "$@"; }
_unmount()
{
	is_mounted "$1" || return 0
	umount -l "$1" 2>/dev/null || "${AS[@]}" fusermount3 -uz "$1" 2>/dev/null || true
}

# run_of DIR: the runtime directory of DIR's mount, from its dir file.
run_of() { dirname "$(grep -lxF "$1" "$BASE"/m-*/dir)"; }

# assert_clean DIR RUN: DIR is not mounted, and no mount, process or file of
# its runtime directory RUN is left.
assert_clean()
{
	local left i
	for ((i = 0; i < 100; i++)); do
		[[ -z $(pgrep -f "$2/" || true) ]] && break
		sleep 0.1
	done
	! is_mounted "$1" || fail "$1 is still mounted"
	left=$(grep -F "$2" /proc/self/mountinfo || true)
	[[ -z $left ]] || fail "mounts left: $left"
	left=$(pgrep -a -f "$2/" || true)
	[[ -z $left ]] || fail "processes left: $left"
	[[ ! -e $2 ]] || fail "runtime directory left: $2: $(ls -A "$2" 2>&1)"
}

# round DIR: mount, kill the server, write, uzram umount (must fail and
# say why), nothing left, mount again, write and read, umount cleanly.
round()
{
	local dir=$1 run server rc=0
	"${AS[@]}" mkdir "$dir"
	on_exit _unmount "$dir"
	um mount "$dir" --size 32M "${VIA[@]}" 2>"$T/mount.err" ||
		fail "uzram mount: $(cat "$T/mount.err")"
	run=$(run_of "$dir")
	server=$(cat "$run/server.pid")
	"${AS[@]}" sh -c "echo before >'$dir/before' && sync"
	kill -KILL "$server"
	# writes to a device that has gone: the kernel may still say 0
	"${AS[@]}" sh -c "head -c 1M /dev/zero >'$dir/after'; sync" 2>/dev/null || true
	um umount "$dir" >"$T/umount.out" 2>&1 || rc=$?
	((rc != 0)) || fail "uzram umount exited 0 with its server killed:" \
		"$(cat "$T/umount.out")"
	grep -q "device had gone" "$T/umount.out" && grep -q "lost" "$T/umount.out" ||
		fail "uzram umount does not say the device had gone and writes" \
			"were lost: $(cat "$T/umount.out")"
	assert_clean "$dir" "$run"

	um mount "$dir" --size 32M "${VIA[@]}" 2>"$T/mount.err" ||
		fail "uzram mount again after the dead one: $(cat "$T/mount.err")"
	"${AS[@]}" sh -c "echo again >'$dir/again' && sync"
	assert_eq "$("${AS[@]}" cat "$dir/again")" again "the file in the new mount"
	um umount "$dir" 2>"$T/umount.err" ||
		fail "uzram umount of the new mount: $(cat "$T/umount.err")"
	assert_clean "$dir" "$run"
}

VIA=()
if ((EUID == 0)); then
	step "root, \$UZRAM_RUNTIME_DIR: the server killed, umount says so, mount again"
	BASE=$T/run
	mkdir -m 700 "$BASE"
	ENV=(UZRAM_RUNTIME_DIR="$BASE")
	round "$T/root"

	as_nobody "$T/nb" "$T/nb/xdg"
	"${AS[@]}" test -x "$UZRAM" || skip_all "user nobody cannot run $UZRAM"
else
	[[ -r /dev/fuse && -w /dev/fuse ]] ||
		skip_all "the unprivileged part needs /dev/fuse read-write"
	mkdir -m 700 "$T/nb" "$T/nb/xdg"
fi

VIA=(--via fuse) # without root the default is uzram's own fs (t66 kills that)
step "user $("${AS[@]}" id -un), \$XDG_RUNTIME_DIR: fuse2fs, the server killed, mount again"
BASE=$T/nb/xdg/uzram
ENV=(-u UZRAM_RUNTIME_DIR XDG_RUNTIME_DIR="$T/nb/xdg")
round "$T/nb/x"
"${AS[@]}" rmdir "$BASE"

step "user $("${AS[@]}" id -un), /tmp/uzram-UID: the same"
BASE=/tmp/uzram-$("${AS[@]}" id -u)
ENV=(-u UZRAM_RUNTIME_DIR -u XDG_RUNTIME_DIR)
round "$T/nb/t"
