/* SPDX-License-Identifier: MIT */
/*
 * The system call interface itself (SPEC A4.1, A4.3, A6.1, A6.2, A7): glibc's wrappers (semop()
 * issues the semtimedop system call) and raw syscall()s of semop (65, what musl and static
 * binaries use), semtimedop, semget and semctl; register quirks (only the low 32 bits of keys,
 * nsops, cmd and SETVAL's argument count); the order of semop's checks; unreadable and
 * unwritable user memory, including buffers that end in an unmapped page; the largest sets and
 * the most sops per call.
 *
 * statically linked as static-syscalls.c: the same checks from a binary with no dynamic loader.
 */
#include <sys/mman.h>

#include "prog.h"

static long r_semget(long key, long nsems, long flg)
{
	return syscall(SYS_semget, key, nsems, flg);
}

static long r_semop(long sid, void *sops, unsigned long n)
{
	return syscall(SYS_semop, sid, sops, n);
}

static long r_semtimedop(long sid, void *sops, unsigned long n, void *ts)
{
	return syscall(SYS_semtimedop, sid, sops, n, ts);
}

static long r_semctl(long sid, long num, long cmd, unsigned long arg)
{
	return syscall(SYS_semctl, sid, num, cmd, arg);
}

static void entry_points(int id)
{
	struct sembuf up = { 0, 1, 0 }, down = { 0, -1, 0 };
	struct timespec ts = { 1, 0 };

	printf("-- four ways to call semop\n");
	CHECK("glibc semop +1", 0, semop(id, &up, 1));
	CHECK("glibc semtimedop -1", 0, semtimedop(id, &down, 1, &ts));
	CHECK("raw semop +1", 0, r_semop(id, &up, 1));
	CHECK("raw semtimedop -1, no timeout", 0, r_semtimedop(id, &down, 1, NULL));
	CHECK("raw semop -1 nowait", -EAGAIN,
	      r_semop(id, &(struct sembuf){ 0, -1, IPC_NOWAIT }, 1));
	CHECK("raw semtimedop -1, zero timeout", -EAGAIN,
	      r_semtimedop(id, &down, 1, &(struct timespec){ 0, 0 }));
	CHECK("GETVAL", 0, getval(id, 0));
}

static void registers(int id)
{
	struct sembuf up = { 0, 1, 0 };
	long a, b;

	printf("-- only the low 32 bits\n");
	a = CHECK("raw semget key 0x1_00000077", 1, r_semget(0x100000077L, 1, IPC_CREAT | 0600));
	CHECK("semget key 0x77", a, semget(0x77, 0, 0));
	a = SHOW("raw semget key 0x1_00000000 (IPC_PRIVATE)", r_semget(0x100000000L, 1, 0600));
	b = SHOW("raw semget key 0x1_00000000 again (a new set)", r_semget(0x100000000L, 1, 0600));
	EXPECT(a != b && a >= 0 && b >= 0, "two private sets %ld %ld", a, b);
	CHECK("raw semop nsops 0x1_00000001", 0, r_semop(id, &up, 0x100000001UL));
	CHECK("raw semop id with high bits", 0, r_semop(id | (1L << 32), &up, 1));
	CHECK("raw semctl GETVAL cmd with high bits", 2, r_semctl(id, 0, (1L << 32) | GETVAL, 0));
	CHECK("raw semctl SETVAL 0xffffffff_00000005", 0,
	      r_semctl(id, 0, SETVAL, 0xffffffff00000005UL));
	CHECK("GETVAL", 5, getval(id, 0));
	CHECK("raw semctl SETVAL 0x1_ffffffff (-1)", -ERANGE,
	      r_semctl(id, 0, SETVAL, 0x1ffffffffUL));
	CHECK("sem_flg with unknown bits", 0,
	      r_semop(id, &(struct sembuf){ 0, -1, (short)(0x2000 | 0x0400 | 0x8000) }, 1));
	CHECK("IPC_STAT|IPC_64", -EINVAL, r_semctl(id, 0, IPC_STAT | 0x100, 0));
	CHECK("GETVAL", 4, getval(id, 0));
	MUST(setval(id, 0, 0) == 0);
}

static void check_order(int id)
{
	struct sembuf ops[501];

	printf("-- the order of semop's checks\n");
	for (int i = 0; i < 501; i++)
		ops[i] = (struct sembuf){ 0, 0, IPC_NOWAIT };
	CHECK("nsops 0", -EINVAL, r_semop(id, ops, 0));
	CHECK("semid -1", -EINVAL, r_semop(-1, ops, 1));
	/* the kernel checks nsops against SEMOPM and copies the sops before it looks at semid */
	CHECK("semid -1, nsops 501", -E2BIG, r_semop(-1, ops, 501));
	CHECK("semid -1, sops NULL", -EFAULT, r_semop(-1, NULL, 1));
	CHECK("nsops 501, sops NULL", -E2BIG, r_semop(id, NULL, 501));
	CHECK("nsops 500 (SEMOPM)", 0, r_semop(id, ops, 500));
	CHECK("sops NULL", -EFAULT, r_semop(id, NULL, 1));
	CHECK("sops NULL, bad id", -EFAULT, r_semop(9999, NULL, 1));
	CHECK("timeout unreadable, nsops 0", -EFAULT, r_semtimedop(id, ops, 0, (void *)16));
	CHECK("bad id", -EINVAL, r_semop(9999, ops, 1));
	CHECK("sem_num 65535", -EFBIG, r_semop(id, &(struct sembuf){ 65535, 1, 0 }, 1));
	CHECK("sem_num 1 of 1, bad timeout", -EINVAL,
	      r_semtimedop(id, &(struct sembuf){ 1, 1, 0 }, 1, &(struct timespec){ 0, -5 }));
	CHECK("+1 on a value of 32767", -ERANGE,
	      (setval(id, 0, 32767), r_semop(id, &(struct sembuf){ 0, 1, 0 }, 1)));
	MUST(setval(id, 0, 0) == 0);
}

