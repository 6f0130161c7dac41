#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# plant.sh - scripts/check-layers.sh can fail: in a scratch tree of three
# units (src/low, src/high and a program folder, prog), it passes on the
# calls and includes LAYERS allows, and fails, naming the file, on each
# planted one it does not: a call upward, an include upward, a program
# that includes a library header, a program that calls past the public API,
# and in a nested program unit (prog/sub, a command under prog) an include
# and a call up into prog.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
mkdir -p src/low src/high prog/sub obj/src/low obj/src/high obj/prog/sub
cat > LAYERS <<'L'
low:
high: low
prog/sub: lib
prog: lib prog/sub
L
printf 'int low_f(void);\n' > src/low/low.h
printf 'int high_f(void);\nint uzram_g(void);\n' > src/high/high.h
printf '#include "low/low.h"\nint low_f(void) { return 1; }\n' > src/low/low.c
printf '#include "low/low.h"\n#include "high/high.h"\nint high_f(void) { return low_f(); }\nint uzram_g(void) { return 2; }\n' > src/high/high.c
printf 'int uzram_g(void);\nint main(void) { return uzram_g(); }\n' > prog/main.c
printf 'int prog_f(void);\n' > prog/prog.h
printf 'int sub_f(void);\n' > prog/sub/sub.h
printf '#include "sub.h"\nint sub_f(void) { return 3; }\n' > prog/sub/sub.c

check() { # EXPECT WHAT: run the check, want EXPECT (pass/fail) and, on fail, WHAT in its output
	local out rc=0
	for f in src/low/low src/high/high prog/main prog/sub/sub; do
		cc -Isrc -c -o "obj/$f.o" "$f.c"
	done
	out=$(bash "$top/scripts/check-layers.sh" LAYERS obj obj/src/low/low.o obj/src/high/high.o \
		obj/prog/main.o obj/prog/sub/sub.o 2>&1) || rc=$?
	if [[ $1 == pass && $rc != 0 ]] || [[ $1 == fail && $rc == 0 ]]; then
		echo "plant.sh: want $1 ($2), got exit $rc:"; echo "$out"; exit 1
	fi
	[[ $1 == pass ]] || grep -qF -- "$2" <<< "$out" ||
		{ echo "plant.sh: the failure does not say '$2':"; echo "$out"; exit 1; }
	echo "plant.sh: $1 as it should: $2"
}

check pass "the allowed graph"
cp src/low/low.c low.c.orig
printf '#include "high/high.h"\n' >> src/low/low.c
check fail 'src/low/low.c:3 includes high/high.h: low -> high'
cp low.c.orig src/low/low.c
printf 'int high_f(void);\nint low_g(void) { return high_f(); }\n' >> src/low/low.c
check fail 'low -> high is not in LAYERS: high_f'
cp low.c.orig src/low/low.c
printf '#include "high/high.h"\nint main(void) { return uzram_g(); }\n' > prog/main.c
check fail 'prog/main.c:1 includes high/high.h: prog -> high'
printf 'int uzram_g(void);\nint high_f(void);\nint main(void) { return uzram_g() + high_f(); }\n' > prog/main.c
check fail 'prog -> src/high calls what is not the public API: high_f'
printf '#include "sub/sub.h"\nint uzram_g(void);\nint main(void) { return uzram_g() + sub_f(); }\n' > prog/main.c
check pass "a nested unit below its parent"
cp prog/sub/sub.c sub.c.orig
printf '#include "../prog.h"\n' >> prog/sub/sub.c
check fail 'prog/sub/sub.c:3 includes ../prog.h: prog/sub -> prog'
cp sub.c.orig prog/sub/sub.c
printf 'int prog_f(void) { return 4; }\n' >> prog/main.c
printf 'int prog_f(void);\nint sub_g(void) { return prog_f(); }\n' >> prog/sub/sub.c
check fail 'prog/sub -> prog is not in LAYERS: prog_f'
