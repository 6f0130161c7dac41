#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t67-fs-image.sh - `uzram mount DIR --image FILE` (uzram's own file system,
# fs/tree_image.c), as root and as the user nobody: a tree with every kind
# of object (directories, hard links, symlinks, a fifo, sparse files,
# xattrs, odd modes, set times, the corpus) survives umount and mount,
# compared with a tmpfs copy by rsync -naHAX --checksum and by inode
# numbers; a second round of changes survives too; a corrupted or
# truncated image is refused with a message, nothing is mounted, and the
# file is untouched, and so is a whole device image whose tree record is
# broken or missing, and tree records mutated at random with right
# checksums are refused or mount and work; a save that cannot be written
# (nobody, a read-only directory; root, a full one) is refused by uzram
# umount, DIR left mounted, and succeeds once fixed; one that fails all the
# same (fusermount3 -u) leaves the old image and rescues the tree; a
# SIGKILL of the keeper during its save leaves a whole image, the old one
# or the new one.
source "$(dirname "$0")/functions.sh"
require fusermount3 tar setpriv rsync cmp nbdcopy cc
real_server || skip_all "uzram mount is a uzram command"

export UZRAM_RUNTIME_DIR=$T/run
mkdir -m 700 "$T/run"
AS=()


# mount_img DIR IMAGE ARGS...: uzram mount DIR --via fs --image IMAGE.
mount_img()
{
	local dir=$1 img=$2
	shift 2
	um mount "$dir" --via fs --image "$img" "$@" 2>"$T/mount.err" ||
		fail "uzram mount $dir --image $img: $(cat "$T/mount.err")"
	KEEPER=$(cat "$(dirname "$(grep -lxF "$dir" "$UZRAM_RUNTIME_DIR"/m-*/dir)")/pid")
	on_exit _unmount "$dir"
}

umount_img()
{
	um umount "$1" 2>"$T/umount.err" || fail "uzram umount $1: $(cat "$T/umount.err")"
	is_mounted "$1" && fail "$1 still mounted"
	return 0
}

# Every kind of object the file system keeps.
make_tree()
{
	local d=$1
	as tar -xf "$TAR" -C "$d"
	as python3 - "$d" <<'PY'
import os, sys
d = sys.argv[1]
os.makedirs(os.path.join(d, "a/b/c"))
with open(os.path.join(d, "a/f"), "wb") as f:
    f.write(b"hello\n")
os.link(os.path.join(d, "a/f"), os.path.join(d, "a/b/f2"))
os.link(os.path.join(d, "a/f"), os.path.join(d, "a/b/c/f3"))
os.symlink("../f", os.path.join(d, "a/b/sl"))
os.symlink("/nowhere/" + "x" * 300, os.path.join(d, "dangling"))
os.mkfifo(os.path.join(d, "fifo"))
open(os.path.join(d, "empty"), "w").close()
fd = os.open(os.path.join(d, "sparse"), os.O_RDWR | os.O_CREAT, 0o640)
os.pwrite(fd, b"s" * 5000, 3 << 20)         # a hole first, data, a hole
os.pwrite(fd, os.urandom(70000), 9 << 20)
os.ftruncate(fd, 40 << 20)
os.close(fd)
with open(os.path.join(d, "random"), "wb") as f:
    f.write(os.urandom(3 << 20))
os.setxattr(os.path.join(d, "a/f"), "user.k", b"v" * 3000)
os.setxattr(os.path.join(d, "a"), "user.empty", b"")
os.setxattr(os.path.join(d, "sparse"), "user.bin", bytes(range(256)))
os.chmod(os.path.join(d, "a/f"), 0o4751)
os.chmod(os.path.join(d, "a/b"), 0o1777)
os.chmod(os.path.join(d, "random"), 0o600)
for p in ("a/f", "a/b", "sparse", "fifo"):
    os.utime(os.path.join(d, p), ns=(1000000000123456789, 987654321987654321))
os.utime(os.path.join(d, "a/b/sl"), ns=(5, 7), follow_symlinks=False)
os.mkdir(os.path.join(d, "many"))
for i in range(1200):   # more than one getdents() of glibc's 32 KiB
    os.mknod(os.path.join(d, "many", "a-file-with-a-name-long-enough-to-fill-getdents-%04d" % i))
PY
}

