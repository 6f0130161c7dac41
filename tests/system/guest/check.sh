#!/bin/sh
# SPDX-License-Identifier: MIT
# check.sh - uzram-check.service in the guest of tests/system/boot.sh:
# RESULT lines on the console, then power off.
r() { echo "RESULT $*"; }
state=$(timeout 300 systemctl is-system-running --wait)
ok=1
check() { # WHAT CMD...
	what=$1; shift
	if "$@" >/tmp/check.out 2>&1; then r ok "$what"; else r FAIL "$what: $(cat /tmp/check.out)"; ok=0; fi
}
if [ -f /etc/uzram/uzram.conf.d/10-swap.conf ]; then
	check "swap on an nbd device" sh -c 'grep -q "^/dev/nbd" /proc/swaps'
	check "uzram-swap@swap.service active" systemctl is-active uzram-swap@swap.service
else
	r SKIP "swap: this uzram has no swapon command (issue 22)"
fi
check "/tmp is ext4" sh -c 'findmnt -n -o FSTYPE /tmp | grep -qx ext4'
check "uzram-mount@tmp.service active" systemctl is-active uzram-mount@tmp.service
check "/tmp writable" sh -c 'dd if=/dev/urandom of=/tmp/x bs=1M count=16 status=none && cmp -s /tmp/x /tmp/x && rm /tmp/x'
check "uzram-serve@disk.socket listening" systemctl is-active uzram-serve@disk.socket
check "uzram stat starts uzram-serve@disk.service through its ctl socket" \
	uzram stat --socket /run/uzram-serve/disk.sock
check "uzram-serve@disk.service active" systemctl is-active uzram-serve@disk.service
check "the server runs as _uzram" sh -c 'test "$(ps -o user= -p "$(systemctl show -p MainPID --value uzram-serve@disk.service)")" = _uzram'
check "no failed unit" sh -c 'test -z "$(systemctl list-units --failed --plain --no-legend)"'
check "systemctl is-system-running: running (is $state)" test "$state" = running
systemctl --no-pager status > /tmp/status 2>&1; r info "$(head -n 3 /tmp/status | tr '\n' ' ')"
systemctl list-units --failed --plain --no-legend | sed 's/^/RESULT info failed: /'
# what a failed unit said, so that a failure can be read from the console
for u in $(systemctl list-units --failed --plain --no-legend | awk '{ print $1 }'); do
	journalctl -b --no-pager -o cat -n 20 -u "$u" 2>&1 | sed "s|^|RESULT info $u: |"
done
[ $ok = 1 ] && r ok all
# not systemctl poweroff: without D-Bus it asks logind first, and says so in red
systemctl start --no-block --job-mode=replace-irreversibly poweroff.target
