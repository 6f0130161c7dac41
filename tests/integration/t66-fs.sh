#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t66-fs.sh - uzram's own file system (`uzram mount --via fs`, the default
# without root), as root and as the unprivileged user nobody, each beside
# a tmpfs: the model test (fs_model.py: random operations on both trees,
# compared after every step, several seeds); the hard-link case of issue
# 32; set-user-ID and set-group-ID bits after writes, truncates and chown;
# real programs: tar x and diff -r, git, sqlite3, rsync -aHAX in and out,
# stress-ng's file-system stressors; mmap, flock and fcntl locks,
# SEEK_DATA/SEEK_HOLE, xattrs; data written fast and re-encoded later;
# memory given back after rm -rf; ENOSPC at --size with nothing lost (a
# failed fallocate takes no blocks); the
# keeper killed (ENOTCONN), uzram umount, and DIR mounted again; POSIX
# ACLs (cp -a, default ACLs, enforcement) and, as root, RENAME_WHITEOUT
# and an overlay's upper directory, as on tmpfs; rename's ctime, a
# listing's atime, xattr namespaces, as on tmpfs; no RELEASE
# for a file tar makes (the requests of tar x counted); a written file's
# pages kept by the kernel; lseek on a directory, which the kernel answers;
# statx's birth time; the model test read through the page cache.
source "$(dirname "$0")/functions.sh"
require fusermount3 tar setpriv git sqlite3 rsync flock diff stress-ng setfacl getfacl
real_server || skip_all "uzram mount is a uzram command"

SEEDS=${FS_MODEL_SEEDS:-3}
STEPS=${FS_MODEL_STEPS:-250}
export UZRAM_RUNTIME_DIR=$T/run
mkdir -m 700 "$T/run"
AS=()



rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
dev_mem()
{
	um stat --mount "$1" --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["mem_used_total"])'
}

# The operations that go through the kernel rather than our ops.
kernel_features()
{
	local d=$1
	as python3 - "$d" <<'PY'
import fcntl, mmap, os, sys
d = sys.argv[1]
p = os.path.join(d, "mm")
with open(p, "wb") as f:
    f.write(b"a" * 100000)
with open(p, "r+b") as f:          # shared write mapping, read back by read()
    m = mmap.mmap(f.fileno(), 100000)
    m[5000:5005] = b"hello"
    m.flush()
    m.close()
fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
assert os.pread(fd, 5, 5000) == b"hello", "shared mmap write not on the fs"
os.close(fd)
with open(p, "r+b") as f:          # a private mapping changes nothing
    m = mmap.mmap(f.fileno(), 100000, flags=mmap.MAP_PRIVATE)
    m[0:3] = b"zzz"
    m.close()
assert open(p, "rb").read(3) == b"aaa", "MAP_PRIVATE wrote through"
with open(p, "r+b") as f, open(p, "r+b") as g:   # fcntl locks
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(p, "r+b") as h:
        pid = os.fork()
        if pid == 0:
            try:
                fcntl.lockf(h, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os._exit(1)
            except OSError:
                os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0, "fcntl lock not exclusive"
    fcntl.flock(g, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with open(p, "rb") as h:
            fcntl.flock(h, fcntl.LOCK_EX | fcntl.LOCK_NB)
        raise SystemExit("flock not exclusive")
    except BlockingIOError:
        pass
s = os.path.join(d, "sparse")       # SEEK_DATA / SEEK_HOLE after a punch
fd = os.open(s, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"x" * (1 << 20), 0)
os.posix_fallocate(fd, 0, 1)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
assert libc.fallocate(fd, 3, ctypes.c_long(65536), ctypes.c_long(131072)) == 0
assert os.lseek(fd, 0, os.SEEK_HOLE) == 65536, os.lseek(fd, 0, os.SEEK_HOLE)
assert os.lseek(fd, 65536, os.SEEK_DATA) == 196608
assert os.pread(fd, 4, 70000) == b"\0" * 4
os.close(fd)
os.setxattr(s, "user.k", b"v1")
assert os.getxattr(s, "user.k") == b"v1" and "user.k" in os.listxattr(s)
os.removexattr(s, "user.k")
os.unlink(s); os.unlink(p)
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)   # open, unlinked: still there
os.pwrite(fd, b"k" * 300000, 0)
os.unlink(p)
os.pwrite(fd, b"z" * 10, 299990)
fd2 = os.open(os.path.join(d, "other"), os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd2, os.urandom(300000), 0)              # takes free blocks, if any
os.close(fd2); os.unlink(os.path.join(d, "other"))
fd3 = os.open("/proc/self/fd/%d" % fd, os.O_RDONLY | os.O_DIRECT) # not the cache
assert os.pread(fd3, 300000, 0) == b"k" * 299990 + b"z" * 10, "unlinked file lost"
os.close(fd3); os.close(fd)
PY
}

# The same work in DIR and in a tmpfs beside it.
real_programs()
{
	local d=$1 ref=$2
	step "$WHO: tar x of the corpus, diff -r against tmpfs"
	as tar -xf "$TAR" -C "$d"
	as tar -xf "$TAR" -C "$ref"
	as diff -r --no-dereference "$d" "$ref" >"$T/diff.out" 2>&1 ||
		fail "diff -r: $(head -n 5 "$T/diff.out")"
	step "$WHO: rsync -aHAX in and out"
	as mkdir "$d/rs" "$ref/rs-back"
	as rsync -aHAX "$ref/" "$d/rs/" --exclude rs --exclude rs-back
	as rsync -aHAX "$d/rs/" "$ref/rs-back/"
	as diff -r --no-dereference "$d/rs" "$ref/rs-back" >"$T/diff.out" 2>&1 ||
		fail "rsync round trip: $(head -n 5 "$T/diff.out")"
	step "$WHO: git init, add, commit, fsck"
	as mkdir "$d/repo"
	as cp -r "$ref/usr" "$d/repo/" 2>/dev/null || as cp "$TAR" "$d/repo/"
	as env HOME="$d" git -C "$d/repo" init -q
	as env HOME="$d" git -C "$d/repo" add -A
	as env HOME="$d" git -C "$d/repo" -c user.name=t -c user.email=t@t \
		commit -qm corpus
	as env HOME="$d" git -C "$d/repo" fsck --full --strict 2>"$T/fsck.out" ||
		fail "git fsck: $(head -n 5 "$T/fsck.out")"
	step "$WHO: sqlite3 write loop, integrity_check"
	as sqlite3 "$d/db" "create table t(k integer primary key, v text);" \
		"with recursive c(x) as (select 1 union all select x+1 from c where x<20000)
		 insert into t(v) select hex(randomblob(60)) from c;" \
		"delete from t where k % 3 = 0; update t set v = v || v where k % 5 = 0;" \
		"vacuum;" >/dev/null
	assert_eq "$(as sqlite3 "$d/db" 'pragma integrity_check;')" ok \
		"sqlite3 integrity_check"
	kernel_features "$d"
	step "$WHO: stress-ng's file-system stressors, with --verify"
	as mkdir "$d/sng"
	as stress-ng --temp-path "$d/sng" --hdd 2 --hdd-bytes 16M --verify \
		--dentry 1 --link 1 --symlink 1 --rename 1 --fallocate 1 \
		--fallocate-bytes 8M --seek 1 --seek-size 8M -t 3 \
		>"$T/sng.out" 2>&1 || fail "stress-ng: $(tail -n 5 "$T/sng.out")"
	as rm -rf "$d/sng"
}

# same_as_tmpfs HERE THERE WHAT FIELDS: the arrays named HERE (uzram's
# results) and THERE (tmpfs's, the same steps) agree entry by entry
same_as_tmpfs()
{
	local -n here=$1 there=$2
	local i
	for ((i = 0; i < ${#there[@]}; i++)); do
		[[ ${here[i]} == "${there[i]}" ]] ||
			fail "$3: ${here[i]} ($4) here, ${there[i]} on tmpfs"
	done
}

# privs_by WRITER GROUP D REF: files of nobody's, of group GROUP (empty:
# as made), in every mode below, each changed once by WRITER (root or
# nobody) with a write, an O_APPEND write, truncate, O_TRUNC, fallocate,
# a hole punch or a chown to its owner; the modes after it must be
# tmpfs's (the kernel's file_remove_privs(): set-user-ID cleared for a
# writer without CAP_FSETID, set-group-ID with group execute too, and
# without group execute for one outside the file's group).
privs_by()
{
	local writer=$1 group=$2 d=$3 ref=$4 dir f m op rc out=() back=()
	local run=()
	[[ $writer == nobody ]] && run=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
	for dir in "$d/p" "$ref/p"; do
		out=()
		for m in 4755 6755 2745; do
			for op in write append trunc otrunc falloc punch chown; do
				f=$dir/$m-$op
				as sh -c "rm -f '$f' && printf xy >'$f'"
				[[ -z $group ]] || chown "nobody:$group" "$f"
				as chmod "$m" "$f"
				rc=0
				case $op in
				write) "${run[@]}" dd if=/dev/zero of="$f" bs=1 count=1 \
					seek=1 conv=notrunc status=none || rc=$? ;;
				append) "${run[@]}" sh -c "printf z >>'$f'" || rc=$? ;;
				trunc) "${run[@]}" truncate -s 1 "$f" || rc=$? ;;
				otrunc) "${run[@]}" sh -c ": >'$f'" || rc=$? ;;
				falloc) "${run[@]}" fallocate -l 65536 "$f" || rc=$? ;;
				punch) "${run[@]}" fallocate -p -o 0 -l 1 "$f" || rc=$? ;;
				chown) "${run[@]}" chown nobody "$f" || rc=$? ;;
				esac
				out+=("$m-$op:$(as stat -c %a "$f"):$rc")
			done
		done
		[[ $dir == "$ref/p" ]] || back=("${out[@]}")
	done
	same_as_tmpfs back out "by $writer, group ${group:-its own}" mode:exit
}

