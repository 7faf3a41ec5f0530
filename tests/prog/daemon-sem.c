/* SPDX-License-Identifier: MIT */
/*
 * The semaphore side of the daemon tests (tests/60-daemon-*.c): each mode is one small job run
 * under `semvisor-run --daemon=SOCKET`, several of them started separately, so that the only way
 * they can meet is a keyed set that semvisord serves to all of them.
 *
 *   ping KEY N      \  two programs take turns N times through a keyed set of three
 *   pong KEY N      /  semaphores: sem0 "ping's turn", sem1 "pong's turn", sem2 counts turns.
 *                      Each checks at every turn that the counter says the other side moved
 *                      exactly once; ping waits for pong's last turn and prints what it then
 *                      sees, pong prints its pid (for GETPID, which the test compares).
 *   show KEY [rm]   the set's size, owner and values (after ping and pong are gone it outlives
 *                   them: it belongs to the daemon's IPC namespace, as a host set belongs to
 *                   the kernel); rm removes it
 *   gone KEY        semget(KEY, 0, 0) must fail ENOENT
 *   semget NSEMS    a private set of NSEMS semaphores: prints the result (limits tests)
 *   wait KEY        blocks in semop(-1) on a keyed one-semaphore set until released
 *   ncnt KEY COUNT  waits until COUNT processes are blocked on it (GETNCNT)
 *   post KEY COUNT  adds COUNT, releasing that many waiters
 *   new KEY         semget(KEY, 1, IPC_CREAT | IPC_EXCL | 0600): prints the id, or EEXIST when
 *                   the key is there already
 *   fill NSEMS N    up to N private sets of NSEMS semaphores, kept: "fill: made K" and, if one
 *                   was refused, "fill: refused ERRNO"; then a semop on the last one made
 *                   ("fill: served"), to show the caller is still served (budget tests)
 *   park KEY N MS   N threads wait at once (semop -1) on a keyed one-semaphore set: "park:
 *                   parked P" once each has parked or failed, then "park: refused ERRNO R" if
 *                   some failed; after MS milliseconds it releases them ("park: woken P")
 *   undo N MS       N private one-semaphore sets, each given a semop with SEM_UNDO: "undo: made
 *                   K", "undo: refused ERRNO" if one failed (and nothing applied then), "undo:
 *                   served" if a semop without SEM_UNDO still works; then it keeps its entries
 *                   for MS milliseconds before exiting (which applies them)
 *   keep KEY MS     a keyed set in the caller's namespace: "keep: made" or "keep: refused
 *                   ERRNO"; after MS milliseconds, "keep: served" if it still works (namespace
 *                   budget tests)
 *   greedy NSEMS MS a private set of NSEMS semaphores, SETALL then GETALL in a loop for MS
 *                   milliseconds, every GETALL checked against the SETALL before it: "greedy:
 *                   rounds R"
 *   probe N         N semops (+1, -1 in turns, a pause after each) on a private semaphore,
 *                   each timed: "probe: p50 A p99 B" in nanoseconds (fairness tests)
 *
 * Every blocking call has a timeout (semtimedop), so a broken daemon fails a test instead of
 * hanging it. Exit status 0 when every check held, 1 otherwise, 2 for a setup failure.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "prog.h"

#define TURN_TIMEOUT_S 20

static long key_arg(const char *s)
{
	return strtol(s, NULL, 0);
}

/* semop with a bound: -1 and a FAIL line if it did not complete. */
static int step(int id, unsigned short num, short op, const char *what)
{
	struct sembuf b = { num, op, 0 };
	struct timespec ts = { TURN_TIMEOUT_S, 0 };

	if (semtimedop(id, &b, 1, &ts) == 0)
		return 0;
	printf("FAIL: %s: semtimedop(sem%u, %+d): %s\n", what, num, op, errname(errno));
	prog_failures++;
	return -1;
}

static int pingpong(bool ping, key_t key, int n)
{
	int id = semget(key, 3, IPC_CREAT | 0600);

	MUST(id >= 0);
	if (!ping && step(id, 0, 1, "pong: start"))
		return 1;
	for (int i = 0; i < n; i++) {
		int mine = ping ? 0 : 1, other = ping ? 1 : 0, want = ping ? 2 * i : 2 * i + 1;

		if (step(id, (unsigned short)mine, -1, ping ? "ping: my turn" : "pong: my turn"))
			return 1;
		/* The other side moved exactly once since my last turn. */
		EXPECT(getval(id, 2) == want, "%s: turn %d: counter %d, expected %d",
		       ping ? "ping" : "pong", i, getval(id, 2), want);
		if (step(id, 2, 1, "count") || step(id, (unsigned short)other, 1, "hand over"))
			return 1;
	}
	if (ping) {
		/* pong's last turn ends with sem0 up */
		if (step(id, 0, -1, "ping: pong's last turn"))
			return 1;
		printf("ping: rounds %d counter %d sem0 %d sem1 %d lastpid %d\n", n, getval(id, 2),
		       getval(id, 0), getval(id, 1), semctl(id, 2, GETPID));
	} else {
		printf("pong: rounds %d pid %d\n", n, (int)getpid());
	}
	return prog_exit_status();
}

