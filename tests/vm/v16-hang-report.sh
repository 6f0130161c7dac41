# SPDX-License-Identifier: MIT
# v16-hang-report.sh - a hang explains itself in the console log: a task
# stuck in D makes the kernel's hung-task detector fire, and the guest's
# hungwatch (tests/vm/hungwatch.c, started by /init in every guest) puts
# the task's stack and the blocked tasks (sysrq w) on the console. The hang
# is made on purpose: a write to /dev/nbd0 whose server is stopped
# (SIGSTOP), and a sync that waits for its writeback in D; with the detector's timeout
# at 5 s for the test, a report must come within 40 s, and the kernel's
# buffer must then hold the stack and sysrq's list. SIGCONT ends the hang,
# and the data reads back. A v42 hang under swap left only the detector's
# first line in the log (the stack prints below the console's level).
# vm-mem: 256
# vm-timeout: 120
# vm-modules: nbd
source /guest-lib.sh

reports() { tail -n 1 /run/hungwatch.reports 2> /dev/null | grep . || echo 0; }
before=$(reports)
check hungwatch-runs bash -c 'pidof hungwatch > /dev/null'
uzram_start hang --size 64M || { fail start "uzram serve did not start"; finish; }
check attach nbd_attach /dev/nbd0 /run/hang.sock -b 4096 -timeout 600
dd if=/dev/urandom of=/tmp/data bs=1M count=4 2> /dev/null
# opened before the server stops: an open rescans the partitions, and
# waits for that killable, which the detector does not report
exec 3<> /dev/nbd0
kill -STOP "$UZRAM_PID"
echo 5 > /proc/sys/kernel/hung_task_timeout_secs
dd if=/tmp/data bs=1M >&3 2> /dev/null
sync &
syncer=$!
for i in $(seq 40); do
	(($(reports) > before)) && break
	sleep 1
done
info "reports of hungwatch: $before before, $(reports) after $i s"
check report-made test "$(reports)" -gt "$before"
echo 60 > /proc/sys/kernel/hung_task_timeout_secs
check stack-in-log bash -c "dmesg | grep -A 30 'blocked for more than' | grep -q 'Call Trace'"
check blocked-tasks-listed bash -c "dmesg | grep -q 'Show Blocked State'"
kill -CONT "$UZRAM_PID"
for i in $(seq 60); do
	kill -0 "$syncer" 2> /dev/null || break
	sleep 1
done
check sync-ends bash -c "! kill -0 $syncer 2> /dev/null"
exec 3>&-
bounded 30 dd if=/dev/nbd0 of=/tmp/back bs=1M count=4 iflag=direct 2> /dev/null
check data-back cmp /tmp/back /tmp/data
check detach bounded 30 nbd-client -d /dev/nbd0
uzram_stop
finish
