/* SPDX-License-Identifier: MIT */
/*
 * Operations on several semaphores in one call (SPEC A4.4-A4.7, A4.9): all-or-nothing; sops on
 * the same semaphore apply in sequence; IPC_NOWAIT counts only on the sop that blocks; a sleeping
 * multi-sop call is re-evaluated when things change, so its first blocking sop (what GETNCNT and
 * GETZCNT count) moves, and it may later complete, or fail with EAGAIN or ERANGE; sempid is
 * stamped on every semaphore it names, wait-for-zero ones too. Simple single-semaphore sleepers
 * and complex ones interleave on the same set.
 */
#include "prog.h"

static int id;

static void show_vals(const char *label)
{
	unsigned short v[4];

	MUST(semctl(id, 0, GETALL, (union semun){ .array = v }) == 0);
	printf("%s: values %u %u %u %u\n", label, v[0], v[1], v[2], v[3]);
}

static void show_cnts(const char *label)
{
	printf("%s: ncnt", label);
	for (int i = 0; i < 4; i++)
		printf(" %d", semctl(id, i, GETNCNT));
	printf(" zcnt");
	for (int i = 0; i < 4; i++)
		printf(" %d", semctl(id, i, GETZCNT));
	printf("\n");
}

static void setall(unsigned short a, unsigned short b, unsigned short c, unsigned short d)
{
	MUST(semctl(id, 0, SETALL, (union semun){ .array = (unsigned short[]){ a, b, c, d } }) ==
	     0);
}

/* A child that runs semop(sops) and exits with its errno (0 on success). */
static pid_t start(struct sembuf *sops, int n)
{
	pid_t p = xfork();

	if (p == 0)
		_exit(semop(id, sops, (size_t)n) ? errno : 0);
	return p;
}

static void immediate(void)
{
	printf("-- all or nothing\n");
	setall(1, 0, 5, 32767);
	{
		struct sembuf ops[] = { { 0, -1, IPC_NOWAIT }, { 1, -1, IPC_NOWAIT } };

		CHECK("{a0 -1, a1 -1} nowait", -EAGAIN, semop(id, ops, 2));
	}
	{
		struct sembuf ops[] = { { 0, -1, 0 }, { 2, 1, 0 }, { 3, 1, 0 } };

		CHECK("{a0 -1, a2 +1, a3 +1 (too big)}", -ERANGE, semop(id, ops, 3));
	}
	{
		struct sembuf ops[] = { { 2, -5, 0 }, { 2, 0, IPC_NOWAIT } };

		CHECK("{a2 -5, a2 wait-for-zero} (in sequence)", 0, semop(id, ops, 2));
	}
	{
		struct sembuf ops[] = { { 1, 1, 0 }, { 1, -1, 0 }, { 1, 0, 0 } };

		CHECK("{a1 +1, a1 -1, a1 0}", 0, semop(id, ops, 3));
	}
	{
		struct sembuf ops[] = { { 1, -1, IPC_NOWAIT }, { 1, 1, 0 } };

		CHECK("{a1 -1, a1 +1} nowait", -EAGAIN, semop(id, ops, 2));
	}
	{
		/* the first failing sop decides: blocking (EAGAIN) before the ERANGE after it */
		struct sembuf ops[] = { { 1, -1, IPC_NOWAIT }, { 3, 1, 0 } };

		CHECK("{a1 -1 nowait, a3 +1 (too big)}", -EAGAIN, semop(id, ops, 2));
	}
	{
		struct sembuf ops[] = { { 3, 1, 0 }, { 1, -1, IPC_NOWAIT } };

		CHECK("{a3 +1 (too big), a1 -1 nowait}", -ERANGE, semop(id, ops, 2));
	}
	{
		/* IPC_NOWAIT on a sop that does not block does not matter */
		struct sembuf ops[] = { { 0, -1, IPC_NOWAIT }, { 1, 0, 0 } };

		CHECK("{a0 -1 nowait, a1 0}", 0, semop(id, ops, 2));
	}
	show_vals("after");
}

