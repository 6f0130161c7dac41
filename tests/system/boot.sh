#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# boot.sh DEB_DIR - make test-system: the packages in a Debian 12 system
# that boots with systemd as init, under qemu (TCG unless /dev/kvm is
# usable), with /etc/uzram/uzram.conf holding one swap and one /tmp:
#
#   - after boot: swap active on uzram (an nbd device in /proc/swaps),
#     /tmp an ext4 of uzram mount and writable, `systemctl is-system-running`
#     "running" and no failed unit;
#   - at shutdown: both units stopped with no failed unit and no
#     "Failed" line on the console after the check.
#
# Until uzram swapon exists (issue 22, the vm branch), the guest's config
# has no swap section and the check prints RESULT SKIP for swap.
#
# The guest: mmdebstrap --variant=minbase of bookworm from the host's apt
# sources, with systemd, udev, kmod, Debian's kernel (linux-image-amd64;
# only the modules the job needs are kept) and what uzram mount and swap
# use, the three packages installed with apt in a customize hook, the
# config, and uzram-check.service, which prints RESULT lines on the
# console once multi-user.target is reached and powers off. The whole root
# is the initramfs (rdinit=/lib/systemd/systemd), so no disk image and no
# loop device are needed on the host; it is made once into
# build/system/root.cpio and rebuilt when a .deb or this script is newer.
#
# Why not in make test: the guest's root is made from Debian's archive
# (minutes, 200 MB), and a systemd boot under TCG takes one to three
# minutes on a loaded 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/../.."

debs=${1:?usage: boot.sh DEB_DIR}
out=build/system
log=$out/console.log
fail() { echo "test-system: FAIL: $*" >&2; exit 1; }
((EUID == 0)) || fail "needs root (mmdebstrap into a directory)"
mkdir -p "$out"

cpio=$out/root.cpio
fresh=1
[[ -s $cpio && -s $out/vmlinuz && $cpio -nt $0 ]] || fresh=0
for d in "$debs"/uzram_*.deb "$debs"/libuzram0_*.deb "$debs"/libuzram-dev_*.deb; do
	[[ -s $d ]] || fail "no $d: run make deb"
	[[ $cpio -nt $d ]] || fresh=0
done

if ((!fresh)); then
	sources=()
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources; do
		[[ -s $f ]] && grep -qv '^[[:space:]]*\(#\|$\)' "$f" && sources+=("$f")
	done
	root=$(mktemp -d "${TMPDIR:-/tmp}/uzram-system.XXXXXX")
	trap 'rm -rf --one-file-system "$root"' EXIT
	mkdir -p "$root/debs"
	cp "$debs"/uzram_*.deb "$debs"/libuzram0_*.deb "$root/debs/"
	echo "test-system: making the guest's root with mmdebstrap"
	timeout 1200 mmdebstrap --quiet --variant=minbase \
		--include=systemd,systemd-sysv,udev,kmod,linux-image-amd64,e2fsprogs,fuse3,nbdfuse,nbd-client,util-linux,mount,procps \
		--customize-hook="copy-in $root/debs /tmp" \
		--customize-hook='chroot "$1" sh -c "apt-get install -y --no-install-recommends /tmp/debs/*.deb && rm -r /tmp/debs"' \
		--customize-hook="copy-in tests/system/guest /tmp" \
		--customize-hook='chroot "$1" sh /tmp/guest/setup.sh' \
		bookworm "$root/fs" "${sources[@]}" </dev/null || fail "mmdebstrap"
	cp "$root/fs"/boot/vmlinuz-* "$out/vmlinuz"
	rm -rf "$root/fs/boot"
	(cd "$root/fs" && find . -xdev | cpio --quiet -o -H newc) > "$cpio.tmp"
	mv "$cpio.tmp" "$cpio"
fi

# TCG, as the VM bench (tests/vm): where /dev/kvm exists it may still not
# boot a guest (nested, as on the machine this was written on, where a KVM
# guest hung before its first kernel message); SYSTEM_ACCEL=kvm to try.
accel=${SYSTEM_ACCEL:-tcg}
echo "test-system: booting ($accel; the console in $log)"
rm -f "$log"
start=$SECONDS
timeout 900 qemu-system-x86_64 -accel "$accel" -m 2048 -smp 2 -nographic \
	-no-reboot -kernel "$out/vmlinuz" -initrd "$cpio" -nic none \
	-append "rdinit=/lib/systemd/systemd console=ttyS0 panic=-1 systemd.show_status=1" \
	-serial "file:$log" -monitor none </dev/null >/dev/null 2>&1 || true
echo "test-system: the guest ran $((SECONDS - start)) s"

grep -a '^RESULT' "$log" || fail "no RESULT line: the guest did not reach its check; see $log"
if grep -a '^RESULT FAIL' "$log"; then
	fail "a check failed in the guest; see $log"
fi
grep -aq '^RESULT ok all' "$log" || fail "the check did not finish; see $log"
grep -aq '^RESULT SKIP' "$log" && echo "test-system: NOTE: a part was skipped (above)"
# Shutdown: everything after the check's last line.
sed -n '/^RESULT ok all/,$p' "$log" | grep -aE 'FAILED|Failed to|failed with result' &&
	fail "a unit failed at shutdown; see $log"
grep -aqE 'reboot: Power down|Power down' "$log" || fail "the guest did not power off cleanly; see $log"
echo "test-system: every unit of the config came up, the system ran clean, and went down" \
	"with no failed unit"
