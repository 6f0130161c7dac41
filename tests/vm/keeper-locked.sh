#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# keeper-locked.sh PID - whether the keeper PID (uzram serve --keeper,
# doc/keep.md) holds locked in memory every page of a file that a new
# server's loader writes: for each private writable mapping of a file
# (a library's .data, the page where the loader zeroes the start of its
# .bss), a shared mapping of the same file with VmFlags "lo" that covers
# its offset. Such a page is read from the file by a copy-on-write fault;
# on a tmpfs root it may otherwise sit in swap on the keeper's own
# device, which waits for that new server (v44 on 7.3: libicudata.so's).
# Prints what is not locked and fails; used by t84 and v44.
pid=$1
awk '
	function hex(s,   v, i) {
		v = 0
		for (i = 1; i <= length(s); i++)
			v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
		return v
	}
	/^[0-9a-f]+-[0-9a-f]+ / {
		split($1, r, "-")
		lo = hex(r[1]); hi = hex(r[2])
		n++; path[n] = $6; perm[n] = $2
		off[n] = hex($3); len[n] = hi - lo; lk[n] = 0
	}
	/^VmFlags:/ { lk[n] = / lo( |$)/ }
	END {
		bad = 0
		for (i = 1; i <= n; i++) {
			if (substr(path[i], 1, 1) != "/" || perm[i] !~ /^rw-p/)
				continue
			ok = 0
			for (j = 1; j <= n && !ok; j++)
				ok = path[j] == path[i] && perm[j] ~ /s$/ && lk[j] &&
				     off[j] <= off[i] && off[i] < off[j] + len[j]
			if (!ok) {
				printf "not locked: %s at offset 0x%x\n", path[i], off[i]
				bad = 1
			}
		}
		exit bad
	}' "/proc/$pid/smaps"
