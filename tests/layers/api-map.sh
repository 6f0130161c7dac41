#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# api-map.sh - doc/layout.md's table "Which file defines each public
# function" names every UZRAM_API function of src/ with the file that
# defines it, and nothing else.
set -euo pipefail
cd "$(dirname "$0")/../.."
code=$(grep -rn '^UZRAM_API' src | sed 's/(.*//' |
	awk -F: '{ n = split($3, a, /[ *]+/); print a[n], $1 }' | sort)
doc=$(sed -n '/^## Which file defines each public function/,/^## /p' doc/layout.md |
	sed -n 's/^| `\(uzram_[a-z0-9_]*\)()` | \([^ ]*\) |$/\1 \2/p' | sort)
[[ -n $code ]] || { echo "api-map.sh: no UZRAM_API function found in src/" >&2; exit 1; }
if [[ $code != "$doc" ]]; then
	echo "api-map.sh: doc/layout.md's table of public functions is not the code's (< code, > doc):" >&2
	diff <(echo "$code") <(echo "$doc") | grep '^[<>]' >&2
	exit 1
fi
echo "api-map.sh: the $(wc -l <<< "$code") public functions are in doc/layout.md by their files"
