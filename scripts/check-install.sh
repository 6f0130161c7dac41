#!/usr/bin/env bash
# check-install.sh [MAKE] - part of `make test`: the installed library works
# for a program built the way the README says. Installs into a temporary
# DESTDIR, takes the README's example program (the first ```c block), builds
# it with pkg-config against the shared library and against the static one,
# runs both, and checks that each is linked the way it should be.
set -euo pipefail
cd "$(dirname "$0")/.."

make=${1:-make}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uzram-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check-install: FAIL: $*" >&2; exit 1; }

prefix=/usr/local
dest=$tmp/root
$make --no-print-directory install DESTDIR="$dest" PREFIX="$prefix" >/dev/null
lib=$dest$prefix/lib

soname=$(objdump -p "$lib/libuzram.so" | awk '$1 == "SONAME" { print $2 }')
[[ -n $soname ]] || fail "libuzram.so has no SONAME"
for f in libuzram.so "$soname" libuzram.a include/uzram.h; do
	case $f in
	include/*) [[ -e $dest$prefix/$f ]] || fail "$prefix/$f is not installed" ;;
	*) [[ -e $lib/$f ]] || fail "$prefix/lib/$f is not installed" ;;
	esac
done

awk '/^```c$/ { inside = 1; next } /^```$/ && inside { exit } inside' README.md \
	> "$tmp/example.c"
grep -q 'uzram_open' "$tmp/example.c" || fail "no example program found in README.md"

export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
cc=${CC:-cc}

# Shared: as the README says, cc example.c $(pkg-config --cflags --libs uzram)
# shellcheck disable=SC2046
$cc -o "$tmp/example-shared" "$tmp/example.c" $(pkg-config --cflags --libs uzram)
# ldd's output in full first: grep -q quitting early would kill ldd with
# SIGPIPE, which pipefail turns into a failure.
deps=$(LD_LIBRARY_PATH=$lib ldd "$tmp/example-shared")
[[ $deps == *"$soname => $lib/"* ]] ||
	fail "the shared example does not load $lib/$soname: $deps"
LD_LIBRARY_PATH=$lib "$tmp/example-shared" > "$tmp/shared.out" ||
	fail "the shared example failed: $(cat "$tmp/shared.out")"

# Static: the archive and pkg-config's private dependencies.
libs=$(pkg-config --static --libs uzram)
# shellcheck disable=SC2046,SC2086
$cc -o "$tmp/example-static" "$tmp/example.c" $(pkg-config --cflags uzram) \
	${libs/-luzram/-l:libuzram.a}
deps=$(ldd "$tmp/example-static")
[[ $deps != *libuzram* ]] ||
	fail "the static example is linked against the shared library: $deps"
"$tmp/example-static" > "$tmp/static.out" ||
	fail "the static example failed: $(cat "$tmp/static.out")"

grep -Eq '^[0-9]+ bytes stored in [0-9]+ bytes of memory$' "$tmp/shared.out" ||
	fail "unexpected output: $(cat "$tmp/shared.out")"
cmp -s "$tmp/shared.out" "$tmp/static.out" ||
	fail "the shared and static examples disagree"
echo "check-install: the README example, built with pkg-config, runs against" \
	"$soname and libuzram.a: $(cat "$tmp/shared.out")"
