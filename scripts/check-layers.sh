#!/bin/bash
# SPDX-License-Identifier: MIT
# check-layers.sh LAYERS OBJROOT OBJ...: the calls between the tree's
# units are the ones LAYERS declares, and nothing loops.
#
# The OBJs are the object files under OBJROOT by source folder
# (build/obj/src/core/store.o, build/obj/cli/main.o, ...; the Makefile
# passes those of the current sources, so a stale object does not count).
# A unit is a folder: src/NAME is the library's
# subsystem NAME, any other folder the program unit of its path, nested
# or not (cli is the program's top, cli/mount its mount command). For
# every object, the symbols it leaves undefined that another unit's object
# defines are calls from its unit into that one. The script fails, saying
# which symbols make the edge, on:
#   - a call from A into B that A's line in LAYERS does not list (a
#     program folder that lists `lib` may call the library's uzram_*
#     functions, and only those);
#   - a unit that has objects but no line in LAYERS;
#   - a loop in the graph LAYERS declares, of any length (tsort);
#   - a loop of any length between the files of one folder;
#   - two source files of the same name, in any folders;
#   - an #include "PATH/..." in a unit's .c or .h file (read from the
#     source folder of each object; PATH resolved next to the includer,
#     else under src/, else from the top of the tree: "../base/base.h",
#     "core/core.h", "../../ctl/ctl.h") of a unit that its line does not
#     list. An include is a
#     dependency even where no call follows it: a header of a layer above
#     is a loop in waiting, and a program folder that lists `lib` includes
#     only uzram.h of the library.
# Since every real edge must be declared and the declared graph has no
# loop, the units' real graph has none either.
set -euo pipefail

