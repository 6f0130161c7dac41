#!/bin/bash
# SPDX-License-Identifier: MIT
# test-summary.sh DIR - what failed in make test, printed last: for each
# phase whose status (DIR/PHASE.rc, written by mk/test.mk's test-timed-%)
# is not 0, the lines of its log (DIR/PHASE.log) that say what failed.
#
# Why: make test runs its phases two at a time, and a phase that fails
# early is followed by the whole output of the one beside it; CI keeps
# only the end of the log, so without this the failing check's own line
# (which test, which check, its message) is often not in what CI shows.
dir=${1:?usage: test-summary.sh DIR}
# a failed check of any of our runners, a compiler's or make's error, and
# what a guest's kernel says when it kills, hangs or panics
pattern='RESULT .* FAIL|^not ok|^FAIL|\[  FAILED  \]|: FAIL|error:|\*\*\* .* Error [0-9]|Killed process|Out of memory|hung_task|blocked for more than|Kernel panic|BUG:|Oops|timed out|VM-TIMEOUT'
failed=0
for rc in "$dir"/*.rc; do
	[[ -e $rc ]] || continue
	[[ $(cat "$rc") == 0 ]] && continue
	phase=$(basename "$rc" .rc)
	failed=$((failed + 1))
	echo "== make test: $phase failed (status $(cat "$rc")); what its log says:"
	grep -aE "$pattern" "$dir/$phase.log" | tail -n 40 | sed 's/^/  /'
done
((failed)) || echo "== make test: no phase failed by its status; see the log above"
exit 0
