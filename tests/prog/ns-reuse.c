/* SPDX-License-Identifier: MIT */
/*
 * IPC namespaces die and new ones are born, and the kernel gives a new one the inode number of
 * one that just died (here about three times in four): every new namespace must still start
 * empty (SPEC A1.3), with ids from 0 and the default limits, whatever its number.
 *
 * Each round a child unshares a new IPC namespace and checks that it is empty (no set to be
 * found by key, by SEM_STAT_ANY over every index, or counted by SEM_INFO), that a keyed set
 * can be created there with IPC_CREAT|IPC_EXCL and gets id 0, then plants a keyed set with a
 * value and changes the namespace's limits, and exits, which ends the namespace. A supervisor
 * that knew namespaces by inode number would hand the next round the planted set (EEXIST) and
 * the lowered limits (EINVAL).
 *
 * The second part does the same across users: root plants a 0600 set in a user+IPC namespace
 * pair of its own, then nobody, in a user+IPC namespace pair it makes, must find nothing.
 */
#include <grp.h>
#include <sched.h>

#include "prog.h"

#define ROUNDS 60
#define KEY    0x5eed

static int stat_any_count(void)
{
	struct semid_ds ds;
	union semun u = { .buf = &ds };
	int n = 0;

	for (int i = 0; i < 128; i++)
		if (semctl(i, 0, SEM_STAT_ANY, u) >= 0)
			n++;
	return n;
}

/* In a fresh namespace: all empty, then plant. Exit status: 0 if all was as natively. */
static int fresh_and_plant(int round)
{
	struct seminfo si;
	union semun u = { .__buf = &si };
	int id, priv;

	if (semget(KEY, 0, 0) != -1 || errno != ENOENT) {
		printf("round %d: key %#x found in a new namespace: %s\n", round, KEY,
		       res(semget(KEY, 0, 0), errno));
		return 1;
	}
	if (stat_any_count()) {
		printf("round %d: SEM_STAT_ANY finds %d sets in a new namespace\n", round,
		       stat_any_count());
		return 1;
	}
	if (semctl(0, 0, SEM_INFO, u) != 0 || si.semusz != 0 || si.semaem != 0) {
		printf("round %d: SEM_INFO in a new namespace: %d sets, %d semaphores\n", round,
		       si.semusz, si.semaem);
		return 1;
	}
	if (semctl(0, 0, IPC_INFO, u) < 0 || si.semmsl != 32000 || si.semmni != 32000) {
		printf("round %d: a new namespace's limits: semmsl %d, semmni %d\n", round,
		       si.semmsl, si.semmni);
		return 1;
	}
	id = semget(KEY, 2, IPC_CREAT | IPC_EXCL | 0600);
	priv = semget(IPC_PRIVATE, 1, 0600);
	if (id != 0 || priv != 1) {
		printf("round %d: the first ids in a new namespace: %s and %d\n", round,
		       res(id, errno), priv);
		return 1;
	}
	if (getval(id, 0) != 0 || setval(id, 0, 77) || setval(id, 1, 78))
		return 1;
	/* lowered limits that the next namespace must not inherit */
	int fd = open("/proc/sys/kernel/sem", O_WRONLY);

	if (fd < 0 || write(fd, "3 10 5 4", 8) != 8)
		return 2;
	close(fd);
	return 0;
}

int main(void)
{
	int bad = 0;

	prog_init();
	for (int round = 0; round < ROUNDS; round++) {
		pid_t p = xfork();

		if (p == 0) {
			if (unshare(CLONE_NEWIPC))
				_exit(9);
			_exit(fresh_and_plant(round));
		}
		if (strcmp(reap(p), "exited 0"))
			bad++;
		sleep_ms(10); /* time for the kernel to free the dead namespace's number */
	}
	printf("%d new IPC namespaces, each found empty with ids from 0: %s\n", ROUNDS,
	       bad ? "NO" : "yes");
	EXPECT(!bad, "%d rounds found something of a dead namespace", bad);

	/* across users: root's planted set, nobody's fresh namespace */
	bad = 0;
	for (int round = 0; round < ROUNDS / 2; round++) {
		pid_t p = xfork();

		if (p == 0) {
			/* root's container: its own user namespace mapping root, a 0600 set */
			if (unshare(CLONE_NEWUSER | CLONE_NEWIPC))
				_exit(9);
			int fd = open("/proc/self/uid_map", O_WRONLY);

			if (fd < 0 || write(fd, "0 0 1", 5) != 5)
				_exit(8);
			close(fd);
			_exit(semget(KEY, 1, IPC_CREAT | IPC_EXCL | 0600) == 0 ? 0 : 7);
		}
		if (strcmp(reap(p), "exited 0"))
			bad++;
		sleep_ms(10);
		p = xfork();
		if (p == 0) {
			if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
			    setresuid(65534, 65534, 65534) || unshare(CLONE_NEWUSER | CLONE_NEWIPC))
				_exit(9);
			if (semget(KEY, 0, 0) != -1 || errno != ENOENT || stat_any_count())
				_exit(1);
			_exit(semget(KEY, 1, IPC_CREAT | IPC_EXCL | 0600) == 0 ? 0 : 2);
		}
		if (strcmp(reap(p), "exited 0"))
			bad++;
		sleep_ms(10);
	}
	printf("nobody's new namespaces after root's: each empty: %s\n", bad ? "NO" : "yes");
	EXPECT(!bad, "%d rounds found root's set", bad);
	return prog_exit_status();
}