# rsync's view: nothing to change from REF to DIR (names, contents, modes,
# times, owners, hard links, xattrs, symlinks, devices).
same_tree()
{
	local ref=$1 d=$2 what=$3
	as rsync -naHAXi --checksum --delete "$ref/" "$d/" >"$T/rsync.out" 2>&1 ||
		fail "rsync: $(head -n 5 "$T/rsync.out")"
	grep -v '^\.d\.\.t\.\.\.\.\.\. \./$' "$T/rsync.out" >"$T/rsync.diff" || true
	[[ ! -s $T/rsync.diff ]] || fail "$what: $(head -n 5 "$T/rsync.diff")"
}

# The names a listing gave need no LOOKUP (READDIRPLUS every time,
# fs/session.c): grep -r on a new mount, whose dentries the kernel has not
# seen, with 1200 names in one directory, counted in libfuse's debug log
# (1044 LOOKUPs with libfuse's default READDIRPLUS_AUTO).
lookups()
{
	local d=$1 log n
	log=$(dirname "$(grep -lxF "$d" "$UZRAM_RUNTIME_DIR"/m-*/dir)")/log
	as grep -r -c uzram_nothing_matches "$d" >/dev/null || true
	n=$(grep -c 'opcode: LOOKUP' "$log" || true)
	echo "$WHO: grep -r after mount (1200 names in one directory): $n LOOKUPs"
	((n <= 1)) || fail "grep -r over listed names made $n LOOKUPs"
}

# What rsync does not compare: inode numbers, link counts, blocks used.
# inodes DIR: each object's inode number, links, size, blocks, mode; then
# the file system's inodes in use (df -i: hard links count, as on tmpfs)
inodes()
{
	as sh -c "cd '$1' && find . ! -name . -printf '%p %i %n %s %b %m\n' | sort"
	as stat -f -c 'inodes used: %c - %d' "$1"
}

