/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filter semvisor installs in the programs it serves.
 *
 * Trapped (SCMP_ACT_NOTIFY), native x86_64 and x32: semget, semop, semtimedop, semctl; and, when
 * asked (trap_cred_changes), every call that can change what the supervisor caches about a thread:
 * set*id, setgroups, capset, execve/execveat, unshare, setns. The supervisor lets those run
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE) after dropping its cached view.
 * i386: the semaphore calls (ipc(2) SEMOP/SEMGET/SEMCTL/SEMTIMEDOP, semget, semctl,
 * semtimedop_time64) fail with ENOSYS, so they never reach the kernel's semaphores.
 * Everything else runs natively.
 */
#ifndef SV_FILTER_H
#define SV_FILTER_H

#include <stdbool.h>
#include <stddef.h>

struct filter_opts {
	bool trap_cred_changes;
	/* Set no_new_privs even when privileged enough not to need it. */
	bool force_nnp;
};

/*
 * Install the filter on the calling thread (and so on everything it execs and forks). Returns
 * the listener fd (close-on-exec), or -errno with a sentence in err: EBUSY when a filter above
 * already has a listener (nested supervisors), EACCES without no_new_privs or CAP_SYS_ADMIN,
 * ENOSYS/EINVAL when the kernel lacks user notification.
 */
int filter_install(const struct filter_opts *opts, char *err, size_t errlen);

/* Is this syscall number (native ABI) one that filter_install() traps to invalidate caches? */
bool filter_is_cred_change(int nr);

#endif
