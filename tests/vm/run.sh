#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh [-1] TEST... - boot a VM per test (-1: one VM for all of them) and
# report their RESULT lines.
#
# A test is one guest-side bash script, tests/vm/vNN-name.sh, which sources
# /guest-lib.sh and prints RESULT lines (guest-lib.sh). Its header says
# what its guest needs, one "# vm-KEY: VALUE" line each (all optional):
#
#   vm-kernel: 6.1 | 6.12 | trixie-backports
#                             Debian 12's kernel (default), the backports
#                             one (ublk), or Debian 13's newest
#                             (fetch-kernel.sh)
#   vm-mem: MIB               the guest's RAM (default 512)
#   vm-cpus: N                (default 2)
#   vm-timeout: SECONDS       the test's own limit in the guest (default
#                             240); the boot's is the sum, plus 60 s
#   vm-disk: MIB              a disk of MIB MiB, /dev/vda (virtio; the test
#                             loads virtio_blk): a sparse file in the
#                             boot's temp dir, removed with it
#   vm-modules: NAME...       kernel modules, loaded before the tests (with
#                             their dependencies)
#   vm-programs: NAME...      host programs beside the shared set, copied
#                             with their libraries (fio, say), or programs
#                             of the bench (tests/vm/NAME.c, built here)
#   vm-data: FILE[:SKIP:MIB]...  files of $UZRAM_TEST_CORPUS, copied to
#                             /data; with SKIP and MIB, only MIB MiB of it
#                             from SKIP MiB on (a slice of the core image)
#
# With -1 the tests share one guest, run one after the other: the
# kernels must agree; the guest takes the largest vm-mem and vm-cpus and
# the union of the rest. A boot costs 5-10 s of TCG, so make test packs its
# tests this way.
#
# The shared set, in every guest: busybox, bash, GNU timeout, tar, diff,
# cmp and dd, nbd-client, e2fsprogs'
# mke2fs and e2fsck, util-linux's blkdiscard, mkswap, swapon and swapoff,
# and $UZRAM (build/uzram by default) with its libraries.
#
# Each boot: qemu-system-x86_64 -accel tcg (this bench assumes no KVM),
# no network and no disk (but vm-disk's), the serial console to build/vm/logs/NAME.log,
# under timeout. A test passes when it printed at least one RESULT line,
# none failed, and its script exited 0. The kernels (fetch-kernel.sh) and
# the shared archive are kept under build/vm; the per-boot archive lives
# in a temp dir that is removed, and qemu is killed if this script is.
#
# Environment: UZRAM, UZRAM_TEST_CORPUS (default build/corpus),
# VM_KERNEL=KERNEL to boot every test on that kernel whatever its header
# says (the ublk tests on trixie-backports' kernel, say),
# VM_DIR (default build/vm), VM_VERBOSE=1 to echo the console while it runs;
# every VMT_* variable reaches the guest's tests (a test's own knobs).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
UZRAM=${UZRAM:-$top/build/uzram}
UZRAM_TEST_CORPUS=${UZRAM_TEST_CORPUS:-$top/build/corpus}
VM_DIR=${VM_DIR:-$top/build/vm}
mkdir -p "$VM_DIR/logs"

# coreutils' timeout: busybox's runs its own applet of a name (mke2fs) before
# the program on PATH.
shared_programs=(bash timeout tar diff cmp dd nbd-client mke2fs e2fsck blkdiscard mkswap
	swapon swapoff)

header()
{
	sed -n "s/^# vm-$2: *//p" "$1" | head -n1
}

# Run "$@" holding the bench's setup lock: the phases of make test run
# their VMs side by side, and two of them fetching the same kernel, making
# the same archive or building the same helper at once break each other
# (depmod's renameat failed so in a fresh clone).
locked()
{
	local fd rc
	exec {fd}> "$VM_DIR/setup.lock"
	flock "$fd"
	"$@"; rc=$?
	exec {fd}>&-
	return "$rc"
}

# The shared archive of one kernel: rebuilt when a script of the bench is
# newer, or the kernel.
shared_cpio()
{
	local kernel=$1 kdir=$VM_DIR/kernel-$1 out=$VM_DIR/shared-$1.cpio.zst
	bash "$here/fetch-kernel.sh" "$kernel" "$kdir" >&2 || return 1
	if [[ ! -s $out || $here/initramfs.sh -nt $out || $here/run.sh -nt $out ||
		$kdir/VERSION -nt $out ]]; then
		bash "$here/initramfs.sh" "$kdir" "$out.cpio" --busybox "${shared_programs[@]}" >&2 &&
			zstd -q -f -3 -T0 --rm "$out.cpio" -o "$out" || return 1
	fi
	echo "$out"
}

