#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t71-tiers-faults.sh - the tier on an NBD backing store and under real
# faults: nbdkit's memory plugin over a Unix socket as the backing store
# (the mem-limit fill and a read back), then nbdkit's error filter in
# front of it failing every write or read while a file exists (a failed
# writeback leaves the data in memory, a failed read fails that request
# only, a write that finds memory full and the backing store failing gets
# an error), an NBD server that vanishes, and a backing file on a tmpfs of
# 2 MiB that fills up. Every time: no acknowledged byte lost, every failure
# counted, the server still up.
source "$(dirname "$0")/functions.sh"
require nbdcopy qemu-io nbdkit mount
real_server || skip_all "the tier is a uzram serve feature"

MiB=$((1024 * 1024))
field() { stat_field "$1" "$2"; }

# start_nbdkit NAME ARGS...: nbdkit on $T/NAME.nbd; killed at exit.
start_nbdkit()
{
	local name=$1
	shift
	nbdkit -U "$T/$name.nbd" -P "$T/$name.pid" "$@"
	on_exit _kill_pid_file "$T/$name.pid"
	BACKING="nbd+unix:///?socket=$T/$name.nbd"
}
_kill_pid_file() { [[ -f $1 ]] && _kill_pid "$(cat "$1")"; }

# write_chunks NAME: 24 writes of 1 MiB of the corpus, one qemu-io each;
# the MiB acknowledged in ok, the count refused in bad.
write_chunks()
{
	local i
	ok=() bad=0
	for ((i = 0; i < 24; i++)); do
		dd if="$T/data" of="$T/chunk$i" bs=1M skip="$i" count=1 status=none
		if qemu-io -f raw -c "write -s $T/chunk$i $((i * MiB)) $MiB" \
			"${URI[$1]}" >"$T/qio.out" 2>&1 &&
			! grep -qi fail "$T/qio.out"; then
			ok+=("$i")
		else
			bad=$((bad + 1))
			cp "$T/qio.out" "$T/qio.failed"
		fi
	done
}

# check_chunks NAME: every MiB acknowledged reads back the same.
check_chunks()
{
	local i
	nbdcopy "${URI[$1]}" "$T/out"
	for i in "${ok[@]}"; do
		cmp -i 0:$((i * MiB)) -n $MiB "$T/chunk$i" "$T/out" ||
			fail "acknowledged MiB $i differs"
	done
	echo "   ${#ok[@]} MiB acknowledged and intact, $bad refused"
}

head -c $((32 * MiB)) "$CORPUS/heap-python.core" >"$T/core"
cat "$TAR" "$T/core" >"$T/data"
N=$(stat -c %s "$T/data")

step "NBD backing store: nbdkit memory; the mem-limit fill and read back"
start_nbdkit mem memory 256M
start_server a --size 64M --mem-limit 4M --backing "$BACKING"
nbdcopy --flush "$T/data" "${URI[a]}"
assert_eq "$(field a errors)" 0 "failed requests"
(($(field a bd_count) > 0)) || fail "nothing went to the NBD backing store"
nbdcopy "${URI[a]}" "$T/out"
assert_same_data "$T/data" "$T/out" "$N"
(($(field a bd_reads) > 0)) || fail "nothing read from the NBD backing store"

step "the NBD server vanishes: backed reads fail, counted; memory still reads"
# room in memory (no policy below 90% of 64 MiB), then 64 KiB that stay there
server_ctl a mem-limit $((64 * MiB)) >/dev/null
dd if="$T/core" of="$T/fresh" bs=64k count=1 status=none
qio "${URI[a]}" "write -s $T/fresh 0 64k"
_kill_pid "$(cat "$T/mem.pid")"
assert_fails "a read of everything" nbdcopy "${URI[a]}" "$T/out"
(($(field a bd_failed_reads) > 0)) || fail "no failed read counted"
assert_alive a
qemu-io -r -f raw -c "read -v 0 64k" "${URI[a]}" >"$T/qio.out" 2>&1 ||
	fail "a read of data in memory failed: $(cat "$T/qio.out")"
