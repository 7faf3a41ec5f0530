/* SPDX-License-Identifier: MIT */
/*
 * Under `semvisor-run --fast` only: kill -9 at each step of a fast operation, by the library's
 * test hook (SEMVISOR_FASTLIB_KILL=STEP:N, interposer/preload/fastlib.c). For each step a child
 * takes and gives back units with SEM_UNDO on the fast path and dies before that step of its
 * 20th operation; whether that operation happened or not, its exit must give back exactly
 * what it holds, so the value is back at its start every time. A child that does not die there
 * (the step was not reached) says so.
 */
#include "prog.h"

#define START 10

/* the steps of enum fw_step an uncontended operation with SEM_UNDO goes through */
static const char *const steps[] = { "A1", "E1", "A2", "A3", "A4", "A5", "E2", "A6" };

int main(void)
{
	int id;

	prog_init();
	id = semget(IPC_PRIVATE, 1, 0600);
	MUST(id >= 0);
	MUST(setval(id, 0, START) == 0);
	for (int i = 0; i < (int)(sizeof(steps) / sizeof(steps[0])); i++) {
		pid_t p = xfork();

		if (p == 0) {
			char v[16];

			snprintf(v, sizeof(v), "%d:20", i + 1);
			MUST(setenv("SEMVISOR_FASTLIB_KILL", v, 1) == 0);
			for (int k = 0; k < 50; k++) {
				MUST(sop1(id, 0, -1, SEM_UNDO) == 0);
				MUST(sop1(id, 0, -2, SEM_UNDO) == 0);
				MUST(sop1(id, 0, 3, SEM_UNDO) == 0);
			}
			_exit(0); /* not killed: the hook is not there */
		}
		printf("killed before %s: %s, ", steps[i], reap(p));
		CHECK("value", START, getval(id, 0));
	}
	MUST(semctl(id, 0, IPC_RMID) == 0);
	return prog_exit_status();
}
