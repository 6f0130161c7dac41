#!/bin/sh
# SPDX-License-Identifier: MIT
# setup.sh - run in the guest's root by tests/system/boot.sh (mmdebstrap's
# customize hook): the config, the check unit, and a smaller root.
set -eu
mkdir -p /etc/uzram/uzram.conf.d
# uzram swapon comes with issue 22 (the vm branch); a build without it
# gets no swap section, and the check says so.
if uzram swapon --help >/dev/null 2>&1; then
	cat > /etc/uzram/uzram.conf.d/10-swap.conf <<'CONF'
[swap]
type = swap
size = 256M
algorithm = lz4
swap-priority = 100
CONF
fi
cat > /etc/uzram/uzram.conf <<'CONF'
[tmp]
type = mount
mount-point = /tmp
size = 256M
mode = 1777
owner = 0:0

[disk]
type = serve
size = 64M
image = /var/lib/uzram/disk.img
CONF
install -m 755 /tmp/guest/check.sh /usr/local/sbin/uzram-check
cat > /etc/systemd/system/uzram-check.service <<'UNIT'
[Unit]
Description=uzram boot check (tests/system)
After=multi-user.target
[Service]
# simple: its own start is no job that keeps the boot from ending
Type=simple
ExecStart=/usr/local/sbin/uzram-check
StandardOutput=tty
TTYPath=/dev/ttyS0
[Install]
WantedBy=multi-user.target
UNIT
systemctl enable uzram-check.service
systemctl set-default multi-user.target
# No login prompt, no network: the guest has neither.
systemctl mask getty@tty1.service serial-getty@ttyS0.service \
	systemd-networkd.service systemd-timesyncd.service 2>/dev/null || true
echo uzram-guest > /etc/hostname
# Only the modules the job needs (nbd, loop, fuse, ext4 and theirs).
for v in /lib/modules/*; do
	keep=$(modprobe -S "${v##*/}" --show-depends -a nbd loop fuse ext4 2>/dev/null |
		awk '$1 == "insmod" { print $2 }' | sort -u)
	find "$v/kernel" -name '*.ko*' | while read -r m; do
		echo "$keep" | grep -qxF "$m" || rm -f "$m"
	done
	depmod "${v##*/}"
done
rm -rf /usr/share/doc /usr/share/man /usr/share/locale /var/cache/apt/*.bin /tmp/guest