run()
{
	local d=$1 ref=$2 img=$3 i
	step "$WHO: a tree with every kind of object, umount, mount --image"
	mount_img "$d" "$img" --size 512M
	make_tree "$d"
	as rsync -aHAX "$d/" "$ref/"
	inodes "$d" >"$T/ino.before"
	umount_img "$d"
	[[ -s $img ]] || fail "no image at $img after umount"
	UZRAM_FS_DEBUG=1 mount_img "$d" "$img"
	lookups "$d"
	same_tree "$ref" "$d" "after mount --image"
	inodes "$d" >"$T/ino.after"
	cmp -s "$T/ino.before" "$T/ino.after" ||
		fail "inode numbers, links or blocks changed: $(diff "$T/ino.before" "$T/ino.after" | head -n 4)"
	as python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
assert os.lseek(fd, 0, os.SEEK_DATA) >= 2 << 20, "the hole at the start went"
assert os.lseek(fd, 10 << 20, os.SEEK_DATA if False else os.SEEK_HOLE) >= 9 << 20' "$d/sparse"

	step "$WHO: changes after the reload survive the next one"
	as rm -rf "$d/usr" "$d/a/b/c"
	as sh -c "echo more >>'$d/a/f' && mkdir '$d/new' && ln -s a '$d/new/s'"
	as rm -rf "$ref"/*
	as rsync -aHAX "$d/" "$ref/"
	# written last, unread: its block may still be staged (fs/bmap.c)
	# (the reference takes its mtime: the two writes may straddle a second,
	# which rsync's comparison then shows; ci15 met it)
	as sh -c "printf last >'$d/staged' && printf last >'$ref/staged' &&
		touch -r '$d/staged' '$ref/staged'"
	umount_img "$d"
	# without --via: --image picks uzram's own file system, as root too
	um mount "$d" --image "$img" 2>"$T/mount.err" ||
		fail "uzram mount $d --image $img: $(cat "$T/mount.err")"
	on_exit _unmount "$d"
	grep -qx fs "$(dirname "$(grep -lxF "$d" "$UZRAM_RUNTIME_DIR"/m-*/dir)")/via" ||
		fail "--image without --via did not pick --via fs"
	same_tree "$ref" "$d" "after a second umount and mount"
	as tar -xf "$TAR" -C "$d"
	as sh -c "cd '$d' && find . -type f -exec md5sum {} + | sort -k 2" >"$T/new.sums"
	umount_img "$d"
	cp "$img" "$T/good.img"

	step "$WHO: a corrupted image is refused, left as it was, nothing mounted"
	for i in 1 2 3; do
		cp "$T/good.img" "$T/bad.img"
		chown "$(stat -c %u:%g "$img")" "$T/bad.img"
		case $i in
		1) printf '\xff\x00\xff\x00' | dd of="$T/bad.img" bs=1 \
			seek=$(($(stat -c %s "$T/bad.img") / 2)) conv=notrunc status=none ;;
		2) truncate -s $(($(stat -c %s "$T/bad.img") * 2 / 3)) "$T/bad.img" ;;
		3) printf 'NOTANIMG' | dd of="$T/bad.img" conv=notrunc status=none ;;
		esac
		cp "$T/bad.img" "$T/bad.copy"
		mv "$T/bad.img" "$img.bad"
		if um mount "$d" --via fs --image "$img.bad" 2>"$T/mount.err"; then
			fail "a corrupted image ($i) was mounted"
		fi
		grep -q "$img.bad" "$T/mount.err" || fail "no message naming the image: $(cat "$T/mount.err")"
		echo "$WHO: corrupted image $i: $(cat "$T/mount.err")"
		is_mounted "$d" && fail "$d mounted from a corrupted image"
		cmp -s "$img.bad" "$T/bad.copy" || fail "the corrupted image was changed"
		rm -f "$img.bad" "$img.bad.lock"
	done
	cmp -s "$img" "$T/good.img" || fail "the good image changed"

	step "$WHO: --size other than the image's is refused, saying to leave it out"
	if um mount "$d" --via fs --image "$img" --size 96M 2>"$T/mount.err"; then
		fail "mounted an image with another --size"
	fi
	grep -q "conflicts with the size of image $img.*leave --size out" "$T/mount.err" ||
		fail "message: $(cat "$T/mount.err")"
	is_mounted "$d" && fail "$d mounted with a conflicting --size"
	cmp -s "$img" "$T/good.img" || fail "the image changed"

	step "$WHO: SIGKILL of the keeper during its save: a whole image stays"
	mount_img "$d" "$img"
	as rm -rf "$d/usr"
	as dd if=/dev/urandom of="$d/big" bs=1M count=64 status=none
	um umount "$d" 2>/dev/null &
	for ((i = 0; i < 400; i++)); do
		compgen -G "$img.tmp.*" >/dev/null && break
		sleep 0.01
	done
	kill -KILL "$KEEPER" 2>/dev/null || true
	wait || true
	um umount "$d" 2>/dev/null || true
	is_mounted "$d" && fail "$d still mounted after the kill"
	mount_img "$d" "$img"
	! compgen -G "$img.tmp.*" >/dev/null ||
		fail "the killed save's temporary file is still there: $(ls "$img".tmp.*)"
	if as test -e "$d/big"; then # as the owner: root may not look in
		echo "$WHO: the save was done before the kill: the new image"
		[[ $(as stat -c %s "$d/big") == $((64 << 20)) ]] || fail "big is cut"
	else
		echo "$WHO: killed during the save: the old image"
		as sh -c "cd '$d' && find . -type f -exec md5sum {} + | sort -k 2" >"$T/old.sums"
		cmp -s "$T/new.sums" "$T/old.sums" ||
			fail "the old image's files changed: $(diff "$T/new.sums" "$T/old.sums" | head -n 5)"
	fi
	umount_img "$d"
}

