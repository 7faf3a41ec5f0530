/* SPDX-License-Identifier: MIT */
/*
 * The adaptive mutex (server/lock/amutex.c) as the engine gets it from libsemvisor.a: API
 * semantics, return values, statistics, and stress runs that count with a plain (non-atomic)
 * counter under the lock, so that any breach of mutual exclusion shows up as a wrong total.
 *
 * tests/11-lock-amutex-debug.c includes this file again on top of a debug build of the mutex
 * (ownership checks, random yields on the queue paths): every test here runs in both builds.
 * `make test-tsan` runs both under ThreadSanitizer, with the iteration counts scaled down.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/runner.h"

#include "lock/amutex.h"
#include "lock/lock.h"

#ifndef AMUTEX_TEST_SUITE
#define AMUTEX_TEST_SUITE amutex
#endif

/* Iterations are divided by this: TSan costs 5-20x, the debug build's yields some more. */
#ifdef AMUTEX_DEBUG
#define SLOWDOWN (UNDER_TSAN ? 8 : 4)
#else
#define SLOWDOWN (UNDER_TSAN ? 2 : 1)
#endif
#define ITERS(n) ((n) / SLOWDOWN > 0 ? (n) / SLOWDOWN : 1)

#define MAX_THREADS 32

static uint64_t t_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void run_threads(int n, void *(*fn)(void *), void *arg)
{
	pthread_t t[MAX_THREADS];

	cr_assert(n <= MAX_THREADS);
	for (int i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, fn, arg), 0);
	for (int i = 0; i < n; i++)
		cr_assert_eq(pthread_join(t[i], NULL), 0);
}

/* Small per-thread random numbers (xorshift), seeded from the thread's stack address. */
static uint32_t rnd(uint64_t *s)
{
	if (!*s)
		*s = (uintptr_t)s ^ t_now_ns() ^ 0x2545f4914f6cdd1du;
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 11);
}

/* ---- API semantics ------------------------------------------------------------------------ */

Test(AMUTEX_TEST_SUITE, size_and_zero_init)
{
#ifdef AMUTEX_DEBUG
	cr_expect_eq(sizeof(struct amutex), 16);
#else
	cr_expect_eq(sizeof(struct amutex), 8, "the engine budgets 8 bytes per lock");
#endif
	static struct amutex zeroed; /* never initialised: all-zero memory is an unlocked amutex */

	cr_expect_eq(amutex_lock(&zeroed), AMUTEX_FAST);
	amutex_unlock(&zeroed);

	struct amutex m;

	memset(&m, 0xa5, sizeof(m));
	amutex_init(&m);
	cr_expect_eq(amutex_lock(&m), AMUTEX_FAST);
	amutex_unlock(&m);
	cr_expect_eq(amutex_lock(&m), AMUTEX_FAST);
	amutex_unlock(&m);
}

/* lock.h, whichever lock the build chose (LOCK=pthread keeps pthread_mutex underneath). */
Test(AMUTEX_TEST_SUITE, lock_h_wrapper)
{
	sv_lock_t l;

#ifdef SV_LOCK_PTHREAD
	cr_expect_str_eq(SV_LOCK_NAME, "pthread_mutex");
#else
	cr_expect_str_eq(SV_LOCK_NAME, "amutex");
	cr_expect_eq(sizeof(sv_lock_t), sizeof(struct amutex));
#endif
	sv_lock_init(&l);
	cr_expect_eq(sv_lock(&l), SV_LOCK_FAST);
	cr_expect_not(sv_trylock(&l));
	sv_unlock(&l);
	cr_expect(sv_trylock(&l));
	sv_unlock(&l);
	sv_lock_destroy(&l);
	cr_expect_eq((int)SV_LOCK_SPUN, AMUTEX_SPUN);
	cr_expect_eq((int)SV_LOCK_SLEPT, AMUTEX_SLEPT);
}

static struct amutex try_m;

static void *trylock_from_other(void *arg)
{
	bool *got = arg;

	*got = amutex_trylock(&try_m);
	if (*got)
		amutex_unlock(&try_m);
	return NULL;
}

