#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make-image-seeds.sh UZRAM CORPUS_DIR - write the seed corpus of
# fuzz_image into tests/fuzz/corpus/image: small images (devices of 32 to
# 128 KiB) of every codec and cluster size, with compressed, raw,
# same-filled and recompressed clusters and holes, made with
# `UZRAM load FILE --save IMAGE`. Each seed is an options byte (see
# fuzz_image.c: 1 repairs checksums, 2 saves again) and the image. Run it
# again after changing the format and commit the output.
set -euo pipefail
uzram=$1 corpus=$2
out=$(cd "$(dirname "$0")" && pwd)/corpus/image
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
rm -f "$out"/*

# 8 KiB of the corpus, 4 KiB random, 4 KiB of one byte, 8 KiB of zeros
# (a hole in the device), 8 KiB more of the corpus: 32 KiB
mixed() {
	head -c 8192 "$corpus/files.tar"
	head -c 4096 /dev/urandom
	head -c 4096 /dev/zero | tr '\0' 'x'
	head -c 8192 /dev/zero
	dd if="$corpus/files.tar" bs=4096 skip=10 count=2 status=none
}
mixed >"$tmp/mixed"
dd if="$corpus/heap-python.core" bs=4096 count=32 status=none >"$tmp/core"

n=0
seed() { # NAME OPTIONS-BYTE LOAD-ARGS...
	local name=$1 opt=$2
	shift 2
	"$uzram" load "$@" --save "$tmp/x.img" >/dev/null
	{ printf "\\x$opt"; cat "$tmp/x.img"; } >"$out/$name"
	n=$((n + 1))
}
seed lz4-4k 01 "$tmp/mixed"
seed lz4-4k-resave 03 "$tmp/mixed"
seed lz4-4k-raw 00 "$tmp/mixed"
seed zstd-16k 01 "$tmp/mixed" --algorithm zstd --cluster 16K
seed deflate-64k 03 "$tmp/core" --algorithm deflate --cluster 64K
seed lz4hc-8k 01 "$tmp/core" --algorithm lz4hc --cluster 8K
seed recompressed 03 "$tmp/core" --recompress zstd
dd if="$corpus/files.tar" bs=4096 skip=4 count=1 status=none >"$tmp/dict"
seed zstd-dict 01 "$tmp/core" --algorithm zstd --dict "$tmp/dict"
seed lz4-dict-recompressed 03 "$tmp/mixed" --dict "$tmp/dict" \
	--recompress "zstd:3:dict=$tmp/dict"
head -c 4096 /dev/zero >"$tmp/zero"
seed tiny 01 "$tmp/zero"
# shared records (version 2): the mixed data twice, saved with dedup;
# opened with dedup (option bit 2) and without
cat "$tmp/mixed" "$tmp/mixed" >"$tmp/twice"
seed dedup 07 "$tmp/twice" --dedup
seed dedup-copied 03 "$tmp/twice" --dedup
echo "make-image-seeds.sh: $n seeds in $out"
