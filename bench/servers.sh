# SPDX-License-Identifier: MIT
# servers.sh - helpers for the bench scripts that start NBD servers
# (sourced by run.sh and cluster.sh). The caller keeps the server's pid in
# $server_pid.

# rss_bytes PID: the process's resident set in bytes
rss_bytes() { echo $(($(awk '/^VmRSS:/ {print $2}' "/proc/$1/status") * 1024)); }

# wait_socket PATH PID: wait up to 10 s for the socket; fails if PID dies
wait_socket() {
	for _ in $(seq 100); do
		[[ -S $1 ]] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

stop_server() {
	kill "$server_pid" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
	server_pid=
}