! grep -qi fail "$T/qio.out" || fail "a read of data in memory failed: $(cat "$T/qio.out")"
stop_server a

step "error filter: every write fails while $T/wfail exists"
start_nbdkit err --filter=error memory 256M \
	error-pwrite=EIO error-pwrite-rate=100% error-pwrite-file="$T/wfail" \
	error-pread=EIO error-pread-rate=100% error-pread-file="$T/rfail"
start_server b --size 64M --backing "$BACKING"
head -c $((16 * MiB)) "$T/data" >"$T/d16"
nbdcopy "$T/d16" "${URI[b]}"
compr=$(field b compr_data_size)
touch "$T/wfail"
assert_fails "writeback onto failing writes" server_ctl b writeback
grep -q "backing store" "$T/last-fail.out" || fail "message: $(cat "$T/last-fail.out")"
(($(field b bd_failed_writes) > 0)) || fail "no failed write counted"
assert_eq "$(field b bd_count)" 0 "pages on the backing store"
assert_eq "$(field b compr_data_size)" "$compr" "compressed bytes in memory"
nbdcopy "${URI[b]}" "$T/out"
assert_same_data "$T/d16" "$T/out"
rm "$T/wfail"
server_ctl b writeback | grep -q '^ok: [1-9][0-9]* pages written back$'

step "error filter: reads fail while $T/rfail exists, that request only"
touch "$T/rfail"
assert_fails "a read of backed data" nbdcopy "${URI[b]}" "$T/out"
# the requests nbdcopy left in flight fail too, until its connection ends
wait_for 10 "the failed client's connection to end" conns b 0
failed=$(field b bd_failed_reads)
((failed > 0)) || fail "no failed read counted"
rm "$T/rfail"
nbdcopy "${URI[b]}" "$T/out"
assert_same_data "$T/d16" "$T/out"
assert_eq "$(field b bd_failed_reads)" "$failed" "failed reads after recovery"
stop_server b

step "memory full, backing writes failing: errors, no acknowledged byte lost"
# 2 MiB: the slot table's 256 KiB counts in the limit, and the first MiB
# must fit even if it does not compress at all
start_server c --size 64M --mem-limit 2M --backing "$BACKING"
touch "$T/wfail"
write_chunks c
((bad > 0)) || fail "24 MiB went into 2 MiB of memory with failing writes"
((${#ok[@]} > 0)) || fail "no write succeeded"
(($(field c failed_writes) > 0)) || fail "no failed write counted"
(($(field c bd_failed_writes) > 0)) || fail "no failed backing write counted"
assert_alive c
rm "$T/wfail"
check_chunks c
stop_server c

step "a backing file on a 2 MiB tmpfs that fills up"
mkdir "$T/mnt"
mount -t tmpfs -o size=2M tmpfs "$T/mnt"
cleanup_mount "$T/mnt"
start_server d --size 64M --backing "$T/mnt/back"
nbdcopy "$T/d16" "${URI[d]}"
assert_fails "writeback onto a full file system" server_ctl d writeback
grep -q "full" "$T/last-fail.out" || fail "message: $(cat "$T/last-fail.out")"
(($(field d bd_failed_writes) > 0)) || fail "no failed write counted"
(($(field d bd_count) > 0)) || fail "nothing fit on the 2 MiB file system"
nbdcopy "${URI[d]}" "$T/out"
assert_same_data "$T/d16" "$T/out"
stop_server d

step "both tiers full: 1 MiB of memory and the full 2 MiB tmpfs: ENOSPC"
start_server e --size 64M --mem-limit 1M --backing "$T/mnt/back2"
write_chunks e
((bad > 0)) || fail "24 MiB fit in 1 MiB of memory and 2 MiB of tmpfs"
((${#ok[@]} > 0)) || fail "no write succeeded"
grep -qi "no space" "$T/qio.failed" || fail "qemu-io: $(cat "$T/qio.failed")"
(($(field e failed_writes) > 0)) || fail "no failed write counted"
assert_alive e
check_chunks e
stop_server e
