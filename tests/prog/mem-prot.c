/* SPDX-License-Identifier: MIT */
/*
 * Every command that reads or writes the caller's memory, with buffers the caller itself cannot
 * read or write: PROT_NONE pages, read-only pages (for the commands that write), unmapped
 * addresses, and buffers that start readable and run into such a page. Natively each fails
 * with EFAULT and changes nothing; a supervisor that read through the caller's protections
 * (/proc/PID/mem does) would read zeros instead, and a semop of zeros on a non-zero semaphore
 * would wait for ever.
 */
#include <sys/mman.h>

#include "prog.h"

#define PAGE 4096

static char *none, *ro, *rw, *gap, *fresh;

static void setup(void)
{
	char *m = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	MUST(m != MAP_FAILED);
	rw = m;		    /* readable and writable, followed by ... */
	none = m + PAGE;    /* ... a PROT_NONE page, */
	ro = m + 2 * PAGE;  /* a read-only one, and */
	gap = m + 3 * PAGE; /* an unmapped one */
	memset(m, 0x55, 3 * PAGE);
	/* reading is all semop does with its sops: a read-only page serves */
	*(struct sembuf *)ro = (struct sembuf){ 0, 0, IPC_NOWAIT };
	MUST(mprotect(none, PAGE, PROT_NONE) == 0);
	MUST(mprotect(ro, PAGE, PROT_READ) == 0);
	MUST(munmap(gap, PAGE) == 0);
	/* never touched: what a read through the protection finds there is zeros */
	fresh = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	MUST(fresh != MAP_FAILED);
}

static void semops(int id)
{
	struct sembuf *tail = (struct sembuf *)(none - sizeof(struct sembuf));
	struct sembuf many[100];
	struct timespec *ts_tail = (struct timespec *)(none - 8);

	*tail = (struct sembuf){ 0, -1, IPC_NOWAIT };
	CHECK("semop, sops in a PROT_NONE page", -EFAULT, semop(id, (struct sembuf *)none, 1));
	/* zeros would be a wait for zero on a semaphore that is 2: for ever */
	CHECK("semop, sops in an untouched PROT_NONE page", -EFAULT,
	      semop(id, (struct sembuf *)fresh, 1));
	CHECK("semop, sops unmapped", -EFAULT, semop(id, (struct sembuf *)gap, 1));
	CHECK("semop, two sops running into PROT_NONE", -EFAULT, semop(id, tail, 2));
	/* past what a supervisor would read ahead: 100 sops */
	CHECK("semop, 100 sops in PROT_NONE", -EFAULT, semop(id, (struct sembuf *)none, 100));
	for (int i = 0; i < 100; i++)
		many[i] = (struct sembuf){ 0, 0, IPC_NOWAIT };
	CHECK("semop, 100 readable sops", -EAGAIN, semop(id, many, 100));
	CHECK("semop, sops in a read-only page", -EAGAIN, semop(id, (struct sembuf *)ro, 1));
	CHECK("semtimedop, timeout in PROT_NONE", -EFAULT,
	      semtimedop(id, tail, 1, (struct timespec *)none));
	CHECK("semtimedop, timeout running into PROT_NONE", -EFAULT,
	      semtimedop(id, tail, 1, ts_tail));
	CHECK("the value after all that", 2, getval(id, 0));
}

static void semctls(int id)
{
	struct semid_ds *ds_tail = (struct semid_ds *)(none - 8);
	struct semid_ds ds;
	union semun u;

	u.buf = (struct semid_ds *)ro;
	CHECK("IPC_STAT into a read-only page", -EFAULT, semctl(id, 0, IPC_STAT, u));
	u.buf = (struct semid_ds *)none;
	CHECK("IPC_STAT into PROT_NONE", -EFAULT, semctl(id, 0, IPC_STAT, u));
	u.buf = ds_tail;
	CHECK("IPC_STAT running into PROT_NONE", -EFAULT, semctl(id, 0, IPC_STAT, u));
	u.buf = (struct semid_ds *)ro;
	CHECK("SEM_STAT into a read-only page", -EFAULT, semctl(0, 0, SEM_STAT, u));
	CHECK("SEM_STAT_ANY into a read-only page", -EFAULT, semctl(0, 0, SEM_STAT_ANY, u));
	u.__buf = (struct seminfo *)ro;
	CHECK("IPC_INFO into a read-only page", -EFAULT, semctl(0, 0, IPC_INFO, u));
	CHECK("SEM_INFO into a read-only page", -EFAULT, semctl(0, 0, SEM_INFO, u));
	u.buf = (struct semid_ds *)none;
	CHECK("IPC_SET from PROT_NONE", -EFAULT, semctl(id, 0, IPC_SET, u));
	u.buf = ds_tail;
	CHECK("IPC_SET running into PROT_NONE", -EFAULT, semctl(id, 0, IPC_SET, u));
	u.array = (unsigned short *)ro;
	CHECK("GETALL into a read-only page", -EFAULT, semctl(id, 0, GETALL, u));
	u.array = (unsigned short *)none;
	CHECK("SETALL from PROT_NONE", -EFAULT, semctl(id, 0, SETALL, u));
	u.array = (unsigned short *)(none - 2);
	CHECK("SETALL running into PROT_NONE", -EFAULT, semctl(id, 0, SETALL, u));
	u.array = (unsigned short *)gap;
	CHECK("SETALL unmapped", -EFAULT, semctl(id, 0, SETALL, u));

	/* nothing changed */
	u.buf = &ds;
	MUST(semctl(id, 0, IPC_STAT, u) == 0);
	printf("after all that: mode %o, uid %d, gid %d, values %d %d\n", ds.sem_perm.mode & 0777,
	       (int)ds.sem_perm.uid, (int)ds.sem_perm.gid, getval(id, 0), getval(id, 1));
	EXPECT((ds.sem_perm.mode & 0777) == 0600 && ds.sem_perm.uid == geteuid(),
	       "the set's permissions changed");
	EXPECT(getval(id, 0) == 2 && getval(id, 1) == 3, "the values changed");
}

int main(void)
{
	int id;

	prog_init();
	setup();
	id = semget(IPC_PRIVATE, 2, 0600);
	MUST(id >= 0);
	MUST(setval(id, 0, 2) == 0 && setval(id, 1, 3) == 0);
	semops(id);
	semctls(id);
	return prog_exit_status();
}
