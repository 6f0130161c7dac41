#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# help.sh - every target that `make help` (mk/help.mk) lists is a target
# of the Makefile, so the list cannot name one that was renamed or removed.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=$( (make -pRrq -f Makefile : 2>/dev/null || true) | sed -n 's/^\([a-z][a-z0-9_-]*\):.*/\1/p' | sort -u)
listed=$(make --no-print-directory help | sed -n 's/^  \([a-z][a-z0-9 /_-]*[a-z0-9]\)  .*/\1/p; s/^  \([a-z][a-z0-9 /_-]*[a-z0-9]\)$/\1/p' |
	tr '/' '\n' | tr -d ' ' | grep . | sort -u)
[[ $(wc -l <<< "$listed") -ge 20 ]] || { echo "help.sh: make help lists only: $listed" >&2; exit 1; }
missing=$(comm -23 <(echo "$listed") <(echo "$targets"))
[[ -z $missing ]] || { echo "help.sh: make help lists what is no target: $missing" >&2; exit 1; }
echo "help.sh: the $(wc -l <<< "$listed") targets make help lists are all targets"
