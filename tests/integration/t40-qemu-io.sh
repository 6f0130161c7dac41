#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t40-qemu-io.sh - byte-exact I/O through qemu-io (-f raw) against
# `uzram serve`: pattern-checked writes and reads at unaligned offsets,
# across 4 KiB page boundaries, at the last byte, zero-length requests,
# vectored and asynchronous writes, FUA and flush, discard and write-zeroes
# (aligned and not) followed by reads of zeros, and requests past the end,
# which must fail. The same command list is then replayed on a local raw
# file, and the export must equal that file byte for byte. Last, the same
# commands against a device of 64 KiB clusters (read-modify-write of
# clusters, partial discards zeroed in place) must give the same bytes.
source "$(dirname "$0")/functions.sh"
require qemu-io qemu-img

K=1024
M=$((1024 * K))
S=$((16 * M))

# Each entry is one qemu-io command; read -P checks the bytes.
ops=(
	# unaligned, inside one page
	"write -P 0x11 1 1"
	"read -P 0x11 1 1"
	"read -P 0 0 1"
	"read -P 0 2 4094"
	# across one page boundary, neighbours untouched
	"write -P 0x22 4000 200"
	"read -P 0x22 4000 200"
	"read -P 0 3990 10"
	"read -P 0 4200 100"
	# from the last byte of a page to the first of the page after next
	"write -P 0x33 8191 8194"
	"read -P 0x33 8191 8194"
	"read -P 0 8190 1"
	"read -P 0 16385 1"
	# large and unaligned at both ends
	"write -P 0x44 $((M - 3)) $((256 * K + 7))"
	"read -P 0x44 $((M - 3)) $((256 * K + 7))"
	"read -P 0 $((M - 4)) 1"
	"read -P 0 $((M + 256 * K + 4)) 1"
	# an overwrite in the middle of an earlier write
	"write -P 0x55 20000 10000"
	"write -P 0x66 25000 100"
	"read -P 0x55 20000 5000"
	"read -P 0x66 25000 100"
	"read -P 0x55 25100 4900"
	# the last byte and the last partial page
	"write -P 0x77 $((S - 1)) 1"
	"read -P 0x77 $((S - 1)) 1"
	"read -P 0 $((S - 4096)) 4095"
	"write -P 0x78 $((S - 5000)) 4999"
	"read -P 0x78 $((S - 5000)) 4999"
	"read -P 0x77 $((S - 1)) 1"
	# zero-length requests, also at the very end
	"write 0 0"
	"read 0 0"
	"write $S 0"
	"read $S 0"
	"read -P 0x11 1 1"
	# vectored and asynchronous writes, FUA and flush
	"writev -P 0xee $((13 * M)) 1000 3000 5000"
	"read -P 0xee $((13 * M)) 9000"
	"aio_write -P 0xdd $((12 * M)) $((64 * K))"
	"aio_write -P 0xde $((12 * M + 64 * K)) $((64 * K))"
	"aio_flush"
	"read -P 0xdd $((12 * M)) $((64 * K))"
	"read -P 0xde $((12 * M + 64 * K)) $((64 * K))"
	"write -f -P 0xcc $((10 * M + 512)) 4096"
	"flush"
	"read -P 0xcc $((10 * M + 512)) 4096"
	# aligned discard and write-zeroes over data
	"write -P 0x99 $((2 * M)) $M"
	"discard $((2 * M)) $M"
	"read -P 0 $((2 * M)) $M"
	"write -P 0xbb $((6 * M)) $M"
	"write -z $((6 * M)) $M"
	"read -P 0 $((6 * M)) $M"
	"write -P 0xbd $((7 * M)) $M"
	"write -z -u $((7 * M)) $M"
	"read -P 0 $((7 * M)) $M"
	# unaligned discard and write-zeroes: the bytes around stay
	"write -P 0x9a $((4 * M)) $((64 * K))"
	"discard $((4 * M + 1000)) 10000"
	"read -P 0x9a $((4 * M)) 1000"
	"read -P 0 $((4 * M + 1000)) 10000"
	"read -P 0x9a $((4 * M + 11000)) $((64 * K - 11000))"
	"write -P 0xbc $((8 * M)) $((64 * K))"
	"write -z $((8 * M + 100)) 5000"
	"read -P 0xbc $((8 * M)) 100"
	"read -P 0 $((8 * M + 100)) 5000"
	"read -P 0xbc $((8 * M + 5100)) $((64 * K - 5100))"
	# write-zeroes over a whole never-written range, then data again
	"write -z $((9 * M)) $((3 * 4096))"
	"write -P 0x12 $((9 * M + 4096)) 4096"
	"read -P 0 $((9 * M)) 4096"
	"read -P 0x12 $((9 * M + 4096)) 4096"
)

step "start a 16 MiB export"
start_server a --size 16M

step "qemu-io: ${#ops[@]} pattern-checked commands"
qio "${URI[a]}" "${ops[@]}"

step "the same commands on a local raw file give the same bytes"
truncate -s $S "$T/model.img"
qio "$T/model.img" "${ops[@]}"
assert_ok "qemu-img compare the export with the model file" \
	qemu-img compare -f raw -F raw "$T/model.img" "${URI[a]}"

step "a fresh connection sees the same data"
qio -r "${URI[a]}" "read -P 0x77 $((S - 1)) 1" "read -P 0x55 20000 5000" \
	"read -P 0 $((6 * M)) $M"

step "requests past the end fail"
qio_fails "${URI[a]}" "write -P 1 $S 512"
qio_fails "${URI[a]}" "write -P 1 $((S - 512)) 1024"
qio_fails "${URI[a]}" "read $S 1"
qio_fails "${URI[a]}" "read $((S - 4096)) 8192"
qio_fails "${URI[a]}" "write -z $((S - 4096)) 8192"
qio "${URI[a]}" "read -P 0x77 $((S - 1)) 1" "read -P 0x78 $((S - 5000)) 4999"

step "SIGTERM"
stop_server a

if real_server; then
	step "with 64 KiB clusters: the same commands, compared with the model"
	start_server c --size 16M --cluster 64K
	qio "${URI[c]}" "${ops[@]}"
	assert_ok "qemu-img compare the 64K-cluster export with the model file" \
		qemu-img compare -f raw -F raw "$T/model.img" "${URI[c]}"
	stop_server c
fi
