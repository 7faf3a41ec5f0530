/* SPDX-License-Identifier: MIT */
/*
 * A multi-process System V semaphore program, the kind semvisor runs unmodified: N processes
 * pass a token round a ring (each waits on its own semaphore and posts the next one's), and
 * every pass also takes a SEM_UNDO mutex around a counter in shared memory. One process dies
 * holding the mutex on purpose; SEM_UNDO gives the mutex back, so the rest finish.
 *
 * It prints the same thing natively and under semvisor-run.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROCS  4
#define ROUNDS 500

static void die(const char *what)
{
	fprintf(stderr, "ring: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void op(int id, unsigned short num, short delta, short flags)
{
	struct sembuf sb = { num, delta, flags };

	while (semop(id, &sb, 1) < 0)
		if (errno != EINTR)
			die("semop");
}

int main(void)
{
	long *counter =
	    mmap(NULL, sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	/* semaphores 0..PROCS-1: the ring; PROCS: the mutex */
	int id = semget(IPC_PRIVATE, PROCS + 1, 0600);
	pid_t pids[PROCS + 1];
	int status;

	if (counter == MAP_FAILED || id < 0)
		die("setup");
	if (semctl(id, PROCS, SETVAL, 1) < 0)
		die("semctl SETVAL");

	/* One process takes the mutex with SEM_UNDO and dies holding it. */
	pids[PROCS] = fork();
	if (pids[PROCS] == 0) {
		op(id, PROCS, -1, SEM_UNDO);
		raise(SIGKILL);
	}
	waitpid(pids[PROCS], &status, 0);
	printf("a process died holding the mutex (signal %d); mutex value now %d\n",
	       WTERMSIG(status), semctl(id, PROCS, GETVAL));

	for (int p = 0; p < PROCS; p++) {
		pids[p] = fork();
		if (pids[p] < 0)
			die("fork");
		if (pids[p] == 0) {
			for (int r = 0; r < ROUNDS; r++) {
				op(id, (unsigned short)p, -1, 0); /* wait for the token */
				op(id, PROCS, -1, SEM_UNDO);	  /* mutex */
				(*counter)++;
				op(id, PROCS, 1, SEM_UNDO);
				op(id, (unsigned short)((p + 1) % PROCS), 1, 0); /* pass it on */
			}
			_exit(0);
		}
	}
	op(id, 0, 1, 0); /* the token enters the ring */
	for (int p = 0; p < PROCS; p++)
		waitpid(pids[p], &status, 0);

	printf("%d processes passed the token %d times; counter = %ld (expected %d)\n", PROCS,
	       PROCS * ROUNDS, *counter, PROCS * ROUNDS);
	printf("token back at semaphore 0: value %d; mutex value %d\n", semctl(id, 0, GETVAL),
	       semctl(id, PROCS, GETVAL));
	semctl(id, 0, IPC_RMID);
	return *counter == PROCS * ROUNDS ? 0 : 1;
}
