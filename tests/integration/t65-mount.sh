#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t65-mount.sh - `uzram mount DIR`, a compressed RAM file system in one
# command, as root (the kernel's ext4 on a loop device) and as an
# unprivileged user (fuse2fs): untar the corpus, compare every file, check
# df and `uzram stat --mount`, unmount (uzram umount, plain umount), check
# the file system with e2fsck -fn, and that nothing is left behind: no
# mount, no loop device, no process, no runtime directory or socket.
# Faults: DIR not empty, not a directory, missing; no FUSE and no loop
# device (through the test hooks UZRAM_DEV_FUSE and UZRAM_LOOP_CONTROL);
# --mem-limit reached: ENOSPC to the writer, a clean file system after; the
# keeper killed: uzram umount clears what it left. Without root, --uid and
# --gid of another user or group are refused.
source "$(dirname "$0")/functions.sh"
require nbdfuse mkfs.ext4 e2fsck fuse2fs fusermount3 tar setpriv losetup
real_server || skip_all "uzram mount is a uzram command"

MiB=$((1024 * 1024))
# Every mount of this test keeps its runtime directory under $T/run.
export UZRAM_RUNTIME_DIR=$T/run
mkdir -m 700 "$T/run"
members=$(complete_members "$TAR" "$T/files.tar")
((members > 0)) || fail "no complete regular file in $TAR"
TAR=$T/files.tar
AS=()	# the command prefix of the current user: empty, or setpriv
VIA=()	# without root, ext4 is asked for (uzram's own fs is t66's)

# mount_fs DIR ARGS...: uzram mount DIR ARGS as the current user; the
# keeper's pid in KEEPER. Unmounted and waited for at exit whatever happens.
mount_fs()
{
	local dir=$1 run
	shift
	um mount "$dir" "$@" "${VIA[@]}" 2>"$T/mount.err" ||
		fail "uzram mount $dir $*: $(cat "$T/mount.err")"
	run=$(dirname "$(grep -lxF "$dir" "$UZRAM_RUNTIME_DIR"/m-*/dir)")
	RUN=$run
	KEEPER=$(cat "$run/pid")
	on_exit _wait_gone "$KEEPER"
	on_exit _unmount "$dir"
	is_mounted "$dir" || fail "$dir is not a mount point after uzram mount"
}

# At exit: wait for DIR's keeper (is_mounted, _unmount and wait_gone are
# functions.sh's; is_mounted reads the mount table: root may not stat a
# user's FUSE).
_wait_gone() { wait_gone "$1" || true; }

# assert_nothing_left: no mount, loop device, process or file of any
# uzram mount of this test remains.
assert_nothing_left()
{
	local left
	left=$(grep -F "$T" /proc/self/mountinfo || true)
	[[ -z $left ]] || fail "mounts left: $left"
	left=$(losetup -l -n -O NAME,BACK-FILE 2>/dev/null | grep -F "$T" || true)
	[[ -z $left ]] || fail "loop devices left: $left"
	left=$(pgrep -a -f "$T/" || true)
	[[ -z $left ]] || fail "processes left: $left"
	left=$(ls -A "$UZRAM_RUNTIME_DIR")
	[[ -z $left ]] || fail "runtime files left: $left"
}

# fsck_after_umount UNMOUNT-CMD...: stop the keeper so the device outlives
# the file system, unmount with the command given (not uzram umount, which
# waits for the keeper), check the device with e2fsck -fn, then let the
# keeper take the rest down.
#
# fusermount3 -u returns once the kernel has detached the mount: fuse2fs
# writes its last blocks and closes the file after that, on its way out.
# e2fsck before fuse2fs has gone read stale bitmaps (seen under the load of
# make test's parallel phases), so the check waits for fuse2fs first.
fsck_after_umount()
{
	local fs
	fs=$(pgrep -P "$KEEPER" -x fuse2fs || true)
	kill -STOP "$KEEPER"
	"$@" || { kill -CONT "$KEEPER"; fail "unmount: $* failed"; }
	[[ -z $fs ]] || wait_gone "$fs" ||
		{ kill -CONT "$KEEPER"; fail "fuse2fs $fs still runs 30 s after the unmount"; }
	as e2fsck -fn "$RUN/fuse/disk" >"$T/fsck.out" 2>&1 ||
		{ kill -CONT "$KEEPER"; fail "e2fsck -fn: $(tail -n 15 "$T/fsck.out")"; }
	kill -CONT "$KEEPER"
	wait_gone "$KEEPER" || fail "keeper $KEEPER still runs 30 s after the unmount"
}

