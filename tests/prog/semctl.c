/* SPDX-License-Identifier: MIT */
/*
 * Every semctl command with good and bad arguments (SPEC A6), and the semget rules that decide
 * which set a command then sees (A2). Permission errors (EACCES, EPERM) need another identity and
 * are in perms.c; EIDRM needs sleepers and is in rmid.c.
 *
 * The program starts in a fresh IPC namespace, so ids are deterministic (0, 1, then cyclic
 * allocation) and are printed: semvisor must allocate them as the kernel does.
 */
#include "prog.h"

#define KEY 0x5e1

static void show_ds(const char *label, const struct semid_ds *ds, time_t t0, time_t t1)
{
	printf("%s: key %#x uid %u gid %u cuid %u cgid %u mode %o seq %u nsems %lu\n", label,
	       (unsigned int)ds->sem_perm.__key, ds->sem_perm.uid, ds->sem_perm.gid,
	       ds->sem_perm.cuid, ds->sem_perm.cgid, ds->sem_perm.mode, ds->sem_perm.__seq,
	       (unsigned long)ds->sem_nsems);
	printf("%s: otime %s, ctime now: %s\n", label,
	       ds->sem_otime == 0				? "0"
	       : ds->sem_otime >= t0 && ds->sem_otime <= t1 + 1 ? "now"
								: "wrong",
	       ds->sem_ctime >= t0 && ds->sem_ctime <= t1 + 1 ? "yes" : "no");
}

static void show_info(const char *label, long r, const struct seminfo *si)
{
	printf("%s = %ld: semmap %d semmni %d semmns %d semmnu %d semmsl %d semopm %d semume %d "
	       "semusz %d semvmx %d semaem %d\n",
	       label, r, si->semmap, si->semmni, si->semmns, si->semmnu, si->semmsl, si->semopm,
	       si->semume, si->semusz, si->semvmx, si->semaem);
}

static void semget_rules(void)
{
	CHECK("semget existing key, IPC_CREAT|IPC_EXCL", -EEXIST,
	      semget(KEY, 2, IPC_CREAT | IPC_EXCL | 0640));
	CHECK("semget existing key, nsems 3 > 2", -EINVAL, semget(KEY, 3, 0));
	CHECK("semget existing key, nsems 0", 1, semget(KEY, 0, 0));
	CHECK("semget existing key, nsems -1 (checked first)", -EINVAL, semget(KEY, -1, 0));
	CHECK("semget existing key, nsems 32001 (checked first)", -EINVAL, semget(KEY, 32001, 0));
	CHECK("semget absent key, no IPC_CREAT", -ENOENT, semget(KEY + 1, 1, 0600));
	CHECK("semget create with nsems 0", -EINVAL, semget(KEY + 1, 0, IPC_CREAT | 0600));
	CHECK("semget private, nsems 32001", -EINVAL, semget(IPC_PRIVATE, 32001, 0600));
}

/* GETVAL/SETVAL and their argument checks. */
static void values(int a)
{
	CHECK("SETVAL a[0] = 7", 0, setval(a, 0, 7));
	CHECK("GETVAL a[0]", 7, getval(a, 0));
	CHECK("SETVAL a[1] = 32767", 0, setval(a, 1, 32767));
	CHECK("GETVAL a[1]", 32767, getval(a, 1));
	CHECK("SETVAL a[1] = 32768", -ERANGE, setval(a, 1, 32768));
	CHECK("SETVAL a[1] = -1", -ERANGE, setval(a, 1, -1));
	CHECK("GETVAL a[1] unchanged", 32767, getval(a, 1));
	CHECK("SETVAL bad id, bad value (value checked first)", -ERANGE, setval(12345, 0, 40000));
	CHECK("SETVAL bad id", -EINVAL, setval(12345, 0, 1));
	CHECK("SETVAL semnum 3 of 3", -EINVAL, setval(a, 3, 1));
	CHECK("SETVAL semnum -1", -EINVAL, setval(a, -1, 1));
	CHECK("GETVAL semnum 3 of 3", -EINVAL, getval(a, 3));
	CHECK("GETVAL semnum -1", -EINVAL, getval(a, -1));
	CHECK("GETVAL id -1", -EINVAL, getval(-1, 0));
}

