# SPDX-License-Identifier: MIT
# guest-swap.sh - the body of the swap tests (v30 on NBD, v32 on ublk),
# sourced by each after it set SWAP_TRANSPORT (nbd or ublk); what it does
# is in v30-swap.sh's header.
source /guest-lib.sh

# Knobs (VMT_* from the host, tests/vm/run.sh): the workload (seq: hog.c,
# every page in order; random: rhog.c, two processes rewriting random
# pages; stress: stress-ng's vm stressors, stress_run below; a test may
# set SWAP_WORKLOAD), the hog's size, which of the two
# runs (zram, uzram or both), the swap devices' size (a test may set
# SWAP_SIZE), vm.page-cluster (the
# kernel's default, 3, unless set), and extra options of `uzram serve` (a
# test may set SWAP_SERVE_OPTS) and of nbd-client, and the algorithms of
# the zram runs (VMT_ZRAM_ALGS, lz4 unless set: "lz4 zstd" runs zram twice),
# and how uzram is set up (VMT_SWAP_VIA: serve, the server by hand, by
# default; swapon, `uzram swapon` as a user runs it, with its keeper).
workload=${VMT_SWAP_WORKLOAD:-${SWAP_WORKLOAD:-seq}}
case $workload in
random) hog_mib=${VMT_HOG_MIB:-640} ;;
stress) hog_mib=${VMT_HOG_MIB:-512} ;;
*) hog_mib=${VMT_HOG_MIB:-768} ;;
esac
[[ -n ${VMT_PAGE_CLUSTER:-} ]] && sysctl -q -w vm.page-cluster="$VMT_PAGE_CLUSTER"
info "workload $workload, $hog_mib MiB, vm.page-cluster $(cat /proc/sys/vm/page-cluster), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
runs=${VMT_SWAP_RUNS:-zram uzram}
swap_size=${VMT_SWAP_SIZE:-${SWAP_SIZE:-896M}}
serve_opts=${VMT_SERVE_OPTS:-${SWAP_SERVE_OPTS:-}}
nbd_opts=${VMT_NBD_OPTS:-}
passes=1
sysctl -q -w vm.min_free_kbytes=16384
sysctl -q -w vm.swappiness=100
sysctl -q -w kernel.hung_task_timeout_secs=30
sysctl -q -w kernel.sysrq=1

vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }

