#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# soak.sh - `make soak`: one `uzram serve` under real clients for SOAK_TIME
# seconds (default 600, at most 86400), then checks.
#
# Load, in parallel until the time is up:
#   writers   nbdcopy -C4 writes image A, then image B, ... over [0, 256M)
#             (real data: the corpus core image and tar), and after each
#             copy a nbdcopy -C4 reader checks the region against it;
#   readers   nbdcopy -C4 of the whole export to /dev/null, nonstop;
#   fio       the nbd engine, random writes of 4-64K at depth 16 with
#             crc32c verify, over [256M, 384M), in rounds;
#   killers   nbdcopy readers and raw clients (nbd_bad_client.py vanish)
#             started and killed with SIGKILL at random moments.
# Meanwhile the server's VmRSS and thread count are sampled every second.
#
# Checks at the end: every writer round read back equal; every fio round
# clean; a last full read equals what was written last; the peak VmRSS
# stayed under mem_used_max + table_bytes + --buffer-limit + 64 MiB (what
# the device held at most, what the buffers may hold, and a fixed allowance
# for code, stacks and the allocator); the thread count never passed
# 1 + max_connections x 8 + 16 (control), and once the clients are gone it
# falls back to 1 (the main thread); the server exits cleanly on SIGTERM.
# The figures are printed at the end.
source "$(dirname "$0")/integration/functions.sh"
require nbdcopy nbdinfo fio python3

SOAK_TIME=${SOAK_TIME:-600}
((SOAK_TIME >= 10 && SOAK_TIME <= 86400)) ||
	fail "SOAK_TIME must be 10 to 86400 seconds, got $SOAK_TIME"
MiB=$((1024 * 1024))
BUFLIM=$((128 * MiB))
MAXCONN=32
REGION=$((256 * MiB))

step "images A and B: 256 MiB each of real data"
head -c $REGION "$CORPUS/heap-python.core" >"$T/A"
truncate -s $REGION "$T/A"
: >"$T/B"
while (($(stat -c %s "$T/B") < REGION)); do   # no pipe: head would SIGPIPE cat
	cat "$CORPUS/files.tar" >>"$T/B"
done
truncate -s $REGION "$T/B"

step "start a 512 MiB lz4 export, --buffer-limit 128M, --max-connections $MAXCONN"
start_server s --size 512M --buffer-limit $BUFLIM --max-connections $MAXCONN
pid=${PID[s]}
END=$((SECONDS + SOAK_TIME))

# sampler: VmRSS (KiB) and Threads once a second into $T/samples.
(
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < END + 60)); do
		awk '/^VmRSS:/ {r = $2} /^Threads:/ {t = $2} END {print r, t}' \
			"/proc/$pid/status" 2>/dev/null
		sleep 1
	done
) >"$T/samples" &
sampler=$!
on_exit quiet_kill "$sampler"
quiet_kill() { kill "$1" 2>/dev/null || true; }

writer()
{
	local round=0 img
	while ((SECONDS < END)); do
		img=$T/A
		((round % 2)) && img=$T/B
		nbdcopy -C 4 --flush "$img" "${URI[s]}" ||
			{ echo "writer round $round: nbdcopy failed"; return 1; }
		nbdcopy -C 4 "${URI[s]}" "$T/back" ||
			{ echo "writer round $round: read back failed"; return 1; }
		cmp -n $REGION "$T/back" "$img" >"$T/cmp.out" 2>&1 ||
			{ echo "writer round $round: read back differs:" \
				"$(cat "$T/cmp.out")"; return 1; }
		echo "$img" >"$T/last-image"
		round=$((round + 1))
	done
	echo "$round" >"$T/writer-rounds"
}

reader()
{
	local n=0
	while ((SECONDS < END)); do
		nbdcopy -C 4 "${URI[s]}" /dev/null || { echo "reader failed"; return 1; }
		n=$((n + 1))
	done
	echo "$n" >"$T/reader-rounds"
}

