/* SPDX-License-Identifier: MIT */
/*
 * A 64-bit process drops root through i386's table (int $0x80: setgroups32, setresgid32,
 * setresuid32), which a filter written for x86_64's numbers would not see: every later call
 * must be decided with the new credentials, as natively (EACCES on a 0600 root set, EPERM for
 * IPC_SET and IPC_RMID). Then the same with the old 16-bit setuid(2).
 */
#include "i386.h"
#include "prog.h"

static void as_nobody(int id, const char *how)
{
	struct semid_ds ds;
	union semun u = { .buf = &ds };
	char label[96];

	snprintf(label, sizeof(label), "%s: semop +1", how);
	CHECK(label, -EACCES, sop1(id, 0, 1, 0));
	snprintf(label, sizeof(label), "%s: GETVAL", how);
	CHECK(label, -EACCES, getval(id, 0));
	snprintf(label, sizeof(label), "%s: SETVAL", how);
	CHECK(label, -EACCES, setval(id, 0, 5));
	snprintf(label, sizeof(label), "%s: IPC_STAT", how);
	CHECK(label, -EACCES, semctl(id, 0, IPC_STAT, u));
	memset(&ds, 0, sizeof(ds));
	ds.sem_perm.uid = 65534;
	ds.sem_perm.mode = 0666;
	snprintf(label, sizeof(label), "%s: IPC_SET", how);
	CHECK(label, -EPERM, semctl(id, 0, IPC_SET, u));
	snprintf(label, sizeof(label), "%s: IPC_RMID", how);
	CHECK(label, -EPERM, semctl(id, 0, IPC_RMID));
}

int main(void)
{
	int id;
	pid_t p;

	prog_init();
	MUST(geteuid() == 0);
	id = semget(IPC_PRIVATE, 1, 0600);
	MUST(id >= 0);
	/* served as root first, so a supervisor has root's credentials at hand */
	CHECK("root: SETVAL", 0, setval(id, 0, 3));

	p = xfork();
	if (p == 0) {
		CHECK("child as root: GETVAL", 3, getval(id, 0));
		MUST(i386_syscall(I386_SETGROUPS32, 0, 0, 0, 0, 0) == 0);
		MUST(i386_syscall(I386_SETRESGID32, 65534, 65534, 65534, 0, 0) == 0);
		MUST(i386_syscall(I386_SETRESUID32, 65534, 65534, 65534, 0, 0) == 0);
		as_nobody(id, "after setresuid32");
		_exit(prog_exit_status());
	}
	reap_ok(p, "child");

	p = xfork();
	if (p == 0) {
		CHECK("child as root: GETVAL", 3, getval(id, 0));
		MUST(i386_syscall(I386_SETGROUPS32, 0, 0, 0, 0, 0) == 0);
		MUST(i386_syscall(I386_SETUID, 65534, 0, 0, 0, 0) == 0);
		as_nobody(id, "after the 16-bit setuid");
		_exit(prog_exit_status());
	}
	reap_ok(p, "child");
	CHECK("root: the set is untouched", 3, getval(id, 0));
	return prog_exit_status();
}
