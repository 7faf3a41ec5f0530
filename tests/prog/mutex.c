/* SPDX-License-Identifier: MIT */
/*
 * Threads using semaphores for mutual exclusion, the way legacy programs do.
 *
 * Part 1: THREADS threads x ITERS iterations increment a plain, non-atomic counter inside a
 * critical section guarded by one semaphore (P = -1, V = +1). The read-modify-write is spread
 * out (with an occasional yield in the middle) so that any lapse of mutual exclusion loses
 * increments: the final count must be exact. Half the threads call glibc's semop() (the
 * semtimedop system call on x86_64), half the raw semop system call; some use SEM_UNDO.
 *
 * Part 2: threads work on the semaphores of one set at once: each uses one semaphore but also
 * takes its neighbour's together with its own in one complex operation now and then, so the
 * supervisor keeps switching between per-semaphore and whole-set locking under load; first with
 * a semaphore per thread, then crowded on two semaphores (constant sleeping and waking). An
 * atomic holder count per semaphore catches two holders at once.
 *
 * Usage: mutex [ITERS]   (default 20000)
 */
#include <pthread.h>
#include <stdatomic.h>

#include "prog.h"

#define THREADS 8
#define NSEMS	8

static int id, set;
static long iters = 20000;
static long counter; /* deliberately plain: the semaphore is the only protection */
static atomic_int holders[NSEMS];
static atomic_long violations;
static long per_sem[NSEMS]; /* plain too: guarded by semaphore i */

static int raw_semop(int sid, struct sembuf *b, size_t n)
{
	return (int)syscall(SYS_semop, sid, b, n);
}

static void *counting(void *arg)
{
	int t = (int)(intptr_t)arg;
	short flg = t % 4 == 3 ? SEM_UNDO : 0;
	struct sembuf p = { 0, -1, flg }, v = { 0, 1, flg };
	int (*op)(int, struct sembuf *, size_t) = t % 2 ? raw_semop : semop;

	for (long i = 0; i < iters; i++) {
		long c;

		while (op(id, &p, 1))
			MUST(errno == EINTR);
		c = counter;
		if ((i & 255) == (t & 255))
			sched_yield();
		counter = c + 1;
		while (op(id, &v, 1))
			MUST(errno == EINTR);
	}
	return NULL;
}

static void hold(int s)
{
	if (atomic_fetch_add(&holders[s], 1) != 0)
		atomic_fetch_add(&violations, 1);
	per_sem[s]++;
}

static void release(int s)
{
	atomic_fetch_sub(&holders[s], 1);
}

static int spread = NSEMS; /* semaphores the threads of part 2 share */

static void *sharing(void *arg)
{
	int t = (int)(intptr_t)arg % spread, nb = (t + 1) % spread;
	int (*op)(int, struct sembuf *, size_t) = (intptr_t)arg % 2 ? semop : raw_semop;

	for (long i = 0; i < iters / 2; i++) {
		short flg = i % 3 == 0 ? SEM_UNDO : 0;

		if (i % 4 == 0) {
			/* both semaphores at once: all or nothing, no deadlock possible */
			struct sembuf p[2] = { { (unsigned short)t, -1, flg },
					       { (unsigned short)nb, -1, flg } };
			struct sembuf v[2] = { { (unsigned short)nb, 1, flg },
					       { (unsigned short)t, 1, flg } };

			while (op(set, p, 2))
				MUST(errno == EINTR);
			hold(t);
			hold(nb);
			release(nb);
			release(t);
			while (op(set, v, 2))
				MUST(errno == EINTR);
		} else {
			struct sembuf p = { (unsigned short)t, -1, flg },
				      v = { (unsigned short)t, 1, flg };

			while (op(set, &p, 1))
				MUST(errno == EINTR);
			hold(t);
			release(t);
			while (op(set, &v, 1))
				MUST(errno == EINTR);
		}
	}
	return NULL;
}

static void run(void *(*fn)(void *))
{
	pthread_t th[THREADS];

	for (int t = 0; t < THREADS; t++)
		MUST(pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t) == 0);
	for (int t = 0; t < THREADS; t++)
		MUST(pthread_join(th[t], NULL) == 0);
}

int main(int argc, char **argv)
{
	unsigned short one[NSEMS];
	long total = 0, want;

	prog_init();
	if (argc > 1)
		iters = atol(argv[1]);
	id = semget(IPC_PRIVATE, 1, 0600);
	MUST(id >= 0);
	MUST(setval(id, 0, 1) == 0);

	run(counting);
	printf("counter: %ld, expected %ld: %s\n", counter, THREADS * iters,
	       counter == THREADS * iters ? "exact" : "WRONG");
	EXPECT(counter == THREADS * iters, "counter %ld", counter);
	CHECK("semaphore after the run", 1, getval(id, 0));

	set = semget(IPC_PRIVATE, NSEMS, 0600);
	MUST(set >= 0);
	/* spread out (a thread per semaphore), then crowded (four threads per semaphore) */
	for (spread = NSEMS; spread >= 2; spread -= NSEMS - 2) {
		total = 0;
		atomic_store(&violations, 0);
		memset(per_sem, 0, sizeof(per_sem));
		for (int i = 0; i < NSEMS; i++)
			one[i] = 1;
		MUST(semctl(set, 0, SETALL, (union semun){ .array = one }) == 0);
		run(sharing);
		for (int i = 0; i < NSEMS; i++)
			total += per_sem[i];
		/* each thread: iters/2 rounds, a quarter of them holding two semaphores */
		want = THREADS * (iters / 2 + (iters / 2 + 3) / 4);
		printf("%d threads on %d semaphores: holds %ld, expected %ld: %s\n", THREADS,
		       spread, total, want, total == want ? "exact" : "WRONG");
		EXPECT(total == want, "holds %ld", total);
		printf("two holders at once: %ld\n", (long)atomic_load(&violations));
		EXPECT(atomic_load(&violations) == 0, "violations");
		MUST(semctl(set, 0, GETALL, (union semun){ .array = one }) == 0);
		printf("values:");
		for (int i = 0; i < NSEMS; i++)
			printf(" %u", one[i]);
		printf("\n");
	}
	return prog_exit_status();
}