static int show(key_t key, bool rm)
{
	int id = semget(key, 0, 0);
	struct semid_ds ds;
	union semun u = { .buf = &ds };

	if (id < 0) {
		printf("show: semget: %s\n", errname(errno));
		return 1;
	}
	MUST(semctl(id, 0, IPC_STAT, u) == 0);
	printf("show: nsems %lu uid %u vals", (unsigned long)ds.sem_nsems,
	       (unsigned)ds.sem_perm.uid);
	for (unsigned long i = 0; i < ds.sem_nsems && i < 8; i++)
		printf(" %d", getval(id, (int)i));
	printf("\n");
	if (rm)
		CHECK("show: IPC_RMID", 0, semctl(id, 0, IPC_RMID));
	return prog_exit_status();
}

static int wait_ncnt(key_t key, int count)
{
	int id = semget(key, 1, IPC_CREAT | 0600);
	int64_t end = now_ns() + 60 * 1000000000LL;
	int v = -1;

	MUST(id >= 0);
	while (now_ns() < end && (v = semctl(id, 0, GETNCNT)) != count)
		usleep(2000);
	printf("ncnt: %d\n", v);
	return v == count ? 0 : 1;
}

struct parker {
	pthread_t t;
	int id;
	int err; /* 0 while parked or after being woken */
};

static atomic_int park_failed;

static void *park_one(void *arg)
{
	struct parker *p = arg;
	struct sembuf b = { 0, -1, 0 };
	struct timespec ts = { TURN_TIMEOUT_S, 0 };

	if (semtimedop(p->id, &b, 1, &ts) < 0) {
		p->err = errno;
		atomic_fetch_add(&park_failed, 1);
	}
	return NULL;
}

/* N threads park at once; the daemon's bound may refuse some (the budget tests). */
static int park(key_t key, int n, int hold_ms)
{
	struct parker *p = calloc((size_t)n, sizeof(*p));
	int id = semget(key, 1, IPC_CREAT | 0600), parked = 0, failed, woken = 0, err = 0;
	int64_t end = now_ns() + 20 * 1000000000LL;

	MUST(p && id >= 0);
	for (int i = 0; i < n; i++) {
		p[i].id = id;
		MUST(pthread_create(&p[i].t, NULL, park_one, &p[i]) == 0);
	}
	/* settled: each thread is parked (GETNCNT) or has failed */
	while (now_ns() < end &&
	       (parked = semctl(id, 0, GETNCNT)) + (failed = atomic_load(&park_failed)) < n)
		usleep(2000);
	failed = atomic_load(&park_failed);
	printf("park: parked %d\n", parked);
	for (int i = 0; i < n; i++)
		if (p[i].err)
			err = p[i].err;
	if (failed)
		printf("park: refused %s %d\n", errname(err), failed);
	fflush(stdout);
	usleep((useconds_t)hold_ms * 1000);
	EXPECT(semctl(id, 0, SETVAL, n) == 0, "park: release: %s", errname(errno));
	for (int i = 0; i < n; i++) {
		MUST(pthread_join(p[i].t, NULL) == 0);
		woken += !p[i].err;
	}
	printf("park: woken %d\n", woken);
	EXPECT(semctl(id, 0, IPC_RMID) == 0, "park: IPC_RMID: %s", errname(errno));
	free(p);
	return prog_exit_status();
}

/* N SEM_UNDO entries, one per set; the daemon's bound may refuse one (the budget tests). */
static int undo(int n, int hold_ms)
{
	struct sembuf up = { 0, 1, SEM_UNDO }, plain = { 0, 1, 0 };
	int made = 0, id = -1;

	while (made < n) {
		id = semget(IPC_PRIVATE, 1, 0600);
		MUST(id >= 0);
		if (semop(id, &up, 1) < 0)
			break;
		made++;
	}
	printf("undo: made %d\n", made);
	if (made < n) {
		printf("undo: refused %s\n", errname(errno));
		EXPECT(getval(id, 0) == 0, "undo: the refused semop applied: %d", getval(id, 0));
	}
	if (semop(id, &plain, 1) == 0 && getval(id, 0) == (made < n ? 1 : 2))
		printf("undo: served\n");
	fflush(stdout);
	usleep((useconds_t)hold_ms * 1000);
	return prog_exit_status();
}

