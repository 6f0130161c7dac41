// SPDX-License-Identifier: MIT
/*
 * caller.c - who sent a request, beyond the uid, gid and pid FUSE gives:
 * the caller's supplementary groups and its capabilities, as the kernel's
 * in_group_p() and capable_wrt_inode_uidgid() see them for a local file
 * system. Both read /proc (fuse_req_getgroups() and /proc/PID/status), so
 * they are asked only where the mode's set-group-ID bit is at stake.
 */
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uzfs_impl.h"

/* Whether the thread pid has CAP_FSETID (false when it cannot be seen:
 * a pid of another pid namespace is 0). */
bool caller_fsetid(pid_t pid)
{
	char path[64], line[128];
	unsigned long long caps = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	f = pid > 0 ? fopen(path, "re") : NULL;
	if (!f)
		return false;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "CapEff:", 7)) {
			caps = strtoull(line + 7, NULL, 16);
			break;
		}
	fclose(f);
	return caps >> CAP_FSETID & 1;
}

/* Whether the caller of req is in group gid. */
bool caller_in_group(fuse_req_t req, gid_t gid)
{
	gid_t list[64];
	int k;

	if (fuse_req_ctx(req)->gid == gid)
		return true;
	k = fuse_req_getgroups(req, 64, list);
	for (int i = 0; i < k && i < 64; i++)
		if (list[i] == gid)
			return true;
	return false;
}
