#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ldconfig-after.sh install|uninstall LIBDIR - the end of make install and
# make uninstall (never with a DESTDIR: a package's own scripts do this).
#
# Where the dynamic linker searches LIBDIR (a system prefix: /usr/local/lib,
# /usr/lib, any directory of /etc/ld.so.conf), run ldconfig, as other
# libraries' make install does, so that a program built with
# `pkg-config --libs uzram` runs as it is; as another user than root, say to.
# Elsewhere (PREFIX=/opt/uzram, say), say what a program needs to find
# libuzram.so, since nothing will find it by itself.
set -euo pipefail

verb=$1
libdir=$2

# The directories the linker searches: ld.so.conf's and the built-in ones.
searched()
{
	local want dir
	want=$(realpath -m "$libdir")
	while read -r dir; do
		[[ $(realpath -m "$dir") == "$want" ]] && return 0
	done < <({ ldconfig -vN 2>/dev/null || true; } | sed -n 's|^\(/[^:]*\):.*|\1|p'
		printf '%s\n' /lib /usr/lib /lib64 /usr/lib64)
	return 1
}

if searched; then
	if ((EUID == 0)); then
		ldconfig
	else
		echo "make $verb: run ldconfig as root, so that programs find libuzram.so"
	fi
	exit 0
fi
[[ $verb == install ]] || {
	echo "make uninstall: if you listed $libdir in /etc/ld.so.conf.d/uzram.conf," \
		"remove that file and run ldconfig as root"
	exit 0
}
cat <<MSG
make install: $libdir is not a directory the dynamic linker searches, so a
program linked with libuzram.so will not find it. Either, as root, for every
program:
    echo $libdir > /etc/ld.so.conf.d/uzram.conf && ldconfig
or when building a program:
    cc prog.c -o prog \$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs uzram) -Wl,-rpath,$libdir
or for one run: LD_LIBRARY_PATH=$libdir ./prog
MSG
