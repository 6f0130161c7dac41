#!/bin/bash
# check-cycles.sh OBJDIR...: no two files of one folder may each use a
# symbol the other defines.
#
# Each OBJDIR holds the object files of one source folder (build/obj/src,
# ...). For every ordered pair of objects A, B in a folder, the symbols A
# leaves undefined and B defines are the edge A -> B. A pair with edges both
# ways is a cycle between the two files: the folder no longer reads from the
# top down. Every such pair is printed with the symbols of each direction,
# and the script fails if there is one. Longer cycles (A -> B -> C -> A) are
# not looked for; the two-file rule is the one the tree keeps.
set -euo pipefail

[[ $# -gt 0 ]] || { echo "usage: $0 OBJDIR..." >&2; exit 2; }
NM=${NM:-nm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bad=0
for dir in "$@"; do
	objs=("$dir"/*.o)
	[[ -e ${objs[0]} ]] || { echo "check-cycles: no object files in $dir" >&2; exit 2; }
	for o in "${objs[@]}"; do
		b=$(basename "$o" .o)
		"$NM" --defined-only -g "$o" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/$b.def"
		"$NM" --undefined-only -g "$o" | awk '{ print $NF }' | sort -u > "$tmp/$b.und"
	done
	for a in "${objs[@]}"; do
		a=$(basename "$a" .o)
		for b in "${objs[@]}"; do
			b=$(basename "$b" .o)
			[[ $a < $b ]] || continue
			ab=$(comm -12 "$tmp/$a.und" "$tmp/$b.def" | paste -sd' ')
			ba=$(comm -12 "$tmp/$b.und" "$tmp/$a.def" | paste -sd' ')
			[[ -n $ab && -n $ba ]] || continue
			echo "check-cycles: $dir: $a <-> $b"
			echo "  $a uses from $b: $ab"
			echo "  $b uses from $a: $ba"
			bad=1
		done
	done
	rm -f "$tmp"/*.def "$tmp"/*.und
done
[[ $bad == 0 ]] || { echo "check-cycles: files call each other; move the shared part into a file below both" >&2; exit 1; }
echo "check-cycles: no cycle between two files in $*"
