#!/usr/bin/env bash
# run.sh UZRAM - `make run`: a load round trip on the real corpus (if the
# demo script exists), then `uzram serve` with a 1 GiB lz4 device on
# ./uzram.sock in the foreground. It prints how to connect; Ctrl-C stops it.
set -euo pipefail

uzram=${1:-build/uzram}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ -f $here/load-demo.sh ]]; then
	bash "$here/load-demo.sh"
fi
exec "$uzram" serve --size 1G --algorithm lz4 --socket ./uzram.sock
