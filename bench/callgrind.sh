#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# callgrind.sh [REV] - the library's instructions (callgrind's Ir) per page
# written and per 4 KiB read, counted inside uzram_write() and uzram_read()
# only (bench/callgrind.c says what it writes). With REV (a commit, e.g.
# main or HEAD~3), the same program also runs against REV's library, built
# in a scratch worktree, and the script prints both and their ratio: the
# check that a change which should not touch the hot path does not (issue
# 34 asks for within 1%). Instruction counts do not depend on the machine's
# load, unlike times.
set -euo pipefail
cd "$(dirname "$0")/.."
pages=${PAGES:-4096}
build=${BUILD:-build}
prog=$build/bench-callgrind
[ -x "$prog" ] || { echo "callgrind.sh: no $prog: run make bench-callgrind" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"; git worktree remove --force "$scratch/tree" 2>/dev/null || true' EXIT

# Ir per page inside FN for PROG's MODE (the program is linked with its
# tree's libuzram.a, so each tree's program counts that tree's library)
count() {
	local prog=$1 mode=$2 fn=$3 out
	out=$scratch/cg.$mode.$RANDOM
	valgrind --tool=callgrind --toggle-collect="$fn" \
		--callgrind-out-file="$out" "$prog" "$mode" "$pages" 2>/dev/null
	awk -v n="$pages" '/^summary:/ { printf "%.0f\n", $2 / n }' "$out"
}

row() {
	printf '%s %s\n' "$(count "$1" write uzram_write)" \
		"$(count "$1" read uzram_read)"
}

read -r w r <<<"$(row "$prog")"
printf 'this tree: %s Ir per page written, %s Ir per 4 KiB read (%s pages)\n' \
	"$w" "$r" "$pages"
[ $# -ge 1 ] || exit 0

git worktree add -q --detach "$scratch/tree" "$1"
cp bench/callgrind.c mk/bench-callgrind.mk "$scratch/"
cp "$scratch/callgrind.c" "$scratch/tree/bench/callgrind.c"
cp "$scratch/bench-callgrind.mk" "$scratch/tree/mk/bench-callgrind.mk"
make -C "$scratch/tree" -j2 build/bench-callgrind >/dev/null
read -r bw br <<<"$(row "$scratch/tree/build/bench-callgrind")"
printf '%-9s: %s Ir per page written, %s Ir per 4 KiB read\n' "$1" "$bw" "$br"
awk -v w="$w" -v r="$r" -v bw="$bw" -v br="$br" 'BEGIN {
	printf "this tree / %s: writes %.4f, reads %.4f\n", "REV", w / bw, r / br
}' | sed "s/REV/$1/"