# A new file's clusters are stored by lz4's fast mode and re-encoded
# later (cli/mount/mount_fs.c's write_fast()): uzram ctl's recompress
# (what the device's thread does once they are idle) re-encodes most of
# them, the memory falls, and the file reads back whole.
write_fast()
{
	local d=$1 m0 m1 n bs
	step "$WHO: written fast, re-encoded later"
	# a file's block is a cluster, 16 KiB unless --cluster says otherwise
	# (mount_fs.c's FS_CLUSTER: 4 KiB clusters cost more CPU a byte)
	bs=$(as stat -f -c %S "$d")
	((bs == 16384)) || fail "the file system's block is $bs bytes, not 16 KiB"
	compressible_data "$T/fast.$WHO" $((8 << 20)) >/dev/null
	chmod 644 "$T/fast.$WHO"
	as dd if="$T/fast.$WHO" of="$d/fast" bs=1M status=none
	m0=$(dev_mem "$d")
	um ctl --mount "$d" recompress >"$T/ctl.out" 2>&1 ||
		fail "uzram ctl --mount recompress: $(cat "$T/ctl.out")"
	n=$(um stat --mount "$d" --json | python3 -c \
		'import json, sys; print(json.load(sys.stdin)["pages_recompressed"])')
	m1=$(dev_mem "$d")
	echo "$WHO: 8 MiB written: $m0 B, $n pages re-encoded: $m1 B"
	((n >= 1024)) || fail "only $n of 2048 pages re-encoded"
	((m1 < m0)) || fail "the re-encode saved nothing ($m0 -> $m1 B)"
	as dd if="$d/fast" iflag=direct bs=1M status=none >"$T/fast.back"
	cmp -s "$T/fast.$WHO" "$T/fast.back" || fail "the file changed"
	as rm "$d/fast"
}

dev_pages()
{
	um stat --mount "$1" --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["pages_stored"])'
}

# staged_tail D: the last, partial block of the file written last stays
# in the file system (fs/bmap.c's staged block) until a read, another
# write or the compactor's next second puts it on the device, compressed
# once. A write, then the device's pages before any of those: the
# compactor may come in between, so 5 tries, of which one must see it.
staged_tail()
{
	local d=$1 ref=$2 i p0 p1 p2 seen=0
	step "$WHO: a file's last block stays staged until it is read"
	as sh -c "printf y >'$d/st-pre' && cat '$d/st-pre' >/dev/null"
	for ((i = 0; i < 5; i++)); do
		p0=$(dev_pages "$d")
		as sh -c "printf x >'$d/st$i'"
		p1=$(dev_pages "$d")
		assert_eq "$(as cat "$d/st$i")" x "the staged file read back"
		p2=$(dev_pages "$d")
		((p2 > p0)) || fail "the read left the block off the device ($p0 -> $p2)"
		((p1 == p0)) && seen=$((seen + 1))
	done
	echo "$WHO: a new 1-byte file's block off the device until read: $seen of 5"
	((seen > 0)) || fail "the block went to the device at the write, 5 times"
	p0=$(dev_pages "$d")
	as sh -c "printf z >'$d/st-late'"
	for ((i = 0; i < 100; i++)); do
		(($(dev_pages "$d") > p0)) && break
		sleep 0.1
	done
	((i < 100)) || fail "the staged block not on the device 10 s later"
	as sh -c "rm -f '$d'/st*"
	# every operation on a file whose last block is staged, against tmpfs;
	# the pages before it once the kernel's FORGETs of st* came in
	p0=$(dev_pages "$d")
	for ((i = 0; i < 50; i++)); do
		sleep 0.2
		p1=$(dev_pages "$d")
		((p1 == p0)) && break
		p0=$p1
	done
	as mkdir "$d/stg" "$ref/stg"
	as python3 "$ITEST_DIR/fs_staged.py" "$d/stg" "$ref/stg" >"$T/staged.out" 2>&1 ||
		fail "$(cat "$T/staged.out")"
	cat "$T/staged.out"
	as rm -rf "$d/stg" "$ref/stg"
	for ((i = 0; i < 100; i++)); do
		(($(dev_pages "$d") <= p0)) && break
		sleep 0.1
	done
	((i < 100)) || fail "deleted files' blocks still on the device: $p0 -> $(dev_pages "$d") pages"
}

