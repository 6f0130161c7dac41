#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t73-backing-blocks.sh - a backing file written on the blocks under it
# (`serve --backing-blocks`, always on with --swap; src/tier/
# backing_blocks.c), on ext4 on a loop device, with 4 KiB blocks and with
# 1 KiB ones (more extents, and blocks smaller than a page), and on XFS
# (xfsprogs; where the kernel has it): the file is
# allocated whole at the start; more data than the memory limit holds,
# written from several connections and then written over, reads back
# byte for byte; the tier's bytes are on the device under the file while
# the file system shows none of them, and none is in the file's page
# cache; while served the file is immutable (not written, truncated,
# removed or defragmented); it is empty and an ordinary file once the
# server ends, and e2fsck (xfs_repair -n) finds the file system clean.
# The file a killed server left (still immutable) is taken over by the
# next (it reads as zeros); a file with data in it is not, nor one a user
# made immutable. Refused with a clear message, the file left empty: a
# file on tmpfs (no block device of its own), on NTFS (a block device,
# but not a file system whose files stay put), a file system too small
# for the file, --backing-blocks without --backing.
source "$(dirname "$0")/functions.sh"
require nbdcopy mkfs.ext4 e2fsck filefrag fincore losetup lsattr chattr \
	e4defrag getfattr
real_server || skip_all "the tier is a uzram serve feature"
((EUID == 0)) || skip_all "a file's blocks are written on its device: root"

MiB=$((1024 * 1024))
LIMIT=$((4 * MiB))
field() { stat_field "$1" "$2"; }

# 40 MiB of the corpus, then 24 MiB of random bytes: whatever the corpus,
# at least 24 MiB that no codec shrinks, six times the memory limit
corpus_data "$T/data" $((40 * MiB))
head -c $((24 * MiB)) /dev/urandom >>"$T/data"
corpus_data "$T/over" $((16 * MiB))
head -c $((8 * MiB)) /dev/urandom >>"$T/over"
N=$(stat -c %s "$T/data")

# make_fs NAME TYPE BLOCKSIZE SIZE: a file system (ext4, xfs) on a loop
# device, mounted on $T/NAME; the device in DEV[NAME]
declare -A DEV
make_fs()
{
	truncate -s "$4" "$T/$1.img"
	if [[ $2 == xfs ]]; then
		mkfs.xfs -q -f -b size="$3" "$T/$1.img"
	else
		mkfs.ext4 -q -F -b "$3" "$T/$1.img"
	fi
	DEV[$1]=$(losetup --find --show "$T/$1.img")
	cleanup_loop "${DEV[$1]}"
	mkdir "$T/$1"
	mount "${DEV[$1]}" "$T/$1"
	cleanup_mount "$T/$1"
}

immutable() { [[ $(lsattr -d "$1" 2>/dev/null) =~ ^[^\ ]*i ]]; }

# guarded FILE TYPE: while served, FILE is immutable (chattr +i, as the
# kernel marks a swap file S_SWAPFILE): not written, truncated, removed,
# nor moved by the file system's defragmenter
guarded()
{
	local f=$1
	immutable "$f" || fail "$f is not immutable while served: $(lsattr -d "$f")"
	! dd if=/dev/zero of="$f" bs=4k count=1 conv=notrunc status=none 2>/dev/null ||
		fail "$f was written through its file system"
	! truncate -s 0 "$f" 2>/dev/null || fail "$f was truncated"
	! rm -f "$f" 2>/dev/null && [[ -e $f ]] || fail "$f was removed"
	if [[ $2 == xfs ]]; then
		xfs_fsr -v "$f" >/dev/null 2>&1 || true
	else
		e4defrag "$f" >/dev/null 2>&1 || true
	fi
	filefrag -v "$f" >"$T/frag.after"
	cmp -s "$T/frag" "$T/frag.after" ||
		fail "the defragmenter moved $f: $(diff "$T/frag" "$T/frag.after")"
}

# unguarded FILE: once the server has ended, FILE is an ordinary file
unguarded()
{
	! immutable "$1" || fail "$1 still immutable after the server"
	[[ -z $(getfattr --absolute-names -n user.uzram.backing "$1" 2>/dev/null) ]] ||
		fail "$1 keeps the server's attribute"
}

