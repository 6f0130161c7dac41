#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nbdcopy.sh [OUT.json] - sequential copies with nbdcopy into, over and out of
# `uzram serve` and nbdkit's memory plugin (sparse, zstd), the same file in one
# run; medians of NBDCOPY_REPS repetitions with the server's CPU seconds per
# phase. The work is in bench/nbdcopy.py (its docstring lists the phases and
# the NBDCOPY_* knobs). Called by run.sh; also runs on its own:
#
#   BUILD=build-h1 bash bench/nbdcopy.sh /tmp/nbdcopy.json
#
# OUT.json defaults to bench/out/raw/nbdcopy.json. Needs nbdcopy (libnbd-bin),
# nbdkit and fio with its nbd engine; exits 3 if nbdcopy is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/out/raw/nbdcopy.json}
export BUILD=${BUILD:-build}
command -v nbdcopy >/dev/null || { echo "nbdcopy.sh: nbdcopy is not installed" >&2; exit 3; }
[[ -x $BUILD/uzram ]] || { echo "nbdcopy.sh: no $BUILD/uzram" >&2; exit 3; }
mkdir -p "$(dirname "$out")"
exec python3 bench/nbdcopy.py "$out"