has_cap()
{
	python3 -c 'import os, sys
print("cap" if "security.capability" in os.listxattr(sys.argv[1]) else "nocap")' "$1"
}

# caps_by_nobody D REF: a file of root's, set-user-ID and set-group-ID
# with group execute, writable by all, with a security.capability, then
# written or truncated by nobody or chowned by root: the mode and whether
# the capability stays must be tmpfs's (with FUSE_HANDLE_KILLPRIV_V2 the
# file system clears them itself: fs/wire.c).
caps_by_nobody()
{
	local d=$1 ref=$2 dir op f out=() back=()
	local nb=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
	for dir in "$d/p" "$ref/p"; do
		out=()
		for op in write trunc chown; do
			f=$dir/cap-$op
			rm -f "$f" && printf xy >"$f" && chmod 6777 "$f"
			python3 -c 'import os, struct, sys
os.setxattr(sys.argv[1], "security.capability",
            struct.pack("<5I", 0x02000001, 1 << 13, 0, 0, 0))' "$f"
			[[ $(has_cap "$f") == cap ]] || fail "no security.capability on $f"
			case $op in
			write) "${nb[@]}" sh -c "printf z >>'$f'" ;;
			trunc) "${nb[@]}" truncate -s 1 "$f" ;;
			chown) chown nobody "$f" ;;
			esac
			out+=("$op:$(stat -c %a "$f"):$(has_cap "$f")")
		done
		[[ $dir == "$ref/p" ]] || back=("${out[@]}")
	done
	same_as_tmpfs back out "a capability file" mode:xattr
}

privileges()
{
	local d=$1 ref=$2
	step "$WHO: set-user-ID and set-group-ID bits after writes, truncates, chown"
	as mkdir "$d/p" "$ref/p"
	if [[ $WHO == root ]]; then
		chmod 711 "$T"
		chown nobody "$d/p" "$ref/p"
		privs_by root root "$d" "$ref"
		privs_by nobody root "$d" "$ref"
		privs_by nobody nogroup "$d" "$ref"
		caps_by_nobody "$d" "$ref"
	else
		privs_by nobody "" "$d" "$ref"
	fi
	as rm -rf "$d/p" "$ref/p"
}

run_user()
{
	local d=$1 ref=$2 s full empty base
	step "$WHO: the hard link of issue 32: write through b, read through a"
	as sh -c "printf old >'$d/a' && ln '$d/a' '$d/b'"
	dd if=/dev/urandom of="$T/64k.$WHO" bs=64K count=1 status=none
	as dd if="$T/64k.$WHO" of="$d/b" bs=64K conv=notrunc status=none
	as dd if="$d/a" iflag=direct bs=64K status=none >"$T/back"
	cmp -s "$T/64k.$WHO" "$T/back" || fail "a shows other bytes than written through b"
	as rm "$d/a" "$d/b"
	privileges "$d" "$ref"
	write_fast "$d"
	staged_tail "$d" "$ref"

	step "$WHO: the model test, $SEEDS seeds of $STEPS steps"
	for ((s = 1; s <= SEEDS; s++)); do
		as python3 "$ITEST_DIR/fs_model.py" "$d" "$ref" "$s$RANDOM_SALT" \
			"$STEPS" >/dev/null 2>"$T/model.err" ||
			fail "$(cat "$T/model.err")"
		as sh -c "rm -rf '$d'/* '$ref'/*"
	done
	# compared every 7 steps: operations meet a staged block (fs/bmap.c)
	as python3 "$ITEST_DIR/fs_model.py" "$d" "$ref" "$((SEEDS + 1))$RANDOM_SALT" \
		"$STEPS" 7 >/dev/null 2>"$T/model.err" || fail "$(cat "$T/model.err")"
	as sh -c "rm -rf '$d'/* '$ref'/*"
	# read through the page cache: the kernel keeps it (no auto_inval_data,
	# fs/session.c), so a page it kept stale would differ here
	as python3 "$ITEST_DIR/fs_model.py" "$d" "$ref" "$((SEEDS + 2))$RANDOM_SALT" \
		"$STEPS" 1 cached >/dev/null 2>"$T/model.err" || fail "$(cat "$T/model.err")"
	as sh -c "rm -rf '$d'/* '$ref'/*"
	real_programs "$d" "$ref"
	step "$WHO: memory given back after rm -rf"
	# the device's memory (uzram stat --mount); the keeper's RSS is shown
	# too, but sanitizers keep freed memory and libfuse's buffers grow
	as rm -rf "$d/usr" "$d/rs" "$d/repo" "$d/db"
	sleep 1.5
	base=$(dev_mem "$d") rss0=$(rss_kib "$KEEPER")
	as tar -xf "$TAR" -C "$d"
	full=$(dev_mem "$d") rss1=$(rss_kib "$KEEPER")
	as rm -rf "$d/usr"
	sleep 2.5 # the compactor runs a second after frees
	empty=$(dev_mem "$d") rss2=$(rss_kib "$KEEPER")
	echo "$WHO: the device's memory $base B empty, $full B with the corpus," \
		"$empty B after rm -rf (the keeper's RSS: $rss0, $rss1, $rss2 KiB;" \
		"the corpus on tmpfs: $(du -sk "$ref/usr" | cut -f1) KiB)"
	(( (empty - base) * 100 <= (full - base) * 5 )) ||
		fail "rm -rf gave back only $((full - empty)) of $((full - base)) bytes"
}