fio_loop()
{
	local n=0
	cat >"$T/soak.fio" <<FIO
[global]
ioengine=nbd
uri=${URI[s]}
rw=randwrite
bsrange=4k-64k
iodepth=16
offset=$REGION
size=128m
verify=crc32c
verify_fatal=1
do_verify=1
randrepeat=0
[job]
FIO
	while ((SECONDS < END)); do
		fio --output-format=json "$T/soak.fio" >"$T/fio.json" 2>"$T/fio.err" ||
			{ echo "fio round $n failed: $(tail -n 3 "$T/fio.err")"; return 1; }
		n=$((n + 1))
	done
	echo "$n" >"$T/fio-rounds"
}

killer()
{
	local n=0 p
	while ((SECONDS < END)); do
		if ((RANDOM % 2)); then
			nbdcopy -C 4 "${URI[s]}" /dev/null 2>/dev/null &
		else
			python3 "$ITEST_DIR/nbd_bad_client.py" --socket "${SOCK[s]}" \
				vanish >/dev/null 2>&1 &
		fi
		p=$!
		sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
		n=$((n + 1))
	done
	echo "$n" >"$T/killed"
}

step "soak for $SOAK_TIME s: writer+verify, reader, fio verify, killer"
writer >"$T/writer.log" 2>&1 & w=$!
reader >"$T/reader.log" 2>&1 & r=$!
fio_loop >"$T/fio.log" 2>&1 & f=$!
killer >"$T/killer.log" 2>&1 & k=$!
rc=0
wait "$w" || { rc=1; echo "writer: $(cat "$T/writer.log")"; }
wait "$r" || { rc=1; echo "reader: $(cat "$T/reader.log")"; }
wait "$f" || { rc=1; echo "fio: $(cat "$T/fio.log")"; }
wait "$k" || true
((rc == 0)) || fail "a client failed (see above)"
assert_alive s

step "the last image reads back whole"
[[ -s $T/last-image ]] || fail "no writer round finished"
nbdcopy "${URI[s]}" "$T/back"
cmp -n $REGION "$T/back" "$(cat "$T/last-image")" ||
	fail "final read differs from $(cat "$T/last-image")"

step "the threads go back to the main one once the clients are gone"
wait_for 20 "one thread left" \
	sh -c "grep -q '^Threads:[[:space:]]*1\$' /proc/$pid/status"

step "RSS and thread count against their bounds"
used_max=$(stat_field s mem_used_max)
table=$(stat_field s table_bytes)
sleep 1
kill "$sampler" 2>/dev/null || true
read -r rss_max thr_max < <(awk 'BEGIN {r = 0; t = 0}
	$1 > r {r = $1} $2 > t {t = $2} END {print r, t}' "$T/samples")
rss_bound=$(((used_max + table + BUFLIM) / 1024 + 64 * 1024))
thr_bound=$((1 + MAXCONN * 8 + 16))
printf '  %-28s %s\n' \
	"time" "$SOAK_TIME s" \
	"writer rounds (verified)" "$(cat "$T/writer-rounds")" \
	"reader rounds" "$(cat "$T/reader-rounds")" \
	"fio verify rounds" "$(cat "$T/fio-rounds")" \
	"clients killed" "$(cat "$T/killed")" \
	"connections total" "$(stat_field s connections_total)" \
	"connections refused" "$(stat_field s connections_refused)" \
	"protocol errors" "$(stat_field s protocol_errors)" \
	"bytes written" "$(stat_field s bytes_written)" \
	"bytes read" "$(stat_field s bytes_read)" \
	"mem_used_max" "$used_max" \
	"table_bytes" "$table" \
	"peak VmRSS (KiB)" "$rss_max" \
	"RSS bound (KiB)" "$rss_bound" \
	"peak threads" "$thr_max" \
	"thread bound" "$thr_bound"
((rss_max <= rss_bound)) || fail "peak RSS $rss_max KiB over $rss_bound KiB"
((thr_max <= thr_bound)) || fail "peak threads $thr_max over $thr_bound"
stop_server s
