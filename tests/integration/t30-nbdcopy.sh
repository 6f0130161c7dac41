#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t30-nbdcopy.sh - bulk copies with nbdcopy (libnbd) into and out of
# `uzram serve`, sha256 compared: the corpus tar and 64 MiB of a python core
# dump, over one connection and over four (multi-conn) with many requests
# in flight, zero runs written over old data, export-to-export copies, and
# SIGTERM in the middle of a copy.
source "$(dirname "$0")/functions.sh"
require nbdcopy

MiB=$((1024 * 1024))
SIZE=$((96 * MiB))
TARSZ=$(stat -c %s "$TAR")
head -c $((64 * MiB)) "$CORPUS/heap-python.core" >"$T/core64"
[[ $(stat -c %s "$T/core64") == $((64 * MiB)) ]] ||
	fail "heap-python.core is smaller than 64 MiB"

# copy_back NAME FILE [NBDCOPY ARGS]: read the whole export into FILE.
copy_back()
{
	local name=$1 out=$2
	shift 2
	rm -f "$out"
	nbdcopy "$@" "${URI[$name]}" "$out"
	assert_eq "$(stat -c %s "$out")" "$SIZE" "size of the copy of export $name"
}

step "start a 96 MiB export"
start_server a --size 96M

step "files.tar in and out over one connection"
nbdcopy --connections=1 "$TAR" "${URI[a]}"
copy_back a "$T/out" --connections=1
assert_same_data "$TAR" "$T/out" "$TARSZ"
assert_zero "$T/out" "$TARSZ" $((SIZE - TARSZ))

step "64 MiB of the python core in (4 connections, 64 requests)," \
	"out (1, synchronous)"
nbdcopy --connections=4 --requests=64 --flush "$T/core64" "${URI[a]}"
copy_back a "$T/out" --synchronous
assert_same_data "$T/core64" "$T/out"
assert_zero "$T/out" $((64 * MiB)) $((32 * MiB))

step "the same out over 4 connections with 16 requests of 256 KiB each"
copy_back a "$T/out2" --connections=4 --requests=16 --request-size=$((256 * 1024))
assert_eq "$(sha "$T/out2")" "$(sha "$T/out")" "sha256 of the multi-conn copy"

step "zero runs written over old data read back as zeros"
# tar, then 8 MiB of zeros, then 4 MiB of the core: nbdcopy turns the zero
# run into zero requests over what the core left there.
{
	cat "$TAR"
	head -c $((8 * MiB)) /dev/zero
	tail -c $((4 * MiB)) "$T/core64"
} >"$T/mixed"
MIXSZ=$(stat -c %s "$T/mixed")
nbdcopy --connections=4 "$T/mixed" "${URI[a]}"
copy_back a "$T/out"
assert_same_data "$T/mixed" "$T/out"
assert_same_range "$T/core64" "$MIXSZ" "$T/out" "$MIXSZ" $((64 * MiB - MIXSZ))

step "export to export (uzram to uzram, 4 connections) and back"
start_server b --size 96M --algorithm zstd
nbdcopy --connections=4 --requests=32 "${URI[a]}" "${URI[b]}"
copy_back b "$T/out3" --connections=4
assert_eq "$(sha "$T/out3")" "$(sha "$T/out")" "sha256 after the export-to-export copy"

step "servers survive the traffic and stop cleanly"
stop_server a
stop_server b

step "SIGTERM in the middle of a 4-connection copy: exit 0, no hang"
start_server c --size 96M
rc=0
timeout 30 nbdcopy --connections=4 --requests=16 "$T/core64" "${URI[c]}" \
	>"$T/cp.log" 2>&1 &
cp_pid=$!
on_exit _kill_pid "$cp_pid"
sleep 0.3
stop_server c
wait "$cp_pid" || rc=$?
((rc != 124)) || fail "nbdcopy still ran 30s after the server was stopped"
echo "  nbdcopy ended with status $rc"
