# SPDX-License-Identifier: MIT
# v40-ublk.sh - `uzram serve --ublk` as a real block device on Linux 6.12:
# its queue limits come from the cluster size; mkfs.ext4, an untar of the
# corpus compared with the same untarred in RAM, e2fsck; fio verify with several jobs;
# discard gives the memory back; idle queues give their buffers back; the
# same in --ublk-copy=user; SIGTERM
# removes the device and leaves no node behind.
# vm-kernel: 6.12
# vm-mem: 1024
# vm-timeout: 900
# vm-modules: ublk_drv ext4
# vm-programs: fio mkfs.ext4
# vm-data: files.tar
source /guest-lib.sh

# The /dev/ublkbN that the server NAME announced.
ublk_of() { sed -n 's/^uzram serve: block device //p' "/run/$1.out"; }
stat_of() { uzram stat --socket "/run/$1.sock" --all | awk -v k="$2" '$1 == k { print $2 }'; }
# SIGTERM to the server $1, and its exit status within 60 s.
stop()
{
	local killer rc
	kill -TERM "$1" || return 1
	(sleep 60; kill -KILL "$1") 2>/dev/null & killer=$!
	wait "$1"; rc=$?
	kill "$killer" 2>/dev/null
	return "$rc"
}
gone() { ! test -e "$1" && ! ls /sys/class/ublk-char/ 2>/dev/null | grep -q .; }

if ! uzram_start u1 --ublk --size 512M --cluster 16K; then
	fail start "uzram serve --ublk did not start"
	finish
fi
dev=$(ublk_of u1)
q=/sys/block/${dev#/dev/}/queue
check block-device test -b "$dev"
check limits bash -c "[[ \$(cat $q/logical_block_size) == 4096 && \
	\$(cat $q/physical_block_size) == 16384 && \
	\$(cat $q/discard_granularity) == 16384 && \
	\$(( \$(cat $q/max_sectors_kb) % 16 )) == 0 ]]"
info "limits: lbs $(cat $q/logical_block_size) pbs $(cat $q/physical_block_size)" \
	"max_sectors_kb $(cat $q/max_sectors_kb) discard_granularity $(cat $q/discard_granularity)"

mkdir -p /mnt/u
check mkfs bounded 180 mkfs.ext4 -q "$dev"
check mount bounded 60 mount -t ext4 "$dev" /mnt/u
check untar bounded 300 tar -C /mnt/u -xf /data/files.tar
check sync bounded 120 sync
# every name, and the bytes of every regular file (the corpus has
# dangling links, which diff -r would follow)
tree_sum()
{
	(cd "$1" && find . -path ./lost+found -prune -o -print | sort &&
		find . -path ./lost+found -prune -o -type f -print | sort |
		xargs md5sum)
}
mkdir -p /tmp/ref && tar -C /tmp/ref -xf /data/files.tar
tree_sum /tmp/ref > /tmp/ref.sum
tree_sum /mnt/u > /tmp/u.sum
check compare cmp /tmp/u.sum /tmp/ref.sum
info "compared $(wc -l < /tmp/ref.sum) names and sums"
rm -rf /tmp/ref
check umount bounded 60 umount /mnt/u
check e2fsck bounded 180 e2fsck -fn "$dev"

# four jobs, each on its own 64M, writing and verifying with crc32c
check fio-verify bounded 400 fio --name=verify --filename="$dev" \
	--ioengine=io_uring --direct=1 --rw=randwrite --bs=4k,64k --iodepth=8 \
	--numjobs=4 --size=16M --offset_increment=64M --verify=crc32c \
	--verify_fatal=1 --group_reporting=1 --eta=never --output=/tmp/fio-verify.out
grep -q "err= 0" /tmp/fio-verify.out || tail -20 /tmp/fio-verify.out

# discard: the whole device back to holes, its memory given back
bounded 60 dd if=/data/files.tar of="$dev" bs=1M seek=400 oflag=direct 2>/dev/null
before=$(stat_of u1 mem_used_total)
check blkdiscard bounded 120 blkdiscard -f "$dev"
uzram ctl --socket /run/u1.sock compact > /dev/null
after=$(stat_of u1 mem_used_total)
stored=$(stat_of u1 pages_stored)
info "discard: mem_used_total $before -> $after, pages_stored $stored"
check discard-frees bash -c "(( $stored == 0 && $after * 4 < $before ))"
bounded 60 dd if="$dev" of=/tmp/z bs=1M skip=400 count=1 iflag=direct 2>/dev/null
check read-zeroes cmp -n 1048576 /tmp/z /dev/zero

# idle buffers go back: 32 writes of 256 KiB in flight touch 8 MiB of the
# tags' buffers; a second after the last request the queues give them
# back. What the server holds beyond its device's memory (RssAnon minus
# mem_used_total), at most while fio runs and after 3 s of quiet:
overhead_kib()
{
	echo $(($(awk '/^RssAnon/ { print $2 }' "/proc/$UZRAM_PID/status") -
		$(stat_of u1 mem_used_total) / 1024))
}
( m=0; while sleep 0.2; do o=$(overhead_kib) || break; ((o > m)) && m=$o && echo "$m" > /tmp/peak; done ) &
sampler=$!
check big-writes bounded 120 fio --name=big --filename="$dev" --ioengine=io_uring \
	--direct=1 --rw=write --bs=256k --iodepth=32 --size=64M --offset=256M \
	--buffer_compress_percentage=50 --eta=never --output=/tmp/fio-big.out
kill "$sampler"; wait "$sampler" 2>/dev/null
sleep 3
idle=$(overhead_kib); peak=$(cat /tmp/peak)
info "server memory beyond the device's: $peak KiB at most during the writes, $idle KiB idle"
check idle-buffers-released test $((peak - idle)) -ge 4096

check stop stop "$UZRAM_PID"
check nothing-left gone "$dev"

# the same data path with UBLK_F_USER_COPY: pread/pwrite on /dev/ublkcN
if uzram_start u2 --ublk --size 128M --ublk-copy user --ublk-queues 1; then
	dev=$(ublk_of u2)
	check user-copy-fio bounded 300 fio --name=uc --filename="$dev" \
		--ioengine=io_uring --direct=1 --rw=randwrite --bs=4k,128k \
		--iodepth=16 --size=32M --verify=crc32c --verify_fatal=1 \
		--eta=never --output=/tmp/fio-uc.out
	check stop-user-copy stop "$UZRAM_PID"
	check nothing-left-user-copy gone "$dev"
else
	fail user-copy "uzram serve --ublk --ublk-copy user did not start"
fi
finish
