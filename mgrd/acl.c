/* acl.c - POSIX ACLs in their xattr form: validation, the mode an access
 * ACL implies, chmod's update of an ACL, the ACL a new inode inherits
 * from its directory's default ACL, and what an access ACL grants a
 * caller.  Linux's fs/posix_acl.c semantics (posix_acl_valid,
 * posix_acl_equiv_mode, posix_acl_chmod, posix_acl_create_masq,
 * posix_acl_permission), on the bytes mgrd stores as the values of
 * system.posix_acl_access and system.posix_acl_default.  Pure: no state,
 * no allocation; ns.c decides when to call what (FORMAT.md "Namespace").
 *
 * The xattr format (include/uapi/linux/posix_acl_xattr.h), little endian:
 *
 *   offset  size  field
 *   0       4     version, always 2
 *   4 + 8i  2     tag of entry i: USER_OBJ 0x01, USER 0x02, GROUP_OBJ 0x04,
 *                 GROUP 0x08, MASK 0x10, OTHER 0x20
 *   6 + 8i  2     perm: bits r 4, w 2, x 1
 *   8 + 8i  4     id: uid (USER) or gid (GROUP); 0xffffffff otherwise
 *
 * Validity rule (posix_acl_valid): at least one entry, entries sorted by
 * tag, USER and GROUP entries sorted by id without duplicates, exactly one
 * USER_OBJ, GROUP_OBJ and OTHER, at most one MASK, and a MASK whenever
 * there is a USER or GROUP entry.  The kernel parses and checks an ACL
 * before it reaches the file system; mgrd checks again, since the bytes
 * come from the network.
 */
#include "mgrd_int.h"

#include <errno.h>
#include <string.h>

#define ACL_VERSION   2u
#define ACL_HDR       4u
#define ACL_ENTRY     8u
#define ACL_UNDEF_ID  0xffffffffu

enum {
	TAG_USER_OBJ = 0x01,
	TAG_USER = 0x02,
	TAG_GROUP_OBJ = 0x04,
	TAG_GROUP = 0x08,
	TAG_MASK = 0x10,
	TAG_OTHER = 0x20,
};

static uint16_t tag_at(const uint8_t *acl, uint32_t i)
{
	return tw_get_le16(acl + ACL_HDR + i * ACL_ENTRY);
}

static uint32_t perm_at(const uint8_t *acl, uint32_t i)
{
	return tw_get_le16(acl + ACL_HDR + i * ACL_ENTRY + 2);
}

static void set_perm(uint8_t *acl, uint32_t i, uint32_t perm)
{
	uint8_t *p = acl + ACL_HDR + i * ACL_ENTRY + 2;

	p[0] = (uint8_t)(perm & 7);
	p[1] = 0;
}

int mgr_acl_check(const void *value, uint32_t len)
{
	const uint8_t *acl = value;
	uint32_t n, i, id, prev_id = 0;
	int users_obj = 0, groups_obj = 0, others = 0, masks = 0, named = 0;
	uint16_t prev_tag = 0;

	if (!acl || len < ACL_HDR + ACL_ENTRY ||
	    (len - ACL_HDR) % ACL_ENTRY != 0 || tw_get_le32(acl) != ACL_VERSION)
		return -EINVAL;
	n = (len - ACL_HDR) / ACL_ENTRY;
	for (i = 0; i < n; i++) {
		uint16_t tag = tag_at(acl, i);

		if (perm_at(acl, i) & ~7u)
			return -EINVAL;
		if (tag < prev_tag)
			return -EINVAL;
		id = tw_get_le32(acl + ACL_HDR + i * ACL_ENTRY + 4);
		switch (tag) {
		case TAG_USER_OBJ: users_obj++; break;
		case TAG_GROUP_OBJ: groups_obj++; break;
		case TAG_OTHER: others++; break;
		case TAG_MASK: masks++; break;
		case TAG_USER:
		case TAG_GROUP:
			if (tag == prev_tag && id <= prev_id)
				return -EINVAL;
			prev_id = id;
			named++;
			break;
		default:
			return -EINVAL;
		}
		prev_tag = tag;
	}
	if (users_obj != 1 || groups_obj != 1 || others != 1 || masks > 1 ||
	    (named && !masks))
		return -EINVAL;
	return (int)n;
}

