/* SPDX-License-Identifier: MIT */
/*
 * IPC_RMID with sleepers (SPEC A3.3, A6.3): every sleeper of the removed set fails with EIDRM
 * (decrements, wait-for-zero, multi-semaphore, timed, SEM_UNDO, sleeping threads), a stopped
 * sleeper too once continued; calls that come after the removal fail with EINVAL; sleepers on
 * another set are untouched; the key is free for a new, independent set.
 */
#include <pthread.h>

#include "prog.h"

#define KEY 0x4d1d

static int id, other;

static pid_t start(struct sembuf *sops, int n, int timeout_ms)
{
	pid_t p = xfork();

	if (p == 0) {
		struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
		int r =
		    timeout_ms ? semtimedop(id, sops, (size_t)n, &ts) : semop(id, sops, (size_t)n);

		_exit(r ? errno : 0);
	}
	return p;
}

static void *thread_dec(void *arg)
{
	struct sembuf b = { 2, -1, 0 };

	(void)arg;
	return (void *)(intptr_t)(semop(id, &b, 1) ? errno : 0);
}

int main(void)
{
	pid_t p[7], threads, bystander;
	int st;

	prog_init();
	id = semget(KEY, 3, IPC_CREAT | 0600);
	MUST(id >= 0);
	other = semget(IPC_PRIVATE, 1, 0600);
	MUST(other >= 0);
	MUST(setval(id, 1, 1) == 0);

	{
		struct sembuf ops[] = { { 0, -1, 0 } };

		p[0] = start(ops, 1, 0);
		WAIT_CNT(id, 0, GETNCNT, 1);
		p[1] = start(ops, 1, 10000);
		WAIT_CNT(id, 0, GETNCNT, 2);
	}
	{
		struct sembuf ops[] = { { 1, 0, 0 } };

		p[2] = start(ops, 1, 0);
		WAIT_CNT(id, 1, GETZCNT, 1);
	}
	{
		struct sembuf ops[] = { { 2, 1, 0 }, { 0, -1, 0 }, { 1, 0, 0 } };

		p[3] = start(ops, 3, 0);
		WAIT_CNT(id, 0, GETNCNT, 3);
	}
	{
		struct sembuf ops[] = { { 0, -1, SEM_UNDO } };

		p[4] = start(ops, 1, 0);
		WAIT_CNT(id, 0, GETNCNT, 4);
	}
	{
		struct sembuf ops[] = { { 0, -1, 0 } };

		p[5] = start(ops, 1, 0);
		WAIT_CNT(id, 0, GETNCNT, 5);
		kill(p[5], SIGSTOP);
		MUST(waitpid(p[5], &st, WUNTRACED) == p[5] && WIFSTOPPED(st));
		/* natively the stop ended its semop (EINTR, delivered when it continues) */
		CHECK("GETNCNT a[0] once the fifth sleeper is stopped", 4, semctl(id, 0, GETNCNT));
	}
	threads = xfork();
	if (threads == 0) {
		pthread_t t[2];
		void *r[2];

		for (int i = 0; i < 2; i++)
			MUST(pthread_create(&t[i], NULL, thread_dec, NULL) == 0);
		for (int i = 0; i < 2; i++)
			MUST(pthread_join(t[i], &r[i]) == 0);
		/* the parent prints: both threads' errno if equal */
		_exit(r[0] == r[1] ? (int)(intptr_t)r[0] : 99);
	}
	WAIT_CNT(id, 2, GETNCNT, 2);
	bystander = xfork();
	if (bystander == 0)
		_exit(sop1(other, 0, -1, 0) ? errno : 0);
	WAIT_CNT(other, 0, GETNCNT, 1);

	printf("sleepers: ncnt %d %d %d, zcnt %d %d %d\n", semctl(id, 0, GETNCNT),
	       semctl(id, 1, GETNCNT), semctl(id, 2, GETNCNT), semctl(id, 0, GETZCNT),
	       semctl(id, 1, GETZCNT), semctl(id, 2, GETZCNT));
	CHECK("IPC_RMID", 0, semctl(id, 0, IPC_RMID));
	printf("-1: %s\n", reap_errno(p[0]));
	printf("-1 timed: %s\n", reap_errno(p[1]));
	printf("wait-for-zero: %s\n", reap_errno(p[2]));
	printf("multi-semaphore: %s\n", reap_errno(p[3]));
	printf("SEM_UNDO: %s\n", reap_errno(p[4]));
	kill(p[5], SIGCONT);
	printf("stopped, then continued: %s\n", reap_errno(p[5]));
	printf("two sleeping threads: %s\n", reap_errno(threads));

	CHECK("GETVAL of the removed set", -EINVAL, getval(id, 0));
	CHECK("semop on the removed set", -EINVAL, sop1(id, 0, 1, 0));
	CHECK("IPC_RMID again", -EINVAL, semctl(id, 0, IPC_RMID));
	CHECK("the other set's sleeper is still there", 1, semctl(other, 0, GETNCNT));
	CHECK("V the other set", 0, sop1(other, 0, 1, 0));
	printf("bystander: %s\n", reap_errno(bystander));

	CHECK("semget the key", -ENOENT, semget(KEY, 0, 0));
	id = CHECK("semget the key, IPC_CREAT", 2, semget(KEY, 1, IPC_CREAT | 0600));
	CHECK("GETVAL of the new set", 0, getval(id, 0));
	CHECK("GETNCNT of the new set", 0, semctl(id, 0, GETNCNT));
	return prog_exit_status();
}
