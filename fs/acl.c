// SPDX-License-Identifier: MIT
/*
 * acl.c - POSIX ACLs in their extended attribute form, and the mode
 * arithmetic the kernel's fs/posix_acl.c does for a local file system
 * (tmpfs with CONFIG_TMPFS_POSIX_ACL). A FUSE file system that takes
 * FUSE_POSIX_ACL gets the kernel's enforcement (its permission checks read
 * system.posix_acl_access by GETXATTR and cache it) but must keep the
 * mode and the ACLs in step itself: fuse_set_acl() says "Fuse userspace
 * is responsible for updating access permissions in the inode", and
 * fuse_setattr() runs no posix_acl_chmod(). xattr.c stores; these only
 * read and rewrite the bytes:
 *
 *   acl_update_mode()  setxattr of an access ACL: the mode's permission
 *                      bits from it, and whether the mode says all of it
 *                      (posix_acl_update_mode(), posix_acl_equiv_mode())
 *   acl_chmod()        chmod: the owner, mask (or group) and other entries
 *                      from the new mode (posix_acl_chmod())
 *   acl_create_masq()  a node made in a directory with a default ACL: that
 *                      ACL cut down to the mode asked for, and the mode to
 *                      it (posix_acl_create())
 *
 * Without them `cp -a` of a 755 directory (mkdir 0700, then the mode set
 * as a three-entry ACL) left it 700, the ACL kept beside it.
 *
 * The form (linux/posix_acl_xattr.h): a little-endian 32-bit version, 2,
 * then 8-byte entries: 16-bit tag, 16-bit permission (rwx), 32-bit id,
 * sorted by tag, named entries by id.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "uzfs_impl.h"

#define ACL_VERSION 2
#define ACL_HEAD 4
#define ACL_ENTRY 8

enum { TAG_USER_OBJ = 0x01, TAG_USER = 0x02, TAG_GROUP_OBJ = 0x04,
       TAG_GROUP = 0x08, TAG_MASK = 0x10, TAG_OTHER = 0x20 };

static unsigned entries(size_t size)
{
	return (unsigned)((size - ACL_HEAD) / ACL_ENTRY);
}

static unsigned tag_of(const char *v, unsigned i)
{
	uint16_t t;

	memcpy(&t, v + ACL_HEAD + i * ACL_ENTRY, 2);
	return le16toh(t);
}

static unsigned perm_of(const char *v, unsigned i)
{
	uint16_t p;

	memcpy(&p, v + ACL_HEAD + i * ACL_ENTRY + 2, 2);
	return le16toh(p);
}

static void perm_put(char *v, unsigned i, unsigned perm)
{
	uint16_t p = htole16((uint16_t)perm);

	memcpy(v + ACL_HEAD + i * ACL_ENTRY + 2, &p, 2);
}

static uint32_t id_of(const char *v, unsigned i)
{
	uint32_t id;

	memcpy(&id, v + ACL_HEAD + i * ACL_ENTRY + 4, 4);
	return le32toh(id);
}

/*
 * 0 if v is a valid ACL with at least one entry (posix_acl_valid()): the
 * owner, group and other entries once each, named users and groups in
 * rising id order, a mask where there is any named entry; else -EINVAL.
 */
int acl_check(const char *v, size_t size)
{
	unsigned n, last = 0, seen = 0;
	uint32_t version;

	if (size < ACL_HEAD + ACL_ENTRY || (size - ACL_HEAD) % ACL_ENTRY)
		return -EINVAL;
	memcpy(&version, v, 4);
	if (le32toh(version) != ACL_VERSION)
		return -EINVAL;
	n = entries(size);
	for (unsigned i = 0; i < n; i++) {
		unsigned t = tag_of(v, i);
		bool named = t == TAG_USER || t == TAG_GROUP;

		if (perm_of(v, i) & ~7u || t < last || (t & (t - 1)) ||
		    t > TAG_OTHER || !t)
			return -EINVAL;
		if (t == last && (!named || id_of(v, i) <= id_of(v, i - 1)))
			return -EINVAL;
		seen |= t;
		last = t;
	}
	if (!(seen & TAG_USER_OBJ) || !(seen & TAG_GROUP_OBJ) || !(seen & TAG_OTHER))
		return -EINVAL;
	if ((seen & (TAG_USER | TAG_GROUP)) && !(seen & TAG_MASK))
		return -EINVAL;
	return 0;
}

/*
 * The permission bits of *mode from the access ACL v (the group bits from
 * its mask where it has one). Returns 1 when the mode then says all the
 * ACL says (no named entry: it need not be kept), 0 when not, or -EINVAL.
 */
int acl_update_mode(const char *v, size_t size, mode_t *mode)
{
	mode_t m = *mode & ~(mode_t)0777;
	unsigned group = 0, mask = 0, n;
	bool named = false, has_mask = false;
	int r = acl_check(v, size);

	if (r < 0)
		return r;
	n = entries(size);
	for (unsigned i = 0; i < n; i++) {
		unsigned p = perm_of(v, i);

		switch (tag_of(v, i)) {
		case TAG_USER_OBJ:  m |= p << 6; break;
		case TAG_GROUP_OBJ: group = p; break;
		case TAG_MASK:      mask = p; has_mask = true; break;
		case TAG_OTHER:     m |= p; break;
		default:            named = true; break;
		}
	}
	*mode = m | (has_mask ? mask : group) << 3;
	return !named;
}

/* The owner, mask (or, without one, group) and other entries of the
 * access ACL v from mode's bits; v is valid. */
void acl_chmod(char *v, size_t size, mode_t mode)
{
	unsigned n = entries(size), group = n;
	bool has_mask = false;

	for (unsigned i = 0; i < n; i++)
		switch (tag_of(v, i)) {
		case TAG_USER_OBJ: perm_put(v, i, mode >> 6 & 7); break;
		case TAG_GROUP_OBJ: group = i; break;
		case TAG_MASK: perm_put(v, i, mode >> 3 & 7); has_mask = true; break;
		case TAG_OTHER: perm_put(v, i, mode & 7); break;
		}
	if (!has_mask && group < n)
		perm_put(v, group, mode >> 3 & 7);
}

/*
 * A new node's access ACL from its directory's default ACL v (a copy,
 * rewritten here) and the mode it was made with: each of the owner,
 * mask (or group) and other entries keeps only what the mode grants, and
 * the mode only what they grant. Returns 1 when the ACL must be kept (it
 * has a named entry or a mask), 0 when the mode says all of it.
 */
int acl_create_masq(char *v, size_t size, mode_t *mode)
{
	unsigned n = entries(size), group = n, mask = n;
	mode_t m = *mode & 0777;
	int keep = 0;

	for (unsigned i = 0; i < n; i++) {
		unsigned p = perm_of(v, i);

		switch (tag_of(v, i)) {
		case TAG_USER_OBJ:
			p &= m >> 6 & 7;
			perm_put(v, i, p);
			m &= (mode_t)(p << 6) | ~(mode_t)0700;
			break;
		case TAG_OTHER:
			p &= m & 7;
			perm_put(v, i, p);
			m &= (mode_t)p | ~(mode_t)07;
			break;
		case TAG_GROUP_OBJ: group = i; break;
		case TAG_MASK: mask = i; keep = 1; break;
		default: keep = 1; break;
		}
	}
	if (mask == n)
		mask = group;
	if (mask < n) {
		unsigned p = perm_of(v, mask) & (m >> 3 & 7);

		perm_put(v, mask, p);
		m &= (mode_t)(p << 3) | ~(mode_t)070;
	}
	*mode = (*mode & ~(mode_t)0777) | m;
	return keep;
}
