# SPDX-License-Identifier: MIT
# v36-nbd-swap-ab.sh - issue 30 item 4: where the time of swap over NBD
# goes, and settings of the NBD path compared in one boot.
#
# The sequential hog of v30 (tests/vm/hog.c, VMT_HOG_MIB, 576 MiB by
# default) once on the guest's zram, then once per variant of
# VMT_NBD_VARIANTS (space-separated; each a comma-separated list of
# key=value, or "default"): sched=none|mq-deadline (nbd0's scheduler),
# wbt=USEC (its wbt_lat_usec, 0: no writeback throttling), nr=N (its
# nr_requests), conns=N (nbd-client -connections), pc=N (vm.page-cluster),
# serve=OPT+OPT (extra options of uzram serve, + for a space). Each run
# under tests/vm/tsample.c (states and wait channels every 200 ms, and
# per thread CPU time, run-queue wait and context switches), with the
# device's request counts and sizes from /sys/block/nbd0/stat.
# vm-mem: 384
# vm-cpus: 2
# vm-timeout: 3000
# vm-modules: nbd zram lz4
# vm-programs: hog tsample
# vm-data: heap-python.core:64:8
source /guest-lib.sh

hog_mib=${VMT_HOG_MIB:-576}
variants=${VMT_NBD_VARIANTS:-default}
runs=${VMT_SWAP_RUNS:-zram uzram}
swap_size=896M
sysctl -q -w vm.min_free_kbytes=16384
sysctl -q -w vm.swappiness=100
sysctl -q -w kernel.hung_task_timeout_secs=60
pc0=$(cat /proc/sys/vm/page-cluster)
vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
info "load: $(cat /proc/loadavg); variants: $variants"

# run_hog NAME DEV: the hog under tsample, with its figures
run_hog()
{
	local name=$1 dev=$2 in0 out0 t0 rc secs st0 st1 tpid
	in0=$(vmstat pswpin); out0=$(vmstat pswpout)
	st0=$(cat /sys/block/${dev#/dev/}/stat)
	tsample 200 /sys/block/${dev#/dev/}/inflight > /tmp/ts.$name &
	tpid=$!
	t0=$(now)
	bounded 1500 hog "$hog_mib" /data/heap-python.core 1 > /tmp/hog.$name 2>&1
	rc=$?
	secs=$(elapsed "$t0")
	kill -TERM $tpid; wait $tpid
	st1=$(cat /sys/block/${dev#/dev/}/stat)
	cat /tmp/hog.$name /tmp/ts.$name
	# stat: rd_ios rd_merges rd_sect rd_ticks wr_ios wr_merges wr_sect wr_ticks
	echo "$st0" "$st1" | awk -v n="$name" '{
		for (i = 1; i <= 17; i++) d[i] = $(i + 17) - $i
		printf "# %s: reads %d (%.1f KiB avg, %.2f ms avg), writes %d (%.1f KiB avg, %.2f ms avg), discards %d\n",
			n, d[1], d[1] ? d[3] / 2 / d[1] : 0, d[1] ? d[4] / d[1] : 0,
			d[5], d[5] ? d[7] / 2 / d[5] : 0, d[5] ? d[8] / d[5] : 0, d[12] }'
	((rc == 0)) && pass "hog-$name" "$hog_mib MiB in ${secs} s" ||
		fail "hog-$name" "status $rc after ${secs} s"
	figure "$name-seconds" "$secs" s
	figure "$name-pswpin" "$(($(vmstat pswpin) - in0))" pages
	figure "$name-pswpout" "$(($(vmstat pswpout) - out0))" pages
	info "load after $name: $(cat /proc/loadavg)"
}

if [[ " $runs " == *" zram "* ]]; then
	echo lz4 > /sys/block/zram0/comp_algorithm
	echo $swap_size > /sys/block/zram0/disksize
	mkswap /dev/zram0 > /dev/null && swapon -p 10 /dev/zram0
	run_hog zram /dev/zram0
	check zram-swapoff bounded 300 swapoff /dev/zram0
	echo 1 > /sys/block/zram0/reset
fi

# uzram_variant SPEC
uzram_variant()
{
	local spec=$1 kv k v sched= wbt= nr= conns= pc=$pc0 serve=() s=/run/ab.sock q name
	name=nbd-${spec//[,=]/-}
	for kv in ${spec//,/ }; do
		k=${kv%%=*}; v=${kv#*=}
		case $k in
		sched) sched=$v ;; wbt) wbt=$v ;; nr) nr=$v ;; conns) conns=$v ;;
		pc) pc=$v ;; serve) serve=(${v//+/ }) ;;
		esac
	done
	sysctl -q -w vm.page-cluster="$pc"
	uzram_start ab --swap --size $swap_size "${serve[@]}" || { fail "$name-serve" "$(cat /run/ab.err)"; return; }
	check "$name-attach" nbd_attach /dev/nbd0 $s -b 4096 -swap -timeout 120 ${conns:+-connections $conns}
	q=/sys/block/nbd0/queue
	[[ -n $sched ]] && echo "$sched" > $q/scheduler
	[[ -n $nr ]] && echo "$nr" > $q/nr_requests
	[[ -n $wbt ]] && echo "$wbt" > $q/wbt_lat_usec
	info "$name: scheduler $(cat $q/scheduler), nr_requests $(cat $q/nr_requests)," \
		"max_sectors_kb $(cat $q/max_sectors_kb), max_hw_sectors_kb $(cat $q/max_hw_sectors_kb)," \
		"max_segments $(cat $q/max_segments), wbt_lat_usec $(cat $q/wbt_lat_usec), rotational $(cat $q/rotational)," \
		"nr_hw_queues $(ls /sys/block/nbd0/mq | wc -l), page-cluster $(cat /proc/sys/vm/page-cluster)"
	mkswap /dev/nbd0 > /dev/null && swapon --discard=pages -p 10 /dev/nbd0
	run_hog "$name" /dev/nbd0
	uzram stat --socket $s --all | sed 's/^/# stat /'
	check "$name-swapoff" bounded 300 swapoff /dev/nbd0
	check "$name-detach" bounded 30 nbd-client -d /dev/nbd0
	# the queue's settings outlive the connection: the defaults again
	echo -1 > $q/wbt_lat_usec
	echo mq-deadline > $q/scheduler
	kill $UZRAM_PID; wait $UZRAM_PID
	sysctl -q -w vm.page-cluster="$pc0"
}

if [[ " $runs " == *" uzram "* ]]; then
	for spec in $variants; do uzram_variant "$spec"; done
fi
finish
