/* SPDX-License-Identifier: MIT */
/*
 * What the supervisor can learn about a confined thread from outside, and how: the kernel's
 * interfaces, one function each, and nothing about what is kept (ident.h decides that).
 *
 * Two kinds of read. Through a pidfd (credentials, namespaces): the kernel answers for the
 * task the pidfd names, whatever has happened to its number. By number (/proc/TID/..., capget,
 * process_vm_readv): the answer is about whichever task has that number now, so it is the
 * right task's only if something proves afterwards that the number still named it (its pidfd
 * still names a live task, or its notification is still pending: NOTIF_ID_VALID).
 *
 * Kernel features probed at start (tgt_features): each has a slower fallback, see ident.h.
 */
#ifndef SV_TARGET_H
#define SV_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TGT_MAX_LEVELS 32 /* pid namespace nesting, as the kernel's MAX_PID_NS_LEVEL */
#define TGT_MAX_USERNS 33 /* user namespace nesting (32) and the root */

/* ---- kernel features ---- */

struct tgt_features {
	bool pidfd_thread; /* pidfd_open(tid, PIDFD_THREAD): Linux 6.9 */
	bool pidfd_info;   /* ioctl(pidfd, PIDFD_GET_INFO): credentials by pidfd, 6.13 */
	bool pidfd_ns;	   /* ioctl(pidfd, PIDFD_GET_*_NAMESPACE): 6.11 */
	bool ns_id;	   /* NS_GET_ID and nsfs file handles: unique namespace ids, 6.18 */
};

/*
 * What this kernel offers. SEMVISOR_KERNEL_FEATURES_OFF (a comma-separated list of the names
 * above, or "all") turns features off, so that the fallbacks can be tested on a new kernel.
 */
void tgt_probe(struct tgt_features *f);

/* ---- tasks ---- */

/* A pidfd for thread tid (PIDFD_THREAD when thread, else for the thread group tid leads). */
int tgt_pidfd_open(pid_t tid, bool thread);
/* Does the task pidfd names still exist (not yet reaped)? 0, or -ESRCH. */
int tgt_alive(int pidfd);

/* Credentials in the supervisor's user namespace: real, effective, saved, filesystem. */
struct tgt_creds {
	int32_t tgid;
	uint32_t uid[4];
	uint32_t gid[4];
};

/* The credentials of the task pidfd names (PIDFD_GET_INFO). 0, or -ESRCH when it is gone. */
int tgt_creds(int pidfd, struct tgt_creds *c);

/* Parsed from /proc/TID/status (by number). */
struct tgt_status {
	struct tgt_creds creds;
	uint64_t cap_eff;
	int threads;	  /* of its thread group */
	int nspid_levels; /* entries in nspid: this supervisor's level first */
	int32_t nspid[TGT_MAX_LEVELS];
};

/* 0 or -errno (-ESRCH when the thread is gone). */
int tgt_read_status(pid_t tid, struct tgt_status *st);
/*
 * The supplementary groups of thread tid (up to NGROUPS_MAX: *groups is allocated, the caller
 * frees it) with the credentials they go with, read together from /proc/TID/status. The
 * number of groups, or -errno.
 */
int tgt_read_groups(pid_t tid, struct tgt_creds *c, uint32_t **groups);
/* Effective capabilities of thread tid (capget(2), by number). 0 or -ESRCH. */
int tgt_caps(pid_t tid, uint64_t *eff);
/* Where a thread blocked in a system call is: its stack pointer and program counter (the
   address after the syscall instruction), from /proc/TID/syscall. 0 or -errno. */
int tgt_read_syscall_regs(pid_t tid, uint64_t *sp, uint64_t *pc);

/* ---- memory, with the thread's own access rights (by number) ---- */

/*
 * Copy from/to a thread's memory with process_vm_readv/writev, which honour page protections as
 * the thread's own accesses would (a PROT_NONE page fails, a read-only one cannot be written;
 * /proc/PID/mem would not: it reads and writes through them). 0, or -EFAULT if any byte could
 * not be transferred (the kernel's copy_from_user answer), or -ESRCH if the thread is gone.
 */