# ENOSPC at the size: the write fails, the file system stays whole.
full_fs()
{
	local d=$1 i p0 used
	step "$WHO: ENOSPC at --size, nothing lost; a failed fallocate takes nothing"
	fs_mount "$d" --size 16M
	as dd if=/dev/urandom of="$d/keep" bs=1M count=4 status=none
	sha_keep=$(as sha256sum "$d/keep" | cut -d' ' -f1)
	if as dd if=/dev/urandom of="$d/big" bs=1M count=32 status=none 2>"$T/dd.err"; then
		fail "32 MiB fit in a 16 MiB file system"
	fi
	grep -q "No space left" "$T/dd.err" || fail "not ENOSPC: $(cat "$T/dd.err")"
	assert_eq "$(as sha256sum "$d/keep" | cut -d' ' -f1)" "$sha_keep" "kept file"
	as rm "$d/big"
	# a fallocate that cannot have every block takes none, as tmpfs's
	# shmem_fallocate() gives them back (it kept them: df full, the file
	# unchanged in size but holding the blocks)
	used=$(as df --output=used -B1 "$d" | tail -n 1)
	if as fallocate -l 32M "$d/keep" 2>"$T/falloc.err"; then
		fail "fallocate of 32 MiB fit in a 16 MiB file system"
	fi
	grep -q "No space left" "$T/falloc.err" || fail "not ENOSPC: $(cat "$T/falloc.err")"
	assert_eq "$(as df --output=used -B1 "$d" | tail -n 1)" "$used" \
		"bytes used after a failed fallocate"
	assert_eq "$(as stat -c %s:%b "$d/keep")" "4194304:8192" "the file a fallocate failed on"
	as dd if=/dev/urandom of="$d/again" bs=1M count=8 status=none
	step "$WHO: SIGKILL of the keeper: ENOTCONN, uzram umount, mount again"
	kill -KILL "$KEEPER"
	for ((i = 0; i < 50; i++)); do
		! running "$KEEPER" && break
		sleep 0.1
	done
	if as ls "$d" >/dev/null 2>"$T/ls.err"; then fail "DIR still answers"; fi
	# ECONNABORTED while a request was in flight, ENOTCONN after
	grep -Eq "not connected|connection abort" "$T/ls.err" ||
		fail "not ENOTCONN: $(cat "$T/ls.err")"
	# mounting again before the umount says what to do
	if um mount "$d" --size 16M 2>"$T/again.err"; then
		fail "mounted over the dead mount"
	fi
	grep -q "lost its process.*umount $d" "$T/again.err" ||
		fail "no advice: $(cat "$T/again.err")"
	um umount "$d" 2>/dev/null || fail "uzram umount after SIGKILL"
	is_mounted "$d" && fail "$d still mounted"
	fs_mount "$d" --size 16M --mem-limit 64M
	as touch "$d/new" || fail "touch after the new mount: $(as touch "$d/new" 2>&1)"
	# with a memory limit the device's ENOSPC must reach write() itself:
	# no block is staged (fs/bmap.c), a 1-byte file is on the device at once
	for ((i = 0; i < 5; i++)); do
		p0=$(dev_pages "$d")
		as sh -c "printf x >'$d/lim$i'"
		(($(dev_pages "$d") > p0)) || fail "a block staged with --mem-limit"
	done
	um umount "$d" 2>"$T/umount.err" || fail "uzram umount: $(cat "$T/umount.err")"
	[[ -z $(ls -A "$UZRAM_RUNTIME_DIR") ]] || fail "runtime files left"
}

# as_tmpfs DIR: what the differential test of 2026-12-05 found apart
# from tmpfs: a read moves an old atime (relatime; it never moved), and
# a name of over 255 bytes is ENAMETOOLONG, not ENOENT, in a lookup too
as_tmpfs()
{
	local d=$1
	step "$WHO: relatime on read; ENAMETOOLONG for a long name looked up"
	as python3 - "$d" <<'PY' || fail "differs from tmpfs (above)"
import errno, os, sys, time
d = sys.argv[1]
f = os.path.join(d, "atime")
with open(f, "w") as w:
    w.write("a" * 10000)
os.utime(f, ns=(10**15, 10**15))
with open(f) as r:
    r.read()
a = os.stat(f).st_atime
if abs(a - time.time()) > 60:
    sys.exit("atime %s after a read of a file whose atime was 1970" % a)
with open(f) as r:
    r.read()
if os.stat(f).st_atime != a:
    sys.exit("atime moved again on a second read (relatime)")
for p in ("q" * 256, "q" * 256 + "/x"):
    try:
        os.stat(os.path.join(d, p))
        sys.exit("stat of a %d-byte name succeeded" % len(p))
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            sys.exit("stat of a long name: %s, not ENAMETOOLONG" % e.strerror)
os.unlink(f)
PY
}

# limit_df DIR: with --mem-limit below --size, df's available space is
# what the limit still lets in: near nothing once a writer met ENOSPC (it
# said 33M of 64M free there), and no more than the limit before.
limit_df()
{
	local d=$1 avail
	step "$WHO: --mem-limit: df's available space follows the memory limit"
	fs_mount "$d" --size 64M --mem-limit 24M
	avail=$(as df --output=avail -B1 "$d" | tail -n 1)
	((avail > 8 << 20 && avail <= 24 << 20)) ||
		fail "available $avail bytes on an empty mount limited to 24M"
	if as dd if=/dev/urandom of="$d/fill" bs=1M count=64 status=none 2>"$T/dd.err"; then
		fail "64 MiB of random bytes fit in a 24M memory limit"
	fi
	avail=$(as df --output=avail -B1 "$d" | tail -n 1)
	echo "$WHO: at ENOSPC of --mem-limit 24M: df says $avail bytes available"
	((avail <= 2 << 20)) || fail "df says $avail bytes available at ENOSPC"
	um umount "$d" || fail "uzram umount $d"
}

