// SPDX-License-Identifier: MIT
/*
 * swapfree.bpf.c - the kernel side of swapfree/: a probe on the kernel's
 * per-slot swap free path that tells the server which slots of its own
 * block device the kernel freed, as the kernel tells zram
 * (swap_slot_free_notify) and no driver outside it.
 *
 * The probe point is zswap_invalidate(), which the kernel calls for each
 * slot it frees, whether zswap is on or off: since 6.9 from
 * free_swap_slot() and the other free paths, while the slot is still
 * pinned (SWAP_HAS_CACHE), and since the swap cluster rework from
 * swap_range_free() under the slot's cluster lock. Either way before the
 * slot can be allocated again: an event is in the ring before any write
 * that reuses its slot can reach the server (swapfree.c builds on that).
 * Large folios freed whole on 6.12 (put_swap_folio) are not seen: those
 * slots only stay stored, as without the probe. Kernels before that
 * (Debian 12's 6.1) call zswap only through frontswap, when it is on;
 * there the probe is on swap_range_free() itself (on_range below), which
 * runs under the swap area's lock, as every allocation does, after the
 * slots' counts went to zero.
 *
 * The entry names a swap type, not a device: the program reads
 * swap_info[type] (its address from /proc/kallsyms, as the kernel keeps
 * the array static) and passes on only slots of a block-device swap area
 * (SWP_BLKDEV: a swap file's slots are not its device's pages) whose
 * device is target_dev. The field offsets are the running kernel's
 * (CO-RE: preserve_access_index, relocated from its BTF at load).
 */
#include <stdbool.h>

#include <linux/bpf.h>
#include <linux/ptrace.h> /* struct pt_regs: the uapi layout is the kernel's */
#include <linux/types.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* only the fields read; the rest of each layout comes from the kernel */
struct block_device {
	__u32 bd_dev;
} __attribute__((preserve_access_index));

struct swap_info_struct {
	unsigned long flags;
	struct block_device *bdev;
} __attribute__((preserve_access_index));

/* one event: slots [slot, slot + count) of our device were freed */
struct freed_run {
	__u64 slot, count;
};

/* include/linux/swap.h, the same since 2.6 */
#define SWP_BLKDEV (1ul << 6)
#define MAX_SWAPFILES 32
/* include/linux/swapops.h on 64-bit: the type in the top 5 bits of 63 */
#define SWP_TYPE_SHIFT 58
#define SWP_OFFSET_MASK ((1ul << SWP_TYPE_SHIFT) - 1)
/* 24 bytes an event (header and run): 10,922 runs between drains */
#define RING_BYTES (256 * 1024)

const volatile __u64 swap_info_addr; /* &swap_info[0], from kallsyms */
const volatile __u32 two_args;       /* zswap_invalidate(type, offset):
				      * 6.7 and 6.8 */

__u32 target_dev;  /* the kernel's dev_t of our device, set before attach */
__u64 lost;        /* slots the ring had no room for; the server reads it */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} freed SEC(".maps");

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Whether si is a block-device swap area on our device. */
static __always_inline bool ours(struct swap_info_struct *si)
{
	return si && (BPF_CORE_READ(si, flags) & SWP_BLKDEV) &&
	       BPF_CORE_READ(si, bdev, bd_dev) == target_dev;
}

static __always_inline int emit(__u64 slot, __u64 count)
{
	struct freed_run *run = bpf_ringbuf_reserve(&freed, sizeof *run, 0);

	if (!run) {
		__sync_fetch_and_add(&lost, count);
		return 0;
	}
	run->slot = slot;
	run->count = count;
	/* the reader drains at its own pace (swapfree.c), woken only when
	 * the ring is half full */
	bpf_ringbuf_submit(run, bpf_ringbuf_query(&freed, BPF_RB_AVAIL_DATA) >
				RING_BYTES / 2 ? BPF_RB_FORCE_WAKEUP :
				BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int on_free(__u64 type, __u64 offset)
{
	struct swap_info_struct *si = NULL;

	if (type >= MAX_SWAPFILES ||
	    bpf_probe_read_kernel(&si, sizeof si,
				  (void *)(swap_info_addr + type * sizeof si)) ||
	    !ours(si))
		return 0;
	return emit(offset, 1);
}

/* 6.9 and later: zswap_invalidate(swp_entry_t); 6.7-6.8: (type, offset) */
SEC("kprobe/zswap_invalidate")
int BPF_KPROBE(on_entry, __u64 a, __u64 b)
{
	if (two_args)
		return on_free(a, b);
	return on_free(a >> SWP_TYPE_SHIFT, a & SWP_OFFSET_MASK);
}

/* before: swap_range_free(si, offset, nr_entries) */
SEC("kprobe/swap_range_free")
int BPF_KPROBE(on_range, struct swap_info_struct *si, __u64 offset, __u32 nr)
{
	return ours(si) ? emit(offset, nr) : 0;
}
