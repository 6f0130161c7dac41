#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# readme-options.sh GENDOC [--check] - README.md's "every option, in full"
# block is `uzram-gendoc readme`: the option tables, as `uzram --help` and
# the man pages are. Without --check, write it into README.md (make
# readme); with --check, fail, showing the difference, when README.md's
# block is not that (tests/integration/t75-man.sh).
#
# The block is the ``` fence after the line that starts with
# "<!-- options:".
set -euo pipefail
cd "$(dirname "$0")/.."

gendoc=$1
mode=${2:-write}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uzram-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$gendoc" readme >"$tmp/block"
grep -q '^<!-- options:' README.md ||
	{ echo "readme-options: no <!-- options: ... --> line in README.md" >&2; exit 1; }
# README.md with the block replaced: the fence after the marker, up to
# its closing fence, becomes the generated text.
awk -v block="$tmp/block" '
	/^<!-- options:/ { print; mark = 1; next }
	mark == 1 && /^```/ { print; while ((getline l < block) > 0) print l
		mark = 2; next }
	mark == 2 { if (/^```$/) { print; mark = 3 } next }
	{ print }' README.md >"$tmp/README.md"
if [[ $mode == --check ]]; then
	diff -u README.md "$tmp/README.md" >&2 || {
		echo "readme-options: README.md's option block is not what the option" \
			"tables say; run make readme" >&2
		exit 1
	}
else
	cmp -s README.md "$tmp/README.md" || cp "$tmp/README.md" README.md
fi
