/* SPDX-License-Identifier: MIT */
/*
 * /proc/sysvipc/sem as a confined program would find it natively: the sets of its own IPC
 * namespace, which live in the supervisor, not in the kernel; and /proc/sys/kernel/sem and
 * sem_next_id where the supervisor does not follow those files (fixed limits, a named
 * namespace), as it holds them. With the filter's trap_opens, an
 * open that reaches the kernel's /proc/sysvipc/sem is answered with a file holding the
 * supervisor's rendering of it instead (serve.c); every other open runs on (CONTINUE).
 *
 * Which opens are those is decided by what the path reaches, not by how it is spelled: the
 * path is resolved as the caller would resolve it (its root for absolute paths and absolute
 * symlinks, openat2's RESOLVE_IN_ROOT; its working directory or dirfd for relative ones), and
 * the file found must be procfs's sysvipc/sem entry (procfs's magic, that entry's inode
 * number, which is the same on every proc mount). So relative paths, /proc/self/.., symlinks
 * and a proc mounted elsewhere all count, as natively.
 *
 * Why a check followed by CONTINUE is safe here (seccomp_unotify(2) warns that the kernel reads
 * the path again): the caller may change the path between our look and the kernel's. If it
 * changes a path we let through into /proc/sysvipc/sem, the kernel opens its own file for it:
 * the kernel's sets of the namespace, which the caller may read natively anyway. If it changes
 * a path we answer into another, it gets our rendering and nothing else. Neither gives it a
 * file it could not open itself; the view is a read-only copy whatever it asked for.
 *
 * What differs from the kernel's file: the view is a sealed memfd (fstat shows a regular file
 * of the text's size), made when opened (a later read sees the sets of the open, as one
 * consistent state, where the kernel's reads walk the sets as they go). Relative paths are
 * resolved from the caller's directory with our root for any absolute symlink inside them, so
 * a caller whose root differs from the supervisor's may see a relative path through such a
 * symlink decided as the supervisor's root would. A path through a directory the caller may
 * not search is judged by where it leads: the caller then gets the view where natively it
 * would get EACCES (it learns only what /proc/sysvipc/sem shows it).
 */
#ifndef SV_NOTIFY_PROCVIEW_H
#define SV_NOTIFY_PROCVIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/sem.h"

/* What an open reaches, of what the view answers for. */
enum pv_file {
	PV_OTHER,	   /* anything else: the open runs on */
	PV_SYSVIPC_SEM,	   /* /proc/sysvipc/sem */
	PV_SYSCTL_SEM,	   /* /proc/sys/kernel/sem */
	PV_SYSCTL_NEXT_ID, /* /proc/sys/kernel/sem_next_id */
};

/*
 * What path, opened by thread tid relative to dirfd (AT_FDCWD: its working directory) with
 * open flags oflags (O_NOFOLLOW counts) and openat2's resolve flags, reaches. Reads tid's /proc
 * entries by number: the caller proves afterwards that tid is still its thread.
 */
enum pv_file pv_classify(pid_t tid, int dirfd, const char *path, uint64_t oflags, uint64_t resolve);

/*
 * The text of /proc/sysvipc/sem for c's namespace, its ids as c's user namespace shows them
 * (c->ops->uid_out), in a sealed memfd positioned at 0: the fd, or -errno.
 */
int pv_render(const struct sv_caller *c);

/*
 * The text of /proc/sys/kernel/sem or sem_next_id for namespace ns, as the supervisor holds
 * them, in a sealed read-only memfd: the fd, or -errno. For namespaces whose values do not
 * follow the kernel's file (--limits, a named namespace): the others read the file itself.
 */
int pv_render_sysctl(struct sv_ns *ns, enum pv_file what);

#endif
