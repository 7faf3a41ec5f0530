/* SPDX-License-Identifier: MIT */
/*
 * Limits changed from inside the IPC namespace (SPEC A1.2): /proc/sys/kernel/sem belongs to the
 * namespace, and a program that writes it (as root, in its own namespace) gets the new limits at
 * once: sets per namespace, semaphores per set, sops per call. IPC_INFO reports them.
 */
#include "prog.h"

static void info(const char *label)
{
	struct seminfo si;

	MUST(semctl(0, 0, IPC_INFO, (union semun){ .__buf = &si }) >= 0);
	printf("%s: semmsl %d semmns %d semopm %d semmni %d\n", label, si.semmsl, si.semmns,
	       si.semopm, si.semmni);
}

int main(void)
{
	struct sembuf ops[40];
	int fd, id;

	prog_init();
	info("at start");
	fd = open("/proc/sys/kernel/sem", O_WRONLY);
	MUST(fd >= 0);
	MUST(write(fd, "250 1000 32 2\n", 14) == 14);
	close(fd);
	info("after writing 250 1000 32 2");
	CHECK("semget nsems 251", -EINVAL, semget(IPC_PRIVATE, 251, 0600));
	id = CHECK("semget nsems 250", 0, semget(IPC_PRIVATE, 250, 0600));
	for (int i = 0; i < 40; i++)
		ops[i] = (struct sembuf){ (unsigned short)i, 1, 0 };
	CHECK("semop 33 sops", -E2BIG, semop(id, ops, 33));
	CHECK("semop 32 sops", 0, semop(id, ops, 32));
	CHECK("second set", 1, semget(IPC_PRIVATE, 1, 0600));
	CHECK("third set (SEMMNI 2)", -ENOSPC, semget(IPC_PRIVATE, 1, 0600));
	return prog_exit_status();
}