# round NAME TYPE BLOCKSIZE: the whole check on a fresh file system
round()
{
	local name=$1 type=$2 bs=$3 back phys dev_bytes fs_bytes
	step "$type with $bs-byte blocks: 64 MiB through 4 MiB of memory"
	make_fs "$name" "$type" "$bs" 400M
	back=$T/$name/back
	start_server "$name" --size 128M --mem-limit $LIMIT --backing "$back" \
		--backing-blocks
	# allocated whole at once: the device's size and the spare segments
	(($(stat -c %s "$back") > 128 * MiB)) ||
		fail "the file has $(stat -c %s "$back") bytes, not the device's"
	filefrag -v "$back" >"$T/frag"
	guarded "$back" "$type"
	nbdcopy --flush --connections 4 --requests 16 "$T/data" "${URI[$name]}"
	(($(field "$name" bd_count) > 0)) || fail "nothing was written back"
	assert_eq "$(field "$name" failed_writes)" 0 failed_writes
	assert_eq "$(field "$name" errors)" 0 "failed requests"
	nbdcopy --connections 4 "${URI[$name]}" "$T/out"
	assert_same_data "$T/data" "$T/out" "$N"

	step "$type with $bs-byte blocks: written over, read back"
	nbdcopy --flush --connections 4 --requests 16 "$T/over" \
		"${URI[$name]}"
	cp "$T/data" "$T/want"
	dd if="$T/over" of="$T/want" conv=notrunc status=none
	nbdcopy "${URI[$name]}" "$T/out"
	assert_same_data "$T/want" "$T/out" "$N"
	echo "   $(field "$name" bd_count) pages on the file, $(field "$name" bd_writes) written"

	step "$type with $bs-byte blocks: on the device, not in the file system"
	assert_eq "$(fincore --noheadings --output PAGES "$back" | tr -d ' ')" 0 \
		"pages of the file in its page cache"
	# the first extent's first MiB: the tier's bytes on the device, while
	# the file system reads the file (allocated, never written) as zeros
	phys=$(awk '$1 == "0:" { sub(/\.\..*/, "", $4); print $4 }' "$T/frag")
	[[ $phys =~ ^[0-9]+$ ]] || fail "no first extent in: $(cat "$T/frag")"
	dev_bytes=$(dd if="${DEV[$name]}" bs="$bs" skip="$phys" \
		count=$((MiB / bs)) iflag=direct status=none | tr -d '\0' | wc -c)
	fs_bytes=$(head -c $MiB "$back" | tr -d '\0' | wc -c)
	((dev_bytes > 0)) || fail "nothing on the device under the file"
	assert_eq "$fs_bytes" 0 "non-zero bytes read through the file system"

	step "$type with $bs-byte blocks: emptied at the end, the file system clean"
	stop_server "$name"
	assert_eq "$(stat -c %s "$back")" 0 "the file's size after the server"
	unguarded "$back"
	umount "$T/$name"
	if [[ $type == xfs ]]; then
		xfs_repair -n "${DEV[$name]}" >"$T/fsck" 2>&1 ||
			fail "xfs_repair -n: $(cat "$T/fsck")"
	else
		e2fsck -fn "$T/$name.img" >"$T/fsck" 2>&1 ||
			fail "e2fsck: $(cat "$T/fsck")"
	fi
}

round a ext4 4096
round b ext4 1024
if grep -qw xfs /proc/filesystems; then
	require mkfs.xfs xfs_repair
	round x xfs 4096
else
	echo "t73-backing-blocks: this kernel has no XFS: skipped"
fi

# refuse ARGS...: uzram ARGS, which must end by itself: a server that
# serves where it must refuse is stopped after 20 s (status 124)
refuse() { timeout 20 "${SANITIZER_RUN[@]}" "$UZRAM" "$@"; }

step "a file a killed server left: the next server takes it over"
make_fs c ext4 4096 400M
start_server c1 --size 128M --mem-limit $LIMIT --backing "$T/c/back" --backing-blocks
nbdcopy --flush "$T/data" "${URI[c1]}"
(($(field c1 bd_count) > 0)) || fail "nothing was written back"
kill -KILL "${PID[c1]}"
wait "${PID[c1]}" 2>/dev/null || true
unset "PID[c1]"
rm -f "${SOCK[c1]}"*
(($(stat -c %s "$T/c/back") > 128 * MiB)) || fail "the killed server's file is gone"
immutable "$T/c/back" || fail "the killed server's file lost its guard"
start_server c2 --size 128M --mem-limit $LIMIT --backing "$T/c/back" --backing-blocks
nbdcopy --flush "$T/over" "${URI[c2]}"
nbdcopy "${URI[c2]}" "$T/out"
assert_same_data "$T/over" "$T/out"
stop_server c2
assert_eq "$(stat -c %s "$T/c/back")" 0 "the file's size after the second server"
unguarded "$T/c/back"

