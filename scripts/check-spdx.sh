#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-spdx.sh [--fix] - every source file, script, build file, unit and man
# page source of the tree names its licence, MIT, in an SPDX line within its
# first three lines (the kernel's rule: after the #! line where there is one).
# Data (test inputs, corpora, pictures) and prose (*.md) carry none.
# With --fix, adds the line where it is missing, in the file's comment style.
set -euo pipefail
cd "$(dirname "$0")/.."

tag='SPDX-License-Identifier: MIT'

# The files that must carry it: by name, from git's list when this is a
# checkout (so build output never counts), else from find.
list() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files --cached --others --exclude-standard
	else
		find . -type f -not -path './build*' -printf '%P\n'
	fi | grep -E '(\.(c|h|sh|py|mk|scd|fio|service|socket|conf)$|(^|/)(Makefile|LAYERS|rules|run|init|uzram-generator)$)' |
		grep -v -E '^(tests/fuzz/corpus/|debian/source/)' || true
}

comment_for() {
	case $1 in
	*.c) echo "// $tag" ;;
	*.h) echo "/* $tag */" ;;
	*.scd | *.fio) echo "; $tag" ;;
	*) echo "# $tag" ;;
	esac
}

fix=0
[[ ${1-} == --fix ]] && fix=1
bad=0
while IFS= read -r f; do
	[[ -f $f ]] || continue
	head -n 3 "$f" | grep -qF "$tag" && continue
	if ((fix)); then
		line=$(comment_for "$f")
		# After a #! line, and after scdoc's title line (its first line
		# must be the page's name).
		if head -n 1 "$f" | grep -q '^#!' || [[ $f == *.scd ]]; then
			sed -i "1a\\$line" "$f"
		else
			sed -i "1i\\$line" "$f"
		fi
	else
		echo "check-spdx: $f: no '$tag' line in its first three lines" >&2
		bad=1
	fi
done < <(list)
((bad == 0)) || exit 1
echo "check-spdx: every source file names its licence (MIT)"