# Clock ticks: the guest's CPUs busy (/proc/stat's first line, all but
# idle and iowait), and a process's own and its threads' (utime + stime).
busy_ticks() { awk 'NR == 1 { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
pid_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
kswapd_pid() { grep -lx kswapd0 /proc/[0-9]*/comm 2>/dev/null | head -n 1 | cut -d/ -f3; }
# "TID NAME TICKS" for each thread of process $1
thread_ticks()
{
	local t
	for t in /proc/"$1"/task/*; do
		echo "${t##*/} $(cat "$t/comm" 2>/dev/null | tr -d ' ') $(pid_ticks "$1/task/${t##*/}")"
	done
}
ticks_s() { awk -v t="$1" -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" 'BEGIN { printf "%.1f", t / hz }'; }

# stress-ng's vm stressors (stress: SWAP_STRESS_WORKERS of them, hog_mib
# MiB between them, every method in turn, each checking what it wrote:
# --verify), as a user tries a swap device. A fixed amount of work,
# SWAP_STRESS_OPS bogo ops in all, so the time compares: the methods run
# in a fixed order, each call one method over the buffer, and each counts
# its own unit (a chunk, a page, a word), so a timed run's op count says
# which methods it reached, not how fast it went. With
# SWAP_STRESS_SECONDS instead (make test), a timed run: it checks, and
# its time is its own. A worker the OOM killer ends is not started again
# (--oomable), and fails the run: stress-ng's own status does not say
# so, the kernel's log does.
stress_run()
{
	local name=$1 n=${VMT_STRESS_WORKERS:-${SWAP_STRESS_WORKERS:-2}} rc kills0 work
	local secs=${VMT_STRESS_SECONDS:-${SWAP_STRESS_SECONDS:-}}
	if [[ -n $secs ]]; then
		work=(--timeout "${secs}s")
	else
		work=(--vm-ops "${VMT_STRESS_OPS:-${SWAP_STRESS_OPS:-400000}}" --timeout 1450s)
	fi
	kills0=$(dmesg | grep -c 'Out of memory: Killed process')
	bounded 1500 stress-ng --vm "$n" --vm-bytes "$((hog_mib / n))M" --vm-keep \
		--vm-method all --verify --oomable --metrics-brief "${work[@]}" \
		> /tmp/stress.$name 2>&1
	rc=$?
	cat /tmp/stress.$name
	figure "$name-bogo-ops" "$(awk '$4 == "vm" { print $5 }' /tmp/stress.$name)" ops
	if (($(dmesg | grep -c 'Out of memory: Killed process') > kills0)); then
		echo "stress_run: the OOM killer ended a worker"
		dmesg | grep 'Out of memory: Killed process' | tail -n 2
		((rc)) || rc=1
	fi
	return $rc
}

# run_hog NAME: the hog with its figures; 0 if every page read back right.
# Where the CPU went over its run, in CPU seconds: all of the guest's
# CPUs busy, kswapd (which compresses for zram), uzram's server (all its
# threads); what is left is the hog and the kernel's work in its context.
run_hog()
{
	local name=$1 in0 out0 t0 rc secs in out b0 k0 u0 kp thp0 thpf0 sdev rq0 rq r0 w0 r1 w1
	in0=$(vmstat pswpin); out0=$(vmstat pswpout)
	# the swap device's requests (/sys/block/DEV/stat: reads and writes
	# completed): pages per request, as a ublk or NBD server pays per
	# request and zram per page
	sdev=$(awk 'NR == 2 { sub(".*/", "", $1); print $1 }' /proc/swaps)
	rq0=$(awk '{ print $1, $5 }' "/sys/block/$sdev/stat" 2>/dev/null || echo 0 0)
	thp0=$(vmstat thp_swpout); thpf0=$(vmstat thp_swpout_fallback)
	kp=$(kswapd_pid)
	b0=$(busy_ticks); k0=$(pid_ticks "$kp"); u0=$(pid_ticks "${UZRAM_PID:-0}")
	[[ $name == uzram ]] && thread_ticks "$UZRAM_PID" >/tmp/threads.0
	t0=$(now)
	if [[ $workload == random ]]; then
		bounded 1500 rhog "$hog_mib" /data/heap-python.core 2 1 > /tmp/hog.$name 2>&1
	elif [[ $workload == stress ]]; then
		stress_run $name > /tmp/hog.$name 2>&1
	else
		bounded 1500 hog "$hog_mib" /data/heap-python.core $passes > /tmp/hog.$name 2>&1
	fi
	rc=$?
	secs=$(elapsed "$t0")
	in=$(($(vmstat pswpin) - in0)); out=$(($(vmstat pswpout) - out0))
	cat /tmp/hog.$name
	if ((rc == 0)); then
		pass "hog-$name" "$hog_mib MiB in ${secs} s"
	else
		fail "hog-$name" "status $rc after ${secs} s: $(tail -n 1 /tmp/hog.$name)"
	fi
	figure "$name-seconds" "$secs" s
	figure "$name-pswpin" "$in" pages
	figure "$name-pswpout" "$out" pages
	rq=$(awk '{ print $1, $5 }' "/sys/block/$sdev/stat" 2>/dev/null || echo 0 0)
	read -r r0 w0 <<<"$rq0"; read -r r1 w1 <<<"$rq"
	figure "$name-read-requests" "$((r1 - r0))" requests
	figure "$name-write-requests" "$((w1 - w0))" requests
	info "$name: $(awk -v i=$in -v o=$out -v r=$((r1 - r0)) -v w=$((w1 - w0)) 'BEGIN {
		printf "%.2f pages a read request, %.2f a write request", r ? i / r : 0, w ? o / w : 0 }')"
	# huge pages swapped out whole, and those split first (zram takes
	# them whole; whether a ublk or NBD device does is the kernel's call)
	figure "$name-thp_swpout" "$(($(vmstat thp_swpout) - ${thp0:-0}))" folios
	figure "$name-thp_swpout_fallback" "$(($(vmstat thp_swpout_fallback) - ${thpf0:-0}))" folios
	figure "$name-swapin-rate" "$(awk -v n=$in -v s=$secs 'BEGIN { printf "%.0f", n / s }')" pages/s
	figure "$name-swapout-rate" "$(awk -v n=$out -v s=$secs 'BEGIN { printf "%.0f", n / s }')" pages/s
	figure "$name-cpu-busy" "$(ticks_s $(($(busy_ticks) - b0)))" s
	figure "$name-cpu-kswapd" "$(ticks_s $(($(pid_ticks "$kp") - k0)))" s
	if [[ $name == uzram ]]; then
		figure "$name-cpu-server" "$(ticks_s $(($(pid_ticks "$UZRAM_PID") - u0)))" s
		info "the server's threads, CPU seconds over the run: $(thread_ticks "$UZRAM_PID" |
			awk -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" \
			'NR == FNR { t0[$1] = $3; next }
			 { printf "%s %.1f, ", $2, ($3 - t0[$1]) / hz }' /tmp/threads.0 -)"
	fi
	return $rc
}

