#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t75-man.sh - the man pages and the bash completion agree with --help: for
# each subcommand, the options the rendered uzram-CMD(1) lists under OPTIONS
# are exactly those `uzram CMD --help` lists, `uzram --help` names each of
# them, and the completion offers each of them; every page renders with no
# warning from man; -h works for every subcommand; the completion completes
# commands, options, option values and ctl's commands.
#
# libuzram(3) names every UZRAM_API function of include/uzram.h, and
# uzram.conf(5) every key systemd/uzram-generator takes (when the tree
# has the generator).
#
# The pages and the completion are made from the option tables by
# uzram-gendoc (mk/man.mk), so this fails when a page is stale or a
# section is written by hand that should be generated.
source "$(dirname "$0")/functions.sh"
require man bash

BUILD=${UZRAM_BUILD:-$(dirname "$UZRAM")}
export MANWIDTH=100 MAN_KEEP_FORMATTING= LC_ALL=C.UTF-8

# The long options of a --help text or a rendered OPTIONS section: the
# lines that start, after blanks, with "-x, --name" or "--name".
long_options()
{
	sed -n 's/^ *\(-[a-zA-Z], \)\{0,1\}--\([a-z][a-z-]*\).*/--\2/p' | sort -u
}

# The OPTIONS section of a rendered page, up to the next section.
options_section()
{
	man -l "$1" | col -bx | awk '/^OPTIONS$/ { on = 1; next } /^[A-Z]/ { on = 0 } on'
}

