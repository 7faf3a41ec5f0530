/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filter semvisor installs in the programs it serves.
 *
 * On x86_64 a process reaches the kernel through three system-call tables, whatever it was
 * built for: x86_64's (syscall), x32's (syscall with __X32_SYSCALL_BIT set in the number) and
 * i386's (int $0x80, at AUDIT_ARCH_I386 with numbers and layouts of its own). The filter names
 * each table's own numbers:
 *
 *   x86_64, x32   semget, semop, semtimedop, semctl            trapped (SCMP_ACT_NOTIFY, or
 *                                                                SCMP_ACT_TRACE), served
 *                 (x32 only where the kernel has it: elsewhere its calls stay ENOSYS, as natively)
 *   i386          ipc(2) SEMOP, SEMGET, SEMCTL, SEMTIMEDOP      ENOSYS, with any version in
 *                 (call & 0xffff, as the kernel decodes it),    the call's upper 16 bits
 *                 semget, semctl, semtimedop_time64             ENOSYS
 *   x86_64, x32   open, openat, openat2                         trapped when trap_opens
 *   all three     unshare with CLONE_NEWIPC or CLONE_SYSVSEM;   trapped when trap_ns_changes:
 *                 setns with nstype 0 or one naming             the supervisor notes the change
 *                 CLONE_NEWIPC                                  and lets the call run
 *
 * So no semaphore call of any ABI reaches the kernel's own semaphores. Nothing else is trapped:
 * in particular no call that changes credentials (set*id, setgroups, capset, execve), because a
 * trapped call is interruptible while the supervisor holds it, and these calls never fail with
 * EINTR natively; the supervisor reads credentials afresh on every call instead (ident.h).
 * unshare and setns are trapped in these forms alone because what they change (the IPC
 * namespace, whose undo list they apply at once) cannot be read cheaply from outside (ident.h
 * says what that costs), at the price of the same EINTR, in these rare forms only: a trapped
 * call interrupted by a signal whose handler lacks SA_RESTART fails with EINTR, having done
 * nothing. A user namespace is read whenever a call needs it, so changing one is not trapped.
 */
#ifndef SV_FILTER_H
#define SV_FILTER_H

#include <stdbool.h>
#include <stddef.h>

struct filter_opts {
	/* Trap unshare/setns as above, so the supervisor knows of namespace changes at once. */
	bool trap_ns_changes;
	/*
	 * Trap open, openat and openat2 (x86_64 and x32) too, so that a read of
	 * /proc/sysvipc/sem gets the supervisor's sets (procview.h); every other open runs on
	 * at once (CONTINUE), at the cost of a notification's round trip each.
	 */
	bool trap_opens;
	/* Set no_new_privs even when privileged enough not to need it. */
	bool force_nnp;
	/*
	 * Trap with SECCOMP_RET_TRACE instead, for a tracer (ptrace.h): no listener is made, so
	 * a filter with one above does not stand in the way.
	 */
	bool trace;
};

/*
 * Install the filter on the calling thread (and so on everything it execs and forks). Returns
 * the listener fd (close-on-exec; 0 with opts->trace), or -errno with a sentence in err: EBUSY when a filter above
 * already has a listener (nested supervisors), EACCES without no_new_privs or CAP_SYS_ADMIN,
 * ENOSYS/EINVAL when the kernel lacks user notification.
 */
int filter_install(const struct filter_opts *opts, char *err, size_t errlen);

/*
 * Could a child of ours install a filter with a listener? 0, or why not (filter_install()'s
 * errnos: EBUSY when one with a listener is above us). Forks a child that tries and ends.
 */
int filter_probe_notify(void);

/* Does this kernel serve the x32 table (CONFIG_X86_X32_ABI)? */
bool filter_kernel_has_x32(void);

/*
 * The classic BPF program filter_install() would load, in a buffer the caller frees: its
 * length in instructions, or -errno. For tests that run it over every system-call number.
 */
int filter_export(const struct filter_opts *opts, void **prog);

#endif
