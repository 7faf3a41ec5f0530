/* SPDX-License-Identifier: MIT */
/*
 * The clients of tests/64-daemon-restart.c: workloads that keep calls parked in the supervisor
 * most of the time, so that a restart of the daemon always finds waiters to carry over. Run
 * natively and under `semvisor-run --daemon=SOCKET`; the two runs must print the same.
 *
 *   setup KEY                   make and fill the sets (below), "setup: ok"
 *   mutex KEY N PACE            joins (members +1 with SEM_UNDO, never taken back: its exit
 *                               does that), then N times: take the lock (SEM_UNDO), read the
 *                               counter, write it back plus one, check it, release: "mutex:
 *                               adds N"
 *   produce KEY N PACE          N items, each {space -1, items +1} in one semop
 *   consume KEY N PACE          N items, each {items -1, space +1}: "consume: items N"
 *   gatekeeper KEY R W PACE     R rounds: once W waiters wait for zero on the closed gate, open
 *                               it, take W passes, close it, let the W go round again
 *   gatewait KEY R              R rounds: the gate must be closed (IPC_NOWAIT: EAGAIN), wait
 *                               for zero, pass, wait for the next round
 *   timed KEY I K PACE          K times on semaphore I of the timed set: a semtimedop of 30 ms
 *                               that must expire (EAGAIN, not sooner), then one of 10 s that a
 *                               thread satisfies after 10 ms, then one of 10 s that a thread
 *                               interrupts with SIGUSR1 (EINTR: the only place a signal is
 *                               sent, and the only EINTR allowed)
 *   check KEY COUNTER           the final values: counter == COUNTER, lock 1, no members
 *                               (every mutex client's undo applied at its exit), items 0,
 *                               space full, gate closed, no passes or rounds left, timed ones
 *                               0; then the sets are removed
 *
 * Sets: KEY (lock, counter, members), KEY+1 (items, space), KEY+2 (gate, passed, round), KEY+3 (TIMED
 * semaphores). PACE is a pause in milliseconds after each step (0 natively), so that a run
 * under the daemon lasts long enough to see it restarted many times; it changes nothing
 * printed. Every call's result is what the kernel gives: success, or EAGAIN where it must
 * expire; anything else (ENOSYS when the daemon is gone, EINTR, EIDRM when a set was lost) is
 * a FAIL line and exit status 1. Every blocking call is bounded (BOUND_S).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "prog.h"

#define BOUND_S 20
#define CAP	8  /* space: items in flight at most */
#define TIMED	4  /* semaphores of the timed set */
#define EXPIRE	30 /* ms */

static const char *mode;

/* A call that did not give what it must: say so and leave. */
static void fail(const char *what, int e) __attribute__((noreturn));
static void fail(const char *what, int e)
{
	printf("FAIL: %s: %s: %s\n", mode, what, errname(e));
	exit(1);
}

static int set_of(key_t key, int nsems)
{
	int id = semget(key, nsems, 0);

	if (id < 0)
		fail("semget", errno);
	return id;
}

/* semtimedop bounded by BOUND_S: it must succeed. */
static void ops(int id, struct sembuf *b, int n, const char *what)
{
	struct timespec ts = { BOUND_S, 0 };

	if (semtimedop(id, b, (size_t)n, &ts))
		fail(what, errno);
}

static void op1(int id, unsigned short num, short op, short flg, const char *what)
{
	struct sembuf b = { num, op, flg };

	ops(id, &b, 1, what);
}

static int get(int id, int num, int cmd, const char *what)
{
	int v = semctl(id, num, cmd);

	if (v < 0)
		fail(what, errno);
	return v;
}

static void pace(int ms)
{
	if (ms > 0)
		sleep_ms(ms);
}

static int setup(key_t key)
{
	unsigned short m[3] = { 1, 0, 0 }, p[2] = { 0, CAP }, g[3] = { 1, 0, 0 }, t[TIMED] = { 0 };
	struct {
		int nsems;
		unsigned short *vals;
	} sets[4] = { { 3, m }, { 2, p }, { 3, g }, { TIMED, t } };

	for (int i = 0; i < 4; i++) {
		int id = semget(key + i, sets[i].nsems, IPC_CREAT | 0600);
		union semun u = { .array = sets[i].vals };

		if (id < 0)
			fail("semget(IPC_CREAT)", errno);
		if (semctl(id, 0, SETALL, u))
			fail("SETALL", errno);
	}
	printf("setup: ok\n");
	return 0;
}

