#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t80-readme.sh - the README's commands run as printed: each ```sh block
# after a "<!-- readme-test" line, as root (when we are) and as an
# unprivileged user (nobody, with /dev/fuse made 0666 for the run as
# Debian's udev rule has it, and put back), each in a directory of its
# own whose build/ is the build under test and with HOME there, so that
# ~/ram is private to the run. A block fails the script at its first
# failing command.
source "$(dirname "$0")/functions.sh"
require nbdcopy nbdinfo nbdfuse fuse2fs fusermount3 setpriv timeout
real_server || skip_all "the README's commands need the real uzram"

README=$ITEST_DIR/../../README.md
mapfile -d '' blocks < <(python3 - "$README" <<'PY'
import sys
out, block, state = [], [], 0
for line in open(sys.argv[1]):
    if state == 0 and line.startswith("<!-- readme-test"):
        state = 1
    elif state == 1 and line.strip():
        if line.rstrip("\n") != "```sh":
            sys.exit("README.md: a readme-test mark not followed by ```sh")
        state = 2
    elif state == 2 and line.rstrip("\n") == "```":
        out.append("".join(block))
        block, state = [], 0
    elif state == 2:
        block.append(line)
sys.stdout.write("\0".join(out) + ("\0" if out else ""))
PY
)
((${#blocks[@]} >= 2)) || fail "README.md: ${#blocks[@]} readme-test blocks, want 2 or more"
build=$(dirname "$UZRAM")

step "the first screen says what it is, for whom, the ways in, then the two commands"
head -n 30 "$README" >"$T/screen"
for want in "zram in userspace" "It is for" "the Debian package" "make run" \
	"the library" "make test   #"; do
	grep -qF -- "$want" "$T/screen" || fail "README.md's first 30 lines lack '$want'"
done
first_cmd=$(grep -n '^make run ' "$T/screen" | cut -d: -f1)
ways=$(grep -n 'the Debian package' "$T/screen" | head -n 1 | cut -d: -f1)
((first_cmd > ways)) || fail "README.md gives the commands before saying what it is"
# the package line installs libuzram-dev, which the library's cc line needs
sed -n '/^apt-get install /,/[^\\]$/p' "$README" | grep -q 'libuzram-dev_' ||
	fail "README.md's apt-get install line does not install libuzram-dev"

# run_blocks USER DIR: every block, as USER (root: directly), in DIR.
run_blocks()
{
	local who=$1 dir=$2 i
	local as=()
	[[ $who == "$(id -un)" ]] || as=(setpriv --reuid="$who" --regid=nogroup --clear-groups)
	ln -s "$build" "$dir/build"
	mkdir -m 700 "$dir/run"
	[[ $who == "$(id -un)" ]] || chown -R "$who:nogroup" "$dir"
	cleanup_mount "$dir/ram"
	for ((i = 0; i < ${#blocks[@]}; i++)); do
		step "as $who: README block $((i + 1)) of ${#blocks[@]}"
		(cd "$dir" && timeout 300 "${as[@]}" env HOME="$dir" \
			UZRAM_RUNTIME_DIR="$dir/run" XDG_RUNTIME_DIR= \
			PATH="$PATH" bash -euo pipefail -c "${blocks[i]}") \
			>"$T/block.out" 2>&1 ||
			fail "as $who, this block failed:"$'\n'"${blocks[i]}"$'\n'"$(cat "$T/block.out")"
	done
	[[ -z $(ls "$dir/run") ]] || fail "as $who: the runtime directory is not empty"
}

chmod 711 "$T"
if ((EUID == 0)); then
	mkdir "$T/root"
	run_blocks root "$T/root"
	if [[ $(stat -c %a /dev/fuse) != 666 ]]; then
		on_exit chmod "$(stat -c %a /dev/fuse)" /dev/fuse
		chmod 666 /dev/fuse
	fi
	id nobody >/dev/null 2>&1 || fail "no user 'nobody'"
	setpriv --reuid=nobody --regid=nogroup --clear-groups test -x "$UZRAM" ||
		skip_all "user nobody cannot run $UZRAM"
	mkdir "$T/nobody"
	run_blocks nobody "$T/nobody"
else
	[[ -r /dev/fuse && -w /dev/fuse ]] ||
		skip_all "the mount block needs /dev/fuse read-write"
	mkdir "$T/user"
	run_blocks "$(id -un)" "$T/user"
fi