static void later(void)
{
	pid_t p, q;
	int r;

	printf("-- a sleeping complex op moves its blocking sop, then completes\n");
	setall(0, 0, 0, 0);
	{
		struct sembuf ops[] = { { 0, -1, 0 }, { 1, -1, 0 }, { 2, 1, 0 }, { 3, 0, 0 } };

		p = start(ops, 4);
	}
	WAIT_CNT(id, 0, GETNCNT, 1);
	show_cnts("asleep on a0");
	CHECK("a0 +1", 0, sop1(id, 0, 1, 0));
	show_cnts("asleep on a1");
	show_vals("a0 not taken yet");
	CHECK("a3 +1", 0, sop1(id, 3, 1, 0));
	CHECK("a1 +1", 0, sop1(id, 1, 1, 0));
	show_cnts("asleep on a3 (wait-for-zero)");
	CHECK("a3 -1", 0, sop1(id, 3, -1, 0));
	show_vals("right after a3 -1");
	show_cnts("right after a3 -1");
	printf("complex sleeper: %s\n", reap_errno(p));
	r = 0;
	for (int i = 0; i < 4; i++)
		r += semctl(id, i, GETPID) == p;
	printf("sempid = the sleeper on all four: %s\n", r == 4 ? "yes" : "no");
	EXPECT(r == 4, "sempid on %d of 4", r);

	printf("-- IPC_NOWAIT counts only on the blocking sop\n");
	setall(1, 0, 0, 0);
	{
		struct sembuf ops[] = { { 0, -1, IPC_NOWAIT }, { 1, -1, 0 } };

		p = start(ops, 2);
	}
	WAIT_CNT(id, 1, GETNCNT, 1);
	show_cnts("asleep on a1");
	CHECK("a1 +1", 0, sop1(id, 1, 1, 0));
	printf("sleeper: %s\n", reap_errno(p));
	show_vals("after");

	printf("-- re-evaluated later: EAGAIN from a sop with IPC_NOWAIT\n");
	setall(0, 0, 0, 0);
	{
		struct sembuf ops[] = { { 0, -1, 0 }, { 1, -1, IPC_NOWAIT } };

		p = start(ops, 2);
	}
	WAIT_CNT(id, 0, GETNCNT, 1);
	CHECK("a0 +1", 0, sop1(id, 0, 1, 0));
	printf("sleeper: %s\n", reap_errno(p));
	show_vals("a0 not taken");
	show_cnts("nobody asleep");

	printf("-- re-evaluated later: ERANGE\n");
	setall(0, 0, 0, 0);
	{
		struct sembuf ops[] = { { 0, -1, 0 }, { 2, 2, 0 } };

		p = start(ops, 2);
	}
	WAIT_CNT(id, 0, GETNCNT, 1);
	CHECK("SETVAL a2 = 32766", 0, setval(id, 2, 32766));
	CHECK("a0 +1", 0, sop1(id, 0, 1, 0));
	printf("sleeper: %s\n", reap_errno(p));
	show_vals("unchanged");

	printf("-- simple and complex sleepers on one set\n");
	setall(0, 0, 0, 0);
	{
		struct sembuf ops[] = { { 0, -1, 0 }, { 1, -1, 0 } };

		p = start(ops, 2); /* complex, first in the queue */
	}
	WAIT_CNT(id, 0, GETNCNT, 1);
	{
		struct sembuf ops[] = { { 0, -1, 0 } };

		q = start(ops, 1); /* simple, second */
	}
	WAIT_CNT(id, 0, GETNCNT, 2);
	CHECK("a0 +1 (the complex one cannot run: a1 is 0)", 0, sop1(id, 0, 1, 0));
	printf("simple sleeper: %s\n", reap_errno(q));
	show_vals("after the simple one");
	show_cnts("complex still asleep on a0");
	{
		struct sembuf ops[] = { { 0, 1, 0 }, { 1, 1, 0 } };

		CHECK("{a0 +1, a1 +1}", 0, semop(id, ops, 2));
	}
	printf("complex sleeper: %s\n", reap_errno(p));
	show_vals("end");
}

int main(void)
{
	prog_init();
	id = semget(IPC_PRIVATE, 4, 0600);
	MUST(id >= 0);
	immediate();
	later();
	return prog_exit_status();
}
