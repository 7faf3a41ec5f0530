/* SPDX-License-Identifier: MIT */
/*
 * Killed sleepers (BRIEF "Traps", SPEC B8.1): a process killed with SIGKILL while asleep in
 * semop never consumes a unit. Natively the dead sleeper leaves the queue before its parent can
 * reap it, so right after waitpid() GETNCNT no longer counts it, and a V goes to the next sleeper
 * or stays in the semaphore. Variants: the first of two sleepers, the only sleeper, a stopped
 * sleeper, a multi-semaphore sleeper, a SEM_UNDO sleeper, and some of many sleepers.
 */
#include "prog.h"

static int id;
static struct chan done;

static pid_t sleep_on(char tag, struct sembuf *sops, int n, int num, int cmd, int want)
{
	pid_t p = xfork();

	if (p == 0) {
		int r = semop(id, sops, (size_t)n) ? errno : 0;

		tell(&done, tag);
		_exit(r);
	}
	WAIT_CNT(id, num, cmd, want);
	return p;
}

static pid_t dec(char tag, int num, int want_ncnt, short flg)
{
	struct sembuf b = { (unsigned short)num, -1, flg };

	return sleep_on(tag, &b, 1, num, GETNCNT, want_ncnt);
}

static void killed(pid_t p)
{
	kill(p, SIGKILL);
	printf("  killed: %s\n", reap(p));
}

static void heard(const char *label, int n)
{
	printf("%s:", label);
	for (int i = 0; i < n; i++) {
		int c = hear(&done);

		printf(" %c", c < 0 ? '-' : c);
	}
	printf("\n");
}

int main(void)
{
	pid_t a, b, s[6];

	prog_init();
	chan_open(&done);
	id = semget(IPC_PRIVATE, 2, 0600);
	MUST(id >= 0);

	printf("-- the first of two sleepers is killed\n");
	a = dec('a', 0, 1, 0);
	b = dec('b', 0, 2, 0);
	killed(a);
	CHECK("GETNCNT right after reaping", 1, semctl(id, 0, GETNCNT));
	CHECK("V", 0, sop1(id, 0, 1, 0));
	CHECK("GETVAL right after (the second sleeper took it)", 0, getval(id, 0));
	heard("woken", 1);
	printf("  second sleeper: %s\n", reap_errno(b));

	printf("-- the only sleeper is killed\n");
	a = dec('c', 0, 1, 0);
	killed(a);
	CHECK("GETNCNT right after reaping", 0, semctl(id, 0, GETNCNT));
	CHECK("V", 0, sop1(id, 0, 1, 0));
	CHECK("GETVAL right after (nobody took it)", 1, getval(id, 0));
	MUST(setval(id, 0, 0) == 0);

	printf("-- a stopped sleeper is killed\n");
	a = dec('d', 0, 1, 0);
	kill(a, SIGSTOP);
	{
		int st;

		MUST(waitpid(a, &st, WUNTRACED) == a && WIFSTOPPED(st));
	}
	killed(a);
	CHECK("V", 0, sop1(id, 0, 1, 0));
	CHECK("GETVAL right after", 1, getval(id, 0));
	MUST(setval(id, 0, 0) == 0);

	printf("-- a sleeper on two semaphores is killed\n");
	{
		struct sembuf ops[2] = { { 0, -1, 0 }, { 1, -1, 0 } };

		a = sleep_on('e', ops, 2, 0, GETNCNT, 1);
	}
	killed(a);
	{
		struct sembuf ops[2] = { { 0, 1, 0 }, { 1, 1, 0 } };

		CHECK("V both", 0, semop(id, ops, 2));
	}
	CHECK("GETVAL a[0]", 1, getval(id, 0));
	CHECK("GETVAL a[1]", 1, getval(id, 1));
	MUST(setval(id, 0, 0) == 0);
	MUST(setval(id, 1, 0) == 0);

	printf("-- a SEM_UNDO sleeper is killed\n");
	a = dec('f', 0, 1, SEM_UNDO);
	killed(a);
	CHECK("V", 0, sop1(id, 0, 1, 0));
	CHECK("GETVAL right after", 1, getval(id, 0));
	MUST(setval(id, 0, 0) == 0);

	printf("-- two of five sleepers are killed, then +3\n");
	for (int i = 0; i < 5; i++)
		s[i] = dec((char)('1' + i), 0, i + 1, 0);
	killed(s[1]);
	killed(s[3]);
	CHECK("GETNCNT right after reaping", 3, semctl(id, 0, GETNCNT));
	CHECK("+3", 0, sop1(id, 0, 3, 0));
	CHECK("GETVAL right after", 0, getval(id, 0));
	{
		char t[4] = { 0 };

		for (int i = 0; i < 3; i++) {
			int c = hear(&done);

			t[i] = (char)(c < 0 ? '-' : c);
		}
		/* order of running after the wake-up is the scheduler's: sort */
		for (int i = 0; i < 3; i++)
			for (int j = i + 1; j < 3; j++)
				if (t[j] < t[i]) {
					char x = t[i];

					t[i] = t[j];
					t[j] = x;
				}
		printf("woken: %s\n", t);
	}
	for (int i = 0; i < 5; i += 2)
		printf("  sleeper %d: %s\n", i + 1, reap_errno(s[i]));

	printf("-- twenty rounds: two sleepers killed, then +2\n");
	for (int round = 0; round < 20; round++) {
		a = dec('g', 0, 1, 0);
		b = dec('h', 0, 2, 0);
		kill(a, SIGKILL);
		kill(b, SIGKILL);
		reap(a);
		reap(b);
		MUST(sop1(id, 0, 2, 0) == 0);
		if (getval(id, 0) != 2) {
			printf("round %d: GETVAL %d after +2 with all sleepers dead\n", round,
			       getval(id, 0));
			prog_failures++;
			break;
		}
		MUST(setval(id, 0, 0) == 0);
	}
	printf("twenty rounds: done\n");
	return prog_exit_status();
}