# Discard requests the block device DEV completed, and their sectors
# (/sys/block/DEV/stat's fields 12 and 14): what the kernel told the device.
discards() { awk '{ print $12, $14 }' "/sys/block/${1#/dev/}/stat"; }
swap_used() { awk 'NR > 1 { u += $4 } END { print u * 1024 }' /proc/swaps; }

# after_hog NAME DEV STORED_CMD: what the device still holds once the hog
# exited: swap in use, pages stored, discards; then, for the random
# workload or with VMT_SWAP_RECLAIM set, again after the kernel was asked
# to reclaim (memory.reclaim of the root cgroup), which drops the swap
# cache's clean pages and frees their slots.
after_hog()
{
	local name=$1 dev=$2 d
	shift 2
	sleep 2
	d=$(discards "$dev")
	figure "$name-after-swap_used" "$(swap_used)" bytes
	figure "$name-after-pages_stored" "$("$@")" pages
	figure "$name-after-discards" "${d% *}" requests
	figure "$name-after-discarded" "$((${d#* } / 8))" pages
	# make test's sequential runs skip the reclaim: it swaps out what is left
	[[ $workload == random || -n ${VMT_SWAP_RECLAIM:-} ]] || return 0
	grep -q " /sys/fs/cgroup cgroup2 " /proc/mounts ||
		mount -t cgroup2 none /sys/fs/cgroup 2> /dev/null
	echo 1G > /sys/fs/cgroup/memory.reclaim 2> /dev/null
	sleep 2
	d=$(discards "$dev")
	figure "$name-reclaimed-swap_used" "$(swap_used)" bytes
	figure "$name-reclaimed-pages_stored" "$("$@")" pages
	figure "$name-reclaimed-discards" "${d% *}" requests
}
zram_stored() { awk '{ print int($1 / 4096) }' /sys/block/zram0/mm_stat; }

# memwatch SOCK: every 20 s, one line of where the guest's memory is: swap
# in use, what the server stores and holds (stale pages are stored ones
# that swap no longer uses).
memwatch()
{
	local used st
	while sleep 20; do
		used=$(awk 'NR > 1 { u += $4 } END { print u * 1024 }' /proc/swaps)
		st=$(uzram stat --socket "$1" --all | awk '$1 ~ /^(pages_stored|compr_data_size|mem_used_total|requests_trim|failed_writes|refill_waits|refill_misses|pool_cached)$/ { printf " %s=%s", $1, $2 }')
		info "memwatch swap_used=$used$st $(awk '$1 ~ /^(VmRSS|VmLck|RssAnon|RssFile|RssShmem):$/ { printf " %s=%s", $1, $2 }' /proc/$UZRAM_PID/status)" \
			"free_kb=$(awk '/MemFree/ {print $2}' /proc/meminfo) avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)"
	done
}