static void all(int a)
{
	unsigned short in[3] = { 1, 2, 3 }, bad[3] = { 4, 40000, 5 }, out[3] = { 9, 9, 9 };

	CHECK("SETALL {1,2,3}", 0, semctl(a, 0, SETALL, (union semun){ .array = in }));
	CHECK("GETALL", 0, semctl(a, 0, GETALL, (union semun){ .array = out }));
	printf("GETALL values: %u %u %u\n", out[0], out[1], out[2]);
	CHECK("SETALL {4,40000,5}", -ERANGE, semctl(a, 0, SETALL, (union semun){ .array = bad }));
	CHECK("GETALL after failed SETALL", 0, semctl(a, 0, GETALL, (union semun){ .array = out }));
	printf("GETALL values: %u %u %u\n", out[0], out[1], out[2]);
	CHECK("SETALL NULL", -EFAULT, semctl(a, 0, SETALL, (union semun){ .array = NULL }));
	CHECK("GETALL NULL", -EFAULT, semctl(a, 0, GETALL, (union semun){ .array = NULL }));
	CHECK("GETALL bad id", -EINVAL, semctl(777, 0, GETALL, (union semun){ .array = out }));
	/* semnum is ignored by the whole-set commands */
	CHECK("GETALL semnum 99", 0, semctl(a, 99, GETALL, (union semun){ .array = out }));
}

/* GETPID, GETNCNT, GETZCNT with real sleepers. */
static void counts(int a)
{
	pid_t me = getpid(), dec, zero, inc;
	int r;

	CHECK("SETALL {1,0,0}", 0,
	      semctl(a, 0, SETALL, (union semun){ .array = (unsigned short[]){ 1, 0, 0 } }));
	r = semctl(a, 2, GETPID);
	printf("GETPID a[2] after SETALL is me: %s\n", r == me ? "yes" : "no");
	EXPECT(r == me, "GETPID after SETALL: %d", r);

	inc = xfork();
	if (inc == 0)
		_exit(sop1(a, 1, 2, 0) ? errno : 0);
	printf("incrementer: %s\n", reap_errno(inc));
	r = semctl(a, 1, GETPID);
	printf("GETPID a[1] is the incrementer: %s\n", r == inc ? "yes" : "no");
	EXPECT(r == inc, "GETPID a[1] = %d, incrementer %d", r, inc);
	r = semctl(a, 0, GETPID);
	printf("GETPID a[0] is still me: %s\n", r == me ? "yes" : "no");
	EXPECT(r == me, "GETPID a[0] = %d", r);

	dec = xfork();
	if (dec == 0)
		_exit(sop1(a, 2, -1, 0) ? errno : 0);
	WAIT_CNT(a, 2, GETNCNT, 1);
	zero = xfork();
	if (zero == 0)
		_exit(sop1(a, 0, 0, 0) ? errno : 0);
	WAIT_CNT(a, 0, GETZCNT, 1);
	CHECK("GETNCNT a[2]", 1, semctl(a, 2, GETNCNT));
	CHECK("GETZCNT a[2]", 0, semctl(a, 2, GETZCNT));
	CHECK("GETZCNT a[0]", 1, semctl(a, 0, GETZCNT));
	CHECK("GETNCNT a[0]", 0, semctl(a, 0, GETNCNT));
	CHECK("GETNCNT semnum 3", -EINVAL, semctl(a, 3, GETNCNT));
	CHECK("GETZCNT semnum -1", -EINVAL, semctl(a, -1, GETZCNT));
	CHECK("GETPID semnum 3", -EINVAL, semctl(a, 3, GETPID));

	/* SETVAL wakes sleepers, and the woken decrement is already done when SETVAL returns */
	CHECK("SETVAL a[2] = 1 (wakes the decrementer)", 0, setval(a, 2, 1));
	CHECK("GETVAL a[2] right after", 0, getval(a, 2));
	CHECK("GETNCNT a[2] right after", 0, semctl(a, 2, GETNCNT));
	printf("decrementer: %s\n", reap_errno(dec));
	r = semctl(a, 2, GETPID);
	printf("GETPID a[2] is the decrementer: %s\n", r == dec ? "yes" : "no");
	EXPECT(r == dec, "GETPID a[2] = %d, decrementer %d", r, dec);
	CHECK("SETVAL a[0] = 0 (wakes the zero waiter)", 0, setval(a, 0, 0));
	CHECK("GETZCNT a[0] right after", 0, semctl(a, 0, GETZCNT));
	printf("zero waiter: %s\n", reap_errno(zero));
	/* wait-for-zero also stamps sempid */
	r = semctl(a, 0, GETPID);
	printf("GETPID a[0] is the zero waiter: %s\n", r == zero ? "yes" : "no");
	EXPECT(r == zero, "GETPID a[0] = %d, zero waiter %d", r, zero);
}

