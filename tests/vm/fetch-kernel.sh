#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fetch-kernel.sh KERNEL OUT_DIR - a Debian kernel for the VM bench, taken
# with a private apt configuration and unpacked into OUT_DIR:
#
#   OUT_DIR/vmlinuz          the kernel
#   OUT_DIR/lib/modules/VERSION  the package's modules, with the
#                            modules.dep that depmod makes for them
#   OUT_DIR/config           the kernel's build configuration
#   OUT_DIR/VERSION          the kernel's release string (uname -r)
#   OUT_DIR/PACKAGE          the package and version it came from
#
# KERNEL is 6.1 (Debian 12's linux-image-amd64) or 6.12 (bookworm-backports'
# linux-image-amd64; the first with ublk_drv).
#
# Nothing of the host's apt is used or changed: the sources list, the
# package lists, the cache and an empty dpkg status live under
# OUT_DIR/../apt, and the package is only unpacked (dpkg-deb -x), never
# installed; the host's /boot and /lib/modules are not read. Only Debian's
# archive is asked (deb.debian.org). A kernel already unpacked is kept:
# delete OUT_DIR to fetch again. Needs apt, dpkg-deb and
# debian-archive-keyring, which every Debian system has.
set -euo pipefail

kernel=${1:?usage: fetch-kernel.sh 6.1|6.12 OUT_DIR}
out=${2:?usage: fetch-kernel.sh 6.1|6.12 OUT_DIR}
case $kernel in
6.1) suite=bookworm ;;
6.12) suite=bookworm-backports ;;
*) echo "fetch-kernel.sh: unknown kernel '$kernel', expected 6.1 or 6.12" >&2; exit 2 ;;
esac

if [[ -s $out/vmlinuz && -s $out/VERSION ]]; then
	exit 0
fi

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -r $keyring ]] || { echo "fetch-kernel.sh: no $keyring (apt-get install debian-archive-keyring)" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
apt_dir=$(dirname "$out")/apt
mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,parts,prefs,debs}
: > "$apt_dir/status"
cat > "$apt_dir/sources.list" <<SRC
deb [signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb [signed-by=$keyring] http://deb.debian.org/debian bookworm-backports main
deb [signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main
SRC
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list"
	-o "Dir::Etc::SourceParts=$apt_dir/parts"
	-o "Dir::Etc::PreferencesParts=$apt_dir/prefs"
	-o "Dir::Etc::Preferences=$apt_dir/prefs/none"
	-o "Dir::State::Lists=$apt_dir/lists"
	-o "Dir::State::status=$apt_dir/status"
	-o "Dir::Cache=$apt_dir/cache"
	-o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache="
	-o "APT::Sandbox::User=root" -o "Debug::NoLocking=1"
	-o "Acquire::Languages=none" -o "APT::Architecture=amd64")

# The lists are refreshed once a day at most: a cached kernel needs none.
stamp=$apt_dir/lists/.updated
if [[ ! -e $stamp ]] || [[ -n $(find "$stamp" -mmin +1440) ]]; then
	timeout 300 apt-get "${apt_opts[@]}" -q update >&2
	touch "$stamp"
fi

# linux-image-amd64 of the suite names the versioned image package.
meta=$(apt-cache "${apt_opts[@]}" show "linux-image-amd64/$suite" 2>/dev/null |
	sed -n 's/^Depends: //p' | head -n1)
pkg=$(printf '%s\n' "$meta" | tr ',' '\n' | sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p' | head -n1)
[[ -n $pkg ]] || { echo "fetch-kernel.sh: no linux-image-amd64 in $suite (the Depends line: '$meta')" >&2; exit 1; }

cd "$apt_dir/debs"
timeout 600 apt-get "${apt_opts[@]}" -q download "$pkg" >&2
deb=$(ls -t "$apt_dir"/debs/"${pkg}"_*.deb | head -n1)

tmp=$(mktemp -d "$out/.unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
vmlinuz=$(ls "$tmp"/boot/vmlinuz-* | head -n1)
release=${vmlinuz##*/vmlinuz-}
[[ -d $tmp/lib/modules/$release ]] || { echo "fetch-kernel.sh: $deb has no lib/modules/$release" >&2; exit 1; }
rm -rf "$out/lib"
mkdir -p "$out/lib/modules"
mv "$tmp/lib/modules/$release" "$out/lib/modules/"
depmod -b "$out" "$release"
mv "$tmp/boot/config-$release" "$out/config"
mv "$vmlinuz" "$out/vmlinuz"
echo "$(basename "$deb")" > "$out/PACKAGE"
echo "$release" > "$out/VERSION"
