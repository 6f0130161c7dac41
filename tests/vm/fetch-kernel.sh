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
#   OUT_DIR/PACKAGE          the packages (and version) it came from
#
# KERNEL is 6.1 (Debian 12's linux-image-amd64), 6.12 (bookworm-backports'
# linux-image-amd64; the first with ublk_drv) or trixie-backports (Debian
# 13's newest: the release trixie-backports' linux-image-amd64 names when
# it is first fetched, 7.3.4 on 2026-12-03; VERSION and the guest's
# VM-BOOTED line say which). Newer Debian kernels split the image package
# into linux-binary (vmlinuz), linux-modules and linux-base (config,
# modules.order...) under /usr/lib/modules/RELEASE: those are fetched too.
#
# Nothing of the host's apt is used or changed: the sources list, the
# package lists, the cache and an empty dpkg status live under
# OUT_DIR/../apt (OUT_DIR/../apt-trixie for trixie's), and the packages are only unpacked (dpkg-deb -x), never
# installed; the host's /boot and /lib/modules are not read. Only Debian's
# archive is asked (deb.debian.org). A kernel already unpacked is kept:
# delete OUT_DIR to fetch again. Needs apt, dpkg-deb and
# debian-archive-keyring, which every Debian system has (Debian 12's has
# trixie's keys).
set -euo pipefail

kernel=${1:?usage: fetch-kernel.sh 6.1|6.12|trixie-backports OUT_DIR}
out=${2:?usage: fetch-kernel.sh 6.1|6.12|trixie-backports OUT_DIR}
case $kernel in
6.1) suite=bookworm release=bookworm ;;
6.12) suite=bookworm-backports release=bookworm ;;
trixie-backports) suite=trixie-backports release=trixie ;;
*) echo "fetch-kernel.sh: unknown kernel '$kernel', expected 6.1, 6.12 or trixie-backports" >&2; exit 2 ;;
esac

if [[ -s $out/vmlinuz && -s $out/VERSION ]]; then
	exit 0
fi

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -r $keyring ]] || { echo "fetch-kernel.sh: no $keyring (apt-get install debian-archive-keyring)" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
# one apt state per Debian release; bookworm's keeps its first name
apt_dir=$(dirname "$out")/apt
[[ $release == bookworm ]] || apt_dir+=-$release
mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,parts,prefs,debs}
: > "$apt_dir/status"
cat > "$apt_dir/sources.list" <<SRC
deb [signed-by=$keyring] http://deb.debian.org/debian $release main
deb [signed-by=$keyring] http://deb.debian.org/debian $release-backports main
deb [signed-by=$keyring] http://deb.debian.org/debian-security $release-security main
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
# The split packages of newer kernels (linux-binary-ABI, linux-modules-ABI,
# linux-base-ABI) are among the image package's Depends; bookworm's image
# package holds everything itself and names none of them.
abi=${pkg#linux-image-}
parts=$(apt-cache "${apt_opts[@]}" show "$pkg/$suite" 2>/dev/null | sed -n 's/^Depends: //p' |
	head -n1 | tr ',|' '\n\n' | awk -v abi="$abi" \
	'$1 == "linux-binary-" abi || $1 == "linux-modules-" abi || $1 == "linux-base-" abi { print $1 }' |
	sort -u)

cd "$apt_dir/debs"
# shellcheck disable=SC2086
timeout 600 apt-get "${apt_opts[@]}" -q download "$pkg" $parts >&2

tmp=$(mktemp -d "$out/.unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
debs=()
for p in $pkg $parts; do
	deb=$(ls -t "$apt_dir"/debs/"${p}"_*.deb | head -n1)
	dpkg-deb -x "$deb" "$tmp"
	debs+=("$(basename "$deb")")
done
# bookworm: /boot/vmlinuz-RELEASE, /boot/config-RELEASE and /lib/modules;
# trixie's split packages: /usr/lib/modules/RELEASE/{vmlinuz,config,...}
vmlinuz=$(ls "$tmp"/boot/vmlinuz-* 2> /dev/null | head -n1 || true)
if [[ -n $vmlinuz ]]; then
	release=${vmlinuz##*/vmlinuz-}
	config=$tmp/boot/config-$release
	mdir=$tmp/lib/modules/$release
else
	vmlinuz=$(ls "$tmp"/usr/lib/modules/*/vmlinuz 2> /dev/null | head -n1 || true)
	[[ -n $vmlinuz ]] || { echo "fetch-kernel.sh: no vmlinuz in ${debs[*]}" >&2; exit 1; }
	release=$(basename "$(dirname "$vmlinuz")")
	config=$tmp/usr/lib/modules/$release/config
	mdir=$tmp/usr/lib/modules/$release
fi
[[ -d $mdir/kernel ]] || { echo "fetch-kernel.sh: ${debs[*]} have no modules of $release" >&2; exit 1; }
rm -rf "$out/lib"
mkdir -p "$out/lib/modules"
mv "$config" "$out/config"
mv "$vmlinuz" "$out/vmlinuz"
mv "$mdir" "$out/lib/modules/"
depmod -b "$out" "$release"
echo "${debs[*]}" > "$out/PACKAGE"
echo "$release" > "$out/VERSION"
