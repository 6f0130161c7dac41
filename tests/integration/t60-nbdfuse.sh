#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t60-nbdfuse.sh - `uzram serve` as a file through nbdfuse (FUSE): data
# written by nbdcopy is read through the mount, data written with dd through
# the mount (aligned and not) is read back by nbdcopy, a fresh client.
# As root, also a real file system: loop device on the FUSE file, mkfs.ext4,
# mount, untar the corpus, compare, umount, e2fsck -fn clean, and the same
# checks on a copy of the export taken with nbdcopy afterwards.
source "$(dirname "$0")/functions.sh"
require nbdfuse nbdcopy

MiB=$((1024 * 1024))
TARSZ=$(stat -c %s "$TAR")

# fuse_mount NAME DIR: mount server NAME's export as DIR/nbd; waits for it.
fuse_mount()
{
	local name=$1 dir=$2 pid
	mkdir -p "$dir"
	nbdfuse -P "$T/$name.fuse.pid" "$dir" "${URI[$name]}" \
		>"$T/$name.fuse.log" 2>&1 &
	pid=$!
	on_exit _kill_pid "$pid"
	cleanup_mount "$dir"
	for ((i = 0; i < 200; i++)); do
		[[ -s $T/$name.fuse.pid ]] && mountpoint -q "$dir" && return 0
		kill -0 "$pid" 2>/dev/null ||
			fail "nbdfuse exited: $(cat "$T/$name.fuse.log")"
		sleep 0.05
	done
	fail "nbdfuse did not mount $dir within 10s: $(cat "$T/$name.fuse.log")"
}

step "start a 64 MiB export, write files.tar with nbdcopy"
start_server a --size 64M
nbdcopy --flush "$TAR" "${URI[a]}"

step "nbdfuse: the file has the export's size and data"
fuse_mount a "$T/mnt"
assert_eq "$(stat -c %s "$T/mnt/nbd")" $((64 * MiB)) "size of the FUSE file"
dd if="$T/mnt/nbd" of="$T/tar.back" bs=1M count=$(((TARSZ + MiB - 1) / MiB)) \
	status=none
assert_same_data "$TAR" "$T/tar.back" "$TARSZ"

# After the tar, whatever its size: 4 MiB at the first whole MiB past it,
# then 99 blocks of 999 bytes from a 999-byte boundary a MiB further on.
at=$(((TARSZ + MiB - 1) / MiB))
ublk=$(((at + 5) * MiB / 999 + 1))
ud=$((999 * ublk))
step "dd through the mount: 4 MiB at $at MiB, and 99 unaligned 999-byte blocks"
head -c $((4 * MiB)) "$CORPUS/heap-python.core" >"$T/core4"
dd if="$T/core4" of="$T/mnt/nbd" bs=1M seek="$at" conv=notrunc,fsync status=none
dd if="$T/core4" of="$T/mnt/nbd" bs=999 skip=7 count=99 seek="$ublk" \
	conv=notrunc,fsync status=none
dd if="$T/mnt/nbd" of="$T/back4" bs=1M skip="$at" count=4 status=none
assert_same_data "$T/core4" "$T/back4"

step "a fresh client (nbdcopy) sees what dd wrote"
nbdcopy "${URI[a]}" "$T/all"
assert_same_data "$TAR" "$T/all" "$TARSZ"
assert_zero "$T/all" "$TARSZ" $((at * MiB - TARSZ))
assert_same_range "$T/core4" 0 "$T/all" $((at * MiB)) $((4 * MiB))
assert_zero "$T/all" $(((at + 4) * MiB)) $((ud - (at + 4) * MiB))
assert_same_range "$T/core4" $((999 * 7)) "$T/all" $ud $((999 * 99))
assert_zero "$T/all" $((ud + 999 * 99)) $((64 * MiB - ud - 999 * 99))

step "unmount; the server stops cleanly"
_umount "$T/mnt"
stop_server a

if ((EUID != 0)); then
	echo "t60-nbdfuse: SKIP: the ext4 part needs root (losetup, mount)"
	exit 0
fi
require losetup mkfs.ext4 e2fsck mount umount tar

step "a tar of the complete members of the corpus tar"
members=$(complete_members "$TAR" "$T/files.tar")
((members > 0)) || fail "no complete regular file in $TAR"
TAR=$T/files.tar

step "ext4 on a loop device on the nbdfuse file"
start_server f --size 96M --algorithm zstd
fuse_mount f "$T/fmnt"
loop=$(losetup -f --show "$T/fmnt/nbd")
cleanup_loop "$loop"
mkfs.ext4 -q -F "$loop"
mkdir -p "$T/fs"
mount "$loop" "$T/fs"
cleanup_mount "$T/fs"

step "untar the corpus into it and compare"
tar -xf "$TAR" -C "$T/fs"
tar -df "$TAR" -C "$T/fs" >"$T/tar-d.out" 2>&1 ||
	fail "tar --compare found differences: $(head -n 5 "$T/tar-d.out")"
assert_eq "$(find "$T/fs" -path "$T/fs/lost+found" -prune -o -type f -print | wc -l)" \
	"$members" "regular files in the file system"

step "umount, e2fsck -fn is clean"
umount "$T/fs"
sync
e2fsck -fn "$loop" >"$T/fsck.out" 2>&1 ||
	fail "e2fsck -fn $loop: $(tail -n 15 "$T/fsck.out")"

step "detach; a copy taken with nbdcopy is a clean file system with the files"
losetup -d "$loop"
_umount "$T/fmnt"
nbdcopy "${URI[f]}" "$T/fs.img"
e2fsck -fn "$T/fs.img" >"$T/fsck2.out" 2>&1 ||
	fail "e2fsck -fn of the nbdcopy image: $(tail -n 15 "$T/fsck2.out")"
mount -o loop,ro "$T/fs.img" "$T/fs"
cleanup_mount "$T/fs"
tar -df "$TAR" -C "$T/fs" >"$T/tar-d2.out" 2>&1 ||
	fail "tar --compare on the nbdcopy image: $(head -n 5 "$T/tar-d2.out")"
umount "$T/fs"
stop_server f