# The bench's own guest programs (tests/vm/*.c, the swap test's hog), built
# for the host, which is the guest's userland too.
build_helpers()
{
	local c bin
	mkdir -p "$VM_DIR/bin"
	for c in "$here"/*.c; do
		bin=$VM_DIR/bin/$(basename "$c" .c)
		[[ $bin -nt $c ]] && continue
		${CC:-cc} -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -o "$bin" "$c" || return 1
	done
}

qemu_pid=
tail_pid=
tmp=
cleanup()
{
	# qemu_pid is timeout(1)'s: a KILL of timeout alone would leave its
	# child, qemu, running, so qemu goes first.
	if [[ -n $qemu_pid ]]; then
		pkill -KILL -P "$qemu_pid" 2>/dev/null
		kill -KILL "$qemu_pid" 2>/dev/null
		wait "$qemu_pid" 2>/dev/null
	fi
	[[ -n $tail_pid ]] && kill "$tail_pid" 2>/dev/null
	[[ -n $tmp ]] && rm -rf "$tmp"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# boot NAME TEST... - one guest running the tests in order. 0 if all passed.
boot()
{
	local name=$1; shift
	local t kernel="" mem=0 cpus=0 limit=60 modules="" programs="" data="" disk=0
	local k m c d l names=()
	for t in "$@"; do
		k=${VM_KERNEL:-$(header "$t" kernel)}; k=${k:-6.1}
		[[ -z $kernel || $kernel == "$k" ]] || {
			echo "run.sh: $t wants kernel $k, the others $kernel: boot them apart" >&2; return 1; }
		kernel=$k
		m=$(header "$t" mem); m=${m:-512}; ((m > mem)) && mem=$m
		c=$(header "$t" cpus); c=${c:-2}; ((c > cpus)) && cpus=$c
		d=$(header "$t" disk); d=${d:-0}; ((d > disk)) && disk=$d
		l=$(header "$t" timeout); l=${l:-240}; limit=$((limit + l))
		modules+=" $(header "$t" modules)"
		programs+=" $(header "$t" programs)"
		data+=" $(header "$t" data)"
		names+=("$(basename "$t" .sh)")
	done

	local shared log args=()
	shared=$(locked shared_cpio "$kernel") || return 1
	tmp=$(mktemp -d "$VM_DIR/boot.XXXXXX")
	log=$VM_DIR/logs/$name.log

	printf 'VM_TESTS=%q\nVM_MODULES=%q\n' "${names[*]}" "$modules" > "$tmp/env"
	# A test's knobs: every VMT_* variable of the host's environment.
	local v
	for v in $(compgen -v VMT_); do printf '%s=%q\n' "$v" "${!v}" >> "$tmp/env"; done
	args=("$here/init=/init" "$here/guest-lib.sh=/guest-lib.sh"
		"$here/guest-swap.sh=/guest-swap.sh" "$here/guest-keeper.sh=/guest-keeper.sh"
		"$here/keeper-locked.sh=/keeper-locked.sh"
		"$tmp/env=/etc/vm-test.env" "$UZRAM")
	for t in "$@"; do
		l=$(header "$t" timeout); echo "${l:-240}" > "$tmp/$(basename "$t" .sh).timeout"
		args+=("$t=/tests/$(basename "$t")" "$tmp/$(basename "$t" .sh).timeout=/tests/$(basename "$t" .sh).timeout")
	done
	local f
	for f in $(printf '%s\n' $data | sort -u); do
		if [[ $f == *:*:* ]]; then
			IFS=: read -r f skip count <<< "$f"
			dd if="$UZRAM_TEST_CORPUS/$f" of="$tmp/$f" bs=1M skip="$skip" \
				count="$count" status=none || return 1
			args+=("$tmp/$f=/data/$f")
		else
			args+=("$UZRAM_TEST_CORPUS/$f=/data/$f")
		fi
	done
	local mods=()
	for m in $(printf '%s\n' $modules | sort -u); do mods+=(-m "$m"); done
	# every guest's /init starts the hang reporter
	programs+=" hungwatch"
	locked build_helpers || return 1
	# shellcheck disable=SC2046
	PATH=$VM_DIR/bin:$PATH bash "$here/initramfs.sh" "$VM_DIR/kernel-$kernel" "$tmp/own.cpio" \
		"${mods[@]}" "${args[@]}" $(printf '%s\n' $programs | sort -u) || return 1
	# Compressed, so the guest holds the archive and its files at once
	# (uzram's libraries alone are 40 MB: libnbd needs libxml2 and ICU).
	zstd -q -3 -T0 -c "$tmp/own.cpio" | cat "$shared" - > "$tmp/initrd"

	local drive=()
	if ((disk)); then
		truncate -s "${disk}M" "$tmp/disk.img"
		drive=(-drive "file=$tmp/disk.img,if=virtio,format=raw,cache=unsafe")
	fi

	echo "== vm $name: ${names[*]} (kernel $kernel, ${mem}M, $cpus cpus, at most ${limit}s)"
	local start=$SECONDS rc=0 try
	# A kernel that panics while it boots, before /init ran a line of any
	# test (seen once in CI: an oops in sched_clock_tick at 4 s, TCG's
	# cross-CPU code patching), is the emulator's failure, not the test's:
	# boot it once more and say so. A panic after VM-BOOTED always fails.
	for try in 1 2; do
		rc=0
		timeout -s KILL "$limit" qemu-system-x86_64 -accel tcg,thread=multi -cpu max \
			-m "$mem" -smp "$cpus" -nodefaults -no-user-config -display none \
			-serial stdio -monitor none -no-reboot \
			-kernel "$VM_DIR/kernel-$kernel/vmlinuz" -initrd "$tmp/initrd" "${drive[@]}" \
			-append "console=ttyS0 panic=-1 oops=panic loglevel=4 rdinit=/init mitigations=off" \
			< /dev/null > "$log" 2>&1 &
		qemu_pid=$!
		if [[ ${VM_VERBOSE:-0} == 1 ]]; then
			tail -n +1 -f --pid="$qemu_pid" "$log" &
			tail_pid=$!
		fi
		wait "$qemu_pid" || rc=$?
		qemu_pid=
		if [[ -n $tail_pid ]]; then wait "$tail_pid" 2>/dev/null || true; tail_pid=; fi
		((try == 1)) || break
		grep -aq '^VM-BOOTED ' "$log" && break
		grep -aq 'Kernel panic' "$log" || break
		echo "== vm $name: the kernel panicked while booting, before any test ran; booting once more. Its last lines:"
		grep -a -B2 -A1 'RIP:\|Kernel panic' "$log" | tr -d '\r' | head -n 12 | sed 's/^/  | /'
		if ((disk)); then rm -f "$tmp/disk.img"; truncate -s "${disk}M" "$tmp/disk.img"; fi
	done
	rm -rf "$tmp"; tmp=

	local bad=0 results fails exit n
	for n in "${names[@]}"; do
		grep -aE "^(RESULT|FIGURE) $n/" "$log" | tr -d '\r' | sed 's/^/  /' || true
		results=$(grep -ac "^RESULT $n/" "$log" || true)
		fails=$(grep -aEc "^RESULT $n/[^ ]+ FAIL" "$log" || true)
		exit=$(grep -a "^VM-TEST-EXIT $n " "$log" | tr -d '\r' | awk '{print $3}' | tail -n1)
		if ((results > 0 && fails == 0)) && [[ $exit == 0 ]]; then
			echo "== vm $n: PASS"
		elif [[ -z $exit ]]; then
			echo "== vm $n: FAIL: it never finished"; bad=1
		else
			echo "== vm $n: FAIL: $fails failed check(s) of $results, exit status $exit"; bad=1
		fi
	done
	if ! grep -aq '^VM-EXIT ' "$log"; then
		echo "== vm $name: the guest never finished (qemu status $rc after $((SECONDS - start)) s)"
		bad=1
	fi
	if ((bad)); then
		echo "== vm $name: the console's last lines ($log):"
		tail -n 40 "$log" | tr -d '\r' | sed 's/^/  | /'
		return 1
	fi
	echo "== vm $name: PASS ($((SECONDS - start)) s)"
}

one_boot=0
if [[ ${1:-} == -1 ]]; then one_boot=1; shift; fi
(($#)) || { echo "usage: run.sh [-1] TEST.sh..." >&2; exit 2; }
[[ -x $UZRAM ]] || { echo "run.sh: no uzram program at $UZRAM (make first)" >&2; exit 1; }
failed=0
if ((one_boot)); then
	boot "$(basename "$1" .sh)-and-$(($# - 1))" "$@" || failed=1
else
	for t in "$@"; do
		boot "$(basename "$t" .sh)" "$t" || failed=$((failed + 1))
	done
fi
((failed == 0))
