# SPDX-License-Identifier: MIT
# v52-path-cost.sh - what one 4 KiB request costs the guest's CPUs on the
# kernel's zram and on `uzram serve --ublk` in the same boot (issue 30
# item 4: where the time goes): fio, one job at queue depth 1 (as a task
# that faults a page in waits for it), O_DIRECT on each device, first
# with zero pages (both devices keep a page of zeros without a codec: the
# request's path alone), then with pages half of which compress (the
# path and the codec); then the same at queue depth 16, as swap-outs come
# in batches. For each run: requests a second, and the guest's
# busy CPU time (both vCPUs, /proc/stat) per request, which is what a
# swap workload on two busy vCPUs pays for each page moved. A bench, not
# a test: `make test-vm-path-cost` (VM_KERNEL=trixie-backports for 7.3).
# vm-kernel: 6.12
# vm-mem: 1024
# vm-timeout: 900
# vm-modules: ublk_drv zram lz4 zstd
# vm-programs: fio
source /guest-lib.sh

ALGS=${VMT_PATH_ALGS:-lz4 zstd}
IOS=${VMT_PATH_IOS:-32768}      # requests per run (128 MiB of 4 KiB)

busy() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }     # to 10 ms (the guest's date has no %N)
hz=100                  # USER_HZ: /proc/stat's and /proc/PID/stat's unit

# run DEV LABEL RW DATA [QD]: one fio run; prints its line and a FIGURE
run()
{
	local dev=$1 label=$2 rw=$3 data=$4 qd=${5:-1} b0 b1 t0 t1 args=()
	case $data in
	zero) args=(--zero_buffers=1) ;;
	half) args=(--buffer_compress_percentage=50 --buffer_compress_chunk=4096 --refill_buffers=1) ;;
	esac
	((qd == 1)) && args+=(--ioengine=psync) || args+=(--ioengine=libaio --iodepth="$qd")
	b0=$(busy); t0=$(uptime_s)
	bounded 600 fio --name=p --filename="$dev" --direct=1 \
		--bs=4k --rw="$rw" --size=64M --io_size=$((IOS * 4))k --norandommap=1 \
		--randrepeat=1 --eta=never --output-format=terse --terse-version=3 \
		"${args[@]}" >/tmp/fio.out 2>&1 || { fail "$label-$rw-$data" "$(tail -3 /tmp/fio.out)"; return; }
	t1=$(uptime_s); b1=$(busy)
	awk -F';' -v l="$label" -v rw="$rw" -v d="$data" -v b=$((b1 - b0)) -v hz="$hz" \
		-v t0="$t0" -v t1="$t1" -v n="$IOS" -v qd="$qd" 'NR == 1 {
		printf "# %-12s %-9s %-4s qd %-2d %8.0f req/s, %7.1f us busy a request (%.2f s)\n",
			l, rw, d, qd, n / (t1 - t0), b / hz * 1e6 / n, t1 - t0 }' /tmp/fio.out
	figure "$label-$rw-$data-qd$qd-us" "$(awk -v b=$((b1 - b0)) -v hz="$hz" -v n="$IOS" \
		'BEGIN { printf "%.1f", b / hz * 1e6 / n }')" "us busy a request"
}

# each DEV LABEL: the four runs on a fresh device
each()
{
	local d
	for d in zero half; do
		run "$1" "$2" write "$d"        # fills the 64 MiB
		run "$1" "$2" randwrite "$d"
		run "$1" "$2" randread "$d"
		run "$1" "$2" randwrite "$d" 16  # as kswapd writes a batch out
		run "$1" "$2" randread "$d" 16
	done
}

for alg in $ALGS; do
	check zram-$alg bash -c "modprobe zram num_devices=1 2>/dev/null; \
		echo 1 > /sys/block/zram0/reset && echo $alg > /sys/block/zram0/comp_algorithm && \
		echo 256M > /sys/block/zram0/disksize"
	each /dev/zram0 "zram-$alg"
	echo 1 > /sys/block/zram0/reset

	if ! uzram_start u-$alg --ublk --size 256M --algorithm "$alg" ${VMT_SERVE_OPTS:-}; then
		fail "uzram-$alg" "the server did not start"
		continue
	fi
	dev=$(sed -n 's/^uzram serve: block device //p' "/run/u-$alg.out")
	each "$dev" "uzram-$alg"
	info "server CPU: $(awk '{ printf "%.1f s", ($14 + $15) / '"$hz"' }' /proc/$UZRAM_PID/stat)"
	uzram_stop
done
finish
