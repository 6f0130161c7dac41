#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fs-rtt.sh - the round trip of uzram's own file system (make bench-fs-rtt,
# as root): build/fs-rtt's stat and create on a tmpfs, and on two mounts
# side by side, the request loop blocking (UZRAM_FS_SPIN=0) and spinning
# (the default; fs/reqloop.c), each with the program and the keeper free,
# on one CPU (both pinned on CPU 0) and on two (the keeper on CPU 1).
# ROUNDS (2) rounds, N (2000) operations each. Needs 2 CPUs or more.
set -euo pipefail

UZRAM=$(realpath "${UZRAM:-build/uzram}")
RTT=$(realpath "${RTT:-build/fs-rtt}")
ROUNDS=${ROUNDS:-2}
N=${N:-2000}
((EUID == 0)) || { echo "bench/fs-rtt.sh: run as root" >&2; exit 1; }
(($(nproc) >= 2)) || { echo "bench/fs-rtt.sh: needs 2 CPUs" >&2; exit 1; }

W=$(mktemp -d /tmp/uzram-bench-rtt.XXXXXX)
export UZRAM_RUNTIME_DIR=$W/run
mkdir -p "$W/tmpfs" "$W/spin0" "$W/spin"
mkdir -m 700 "$W/run"
cleanup()
{
	set +e
	for d in spin0 spin; do
		grep -qF " $W/$d " /proc/self/mountinfo && "$UZRAM" umount "$W/$d"
	done
	grep -qF " $W/tmpfs " /proc/self/mountinfo && umount "$W/tmpfs"
	rm -rf "$W"
}
trap cleanup EXIT
mount -t tmpfs tmpfs "$W/tmpfs"
UZRAM_FS_SPIN=0 "$UZRAM" mount "$W/spin0" --via fs --size 256M
"$UZRAM" mount "$W/spin" --via fs --size 256M
keeper() { cat "$(dirname "$(grep -lxF "$1" "$W"/run/m-*/dir)")/pid"; }

echo "bench/fs-rtt.sh: $N operations a round, $ROUNDS rounds; $(uptime)"
for ((i = 0; i < ROUNDS; i++)); do
	for place in free one-cpu two-cpus; do
		for d in tmpfs spin0 spin; do
			k= pin=()
			[[ $d == tmpfs ]] || k=$(keeper "$W/$d")
			case $place in
			one-cpu) pin=(taskset -c 0); [[ -z $k ]] || taskset -p 1 "$k" >/dev/null ;;
			two-cpus) pin=(taskset -c 0); [[ -z $k ]] || taskset -p 2 "$k" >/dev/null ;;
			esac
			for op in stat create; do
				printf '%-8s %-6s %s\n' "$place" "$d" "$("${pin[@]}" "$RTT" "$W/$d" $op "$N")"
			done
			rm -f "$W/$d"/rtt.*
			[[ -z $k ]] || taskset -p "$(printf %x $(((1 << $(nproc)) - 1)))" "$k" >/dev/null
		done
	done
done
echo "bench/fs-rtt.sh: done; $(uptime)"