top=$T/top.txt
uzram --help >"$top"
# every command uzram --help lists, so that a new one needs its page too
mapfile -t COMMANDS < <(awk '/^commands:$/ { on = 1; next } /^$/ { on = 0 }
	on { print $1 }' "$top")
((${#COMMANDS[@]} >= 6)) || fail "uzram --help lists commands: ${COMMANDS[*]}"

step "every page renders without warnings"
pages=("$BUILD"/man/*.[0-9])
((${#pages[@]} >= ${#COMMANDS[@]} + 1)) || fail "pages missing in $BUILD/man: ${pages[*]}"
for p in "${pages[@]}"; do
	w=$(man --warnings -l "$p" 2>&1 >/dev/null) || fail "man -l $p failed: $w"
	[[ -z $w ]] || fail "man -l $p warns: $w"
	man -l "$p" | grep . >/dev/null || fail "$p renders empty"
done

source "$BUILD/completion/uzram"

# complete WORD...: what _uzram offers for the last word, one a line.
complete_words()
{
	COMP_WORDS=(uzram "$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_uzram
	printf '%s\n' "${COMPREPLY[@]}"
}

for cmd in "${COMMANDS[@]}"; do
	step "$cmd: --help, -h, uzram-$cmd(1), uzram --help and the completion list the same options"
	page=$BUILD/man/uzram-$cmd.1
	[[ -s $page ]] || fail "no $page"
	uzram "$cmd" --help >"$T/$cmd.help"
	uzram "$cmd" -h >"$T/$cmd.h" || fail "uzram $cmd -h failed"
	cmp -s "$T/$cmd.help" "$T/$cmd.h" || fail "uzram $cmd -h differs from --help"
	long_options <"$T/$cmd.help" >"$T/$cmd.help.opts"
	[[ -s $T/$cmd.help.opts ]] || fail "uzram $cmd --help lists no option"
	options_section "$page" | long_options >"$T/$cmd.man.opts"
	diff -u "$T/$cmd.help.opts" "$T/$cmd.man.opts" >"$T/diff" ||
		fail "uzram-$cmd(1) and uzram $cmd --help list different options: $(cat "$T/diff")"
	# uzram --help: the block of this command, up to the next "  uzram "
	awk -v c="  uzram $cmd" 'index($0, c " ") == 1 || $0 == c { on = 1; print; next }
		/^  uzram / { on = 0 } on' "$top" >"$T/$cmd.top"
	[[ -s $T/$cmd.top ]] || fail "uzram --help has no line for $cmd"
	while read -r o; do
		[[ $o == --help ]] && continue
		grep -q -- "\[$o[] =[]" "$T/$cmd.top" ||
			fail "uzram --help does not list $o for $cmd: $(cat "$T/$cmd.top")"
	done <"$T/$cmd.help.opts"
	complete_words "$cmd" -- | sort -u | grep -- '^--[a-z-]*$' >"$T/$cmd.comp.opts"
	diff -u "$T/$cmd.help.opts" "$T/$cmd.comp.opts" >"$T/diff" ||
		fail "the completion of 'uzram $cmd --' differs from --help: $(cat "$T/diff")"
done

step "libuzram(3) names every function of uzram.h"
ROOT=$(cd "$ITEST_DIR/../.." && pwd)
# a rendered page with words hyphenated across lines joined again
rendered()
{
	man -l "$1" | col -bx | LC_ALL=C sed -e ':a' -e 'N' -e '$!ba' -e 's/\xe2\x80\x90\n *//g'
}
rendered "$BUILD/man/libuzram.3" >"$T/lib.txt"
fns=$(sed -n 's/^UZRAM_API [^(]*[ *]\(uzram_[a-z_]*\)(.*/\1/p' "$ROOT/include/uzram.h")
[[ -n $fns ]] || fail "no UZRAM_API function found in include/uzram.h"
for fn in $fns; do
	grep -q "\<$fn()" "$T/lib.txt" || fail "libuzram(3) does not name $fn()"
done

if [[ -f $ROOT/systemd/uzram-generator ]]; then
	step "uzram.conf(5) names every key of uzram-generator"
	rendered "$BUILD/man/uzram.conf.5" >"$T/conf.txt"
	# keys_TYPE="..." lists, maybe over several lines; not the $keys_x in them
	keys=$(awk '/^keys_[a-z]*="/ { on = 1; sub(/^keys_[a-z]*="/, "") }
		on { line = $0; if (sub(/".*/, "", line)) on = 0; print line }' \
		"$ROOT/systemd/uzram-generator" | tr ' \t' '\n\n' | grep -v '^\$' | grep . | sort -u)
	[[ -n $keys ]] || fail "no keys_* lists in systemd/uzram-generator"
	for k in $keys; do
		grep -q -- "\(^\|[ ,]\)$k\($\|[ ,]\)" "$T/conf.txt" || fail "uzram.conf(5) does not name the key $k"
	done
fi

step "uzram --help names each ctl command once"
for w in compact mem-limit reset-max idle recompress writeback writeback-limit \
	backing-compact train-dict save; do
	n=$(grep -c "^      $w\( \|$\)" "$top" || true)
	assert_eq "$n" 1 "ctl $w in uzram --help"
done
grep -q -- '--version' "$top" || fail "uzram --help does not name --version"

step "the completion completes commands, values and ctl's words"
assert_eq "$(complete_words se)" serve "uzram se<TAB>"
assert_eq "$(complete_words serve --ded)" --dedup "uzram serve --ded<TAB>"
assert_eq "$(complete_words serve --algorithm zs)" zstd "uzram serve --algorithm zs<TAB>"
assert_eq "$(complete_words serve --tls r)" require "uzram serve --tls r<TAB>"
assert_eq "$(complete_words mount --via f)" $'fuse\nfs' "uzram mount --via f<TAB>"
assert_eq "$(complete_words ctl --socket x.sock id)" idle "uzram ctl --socket x.sock id<TAB>"
assert_eq "$(complete_words ctl writeback type=hu | tr '\n' ' ')" \
	"type=huge type=huge_idle " "uzram ctl writeback type=hu<TAB>"
assert_eq "$(complete_words load --train)" "--train-dict
--train-dict=" "uzram load --train<TAB>"
mkdir "$T/dir-a"
assert_eq "$(cd "$T" && complete_words umount dir-)" dir-a "uzram umount dir-<TAB>"
step "the completion is the one installed by bash -i"
out=$(HOME=$T bash --norc -i -c "source '$BUILD/completion/uzram'; complete -p uzram" 2>/dev/null)
assert_eq "$out" "complete -o filenames -F _uzram uzram" "complete -p uzram"

step "README.md's every-option block is the option tables' (make readme)"
bash "$TREE/scripts/readme-options.sh" "$BUILD/uzram-gendoc" --check 2>"$T/readme.diff" ||
	fail "README.md's option block is stale: $(head -n 20 "$T/readme.diff")"

step "uzram(1)'s examples of a level run as printed; uzram.conf(5) has no stale note"
page=$(man -l "$BUILD/man/uzram.1" | col -bx | tr -s ' \n' '  ')
for ex in "--algorithm zstd --level 19" "--recomp-algorithm zstd:19"; do
	[[ $page == *"$ex"* ]] || fail "uzram(1) has no '$ex'"
done
head -c 65536 /etc/services >"$T/small"
# shellcheck disable=SC2086
uzram load "$T/small" --algorithm zstd --level 19 >/dev/null ||
	fail "uzram(1)'s --algorithm zstd --level 19 is refused"
uzram serve --size 1M --socket "$T/r.sock" --recomp-algorithm zstd:19 --run true ||
	fail "uzram(1)'s --recomp-algorithm zstd:19 is refused"
conf=$(man -l "$BUILD/man/uzram.conf.5" | col -bx)
! grep -qiE "deb branch|to be fixed|4597936" <<<"$conf" ||
	fail "uzram.conf(5) still has the note about the deb branch"
