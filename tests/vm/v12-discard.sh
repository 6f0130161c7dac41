# SPDX-License-Identifier: MIT
# v12-discard.sh - blkdiscard gives the memory back: data written through
# the kernel's NBD client takes memory in the server (`uzram stat`); a
# discard of the whole device through the same client brings pages_stored
# to 0 and mem_used_total back near where it was before the write.
# vm-mem: 512
# vm-timeout: 240
# vm-modules: nbd
# vm-data: files.tar
source /guest-lib.sh

uzram_start disc --size 64M || { fail serve "uzram serve did not start"; finish; }
s=/run/disc.sock
check attach nbd_attach /dev/nbd0 $s -b 4096
empty=$(stat_field $s mem_used_total)
check write bounded 60 dd if=/data/files.tar of=/dev/nbd0 bs=1M oflag=direct status=none
full=$(stat_field $s mem_used_total)
stored=$(stat_field $s pages_stored)
info "before the write $empty bytes, after it $full bytes, $stored pages"
check memory-taken test "$stored" -gt 0 -a "$full" -gt "$empty"
check blkdiscard bounded 60 blkdiscard /dev/nbd0
after=$(stat_field $s mem_used_total)
stored=$(stat_field $s pages_stored)
trims=$(stat_field $s requests_trim)
info "after blkdiscard $after bytes, $stored pages, $trims trim requests"
check pages-freed test "$stored" -eq 0
check trims-reached-server test "$trims" -gt 0
# What the write took is given back, but for the allocator's empty frames
# (compaction returns those); half of it at least, on any data.
check memory-returned test $((full - after)) -ge $(((full - empty) / 2))
figure mem_after_write "$full" bytes
figure mem_after_discard "$after" bytes
check reads-zero bash -c 'cmp -n 8388608 /dev/nbd0 /dev/zero'
check detach bounded 30 nbd-client -d /dev/nbd0
uzram_stop
finish
