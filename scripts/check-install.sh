#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-install.sh [MAKE] - part of `make test`: the installed library works
# for a program built the way the README says. Installs into a temporary
# DESTDIR, takes the README's example program (the first ```c block) and
# its two build commands (after the <!-- check-install: ... --> line), runs them as
# printed (against the installed library, and against the tree), runs both
# programs, and checks that each is linked the way it should be; a static
# link from the installed uzram.pc; and that make install PREFIX=/x after
# a build for another prefix installs a uzram.pc that says /x.
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

# The README's build commands, exactly as it prints them: the lines of the
# ```sh block after the <!-- check-install: ... --> line that start with cc.
# The first builds against the installed library, the second against the
# tree; each writes ./example.
mapfile -t cmds < <(awk '/<!-- check-install[ :]/ { mark = 1; next }
	mark && /^```sh$/ { inside = 1; next }
	inside && /^```$/ { exit }
	inside && /^cc / { print }' README.md)
((${#cmds[@]} == 2)) ||
	fail "README.md: want 2 cc lines in the \`\`\`sh block after" \
		"<!-- check-install: ... -->, found ${#cmds[@]}"
cc=${CC:-cc}
mkdir "$tmp/installed" "$tmp/tree"
cp "$tmp/example.c" "$tmp/installed/"
cp "$tmp/example.c" "$tmp/tree/"
ln -s "$PWD/build" "$tmp/tree/build"

# Installed: pkg-config finds the DESTDIR's uzram.pc.
(cd "$tmp/installed" && PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest \
	CC=$cc bash -c "${cmds[0]/#cc /\$CC }") ||
	fail "the README's command failed: ${cmds[0]}"
# ldd's output in full first: grep -q quitting early would kill ldd with
# SIGPIPE, which pipefail turns into a failure.
deps=$(LD_LIBRARY_PATH=$lib ldd "$tmp/installed/example")
[[ $deps == *"$soname => $lib/"* ]] ||
	fail "the installed example does not load $lib/$soname: $deps"
LD_LIBRARY_PATH=$lib "$tmp/installed/example" > "$tmp/shared.out" ||
	fail "the installed example failed: $(cat "$tmp/shared.out")"

# The tree: build/uzram-uninstalled.pc, the archive and its dependencies.
(cd "$tmp/tree" && env -u PKG_CONFIG_PATH CC=$cc bash -c "${cmds[1]/#cc /\$CC }") ||
	fail "the README's command failed: ${cmds[1]}"
deps=$(ldd "$tmp/tree/example")
[[ $deps != *libuzram* ]] ||
	fail "the in-tree example is linked against the shared library: $deps"
"$tmp/tree/example" > "$tmp/static.out" ||
	fail "the in-tree example failed: $(cat "$tmp/static.out")"

# Static, from the installed .pc: its private dependencies are enough.
libs=$(PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest \
	pkg-config --static --libs uzram)
# shellcheck disable=SC2046,SC2086
$cc -o "$tmp/example-static" "$tmp/example.c" \
	$(PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest \
	  pkg-config --cflags uzram) ${libs/-luzram/-l:libuzram.a} ||
	fail "a static link with pkg-config --static --libs uzram failed"
"$tmp/example-static" > /dev/null || fail "the static example failed"

# Another PREFIX after a build for the first: the .pc must follow it.
other=/opt/uzram-check
$make --no-print-directory install DESTDIR="$dest" PREFIX="$other" >/dev/null
grep -qx "prefix=$other" "$dest$other/lib/pkgconfig/uzram.pc" ||
	fail "make install PREFIX=$other installed a uzram.pc that says" \
		"$(grep '^prefix=' "$dest$other/lib/pkgconfig/uzram.pc")"
# and back, so build/ is as make left it
$make --no-print-directory lib PREFIX="$prefix" >/dev/null

grep -Eq '^[0-9]+ bytes stored in [0-9]+ bytes of memory$' "$tmp/shared.out" ||
	fail "unexpected output: $(cat "$tmp/shared.out")"
cmp -s "$tmp/shared.out" "$tmp/static.out" ||
	fail "the shared and static examples disagree"
echo "check-install: the README example, built with pkg-config, runs against" \
	"$soname and libuzram.a: $(cat "$tmp/shared.out")"