step "a file with data in it: refused, its bytes kept"
head -c 1M "$T/data" >"$T/c/data"
rc=0
refuse serve --socket "$T/d.sock" --size 128M --mem-limit $LIMIT \
	--backing "$T/c/data" --backing-blocks >"$T/d.out" 2>&1 || rc=$?
((rc != 0 && rc != 124)) || fail "served over a file with data (status $rc)"
grep -qF "is not empty" "$T/d.out" || fail "no message: $(cat "$T/d.out")"
cmp -s "$T/c/data" <(head -c 1M "$T/data") || fail "the file's bytes changed"

step "a file a user made immutable: refused, left as it is"
fallocate -l 1M "$T/c/frozen"
chattr +i "$T/c/frozen"
rc=0
refuse serve --socket "$T/f.sock" --size 128M --mem-limit $LIMIT \
	--backing "$T/c/frozen" --backing-blocks >"$T/f.out" 2>&1 || rc=$?
((rc != 0 && rc != 124)) || fail "served over an immutable file (status $rc)"
grep -qF "immutable (chattr +i), and not by a uzram server" "$T/f.out" ||
	fail "no message: $(cat "$T/f.out")"
immutable "$T/c/frozen" || fail "the user's immutable flag was cleared"
assert_eq "$(stat -c %s "$T/c/frozen")" $MiB "the immutable file's size"

# refused NAME MESSAGE BACKING: the server ends with MESSAGE, serves
# nothing, and leaves no byte in BACKING
refused()
{
	local rc=0
	refuse serve --socket "$T/$1.sock" --size 128M --mem-limit $LIMIT \
		--backing "$3" --backing-blocks >"$T/$1.out" 2>&1 || rc=$?
	((rc != 0 && rc != 124)) || fail "served with $3 (status $rc)"
	grep -qF -- "$2" "$T/$1.out" || fail "no '$2' in: $(cat "$T/$1.out")"
	[[ ! -S $T/$1.sock ]] || fail "it listened"
	[[ ! -e $3 ]] || assert_eq "$(stat -c %s "$3")" 0 "bytes left in $3"
}

step "a file on tmpfs: refused, no block device of its own"
mkdir "$T/tmp"
mount -t tmpfs -o size=300M tmpfs "$T/tmp"
cleanup_mount "$T/tmp"
refused t "its file system has no block device of its own" "$T/tmp/back"

if command -v mkntfs >/dev/null && command -v ntfs-3g >/dev/null; then
	step "a file on NTFS (ntfs-3g): refused, its blocks not known to stay"
	truncate -s 64M "$T/ntfs.img"
	mkntfs -q -F -f "$T/ntfs.img" >/dev/null 2>&1
	DEV[ntfs]=$(losetup --find --show "$T/ntfs.img")
	cleanup_loop "${DEV[ntfs]}"
	mkdir "$T/ntfs"
	ntfs-3g "${DEV[ntfs]}" "$T/ntfs"
	cleanup_mount "$T/ntfs"
	refused nt "is not ext4 or XFS" "$T/ntfs/back"
else
	echo "t73-backing-blocks: no ntfs-3g (scripts/deps.sh installs it): NTFS skipped"
fi

step "a file system too small for the file: refused, the space given back"
make_fs small ext4 4096 64M
free0=$(df --output=avail "$T/small" | tail -1)
refused s "cannot allocate its" "$T/small/back"
assert_eq "$(df --output=avail "$T/small" | tail -1)" "$free0" \
	"free space after the refusal"

step "--backing-blocks without --backing"
rc=0
refuse serve --socket "$T/n.sock" --backing-blocks >"$T/n.out" 2>&1 || rc=$?
((rc == 2)) || fail "exit status $rc"
grep -qF -- "--backing-blocks needs --backing" "$T/n.out" ||
	fail "no message: $(cat "$T/n.out")"

echo "t73-backing-blocks: ok"
