/* SPDX-License-Identifier: MIT */
/*
 * A known number of semops, for a test to count: under `semvisor-run --fast` most are done in
 * the program itself, and `semvisorctl stats` and `show` must still count them exactly.
 *
 * Two threads take and give back a unit of semaphore 0 (PAIRS pairs each), while the main
 * thread raises semaphore 1 by one RAISES times; it checks both values, then raises semaphore 1
 * LATE more times (after the GETVALs, which took the semaphores back, so that these are
 * counted in the word alone); then it prints "SEMID ready" and waits for the file DONE to
 * appear, and raises semaphore 1 once more before it removes the set.
 *
 * Usage: fast-count DONE
 */
#include <pthread.h>

#include "prog.h"

#define PAIRS  1500
#define RAISES 1001
#define LATE   500

static int id;

static void *pairs(void *arg)
{
	(void)arg;
	for (int i = 0; i < PAIRS; i++) {
		MUST(sop1(id, 0, -1, SEM_UNDO) == 0);
		MUST(sop1(id, 0, 1, SEM_UNDO) == 0);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[2];

	prog_init();
	MUST(argc == 2);
	id = semget(IPC_PRIVATE, 2, 0600);
	MUST(id >= 0);
	MUST(setval(id, 0, 1) == 0);
	for (int k = 0; k < 2; k++)
		MUST(pthread_create(&t[k], NULL, pairs, NULL) == 0);
	for (int i = 0; i < RAISES; i++)
		MUST(sop1(id, 1, 1, 0) == 0);
	for (int k = 0; k < 2; k++)
		MUST(pthread_join(t[k], NULL) == 0);
	CHECK("value 0", 1, getval(id, 0));
	CHECK("value 1", RAISES, getval(id, 1));
	for (int i = 0; i < LATE; i++)
		MUST(sop1(id, 1, 1, 0) == 0);
	printf("%d ready\n", id);
	MUST(wait_file(argv[1], 60000));
	MUST(sop1(id, 1, 1, 0) == 0);
	MUST(semctl(id, 0, IPC_RMID) == 0);
	return prog_exit_status();
}
