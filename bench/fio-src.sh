#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fio-src.sh DIR - unpack the Debian source of the INSTALLED fio into DIR and
# run its ./configure (DIR/current links to it), so that the uzram fio engine compiles against exactly
# the headers (and config-host.h) of the fio that will load it.
#
# apt-get source needs a deb-src line. If none is configured for the
# installed release and we are root, this adds one in its own file,
# /etc/apt/sources.list.d/uzram-deb-src.sources, mirroring the existing
# "deb" entries (same URIs, suites, components and keyring), and runs
# apt-get update. It never edits the existing files.
set -euo pipefail
dir=${1:?usage: fio-src.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

ver=$(dpkg-query -W -f='${Version}' fio 2>/dev/null) || {
	echo "fio-src: fio is not installed (scripts/deps.sh bench)" >&2; exit 1; }
upstream=${ver%-*}
upstream=${upstream#*:}
src="$dir/fio-$upstream"
if [[ -f $src/config-host.h && -f $src/.uzram-version && $(<"$src/.uzram-version") == "$ver" ]]; then
	ln -sfn "fio-$upstream" "$dir/current"
	echo "$src"
	exit 0
fi

has_deb_src() {
	grep -rqsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' \
		/etc/apt/sources.list /etc/apt/sources.list.d/
}

if ! has_deb_src; then
	if ((EUID != 0)); then
		cat >&2 <<-MSG
		fio-src: apt-get source needs a deb-src entry and none is configured.
		As root, add one mirroring your deb entry, e.g.
		  sed 's/^Types: deb\$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \\
		    > /etc/apt/sources.list.d/uzram-deb-src.sources && apt-get update
		then run make bench again.
		MSG
		exit 1
	fi
	python3 - <<'PY'
import glob, re
out = []
# deb822 stanzas: copy every stanza whose Types has "deb", as deb-src.
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
	for stanza in open(path).read().split("\n\n"):
		m = re.search(r"^Types:(.*)$", stanza, re.M)
		if not m or "deb" not in m.group(1).split():
			continue
		if re.search(r"^Enabled:\s*no", stanza, re.M | re.I):
			continue
		s = re.sub(r"^Types:.*$", "Types: deb-src", stanza, flags=re.M)
		out.append("\n".join(l for l in s.splitlines() if l.strip()))
# one-line format
lines = []
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
	try:
		for l in open(path):
			if re.match(r"\s*deb\s", l):
				lines.append(re.sub(r"^\s*deb\s", "deb-src ", l.rstrip()))
	except OSError:
		pass
hdr = "# Added by uzram bench/fio-src.sh for `apt-get source fio`.\n"
if out:
	open("/etc/apt/sources.list.d/uzram-deb-src.sources", "w").write(hdr + "\n\n".join(out) + "\n")
if lines:
	open("/etc/apt/sources.list.d/uzram-deb-src.list", "w").write(hdr + "\n".join(lines) + "\n")
if not out and not lines:
	raise SystemExit("fio-src: no deb entry found to mirror")
PY
	echo "fio-src: added a deb-src entry under /etc/apt/sources.list.d/, running apt-get update" >&2
	apt-get update >&2
fi

rm -rf "$dir"
mkdir -p "$dir"
(cd "$dir" && apt-get source --download-only "fio=$ver" >&2 &&
	dpkg-source --no-check -x ./fio_*.dsc "fio-$upstream" >&2)
# Only the headers and config-host.h are needed, not a fio build.
(cd "$src" && ./configure --disable-native >"$dir/configure.log" 2>&1) || {
	echo "fio-src: fio ./configure failed, see $dir/configure.log" >&2; exit 1; }
echo "$ver" > "$src/.uzram-version"
ln -sfn "fio-$upstream" "$dir/current"
echo "$src"
