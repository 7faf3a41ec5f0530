/* SPDX-License-Identifier: MIT */
/*
 * One thread drops root (glibc's setresuid, which changes every thread's credentials before
 * it returns) while another removes a 0600 root set. Natively the removal either happens
 * before the other thread's credentials change, so before setresuid returns, or fails with
 * EPERM. So two things never happen: the removal succeeding when it was asked for after
 * setresuid returned, and the set still there after setresuid returned (EACCES for the
 * dropped thread, not EINVAL) yet removed by the other thread's call.
 *
 * Each round runs in a fresh process (root cannot come back). Usage: cred-race [ROUNDS]
 */
#include <pthread.h>
#include <stdatomic.h>

#include "prog.h"

static atomic_int go, dropped;
static int id;

struct result {
	int asked_after_drop; /* the removal was asked for after setresuid returned */
	long r;		      /* its result */
};

static void *remover(void *arg)
{
	struct result *res = arg;

	while (!atomic_load(&go))
		;
	res->asked_after_drop = atomic_load(&dropped);
	res->r = semctl(id, 0, IPC_RMID);
	return NULL;
}

/* One round; exit status: 0 as natively, 1 a violation, 2 a broken round. */
static int round_(void)
{
	struct result res;
	struct semid_ds ds;
	union semun u = { .buf = &ds };
	pthread_t t;
	long st;
	int err;

	id = semget(IPC_PRIVATE, 1, 0600);
	if (id < 0 || pthread_create(&t, NULL, remover, &res))
		return 2;
	atomic_store(&go, 1);
	if (setresuid(65534, 65534, 65534))
		return 2;
	atomic_store(&dropped, 1);
	st = semctl(id, 0, IPC_STAT, u);
	err = errno;
	pthread_join(t, NULL);
	if (st == 0)
		return 2; /* nobody may read a 0600 root set */
	/* EACCES: the set was there after the drop, so it was not removed before it */
	if (res.r == 0 && (res.asked_after_drop || err == EACCES))
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 2000, bad = 0, broken = 0;

	prog_init();
	MUST(geteuid() == 0);
	for (int i = 0; i < rounds; i++) {
		pid_t p = xfork();
		int st;

		if (p == 0)
			_exit(round_());
		while (waitpid(p, &st, 0) < 0)
			MUST(errno == EINTR);
		if (!WIFEXITED(st) || WEXITSTATUS(st) == 2)
			broken++;
		else if (WEXITSTATUS(st) == 1)
			bad++;
	}
	printf("%d rounds: removals ordered after the credential change: %d, broken rounds: %d\n",
	       rounds, bad, broken);
	EXPECT(bad == 0 && broken == 0, "%d violations, %d broken", bad, broken);
	return prog_exit_status();
}
