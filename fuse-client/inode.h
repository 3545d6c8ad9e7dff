/* inode.h - the inode table (inode.c): attributes as mgrd last gave them,
 * lookup counts, this client's unreported writes, cached xattr absence,
 * names for log lines.  Any thread ([ino_lock] inside). */
#ifndef TWINFS_FC_INODE_H
#define TWINFS_FC_INODE_H

#include "mount.h"

void fc_inodes_init(struct fc_client *cl);
void fc_inodes_free(struct fc_client *cl);
/* Unpack a Twinfs__Attr; -EIO if it is missing or its layout is invalid for
 * a regular file. */
int fc_attr_from_pb(const Twinfs__Attr *pb, struct fc_attr *out);
/* Fill a struct stat from attributes and a merged size. */
void fc_attr_to_stat(struct fc_client *cl, const struct fc_attr *a,
		     uint64_t size, struct stat *st);
/* An entry is about to be replied: find or create the inode, store attr,
 * nlookup += 1 and fill e.  Undo with fc_inode_forget(ino, 1) if the kernel
 * did not take the reply. */
void fc_inode_entry(struct fc_client *cl, const struct fc_attr *a,
		    struct fuse_entry_param *e);
/* fc_inode_entry for attributes mgrd has just answered with (LOOKUP, an
 * Entry, a READDIR plus batch as it arrives): a directory's are also fresh
 * for attr_timeout (fc_inode_fresh). */
void fc_inode_entry_arrived(struct fc_client *cl, const struct fc_attr *a,
			    struct fuse_entry_param *e);
/* fc_inode_entry for an inode this mount does not know yet; -EEXIST (and
 * nothing changed) if it does. */
int fc_inode_entry_new(struct fc_client *cl, const struct fc_attr *a,
		       struct fuse_entry_param *e);
/* fc_inode_entry unless this mount holds newer attributes of the inode
 * than a (an earlier ctime or truncation in a): then -EEXIST, nothing
 * changed.  e carries what the table holds after the merge. */
int fc_inode_entry_not_older(struct fc_client *cl, const struct fc_attr *a,
			     struct fuse_entry_param *e);
/* Refresh the cached attributes of ino if it is cached (no lookup change).
 * Fills *st when st is non-NULL with the merged size.  Returns the merged
 * size. */
uint64_t fc_inode_update(struct fc_client *cl, const struct fc_attr *a,
			 struct stat *st);
/* fc_inode_update for attributes mgrd has just answered with (GETATTR):
 * a directory's are also fresh for attr_timeout (fc_inode_fresh). */
uint64_t fc_inode_update_arrived(struct fc_client *cl, const struct fc_attr *a,
				 struct stat *st);
/* fc_inode_update for attributes that came with a change this mount made
 * (a SETATTR's answer, an Entry's parent_attr): they are also fresh for
 * attr_timeout (fc_inode_fresh). */
uint64_t fc_inode_update_fresh(struct fc_client *cl, const struct fc_attr *a,
			       struct stat *st);
/* Any thread: if ino's attributes are fresh (fc_inode_update_fresh, or a
 * directory's from fc_inode_entry_arrived, fc_inode_update_arrived) and
 * its ACLs are not stale, fill *st and *timeout (what is left of the
 * freshness, so the kernel keeps them no longer than attr_timeout from
 * mgrd's answer) and return true. */
bool fc_inode_fresh(struct fc_client *cl, uint64_t ino, struct stat *st,
		    double *timeout);
/* The directory changed in a way whose attributes we did not get (rename,
 * xattrs): the next GETATTR asks mgrd. */
void fc_inode_unfresh(struct fc_client *cl, uint64_t ino);
/* A rename succeeded, or an unlink or rmdir whose answer did not name its
 * victim: no fresh mark made before holds. */
void fc_inodes_unfresh_all(struct fc_client *cl);
/* Whether the inode's ACLs changed since the last call (clears it). */
bool fc_inode_take_acl_stale(struct fc_client *cl, uint64_t ino);
/* An ACL-changing request of this mount (SETXATTR of an ACL, chmod)
 * succeeded: the kernel dropped its cached ACLs already. */
