#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# initramfs.sh KERNEL_DIR OUT.cpio [-m MODULE]... [FILE|DIR=DEST]... [PROGRAM]...
# - a newc cpio archive for the VM bench, built from the host's own files:
#
#   -m MODULE      a module of the kernel in KERNEL_DIR (fetch-kernel.sh), with
#                  the modules it depends on; .xz ones are unpacked, and
#                  depmod writes the archive's own modules.dep, so the
#                  guest's busybox modprobe loads them
#   SRC=DEST       a host file or directory, copied to DEST in the archive
#   --busybox      the host's busybox (busybox-static) as /usr/bin/busybox,
#                  with a link for each applet that no program of the
#                  archive has taken
#   PROGRAM        a host program (a path, or a name on PATH), copied to
#                  /usr/bin with every shared library ldd lists for it
#
# The archive has the merged-/usr layout of Debian 12 (/bin, /sbin and /lib
# link into /usr), so a library lands where ldd found it. Nothing is
# compressed: the kernel reads a plain cpio at once, and the guest's RAM
# holds the unpacked files either way. Archives are concatenated by the
# caller (the kernel unpacks one after the other), so the shared part is
# built once and each boot adds only its own files.
set -euo pipefail

kdir=${1:?usage: initramfs.sh KERNEL_DIR OUT.cpio [-m MODULE]... [SRC=DEST]... [PROGRAM]...}
out=${2:?usage: initramfs.sh KERNEL_DIR OUT.cpio ...}
shift 2

root=$(mktemp -d "${TMPDIR:-/tmp}/uzram-initramfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/usr/{bin,lib,lib64} "$root"/{dev,proc,sys,tmp,run,mnt,etc,root}
ln -s usr/bin "$root/bin"; ln -s usr/bin "$root/sbin"; ln -s bin "$root/usr/sbin"
ln -s usr/lib "$root/lib"; ln -s usr/lib64 "$root/lib64"

add_lib()
{
	local lib=$1
	[[ -e $root$lib ]] && return 0
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
}

add_program()
{
	local prog=$1 path lib
	path=$(command -v "$prog") || { echo "initramfs.sh: no program '$prog' on this host" >&2; exit 1; }
	cp -L "$path" "$root/usr/bin/"
	# ldd prints "name => /path (addr)" and "/lib64/ld-linux... (addr)".
	while read -r lib; do
		add_lib "$lib"
	done < <(ldd "$path" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p')
}

release=$(cat "$kdir/VERSION")
mods=()
busybox=0
while (($#)); do
	case $1 in
	-m) mods+=("$2"); shift 2 ;;
	--busybox) busybox=1; shift ;;
	*=*)
		src=${1%%=*} dest=${1#*=}
		mkdir -p "$root$(dirname "$dest")"
		cp -rL "$src" "$root$dest"
		shift ;;
	*) add_program "$1"; shift ;;
	esac
done

if ((busybox)); then
	cp /bin/busybox "$root/usr/bin/busybox"
	for applet in $("$root/usr/bin/busybox" --list); do
		# no init: a guest whose /init fails must panic, not wait at a prompt
		[[ $applet == init || $applet == linuxrc ]] && continue
		[[ -e $root/usr/bin/$applet ]] || ln -s busybox "$root/usr/bin/$applet"
	done
fi

if ((${#mods[@]})); then
	mdir=$root/usr/lib/modules/$release
	mkdir -p "$mdir"
	cp "$kdir/lib/modules/$release"/modules.{builtin,builtin.modinfo,order} "$mdir/"
	while read -r verb path _; do
		[[ $verb == insmod ]] || continue
		rel=${path#"$kdir/lib/modules/$release/"}
		mkdir -p "$mdir/$(dirname "$rel")"
		case $rel in
		*.xz) xz -dc "$path" > "$mdir/${rel%.xz}" ;;
		*.zst) zstd -qdc "$path" > "$mdir/${rel%.zst}" ;;
		*) cp "$path" "$mdir/$rel" ;;
		esac
	done < <(modprobe -d "$kdir" -S "$release" --show-depends -a "${mods[@]}")
	depmod -b "$root/usr" "$release"
fi

(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > "$out.tmp"
mv "$out.tmp" "$out"
