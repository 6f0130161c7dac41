/* SPDX-License-Identifier: MIT */
/*
 * swapfree.h - the swap slots the kernel frees, for a server that swap
 * uses (`uzram serve --swap`): the kernel tells its own zram of each
 * freed slot (swap_slot_free_notify) and a ublk or NBD device of none but
 * whole free clusters (discard), so without this a swap device outside
 * the kernel keeps a dead copy of every page once swapped and since
 * swapped in or freed, up to its whole size (doc/block-device.md).
 *
 *   swapfree.bpf.c  the kernel side: a kprobe on zswap_invalidate(), the
 *                   kernel's per-slot free hook; slots of our block device
 *                   go into a ring buffer
 *   swapfree.c      the server side: loads and attaches it (libbpf), and
 *                   discards each freed slot's page on the uzram device,
 *                   from the device's write hook and from a thread
 *   runs.c          the ring's runs of slots as discards of the device
 *
 * The order that makes it safe: a slot's event is in the ring before the
 * kernel can hand the slot out again, so before any write that reuses it
 * reaches us; and every write drains the ring first (uzram_set_write_hook()),
 * under the lock the thread drains under. A freed page is therefore
 * dropped before, never after, the write of new data to its place.
 *
 * Needs root (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN) and a kernel with
 * kprobes and BTF where zswap_invalidate() (6.7+, zswap on or off; then
 * also swap_info in /proc/kallsyms, CONFIG_KALLSYMS_ALL) or, before it,
 * swap_range_free() can be probed: Debian's 6.1, 6.12 and 7.3 all can.
 * Where not, the server runs as before, and says why once.
 */
#ifndef UZRAM_SWAPFREE_H
#define UZRAM_SWAPFREE_H

#include <stdint.h>

#include "uzram.h"

struct swapfree;

/*
 * Load the probe for this kernel, not attached yet: 0 and *out, or a
 * negative errno after a message by report_error(who, ...) that says what
 * is missing; the server then goes on without it. It reads the kernel's
 * BTF (megabytes) and the verifier allocates: call it before the device
 * serves, not while swap waits for it.
 */
int swapfree_load(const char *who, struct swapfree **out);

/*
 * For a keeper of servers (`serve --keeper`, swapfree_load()ed before it
 * locks itself): attach the probe now, on no device yet, and make its ring
 * and its globals inheritable: "RING,DATA", their fds, into buf (n bytes)
 * for each server's swapfree_adopt(). 0, or a negative errno after a
 * message. The probe stays the keeper's as servers die and come: the
 * slots freed while none runs wait in the ring (or count as lost, and stay
 * stored, if it fills), and no server loads anything, a standby that
 * adopts the device under a swap storm least of all.
 */
int swapfree_share(struct swapfree *sf, char *buf, size_t n, const char *who);

/*
 * For a keeper's server, in place of swapfree_load(): the keeper's probe,
 * from swapfree_share()'s "RING,DATA". It maps them and loads nothing:
 * 0 and *out, or a negative errno after a message.
 */
int swapfree_adopt(const char *fds, const char *who, struct swapfree **out);

/*
 * Hear of the slots the kernel frees on the block device at path, a
 * whole disk that serves dev (its page n is swap slot n), and discard
 * them on dev: 0, or a negative errno after a message (sf then stays
 * loaded only; swapfree_stop() frees it). At any time: slots freed before
 * stay stored, as they were.
 */
int swapfree_start(struct swapfree *sf, struct uzram *dev, const char *path,
		   const char *who);

/*
 * Detach the probe, end the thread and free sf, started or only loaded.
 * Only after the device's writes have ended (its front end stopped or
 * parked): a write may be draining the ring. Accepts NULL.
 */
void swapfree_stop(struct swapfree *sf);

struct swapfree_stats {
	uint64_t slots;     /* freed slots discarded on the device */
	uint64_t lost;      /* slots the ring had no room for (kept), since
			     * this server started */
	uint64_t outside;   /* slots past the device's end (ignored) */
};
/* What a started sf did: 0; -1 for one only loaded, or NULL. */
int swapfree_stats(struct swapfree *sf, struct swapfree_stats *st);

#endif /* UZRAM_SWAPFREE_H */
