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
#
# As root, also the README's way without a DESTDIR: make install into
# /usr/local, the first cc line as printed, and ./example run with no
# LD_LIBRARY_PATH (make install must have run ldconfig); make uninstall
# removes it all; make install PREFIX=/opt/uzram-check says what a program
# needs, and doing what it says works. That runs in a private mount
# namespace with overlays on /usr/local, /opt and /etc, which take the
# files and ld.so.cache, so the machine is left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."

make=${1:-make}
fail() { echo "check-install: FAIL: $*" >&2; exit 1; }

# The README's first build line (against the installed library).
readme_cc()
{
	awk '/<!-- check-install[ :]/ { mark = 1; next }
		mark && /^```sh$/ { inside = 1; next }
		inside && /^```$/ { exit }
		inside && /^cc / { print; exit }' README.md
}

# Inside the namespace (see the top): $1 is a scratch directory.
system_install()
{
	local dir=$1 d out lib=/usr/local/lib other=/opt/uzram-check cmd
	cmd=$(readme_cc)
	[[ $cmd == "cc "* ]] || fail "no cc line after <!-- check-install: ... --> in README.md"
	for d in usr/local opt etc; do
		mkdir -p "$dir/$d.up" "$dir/$d.work"
		mount -t overlay overlay -o "lowerdir=/$d,upperdir=$dir/$d.up,workdir=$dir/$d.work" "/$d"
	done
	mkdir "$dir/ex"
	awk '/^```c$/ { inside = 1; next } /^```$/ && inside { exit } inside' README.md \
		> "$dir/ex/example.c"
	$make --no-print-directory install >"$dir/install.out" 2>&1 ||
		fail "make install: $(cat "$dir/install.out")"
	# grep reads all of ldconfig -p (no -q): with pipefail, a grep that
	# stopped at the first match would fail the pipe by SIGPIPE.
	ldconfig -p | grep "libuzram.so.0 .*=> $lib/libuzram.so.0" >/dev/null ||
		fail "make install into /usr/local did not run ldconfig: $(cat "$dir/install.out")"
	(cd "$dir/ex" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH bash -c "$cmd") ||
		fail "the README's command failed after make install: $cmd"
	out=$(cd "$dir/ex" && env -u LD_LIBRARY_PATH ./example 2>&1) ||
		fail "./example after make install, no LD_LIBRARY_PATH: $out"
	$make --no-print-directory uninstall >"$dir/uninstall.out" 2>&1 ||
		fail "make uninstall: $(cat "$dir/uninstall.out")"
	out=$(find /usr/local -name '*uzram*' | grep -v "^/usr/local/src" || true)
	[[ -z $out ]] || fail "make uninstall left: $out"
	! ldconfig -p | grep libuzram >/dev/null || fail "make uninstall left libuzram in ld.so.cache"

	$make --no-print-directory install PREFIX=$other >"$dir/other.out" 2>&1 ||
		fail "make install PREFIX=$other: $(cat "$dir/other.out")"
	grep -qF "echo $other/lib > /etc/ld.so.conf.d/uzram.conf && ldconfig" "$dir/other.out" ||
		fail "make install PREFIX=$other does not say what to do: $(cat "$dir/other.out")"
	rm "$dir/ex/example"
	(cd "$dir/ex" && PKG_CONFIG_PATH=$other/lib/pkgconfig bash -c "$cmd")
	! (cd "$dir/ex" && env -u LD_LIBRARY_PATH ./example >/dev/null 2>&1) ||
		fail "./example found $other/lib by itself: then the message is wrong"
	echo "$other/lib" > /etc/ld.so.conf.d/uzram.conf && ldconfig
	out=$(cd "$dir/ex" && env -u LD_LIBRARY_PATH ./example 2>&1) ||
		fail "./example after doing what make install PREFIX=$other said: $out"
	$make --no-print-directory uninstall PREFIX=$other >/dev/null
	[[ ! -e $other/lib/libuzram.so ]] || fail "make uninstall PREFIX=$other left files"
	$make --no-print-directory lib >/dev/null
	echo "check-install: as root, make install into /usr/local runs ldconfig, and" \
		"./example runs with no LD_LIBRARY_PATH: $out"
}
if [[ -n ${CHECK_INSTALL_SYSTEM:-} ]]; then
	system_install "$CHECK_INSTALL_SYSTEM"
	exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uzram-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

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

if ((EUID == 0)); then
	mkdir "$tmp/sys"
	CHECK_INSTALL_SYSTEM=$tmp/sys unshare -m --propagation private bash "$0" "$make"
else
	echo "check-install: not root: make install without a DESTDIR is not checked"
fi

grep -Eq '^[0-9]+ bytes stored in [0-9]+ bytes of memory$' "$tmp/shared.out" ||
	fail "unexpected output: $(cat "$tmp/shared.out")"
# the example shows what the library is for: compression winning
read -r stored _ _ _ mem _ <"$tmp/shared.out"
((stored > 2 * mem)) ||
	fail "the README example stores $stored bytes in $mem bytes of memory:" \
		"that does not show compression winning"
cmp -s "$tmp/shared.out" "$tmp/static.out" ||
	fail "the shared and static examples disagree"
echo "check-install: the README example, built with pkg-config, runs against" \
	"$soname and libuzram.a: $(cat "$tmp/shared.out")"