Test(AMUTEX_TEST_SUITE, trylock)
{
	bool got = true;
	pthread_t t;

	amutex_init(&try_m);
	cr_assert(amutex_trylock(&try_m), "a free mutex is taken");
	cr_assert_eq(pthread_create(&t, NULL, trylock_from_other, &got), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_expect_not(got, "trylock of a held mutex fails in another thread");
	amutex_unlock(&try_m);

	cr_assert_eq(pthread_create(&t, NULL, trylock_from_other, &got), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_expect(got, "trylock succeeds once the mutex is free");

	/* trylock never waits, even for a sleeper-marked mutex */
	cr_assert_eq(amutex_lock(&try_m), AMUTEX_FAST);
	atomic_store(&try_m.state, 2);
	got = true;
	cr_assert_eq(pthread_create(&t, NULL, trylock_from_other, &got), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_expect_not(got);
	amutex_unlock(&try_m); /* wakes nobody, harmlessly */
	cr_expect_eq(atomic_load(&try_m.state), 0);
}

/* ---- what lock() reports ------------------------------------------------------------------ */

/* The scheduler state letter of thread @tid of this process ('R', 'S', ...). */
static char thread_state(pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	cr_assert_not_null(p);
	return p[2];
}

enum hold_until {
	UNTIL_ASLEEP,	/* the waiter sleeps on the futex */
	UNTIL_SPINNING, /* the waiter is in the spin queue */
};

struct holder {
	struct amutex m;
	_Atomic int held;
	pid_t waiter;
	enum hold_until until;
};

/*
 * Hold the lock until the waiter is observably in the state asked for: waiting a fixed time
 * instead would make the outcome depend on the scheduler (on a busy machine the waiter may not
 * even reach lock() before a timed hold ends).
 */
static void *hold_until(void *arg)
{
	struct holder *h = arg;
	struct timespec ms = { 0, 1000000 };

	amutex_lock(&h->m);
	atomic_store(&h->held, 1);
	if (h->until == UNTIL_ASLEEP) {
		for (;;) {
			if (atomic_load(&h->m.state) == 2 && thread_state(h->waiter) == 'S') {
				nanosleep(&ms, NULL);
				if (thread_state(h->waiter) == 'S')
					break;
			}
			sched_yield();
		}
	} else {
		while (atomic_load(&h->m.tail) == 0)
			sched_yield();
		nanosleep(&ms, NULL);
	}
	amutex_unlock(&h->m);
	return NULL;
}

static int contended_lock_how(long limit, enum hold_until until)
{
	static struct holder h;
	pthread_t t;
	int how;

	memset(&h, 0, sizeof(h));
	h.waiter = gettid();
	h.until = until;
	amutex_set_spin_limit(limit);
	cr_assert_eq(pthread_create(&t, NULL, hold_until, &h), 0);
	while (!atomic_load(&h.held))
		sched_yield();
	how = amutex_lock(&h.m);
	amutex_unlock(&h.m);
	cr_assert_eq(pthread_join(t, NULL), 0);
	amutex_set_spin_limit(-1);
	return how;
}

Test(AMUTEX_TEST_SUITE, lock_reports_how)
{
	struct amutex m = { 0 };

	cr_expect_eq(amutex_lock(&m), AMUTEX_FAST);
	amutex_unlock(&m);
	cr_expect_eq(contended_lock_how(0, UNTIL_ASLEEP), AMUTEX_SLEPT,
		     "with no spin budget a contended lock sleeps");
	/* A budget of 100 s: the waiter spins until the holder lets go. */
	cr_expect_eq(contended_lock_how(100L * 1000000000, UNTIL_SPINNING), AMUTEX_SPUN,
		     "a waiter that outlasts the holder spins");
}

/* ---- statistics and the budget ------------------------------------------------------------ */

Test(AMUTEX_TEST_SUITE, stats_count_this_process)
{
	struct amutex_stats a, b;
	struct amutex m = { 0 };

	amutex_stats_read(&a);
	for (int i = 0; i < 1000; i++) {
		amutex_lock(&m);
		amutex_unlock(&m);
	}
	cr_assert(amutex_trylock(&m));
	cr_assert_not(amutex_trylock(&m));
	amutex_unlock(&m);
	amutex_stats_read(&b);
	cr_expect_eq(b.acquired - a.acquired, 1001);
	cr_expect_eq(b.fast - a.fast, 1001);
	cr_expect_eq(b.trylock_failed - a.trylock_failed, 1);
	cr_expect_eq(b.slept - a.slept, 0);
	cr_expect_geq(b.threads, 1);
	cr_expect_geq(b.nodes, b.threads);

	cr_assert_eq(contended_lock_how(0, UNTIL_ASLEEP), AMUTEX_SLEPT);
	amutex_stats_read(&a);
	cr_expect_eq(a.slept - b.slept, 1);
	cr_expect_geq(a.sleeps - b.sleeps, 1);
	/* The holder's unlock wakes the sleeper; the sleeper took the lock as "2" (it cannot know
	 * it was the last one), so its own unlock makes one needless wake call too. */
	cr_expect_eq(a.wakes - b.wakes, 2);
}

Test(AMUTEX_TEST_SUITE, spin_budget_bounds_and_override)
{
	long b = amutex_spin_budget();

	cr_expect_geq(b, AMUTEX_SPIN_MIN_NS);
	cr_expect_leq(b, AMUTEX_SPIN_CAP_NS);
	amutex_set_spin_limit(123);
	cr_expect_eq(amutex_spin_budget(), 123);
	amutex_set_spin_limit(0);
	cr_expect_eq(amutex_spin_budget(), 0);
	amutex_set_spin_limit(-5);
	cr_expect_eq(amutex_spin_budget(), b);
}

Test(AMUTEX_TEST_SUITE, budget_shrinks_when_spinning_never_pays)
{
	long before = amutex_spin_budget();

	/* Each round the holder keeps the lock until the waiter sleeps, so spinning never pays. */
	for (int i = 0; i < 30; i++)
		cr_assert_eq(contended_lock_how(-1, UNTIL_ASLEEP), AMUTEX_SLEPT);
	cr_expect_lt(amutex_spin_budget(), before);
	cr_expect_eq(amutex_spin_budget(), AMUTEX_SPIN_MIN_NS);
}

/* ---- stress ------------------------------------------------------------------------------- */

struct stress {
	struct amutex m;
	int inside;	  /* plain: only touched under m */
	uint64_t counter; /* plain: only touched under m */
	long iters;
	unsigned yield_one_in; /* yield inside the critical section, now and then */
	bool mixed;	       /* per-thread budgets: long ones (heads persist), tiny ones */
	_Atomic int next_id;
	pthread_barrier_t start;
	_Atomic uint64_t how[3];
};

/* A few hundred ns of work that the compiler cannot drop. */
static void work(unsigned n)
{
	volatile unsigned sink = 0;

	for (unsigned i = 0; i < n; i++)
		sink = sink + i;
}

static void *stress_worker(void *arg)
{
	struct stress *s = arg;
	uint64_t rs = 0, how[3] = { 0 };
	int id = atomic_fetch_add(&s->next_id, 1);
	int r;

	/*
	 * Mixed budgets: a thread with a long budget stays head of the queue while those queued
	 * behind it with tiny budgets leave from the middle, often next to each other.
	 */
	if (s->mixed)
		amutex_set_thread_spin_limit(id % 4 == 0 ? 1000000 : (long)(id % 4) * 100);
	r = pthread_barrier_wait(&s->start);
	if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD)
		abort();
	for (long i = 0; i < s->iters; i++) {
		unsigned x = rnd(&rs);
		int h = amutex_lock(&s->m);

		if (h < 0 || h > 2)
			abort();
		how[h]++;
		/* A second lock holder would see inside != 0, or lose an increment below. */
		if (s->inside++ != 0)
			abort();
		uint64_t v = s->counter;

		if (s->yield_one_in && x % s->yield_one_in == 0) {
			/* the holder leaves its CPU: waiters pile up in the queue */
			if (s->mixed)
				nanosleep(&(struct timespec){ 0, 20000 }, NULL);
			else
				sched_yield();
		} else {
			work(x % 64);
		}
		s->counter = v + 1;
		s->inside--;
		amutex_unlock(&s->m);
		work((x >> 8) % 128);
	}
	for (int i = 0; i < 3; i++)
		atomic_fetch_add(&s->how[i], how[i]);
	return NULL;
}

/* limit: < 0 adaptive; >= 0 fixed for all; STRESS_MIXED per-thread budgets (see the worker). */
#define STRESS_MIXED (-2)

static void stress(int threads, long iters, long limit, unsigned yield_one_in)
{
	static struct stress s;
	struct amutex_stats a, b;

	memset(&s, 0, sizeof(s));
	s.iters = iters;
	s.yield_one_in = yield_one_in;
	s.mixed = limit == STRESS_MIXED;
	cr_assert_eq(pthread_barrier_init(&s.start, NULL, (unsigned)threads), 0);
	amutex_set_spin_limit(s.mixed ? -1 : limit);
	amutex_stats_read(&a);
	run_threads(threads, stress_worker, &s);
	amutex_stats_read(&b);
	amutex_set_spin_limit(-1);
	cr_assert_eq(pthread_barrier_destroy(&s.start), 0);

	cr_assert_eq(s.counter, (uint64_t)threads * (uint64_t)iters, "lost updates: %lu of %lu",
		     (unsigned long)s.counter, (unsigned long)threads * iters);
	cr_expect_eq(atomic_load(&s.m.state), 0, "left unlocked");
	cr_expect_eq(atomic_load(&s.m.tail), 0, "nobody left in the spin queue");
	cr_expect_eq(s.how[0] + s.how[1] + s.how[2], (uint64_t)threads * iters);
	cr_expect_eq(b.acquired - a.acquired, (uint64_t)threads * iters);
	cr_expect_eq(b.spun - a.spun, s.how[1]);
	cr_expect_eq(b.slept - a.slept, s.how[2]);
	if (limit == 0)
		cr_expect_eq(b.spin_ns - a.spin_ns, 0, "budget 0 never spins");
	cr_log_info("%d threads x %ld: fast %lu spun %lu slept %lu, sleeps %lu wakes %lu "
		    "unqueues %lu head quits %lu",
		    threads, iters, (unsigned long)s.how[0], (unsigned long)s.how[1],
		    (unsigned long)s.how[2], (unsigned long)(b.sleeps - a.sleeps),
		    (unsigned long)(b.wakes - a.wakes), (unsigned long)(b.unqueues - a.unqueues),
		    (unsigned long)(b.head_quits - a.head_quits));
}

Test(AMUTEX_TEST_SUITE, stress_2_threads_adaptive, .timeout = 120)
{
	stress(2, ITERS(2000000), -1, 0);
}

Test(AMUTEX_TEST_SUITE, stress_4_threads_adaptive_yields, .timeout = 120)
{
	stress(4, ITERS(500000), -1, 64);
}

Test(AMUTEX_TEST_SUITE, stress_16_threads_oversubscribed, .timeout = 120)
{
	stress(16, ITERS(200000), -1, 256);
}

Test(AMUTEX_TEST_SUITE, stress_no_spin_everybody_sleeps, .timeout = 120)
{
	/* No lost wake-up: with budget 0 every waiter sleeps; a lost wake-up hangs the test. */
	stress(16, ITERS(50000), 0, 16);
}

/*
 * Forced cancels: threads with tiny budgets queue behind a thread with a long one, and leave from
 * the middle of the queue all the time, often next to each other; holders yield inside the
 * critical section so that several waiters pile up even on two cores. Repeat until enough
 * unqueues happened (a busy machine may schedule the threads so that few queue up at once).
 */
Test(AMUTEX_TEST_SUITE, stress_forced_unqueues, .timeout = 120)
{
	struct amutex_stats a, b;
	uint64_t t0 = t_now_ns();
	int round = 0;

	amutex_stats_read(&a);
	do {
		stress(12, ITERS(10000), STRESS_MIXED, (round & 1) ? 2 : 3);
		amutex_stats_read(&b);
		round++;
	} while (b.unqueues - a.unqueues < 2000 && t_now_ns() - t0 < 10000000000u);
	cr_log_info("unqueues %lu head quits %lu in %d rounds",
		    (unsigned long)(b.unqueues - a.unqueues),
		    (unsigned long)(b.head_quits - a.head_quits), round);
	cr_expect_geq(b.unqueues - a.unqueues, 100, "cancels did happen");
	stress(8, ITERS(20000), 1, 8); /* everybody gives up at once */
}

/* ---- nesting: set lock, then a semaphore lock, as the engine does ------------------------- */

#define NSEM 4

struct nest {
	struct amutex set;
	struct amutex sem[NSEM];
	uint64_t set_count;	  /* under set */
	uint64_t sem_count[NSEM]; /* under sem[i] */
	long iters;
};

static void *nest_worker(void *arg)
{
	struct nest *n = arg;
	uint64_t rs = 0;

	for (long i = 0; i < n->iters; i++) {
		unsigned r = rnd(&rs);
		unsigned k = r % NSEM;

		if (r & 0x100) {
			/* a complex operation: the whole set, then one semaphore inside it */
			amutex_lock(&n->set);
			n->set_count++;
			amutex_lock(&n->sem[k]);
			n->sem_count[k]++;
			amutex_unlock(&n->sem[k]);
			amutex_unlock(&n->set);
		} else {
			/* a simple operation: one semaphore alone (the engine's fast mode) */
			amutex_lock(&n->sem[k]);
			n->sem_count[k]++;
			if ((r & 0xf000) == 0)
				sched_yield();
			amutex_unlock(&n->sem[k]);
		}
	}
	return NULL;
}

static void nest_run(int threads, long limit)
{
	static struct nest n;
	uint64_t sum = 0;

	memset(&n, 0, sizeof(n));
	n.iters = ITERS(50000);
	amutex_set_spin_limit(limit);
	run_threads(threads, nest_worker, &n);
	amutex_set_spin_limit(-1);
	for (int k = 0; k < NSEM; k++)
		sum += n.sem_count[k];
	cr_expect_eq(sum, (uint64_t)threads * n.iters);
	cr_expect_gt(n.set_count, 0);
	cr_expect_lt(n.set_count, sum);
}

Test(AMUTEX_TEST_SUITE, nesting_two_levels, .timeout = 120)
{
	nest_run(6, -1);
	nest_run(6, 100); /* cancels in both queues */
}

/* ---- thread churn: nodes are recycled after their threads exit ---------------------------- */

static struct amutex churn_m;
static uint64_t churn_count;

static void *churn_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200; i++) {
		amutex_lock(&churn_m);
		churn_count++;
		amutex_unlock(&churn_m);
	}
	return NULL;
}

Test(AMUTEX_TEST_SUITE, nodes_recycled_after_thread_exit, .timeout = 120)
{
	struct amutex_stats st;
	int rounds = ITERS(100) < 10 ? 10 : ITERS(100);

	amutex_set_spin_limit(200);
	for (int r = 0; r < rounds; r++)
		run_threads(4, churn_worker, NULL);
	amutex_set_spin_limit(-1);
	cr_expect_eq(churn_count, (uint64_t)rounds * 4 * 200);
	amutex_stats_read(&st);
	/* 4 workers at a time plus this thread; a few spare while exiting threads hand back. */
	cr_expect_leq(st.nodes, 12, "%u nodes for %d threads", st.nodes, rounds * 4);
	cr_expect_leq(st.threads, 6);
}

/* ---- misuse that the release build catches too -------------------------------------------- */

Test(AMUTEX_TEST_SUITE, unlock_of_unlocked_aborts, .signal = SIGABRT)
{
	struct amutex m = { 0 };

	amutex_unlock(&m);
}
