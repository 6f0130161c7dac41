#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t63-fs-diff.sh - uzram's own file system against tmpfs, by fs_diff.py: the
# same random operations (writes at any offset and size, truncate,
# fallocate and hole punching, shared and private mmap, rename with
# NOREPLACE and EXCHANGE, links, symlinks, xattrs, copy_file_range, several
# descriptors on one file) on a fresh `uzram mount` and on a tmpfs, the
# results and the whole trees compared after every step; then, as the user
# nobody, the same, ENOSPC at --size against a byte model (nothing written
# before may change), and concurrent writers each checking their own files.
# Any divergence fails the test, minimised to a short list of operations in
# the log. Fixed seeds; FS_DIFF_SALT (a number) moves them, to explore.
source "$(dirname "$0")/functions.sh"
require python3 setpriv fusermount3
real_server || skip_all "uzram mount is a uzram command"

DIFF=$(cd "$(dirname "$0")" && pwd)/fs_diff.py
salt=${FS_DIFF_SALT:-0}
export UZRAM_RUNTIME_DIR=$T/run
mkdir -m 700 "$T/run"

# fsd WHO ARGS...: fs_diff.py ARGS as the current user (AS), its output
# kept; fails with the divergences it printed
fsd()
{
	local who=$1 out=$T/fsd.out
	shift
	as env TMPDIR="$TMPD" HOME="$TMPD" UZRAM="$UZRAM" python3 "$DIFF" "$@" \
		--log "$TMPD/divergences.jsonl" >"$out" 2>&1 ||
		fail "$who: fs_diff.py $*: $(grep -E 'DIVERGENCE|minimal|->|bad|Error' "$out" | head -n 12)"
	grep -E '^(seed|enospc|conc) ' "$out" | sed "s/^/$who: /"
}

TMPD=$T/root
mkdir "$TMPD"
step "root: random operations beside tmpfs, 16K and 4K clusters"
fsd root diff --seed $((101 + salt)) --ops 300
fsd root diff --seed $((102 + salt)) --ops 200 --cluster 4K

as_nobody "$T/nb" "$T/nb/run" "$T/nb/tmp"
UZRAM_RUNTIME_DIR=$T/nb/run
TMPD=$T/nb/tmp
as test -x "$UZRAM" || skip_all "user nobody cannot run $UZRAM"
step "nobody: random operations beside a /dev/shm directory"
fsd nobody diff --seed $((201 + salt)) --ops 200
step "nobody: ENOSPC at --size 24M, nothing written before changes"
fsd nobody enospc --seed $((202 + salt)) --ops 300 --size 24M
# the step checks something only if the writes met ENOSPC
grep -Eq ' [1-9][0-9]* ENOSPC, 0 bad' "$T/fsd.out" ||
	fail "no write met ENOSPC at --size 24M: $(grep enospc "$T/fsd.out")"
step "nobody: three concurrent writers, each file as its writer left it"
fsd nobody conc --seed $((203 + salt)) --procs 3 --ops 150
! grep -q "$T" /proc/self/mountinfo || fail "mounts left: $(grep "$T" /proc/self/mountinfo)"