static int mutex(key_t key, int n, int ms)
{
	int id = set_of(key, 3);

	op1(id, 2, 1, SEM_UNDO, "join");
	for (int i = 0; i < n; i++) {
		int v;

		op1(id, 0, -1, SEM_UNDO, "lock");
		v = get(id, 1, GETVAL, "GETVAL counter");
		if (setval(id, 1, v + 1))
			fail("SETVAL counter", errno);
		if (get(id, 1, GETVAL, "GETVAL counter") != v + 1) {
			printf("FAIL: mutex: the counter moved under the lock\n");
			return 1;
		}
		op1(id, 0, 1, SEM_UNDO, "unlock");
		if (get(id, 2, GETVAL, "GETVAL members") < 1) {
			printf("FAIL: mutex: a member, but members reads 0\n");
			return 1;
		}
		pace(ms);
	}
	printf("mutex: adds %d\n", n);
	return 0;
}

static int prodcons(key_t key, bool produce, int n, int ms)
{
	int id = set_of(key + 1, 2);

	for (int i = 0; i < n; i++) {
		struct sembuf b[2] = { { produce ? 1 : 0, -1, 0 }, { produce ? 0 : 1, 1, 0 } };

		ops(id, b, 2, produce ? "produce" : "consume");
		pace(ms);
	}
	printf("%s: items %d\n", produce ? "produce" : "consume", n);
	return 0;
}

/* Until semaphore num has want waiters of kind cmd (GETZCNT), within BOUND_S. */
static void wait_waiters(int id, int num, int cmd, int want)
{
	int64_t end = now_ns() + BOUND_S * 1000000000LL;

	while (get(id, num, cmd, "GETZCNT") != want) {
		if (now_ns() > end) {
			printf("FAIL: %s: %d waiters never came\n", mode, want);
			exit(1);
		}
		usleep(500);
	}
}

static int gatekeeper(key_t key, int rounds, int w, int ms)
{
	int id = set_of(key + 2, 3);

	for (int r = 0; r < rounds; r++) {
		wait_waiters(id, 0, GETZCNT, w);
		op1(id, 0, -1, 0, "open the gate");
		op1(id, 1, (short)-w, 0, "take the passes");
		op1(id, 0, 1, 0, "close the gate");
		op1(id, 2, (short)w, 0, "next round");
		pace(ms);
	}
	printf("gatekeeper: rounds %d\n", rounds);
	return 0;
}

static int gatewait(key_t key, int rounds)
{
	int id = set_of(key + 2, 3);
	struct sembuf probe = { 0, 0, IPC_NOWAIT };

	for (int r = 0; r < rounds; r++) {
		errno = 0;
		if (semop(id, &probe, 1) != -1 || errno != EAGAIN)
			fail("the closed gate (IPC_NOWAIT)", errno);
		op1(id, 0, 0, 0, "wait for zero");
		op1(id, 1, 1, 0, "pass");
		op1(id, 2, -1, 0, "wait for the round");
	}
	printf("gatewait: rounds %d\n", rounds);
	return 0;
}

struct poster {
	int id;
	unsigned short num;
	int err;
};

static void *post_later(void *arg)
{
	struct poster *p = arg;

	sleep_ms(10);
	if (sop1(p->id, p->num, 1, 0))
		p->err = errno;
	return NULL;
}

struct interrupter {
	pthread_t target;
	atomic_bool done;
};