int tgt_read(pid_t tid, uint64_t addr, void *buf, size_t len);
int tgt_write(pid_t tid, uint64_t addr, const void *buf, size_t len);
/* Two regions in one system call; a region with len 0 is skipped. Per-region results. */
void tgt_read2(pid_t tid, uint64_t a1, void *b1, size_t l1, int *r1, uint64_t a2, void *b2,
	       size_t l2, int *r2);

/* ---- namespaces ---- */

enum tgt_ns_type {
	TGT_NS_IPC,
	TGT_NS_USER,
	TGT_NS_PID
};

/*
 * A namespace as the kernel names it: id, its 64-bit id (NS_GET_ID), which the kernel never
 * gives another namespace while it runs, or 0 where the kernel has none; ino, the nsfs inode
 * number, which the kernel reuses once the namespace is gone; handle, an nsfs file handle
 * that opens the namespace while it lives and fails with ESTALE once it is gone, without
 * keeping it alive.
 */
struct tgt_nsid {
	uint64_t id;
	uint64_t ino;
	bool has_handle;
	struct {
		uint32_t bytes;
		int type;
		unsigned char f[32];
	} handle;
};

/*
 * An fd for one of a thread's namespaces: through its pidfd when the kernel can
 * (PIDFD_GET_*_NAMESPACE), else through /proc/TID/ns (by number). -errno on failure.
 */
int tgt_ns_open(int pidfd, pid_t tid, enum tgt_ns_type type, bool by_pidfd);
/* Its key: the id (with_id), else the inode number. 0 or -errno. */
int tgt_ns_key(int nsfd, bool with_id, uint64_t *key);
/* What names the namespace nsfd is: id (if with_id), ino, and a handle (if with_id). */
int tgt_ns_ident(int nsfd, bool with_id, struct tgt_nsid *out);
/* An fd for the namespace id names while it lives (its handle): -ESTALE once it is gone,
   -EPERM when not ours to open. */
int tgt_ns_reopen(const struct tgt_nsid *id);
/* Is the namespace still alive? 1 yes, 0 no (its handle is stale), -errno: cannot tell. */
int tgt_ns_alive(const struct tgt_nsid *id);
/* Is fd in thread tid's table an IPC namespace other than the one with inode own_ino? */
bool tgt_fd_is_other_ipc_ns(pid_t tid, int fd, uint64_t own_ino);

/*
 * The user namespaces from the one owning IPC namespace ipc_nsfd up to the root (or as far up
 * as the supervisor can see): each one's id (or inode, without ids) and its owner's uid in the
 * supervisor's view. Never changes for a given IPC namespace. Entries, or -errno.
 */
struct tgt_userns_link {
	uint64_t id;
	uint32_t owner;
};
int tgt_userns_chain(int ipc_nsfd, bool with_id, struct tgt_userns_link *chain, int max);
/* The pid namespace ids (or inodes) of a process, from its own (level levels-1) up to ours
   (level 0), through a pid namespace fd of its. 0 or -errno. */
int tgt_pidns_chain(int pid_nsfd, bool with_id, int levels, uint64_t *ids);

/* uid/gid maps of a user namespace, read through a thread living in it (by number). */
struct tgt_idmap {
	int n;
	struct {
		uint32_t inside, outside, count;
	} e[340]; /* the kernel allows 340 extents */
};
int tgt_read_idmap(pid_t tid, const char *which /* "uid_map" or "gid_map" */, struct tgt_idmap *m);
/* outside (supervisor view) -> inside; false if unmapped */
bool tgt_idmap_to_inside(const struct tgt_idmap *m, uint32_t outside, uint32_t *inside);
bool tgt_idmap_to_outside(const struct tgt_idmap *m, uint32_t inside, uint32_t *outside);

#endif