void fc_inode_acl_local(struct fc_client *cl, uint64_t ino);
/* The cached attributes say the inode has no ACL (acl_sig 0). */
bool fc_inode_acl_none(struct fc_client *cl, uint64_t ino);
/* forget: nlookup -= n; frees at zero. */
void fc_inode_forget(struct fc_client *cl, uint64_t ino, uint64_t n);
/* The kernel was given ino as `name` in directory parent. */
void fc_inode_named(struct fc_client *cl, uint64_t ino, uint64_t parent,
		    const char *name);
/* An UNLINK or RMDIR of name in parent this mount made succeeded: the
 * inode known by it keeps no name (an open file's lines say "ino N"). */
void fc_inode_unnamed(struct fc_client *cl, uint64_t parent,
		      const char *name);
/* A RENAME this mount made succeeded (flags as Rename.flags): the moved
 * inode (and with RENAME_EXCHANGE the other) takes its new name. */
void fc_inode_renamed(struct fc_client *cl, uint64_t parent, const char *name,
		      uint64_t newparent, const char *newname,
		      uint32_t flags);
/* For log lines: "/dir/file (ino N)" from the names this mount knows,
 * ".../file (ino N)" when a directory above is not known, "ino N" when
 * ino has no name here.  Returns buf. */
const char *fc_ino_path(struct fc_client *cl, uint64_t ino, char *buf,
			size_t len);
#define FC_PATH_LOG 320            /* a buffer for fc_ino_path */
/* Copy the cached attributes; false if ino is not cached. *size gets the
 * merged size (attr size or our own writes, whichever is larger). */
bool fc_inode_get(struct fc_client *cl, uint64_t ino, struct fc_attr *a,
		  uint64_t *size);
/* An UNLINK's answer named ino as destroyed (Entry.gone_ino). */
void fc_inode_set_gone(struct fc_client *cl, uint64_t ino);
/* If ino is cached and gone: its last attributes with nlink 0 in *st. */
bool fc_inode_gone_stat(struct fc_client *cl, uint64_t ino, struct stat *st);
/* A write [.., end) under trunc_gen completed: raise the local size. */
void fc_inode_note_write(struct fc_client *cl, uint64_t ino, uint64_t end,
			 uint64_t trunc_gen);
/* The same for a write answered now, under the cached trunc_gen; false
 * (nothing noted) unless ino is a cached regular file with a layout, as
 * a write needs. */
bool fc_inode_note_write_now(struct fc_client *cl, uint64_t ino, uint64_t end);
/* The SETATTRs of an inode's mtime (fc_inode.times_*; report.c): one
 * with seq starts; it ends (ok or failed), and the return says whether
 * the writes it overtook must set mtime after all (it failed and no later
 * one is unanswered or succeeded); the seq a write compares with; whether
 * any is unanswered. */
void fc_inode_times_start(struct fc_client *cl, uint64_t ino, uint64_t seq);
bool fc_inode_times_end(struct fc_client *cl, uint64_t ino, uint64_t seq,
			bool ok);
uint64_t fc_inode_times_seq(struct fc_client *cl, uint64_t ino);
bool fc_inode_times_pending(struct fc_client *cl, uint64_t ino);
/* Absence cache for the xattr names asked for all the time:
 * security.capability (before a write: the kernel's or ours,
 * ops_data.c) and security.selinux (ls -l).
 * fc_xattr_cache_index: the name's bit, or -1 when it is not cached. */
int fc_xattr_cache_index(const char *name);
bool fc_inode_xattr_absent(struct fc_client *cl, uint64_t ino, int idx);
void fc_inode_set_xattr_absent(struct fc_client *cl, uint64_t ino, int idx,
			       bool absent);
/* ino was just created by this client: it holds none of those names, so
 * the kernel's question before each write needs no mgrd round trip (nor
 * mgrd at all: writes go on while it is away). */
void fc_inode_set_new_file(struct fc_client *cl, uint64_t ino);
/* Merged size rule, pure (unit-tested): the size to show for attributes a
 * when this client wrote up to local_size under local_gen. */
uint64_t fc_merge_size(uint64_t attr_size, uint64_t attr_gen,
		       uint64_t local_size, uint64_t local_gen);

/* The attributes of an Entry reply (-EIO if it is not one); also stores
 * its parent_attr (fc_parent_from_reply). */
int fc_entry_from_reply(struct fc_client *cl, struct wire_msg *reply,
			struct fc_attr *a);
/* Store an Entry reply's parent_attr, if any (fc_inode_update_fresh). */
void fc_parent_from_reply(struct fc_client *cl, const struct wire_msg *reply);

#endif
