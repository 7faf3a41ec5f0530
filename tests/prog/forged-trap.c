/* SPDX-License-Identifier: MIT */
/*
 * Signals dressed as ptrace stops. A thread may queue itself a signal with any si_code
 * (rt_tgsigqueueinfo to its own tid), the ones the kernel gives a tracee's stops included:
 * SIGTRAP | PTRACE_EVENT_SECCOMP << 8 for a seccomp stop, SIGTRAP | 0x80 for a syscall stop,
 * SIGTRAP | PTRACE_EVENT_CLONE << 8 for a clone event. A tracer that told its stops apart by
 * the stop's siginfo alone (PTRACE_GET_SYSCALL_INFO reads just that) would take such a signal
 * for a stop and swallow it, or change the registers of the call it returns from. Each is sent
 * right after semaphore calls, directly and through a blocked signal released by
 * sigprocmask(2) and by sigsuspend(2); the handler must run once for each, with the si_code
 * sent, every call must return what it returns natively, and the semaphore must end where the
 * calls leave it.
 */
#include "prog.h"

static volatile sig_atomic_t handled;
static volatile int seen_code;

static void on_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	handled++;
	seen_code = si->si_code;
}

/* SIGTRAP with si_code code, queued to this thread: 0 or -1 with errno. */
static long forge(int code)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = SIGTRAP;
	si.si_code = code;
	return syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGTRAP, &si);
}

static void report(const char *how, int code)
{
	printf("%s, si_code %#x: handler ran %d time(s), with si_code %#x\n", how, code,
	       (int)handled, seen_code);
	EXPECT(handled == 1 && seen_code == code, "%s %#x: the signal was not delivered as sent",
	       how, code);
	handled = 0;
	seen_code = 0;
}

int main(void)
{
	static const int codes[] = { SIGTRAP | (7 << 8), SIGTRAP | 0x80, SIGTRAP | (3 << 8),
				     SIGTRAP | (4 << 8) };
	struct sembuf up = { 0, 1, 0 }, down = { 0, -1, 0 };
	struct sigaction sa;
	sigset_t trap, none;
	int id;

	prog_init();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO;
	MUST(sigaction(SIGTRAP, &sa, NULL) == 0);
	sigemptyset(&trap);
	sigaddset(&trap, SIGTRAP);
	sigemptyset(&none);
	id = SHOW("semget", semget(IPC_PRIVATE, 1, 0600));
	MUST(id >= 0);

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		int code = codes[i];

		/* delivered as rt_tgsigqueueinfo returns, just after a semop */
		CHECK("semop +1", 0, semop(id, &up, 1));
		CHECK("forged", 0, forge(code));
		report("at once", code);

		/* pending while blocked across semaphore calls, delivered by sigprocmask */
		MUST(sigprocmask(SIG_BLOCK, &trap, NULL) == 0);
		CHECK("forged (blocked)", 0, forge(code));
		CHECK("semop -1", 0, semop(id, &down, 1));
		CHECK("GETVAL", 0, semctl(id, 0, GETVAL));
		CHECK("sigprocmask", 0, sigprocmask(SIG_UNBLOCK, &trap, NULL));
		report("after sigprocmask", code);

		/* the same, delivered by sigsuspend, which then returns EINTR */
		MUST(sigprocmask(SIG_BLOCK, &trap, NULL) == 0);
		CHECK("forged (blocked)", 0, forge(code));
		CHECK("semop +1", 0, semop(id, &up, 1));
		CHECK("sigsuspend", -EINTR, sigsuspend(&none));
		MUST(sigprocmask(SIG_UNBLOCK, &trap, NULL) == 0);
		report("in sigsuspend", code);
		CHECK("semop -1", 0, semop(id, &down, 1));
	}
	CHECK("GETVAL at the end", 0, semctl(id, 0, GETVAL));
	CHECK("IPC_RMID", 0, semctl(id, 0, IPC_RMID));
	return prog_exit_status();
}