[[ $# -ge 3 ]] || { echo "usage: $0 LAYERS OBJROOT OBJ..." >&2; exit 2; }
layers=$1 root=$2
shift 2
NM=${NM:-nm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# LAYERS: "unit: dep dep ..." lines; # starts a comment.
declare -A allowed=()
while IFS= read -r line; do
	line=${line%%#*}
	[[ $line =~ ^[[:space:]]*$ ]] && continue
	[[ $line =~ ^([a-z0-9_/]+):(.*)$ ]] ||
		{ echo "check-layers: $layers: cannot read line '$line' (want 'unit: units')" >&2; exit 2; }
	allowed[${BASH_REMATCH[1]}]=" $(echo ${BASH_REMATCH[2]}) "
done < "$layers"

# The unit of a source folder: src/NAME is the library's NAME; any other
# folder, nested or not (cli, cli/mount), is the program unit of its path.
unit_of() {
	case $1 in src/*) local u=${1#src/}; echo "${u%%/*}" ;; *) echo "$1" ;; esac
}

# The file an #include "H" in folder DIR names, relative to the top: H
# next to the includer, else under src/ (the library's -Isrc), else from
# the top; nothing if none exists (a system or generated header).
include_target() {
	local c
	for c in "$1/$2" "src/$2" "$2"; do
		if [[ -f $c ]]; then realpath -m --relative-to=. "$c"; return; fi
	done
}

# Each object's unit, its defined and its undefined symbols: one nm for
# all the objects (-A names each line's object), as each nm loads the
# linker plugins anew, which cost more than the reading.
objs=()
for o in "$@"; do
	rel=${o#"$root"/}
	dir=${rel%/*} base=${rel##*/}
	unit=$(unit_of "$dir")
	[[ $dir == src/*/* ]] && { echo "check-layers: $o: the library's folders nest deeper than one unit" >&2; exit 2; }
	objs+=("$unit:$o")
	echo "$o $unit ${base%.o}"
done > "$tmp/units"
[[ ${#objs[@]} -gt 0 ]] || { echo "check-layers: no object files under $root" >&2; exit 2; }

bad=0
for uo in "${objs[@]}"; do
	unit=${uo%%:*}
	if [[ -z ${allowed[$unit]+set} ]]; then
		echo "check-layers: $unit (${uo#*:}) has no line in $layers"
		bad=1
	fi
done

# The undefined symbols another unit's object defines are edges between
# units ("from to symbol"); those defined in another file of the same
# unit, edges between its files ("unit file tofile", each file also an
# edge to itself, so tsort knows it).
"$NM" -A --defined-only -g "$@" > "$tmp/defs"
"$NM" -A --undefined-only -g "$@" > "$tmp/undefs"
awk -v edges="$tmp/edges" -v files="$tmp/files" '
	FILENAME == ARGV[1] { unit[$1] = $2; base[$1] = $3
		print $2, $3, $3 > files; next }
	{ o = $1; sub(/:.*$/, "", o); sym = $NF }
	FILENAME == ARGV[2] { if (NF >= 3 && !(sym in def)) {
			def[sym] = unit[o]; deffile[sym] = base[o] }
		next }
	!(sym in def) { next }
	def[sym] == unit[o] { if (deffile[sym] != base[o])
			print unit[o], base[o], deffile[sym] > files
		next }
	{ print unit[o], def[sym], sym > edges }
' "$tmp/units" "$tmp/defs" "$tmp/undefs"
touch "$tmp/edges" "$tmp/files"

# The edges between units, against LAYERS.
lib_units=" "
for uo in "${objs[@]}"; do
	o=${uo#*:}
	if [[ ${o#"$root"/} == src/* && $lib_units != *" ${uo%%:*} "* ]]; then
		lib_units+="${uo%%:*} "
	fi
done
while read -r from to; do
	deps=${allowed[$from]:- }
	if [[ $deps == *" $to "* ]]; then
		continue
	fi
	syms=$(awk -v a="$from" -v b="$to" '$1 == a && $2 == b { print $3 }' "$tmp/edges" | sort -u)
	if [[ $deps == *" lib "* && $lib_units == *" $to "* ]]; then
		syms=$(grep -v '^uzram_' <<< "$syms" || true)
		[[ -z $syms ]] && continue
		echo "check-layers: $from -> src/$to calls what is not the public API: $(paste -sd' ' <<< "$syms")"
	else
		echo "check-layers: $from -> $to is not in $layers: $(paste -sd' ' <<< "$syms")"
	fi
	bad=1
done < <(awk '{ print $1, $2 }' "$tmp/edges" | sort -u)

# The includes between units, against LAYERS: every .c and .h file of the
# folders the objects come from.
declare -A seen_dir=()
for uo in "${objs[@]}"; do
	unit=${uo%%:*} o=${uo#*:}
	dir=${o#"$root"/} dir=${dir%/*}
	[[ -n ${seen_dir[$dir]+set} ]] && continue
	seen_dir[$dir]=1
	deps=${allowed[$unit]:- }
	srcs=()
	for src in "$dir"/*.c "$dir"/*.h; do
		[[ -f $src ]] && srcs+=("$src")
	done
	[[ ${#srcs[@]} -gt 0 ]] || continue
	while read -r src lineno header; do
		target=$(include_target "$dir" "$header")
		[[ -n $target ]] || continue
		to=$(unit_of "${target%/*}")
		[[ $to == "$unit" || $deps == *" $to "* ]] && continue
		if [[ -n ${allowed[$to]+set} ]]; then
			echo "check-layers: $src:$lineno includes $header: $unit -> $to is not in $layers"
			bad=1
		fi
	done < <(awk 'match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]*\/[^"]*"/) {
		h = $0; sub(/^[^"]*"/, "", h); sub(/".*$/, "", h)
		print FILENAME, FNR, h }' "${srcs[@]}")
done

# File names are unique across the tree.
dups=$(for o in "$@"; do basename "$o"; done | sort | uniq -d | paste -sd' ')
if [[ -n $dups ]]; then
	echo "check-layers: two source files share a name: $dups"
	bad=1
fi

# The declared graph has no loop (tsort names one if it has).
for u in "${!allowed[@]}"; do
	echo "$u $u"
	for d in ${allowed[$u]}; do echo "$d $u"; done
done > "$tmp/declared"
if ! tsort "$tmp/declared" > /dev/null 2> "$tmp/tsort"; then
	echo "check-layers: $layers declares a loop:"
	sed "s|^tsort: $tmp/declared: ||; s/^tsort: //" "$tmp/tsort"
	bad=1
fi

# No loop between the files of one folder.
for unit in $(awk '{ print $1 }' "$tmp/files" | sort -u); do
	if ! awk -v u="$unit" '$1 == u { print $3, $2 }' "$tmp/files" | tsort > /dev/null 2> "$tmp/tsort"; then
		echo "check-layers: the files of $unit call each other in a loop:"
		sed "s|^tsort: -: ||; s/^tsort: //" "$tmp/tsort"
		bad=1
	fi
done

[[ $bad == 0 ]] || { echo "check-layers: fix the call, or move what both sides use below both (a hook for a call upward; see $layers)" >&2; exit 1; }
echo "check-layers: $(awk '{ print $1, $2 }' "$tmp/edges" | sort -u | wc -l) edges between $(printf '%s\n' "${objs[@]}" | cut -d: -f1 | sort -u | wc -l) units, all in $layers; no loop"
