#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fs.sh - uzram's own file system (`uzram mount --via fs`) as an
# unprivileged user (nobody, via setpriv) against tmpfs, in one run, on
# the targets of issue 32:
#
#   untar    tar -xf of a tar of /usr/include (INCLUDE_TAR)
#   grep     grep -r of a word over the tree, page cache dropped first
#   rm       rm -rf of the tree
#   write    dd bs=1M of a 1 GiB file (a compressible source: the test
#            corpus's files.tar repeated), then sync
#   read     dd bs=1M of it back, page cache dropped first
#   memory   what the tree holds: tmpfs: df's used; uzram: the device's
#            mem_used_total (uzram stat --mount) and the keeper's RSS
#            growth; and what is left after rm -rf, 3 s later
#
# Run as root (make bench-fs): root drops the page cache between steps.
# Environment: UZRAM (build/uzram), CORPUS_TAR (build/corpus/files.tar),
# ROUNDS (3): each timing is the median of ROUNDS.
set -euo pipefail

UZRAM=$(realpath "${UZRAM:-build/uzram}")
CORPUS_TAR=$(realpath "${CORPUS_TAR:-build/corpus/files.tar}")
ROUNDS=${ROUNDS:-3}
((EUID == 0)) || { echo "bench/fs.sh: run as root" >&2; exit 1; }

W=$(mktemp -d /tmp/uzram-bench-fs.XXXXXX)
chmod 711 "$W"
install -d -o nobody -g nogroup -m 700 "$W/nb" "$W/nb/run" "$W/nb/fs" "$W/tmpfs"
fuse_mode=$(stat -c %a /dev/fuse)
AS=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
as() { "${AS[@]}" env UZRAM_RUNTIME_DIR="$W/nb/run" "$@"; }

cleanup()
{
	set +e
	grep -qF " $W/nb/fs " /proc/self/mountinfo && umount "$W/nb/fs"
	grep -qF " $W/tmpfs " /proc/self/mountinfo && umount "$W/tmpfs"
	chmod "$fuse_mode" /dev/fuse
	rm -rf "$W"
}
trap cleanup EXIT
chmod 666 /dev/fuse

tar -cf "$W/include.tar" -C / usr/include
n=$(((1 << 30) / $(stat -c %s "$CORPUS_TAR") + 1))
for ((i = 0; i < n; i++)); do cat "$CORPUS_TAR"; done | head -c 1G >"$W/src" || true
chmod 644 "$W/include.tar" "$W/src"

now() { echo "$EPOCHREALTIME"; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# rounds DIR: ROUNDS rounds of untar, grep, rm; the medians.
rounds()
{
	local dir=$1 i t0 t1 t2 t3
	: >"$W/u" ; : >"$W/g" ; : >"$W/r"
	for ((i = 0; i < ROUNDS; i++)); do
		t0=$(now)
		as tar -xf "$W/include.tar" -C "$dir"
		t1=$(now)
		drop
		t2=$(now)
		as grep -r -c uzram_nothing_matches "$dir" >/dev/null || true
		t3=$(now)
		echo "$t1 - $t0" | bc >>"$W/u"
		echo "$t3 - $t2" | bc >>"$W/g"
		t0=$(now)
		as rm -rf "$dir/usr"
		t1=$(now)
		echo "$t1 - $t0" | bc >>"$W/r"
	done
	printf '%s %s %s\n' "$(median <"$W/u")" "$(median <"$W/g")" "$(median <"$W/r")"
}

# seq DIR: MB/s of a 1 GiB dd write (+ sync) and read back.
seq_io()
{
	local dir=$1 t0 t1 t2 t3
	cat "$W/src" >/dev/null
	t0=$(now)
	as dd if="$W/src" of="$dir/big" bs=1M status=none
	as sync "$dir/big"
	t1=$(now)
	drop
	t2=$(now)
	as dd if="$dir/big" of=/dev/null bs=1M status=none
	t3=$(now)
	as rm "$dir/big"
	printf '%s %s\n' "$(echo "1024 / ($t1 - $t0)" | bc)" \
		"$(echo "1024 / ($t3 - $t2)" | bc)"
}

rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }
uzram_mem()
{
	as "$UZRAM" stat --mount "$W/nb/fs" --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["mem_used_total"])'
}
mib() { echo "scale=1; $1 / 1048576" | bc; }

echo "bench/fs.sh: /usr/include ($(tar -tf "$W/include.tar" | grep -vc '/$') files," \
	"$(($(stat -c %s "$W/include.tar") >> 20)) MiB tar), medians of $ROUNDS rounds," \
	"as user nobody; $(nproc) cores"
printf '%-10s %8s %8s %8s %9s %9s %10s %10s\n' "" "untar s" "grep s" "rm s" \
	"write MB/s" "read MB/s" "tree MiB" "after rm"

mount -t tmpfs -o size=4G,uid=nobody,gid=nogroup tmpfs "$W/tmpfs"
read -r u g r < <(rounds "$W/tmpfs")
read -r w rd < <(seq_io "$W/tmpfs")
as tar -xf "$W/include.tar" -C "$W/tmpfs"
mem=$(df -B1 --output=used "$W/tmpfs" | tail -n 1)
as rm -rf "$W/tmpfs/usr"
after=$(df -B1 --output=used "$W/tmpfs" | tail -n 1)
printf '%-10s %8.2f %8.2f %8.2f %9s %9s %10s %10s\n' tmpfs "$u" "$g" "$r" "$w" "$rd" \
	"$(mib "$mem")" "$(mib "$after")"
umount "$W/tmpfs"

as "$UZRAM" mount "$W/nb/fs" --size 4G
keeper=$(cat "$W"/nb/run/m-*/pid)
read -r u g r < <(rounds "$W/nb/fs")
read -r w rd < <(seq_io "$W/nb/fs")
sleep 3
rss0=$(rss "$keeper")
as tar -xf "$W/include.tar" -C "$W/nb/fs"
mem=$(uzram_mem)
rss1=$(rss "$keeper")
as rm -rf "$W/nb/fs/usr"
sleep 3
after=$(uzram_mem)
rss2=$(rss "$keeper")
printf '%-10s %8.2f %8.2f %8.2f %9s %9s %10s %10s\n' "uzram fs" "$u" "$g" "$r" "$w" "$rd" \
	"$(mib "$mem")" "$(mib "$after")"
echo "uzram fs: the keeper's RSS $(mib "$rss0") MiB empty, $(mib "$rss1") MiB with the" \
	"tree, $(mib "$rss2") MiB after rm -rf"
as "$UZRAM" umount "$W/nb/fs"
