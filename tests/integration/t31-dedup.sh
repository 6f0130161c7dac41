#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t31-dedup.sh - `uzram serve --dedup` over NBD: nbdcopy of one image to two
# offsets of one export (the second through nbdkit's offset filter), both
# read back byte for byte; the second copy stores nothing new (its pages are
# counted in pages_deduped and compr_data_size does not grow); a write into
# one copy leaves the other as it was; `uzram stat` (and --all) shows the figures;
# recompression re-encodes each shared object once and keeps the sharing;
# writeback writes each shared object once; and a server without --dedup
# reports none.
source "$(dirname "$0")/functions.sh"
require nbdcopy nbdkit qemu-io

MiB=$((1024 * 1024))
SIZE=$((64 * MiB))
OFF=$((32 * MiB))
TARSZ=$(stat -c %s "$TAR")
((TARSZ <= OFF)) || fail "the corpus tar is larger than 32 MiB"

# copy_at NAME OFFSET FILE: nbdcopy FILE into export NAME at OFFSET.
copy_at()
{
	nbdcopy "$3" -- [ nbdkit --exit-with-parent --filter=offset nbd \
		uri="${URI[$1]}" offset="$2" range="$TARSZ" ]
}

step "start a 64 MiB export with --dedup"
start_server d --size 64M --dedup

step "the image at offset 0"
nbdcopy "$TAR" "${URI[d]}"
stored=$(stat_field d pages_stored)
same=$(stat_field d same_pages)
deduped=$(stat_field d pages_deduped)
compr=$(stat_field d compr_data_size)
((stored > same)) || fail "nothing stored: $stored pages, $same same-filled"

step "the same image at offset 32 MiB: every data page is a hit"
copy_at d "$OFF" "$TAR"
assert_eq "$(stat_field d pages_deduped)" $((deduped + stored - same)) \
	"pages_deduped after the second copy"
assert_eq "$(stat_field d compr_data_size)" "$compr" \
	"compr_data_size after the second copy"
(($(stat_field d dedup_bytes_saved) >= compr)) ||
	fail "dedup_bytes_saved below the bytes of the first copy"
(($(stat_field d dedup_index_bytes) > 0)) || fail "no index bytes reported"

step "both copies read back byte for byte"
nbdcopy "${URI[d]}" "$T/out"
assert_same_range "$TAR" 0 "$T/out" 0 "$TARSZ"
assert_same_range "$TAR" 0 "$T/out" "$OFF" "$TARSZ"

step "a write into the first copy leaves the second as it was"
qio "${URI[d]}" "write -P 0x5a 4096 8192" "write -P 0xa5 100000 3"
nbdcopy "${URI[d]}" "$T/out2"
assert_same_range "$TAR" 0 "$T/out2" "$OFF" "$TARSZ"
cmp -s -n 8192 -i 4096:$((OFF + 4096)) "$T/out2" "$T/out2" &&
	fail "the write into the first copy shows in the second"
(($(stat_field d pages_deduped) < deduped + stored - same)) ||
	fail "pages_deduped did not drop after copy on write"

step "uzram stat shows the dedup figures"
uzram stat --socket "${SOCK[d]}" --all >"$T/stat.txt"
grep -Eq '^pages_deduped +[1-9]' "$T/stat.txt" ||
	fail "no pages_deduped in uzram stat: $(cat "$T/stat.txt")"
grep -Eq '^dedup_index_bytes +[1-9]' "$T/stat.txt" ||
	fail "no dedup_index_bytes in uzram stat --all"
uzram stat --socket "${SOCK[d]}" >"$T/stat.txt"
grep -Eq '^dedup +[1-9][0-9]* pages shared, [0-9.]+[KMG] saved$' "$T/stat.txt" ||
	fail "no dedup line in uzram stat: $(cat "$T/stat.txt")"
stop_server d

step "recompression re-encodes each shared object once, for both copies"
start_server r --size 64M --dedup --recomp-algorithm zstd
nbdcopy "$TAR" "${URI[r]}"
copy_at r "$OFF" "$TAR"
deduped=$(stat_field r pages_deduped)
compr=$(stat_field r compr_data_size)
server_ctl r recompress >"$T/ctl.out" || fail "ctl recompress failed"
n=$(sed -n 's/^ok: \([0-9]*\) pages re-encoded$/\1/p' "$T/ctl.out")
((n > deduped / 2)) || fail "$n pages re-encoded, $deduped of them shared"
assert_eq "$(stat_field r pages_recompressed)" "$n" pages_recompressed
assert_eq "$(stat_field r pages_deduped)" "$deduped" \
	"pages_deduped after recompression"
(($(stat_field r compr_data_size) < compr * 9 / 10)) ||
	fail "compr_data_size $compr -> $(stat_field r compr_data_size)"
nbdcopy "${URI[r]}" "$T/out3"
assert_same_range "$TAR" 0 "$T/out3" 0 "$TARSZ"
assert_same_range "$TAR" 0 "$T/out3" "$OFF" "$TARSZ"
stop_server r

step "writeback writes each shared object once, for both copies"
start_server w --size 64M --dedup --backing "$T/back"
nbdcopy "$TAR" "${URI[w]}"
copy_at w "$OFF" "$TAR"
deduped=$(stat_field w pages_deduped)
saved=$(stat_field w dedup_bytes_saved)
compr=$(stat_field w compr_data_size)
stored=$(stat_field w pages_stored)
same=$(stat_field w same_pages)
server_ctl w writeback >"$T/ctl.out" || fail "ctl writeback failed"
n=$(sed -n 's/^ok: \([0-9]*\) pages written back$/\1/p' "$T/ctl.out")
assert_eq "$n" $((stored - same)) "pages written back"
assert_eq "$(stat_field w compr_data_size)" 0 "compr_data_size after writeback"
# the backing store holds each object once: what memory held before
assert_eq "$(stat_field w bd_bytes)" "$compr" "bd_bytes after writeback"
assert_eq "$(stat_field w pages_deduped)" "$deduped" \
	"pages_deduped after writeback"
assert_eq "$(stat_field w dedup_bytes_saved)" "$saved" \
	"dedup_bytes_saved after writeback"
nbdcopy "${URI[w]}" "$T/out4"
assert_same_range "$TAR" 0 "$T/out4" 0 "$TARSZ"
assert_same_range "$TAR" 0 "$T/out4" "$OFF" "$TARSZ"
stop_server w

step "without --dedup nothing is deduplicated"
start_server n --size 64M
nbdcopy "$TAR" "${URI[n]}"
copy_at n "$OFF" "$TAR"
assert_eq "$(stat_field n pages_deduped)" 0 "pages_deduped without --dedup"
assert_eq "$(stat_field n dedup_index_bytes)" 0 "index bytes without --dedup"
stop_server n