# untar_compare DIR: untar the corpus into DIR and compare every file; as
# another user than root, owners differ by design.
untar_compare()
{
	as tar -xf "$TAR" -C "$1"
	# a user other than root cannot make setuid and setgid files: tar
	# drops those bits, so their modes differ (usr/bin's chfn, chsh)
	python3 - "$TAR" >"$T/suid.txt" <<'PY'
import sys, tarfile
for m in tarfile.open(sys.argv[1]):
    if m.mode & 0o6000:
        print(m.name + ": Mode differs")
PY
	as tar -df "$TAR" -C "$1" 2>&1 | grep -vE ': (Uid|Gid) differs$' |
		{ if ((EUID == 0)) && [[ ${AS[*]:-} != *nobody* ]]; then cat; else
		  grep -vxFf "$T/suid.txt" || true; fi; } >"$T/tar-d.out" || true
	[[ ! -s $T/tar-d.out ]] ||
		fail "tar --compare found differences: $(head -n 5 "$T/tar-d.out")"
	as sync
}

# assert_df DIR BYTES: df shows a file system of about BYTES (less the
# metadata ext4 takes for itself).
assert_df()
{
	local size
	size=$(as df -B1 --output=size "$1" | tail -n 1)
	((size <= $2 && size > $2 * 85 / 100)) ||
		fail "df shows $size bytes for $1, made with $2"
}

# assert_stat DIR: uzram stat --mount reports the data that was written.
assert_stat()
{
	um stat --mount "$1" --json >"$T/stat.json"
	(($(json_get "$T/stat.json" "j['orig_data_size']") >= $(stat -c %s "$TAR") / 2)) ||
		fail "stat --mount: orig_data_size below the untarred data"
	(($(json_get "$T/stat.json" "j['mem_used_total']") > 0)) ||
		fail "stat --mount: no memory used"
}