static void stat_set(int b, time_t t0)
{
	struct semid_ds ds;
	time_t t1;

	memset(&ds, 0, sizeof(ds));
	CHECK("IPC_STAT b", 0, semctl(b, 0, IPC_STAT, (union semun){ .buf = &ds }));
	t1 = time(NULL);
	show_ds("b", &ds, t0, t1);
	CHECK("IPC_STAT NULL", -EFAULT, semctl(b, 0, IPC_STAT, (union semun){ .buf = NULL }));
	CHECK("IPC_STAT id -1", -EINVAL, semctl(-1, 0, IPC_STAT, (union semun){ .buf = &ds }));
	/* x86_64 does not strip IPC_64: glibc never sends it, the raw call sees EINVAL */
	CHECK("IPC_STAT|IPC_64 (raw)", -EINVAL, syscall(SYS_semctl, b, 0, IPC_STAT | 0x100, &ds));

	CHECK("semop b[1] +1", 0, sop1(b, 1, 1, 0));
	CHECK("IPC_STAT b", 0, semctl(b, 0, IPC_STAT, (union semun){ .buf = &ds }));
	show_ds("b after semop", &ds, t0, time(NULL));

	/* owner, group and the low 9 mode bits change; creator ids and other bits do not */
	ds.sem_perm.uid = 65534;
	ds.sem_perm.gid = 65534;
	ds.sem_perm.mode = 07660;
	ds.sem_perm.cuid = 42;
	ds.sem_perm.__key = 0x1111;
	ds.sem_nsems = 99;
	CHECK("IPC_SET b uid/gid 65534 mode 07660", 0,
	      semctl(b, 0, IPC_SET, (union semun){ .buf = &ds }));
	memset(&ds, 0, sizeof(ds));
	CHECK("IPC_STAT b", 0, semctl(b, 0, IPC_STAT, (union semun){ .buf = &ds }));
	show_ds("b after IPC_SET", &ds, t0, time(NULL));
	ds.sem_perm.uid = (uid_t)-1; /* not mappable */
	CHECK("IPC_SET uid -1", -EINVAL, semctl(b, 0, IPC_SET, (union semun){ .buf = &ds }));
	ds.sem_perm.uid = 0;
	ds.sem_perm.gid = (gid_t)-1;
	CHECK("IPC_SET gid -1", -EINVAL, semctl(b, 0, IPC_SET, (union semun){ .buf = &ds }));
	CHECK("IPC_SET NULL", -EFAULT, semctl(b, 0, IPC_SET, (union semun){ .buf = NULL }));
	CHECK("IPC_SET bad id", -EINVAL, semctl(4321, 0, IPC_SET, (union semun){ .buf = &ds }));
	ds.sem_perm.gid = 0;
	ds.sem_perm.mode = 0640;
	CHECK("IPC_SET b back to root, 0640", 0,
	      semctl(b, 0, IPC_SET, (union semun){ .buf = &ds }));
	CHECK("IPC_STAT b", 0, semctl(b, 0, IPC_STAT, (union semun){ .buf = &ds }));
	show_ds("b restored", &ds, t0, time(NULL));
}

static void info(void)
{
	struct seminfo si;
	long r;

	memset(&si, 0, sizeof(si));
	r = SHOW("IPC_INFO", semctl(0, 0, IPC_INFO, (union semun){ .__buf = &si }));
	show_info("IPC_INFO", r, &si);
	memset(&si, 0, sizeof(si));
	r = SHOW("SEM_INFO", semctl(0, 0, SEM_INFO, (union semun){ .__buf = &si }));
	show_info("SEM_INFO", r, &si);
	/* the id is not used, but a negative one is still refused */
	CHECK("IPC_INFO id -1", -EINVAL, semctl(-1, 0, IPC_INFO, (union semun){ .__buf = &si }));
	CHECK("SEM_INFO id 9999 (highest index in use)", 2,
	      semctl(9999, 0, SEM_INFO, (union semun){ .__buf = &si }));
	CHECK("IPC_INFO NULL", -EFAULT, semctl(0, 0, IPC_INFO, (union semun){ .__buf = NULL }));
	CHECK("SEM_INFO NULL", -EFAULT, semctl(0, 0, SEM_INFO, (union semun){ .__buf = NULL }));
}

