#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh [UZRAM] - `make run`: a load round trip on the real corpus
# (scripts/load-demo.sh, if present), then `uzram serve` with a 1 GiB lz4
# device on ./uzram.sock in the foreground. It prints the URI and how to
# attach with nbd-client, qemu and nbdfuse; Ctrl-C stops it and removes the
# socket.
set -euo pipefail

uzram=${1:-build/uzram}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

[[ -x $uzram ]] || { echo "run: $uzram not built (run make)" >&2; exit 1; }
uzram=$(cd "$(dirname "$uzram")" && pwd)/$(basename "$uzram")

if [[ -f $here/load-demo.sh ]]; then
	if ! bash "$here/load-demo.sh" "$uzram"; then
		echo "run: the load demo failed (see above); serving anyway" >&2
	fi
	echo
fi
echo "run: serving a 1 GiB lz4 device; Ctrl-C stops it"
exec "$uzram" serve --size 1G --algorithm lz4 --socket ./uzram.sock