# inode_limit DIR: --inodes as tmpfs's nr_inodes (fs/node.c's node_full()):
# the same files, links, directories, symlinks and FIFOs made and removed
# in DIR and in a tmpfs mounted with the same limit give the same ENOSPCs
# and the same used inodes after each step (a hard link takes one on
# tmpfs); with no --inodes, df -i's total is tmpfs's default.
inode_limit()
{
	local d=$1 ref=$T/ref-inodes dir out=()
	step "$WHO: --inodes 5: ENOSPC and df -i as tmpfs's nr_inodes=5"
	if ! mountpoint -q "$ref"; then
		mkdir -p "$ref"
		mount -t tmpfs -o nr_inodes=5,size=16M,mode=0755 tmpfs "$ref" ||
			fail "mount a tmpfs with nr_inodes=5"
		on_exit umount "$ref"
	fi
	rm -rf "${ref:?}"/*
	[[ $WHO == root ]] || chown nobody:nogroup "$ref"
	fs_mount "$d" --size 16M --inodes 5
	for dir in "$d" "$ref"; do
		as bash -c 'cd "$1" || exit
			r() { "$@" 2>/dev/null && echo "ok $2" || echo "ENOSPC? $2"; }
			u() { stat -f -c "inodes %c, free %d" .; }
			u; r touch a; r touch b; u; r ln a h; u; r ln a h2; u
			r mkdir x; r rm h; u; r ln -s a s; u; r mv h2 b; u
			r touch c; u; r mkfifo p; u; r rm a b; u; r mkdir x; u' \
			- "$dir" > "$T/inodes.$((${#out[@]}))" 2>&1
		out+=("$T/inodes.${#out[@]}")
	done
	diff "${out[@]}" > "$T/inodes.diff" ||
		fail "--inodes apart from tmpfs (<: uzram, >: tmpfs): $(head -n 12 "$T/inodes.diff")"
	grep -q '^ENOSPC' "${out[0]}" || fail "--inodes 5: nothing refused"
	um umount "$d" || fail "uzram umount $d"
}

# acls DIR REF: POSIX ACLs as tmpfs keeps them (fs/acl.c), the same steps
# in DIR and in the tmpfs REF with the same output: `cp -a` of a 755 tree
# (which sets each mode as a three-entry ACL after a mkdir 0700: the copy
# was left 700, the ACL beside it), a default ACL inherited and the umask
# without one, chmod through the mask, cp -a of a file with a named
# entry, setfacl -b; as root, the kernel enforcing a named entry that
# grants and one that denies.
acls()
{
	local d=$1 ref=$2 dir out
	step "$WHO: POSIX ACLs: cp -a, default ACLs and the umask, chmod, enforcement"
	for dir in "$d/acl" "$ref/acl"; do
		out=$T/acl.${dir//\//_}
		as mkdir "$dir"
		as bash -s "$dir" >"$out" 2>&1 <<'SH'
set -u
cd "$1" || exit 1
umask 022
mkdir src src/sub && echo x >src/f && chmod 755 src/f && chmod 2775 src/sub
cp -a src cpa
stat -c '%n %A' cpa cpa/f cpa/sub
getfacl -cp cpa
mkdir dd && setfacl -d -m u:daemon:rwx,g::r-x,o::- dd
touch dd/f && mkdir dd/s
stat -c '%n %A' dd/f dd/s
getfacl -cp dd/f dd/s
echo s >secret && chmod 600 secret && setfacl -m u:daemon:r secret
echo p >pub && chmod 644 pub && setfacl -m u:daemon:- pub
chmod 640 secret
stat -c '%n %A' secret pub
getfacl -cp secret
cp -a secret sec2 && getfacl -cp sec2
setfacl -b sec2 && stat -c '%n %A' sec2 && getfacl -cp sec2
setfacl -k dd && touch dd/g && stat -c '%n %A' dd/g
umask 077 && touch m077 && mkdir d077 && stat -c '%n %A' m077 d077
SH
		if [[ $WHO == root ]]; then
			setpriv --reuid=daemon --regid=daemon --clear-groups cat "$dir/secret" \
				>>"$out" 2>&1 || echo "secret: exit $?" >>"$out"
			setpriv --reuid=daemon --regid=daemon --clear-groups cat "$dir/pub" \
				>>"$out" 2>&1 || echo "pub: exit $?" >>"$out"
		fi
		sed -i "s|$dir|DIR|g" "$out"
	done
	diff "$T/acl.${d//\//_}_acl" "$T/acl.${ref//\//_}_acl" >"$T/acl.diff" ||
		fail "ACLs apart from tmpfs's (<: uzram, >: tmpfs): $(head -n 12 "$T/acl.diff")"
	grep -qx 'cpa drwxr-xr-x' "$T/acl.${d//\//_}_acl" ||
		fail "cp -a: $(head -n 3 "$T/acl.${d//\//_}_acl")"
}

# meta_as_tmpfs DIR REF: what the run of /tmp's programs of 2026-12-05
# found apart from tmpfs, the same steps in DIR and in the tmpfs REF with
# the same output: rename moves the ctime of what it moved (both names'
# with RENAME_EXCHANGE; it stayed); a listing of a changed directory
# moves its atime (relatime; it never moved); xattr names in no namespace
# tmpfs has are EOPNOTSUPP and a bare prefix EINVAL (any was kept); an
# ACL removed where there is none is no error (ENODATA: setfacl -b)
meta_as_tmpfs()
{
	local d=$1 ref=$2 dir
	step "$WHO: rename's ctime, a listing's atime, xattr names, as on tmpfs"
	for dir in "$d/meta" "$ref/meta"; do
		as mkdir "$dir"
		as python3 - "$dir" >"$T/meta.${dir//\//_}" 2>&1 <<'PY'
import ctypes, errno, os, sys, time
os.chdir(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
old = (10**15, 10**15)
def ctime_moved(path, change, after=None):
    os.utime(path, ns=old)
    c = os.stat(path).st_ctime_ns
    time.sleep(0.01)
    change()
    return os.stat(after or path).st_ctime_ns != c
os.mkdir("d"); os.mkdir("e"); open("f", "w").close(); open("g", "w").close()
print("rename file", ctime_moved("f", lambda: os.rename("f", "e/f"), "e/f"))
print("rename dir", ctime_moved("d", lambda: os.rename("d", "d2"), "d2"))
print("exchange", ctime_moved("g", lambda: libc.renameat2(-100, b"g", -100, b"e/f", 2), "e/f"))
open("d2/x", "w").close()
os.utime("d2", ns=old)
os.listdir("d2")
print("listing's atime moved", os.stat("d2").st_atime_ns != old[0])
for name in ("foo.x", "system.foo", "user", "user.", "trusted.", "user.ok"):
    out = []
    for op in (lambda: os.setxattr("g", name, b"1"), lambda: os.getxattr("g", name),
               lambda: os.removexattr("g", name)):
        try:
            op()
            out.append("ok")
        except OSError as e:
            out.append(errno.errorcode[e.errno])
    print(name, out)
for name in ("system.posix_acl_access", "system.posix_acl_default"):
    for p in ("g", "d2"):
        try:
            os.removexattr(p, name)
            print(p, name, "removed")
        except OSError as e:
            print(p, name, errno.errorcode[e.errno])
PY
	done
	diff "$T/meta.${d//\//_}_meta" "$T/meta.${ref//\//_}_meta" >"$T/meta.diff" ||
		fail "apart from tmpfs (<: uzram, >: tmpfs): $(head -n 12 "$T/meta.diff")"
	as rm -rf "$d/meta" "$ref/meta"
}

# whiteout DIR REF: RENAME_WHITEOUT (overlayfs's upper directory here;
# root only, as the kernel asks for CAP_MKNOD): the old name becomes a
# char device 0/0, the new one has the bytes; then an overlay with its
# upper directory in DIR: a file changed, one deleted (a whiteout), a
# directory replaced (opaque), the same as with its upper on tmpfs
whiteout()
{
	local d=$1 ref=$2 dir lower=$T/ovl-lower merged=$T/ovl-merged
	step "$WHO: RENAME_WHITEOUT, and an overlay's upper directory"
	mkdir -p "$lower/d" "$merged"
	echo a >"$lower/a"; echo b >"$lower/b"; echo x >"$lower/d/x"
	for dir in "$d/ovl" "$ref/ovl"; do
		mkdir -p "$dir/up" "$dir/work"
		python3 - "$dir" <<'PY' >"$dir.out" || fail "RENAME_WHITEOUT in $dir (above)"
import ctypes, os, stat, sys
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
with open(os.path.join(d, "w"), "w") as f:
    f.write("bytes")
if libc.renameat2(-100, os.path.join(d, "w").encode(), -100,
                  os.path.join(d, "w2").encode(), 4) != 0:
    sys.exit("renameat2(RENAME_WHITEOUT): " + os.strerror(ctypes.get_errno()))
st = os.lstat(os.path.join(d, "w"))
print(stat.S_ISCHR(st.st_mode), st.st_rdev, open(os.path.join(d, "w2")).read())
PY
		mount -t overlay overlay -o "lowerdir=$lower,upperdir=$dir/up,workdir=$dir/work" \
			"$merged" || fail "overlay with its upper in $dir: $(dmesg | tail -n 3)"
		echo more >>"$merged/a" && rm "$merged/b" && rm -r "$merged/d" &&
			mkdir "$merged/d" && echo new >"$merged/d/n" || fail "overlay on $dir"
		umount "$merged"
		mount -t overlay overlay -o "lowerdir=$lower,upperdir=$dir/up,workdir=$dir/work" \
			"$merged" || fail "overlay again on $dir"
		{ ls -A "$merged" "$merged/d"; cat "$merged/a"
		  (cd "$dir/up" && find . -printf '%y %m %p\n' | sort); } >>"$dir.out"
		umount "$merged"
	done
	diff "$d/ovl.out" "$ref/ovl.out" >"$T/ovl.diff" ||
		fail "overlay apart from tmpfs's: $(head -n 12 "$T/ovl.diff")"
	grep -qx 'c 0 ./b' "$d/ovl.out" || fail "no whiteout of b: $(cat "$d/ovl.out")"
}

both()
{
	local d=$1 ref=$2
	limit_df "$d"
	inode_limit "$d"
	fs_mount "$d" --size 2G
	[[ $(as stat -f -c %c "$d") == $(stat -f -c %c "$ref") ]] ||
		fail "df -i: $(as stat -f -c %c "$d") inodes, tmpfs's default $(stat -f -c %c "$ref")"
	run_user "$d" "$ref"
	direct_written "$d"
	as_tmpfs "$d"
	acls "$d" "$ref"
	meta_as_tmpfs "$d" "$ref"
	[[ $WHO != root ]] || whiteout "$d" "$ref"
	um umount "$d" || fail "uzram umount $d"
	is_mounted "$d" && fail "$d still mounted after uzram umount"
	full_fs "$d"
}

# killpriv_v2 DIR LOG: where the kernel offers FUSE_HANDLE_KILLPRIV_V2
# (its INIT flags in libfuse's debug LOG; Linux 5.11+), the file system
# takes it (fs/wire.c), so a file written 8 times costs one GETXATTR of
# security.capability, not one a write.
killpriv_v2()
{
	local d=$1 log=$2 flags n0 n1
	flags=$(grep -m1 -oE 'flags=0x[0-9a-f]+' "$log" | cut -d= -f2)
	if ((!(flags >> 28 & 1))); then
		echo "$WHO: this kernel does not offer FUSE_HANDLE_KILLPRIV_V2"
		return
	fi
	n0=$(grep -c 'opcode: GETXATTR' "$log" || true)
	as python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(8):
    os.write(fd, b"k" * 4096)
os.close(fd)' "$d/eight"
	n1=$(grep -c 'opcode: GETXATTR' "$log" || true)
	echo "$WHO: 8 writes of a file: $((n1 - n0)) GETXATTR"
	((n1 - n0 <= 1)) || fail "$((n1 - n0)) GETXATTRs for 8 writes of one file"
	as rm "$d/eight"
}

# kept_pages DIR LOG: a file written whole pages at a time keeps them in
# the page cache after a stat, and reads back with no READ: the kernel is
# not asked to drop a file's pages when its mtime moves (no
# auto_inval_data, fs/session.c); before, the stat's GETATTR showed our
# newer mtime and the read went to the device.
kept_pages()
{
	local d=$1 log=$2 n0 n1
	# made first: dd then opens a file that exists, through the page
	# cache (a file it created would be written direct: created_direct)
	as touch "$d/kept"
	as dd if=/dev/urandom of="$d/kept" bs=64K count=1 conv=notrunc status=none
	n0=$(grep -c 'opcode: READ ' "$log" || true)
	as stat "$d/kept" >/dev/null
	as cat "$d/kept" >/dev/null
	n1=$(grep -c 'opcode: READ ' "$log" || true)
	echo "$WHO: 64 KiB written, stat, read back: $((n1 - n0)) READs"
	((n1 == n0)) || fail "$((n1 - n0)) READs for pages the kernel held"
	as rm "$d/kept"
}

# direct_written DIR: a file made by open(O_CREAT), written 9 times 10
# KiB while another descriptor reads it through the page cache: the
# reader sees every write, and a write by a user without CAP_FSETID
# clears the new file's set-user-ID bit, as on tmpfs (root's stays).
# Where the kernel can map direct files the writes go direct
# (created_direct), elsewhere through the page cache: the same results.
direct_written()
{
	as python3 -c 'import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o4755)
for i in range(8):
    os.write(fd, bytes([97 + i]) * 10240)
r = os.open(p, os.O_RDONLY)
assert os.pread(r, 81920, 0) == b"".join(bytes([97 + i]) * 10240 for i in range(8))
os.pwrite(fd, b"z" * 10240, 20480)   # over pages the reader has cached
got = os.pread(r, 10240, 20480)
assert got == b"z" * 10240, "a cached reader missed a write: %r" % got[:8]
os.close(fd)
os.close(r)
mode, want = os.stat(p).st_mode & 0o7777, 0o4755 if os.geteuid() == 0 else 0o755
assert mode == want, "mode %o after a write, want %o" % (mode, want)' "$1/direct" ||
		fail "$WHO: a created file, written and read: see above"
	as rm "$1/direct"
}

# created_direct DIR LOG: where the kernel takes
# FUSE_DIRECT_IO_ALLOW_MMAP (protocol 7.39, Linux 6.6+), a file made by
# open(O_CREAT) to be written only is written with direct I/O
# (fs/ops_name.c's op_create): direct_written's writes cost one WRITE
# each and no GETXATTR (through the page cache tar's 10 KiB writes cost
# two WRITEs for every write that starts inside a page, and a GETXATTR
# before the first).
created_direct()
{
	local d=$1 log=$2 minor w0 w1 x0 x1
	minor=$(grep -m1 -oE '^INIT: 7\.[0-9]+' "$log" | cut -d. -f2)
	if ((minor < 39)); then
		echo "$WHO: this kernel (FUSE 7.$minor) cannot map direct files: created files go through the page cache"
		return
	fi
	w0=$(grep -c 'opcode: WRITE' "$log" || true)
	x0=$(grep -c 'opcode: GETXATTR' "$log" || true)
	direct_written "$d"
	w1=$(grep -c 'opcode: WRITE' "$log" || true)
	x1=$(grep -c 'opcode: GETXATTR' "$log" || true)
	echo "$WHO: a created file, 9 writes of 10 KiB: $((w1 - w0)) WRITEs, $((x1 - x0)) GETXATTRs"
	((w1 - w0 == 9)) || fail "$((w1 - w0)) WRITEs for 9 writes of a created file"
	((x1 == x0)) || fail "$((x1 - x0)) GETXATTRs for the writes of a created file"
}

# large_reads DIR LOG: as root, the mount's bdi reads ahead max_write
# (1 MiB, fs/session.c), so a sequential read of 8 MiB out of the page
# cache takes 8 READs, not 64 of the kernel's default 128 KiB.
large_reads()
{
	local d=$1 log=$2 n0 n1
	head -c 8M /dev/urandom >"$d/seq"
	dd if="$d/seq" iflag=nocache count=0 status=none # out of the page cache
	n0=$(grep -c 'opcode: READ ' "$log" || true)
	dd if="$d/seq" of=/dev/null bs=1M status=none
	n1=$(grep -c 'opcode: READ ' "$log" || true)
	echo "$WHO: 8 MiB read back in $((n1 - n0)) READs"
	((n1 - n0 <= 12)) || fail "$((n1 - n0)) READs for 8 MiB: the read-ahead stayed small"
	rm "$d/seq"
}

# dir_seek DIR LOG REF: lseek(2) on a directory. SEEK_SET and SEEK_CUR as
# on tmpfs (REF); SEEK_END, SEEK_DATA and SEEK_HOLE, EINVAL on tmpfs, are
# answered by the kernel (generic_file_llseek(), from st_size) without a
# FUSE_LSEEK to the file system (none in libfuse's debug LOG), as
# uzram-mount(1) says among its differences from tmpfs.
dir_seek()
{
	local d=$1 log=$2 ref=$3 n0 n1
	step "$WHO: lseek on a directory: tmpfs's answers, or the kernel's"
	n0=$(grep -c 'opcode: LSEEK' "$log" || true)
	as python3 - "$d" "$ref" <<'PY' || fail "lseek on a directory (above)"
import errno, os, sys

def seeks(top):
    d = os.path.join(top, "seekdir")
    os.mkdir(d)
    for n in ("a", "b"):
        open(os.path.join(d, n), "w").close()
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    out = []
    for w, off in ((os.SEEK_SET, 0), (os.SEEK_SET, 5), (os.SEEK_CUR, 0),
                   (os.SEEK_END, 0), (os.SEEK_END, -1), (os.SEEK_DATA, 0),
                   (os.SEEK_HOLE, 0), (os.SEEK_DATA, 1 << 20)):
        try:
            out.append(os.lseek(fd, off, w))
        except OSError as e:
            out.append(errno.errorcode[e.errno])
    size = os.fstat(fd).st_size
    os.close(fd)
    for n in ("a", "b"):
        os.unlink(os.path.join(d, n))
    os.rmdir(d)
    return out, size

def kernel(size):   # generic_file_llseek_size() on a size-byte directory
    end = lambda off: size + off if size + off >= 0 else "EINVAL"
    data = lambda off: off if off < size else "ENXIO"
    hole = lambda off: size if off < size else "ENXIO"
    return [end(0), end(-1), data(0), hole(0), data(1 << 20)]

here, size = seeks(sys.argv[1])
there, _ = seeks(sys.argv[2])
if here[:3] != there[:3]:
    sys.exit("SEEK_SET, SEEK_CUR: %s here, %s on tmpfs" % (here[:3], there[:3]))
if there[3:] != ["EINVAL"] * 5:
    sys.exit("tmpfs's SEEK_END, SEEK_DATA, SEEK_HOLE: %s, not EINVAL" % there[3:])
if here[3:] not in (there[3:], kernel(size)):
    sys.exit("SEEK_END, SEEK_DATA, SEEK_HOLE: %s here, neither tmpfs's %s "
             "nor the kernel's %s" % (here[3:], there[3:], kernel(size)))
print("lseek on a directory: %s here, %s on tmpfs" % (here, there))
PY
	n1=$(grep -c 'opcode: LSEEK' "$log" || true)
	((n1 == n0)) || fail "$((n1 - n0)) FUSE_LSEEK for a directory: " \
		"the file system could answer as tmpfs does (uzram-mount(1))"
}

# birth_time DIR LOG REF: statx(2)'s btime, as tmpfs has it: where the
# kernel asks with FUSE_STATX (protocol 7.39, Linux 6.6+; libfuse 3.14
# answers it ENOSYS, and statx had no btime: fs/wire.c answers it), a
# new file's, directory's and symbolic link's birth time is now and stays
# through a write, a chmod and a rename, with the same mask as on REF.
birth_time()
{
	local d=$1 log=$2 ref=$3 minor dir
	minor=$(grep -m1 -oE '^INIT: 7\.[0-9]+' "$log" | cut -d. -f2)
	if ((minor < 39)); then
		echo "$WHO: this kernel (FUSE 7.$minor) asks for no birth time"
		return
	fi
	step "$WHO: statx's birth time, as on tmpfs"
	for dir in "$d/birth" "$ref/birth"; do
		mkdir "$dir"
		python3 - "$dir" >"$T/birth.${dir//\//_}" 2>&1 <<'PY' || fail "statx in $dir (above)"
import ctypes, os, struct, sys, time
os.chdir(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def statx(p):   # mask, btime in ns (struct statx: stx_btime at 80)
    buf = ctypes.create_string_buffer(256)
    if libc.statx(-100, p.encode(), 0x100, 0xfff, buf):   # AT_SYMLINK_NOFOLLOW
        sys.exit("statx %s: %s" % (p, os.strerror(ctypes.get_errno())))
    sec, nsec = struct.unpack_from("<qI", buf, 80)
    return struct.unpack_from("<I", buf, 0)[0], sec * 10**9 + nsec
t0 = time.time_ns()
open("f", "w").close(); os.mkdir("d"); os.symlink("f", "l")
for p in ("f", "d", "l"):
    mask, born = statx(p)
    print(p, hex(mask), "born now" if abs(born - t0) < 60 * 10**9 else born)
    time.sleep(0.01)
    if p == "f":
        with open(p, "a") as w:
            w.write("x")
    if p != "l":
        os.chmod(p, 0o700)
    os.rename(p, p + "2")
    print(p, "born the same after a change" if statx(p + "2")[1] == born else "born again")
PY
	done
	diff "$T/birth.${d//\//_}_birth" "$T/birth.${ref//\//_}_birth" >"$T/birth.diff" ||
		fail "birth time apart from tmpfs's (<: uzram, >: tmpfs): $(head -n 12 "$T/birth.diff")"
	rm -rf "$d/birth" "$ref/birth"
}

# The requests tar x makes on a new mount, counted in libfuse's debug
# log; then no RELEASE for the files made after the kernel's first plain
# OPEN (answered ENOSYS: from then on it opens files without asking, and
# sends no RELEASE; fs/ops_name.c's op_create). Files created before it
# each have one, which their writer does not wait for.
round_trips()
{
	local d=$1 log files releases mark
	step "$WHO: the requests of tar x, counted"
	UZRAM_FS_DEBUG=1 fs_mount "$d" --size 512M --cluster 4K
	log=$(dirname "$(grep -lxF "$d" "$UZRAM_RUNTIME_DIR"/m-*/dir)")/log
	[[ $(stat -f -c %S "$d") == 4096 ]] || fail "--cluster 4K not taken"
	as tar -xf "$TAR" -C "$d"
	files=$(find "$d" -type f | wc -l)
	as sh -c "echo x >'$d/last' && cat '$d/last' >/dev/null" # an OPEN
	sleep 1 # RELEASE comes after close, in the background
	mark=$(wc -l <"$log")
	echo "$WHO: tar x of $files files: $(grep -oE 'opcode: [A-Z_]+' "$log" |
		sort | uniq -c | sort -rn | awk '{ printf "%s %s, ", $3, $1 }')"
	killpriv_v2 "$d" "$log"
	kept_pages "$d" "$log" # each of these two makes a file
	created_direct "$d" "$log"
	large_reads "$d" "$log"
	dir_seek "$d" "$log" "$T/ref"
	birth_time "$d" "$log" "$T/ref"
	sleep 1
	if grep -A1 'opcode: OPEN ' "$log" | grep -q 'error: -38'; then
		releases=$(tail -n +$((mark + 1)) "$log" | grep -c 'opcode: RELEASE' || true)
		((releases == 0)) || fail "$releases RELEASEs after the kernel's first OPEN"
	else
		echo "$WHO: this kernel asks before each open: RELEASEs not counted"
	fi
	um umount "$d" || fail "uzram umount $d"
}

