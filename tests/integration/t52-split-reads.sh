#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t52-split-reads.sh - large reads answered in several structured-reply
# chunks (nbd_split_reads.py): every byte covered once and right, one DONE,
# DF honoured, and clients vanishing mid-reply hurt nobody.
source "$(dirname "$0")/functions.sh"
require nbdcopy python3

MiB=$((1024 * 1024))

step "a 16 MiB export: real data (up to 12 MiB of the corpus), then holes"
start_server s --size 16M
head -c $((12 * MiB)) "$CORPUS/files.tar" >"$T/image"
truncate -s $((16 * MiB)) "$T/image"
nbdcopy --flush "$T/image" "${URI[s]}"

step "large structured reads, then clients vanishing mid-reply"
python3 "$ITEST_DIR/nbd_split_reads.py" "${SOCK[s]}" "$T/image" ||
	fail "nbd_split_reads.py failed (see above)"
assert_alive s
[[ $(nbdcopy "${URI[s]}" - | sha256sum | cut -d' ' -f1) == "$(sha "$T/image")" ]] ||
	fail "the export changed"
stop_server s
