#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# load-demo.sh [UZRAM] - part of `make run`: build the full real-data corpus
# (scripts/corpus.sh: a 512 MiB tar of installed files and a Python process
# core image) and
# load each file into a fresh device with `uzram load`, which writes it,
# reads it back, compares every byte and prints the figures.
#
#   UZRAM        the program (default build/uzram)
#   CORPUS_DIR   where the corpus goes (default build/corpus-run); a folder
#                that already holds files.tar and heap-python.core is used
#                as it is (make run CORPUS=DIR)
#   CORPUS_MIB   size of files.tar in MiB (default 512)
#   ALGORITHM    codec (default lz4)
set -euo pipefail
cd "$(dirname "$0")/.."

uzram=${1:-${UZRAM:-build/uzram}}
corpus=${CORPUS_DIR:-build/corpus-run}
algorithm=${ALGORITHM:-lz4}

[[ -x $uzram ]] || { echo "load-demo: $uzram not built (run make)" >&2; exit 1; }
if [[ -s $corpus/files.tar && -s $corpus/heap-python.core ]]; then
	echo "load-demo: the corpus in $corpus"
else
	echo "load-demo: building the corpus in $corpus"
	bash scripts/corpus.sh "$corpus" "${CORPUS_MIB:-512}" >/dev/null
fi

status=0
for f in "$corpus"/files.tar "$corpus"/heap-python.core; do
	if [[ ! -s $f ]]; then
		echo "load-demo: $f is missing (scripts/corpus.sh needs gdb and python3)" >&2
		status=1
		continue
	fi
	"$uzram" load "$f" --algorithm "$algorithm" || status=1
	echo
done
exit "$status"