# Device images whose bytes are fine but whose tree is not: the tree's own
# checks (fs/tree_image.c) refuse them.
bad_tree()
{
	local good=$1 d=$2 bs first
	step "$WHO: a device image without a tree, or with a broken record, is refused"
	cp "$good" "$T/dev.img"
	start_server dev --image "$T/dev.img"
	nbdcopy "${URI[dev]}" "$T/raw"
	stop_server dev
	read -r first bs < <(python3 -c 'import struct, sys
sb = open(sys.argv[1], "rb").read(64)
assert sb[:8] == b"UZFSTREE", sb[:8]
print(struct.unpack_from("<Q", sb, 24)[0], struct.unpack_from("<I", sb, 40)[0])' "$T/raw")
	for i in 1 2; do
		cp "$T/raw" "$T/raw.bad"
		case $i in
		1) printf '\x55' | dd of="$T/raw.bad" bs=1 seek=$((first * bs + 20)) \
			conv=notrunc status=none ;;
		2) dd if=/dev/zero of="$T/raw.bad" bs=64 count=1 conv=notrunc status=none ;;
		esac
		rm -f "$T/bad.img"
		uzram load "$T/raw.bad" --cluster "$bs" --save "$T/bad.img" >/dev/null
		cp "$T/bad.img" "$T/bad.copy"
		if um mount "$d" --via fs --image "$T/bad.img" 2>"$T/mount.err"; then
			fail "an image with a broken tree ($i) was mounted"
		fi
		echo "$WHO: broken tree $i: $(cat "$T/mount.err")"
		grep -q "not a file system image" "$T/mount.err" ||
			fail "no message: $(cat "$T/mount.err")"
		is_mounted "$d" && fail "$d mounted from a broken tree"
		cmp -s "$T/bad.img" "$T/bad.copy" || fail "the refused image was changed"
	done
}

# Tree records changed at random but with right checksums (a helper made
# with libxxhash computes them), as only a bug or a hand could make them:
# each is refused with a message, or mounts and can be walked, read and
# unmounted; the keeper never dies. A small tree, whose record fits in one
# block.
mutated_trees()
{
	local d=$1 n=${FS_IMAGE_MUTATIONS:-8}
	step "$WHO: $n tree records mutated with right checksums: refused or usable"
	rm -f "$T/small.img"
	mount_img "$d" "$T/small.img" --size 16M
	as sh -c "cd '$d' && mkdir -p a/b && echo hi >a/f && ln a/f a/b/g &&
		ln -s ../f a/b/s && mkfifo a/p && head -c 30000 /dev/urandom >a/r &&
		truncate -s 1M a/sparse && echo x >>a/sparse"
	as python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.x", b"yy")' "$d/a/f"
	umount_img "$d"
	start_server small --image "$T/small.img"
	nbdcopy "${URI[small]}" "$T/raw"
	stop_server small
	cat >"$T/xxh3.c" <<'EOF2'
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) /* FILE OFF LEN: XXH3-64 of those bytes */
{
	FILE *f = fopen(argv[1], "rb");
	long off = atol(argv[2]), len = atol(argv[3]);
	char *b = malloc(len ? len : 1);
	if (argc != 4 || !f || !b || fseek(f, off, SEEK_SET) ||
	    fread(b, 1, len, f) != (size_t)len)
		return 1;
	printf("%llu\n", (unsigned long long)XXH3_64bits(b, len));
	return 0;
}
EOF2
	cc -O2 -o "$T/xxh3" "$T/xxh3.c" || fail "cannot build the XXH3 helper"
	python3 - "$T" "$d" "$n" "$UZRAM" <<'PY' || fail "a mutated tree record: see above"
import os, random, struct, subprocess, sys
T, d, n, U = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
raw = bytearray(open(T + "/raw", "rb").read())
length, first = struct.unpack_from("<QQ", raw, 16)
bs = struct.unpack_from("<I", raw, 40)[0]
if length > bs - 8:
    sys.exit("the test tree's record (%d bytes) is not in one block" % length)