/* SIGUSR1 to the target every 5 ms until it is done: one of them finds it parked. */
static void *interrupt_later(void *arg)
{
	struct interrupter *in = arg;

	while (!atomic_load(&in->done)) {
		sleep_ms(5);
		pthread_kill(in->target, SIGUSR1);
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static int timed(key_t key, int idx, int k, int ms)
{
	int id = set_of(key + 3, TIMED);
	unsigned short num = (unsigned short)idx;
	struct sigaction sa = { .sa_handler = on_usr1 }; /* no SA_RESTART: semop never restarts */

	MUST(sigaction(SIGUSR1, &sa, NULL) == 0);

	for (int i = 0; i < k; i++) {
		struct sembuf b = { num, -1, 0 };
		struct timespec expire = { 0, EXPIRE * 1000000L }, bound = { 10, 0 };
		struct poster p = { id, num, 0 };
		pthread_t t;
		int64_t t0 = now_ns();

		errno = 0;
		if (semtimedop(id, &b, 1, &expire) != -1 || errno != EAGAIN)
			fail("semtimedop that must expire", errno);
		if (now_ns() - t0 < EXPIRE * 1000000LL) {
			printf("FAIL: timed: expired after %lld ns, sooner than %d ms\n",
			       (long long)(now_ns() - t0), EXPIRE);
			return 1;
		}
		MUST(pthread_create(&t, NULL, post_later, &p) == 0);
		t0 = now_ns();
		if (semtimedop(id, &b, 1, &bound))
			fail("semtimedop satisfied in time", errno);
		MUST(pthread_join(t, NULL) == 0);
		if (p.err)
			fail("the post", p.err);

		{
			struct interrupter in = { .target = pthread_self() };

			atomic_init(&in.done, false);
			MUST(pthread_create(&t, NULL, interrupt_later, &in) == 0);
			errno = 0;
			if (semtimedop(id, &b, 1, &bound) != -1 || errno != EINTR)
				fail("semtimedop interrupted by a signal", errno);
			atomic_store(&in.done, true);
			MUST(pthread_join(t, NULL) == 0);
		}
		pace(ms);
	}
	printf("timed: expired %d satisfied %d interrupted %d\n", k, k, k);
	return 0;
}

static int check(key_t key, int counter)
{
	int m = set_of(key, 3), p = set_of(key + 1, 2), g = set_of(key + 2, 3),
	    t = set_of(key + 3, TIMED);
	/* natively the undo is applied before the exit is seen; a supervisor may take a moment */
	int members = settled(m, 2, 0), c = get(m, 1, GETVAL, "counter"),
	    l = get(m, 0, GETVAL, "lock"), items = get(p, 0, GETVAL, "items"),
	    space = get(p, 1, GETVAL, "space"), gate = get(g, 0, GETVAL, "gate"),
	    passed = get(g, 1, GETVAL, "passed"), round = get(g, 2, GETVAL, "round"), tsum = 0;

	for (int i = 0; i < TIMED; i++)
		tsum += get(t, i, GETVAL, "timed");
	printf("check: counter %d lock %d members %d items %d space %d gate %d passed %d round %d "
	       "timed %d\n",
	       c, l, members, items, space, gate, passed, round, tsum);
	EXPECT(c == counter, "counter %d, the increments were %d", c, counter);
	EXPECT(l == 1 && members == 0 && items == 0 && space == CAP && gate == 1 && passed == 0 &&
		   round == 0 && tsum == 0,
	       "values left over");
	for (int i = 0; i < 4; i++)
		if (semctl(set_of(key + i, 0), 0, IPC_RMID))
			fail("IPC_RMID", errno);
	return prog_exit_status();
}

int main(int argc, char **argv)
{
	key_t key;

	prog_init();
	if (argc < 3) {
		fprintf(stderr, "usage: restart-load MODE KEY ARGS... (see the source)\n");
		return 2;
	}
	mode = argv[1];
	key = (key_t)strtol(argv[2], NULL, 0);
#define ARG(i) (argc > (i) ? atoi(argv[i]) : 0)
	if (!strcmp(mode, "setup"))
		return setup(key);
	if (!strcmp(mode, "mutex") && argc == 5)
		return mutex(key, ARG(3), ARG(4));
	if ((!strcmp(mode, "produce") || !strcmp(mode, "consume")) && argc == 5)
		return prodcons(key, mode[0] == 'p', ARG(3), ARG(4));
	if (!strcmp(mode, "gatekeeper") && argc == 6)
		return gatekeeper(key, ARG(3), ARG(4), ARG(5));
	if (!strcmp(mode, "gatewait") && argc == 4)
		return gatewait(key, ARG(3));
	if (!strcmp(mode, "timed") && argc == 6 && ARG(3) >= 0 && ARG(3) < TIMED)
		return timed(key, ARG(3), ARG(4), ARG(5));
	if (!strcmp(mode, "check") && argc == 4)
		return check(key, ARG(3));
	fprintf(stderr, "restart-load: bad arguments for %s\n", mode);
	return 2;
}
