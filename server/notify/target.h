/* SPDX-License-Identifier: MIT */
/*
 * What the supervisor learns about a confined thread from outside: its identity and credentials
 * (/proc/TID/status), its namespaces (/proc/TID/ns/), and its memory (process_vm_readv/writev).
 *
 * Nothing here is trusted until the notification that named the thread is checked with
 * NOTIF_ID_VALID afterwards: the thread may have died and its tid been reused in between.
 */
#ifndef SV_TARGET_H
#define SV_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TGT_MAX_GROUPS 256 /* more supplementary groups than this: the rest are not looked at */
#define TGT_MAX_LEVELS 32  /* pid namespace nesting, as the kernel's MAX_PID_NS_LEVEL */

struct tgt_status {
	int32_t tgid;
	uint32_t uid[4]; /* real, effective, saved, filesystem */
	uint32_t gid[4];
	int ngroups;
	uint32_t groups[TGT_MAX_GROUPS];
	uint64_t cap_eff;
	int threads;	  /* of its thread group */
	int nspid_levels; /* entries in nspid: this supervisor's level first */
	int32_t nspid[TGT_MAX_LEVELS];
};

struct tgt_ns {
	uint64_t ipc; /* inode numbers of the thread's namespaces */
	uint64_t pid;
	uint64_t user;
	uint64_t ipc_owner; /* the user namespace that owns its IPC namespace */
};

/* Parse /proc/TID/status. 0 or -errno (-ESRCH when the thread is gone). */
int tgt_read_status(pid_t tid, struct tgt_status *st);
/* Where a thread blocked in a system call is: its stack pointer and program counter (the
   address after the syscall instruction), from /proc/TID/syscall. 0 or -errno. */
int tgt_read_syscall_regs(pid_t tid, uint64_t *sp, uint64_t *pc);
/* Is fd in thread tid's table an IPC namespace other than its own? */
bool tgt_fd_is_other_ipc_ns(pid_t tid, int fd, uint64_t own_ipc);

/* The namespace inodes of a thread. 0 or -errno. */
int tgt_read_ns(pid_t tid, struct tgt_ns *ns);
/* Is user namespace `ancestor` the same as, or an ancestor of, the one thread tid's ipc ns
   belongs to? (A capability there covers the IPC namespace.) */
bool tgt_userns_covers(pid_t tid, uint64_t ancestor);

/*
 * Copy from/to a thread's memory. 0, or -EFAULT if any byte could not be transferred (the
 * kernel's copy_from_user answer), or -ESRCH if the thread is gone.
 */
int tgt_read(pid_t tid, uint64_t addr, void *buf, size_t len);
/*
 * The same read through an open /proc/TGID/mem (tgt_mem_open(): an fd, or -errno): 0, or
 * -EFAULT for anything short of the whole region, whatever the reason (unmapped, the address
 * space gone); the caller then asks tgt_read(), which tells which.
 */
int tgt_mem_open(pid_t tgid);
int tgt_mem_read(int fd, uint64_t addr, void *buf, size_t len);
int tgt_write(pid_t tid, uint64_t addr, const void *buf, size_t len);
/* Two regions in one system call; a region with len 0 is skipped. Per-region results. */
void tgt_read2(pid_t tid, uint64_t a1, void *b1, size_t l1, int *r1, uint64_t a2, void *b2,
	       size_t l2, int *r2);

/* uid/gid maps of a user namespace, read through a thread living in it. */
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