# zramwatch: every 20 s, what zram holds (mm_stat: data stored, its
# compressed size, memory in use, same-filled and huge pages), beside
# swap in use, as memwatch prints the server's.
zramwatch()
{
	while sleep 20; do
		info "zramwatch swap_used=$(swap_used) $(awk '{ printf "pages_stored=%d compr_data_size=%s mem_used_total=%s same_pages=%s huge_pages=%s", $1 / 4096, $2, $3, $6, $8 }' /sys/block/zram0/mm_stat)" \
			"free_kb=$(awk '/MemFree/ {print $2}' /proc/meminfo) avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)"
	done
}

# 1. the kernel's zram, once per algorithm of VMT_ZRAM_ALGS (lz4 unless
# set; each other than lz4 names its figures zram_ALG-*, as zram_zstd-*)
zram_run()
{
	local alg=$1 name=zram
	[[ $alg == lz4 ]] || name=zram_$alg
	if echo "$alg" > /sys/block/zram0/comp_algorithm && echo $swap_size > /sys/block/zram0/disksize &&
		mkswap /dev/zram0 > /dev/null && swapon -p 10 /dev/zram0; then
		pass $name-swapon
		zramwatch &
		local zw=$!
		run_hog $name
		kill $zw
		after_hog $name /dev/zram0 zram_stored
		# mm_stat: orig_data_size compr_data_size mem_used_total mem_limit mem_used_max ...
		figure $name-mem_used_max "$(awk '{print $5}' /sys/block/zram0/mm_stat)" bytes
		check $name-swapoff bounded 300 swapoff /dev/zram0
		echo 1 > /sys/block/zram0/reset
	else
		fail $name-swapon "zram swap with $alg could not be set up"
	fi
}
if [[ " $runs " != *" zram "* ]]; then
	info "zram run skipped (VMT_SWAP_RUNS=$runs)"
else
	for alg in ${VMT_ZRAM_ALGS:-lz4}; do
		zram_run "$alg"
	done
fi

# 2. uzram, its server in this guest: /dev/nbd0 attached by the kernel's
# NBD client, or the server's own /dev/ublkbN
s=/run/swap.sock
if [[ " $runs " != *" uzram "* ]]; then
	info "uzram run skipped (VMT_SWAP_RUNS=$runs)"
	finish
