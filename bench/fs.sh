#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fs.sh - uzram's own file system (`uzram mount --via fs`) as an
# unprivileged user (nobody, via setpriv) against tmpfs, in one run, on
# every target of issue 32, and the ratios:
#
#   untar    tar -xf of a tar of /usr/include (INCLUDE_TAR)    <= 3x tmpfs
#   grep     grep -r of a word over the tree, page cache dropped first
#                                                              <= 2x
#   build    make -j2 lib of uzram's own source (git archive of the
#            tree this script is in: a real C project on any machine
#            that builds uzram)                                <= 1.2x
#   rm       rm -rf of the tree                                <= 3x
#   write    dd bs=1M of a SEQ_MIB file (a compressible source: the
#            test corpus's files.tar repeated), then sync      >= 0.5x
#   read     dd bs=1M of it back, page cache dropped first     >= 0.5x
#   memory   what the tree holds: tmpfs: df's used; uzram: the device's
#            mem_used_total (uzram stat --mount) once the re-encoder
#            is done (written fast, re-encoded 16 s later; the figure
#            right after untar and the wait go to stderr)      <= 0.5x
#   back     how much of it rm -rf gave back, 3 s later        >= 95%
#
# Run as root (make bench-fs): root drops the page cache between steps.
# Environment: UZRAM (build/uzram), CORPUS_TAR (build/corpus/files.tar),
# ROUNDS (3): untar, grep, build and rm are the median of ROUNDS; SEQ_MIB (2048).
set -euo pipefail

UZRAM=$(realpath "${UZRAM:-build/uzram}")
CORPUS_TAR=$(realpath "${CORPUS_TAR:-build/corpus/files.tar}")
ROUNDS=${ROUNDS:-3}
SEQ_MIB=${SEQ_MIB:-2048}
REPO=$(cd "$(dirname "$0")/.." && pwd)
((EUID == 0)) || { echo "bench/fs.sh: run as root" >&2; exit 1; }

W=$(mktemp -d /tmp/uzram-bench-fs.XXXXXX)
chmod 711 "$W"
install -d -o nobody -g nogroup -m 700 "$W/nb" "$W/nb/run" "$W/nb/fs" "$W/tmpfs"
fuse_mode=$(stat -c %a /dev/fuse)
AS=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
as() { "${AS[@]}" env UZRAM_RUNTIME_DIR="$W/nb/run" HOME="$W/nb" "$@"; }

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
git -C "$REPO" archive --prefix=uzram/ HEAD >"$W/src.tar"
n=$(((SEQ_MIB << 20) / $(stat -c %s "$CORPUS_TAR") + 1))
for ((i = 0; i < n; i++)); do cat "$CORPUS_TAR"; done | head -c "${SEQ_MIB}M" >"$W/big" || true
chmod 644 "$W/include.tar" "$W/src.tar" "$W/big"

