#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deps.sh GROUP... - make sure the Debian packages a make target needs are
# installed. As root, installs what is missing; otherwise prints the exact
# command to run and fails. Groups: build test bench deb run.
set -euo pipefail

pkgs_build="gcc g++ make pkg-config scdoc liblz4-dev libzstd-dev libdeflate-dev libxxhash-dev
            libgnutls28-dev libnbd-dev libsystemd-dev liburing-dev libfuse3-dev
            libbpf-dev bpftool clang"
pkgs_test="systemd attr ntfs-3g libcmocka-dev libxxhash-dev clang libclang-rt-14-dev qemu-utils libnbd-bin fio
           nbdkit gdb python3 python3-prometheus-client curl man-db e2fsprogs xfsprogs util-linux procps mount tar fuse3
           fuse2fs gnutls-bin iproute2 coreutils git sqlite3 rsync stress-ng acl"
pkgs_bench="fio nbdkit gnuplot-nox gdb python3 dpkg-dev linux-perf procps libnbd-dev bc qemu-utils
            libnbd-bin e2fsprogs"
# The VM bench (tests/vm/): qemu, and the programs copied into its guests.
pkgs_vm="qemu-system-x86 busybox-static nbd-client e2fsprogs util-linux fio cpio kmod xz-utils
         zstd apt dpkg debian-archive-keyring coreutils"
pkgs_deb="debhelper dpkg-dev lintian mmdebstrap"
pkgs_run="gdb python3 libnbd-bin e2fsprogs fuse2fs fuse3 util-linux mount"

want=()
for group in "$@"; do
	var="pkgs_$group"
	[[ -n ${!var+x} ]] || { echo "deps.sh: unknown group '$group'" >&2; exit 2; }
	# shellcheck disable=SC2206
	want+=(${!var})
done

missing=()
for p in "${want[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

# Keep the list unique and stable, so the printed line is easy to copy.
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if ((EUID != 0)); then
	echo "uzram needs these Debian packages:" >&2
	echo "  sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt may hold dpkg's lock (a phase of make test beside this one,
# or the machine's own apt at boot): wait for it rather than fail.
apt=(apt-get -o DPkg::Lock::Timeout=600)
if ! "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2; then
	"${apt[@]}" update >&2
	"${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2
fi