off = first * bs + 8
rec = bytes(raw[off:off + length])
xxh = lambda path, o, k: int(subprocess.check_output([T + "/xxh3", path, str(o), str(k)]))
random.seed(os.environ.get("FS_IMAGE_SEED", "67"))
for it in range(n):
    r = bytearray(rec)
    kind = it % 3
    if kind == 0:
        for _ in range(random.randint(1, 3)):
            r[random.randrange(len(r))] = random.randrange(256)
    elif kind == 1:
        r = r[:random.randrange(len(r))]
    else:
        p = random.randrange(len(r) - 8)
        r[p:p + 8] = struct.pack("<Q", random.choice(
            [0, 1, 2, 255, 4096, 2**32 - 1, 2**63, 2**64 - 1]))
    w = bytearray(raw)
    w[off:off + bs - 8] = bytes(bs - 8)
    w[off:off + len(r)] = r
    struct.pack_into("<Q", w, 16, len(r))
    path = T + "/mut.raw"
    open(path, "wb").write(w)
    struct.pack_into("<Q", w, 48, xxh(path, off, len(r)))
    open(path, "wb").write(w)
    struct.pack_into("<Q", w, 56, xxh(path, 0, 56))
    open(path, "wb").write(w)
    img = T + "/mut.img"
    for f in (img, img + ".lock"):
        if os.path.exists(f):
            os.unlink(f)
    subprocess.run([U, "load", path, "--cluster", str(bs), "--save", img],
                   stdout=subprocess.DEVNULL, check=True)
    m = subprocess.run([U, "mount", d, "--via", "fs", "--image", img],
                       capture_output=True, text=True)
    if m.returncode:
        if "is not a file system image" not in m.stderr:
            sys.exit("mutation %d: mount failed without the message: %s" % (it, m.stderr))
        print("mutation %d: refused: %s" % (it, m.stderr.strip().split(": ")[-1]))
        continue
    walk = subprocess.run("ls -laR '%s' >/dev/null && find '%s' -type f -exec cat {} + "
                          ">/dev/null" % (d, d), shell=True)
    u = subprocess.run([U, "umount", d], capture_output=True, text=True)
    if walk.returncode or u.returncode:
        sys.exit("mutation %d: mounted, but walk %d, umount %d: %s"
                 % (it, walk.returncode, u.returncode, u.stderr))
    print("mutation %d: mounted, walked, unmounted" % it)
PY
}