fi
# VMT_SWAP_VIA=swapon: the user's path instead, `uzram swapon` (its
# keeper, whose probe the servers share, and its settings but the size
# and SWAP_SERVE_OPTS); else the server by hand, mkswap and swapon
via=${VMT_SWAP_VIA:-serve}
err=/run/swap.err
swap_ok=false
if [[ $via == swapon ]]; then
	# shellcheck disable=SC2086
	if bounded 120 uzram swapon --size "$swap_size" --transport "$SWAP_TRANSPORT" \
		$serve_opts > /run/swap.out 2>&1; then
		pass uzram-swapon
		swap_ok=true
		dev=$(awk '$1 ~ /^\/dev\/(ublkb|nbd)[0-9]+$/ { print $1 }' /proc/swaps)
		f=/run/uzram/swap/${dev#/dev/}
		s=$f.sock
		err=$f.log
		# the keeper's server, or the server itself where there is none
		UZRAM_PID=$(sed -n 's/^uzram serve: --keeper: the server is pid //p' "$err" | tail -n 1)
		[[ -n $UZRAM_PID ]] || UZRAM_PID=$(cat "$f.pid")
		info "uzram swapon: $dev, server $UZRAM_PID: $(tr '\n' ';' < /run/swap.out)"
	else
		fail uzram-swapon "$(cat /run/swap.out)"
	fi
else
	# the server hears of the slots the kernel frees (swapfree/): on ublk
	# of its own device, over NBD of the one nbd-client attaches
	transport_opts=(--freed-slots /dev/nbd0)
	[[ $SWAP_TRANSPORT == ublk ]] && transport_opts=(--ublk)
	# shellcheck disable=SC2086
	if uzram_start swap --swap --size "$swap_size" "${transport_opts[@]}" $serve_opts; then
		pass uzram-serve
	else
		fail uzram-serve "$(cat /run/swap.err)"
		finish
	fi
	if [[ $SWAP_TRANSPORT == ublk ]]; then
		dev=$(sed -n 's/^uzram serve: block device //p' /run/swap.out)
		check ublk-device test -b "$dev"
	else
		dev=/dev/nbd0
		# shellcheck disable=SC2086
		check nbd-attach nbd_attach $dev $s -b 4096 -swap -timeout 120 $nbd_opts
	fi
	if mkswap "$dev" > /dev/null && swapon --discard=pages -p 10 "$dev"; then
		pass uzram-swapon
		swap_ok=true
	else
		fail uzram-swapon "mkswap or swapon on $dev"
	fi
fi
if $swap_ok; then
	swapwatch 30 "$UZRAM_PID" &
	watch_pid=$!
	memwatch $s &
	mem_pid=$!
	q=/sys/block/${dev#/dev/}/queue
	info "$dev: rotational $(cat $q/rotational), discard_granularity $(cat $q/discard_granularity)," \
		"discard_max_bytes $(cat $q/discard_max_bytes), read_ahead_kb $(cat $q/read_ahead_kb);" \
		"$(dmesg | grep "Adding .* on $dev" | tail -n 1)"
	run_hog uzram
	kill "$watch_pid" "$mem_pid"
	figure uzram-mem_used_max "$(stat_field $s mem_used_max)" bytes
	# the server's peak resident memory: the store and all it holds besides
	figure uzram-VmHWM "$(awk '$1 == "VmHWM:" { print $2 * 1024 }' /proc/$UZRAM_PID/status)" bytes
	after_hog uzram "$dev" stat_field $s pages_stored
	# with the freed slots heard, the server stores what swap uses (less
	# its zero pages) and the last second's frees, where without them it
	# kept a copy of nearly every page ever swapped
	# Debian's 6.1, 6.12 and 7.3 all have a point for the probe: a server
	# that does not hear of freed slots is a regression, not the kernel's
	check uzram-hears-freed-slots grep -q "the swap slots the kernel frees" "$err"
	if grep -q "the swap slots the kernel frees" "$err"; then
		stored=$(stat_field $s pages_stored)
		used=$(($(swap_used) / 4096))
		info "after the hog: $stored pages stored, $used in swap"
		check uzram-no-stale-copies test "$stored" -le $((used + 2048))
	else
		info "the server does not hear of freed slots: $(grep -m1 'freed swap slots' "$err")"
	fi
	figure uzram-failed_writes "$(stat_field $s failed_writes)" requests
	# writes found equal to what their slot held (store.c's check, which
	# costs each write an XXH3): whether swap ever meets one
	figure uzram-pages_unchanged "$(stat_field $s pages_unchanged)" pages
	# the no-fault pool (serve_swap.c): writes that waited for the refill
	# thread, and those of them that failed (the kernel retries them)
	figure uzram-refill_waits "$(stat_field $s refill_waits)" requests
	figure uzram-refill_misses "$(stat_field $s refill_misses)" requests
	figure uzram-refill_wait_ns "$(stat_field $s refill_wait_ns)" ns
	# stores and frees that waited for a size class's lock, and how long
	figure uzram-class_lock_waits "$(stat_field $s class_lock_waits)" waits
	figure uzram-class_lock_wait_ns "$(stat_field $s class_lock_wait_ns)" ns
	if [[ $via == swapon ]]; then
		check uzram-swapoff bounded 300 uzram swapoff
	else
		check uzram-swapoff bounded 300 swapoff "$dev"
	fi
fi
[[ $SWAP_TRANSPORT == nbd && $via != swapon ]] && check nbd-detach bounded 30 nbd-client -d /dev/nbd0
info "the server's messages:"
tail -n 20 "$err"
[[ $via == swapon ]] || uzram_stop
finish
