#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# corpora.sh OUT_DIR - five corpora of other kinds and sizes than make
# test's, each a folder for CORPUS=DIR (scripts/corpus.sh's layout), to
# check that the tests hold on any corpus:
#
#   doc    32 MiB  man pages (man1, man3) and /usr/share/doc: mostly gzip
#   text    6 MiB  headers, the Python library, Perl's: 2 MiB each
#   bin    64 MiB  /usr/bin and /usr/sbin: ELF binaries
#   mem    32 MiB  core images of three processes (Perl, Python, bash)
#   mixed   4 MiB  1 MiB each of docs, binaries, headers, Python
#
# They share one Python core image (OUT_DIR/doc's; files.tar is what
# differs), linked. Then, one corpus at a time:
#
#   make check-unit CORPUS=OUT_DIR/doc
#   make check-integration CORPUS=OUT_DIR/doc T=t28
#
# Folders already complete (a MANIFEST) are kept: delete one to rebuild
# it. Needs what corpus.sh needs (python3, gdb's gcore).
set -euo pipefail

out=${1:?usage: corpora.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
say() { printf 'corpora.sh: %s\n' "$*" >&2; }

# corpus NAME MIB DIRS: one corpus, with the shared core image.
corpus()
{
	local dir=$out/$1
	[[ -s $dir/MANIFEST ]] && return
	mkdir -p "$dir"
	if [[ $1 != doc && ! -s $dir/heap-python.core ]]; then
		ln -f "$out/doc/heap-python.core" "$dir/" 2>/dev/null ||
			cp "$out/doc/heap-python.core" "$dir/"
	fi
	say "$1: $2 MiB of $3"
	CORPUS_DIRS=$3 bash "$here/corpus.sh" "$dir" "$2" >/dev/null
}

# Core images of three small processes holding data of their own kinds,
# for the mem corpus's files.tar; in a folder under /tmp, as corpus.sh
# takes directories under /.
dump_processes()
{
	local img pids=() p
	img=$(mktemp -d /tmp/uzram-corpora.XXXXXX)
	trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$img"' EXIT
	perl -e 'my %h; $h{"key$_"} = join(",", map { $_ * 7 } 1..8) for 1..40000;
		open(my $f, ">", $ARGV[0]); close $f; sleep 120' "$img/.perl" &
	pids+=($!)
	python3 -c '
import array, random, sys, time
r = random.Random(1)
a = array.array("d", (r.gauss(0, 1) for _ in range(300000)))
s = [("item-%d" % i) * 3 for i in range(60000)]
open(sys.argv[1], "w").close()
time.sleep(120)' "$img/.python" &
	pids+=($!)
	bash -c 'declare -A m; for ((i = 0; i < 20000; i++)); do m[k$i]="value $i"; done
		: >"$1"; sleep 120' bash "$img/.bash" &
	pids+=($!)
	for _ in $(seq 300); do
		[[ -e $img/.perl && -e $img/.python && -e $img/.bash ]] && break
		sleep 0.2
	done
	for p in "${pids[@]}"; do
		gcore -o "$img/core" "$p" >/dev/null 2>&1 ||
			say "gcore of $p failed"
	done
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -f "$img"/.perl "$img"/.python "$img"/.bash
	corpus mem 32 "${img#/}"
	rm -rf "$img"
	trap - EXIT
}

CORPUS_SEED=3 corpus doc 32 "usr/share/man/man1:12 usr/share/man/man3:4 usr/share/doc"
corpus text 6 "usr/include:2 usr/lib/python3.*:2 usr/share/perl5"
corpus bin 64 "usr/bin usr/sbin"
corpus mixed 4 "usr/share/doc:1 usr/bin:1 usr/include:1 usr/lib/python3*"
[[ -s $out/mem/MANIFEST ]] || dump_processes
for d in doc text bin mem mixed; do
	printf '%-6s %s\n' "$d" "$(head -n 1 "$out/$d/MANIFEST")"
done
