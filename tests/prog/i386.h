/* SPDX-License-Identifier: MIT */
/*
 * System calls through i386's table from a 64-bit program (int $0x80): other numbers, other
 * layouts, the same kernel. Arguments are 32 bits; pointers must lie below 4 GiB.
 */
#ifndef SV_TEST_I386_H
#define SV_TEST_I386_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

/* i386 system-call numbers (arch/x86/entry/syscalls/syscall_32.tbl) */
#define I386_IPC	       117
#define I386_SETGROUPS32       206
#define I386_SETRESUID32       208
#define I386_SETRESGID32       210
#define I386_SETUID	       23 /* 16-bit uids */
#define I386_SEMGET	       393
#define I386_SEMCTL	       394
#define I386_SEMTIMEDOP_TIME64 420
/* ipc(2) calls (include/uapi/linux/ipc.h) */
#define IPCCALL_SEMOP	   1
#define IPCCALL_SEMGET	   2
#define IPCCALL_SEMCTL	   3
#define IPCCALL_SEMTIMEDOP 4

/* -1 with errno set, as libc's wrappers do. (ebp, the sixth argument, stays unused.) */
static inline long i386_syscall(long nr, long a, long b, long c, long d, long e)
{
	long ret;

	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e)
			 : "memory", "r8", "r9", "r10", "r11", "cc");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/*
 * Does this kernel serve int $0x80 at all? Not without IA32 emulation (ia32_emulation=0, or
 * CONFIG_IA32_EMULATION off), nor under hypervisors without a 32-bit mode: there the
 * instruction raises SIGSEGV, and no i386 program can run, natively or under semvisor. Asked in
 * a child, which may die of it.
 */
static inline bool i386_available(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		/* the kernel's verdict, not a sanitizer's report of it */
		signal(SIGSEGV, SIG_DFL);
		_exit(i386_syscall(20 /* getpid */, 0, 0, 0, 0, 0) == getpid() ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

#endif
