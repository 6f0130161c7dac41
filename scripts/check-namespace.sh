#!/bin/bash
# SPDX-License-Identifier: MIT
# check-namespace.sh BUILD - part of `make test`: the library defines no
# global name outside its public prefix, in the static archive as in the
# shared object, and a program that has names of its own that the
# library uses inside (tests/link/collide.c) links against both and runs.
#
# The shared object hides its internals with -fvisibility=hidden; the
# archive is one relocatable object whose hidden symbols were made local
# (the Makefile's libuzram.o; doc/layout.md says why).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
fail() { echo "check-namespace: FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uzram-namespace.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for f in "$build/libuzram.a" "$build/libuzram.so"; do
	[[ -e $f ]] || fail "$f is missing (run make first)"
done
# Global definitions, in the archive and in the .so's dynamic table.
nm -g --defined-only "$build/libuzram.a" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/a"
nm -D --defined-only "$build/libuzram.so" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/so"
for f in a so; do
	[[ -s $tmp/$f ]] || fail "libuzram.$f defines no global symbol at all"
	if grep -v '^uzram_' "$tmp/$f" > "$tmp/$f.bad"; then
		fail "libuzram.$f defines global names outside uzram_: $(head -20 "$tmp/$f.bad" | paste -sd' ')"
	fi
done
cmp -s "$tmp/a" "$tmp/so" ||
	fail "libuzram.a and libuzram.so export different names: $(comm -3 "$tmp/a" "$tmp/so" | paste -sd' ')"

cc=${CC:-cc}
libs=$(pkg-config --libs liblz4 libzstd libdeflate libnbd)
# shellcheck disable=SC2086
$cc -std=c11 -Wall -Werror -Iinclude -o "$tmp/collide-static" tests/link/collide.c \
	"$build/libuzram.a" $libs -lpthread -lm ||
	fail "tests/link/collide.c does not link against $build/libuzram.a"
# the .so under its soname, as an install would put it
mkdir "$tmp/lib"
cp "$build/libuzram.so" "$tmp/lib/"
soname=$(objdump -p "$build/libuzram.so" | awk '$1 == "SONAME" { print $2 }')
ln -s libuzram.so "$tmp/lib/$soname"
$cc -std=c11 -Wall -Werror -Iinclude -o "$tmp/collide-shared" tests/link/collide.c \
	-L"$tmp/lib" -luzram -Wl,-rpath,"$tmp/lib" ||
	fail "tests/link/collide.c does not link against $build/libuzram.so"
"$tmp/collide-static" || fail "collide (static) failed"
"$tmp/collide-shared" || fail "collide (shared) failed"
ldd "$tmp/collide-shared" > "$tmp/ldd"
grep -q "$tmp/lib/$soname" "$tmp/ldd" || fail "collide-shared is not linked with $build/libuzram.so"
echo "check-namespace: $(wc -l < "$tmp/a") global names, all uzram_*, in both libraries; collide.c links and runs against both"