int mgr_acl_equiv_mode(const void *value, uint32_t len, uint32_t *mode)
{
	const uint8_t *acl = value;
	uint32_t n = (len - ACL_HDR) / ACL_ENTRY, m = *mode & ~0777u;
	int extended = 0;

	if (mgr_acl_check(value, len) < 0)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t perm = perm_at(acl, i);

		switch (tag_at(acl, i)) {
		case TAG_USER_OBJ: m |= perm << 6; break;
		case TAG_GROUP_OBJ: m |= perm << 3; break;
		case TAG_MASK:
			/* After GROUP_OBJ: the mask is the group class. */
			m = (m & ~070u) | perm << 3;
			extended = 1;
			break;
		case TAG_OTHER: m |= perm; break;
		default: extended = 1; break;
		}
	}
	*mode = m;
	return extended;
}

void mgr_acl_chmod(void *value, uint32_t len, uint32_t mode)
{
	uint8_t *acl = value;
	uint32_t n = (len - ACL_HDR) / ACL_ENTRY;
	int group_obj = -1, mask = -1;

	if (mgr_acl_check(value, len) < 0)
		return;
	for (uint32_t i = 0; i < n; i++) {
		switch (tag_at(acl, i)) {
		case TAG_USER_OBJ: set_perm(acl, i, mode >> 6); break;
		case TAG_GROUP_OBJ: group_obj = (int)i; break;
		case TAG_MASK: mask = (int)i; break;
		case TAG_OTHER: set_perm(acl, i, mode); break;
		default: break;
		}
	}
	/* The group class bits of the mode are the mask when there is one. */
	set_perm(acl, (uint32_t)(mask >= 0 ? mask : group_obj), mode >> 3);
}

int mgr_acl_create_masq(void *value, uint32_t len, uint32_t *mode)
{
	uint8_t *acl = value;
	uint32_t n = (len - ACL_HDR) / ACL_ENTRY, m = *mode;
	int group_obj = -1, mask = -1, extended = 0;

	if (mgr_acl_check(value, len) < 0)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t perm = perm_at(acl, i);

		switch (tag_at(acl, i)) {
		case TAG_USER_OBJ:
			perm &= (m >> 6) & 7;
			set_perm(acl, i, perm);
			m &= perm << 6 | ~0700u;
			break;
		case TAG_GROUP_OBJ: group_obj = (int)i; break;
		case TAG_MASK: mask = (int)i; extended = 1; break;
		case TAG_OTHER:
			perm &= m & 7;
			set_perm(acl, i, perm);
			m &= perm | ~07u;
			break;
		default: extended = 1; break;
		}
	}
	{
		uint32_t g = (uint32_t)(mask >= 0 ? mask : group_obj);
		uint32_t perm = perm_at(acl, g) & ((m >> 3) & 7);

		set_perm(acl, g, perm);
		m &= perm << 3 | ~070u;
	}
	*mode = m;
	return extended;
}

int mgr_acl_permission(const void *value, uint32_t len,
		       const struct mgr_cred *cr, uint32_t file_uid,
		       uint32_t file_gid, uint32_t want)
{
	const uint8_t *acl = value;
	uint32_t n, i, mask = 7;
	bool found = false;

	if (mgr_acl_check(value, len) < 0)
		return -EAGAIN;
	n = (len - ACL_HDR) / ACL_ENTRY;
	for (i = 0; i < n; i++)
		if (tag_at(acl, i) == TAG_MASK)
			mask = perm_at(acl, i);
	for (i = 0; i < n; i++) {
		uint32_t perm = perm_at(acl, i);
		uint32_t id = tw_get_le32(acl + ACL_HDR + i * ACL_ENTRY + 4);

		switch (tag_at(acl, i)) {
		case TAG_USER_OBJ:
			if (cr->uid == file_uid)
				return (perm & want) == want ? 0 : -EACCES;
			break;
		case TAG_USER:
			/* A named user's entry decides, through the mask. */
			if (cr->uid == id)
				return (perm & mask & want) == want ? 0
								    : -EACCES;
			break;
		case TAG_GROUP_OBJ:
		case TAG_GROUP:
			if (!mgr_cred_in_group(cr, tag_at(acl, i) == TAG_GROUP_OBJ
					       ? file_gid : id))
				break;
			/* The first of the caller's groups that grants it
			 * decides, through the mask. */
			found = true;
			if ((perm & want) == want)
				return (perm & mask & want) == want ? 0
								    : -EACCES;
			break;
		case TAG_OTHER:
			if (found)
				return -EACCES;
			return (perm & want) == want ? 0 : -EACCES;
		default:
			break;
		}
	}
	return -EAGAIN;
}
