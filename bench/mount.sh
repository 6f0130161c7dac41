#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mount.sh [TAR] - a compressed RAM file system against tmpfs and the
# kernel's zram: for each of
#
#   tmpfs            mount -t tmpfs
#   uzram root       uzram mount (the kernel's ext4 on a loop device)
#   uzram user       uzram mount as user nobody (uzram's own fs), via setpriv
#   zram ext4        a zram device of our own (hot_add), mkfs.ext4, mount
#
# the seconds of: untar TAR + sync; `find -type f | xargs cat` after
# dropping the page cache; rm -rf + sync. And the memory each holds for the
# files after the untar, and after the rm (what discard gave back): tmpfs:
# df's used; uzram: mem_used_total of `uzram stat --mount`; zram:
# mem_used_total of mm_stat. Both compressed
# devices use lz4 and the same ext4 options (no journal, as uzram mount).
#
# Run as root (make bench-mount). TAR defaults to the test corpus's
# files.tar; a tar cut short (the corpus's) is untarred as far as it goes.
# Environment: UZRAM (build/uzram), SIZE (device size, default 4 x TAR).
set -euo pipefail

UZRAM=${UZRAM:-build/uzram}
TAR=$(realpath "${1:-${UZRAM_TEST_CORPUS:-build/corpus}/files.tar}")
((EUID == 0)) || { echo "bench/mount.sh: run as root" >&2; exit 1; }
UZRAM=$(realpath "$UZRAM")
tar_bytes=$(stat -c %s "$TAR")
SIZE=${SIZE:-$(((tar_bytes * 4 / 1048576 + 64) * 1048576))}

W=$(mktemp -d /tmp/uzram-bench-mount.XXXXXX)
chmod 711 "$W"
export UZRAM_RUNTIME_DIR=$W/run
install -d -m 700 "$W/run"
install -d -o nobody -g nogroup -m 700 "$W/nb" "$W/nb/run"
install -o nobody -g nogroup -m 644 "$TAR" "$W/nb/files.tar"
fuse_mode=$(stat -c %a /dev/fuse)
zram=""

cleanup()
{
	set +e
	for d in "$W/fs" "$W/u/fs" "$W/nb/fs" "$W/z/fs"; do
		grep -qF " $d " /proc/self/mountinfo && umount "$d"
	done
	sleep 1
	if [[ -n $zram ]]; then
		echo 1 >"/sys/block/$zram/reset"
		[[ -e /sys/class/zram-control/hot_remove && $zram != zram0 ]] &&
			echo "${zram#zram}" >/sys/class/zram-control/hot_remove
	fi
	chmod "$fuse_mode" /dev/fuse
	rm -rf "$W"
}
trap cleanup EXIT

now() { echo "$EPOCHREALTIME"; }
secs() { python3 -c "print('%.2f' % ($2 - $1))"; }

# untar DIR [PREFIX...]: untar as the prefix's user; a cut tar is fine.
untar()
{
	local dir=$1 rc=0
	shift
	"$@" tar -xf "$TAR" -C "$dir" 2>"$W/tar.err" || rc=$?
	if ((rc != 0)) && ! grep -q 'Unexpected EOF' "$W/tar.err"; then
		cat "$W/tar.err" >&2
		exit 1
	fi
	"$@" sync
}

# one NAME DIR MEM-CMD [PREFIX...]: time the three steps on DIR, mounted.
one()
{
	local name=$1 dir=$2 memcmd=$3 t0 t1 t2 t3 t4 mem mem_rm
	shift 3
	t0=$(now)
	untar "$dir" "$@"
	t1=$(now)
	mem=$($memcmd "$dir")
	sync
	echo 3 >/proc/sys/vm/drop_caches
	t2=$(now)
	"$@" find "$dir" -path "$dir/lost+found" -prune -o -type f -print0 |
		"$@" xargs -0 cat >/dev/null
	t3=$(now)
	"$@" find "$dir" -mindepth 1 -maxdepth 1 ! -name lost+found \
		-exec rm -rf {} +
	"$@" sync
	t4=$(now)
	mem_rm=$($memcmd "$dir")
	printf '%-12s %8s %8s %8s %10.1f %10.1f\n' "$name" "$(secs "$t0" "$t1")" \
		"$(secs "$t2" "$t3")" "$(secs "$t3" "$t4")" \
		"$(python3 -c "print($mem / 1048576)")" \
		"$(python3 -c "print($mem_rm / 1048576)")"
}

mem_df() { df -B1 --output=used "$1" | tail -n 1; }
mem_uzram()
{
	"${AS[@]}" env UZRAM_RUNTIME_DIR="$UZRAM_RUNTIME_DIR" "$UZRAM" stat \
		--mount "$1" --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["mem_used_total"])'
}
mem_zram() { awk '{print $3}' "/sys/block/$zram/mm_stat"; }

echo "bench/mount.sh: $TAR ($((tar_bytes / 1048576)) MiB), devices of $((SIZE / 1048576)) MiB"
printf '%-12s %8s %8s %8s %10s %10s\n' "" "untar+s" "cat s" "rm s" "mem MiB" \
	"after rm"

mkdir "$W/fs"
mount -t tmpfs -o size="$SIZE" tmpfs "$W/fs"
one tmpfs "$W/fs" mem_df
umount "$W/fs"

AS=()
mkdir "$W/u" "$W/u/fs"
"$UZRAM" mount "$W/u/fs" --size "$SIZE" 2>/dev/null
one "uzram root" "$W/u/fs" mem_uzram
"$UZRAM" umount "$W/u/fs"

chmod 666 /dev/fuse
AS=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
UZRAM_RUNTIME_DIR=$W/nb/run
TAR=$W/nb/files.tar
"${AS[@]}" mkdir "$W/nb/fs"
"${AS[@]}" env UZRAM_RUNTIME_DIR="$UZRAM_RUNTIME_DIR" "$UZRAM" mount \
	"$W/nb/fs" --size "$SIZE" 2>/dev/null
one "uzram user" "$W/nb/fs" mem_uzram "${AS[@]}"
"${AS[@]}" env UZRAM_RUNTIME_DIR="$UZRAM_RUNTIME_DIR" "$UZRAM" umount "$W/nb/fs"
chmod "$fuse_mode" /dev/fuse
AS=()

if [[ -e /sys/class/zram-control/hot_add ]]; then
	zram=zram$(cat /sys/class/zram-control/hot_add)
elif [[ -e /sys/block/zram0 && $(cat /sys/block/zram0/disksize) == 0 ]]; then
	zram=zram0
else
	echo "zram ext4: no free zram device" >&2
	exit 0
fi
echo lz4 >"/sys/block/$zram/comp_algorithm"
echo "$SIZE" >"/sys/block/$zram/disksize"
mkfs.ext4 -q -F -m 0 -O ^has_journal -E nodiscard,assume_storage_prezeroed=1 \
	"/dev/$zram"
mkdir "$W/z" "$W/z/fs"
mount -o discard "/dev/$zram" "$W/z/fs"
one "zram ext4" "$W/z/fs" mem_zram
umount "$W/z/fs"