# A save that cannot write: uzram umount sees it first and refuses,
# leaving DIR mounted; once the directory is fixed it saves. A save that
# fails all the same (the mount taken down by fusermount3 -u, which asks
# nothing first) leaves the old image and rescues the tree elsewhere.
save_fails()
{
	local d=$1 img=$2
	step "$WHO: an image directory that cannot be written: umount refuses, DIR stays"
	cp "$img" "$T/before.img"
	mount_img "$d" "$img"
	as touch "$d/later"
	# `uzram ctl save` would write the device without the tree: refused
	# (it said "ok" and wrote an image no mount could open, or said the
	# mount had no --image)
	local dev_img
	dev_img=$(dirname "$img")/device.img
	for a in "" "$dev_img"; do
		if um ctl --mount "$d" save $a >"$T/ctl.out" 2>&1; then
			fail "ctl save $a on a mount: $(cat "$T/ctl.out")"
		fi
		grep -q "saved into its --image at umount" "$T/ctl.out" ||
			fail "ctl save $a: $(cat "$T/ctl.out")"
	done
	[[ ! -e $dev_img ]] || fail "ctl save wrote $dev_img"
	chmod 555 "$(dirname "$img")"
	if um umount "$d" 2>"$T/umount.err"; then
		chmod 755 "$(dirname "$img")"
		fail "umount succeeded though the image could not be written"
	fi
	echo "$WHO: $(cat "$T/umount.err")"
	grep -q "cannot be saved into $img .*: $d stays mounted and unchanged" \
		"$T/umount.err" || fail "no message: $(cat "$T/umount.err")"
	is_mounted "$d" || fail "$d unmounted though its tree could not be saved"
	as test -f "$d/later" || fail "the mount lost its last file"
	cmp -s "$img" "$T/before.img" || fail "the old image changed"
	chmod 755 "$(dirname "$img")"
	umount_img "$d"
	mount_img "$d" "$img"
	as test -f "$d/later" || fail "the saved tree lacks the last file"

	step "$WHO: a save that fails all the same: the old image stays, the tree is rescued"
	cp "$img" "$T/before.img"
	as touch "$d/later2"
	chmod 555 "$(dirname "$img")"
	as fusermount3 -u "$d"
	wait_gone "$KEEPER" || fail "the keeper $KEEPER did not end"
	chmod 755 "$(dirname "$img")"
	cmp -s "$img" "$T/before.img" || fail "the old image changed"
	# the tree is not lost: saved elsewhere (the keeper's log, which
	# uzram umount relays, says where), and it mounts with what was
	# written last (it was dropped before 2026-12-05)
	local rescued r
	for r in "$HOME" /var/tmp /tmp; do
		rescued=$r/$(basename "$img").rescued-$KEEPER
		[[ -f $rescued ]] && break
	done
	[[ -f $rescued ]] || fail "no rescued tree $(basename "$img").rescued-$KEEPER"
	mount_img "$d" "$rescued"
	as test -f "$d/later2" || fail "the rescued tree lacks the last file"
	um umount "$d" || fail "umount of the rescued tree"
	rm -f "$rescued"
}

# An image directory too full for the data (a 1M tmpfs, as root): uzram
# umount refuses before unmounting; with room made, it saves, and the
# data is all there at the next mount.
save_no_room()
{
	local d=$1 small=$T/small
	step "$WHO: no room for the image: umount refuses, DIR stays; with room it saves"
	mkdir "$small"
	mount -t tmpfs -o size=1M tmpfs "$small"
	on_exit umount "$small"
	head -c 4M /dev/urandom >"$T/rand"
	mount_img "$d" "$small/tree.img" --size 64M
	cp "$T/rand" "$d/rand"
	if um umount "$d" 2>"$T/umount.err"; then
		fail "umount succeeded with 1M free for 4M of data"
	fi
	echo "$WHO: $(cat "$T/umount.err")"
	grep -q "KiB free, its data alone takes .*: $d stays mounted and unchanged" \
		"$T/umount.err" || fail "no message: $(cat "$T/umount.err")"
	is_mounted "$d" || fail "$d unmounted though its tree could not be saved"
	cmp "$T/rand" "$d/rand" || fail "the mount's data changed"
	mount -o remount,size=64M "$small"
	umount_img "$d"
	mount_img "$d" "$small/tree.img"
	cmp "$T/rand" "$d/rand" || fail "the saved data differs"
	umount_img "$d"
}

members=$(complete_members "$TAR" "$T/files.tar")
((members > 0)) || fail "no complete regular file in $TAR"
TAR=$T/files.tar

WHO=root
mkdir "$T/fs" "$T/ref" "$T/img"
run "$T/fs" "$T/ref" "$T/img/tree.img"
bad_tree "$T/good.img" "$T/fs"
mutated_trees "$T/fs"
save_no_room "$T/fs"

WHO=nobody
as_nobody "$T/nb" "$T/nb/run" "$T/nb/fs" "$T/nb/ref" "$T/nb/img"
chmod 755 "$T/nb" "$T/nb/img"
install -o nobody -g nogroup -m 644 "$TAR" "$T/nb/files.tar"
TAR=$T/nb/files.tar
UZRAM_RUNTIME_DIR=$T/nb/run
as test -x "$UZRAM" || skip_all "user nobody cannot run $UZRAM"
run "$T/nb/fs" "$T/nb/ref" "$T/nb/img/tree.img"
save_fails "$T/nb/fs" "$T/nb/img/tree.img"
