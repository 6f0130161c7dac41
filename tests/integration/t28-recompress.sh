#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t28-recompress.sh - `uzram serve --recomp-algorithm`, `uzram ctl idle` and
# `uzram ctl recompress`, as zram's recomp_algorithm, idle and recompress:
# what is read after the idle mark is skipped by type=idle, the export
# shrinks, what nbdcopy reads back is the same file, the counters say what
# was done,
# and bad algorithms, priorities and requests get an error with the data
# unchanged.
source "$(dirname "$0")/functions.sh"
require nbdcopy qemu-io python3 head
real_server || skip_all "recompression is a uzram serve feature"

MiB=$((1024 * 1024))
N=$((8 * MiB))

field() { stat_field a "$1"; }
ctl() { server_ctl a "$@"; }

step "an lz4 export with zstd as its secondary algorithm, 8 MiB of the corpus"
start_server a --size 64M --recomp-algorithm zstd
# pages that compress, so that zstd has something to save over lz4 (the
# first 8 MiB of a tar of gzip'd documentation saved 1%)
compressible_data "$T/data" "$N" >/dev/null
nbdcopy --flush "$T/data" "${URI[a]}"
compr=$(field compr_data_size)
mem=$(field mem_used_total)

# recompressed COUNT-VAR ARGS...: ctl recompress ARGS; the count it reports.
recompressed()
{
	local -n count=$1
	shift
	ctl recompress "$@" >"$T/ctl.out" || fail "ctl recompress $* failed"
	count=$(sed -n 's/^ok: \([0-9]*\) pages re-encoded$/\1/p' "$T/ctl.out")
	[[ -n $count ]] || fail "reply: $(cat "$T/ctl.out")"
}

step "mark idle, read the first MiB: recompress type=idle skips it"
stored=$(field pages_stored)
ctl idle >"$T/ctl.out"
grep -q "^ok: $stored pages marked idle$" "$T/ctl.out" ||
	fail "reply: $(cat "$T/ctl.out") (pages_stored $stored)"
qio -r "${URI[a]}" "read 0 $MiB"
recompressed n_idle type=idle
((n_idle > 0 && n_idle <= stored - 256)) ||
	fail "$n_idle idle pages re-encoded of $stored, 256 of them read"

step "recompress the rest, compact: smaller, and the same bytes"
recompressed n_rest
((n_rest >= 128)) || fail "only $n_rest of the 256 pages read were re-encoded"
n=$((n_idle + n_rest))
((n > N / 4096 / 2)) || fail "only $n pages re-encoded"
assert_eq "$(field pages_recompressed)" "$n" pages_recompressed
ctl compact >/dev/null
(($(field compr_data_size) < compr * 9 / 10)) ||
	fail "compr_data_size $compr -> $(field compr_data_size)"
(($(field mem_used_total) < mem)) || fail "mem_used_total did not shrink"
nbdcopy "${URI[a]}" "$T/out"
assert_same_data "$T/data" "$T/out" "$N"

step "again: nothing left to re-encode; huge-only and a threshold parse"
ctl recompress >"$T/ctl.out"
grep -q "^ok: 0 pages re-encoded$" "$T/ctl.out" || fail "reply: $(cat "$T/ctl.out")"
ctl recompress type=huge threshold=2K >/dev/null

step "bad priorities, arguments and requests: errors, nothing changes"
assert_fails "priority 2 without a second algorithm" ctl recompress priority=2
grep -q "no secondary algorithm of priority 2" "$T/last-fail.out" ||
	fail "message: $(cat "$T/last-fail.out")"
assert_fails "priority=9" ctl recompress priority=9
assert_fails "an unknown argument" ctl recompress level=3
python3 - "${SOCK[a]}.ctl" <<'PY'
import socket, sys
for req in (b"recompress 1 0\n", b"recompress x y z\n", b"recompress 1 8 0\n"):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(req)
    got = s.recv(4096)
    s.close()
    if not got.startswith(b"error: "):
        sys.exit("%r: got %r" % (req, got))
PY
nbdcopy "${URI[a]}" "$T/out"
assert_same_data "$T/data" "$T/out" "$N"
assert_alive a
stop_server a

step "the server refuses an unknown or a fourth secondary algorithm"
rc=0
uzram serve --size 1M --socket "$T/b.sock" --recomp-algorithm brotli \
	>/dev/null 2>"$T/b.err" || rc=$?
((rc == 1)) || fail "unknown algorithm: exit $rc"
grep -q "brotli" "$T/b.err" || fail "message: $(cat "$T/b.err")"
rc=0
uzram serve --size 1M --socket "$T/b.sock" --recomp-algorithm zstd \
	--recomp-algorithm zstd:9 --recomp-algorithm deflate \
	--recomp-algorithm lz4hc >/dev/null 2>"$T/b.err" || rc=$?
((rc == 2)) || fail "four algorithms: exit $rc"
[[ ! -e $T/b.sock ]] || fail "a refused server left its socket"
