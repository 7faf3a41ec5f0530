/* SPDX-License-Identifier: MIT */
/*
 * A program with a seccomp filter of its own, as sandboxing libraries install: this one refuses
 * pause(2) with EPERM and allows everything else. Its semaphore calls must behave as natively
 * all the same: a supervisor must not make a call of its own in the program's name (the ptrace
 * backend puts parked calls to sleep in pause()) and pass the refusal off as the semop's result,
 * which would end a wait with EPERM and give its unit to nobody.
 *
 * Three waits that outlast any short park: a decrement woken by an increment, a wait-for-zero
 * woken by SETVAL, a semtimedop that times out; then the values, and pause() refused as the
 * filter says.
 */
#include <stddef.h>
#include <sys/prctl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "prog.h"

static void refuse_pause(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pause, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	MUST(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	MUST(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0);
}

/* A child that waits in semop(id, {num, op}); its exit status is 0 or the errno it got. */
static pid_t waiter(int id, unsigned short num, short op, int cnt_cmd)
{
	pid_t pid = xfork();

	if (pid == 0)
		_exit(sop1(id, num, op, 0) ? errno : 0);
	WAIT_CNT(id, num, cnt_cmd, 1);
	sleep_ms(30); /* asleep for a while, not only just parked */
	return pid;
}

static void reaped(const char *label, pid_t pid)
{
	const char *got = reap_errno(pid);

	printf("%s: waiter got %s\n", label, got);
	EXPECT(!strcmp(got, "0"), "%s: the waiter's semop failed", label);
}

int main(void)
{
	struct sembuf dec = { 0, -1, 0 };
	struct timespec ts = { 0, 100 * 1000000L };
	int id;
	pid_t pid;

	prog_init();
	refuse_pause();
	MUST((id = semget(IPC_PRIVATE, 2, 0600)) >= 0);

	pid = waiter(id, 0, -1, GETNCNT);
	CHECK("semop +1 wakes the decrement", 0, sop1(id, 0, 1, 0));
	reaped("decrement", pid);
	CHECK("value 0 after it", 0, getval(id, 0));

	MUST(setval(id, 1, 3) == 0);
	pid = waiter(id, 1, 0, GETZCNT);
	CHECK("SETVAL 0 wakes the wait-for-zero", 0, setval(id, 1, 0));
	reaped("wait-for-zero", pid);

	CHECK("semtimedop times out", -EAGAIN, semtimedop(id, &dec, 1, &ts));
	CHECK("value still 0", 0, getval(id, 0));
	CHECK("GETNCNT 0", 0, semctl(id, 0, GETNCNT));

	CHECK("pause() refused by the program's filter", -EPERM, pause());
	CHECK("IPC_RMID", 0, semctl(id, 0, IPC_RMID));
	return prog_exit_status();
}
