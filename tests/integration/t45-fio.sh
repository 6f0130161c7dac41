#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t45-fio.sh - fio's nbd engine (libnbd) against `uzram serve`: numjobs=2,
# each job on its own connection and 24 MiB range (offset_increment), random
# writes of mixed sizes at queue depth 16, every block verified with crc32c
# afterwards; then the same ranges overwritten with reads verifying as the
# writes go. fio's exit status and the error fields of its JSON output must
# be clean, and the verify reads must have happened. Last, 8 raw connections
# race on 512-byte slots of shared 4 KiB pages: no update may be lost.
source "$(dirname "$0")/functions.sh"
require fio

step "start a 64 MiB export"
start_server a --size 64M

# check_fio JSON: no job reports an error, and every job wrote and read.
check_fio()
{
	python3 - "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
jobs = j["jobs"]
if len(jobs) != 2:
    sys.exit("expected 2 jobs, got %d" % len(jobs))
for job in jobs:
    name = job["jobname"]
    if job["error"] != 0:
        sys.exit("job %s: error %d" % (name, job["error"]))
    if job.get("total_err", 0) != 0:
        sys.exit("job %s: total_err %d" % (name, job["total_err"]))
    for d in ("write", "read"):
        if job[d]["io_bytes"] <= 0:
            sys.exit("job %s: no %s I/O" % (name, d))
    print("  %s: wrote %d KiB, read %d KiB" %
          (name, job["write"]["io_kbytes"], job["read"]["io_kbytes"]))
PY
}

cat >"$T/verify.fio" <<EOF
[global]
ioengine=nbd
uri=${URI[a]}
rw=randwrite
bsrange=4k-64k
bs_unaligned=0
iodepth=16
size=24m
verify=crc32c
verify_fatal=1
verify_backlog=0
do_verify=1
randrepeat=0
group_reporting=0

[job]
numjobs=2
offset=0
offset_increment=32m
EOF

step "fio: 2 jobs x 24 MiB random writes, iodepth 16, verify=crc32c"
rc=0
# fio saves verify state files in its working directory: keep them in $T.
(cd "$T" && fio --output-format=json --output="$T/verify.json" "$T/verify.fio") || rc=$?
((rc == 0)) ||
	fail "fio exited with $rc: $(grep -v '^ ' "$T/verify.json" | head -n 20)"
check_fio "$T/verify.json"

# The same ranges again (so every block is overwritten), now with reads
# that verify each batch of 16 writes while the writes go on.
cat >"$T/backlog.fio" <<EOF
[global]
ioengine=nbd
uri=${URI[a]}
rw=randwrite
bs=4k
iodepth=8
size=16m
verify=crc32c
verify_fatal=1
verify_backlog=16
do_verify=1
randrepeat=0

[job]
numjobs=2
offset=0
offset_increment=32m
EOF

step "fio: 2 jobs overwrite, verify_backlog=16, iodepth 8"
rc=0
(cd "$T" && fio --output-format=json --output="$T/backlog.json" "$T/backlog.fio") || rc=$?
((rc == 0)) ||
	fail "fio exited with $rc: $(grep -v '^ ' "$T/backlog.json" | head -n 20)"
check_fio "$T/backlog.json"

step "8 connections race on 512-byte slots of the same pages (no lost updates)"
python3 "$ITEST_DIR/nbd_bad_client.py" --socket "${SOCK[a]}" \
	--start $((40 * 1024 * 1024)) subpage-race || fail "nbd_bad_client.py subpage-race failed (see above)"

step "the server survived and stops cleanly"
stop_server a