static void stat_index(time_t t0)
{
	struct semid_ds ds;
	long r;

	for (int idx = 0; idx < 4; idx++) {
		char label[64];

		memset(&ds, 0, sizeof(ds));
		snprintf(label, sizeof(label), "SEM_STAT index %d", idx);
		r = SHOW(label, semctl(idx, 0, SEM_STAT, (union semun){ .buf = &ds }));
		if (r >= 0)
			show_ds(label, &ds, t0, time(NULL));
		memset(&ds, 0, sizeof(ds));
		snprintf(label, sizeof(label), "SEM_STAT_ANY index %d", idx);
		r = SHOW(label, semctl(idx, 0, SEM_STAT_ANY, (union semun){ .buf = &ds }));
		if (r >= 0)
			show_ds(label, &ds, t0, time(NULL));
	}
	CHECK("SEM_STAT index -1", -EINVAL, semctl(-1, 0, SEM_STAT, (union semun){ .buf = &ds }));
	CHECK("SEM_STAT index 32000", -EINVAL,
	      semctl(32000, 0, SEM_STAT, (union semun){ .buf = &ds }));
	CHECK("SEM_STAT NULL", -EFAULT, semctl(1, 0, SEM_STAT, (union semun){ .buf = NULL }));
	CHECK("SEM_STAT_ANY NULL", -EFAULT,
	      semctl(1, 0, SEM_STAT_ANY, (union semun){ .buf = NULL }));
}

int main(void)
{
	time_t t0 = time(NULL);
	int a, b, c;

	prog_init();
	a = CHECK("semget private nsems 3", 0, semget(IPC_PRIVATE, 3, 0600));
	b = CHECK("semget key nsems 2", 1, semget(KEY, 2, IPC_CREAT | 0640));
	semget_rules();
	values(a);
	all(a);
	counts(a);
	stat_set(b, t0);

	CHECK("unknown cmd 99", -EINVAL, semctl(a, 0, 99));
	CHECK("unknown cmd -1", -EINVAL, semctl(a, 0, -1));
	CHECK("unknown cmd 21", -EINVAL, semctl(a, 0, 21));

	/* remove the first set: index 0 empties, the next set takes index 2 (cyclic) */
	CHECK("IPC_RMID a", 0, semctl(a, 0, IPC_RMID));
	CHECK("IPC_RMID a again", -EINVAL, semctl(a, 0, IPC_RMID));
	CHECK("GETVAL removed a", -EINVAL, getval(a, 0));
	CHECK("IPC_STAT removed a", -EINVAL, semctl(a, 0, IPC_STAT, (union semun){ .buf = NULL }));
	CHECK("semop removed a", -EINVAL, sop1(a, 0, 1, IPC_NOWAIT));
	c = SHOW("semget private nsems 1 (third set)", semget(IPC_PRIVATE, 1, 0444));
	EXPECT(c == 2, "third set's id %d", c);
	CHECK("IPC_RMID id -1", -EINVAL, semctl(-1, 0, IPC_RMID));
	info();
	stat_index(t0);
	CHECK("IPC_RMID b", 0, semctl(b, 0, IPC_RMID));
	CHECK("semget the removed key", -ENOENT, semget(KEY, 0, 0));
	CHECK("semget the key again", 3, semget(KEY, 1, IPC_CREAT | 0600));
	CHECK("IPC_RMID c", 0, semctl(c, 0, IPC_RMID));
	{
		struct seminfo si;

		CHECK("SEM_INFO with one set left", 3,
		      semctl(0, 0, SEM_INFO, (union semun){ .__buf = &si }));
		printf("SEM_INFO: sets %d semaphores %d\n", si.semusz, si.semaem);
	}
	return prog_exit_status();
}