static void memory(int id)
{
	long page = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	struct sembuf *edge;
	unsigned short *vals;
	struct semid_ds *ds;
	int big;

	printf("-- user memory\n");
	MUST(m != MAP_FAILED);
	MUST(munmap(m + page, (size_t)page) == 0);
	/* one sembuf fits before the hole, the second would be in it */
	edge = (struct sembuf *)(m + page - sizeof(struct sembuf));
	*edge = (struct sembuf){ 0, 1, 0 };
	CHECK("one sop just before an unmapped page", 0, r_semop(id, edge, 1));
	CHECK("two sops, the second unmapped", -EFAULT, r_semop(id, edge, 2));
	CHECK("GETVAL (nothing applied)", 1, getval(id, 0));
	/* a semid_ds to IPC_SET from read-only memory later */
	ds = (struct semid_ds *)(m + 64);
	MUST(semctl(id, 0, IPC_STAT, (union semun){ .buf = ds }) == 0);
	/* sops in read-only memory are fine: semop only reads them */
	MUST(mprotect(m, (size_t)page, PROT_READ) == 0);
	CHECK("sops in read-only memory", 0, r_semop(id, edge, 1));

	big = CHECK("semget nsems 32000", 2 + 2, semget(IPC_PRIVATE, 32000, 0600));
	vals = calloc(32000, sizeof(*vals));
	MUST(vals);
	for (int i = 0; i < 32000; i++)
		vals[i] = (unsigned short)(i % 32768);
	CHECK("SETALL of 32000", 0, semctl(big, 0, SETALL, (union semun){ .array = vals }));
	memset(vals, 0, 32000 * sizeof(*vals));
	CHECK("GETALL of 32000", 0, semctl(big, 0, GETALL, (union semun){ .array = vals }));
	{
		long sum = 0;
		bool ok = true;

		for (int i = 0; i < 32000; i++) {
			sum += vals[i];
			ok &= vals[i] == i % 32768;
		}
		printf("GETALL values right: %s (sum %ld)\n", ok ? "yes" : "no", sum);
	}
	CHECK("GETVAL a[31999]", 31999, getval(big, 31999));
	/* a GETALL whose buffer runs into the unmapped page */
	CHECK("GETALL into read-only memory", -EFAULT,
	      semctl(id, 0, GETALL, (union semun){ .array = (unsigned short *)m }));
	CHECK("GETALL of 32000 ending in an unmapped page", -EFAULT,
	      semctl(big, 0, GETALL, (union semun){ .array = (unsigned short *)(m + page - 64) }));
	CHECK("IPC_STAT into read-only memory", -EFAULT,
	      semctl(id, 0, IPC_STAT, (union semun){ .buf = ds }));
	CHECK("IPC_SET from read-only memory (readable: fine)", 0,
	      semctl(id, 0, IPC_SET, (union semun){ .buf = ds }));
	CHECK("SEM_INFO into read-only memory", -EFAULT,
	      semctl(id, 0, SEM_INFO, (union semun){ .__buf = (struct seminfo *)m }));
	CHECK("SETALL from memory ending in an unmapped page", -EFAULT,
	      semctl(big, 0, SETALL, (union semun){ .array = (unsigned short *)(m + page - 64) }));
	CHECK("GETVAL a[5] (SETALL changed nothing)", 5, getval(big, 5));
	{
		struct sembuf *many = calloc(500, sizeof(*many));

		MUST(many);
		for (int i = 0; i < 500; i++)
			many[i] = (struct sembuf){ (unsigned short)(i * 64), 1, 0 };
		CHECK("500 sops on 500 semaphores of the big set", 0, semop(big, many, 500));
		CHECK("GETVAL a[64]", 65, getval(big, 64));
		CHECK("GETVAL a[31936]", (31936 % 32768) + 1, getval(big, 31936));
		free(many);
	}
	free(vals);
	MUST(semctl(big, 0, IPC_RMID) == 0);
	MUST(munmap(m, (size_t)page) == 0);
}

int main(void)
{
	int id;

	prog_init();
#ifdef PROG_SAY_STATIC
	printf("linked statically: %s\n", linked_statically() ? "yes" : "no");
	EXPECT(linked_statically(), "not a static binary: check the build rule");
#endif
	id = CHECK("raw semget private", 0, r_semget(IPC_PRIVATE, 1, 0600));
	entry_points(id);
	registers(id);
	check_order(id);
	memory(id);
	return prog_exit_status();
}