now() { echo "$EPOCHREALTIME"; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
since() { echo "$(now) - $1" | bc; }

# rounds DIR: ROUNDS rounds of untar, grep, rm; the medians.
rounds()
{
	local dir=$1 i t
	: >"$W/u" ; : >"$W/g" ; : >"$W/r"
	for ((i = 0; i < ROUNDS; i++)); do
		cat "$W/include.tar" >/dev/null # not from the disk
		t=$(now)
		as tar -xf "$W/include.tar" -C "$dir"
		since "$t" >>"$W/u"
		drop
		t=$(now)
		as grep -r -c uzram_nothing_matches "$dir" >/dev/null || true
		since "$t" >>"$W/g"
		t=$(now)
		as rm -rf "$dir/usr"
		since "$t" >>"$W/r"
	done
	printf '%s %s %s\n' "$(median <"$W/u")" "$(median <"$W/g")" "$(median <"$W/r")"
}

# build DIR: the median seconds of ROUNDS make -j2 lib of uzram's source
# in DIR (the compiler's files in the page cache: the first round is not
# counted).
build()
{
	local dir=$1 t i
	: >"$W/b"
	for ((i = 0; i <= ROUNDS; i++)); do
		as tar -xf "$W/src.tar" -C "$dir"
		t=$(now)
		as make -C "$dir/uzram" -j2 -s lib >/dev/null 2>"$W/build.err" ||
			{ echo "bench/fs.sh: the build failed: $(tail -n 3 "$W/build.err")" >&2; exit 1; }
		((i == 0)) || since "$t" >>"$W/b"
		as rm -rf "$dir/uzram"
	done
	median <"$W/b"
}

# seq_io DIR: MB/s of a SEQ_MIB dd write (+ sync) and read back.
seq_io()
{
	local dir=$1 t w
	cat "$W/big" >/dev/null
	t=$(now)
	as dd if="$W/big" of="$dir/big" bs=1M status=none
	as sync "$dir/big"
	w=$(echo "$SEQ_MIB / ($(since "$t"))" | bc)
	drop
	t=$(now)
	as dd if="$dir/big" of=/dev/null bs=1M status=none
	printf '%s %s\n' "$w" "$(echo "$SEQ_MIB / ($(since "$t"))" | bc)"
	as rm "$dir/big"
}

uzram_field()
{
	as "$UZRAM" stat --mount "$W/nb/fs" --json |
		python3 -c "import json, sys; print(json.load(sys.stdin)['$1'])"
}
uzram_mem() { uzram_field mem_used_total; }

# uzram_settle: wait for the re-encoder (the fs writes with lz4's fast
# mode and re-encodes a cluster once it has been idle 16 s:
# cli/mount/mount_fs.c): until pages_recompressed has moved and then
# stood still for 3 s, or 40 s without a move. Prints the seconds waited.
uzram_settle()
{
	local t=$EPOCHREALTIME r0 last cur same=0
	r0=$(uzram_field pages_recompressed)
	last=$r0
	while :; do
		sleep 0.5
		cur=$(uzram_field pages_recompressed)
		if [[ $cur == "$last" ]]; then same=$((same + 1)); else same=0; fi
		last=$cur
		((cur != r0 && same >= 6)) && break
		(($(echo "$EPOCHREALTIME - $t > 40" | bc) && cur == r0)) && break
	done
	since "$t"
}
tmpfs_mem() { df -B1 --output=used "$W/tmpfs" | tail -n 1; }
mib() { echo "scale=1; $1 / 1048576" | bc; }

# memory DIR MEMFN [SETTLEFN]: the tree's bytes (once SETTLEFN, which
# prints the seconds it waited, returned: both figures go to stderr), and
# the percentage rm -rf gave back.
memory()
{
	local dir=$1 fn=$2 settle=${3:-} base full empty first waited
	sleep 3
	base=$($fn)
	as tar -xf "$W/include.tar" -C "$dir"
	full=$($fn)
	if [[ $settle ]]; then
		first=$full
		waited=$($settle)
		full=$($fn)
		echo "bench/fs.sh: the tree right after untar: $(mib "$((first - base))") MiB;" \
			"$waited s later, re-encoded: $(mib "$((full - base))") MiB" >&2
	fi
	as rm -rf "$dir/usr"
	sleep 3 # uzram's compactor runs a second after frees
	empty=$($fn)
	printf '%s %s\n' "$((full - base))" "$(((full - empty) * 100 / (full - base)))"
}

echo "bench/fs.sh: /usr/include ($(tar -tf "$W/include.tar" | grep -vc '/$') files," \
	"$(($(stat -c %s "$W/include.tar") >> 20)) MiB tar), medians of $ROUNDS rounds," \
	"as user nobody; $(nproc) cores; a ${SEQ_MIB} MiB file; $(uptime)"
printf '%-9s %7s %7s %7s %7s %9s %9s %9s %6s\n' "" "untar s" "grep s" "build s" \
	"rm s" "write MB/s" "read MB/s" "tree MiB" "back"
row()
{
	printf '%-9s %7.2f %7.2f %7.2f %7.2f %9s %9s %9s %5s%%\n' "$1" "$2" "$3" "$4" \
		"$5" "$6" "$7" "$(mib "$8")" "$9"
}

mount -t tmpfs -o size=$((SEQ_MIB + 2048))M,uid=nobody,gid=nogroup tmpfs "$W/tmpfs"
read -r tu tg tr < <(rounds "$W/tmpfs")
tb=$(build "$W/tmpfs")
read -r tw trd < <(seq_io "$W/tmpfs")
read -r tm tback < <(memory "$W/tmpfs" tmpfs_mem)
row tmpfs "$tu" "$tg" "$tb" "$tr" "$tw" "$trd" "$tm" "$tback"
umount "$W/tmpfs"

as "$UZRAM" mount "$W/nb/fs" --size $((SEQ_MIB + 2048))M
read -r u g r < <(rounds "$W/nb/fs")
b=$(build "$W/nb/fs")
read -r w rd < <(seq_io "$W/nb/fs")
read -r m back < <(memory "$W/nb/fs" uzram_mem uzram_settle)
row "uzram fs" "$u" "$g" "$b" "$r" "$w" "$rd" "$m" "$back"
as "$UZRAM" umount "$W/nb/fs"

ratio() { echo "scale=2; $1 / $2" | bc; }
printf '%-9s %6sx %6sx %6sx %6sx %8sx %8sx %8sx\n' "uzram/tmpfs" \
	"$(ratio "$u" "$tu")" "$(ratio "$g" "$tg")" "$(ratio "$b" "$tb")" \
	"$(ratio "$r" "$tr")" "$(ratio "$w" "$tw")" "$(ratio "$rd" "$trd")" \
	"$(ratio "$m" "$tm")"
echo "targets:    <= 3x   <= 2x  <= 1.2x   <= 3x    >= 0.5x   >= 0.5x   <= 0.5x, back >= 95%"
echo "bench/fs.sh: done; $(uptime)"
