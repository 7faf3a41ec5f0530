/* SPDX-License-Identifier: MIT */
/*
 * When SEM_UNDO is applied (SPEC A5.2): the kernel applies a process's undo list in do_exit,
 * before the process becomes a zombie its parent can reap. So once waitpid() has returned, the
 * units the child held are back, whether it exited or was killed, and a waiter has already been
 * woken by them. A supervisor that learns of the exit asynchronously (a pidfd turning readable)
 * races with the parent's waitpid(); this program gives that race up to 1000 chances (exits and
 * kills alternately, for at most 4 s: a late application is rare per round) and counts the rounds
 * where the value was not back yet; then 20 rounds where the units wake a waiter.
 */
#include "prog.h"

int main(void)
{
	int id, late = 0, woken_late = 0, rounds = 0;
	int64_t until;

	prog_init();
	id = semget(IPC_PRIVATE, 2, 0600);
	MUST(id >= 0);

	printf("-- exit and kill -9, alternately\n");
	until = now_ns() + 4000000000LL;
	for (int round = 0; round < 1000 && now_ns() < until; round++) {
		struct chan held;
		pid_t p;

		chan_open(&held);
		p = xfork();
		if (p == 0) {
			if (sop1(id, 0, 1, SEM_UNDO))
				_exit(10);
			tell(&held, 'h');
			if (round % 2)
				for (;;)
					pause();
			_exit(0);
		}
		HEAR(&held, 'h');
		if (round % 2)
			kill(p, SIGKILL);
		reap(p);
		if (getval(id, 0) != 0) {
			late++;
			/* let it catch up, so the next round starts from 0 */
			MUST(wait_cnt(id, 0, GETVAL, 0));
		}
		close(held.r);
		close(held.w);
		rounds++;
	}
	printf("rounds where the undo was not applied by the time waitpid() returned: %d\n", late);
	printf("at least 200 rounds: %s\n", rounds >= 200 ? "yes" : "no");
	EXPECT(late == 0, "%d of %d rounds late", late, rounds);

	printf("-- a holder killed, a waiter woken by its undo\n");
	MUST(setval(id, 1, 1) == 0);
	for (int round = 0; round < 20; round++) {
		struct chan held;
		pid_t holder, waiter;

		chan_open(&held);
		holder = xfork();
		if (holder == 0) {
			if (sop1(id, 1, -1, SEM_UNDO))
				_exit(10);
			tell(&held, 'h');
			for (;;)
				pause();
		}
		HEAR(&held, 'h');
		waiter = xfork();
		if (waiter == 0)
			_exit(sop1(id, 1, -1, 0) ? 1 : 0);
		WAIT_CNT(id, 1, GETNCNT, 1);
		kill(holder, SIGKILL);
		reap(holder);
		/* natively the waiter has its unit already: it was woken inside the holder's exit */
		if (semctl(id, 1, GETNCNT) != 0)
			woken_late++;
		MUST(strcmp(reap(waiter), "exited 0") == 0);
		MUST(setval(id, 1, 1) == 0);
		close(held.r);
		close(held.w);
	}
	printf("rounds where the waiter still slept after waitpid() on the holder: %d\n",
	       woken_late);
	EXPECT(woken_late == 0, "%d of 20 rounds late", woken_late);
	return prog_exit_status();
}
