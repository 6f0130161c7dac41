#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-deb.sh DEB_DIR [CORPUS_DIR] - part of `make test` (make check-deb):
# the packages make deb built, installed into a fresh Debian 12 root by
# apt from Debian's archive, as a user would install them. In that root:
#   - apt resolves every Depends (nothing but minbase, gcc, pkg-config and
#     systemd is there before), dpkg configures them, and the postinst
#     made the server's user _uzram;
#   - uzram --version, and the program runs on the packaged libuzram.so.0;
#   - the README's example (the first ```c block) built with pkg-config
#     against libuzram-dev, shared and static, runs;
#   - uzram load on the corpus's files.tar (a round trip, compared);
#   - the packaged generator turns a sample config into units that
#     systemd-analyze verify accepts, with the installed paths;
#   - apt purges the three packages and leaves no file of theirs.
#
# The root: mmdebstrap --variant=minbase of bookworm from the host's apt
# sources, with gcc, libc6-dev, pkg-config and systemd (which every Debian
# 12 machine has, and which the package's sysusers file needs) and apt's
# package lists, made once into build/deb-root.tar (400 MB; 0.5 to 3 min,
# mostly downloads) and unpacked afresh for each run. Why not dpkg --root into an empty directory: nothing would
# resolve the Depends, and nothing could run there; why not a VM: the
# packages need no kernel of their own for this. Commands run with chroot in
# a private mount and PID namespace (unshare), so the root's /proc goes
# with it, and the root is removed at exit. BASE=FILE uses another tar.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=${1:?usage: check-deb.sh DEB_DIR [CORPUS_DIR]}
corpus=${2:-build/corpus}
base=${BASE:-build/deb-root.tar}
fail() { echo "check-deb: FAIL: $*" >&2; exit 1; }
((EUID == 0)) || fail "needs root (chroot, unshare)"
for p in uzram libuzram0 libuzram-dev; do
	compgen -G "$debs/${p}_*.deb" >/dev/null || fail "no ${p}_*.deb in $debs: run make deb"
done
[[ -s $corpus/files.tar ]] || fail "no $corpus/files.tar: bash scripts/corpus.sh $corpus 8"

