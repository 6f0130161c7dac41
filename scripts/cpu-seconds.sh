#!/bin/sh
# SPDX-License-Identifier: MIT
# cpu-seconds.sh FILE - the CPU seconds (user + system) of the children
# in FILE, the output of the shell's `times` (its second line: "1m2.5s
# 0m3.25s" in dash, "1m2.500s 0m3.250s" in bash), rounded down; "?" when
# FILE has no such line. mk/test.mk's timed phases.
awk 'NR == 2 {
	s = 0
	for (i = 1; i <= 2; i++) {
		split($i, a, "m"); sub("s", "", a[2]); s += a[1] * 60 + a[2]
	}
	printf "%d\n", s; found = 1
} END { if (!found) print "?" }' "$1" 2>/dev/null || echo "?"