/* A set in the caller's namespace, used again later (the namespace budget tests). */
static int keep(key_t key, int hold_ms)
{
	int id = semget(key, 1, IPC_CREAT | 0600);
	struct sembuf up = { 0, 1, 0 };

	if (id < 0) {
		printf("keep: refused %s\n", errname(errno));
		return 0;
	}
	printf("keep: made\n");
	fflush(stdout);
	usleep((useconds_t)hold_ms * 1000);
	if (semop(id, &up, 1) == 0 && getval(id, 0) == 1)
		printf("keep: served\n");
	return 0;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int greedy(int nsems, int ms)
{
	int id = semget(IPC_PRIVATE, nsems, 0600);
	unsigned short *set = calloc((size_t)nsems, sizeof(*set));
	unsigned short *got = calloc((size_t)nsems, sizeof(*got));
	int64_t end = mono_ns() + (int64_t)ms * 1000000;
	long rounds = 0;

	if (id < 0 || !set || !got) {
		printf("FAIL: greedy: semget(%d): %s\n", nsems, errname(errno));
		return 2;
	}
	while (mono_ns() < end) {
		for (int i = 0; i < nsems; i++)
			set[i] = (unsigned short)((i + rounds) & 0xff);
		if (semctl(id, 0, SETALL, set) || semctl(id, 0, GETALL, got)) {
			printf("FAIL: greedy: SETALL/GETALL: %s\n", errname(errno));
			prog_failures++;
			break;
		}
		if (memcmp(set, got, (size_t)nsems * sizeof(*set))) {
			printf("FAIL: greedy: GETALL is not what SETALL wrote\n");
			prog_failures++;
			break;
		}
		rounds++;
	}
	semctl(id, 0, IPC_RMID);
	printf("greedy: rounds %ld\n", rounds);
	free(set);
	free(got);
	return prog_failures ? 1 : 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int probe(int n)
{
	int id = semget(IPC_PRIVATE, 1, 0600);
	int64_t *lat = calloc((size_t)n, sizeof(*lat));
	const struct timespec pause = { 0, 150000 };

	if (id < 0 || !lat || n < 100) {
		printf("FAIL: probe: semget: %s\n", errname(errno));
		return 2;
	}
	for (int i = 0; i < n; i++) {
		int64_t t0 = mono_ns();

		if (step(id, 0, i & 1 ? -1 : 1, "probe"))
			break;
		lat[i] = mono_ns() - t0;
		nanosleep(&pause, NULL);
	}
	semctl(id, 0, IPC_RMID);
	qsort(lat, (size_t)n, sizeof(*lat), cmp_i64);
	printf("probe: p50 %lld p99 %lld\n", (long long)lat[n / 2], (long long)lat[n * 99 / 100]);
	free(lat);
	return prog_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	prog_init();
	if (argc >= 4 && (!strcmp(argv[1], "ping") || !strcmp(argv[1], "pong")))
		return pingpong(argv[1][1] == 'i', (key_t)key_arg(argv[2]), atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "show"))
		return show((key_t)key_arg(argv[2]), argc > 3 && !strcmp(argv[3], "rm"));
	if (argc == 3 && !strcmp(argv[1], "gone")) {
		CHECK("gone: semget", -ENOENT, semget((key_t)key_arg(argv[2]), 0, 0));
		return prog_exit_status();
	}
	if (argc == 3 && !strcmp(argv[1], "semget")) {
		int id = (int)SHOW("semget", semget(IPC_PRIVATE, atoi(argv[2]), 0600));

		if (id >= 0)
			semctl(id, 0, IPC_RMID);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "fill")) {
		int nsems = atoi(argv[2]), n = atoi(argv[3]), made = 0, id = -1, last = -1;
		struct sembuf up = { 0, 1, 0 };

		while (made < n && (id = semget(IPC_PRIVATE, nsems, 0600)) >= 0) {
			last = id;
			made++;
		}
		printf("fill: made %d\n", made);
		if (id < 0)
			printf("fill: refused %s\n", errname(errno));
		if (last >= 0 && semop(last, &up, 1) == 0 && semctl(last, 0, GETVAL) == 1)
			printf("fill: served\n");
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "wait")) {
		int id = semget((key_t)key_arg(argv[2]), 1, IPC_CREAT | 0600);

		MUST(id >= 0);
		if (step(id, 0, -1, "wait"))
			return 1;
		printf("woken\n");
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "ncnt"))
		return wait_ncnt((key_t)key_arg(argv[2]), atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "new")) {
		long id =
		    SHOW("new", semget((key_t)key_arg(argv[2]), 1, IPC_CREAT | IPC_EXCL | 0600));

		return id >= 0 ? 0 : 1;
	}
	if (argc == 4 && !strcmp(argv[1], "post")) {
		int id = semget((key_t)key_arg(argv[2]), 1, IPC_CREAT | 0600);

		MUST(id >= 0);
		CHECK("post", 0, sop1(id, 0, (short)atoi(argv[3]), 0));
		return prog_exit_status();
	}
	if (argc == 5 && !strcmp(argv[1], "park"))
		return park((key_t)key_arg(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (argc == 4 && !strcmp(argv[1], "undo"))
		return undo(atoi(argv[2]), atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "greedy"))
		return greedy(atoi(argv[2]), atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "probe"))
		return probe(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "keep"))
		return keep((key_t)key_arg(argv[2]), atoi(argv[3]));
	fprintf(stderr, "usage: daemon-sem ping|pong KEY N | show KEY [rm] | gone KEY | "
			"semget NSEMS | wait KEY | ncnt KEY COUNT | post KEY COUNT | new KEY | "
			"fill NSEMS N | park KEY N MS | undo N MS | keep KEY MS\n");
	return 2;
}