if [[ ! -s $base ]]; then
	sources=()
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources; do
		[[ -s $f ]] && grep -qv '^[[:space:]]*\(#\|$\)' "$f" && sources+=("$f")
	done
	((${#sources[@]})) || fail "no apt sources on this machine for mmdebstrap"
	echo "check-deb: making $base (once) with mmdebstrap from ${sources[*]}"
	mkdir -p "$(dirname "$base")"
	timeout 900 mmdebstrap --quiet --variant=minbase --format=tar --skip=cleanup/apt/lists \
		--include=gcc,libc6-dev,pkg-config,systemd bookworm "$base.tmp" \
		"${sources[@]}" </dev/null || { rm -f "$base.tmp"; fail "mmdebstrap failed"; }
	mv "$base.tmp" "$base"
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/uzram-deb-root.XXXXXX")
trap 'rm -rf --one-file-system "$root"' EXIT
tar -xf "$base" -C "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
mkdir -p "$root/tmp/debs" "$root/tmp/t"
for p in uzram libuzram0 libuzram-dev; do
	cp "$debs/${p}"_*.deb "$root/tmp/debs/"
done
cp "$corpus/files.tar" "$root/tmp/t/"
awk '/^```c$/ { inside = 1; next } /^```$/ && inside { exit } inside' README.md \
	> "$root/tmp/t/example.c"
grep -q uzram_open "$root/tmp/t/example.c" || fail "no example program found in README.md"

# inroot CMD: run the shell command CMD in the root, stop after 300 s.
inroot()
{
	timeout 300 unshare --mount --pid --fork --mount-proc="$root/proc" \
		chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
		/bin/sh -euc "$1"
}

echo "check-deb: apt-get install of the three packages into a fresh root"
t0=$SECONDS
# The root keeps the package lists it was made with; when the archive has
# moved on since, apt-get update and once more.
inroot 'i() { apt-get -q install -y --no-install-recommends /tmp/debs/*.deb >/tmp/apt.log 2>&1; }
	i || { apt-get -q update >/dev/null && i; } || { tail -n 30 /tmp/apt.log >&2; exit 1; }' ||
	fail "apt-get install"
inroot 'getent passwd _uzram >/dev/null' || fail "the postinst made no user _uzram"

v=$(sed -n 's/^#define UZRAM_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/uzram.h | paste -sd.)
out=$(inroot 'uzram --version') || fail "uzram --version"
[[ $out == "uzram $v" ]] || fail "uzram --version says '$out', want 'uzram $v'"
# ldd's output whole first: grep -q quitting early would SIGPIPE it
deps=$(inroot 'ldd /usr/bin/uzram')
[[ $deps =~ libuzram.so.0\ =\>\ /lib/[a-z0-9_]+-linux-gnu[a-z]*/libuzram.so.0 ]] ||
	fail "uzram does not run on the packaged libuzram.so.0: $deps"

echo "check-deb: the README's example against libuzram-dev, shared and static"
inroot 'cd /tmp/t && cc -o ex-shared example.c $(pkg-config --cflags --libs uzram) &&
	libs=$(pkg-config --static --libs uzram) &&
	cc -o ex-static example.c $(pkg-config --cflags uzram) $(echo "$libs" | sed "s/-luzram/-l:libuzram.a/") &&
	./ex-shared > shared.out && ./ex-static > static.out &&
	! ldd ex-static | grep -q libuzram && cmp shared.out static.out' ||
	fail "the README example against the installed libuzram-dev"
grep -Eq '^[0-9]+ bytes stored in [0-9]+ bytes of memory$' "$root/tmp/t/shared.out" ||
	fail "the example printed: $(cat "$root/tmp/t/shared.out")"
read -r stored _ _ _ mem _ <"$root/tmp/t/shared.out"
((stored > 2 * mem)) || fail "the example does not show compression winning: $stored in $mem"

echo "check-deb: uzram load on the corpus"
inroot 'uzram load /tmp/t/files.tar --algorithm zstd > /tmp/t/load.out 2>&1' ||
	fail "uzram load: $(cat "$root/tmp/t/load.out")"

echo "check-deb: the packaged generator and units, checked by systemd-analyze verify"
inroot 'mkdir -p /etc/uzram/uzram.conf.d /tmp/gen && cat > /etc/uzram/uzram.conf.d/50-check.conf <<CONF
[swap]
type = swap
size = 1G
[tmp]
type = mount
mount-point = /tmp
mode = 1777
[disk]
type = serve
image = /var/lib/uzram/disk.img
CONF
/lib/systemd/system-generators/uzram-generator /tmp/gen /tmp/gen /tmp/gen &&
SYSTEMD_UNIT_PATH=/tmp/gen:/lib/systemd/system: systemd-analyze verify --man=no \
	uzram-swap@swap.service uzram-mount@tmp.service uzram-serve@disk.service \
	uzram-serve@disk.socket uzram-ctl@disk.socket > /tmp/verify.out 2>&1 &&
test ! -s /tmp/verify.out && rm -r /etc/uzram/uzram.conf.d' ||
	fail "generator or verify: $(cat "$root/tmp/verify.out" 2>/dev/null)"

echo "check-deb: purge"
inroot 'apt-get -q purge -y uzram libuzram0 libuzram-dev >/tmp/apt.log 2>&1 &&
	! dpkg -l uzram libuzram0 libuzram-dev 2>/dev/null | grep -q "^.[ic]" &&
	test ! -e /etc/uzram && test ! -e /usr/bin/uzram && test ! -e /lib/systemd/system/uzram-serve@.service' ||
	fail "purge left something: $(cat "$root/tmp/apt.log")"
echo "check-deb: $((SECONDS - t0)) s in the root"
echo "check-deb: uzram $v installs, runs, builds the README example and purges in a fresh Debian 12 root"