# the_round DIR HOW: mount, untar, compare, df, stat, unmount with HOW:
# uzram umount, or plain (umount, fusermount3 -u) and e2fsck; nothing left.
the_round()
{
	local dir=$1 how=$2
	as mkdir "$dir"
	mount_fs "$dir" --size 96M --mode 01777
	assert_eq "$(as stat -c %a "$dir")" 1777 "mode of the root directory"
	untar_compare "$dir"
	assert_df "$dir" $((96 * MiB))
	assert_stat "$dir"
	if [[ $how == uzram ]]; then
		um umount "$dir" # returns once the keeper has ended
		! running "$KEEPER" || fail "uzram umount returned early"
	elif ((EUID == 0)) && ((${#AS[@]} == 0)); then
		fsck_after_umount umount "$dir"
	else
		fsck_after_umount as fusermount3 -u "$dir"
	fi
	assert_nothing_left
}

# assert_mount_fails WHAT DIR ARGS...: uzram mount must fail, its message
# must contain WHAT, and nothing may be left behind.
assert_mount_fails()
{
	local what=$1 rc=0
	shift
	um mount "$@" >"$T/fail.out" 2>&1 || rc=$?
	((rc != 0)) || { on_exit _unmount "$1"; fail "uzram mount $* succeeded"; }
	grep -qF -- "$what" "$T/fail.out" ||
		fail "uzram mount $*: no '$what' in: $(cat "$T/fail.out")"
	assert_nothing_left
}

step "faults: DIR not empty, not a directory, missing; nothing changed"
mkdir "$T/full"
echo keep >"$T/full/file"
assert_mount_fails "directory not empty" "$T/full" --size 32M
assert_eq "$(cat "$T/full/file")" keep "file in the non-empty DIR"

step "--nonempty (the boot's units, over a /tmp a boot left files in): mounted over them, there again after umount"
vias="fs fuse"
((EUID != 0)) || vias+=" loop"
for via in $vias; do
	mount_fs "$T/full" --size 32M --nonempty --via "$via"
	[[ ! -e $T/full/file ]] || fail "--via $via: the hidden file shows"
	echo new >"$T/full/new" || fail "--via $via: no write"
	um umount "$T/full" || fail "--via $via: umount"
	assert_eq "$(cat "$T/full/file")" keep "--via $via: the file after umount"
	[[ ! -e $T/full/new ]] || fail "--via $via: the mount's file is left"
done
echo keep >"$T/plain"
assert_mount_fails "not a directory" "$T/plain" --size 32M
assert_eq "$(cat "$T/plain")" keep "the plain file"
assert_mount_fails "No such file" "$T/missing" --size 32M
mkdir "$T/e"
assert_mount_fails "bad value" "$T/e" --size 32M --fs btrfs
assert_mount_fails "bad value '0' for --inodes" "$T/e" --size 32M --inodes 0
assert_mount_fails "-o noatime: uzram's own file system takes tmpfs's size=" \
	"$T/e" --size 32M --via fs -o noatime
assert_mount_fails "-o size: bad value '1k'" "$T/e" --via fs -o size=1k,mode=1777

step "--via fs: -o takes tmpfs's size=, nr_inodes=, mode= (an fstab line's)"
mount_fs "$T/e" --via fs -o size=32M,nr_inodes=100,mode=1777,nosuid,nodev
assert_eq "$(stat -c %a "$T/e") $(stat -f -c '%c %b' "$T/e")" \
	"1777 100 $((32 * MiB / $(stat -f -c %S "$T/e")))" "mode, inodes and blocks of -o"
um umount "$T/e"
assert_nothing_left
UZRAM_DEV_FUSE=$T/no-fuse assert_mount_fails "FUSE is unavailable: $T/no-fuse" \
	"$T/e" --size 32M

if ((EUID == 0)); then
	step "fault: no loop device with --via loop; the device and nbdfuse are gone again"
	UZRAM_LOOP_CONTROL=$T/no-loop assert_mount_fails \
		"no loop device: $T/no-loop" "$T/e" --size 32M --via loop
	! is_mounted "$T/e" || fail "$T/e mounted after a failed mount"

	step "no loop device, no --via: the FUSE path, and it says so"
	UZRAM_LOOP_CONTROL=$T/no-loop mount_fs "$T/e" --size 32M
	grep -q "no loop device" "$T/mount.err" ||
		fail "no word of the missing loop device: $(cat "$T/mount.err")"
	grep -q "fuse2fs" "$T/mount.err" ||
		fail "the path taken is not named: $(cat "$T/mount.err")"
	um umount "$T/e"
	assert_nothing_left

	step "root: the kernel's ext4 on a loop device; untar, compare, uzram umount"
	the_round "$T/root1" uzram
	grep -q "the kernel's ext4 on a loop device" "$T/mount.err" ||
		fail "the path taken is not named: $(cat "$T/mount.err")"

	step "root: no --size: half of RAM in whole pages; --mode 1777 lets another user write, read back with O_DIRECT"
	mkdir "$T/tmp"
	mount_fs "$T/tmp" --mode 1777
	# half of an odd number of pages once made serve refuse the size
	assert_eq "$(um stat --mount "$T/tmp" --json | python3 -c \
		'import json, sys; print(json.load(sys.stdin)["disksize"])')" \
		"$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB$/\1/p' /proc/meminfo) * 1024 / 2 / 4096 * 4096))" \
		"the default size (half of MemTotal, whole 4 KiB pages)"
	head -c $((2 * MiB)) "$CORPUS/heap-python.core" >"$T/core2"
	chmod 644 "$T/core2"
	chmod 711 "$T"
	setpriv --reuid=nobody --regid=nogroup --clear-groups \
		sh -c "cp '$T/core2' '$T/tmp/by-nobody' && sync" ||
		fail "user nobody cannot write into a --mode 1777 mount"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	setpriv --reuid=nobody --regid=nogroup --clear-groups \
		dd if="$T/tmp/by-nobody" iflag=direct bs=64K status=none >"$T/back2"
	assert_same_data "$T/core2" "$T/back2"
	assert_eq "$(stat -c %U "$T/tmp/by-nobody")" nobody "owner of the new file"
	rc=0
	um mount "$T/tmp" --size 32M >"$T/again.out" 2>&1 || rc=$?
	((rc != 0)) || fail "a second uzram mount on $T/tmp succeeded"
	grep -q "already mounted by uzram mount" "$T/again.out" ||
		fail "mounting over a uzram mount: $(cat "$T/again.out")"
	um umount "$T/tmp"
	assert_nothing_left

	step "root: the same round, ended by a plain umount"
	the_round "$T/root2" plain

	step "root: --inodes 1000 on ext4 is mkfs.ext4 -N 1000"
	mkdir "$T/ino"
	mount_fs "$T/ino" --size 32M --inodes 1000
	n=$(stat -f -c %c "$T/ino")
	((n >= 1000 && n < 2000)) || fail "--inodes 1000: ext4 has $n inodes"
	um umount "$T/ino"
	assert_nothing_left

	step "root: --mem-limit: ENOSPC to the writer, then a clean file system"
	mkdir "$T/lim"
	mount_fs "$T/lim" --size 64M --mem-limit 24M
	rc=0
	head -c $((40 * MiB)) /dev/urandom >"$T/lim/random" 2>"$T/dd.err" || rc=$?
	((rc != 0)) && grep -q "No space left" "$T/dd.err" ||
		fail "40 MiB of random data into a 24 MiB limit: rc $rc, $(cat "$T/dd.err")"
	rc=0
	cp "$TAR" "$T/lim/more" 2>"$T/cp.err" || rc=$?
	((rc != 0)) && grep -q "No space left" "$T/cp.err" ||
		fail "a second writer: rc $rc, $(cat "$T/cp.err")"
	rm "$T/lim/random"
	# at most 12 MiB: the file system is smaller than the limit, and a
	# corpus's $TAR may be 24 MiB
	head -c $((12 * MiB)) "$TAR" >"$T/part"
	cp "$T/part" "$T/lim/again"
	cmp "$T/part" "$T/lim/again"
	um stat --mount "$T/lim" --json >"$T/stat.json"
	assert_eq "$(json_get "$T/stat.json" "j['failed_writes']")" 0 \
		"writes the device refused"
	fsck_after_umount umount "$T/lim"
	assert_nothing_left

	step "-f: in the foreground until uzram umount, then exit status 0"
	mkdir "$T/fg"
	"${SANITIZER_RUN[@]}" "$UZRAM" mount "$T/fg" --size 32M -f \
		2>"$T/fg.err" &
	fg=$!
	on_exit _unmount "$T/fg"
	wait_for 10 "the -f mount" is_mounted "$T/fg"
	cp "$TAR" "$T/fg/files.tar"
	cmp "$TAR" "$T/fg/files.tar"
	um umount "$T/fg"
	rc=0
	wait "$fg" || rc=$?
	((rc == 0)) || fail "uzram mount -f exited $rc: $(cat "$T/fg.err")"
	assert_nothing_left

	step "-f: Ctrl-C (SIGINT to its process group) unmounts and ends it all"
	setsid "${SANITIZER_RUN[@]}" "$UZRAM" mount "$T/fg" --size 32M -f \
		2>"$T/fg.err" &
	fg=$!
	wait_for 10 "the -f mount" is_mounted "$T/fg"
	cp "$TAR" "$T/fg/files.tar"
	kill -INT -- -"$fg"
	rc=0
	wait "$fg" || rc=$?
	((rc == 0)) || fail "uzram mount -f exited $rc after SIGINT: $(cat "$T/fg.err")"
	assert_nothing_left

	step "a keeper killed: uzram umount clears what it left"
	mkdir "$T/dead"
	mount_fs "$T/dead" --size 32M
	kill -KILL "$KEEPER"
	wait_gone "$KEEPER" || fail "keeper $KEEPER survived SIGKILL"
	um umount "$T/dead" 2>"$T/umount.err" ||
		fail "uzram umount after the keeper died: $(cat "$T/umount.err")"
	grep -q "keeper had died" "$T/umount.err" ||
		fail "no word of the dead keeper: $(cat "$T/umount.err")"
	for ((i = 0; i < 100; i++)); do
		[[ -z $(pgrep -f "$T/" || true) ]] && break
		sleep 0.1
	done
	assert_nothing_left

	step "unprivileged: a user with /dev/fuse and fusermount3"
	as_nobody "$T/nb" "$T/nb/run"
	install -o nobody -g nogroup -m 644 "$TAR" "$T/nb/files.tar"
	# a /dev/fuse this user may not open: the message says why and what to do
	install -d -o nobody -g nogroup -m 700 "$T/nb/nofuse"
	install -m 600 /dev/null "$T/fuse-600"
	rc=0
	"${AS[@]}" env UZRAM_DEV_FUSE="$T/fuse-600" UZRAM_RUNTIME_DIR="$T/nb/run" \
		"${SANITIZER_RUN[@]}" "$UZRAM" mount "$T/nb/nofuse" --size 32M \
		>"$T/nofuse.out" 2>&1 || rc=$?
	((rc != 0)) || fail "uzram mount succeeded without access to FUSE"
	grep -q "mode 0600, owner uid 0, group root, .*chmod 666" "$T/nofuse.out" ||
		fail "no mode, owner and fix in: $(cat "$T/nofuse.out")"
	TAR=$T/nb/files.tar
	UZRAM_RUNTIME_DIR=$T/nb/run
	as test -x "$UZRAM" || skip_all "user nobody cannot run $UZRAM"
else
	[[ -r /dev/fuse && -w /dev/fuse ]] ||
		skip_all "the unprivileged part needs /dev/fuse read-write"
	mkdir -m 700 "$T/nb" "$T/nb/run"
	UZRAM_RUNTIME_DIR=$T/nb/run
fi

step "unprivileged: --uid or --gid of another refused, nothing mounted; the user's own taken"
as mkdir -m 700 "$T/nb/owner"
on_exit _unmount "$T/nb/owner" # were it mounted after all
for opt in "--uid 0" "--gid 0"; do
	rc=0
	# shellcheck disable=SC2086 # the option and its value
	um mount "$T/nb/owner" $opt --via fs --size 16M >"$T/owner.err" 2>&1 ||
		rc=$?
	((rc == 1)) || fail "uzram mount $opt as $(as id -un): status $rc"
	grep -q "^uzram mount: $opt: only root may mount a file system owned by" \
		"$T/owner.err" || fail "uzram mount $opt: $(cat "$T/owner.err")"
	! is_mounted "$T/nb/owner" || fail "mounted despite $opt"
done
mount_fs "$T/nb/owner" --via fs --size 16M --uid "$(as id -u)" --gid "$(as id -g)"
assert_eq "$(as stat -c %u:%g "$T/nb/owner")" "$(as id -u):$(as id -g)" \
	"the owner of DIR's root"
um umount "$T/nb/owner"

VIA=(--via fuse)
step "unprivileged ($(as id -un)): fuse2fs; untar, compare, uzram umount"
the_round "${T}/nb/u1" uzram
grep -q "fuse2fs" "$T/mount.err" ||
	fail "the path taken is not named: $(cat "$T/mount.err")"

step "unprivileged: the same, ended by fusermount3 -u"
the_round "$T/nb/u2" plain
