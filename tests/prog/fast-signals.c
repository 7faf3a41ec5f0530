/* SPDX-License-Identifier: MIT */
/*
 * Under `semvisor-run --fast` only: a signal handler at each step of a fast operation, by the
 * library's test hook (SEMVISOR_FASTLIB_KILL=STEP:N:SIGNAL, interposer/preload/fastlib.c).
 *
 * For each step, two children take and give back units with SEM_UNDO on semaphore 0, and
 * SIGUSR1 arrives before that step of their 20th operation:
 *   - "jump": the handler siglongjmps out of the operation, which is left wherever it was
 *     (holding the word, its semadj entry half written). The child goes on with 50 more rounds
 *     on the same semaphore and exits normally. Nothing it did may be lost or counted twice:
 *     after its exit the value is back at its start.
 *   - "nest": the handler makes operations of its own, on both semaphores, while the one it
 *     interrupted is in the middle of its steps; that one then finishes. The child checks the
 *     values it must see (semaphore 1 raised by the handler's net +1), and after its exit
 *     both are back at their start.
 * A child the signal did not reach (the step was not reached) says so.
 */
#include <setjmp.h>
#include <signal.h>

#include "prog.h"

#define START0 10
#define START1 5
#define ROUNDS 50

/* the steps of enum fw_step an uncontended operation with SEM_UNDO goes through */
static const char *const steps[] = { "A1", "E1", "A2", "A3", "A4", "A5", "E2", "A6" };

static int id;
static sigjmp_buf out;
static volatile sig_atomic_t hit;

static void on_jump(int sig)
{
	(void)sig;
	hit = 1;
	siglongjmp(out, 1);
}

/* Calls of its own in the middle of the interrupted one's steps: errno as it was after. */
static void on_nest(int sig)
{
	int e = errno;

	(void)sig;
	hit = 1;
	if (sop1(id, 1, 2, SEM_UNDO) != 0 || sop1(id, 1, -1, SEM_UNDO) != 0 ||
	    sop1(id, 0, -1, SEM_UNDO) != 0 || sop1(id, 0, 1, SEM_UNDO) != 0)
		_exit(3);
	errno = e;
}

/* One round: three operations on semaphore 0 that leave it as it was. */
static void round0(void)
{
	MUST(sop1(id, 0, -1, SEM_UNDO) == 0);
	MUST(sop1(id, 0, -2, SEM_UNDO) == 0);
	MUST(sop1(id, 0, 3, SEM_UNDO) == 0);
}

static pid_t child(int step, bool jump)
{
	pid_t p = xfork();

	if (p == 0) {
		struct sigaction sa = { .sa_handler = jump ? on_jump : on_nest };
		char v[32];

		sigemptyset(&sa.sa_mask);
		MUST(sigaction(SIGUSR1, &sa, NULL) == 0);
		snprintf(v, sizeof(v), "%d:20:%d", step, SIGUSR1);
		MUST(setenv("SEMVISOR_FASTLIB_KILL", v, 1) == 0);
		if (sigsetjmp(out, 1) == 0) {
			for (int k = 0; k < ROUNDS; k++)
				round0();
		}
		/* after the jump: the operation it left is neither done nor undone for the child */
		for (int k = 0; k < ROUNDS; k++)
			round0();
		if (!hit)
			_exit(4);
		if (!jump && (getval(id, 0) != START0 || getval(id, 1) != START1 + 1))
			_exit(5);
		_exit(0);
	}
	return p;
}

static const char *verdict(pid_t p)
{
	const char *h = reap(p);

	if (!strcmp(h, "exited 4"))
		return "not reached";
	if (!strcmp(h, "exited 5"))
		return "wrong values inside";
	return strcmp(h, "exited 0") ? h : "ok";
}

int main(void)
{
	prog_init();
	id = semget(IPC_PRIVATE, 2, 0600);
	MUST(id >= 0);
	MUST(setval(id, 0, START0) == 0);
	MUST(setval(id, 1, START1) == 0);
	for (int i = 0; i < (int)(sizeof(steps) / sizeof(steps[0])); i++) {
		const char *j, *n;

		j = verdict(child(i + 1, true));
		printf("jump before %s: %s, values %d %d; ", steps[i], j, getval(id, 0),
		       getval(id, 1));
		n = verdict(child(i + 1, false));
		printf("nest before %s: %s, values %d %d\n", steps[i], n, getval(id, 0),
		       getval(id, 1));
	}
	MUST(semctl(id, 0, IPC_RMID) == 0);
	return prog_exit_status();
}
