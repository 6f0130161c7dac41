# SPDX-License-Identifier: MIT
# guest-lib.sh - sourced by a VM bench test inside the guest (bash).
#
# A test prints its outcome as RESULT lines on the console, which run.sh
# reads on the host:
#
#   RESULT <test>/<check> PASS [what was seen]
#   RESULT <test>/<check> FAIL <what failed>
#   FIGURE <test>/<name> <value> <unit>   a measured figure, for the report
#
# check NAME CMD...   runs CMD; PASS or FAIL with NAME. Never exits.
# pass NAME [MSG] / fail NAME MSG     print one line; fail also counts.
# watch_steps                         from now on, 120 s without a step
#                                     (each RESULT, FIGURE or # line is one)
#                                     has hungwatch put the tasks and memory
#                                     on the console
# step                                a step without a line
# bounded SECONDS CMD...              CMD under timeout -s KILL; its status,
#                                     124+13 (137) when it was killed
# uzram_start NAME ARGS...            `uzram serve --socket /run/NAME.sock
#                                     ARGS` in the background, ready when it
#                                     returns; $UZRAM_PID
# nbd_attach DEV SOCK [ARGS...]       nbd-client on the server's Unix socket
#                                     (the default export), bounded
# stat_field SOCK FIELD              one figure of `uzram stat --all`
# uzram_stop                          SIGTERM to $UZRAM_PID; checks it exits 0
#                                     within 30 s (check server-exit)
# proc_memory PID                     '# mem' lines: the process's resident,
#                                     locked, anonymous, file and shmem
#                                     kB (status), then each mapping of
#                                     over 256 kB resident (smaps)
# A test ends with `finish`: exit status 0 if no check failed.
#
# The environment: $VM_TEST (the test's name), /data (the test's vm-data
# files), the uzram program on PATH.

set -uo pipefail
failures=0

# each line a test prints is a step; after watch_steps, hungwatch reports
# the test when it has made none for two minutes (tests/vm/hungwatch.c)
watch_steps() { : > /run/vm-steps; }
step() { [ ! -e /run/vm-steps ] || echo >> /run/vm-steps; }
pass() { echo "RESULT $VM_TEST/$1 PASS${2:+ $2}"; step; }
fail() { echo "RESULT $VM_TEST/$1 FAIL ${2:-}"; failures=$((failures + 1)); step; }
figure() { echo "FIGURE $VM_TEST/$1 $2 ${3:-}"; step; }
info() { echo "# $*"; step; }

check()
{
	local name=$1; shift
	if "$@"; then pass "$name"; else fail "$name" "status $?: $*"; fi
}

bounded()
{
	local s=$1; shift
	timeout -s KILL "$s" "$@"
}

uzram_start()
{
	local name=$1 i; shift
	rm -f "/run/$name.sock"
	uzram serve --socket "/run/$name.sock" "$@" > "/run/$name.out" 2> "/run/$name.err" &
	UZRAM_PID=$!
	for i in $(seq 100); do
		[[ -S /run/$name.sock ]] && grep -q ready "/run/$name.out" 2>/dev/null && return 0
		kill -0 "$UZRAM_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "uzram serve $* did not become ready:" >&2
	cat "/run/$name.err" >&2
	return 1
}

nbd_attach()
{
	local dev=$1 sock=$2; shift 2
	bounded 30 nbd-client -unix "$sock" "$dev" "$@"
}

stat_field()
{
	uzram stat --socket "$1" --all | awk -v f="$2" '$1 == f { print $2 }'
}

# On the way out, even after a failed check: every NBD device detached,
# every server of the test stopped. (A test killed by its time limit skips
# this; /init sweeps the same way after each test.)
vm_cleanup()
{
	local d
	for d in /sys/block/nbd*; do
		[[ -e $d/pid ]] && bounded 30 nbd-client -d "/dev/${d##*/}" > /dev/null 2>&1
	done
	for d in $(jobs -p); do kill -KILL "$d" 2> /dev/null; done
	return 0
}
trap vm_cleanup EXIT

uzram_stop()
{
	local i
	kill -TERM "$UZRAM_PID"
	for i in $(seq 300); do
		kill -0 "$UZRAM_PID" 2> /dev/null || break
		sleep 0.1
	done
	if kill -0 "$UZRAM_PID" 2> /dev/null; then
		fail server-exit "uzram serve still runs 30 s after SIGTERM"
		kill -KILL "$UZRAM_PID"
	fi
	wait "$UZRAM_PID"
	check server-exit test $? -eq 0
}

proc_memory()
{
	info "mem pid $1 ($(tr '\0' ' ' < /proc/$1/cmdline | cut -c1-60)):" \
		$(awk '/^(VmRSS|VmLck|RssAnon|RssFile|RssShmem|VmStk):/ { printf "%s %s ", $1, $2 }' /proc/$1/status) \
		"threads $(ls /proc/$1/task | wc -l)"
	awk '/^[0-9a-f]+-[0-9a-f]+ / { name = NF >= 6 ? $6 : "[anon]"; perm = $2 }
		/^Size:/ { size = $2 } /^Rss:/ { rss = $2 } /^Locked:/ { lck = $2 }
		/^VmFlags:/ { if (rss > 256) printf "# mem   %6d kB rss of %6d, lo %s %s %s\n", rss, size, / lo( |$)/ ? "y" : "n", perm, name }' /proc/$1/smaps
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

finish()
{
	if ((failures)); then
		echo "# $VM_TEST: $failures check(s) failed"
		exit 1
	fi
	exit 0
}
