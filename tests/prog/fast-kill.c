/* SPDX-License-Identifier: MIT */
/*
 * Uncontended SEM_UNDO takes and give-backs, killed at random: what the fast path serves in the
 * program itself under `semvisor-run --fast`, so that kill -9 lands at every step of it.
 *
 * WORKERS processes of THREADS threads each loop: take one unit with SEM_UNDO and give it back
 * with SEM_UNDO, on their own semaphore nine times in ten and on one all share otherwise. The
 * parent kills a random worker (SIGKILL) every few milliseconds and starts another in its
 * place. At the end every worker is killed; the kernel's SEM_UNDO then owes every semaphore
 * exactly the units its killed holders had taken, so each must be back at UNITS.
 *
 * Prints the verdict (the same natively and under semvisor), and on standard error the
 * operations done, for a test to weigh against the trapped calls semvisor counted.
 *
 * Usage: fast-kill [MS]   (default 2000)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "prog.h"

#define WORKERS 4
#define THREADS 2
#define UNITS	3

static int id;
static _Atomic long *ops; /* shared with the workers */

static void *loop(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	unsigned short own = (unsigned short)((uintptr_t)arg % 1000);

	for (;;) {
		unsigned short num = rand_r(&seed) % 10 ? own : WORKERS;
		struct sembuf take = { num, -1, SEM_UNDO }, give = { num, 1, SEM_UNDO };

		if (semop(id, &take, 1) != 0) {
			MUST(errno == EINTR);
			continue;
		}
		while (semop(id, &give, 1) != 0)
			MUST(errno == EINTR);
		atomic_fetch_add_explicit(ops, 2, memory_order_relaxed);
	}
	return NULL;
}

static pid_t worker(int w, unsigned gen)
{
	pid_t p = xfork();

	if (p == 0) {
		pthread_t t[THREADS];

		for (int k = 0; k < THREADS; k++)
			MUST(pthread_create(
				 &t[k], NULL, loop,
				 (void *)(uintptr_t)(w + 1000 * (gen * THREADS + k + 1))) == 0);
		pause();
		_exit(0);
	}
	return p;
}

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 2000;
	pid_t pids[WORKERS];
	unsigned seed = 12345, gen = 0;
	struct timespec t0, now;
	int bad = 0;

	prog_init();
	ops = mmap(NULL, sizeof(*ops), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	MUST(ops != MAP_FAILED);
	id = semget(IPC_PRIVATE, WORKERS + 1, 0600);
	MUST(id >= 0);
	for (int i = 0; i <= WORKERS; i++)
		MUST(semctl(id, i, SETVAL, UNITS) == 0);
	for (int w = 0; w < WORKERS; w++)
		pids[w] = worker(w, gen++);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int w = rand_r(&seed) % WORKERS;

		usleep(1000 + rand_r(&seed) % 5000);
		kill(pids[w], SIGKILL);
		reap(pids[w]);
		pids[w] = worker(w, gen++);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	for (int w = 0; w < WORKERS; w++) {
		kill(pids[w], SIGKILL);
		reap(pids[w]);
	}
	for (int i = 0; i <= WORKERS; i++) {
		int v = semctl(id, i, GETVAL);

		if (v != UNITS) {
			printf("semaphore %d: %d units after every holder was killed, not %d\n", i,
			       v, UNITS);
			bad = 1;
		}
	}
	printf("workers killed at random; every unit back: %s\n", bad ? "no" : "yes");
	fprintf(stderr, "fast-kill: %ld operations, %u workers killed\n", atomic_load(ops),
		gen - WORKERS);
	MUST(semctl(id, 0, IPC_RMID) == 0);
	return bad;
}