RANDOM_SALT=${FS_MODEL_SALT:-}
members=$(complete_members "$TAR" "$T/files.tar")
((members > 0)) || fail "no complete regular file in $TAR"
TAR=$T/files.tar

WHO=root # with libfuse's multi-threaded loop; nobody's has the default
export UZRAM_FS_THREADS=4
mkdir "$T/fs" "$T/ref"
mount -t tmpfs -o size=2G tmpfs "$T/ref"
on_exit umount "$T/ref"
round_trips "$T/fs"
both "$T/fs" "$T/ref"

WHO=nobody
unset UZRAM_FS_THREADS
as_nobody "$T/nb" "$T/nb/run" "$T/nb/fs"
install -o nobody -g nogroup -m 644 "$TAR" "$T/nb/files.tar"
TAR=$T/nb/files.tar
UZRAM_RUNTIME_DIR=$T/nb/run
as test -x "$UZRAM" || skip_all "user nobody cannot run $UZRAM"
rm -rf "$T/ref"/*
chown nobody:nogroup "$T/ref"
both "$T/nb/fs" "$T/ref"

# Root and a user's mount in the user's default runtime directory (no
# UZRAM_RUNTIME_DIR, no XDG_RUNTIME_DIR: /tmp/uzram-UID): root's uzram
# umount takes it down (it said "not mounted by uzram mount"), stat says
# whose it is, and a mount over it says it is one.
step "root on nobody's mount: stat names the owner, mount refuses, umount takes it down"
d=$T/nb/own
install -d -o nobody -g nogroup -m 755 "$d"
nobody_run=/tmp/uzram-$(id -u nobody)
[[ -e $nobody_run ]] || on_exit rm -rf "$nobody_run"
"${AS[@]}" env -u UZRAM_RUNTIME_DIR -u XDG_RUNTIME_DIR "$UZRAM" mount "$d" \
	--size 16M 2>"$T/own.err" || fail "nobody's mount: $(cat "$T/own.err")"
on_exit _unmount "$d"
is_mounted "$d" || fail "$d not mounted"
keeper=$(pgrep -u nobody -f "mount $d" | head -n 1)
env -u UZRAM_RUNTIME_DIR "$UZRAM" stat --mount "$d" >/dev/null 2>"$T/own.err" &&
	fail "root's stat of nobody's mount answered"
grep -q "is uid $(id -u nobody)'s uzram mount" "$T/own.err" ||
	fail "stat: $(cat "$T/own.err")"
env -u UZRAM_RUNTIME_DIR "$UZRAM" mount "$d" --size 16M 2>"$T/own.err" &&
	fail "root mounted over nobody's mount"
grep -q "already a mount point" "$T/own.err" || fail "mount: $(cat "$T/own.err")"
env -u UZRAM_RUNTIME_DIR "$UZRAM" umount "$d" 2>"$T/own.err" ||
	fail "root's uzram umount of nobody's mount: $(cat "$T/own.err")"
is_mounted "$d" && fail "$d still mounted after root's uzram umount"
[[ -z $keeper ]] || ! running "$keeper" || fail "nobody's keeper $keeper lives on"
