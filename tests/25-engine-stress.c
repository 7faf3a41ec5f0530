/* SPDX-License-Identifier: MIT */
/*
 * The engine under concurrency: several threads, each a process of its own (an sv_proc), drive
 * one set with simple and complex operations, semctl reads, and operations that park. A parked
 * operation is completed by whichever thread's call lets it proceed; that thread delivers the
 * ticket to its owner through the owner's mailbox (mutex + condition variable), exactly as the
 * supervisor delivers answers after leaving the engine. An owner that waits too long cancels its
 * ticket, so no test can deadlock on an operation nobody will satisfy.
 *
 * Every test ends with exact checks: the final values are the initial ones plus the sum of the
 * operations that were applied (a serial replay, since the additions commute), a semaphore used
 * as a mutex protects a plain counter exactly, nothing is left parked. The "rollback" variants
 * make the deliverer declare some deliveries failed and call sv_waiter_rollback(); the owner
 * then sees its operation as not done (as if interrupted), and the totals must still add up.
 *
 * `make test-tsan` runs this file under ThreadSanitizer, with the iteration counts scaled down.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/lib/fixture.h"
#include "tests/lib/runner.h"

/* TSan costs 5-20x: a third of the iterations there, the same checks. */
#define ITERS(n) (UNDER_TSAN ? ((n) / 3 > 0 ? (n) / 3 : 1) : (n))

#define MAX_WORKERS 8
#define MAX_SEMS    8

/* ---- failures seen by worker threads (Criterion's assertions belong to the main thread) ---- */

static atomic_bool failed;
static char fail_msg[512];
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&fail_lock);
	if (!atomic_load(&failed)) {
		va_start(ap, fmt);
		vsnprintf(fail_msg, sizeof(fail_msg), fmt, ap);
		va_end(ap);
		atomic_store(&failed, true);
	}
	pthread_mutex_unlock(&fail_lock);
}

static void check_no_failure(void)
{
	pthread_mutex_lock(&fail_lock);
	cr_assert(!atomic_load(&failed), "%s", fail_msg);
	pthread_mutex_unlock(&fail_lock);
}

/* ---- workers, mailboxes, delivery ---- */

struct mailbox {
	pthread_mutex_t m;
	pthread_cond_t cv;
	struct sv_waiter *w;
	int res;
	bool full;
};

struct run;

struct worker {
	pthread_t th;
	int idx;
	struct run *run;
	struct fx_caller *fc;
	struct mailbox mb;
	uint64_t rng;
	bool undo;	      /* its operations carry SEM_UNDO */
	long delta[MAX_SEMS]; /* sum of sem_op over its applied operations */
	long held[MAX_SEMS];  /* units it took and has not given back */
	long applied, parked, timeouts, rolled_back, rollback_erange, delivered;
};

struct run {
	int id;
	int nsems;
	int nworkers;
	int rollback_pm; /* per mille of deliveries declared failed */
	int wait_ms;	 /* how long an owner waits before cancelling */
	long iters;
	struct worker w[MAX_WORKERS];
	void (*body)(struct worker *);
	/* for the mutex test */
	long counter;
	atomic_int inside;
	atomic_bool stop;
};

static uint32_t rnd(struct worker *self)
{
	uint64_t x = self->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	self->rng = x;
	return (uint32_t)(x >> 11);
}

static void lock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m))
		abort();
}

static void unlock(pthread_mutex_t *m)
{
	if (pthread_mutex_unlock(m))
		abort();
}

static void post(struct worker *owner, struct sv_waiter *w, int res)
{
	lock(&owner->mb.m);
	if (owner->mb.full)
		fail("worker %d got a second delivery while one is pending", owner->idx);
	owner->mb.w = w;
	owner->mb.res = res;
	owner->mb.full = true;
	if (pthread_cond_signal(&owner->mb.cv))
		abort();
	unlock(&owner->mb.m);
}

/* Take the delivery, waiting up to ms milliseconds (ms < 0: as long as it takes). */
static bool take_mail(struct worker *self, struct sv_waiter **w, int *res, int ms)
{
	struct timespec dl;
	bool got;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_nsec += (long)(ms > 0 ? ms : 0) * 1000000L;
	dl.tv_sec += dl.tv_nsec / 1000000000L;
	dl.tv_nsec %= 1000000000L;
	lock(&self->mb.m);
	while (!self->mb.full) {
		int e = ms < 0 ? pthread_cond_wait(&self->mb.cv, &self->mb.m)
			       : pthread_cond_timedwait(&self->mb.cv, &self->mb.m, &dl);

		if (e == ETIMEDOUT)
			break;
		if (e)
			abort();
	}
	got = self->mb.full;
	if (got) {
		*w = self->mb.w;
		*res = self->mb.res;
		self->mb.full = false;
	}
	unlock(&self->mb.m);
	return got;
}

/*
 * Deliver what a call completed. Some deliveries are declared failed (rollback_pm): the
 * operation is rolled back, what the rollback releases is delivered in turn, and the owner
 * hears -EINTR. A rollback that cannot be done (-ERANGE) leaves the operation applied: the
 * owner is told it succeeded.
 */
static void deliver(struct worker *self, struct sv_wakeq *wq)
{
	struct sv_waiter *w;

	while ((w = sv_wakeq_pop(wq))) {
		struct worker *owner = sv_waiter_cookie(w);
		int res = sv_waiter_result(w);

		if (res == 0 && self->run->rollback_pm &&
		    (int)(rnd(self) % 1000) < self->run->rollback_pm) {
			struct sv_wakeq more;
			int r;

			sv_wakeq_init(&more);
			r = sv_waiter_rollback(w, &more);
			if (r == 0) {
				res = -EINTR;
				self->rolled_back++;
			} else if (r == -ERANGE) {
				self->rollback_erange++;
			} else {
				fail("sv_waiter_rollback: %d", r);
			}
			deliver(self, &more);
		} else if (res != 0 && res != -EAGAIN) {
			fail("waiter of worker %d completed with %d", owner->idx, res);
		}
		self->delivered++;
		post(owner, w, res);
	}
}

/*
 * One operation on the run's set. 0: applied (delta updated); < 0: not applied (-EAGAIN for
 * IPC_NOWAIT, -ETIMEDOUT when the owner cancelled its ticket, -EINTR when rolled back).
 */
static long do_op(struct worker *self, unsigned int nsops, const struct sv_sembuf *sops)
{
	struct sv_park pk = { .cookie = self };
	struct sv_wakeq wq;
	struct sv_waiter *w;
	long r;
	int res;

	sv_wakeq_init(&wq);
	r = sv_semtimedop(&self->fc->c, self->run->id, (uint64_t)(uintptr_t)sops, nsops, 0, &pk,
			  &wq);
	deliver(self, &wq);
	if (r == SV_PARKED) {
		self->parked++;
		if (!take_mail(self, &w, &res, self->run->wait_ms)) {
			if (sv_waiter_cancel(pk.waiter) == 0) {
				sv_waiter_free(pk.waiter);
				self->timeouts++;
				return -ETIMEDOUT;
			}
			/* completed meanwhile: its deliverer is on the way */
			take_mail(self, &w, &res, -1);
		}
		if (w != pk.waiter)
			fail("worker %d was handed another worker's ticket", self->idx);
		sv_waiter_free(w);
		r = res;
	}
	if (r == 0) {
		self->applied++;
		for (unsigned int i = 0; i < nsops; i++)
			self->delta[sops[i].sem_num] += sops[i].sem_op;
	} else if (r != -EAGAIN && r != -EINTR) {
		fail("worker %d: operation returned %ld", self->idx, r);
	}
	return r;
}

#define OP(self, ...) do_op((self), SOPS(__VA_ARGS__))

static long ctl(struct worker *self, int semnum, int cmd, uint64_t arg)
{
	struct sv_wakeq wq;
	long r;

	sv_wakeq_init(&wq);
	r = sv_semctl(&self->fc->c, self->run->id, semnum, cmd, arg, &wq);
	deliver(self, &wq);
	return r;
}

/* Reads that take the set lock (GETALL, GETNCNT) or only a semaphore's (GETVAL). */
static void read_some(struct worker *self, int total)
{
	uint16_t v[MAX_SEMS];
	int n = self->run->nsems, num = (int)(rnd(self) % (uint32_t)n), sum = 0;
	long r;

	switch (rnd(self) % 3) {
	case 0:
		if (ctl(self, 0, SV_GETALL, (uint64_t)(uintptr_t)v))
			fail("GETALL failed");
		for (int i = 0; i < n; i++)
			sum += v[i];
		if (total >= 0 && sum > total)
			fail("GETALL sums to %d, more than the %d units that exist", sum, total);
		break;
	case 1:
		r = ctl(self, num, SV_GETVAL, 0);
		if (r < 0 || (total >= 0 && r > total))
			fail("GETVAL %d: %ld", num, r);
		break;
	default:
		r = ctl(self, num, rnd(self) & 1 ? SV_GETNCNT : SV_GETZCNT, 0);
		if (r < 0 || r > self->run->nworkers)
			fail("GETNCNT/GETZCNT %d: %ld", num, r);
		break;
	}
}

static void *worker_main(void *arg)
{
	struct worker *self = arg;

	sv_thread_register();
	self->run->body(self);
	sv_thread_unregister();
	return NULL;
}

static struct run *run_new(int nworkers, int nsems, const int *init)
{
	struct run *run = calloc(1, sizeof(*run));
	struct fx_caller *root = fx_caller_new(fx_ns, 100, 0, 0);

	cr_assert_not_null(run);
	run->nworkers = nworkers;
	run->nsems = nsems;
	run->wait_ms = 20;
	run->id = (int)sv_semget(&root->c, SV_IPC_PRIVATE, nsems, 0600);
	cr_assert_geq(run->id, 0);
	for (int i = 0; i < nsems; i++)
		cr_assert_eq(fx_semctl(root, run->id, i, SV_SETVAL, (uint64_t)init[i], NULL), 0);
	fx_caller_exit(root, NULL);
	for (int i = 0; i < nworkers; i++) {
		struct worker *w = &run->w[i];
		pthread_condattr_t ca;

		w->idx = i;
		w->run = run;
		w->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) ^ (uint64_t)time(NULL);
		w->fc = fx_caller_new(fx_ns, 1000 + i, 0, 0);
		cr_assert_eq(pthread_mutex_init(&w->mb.m, NULL), 0);
		cr_assert_eq(pthread_condattr_init(&ca), 0);
		cr_assert_eq(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC), 0);
		cr_assert_eq(pthread_cond_init(&w->mb.cv, &ca), 0);
		pthread_condattr_destroy(&ca);
	}
	return run;
}

static void run_threads(struct run *run, void (*body)(struct worker *))
{
	run->body = body;
	for (int i = 0; i < run->nworkers; i++)
		cr_assert_eq(pthread_create(&run->w[i].th, NULL, worker_main, &run->w[i]), 0);
	for (int i = 0; i < run->nworkers; i++)
		cr_assert_eq(pthread_join(run->w[i].th, NULL), 0);
	check_no_failure();
}

/* Every value is init plus the sum of the applied operations; nothing waits any more. */
static void check_replay(struct run *run, const int *init, bool undo_too)
{
	struct fx_caller *root = fx_caller_new(fx_ns, 100, 0, 0);
	struct sv_ns_info info;

	for (int i = 0; i < run->nsems; i++) {
		long want = init[i];

		for (int k = 0; k < run->nworkers; k++)
			if (undo_too || !run->w[k].undo)
				want += run->w[k].delta[i];
		cr_assert_eq(fx_getval(root, run->id, i), want,
			     "semaphore %d: %d, but the applied operations add up to %ld", i,
			     fx_getval(root, run->id, i), want);
		cr_assert_eq(fx_getncnt(root, run->id, i), 0);
		cr_assert_eq(fx_getzcnt(root, run->id, i), 0);
	}
	sv_ns_info(fx_ns, &info);
	cr_assert_eq(info.nwaiters, 0, "%d waiters left parked", info.nwaiters);
	fx_caller_exit(root, NULL);
}

static void exit_workers(struct run *run)
{
	for (int i = 0; i < run->nworkers; i++) {
		struct sv_wakeq wq;

		sv_wakeq_init(&wq);
		fx_caller_exit(run->w[i].fc, &wq);
		cr_assert(sv_wakeq_empty(&wq), "an exit released a waiter, but nobody waits");
		pthread_mutex_destroy(&run->w[i].mb.m);
		pthread_cond_destroy(&run->w[i].mb.cv);
	}
}

/*
 * Rollbacks are random (rollback_pm of the deliveries): with 100 deliveries or more, the chance
 * of none at 15% is below 1e-7, so a run without any means the injection does not work.
 */
static void check_rollbacks_happened(struct run *run, long rolled)
{
	long delivered = 0;

	for (int i = 0; i < run->nworkers; i++)
		delivered += run->w[i].delivered;
	if (delivered >= 100)
		cr_assert_gt(rolled, 0, "%ld deliveries and not one rolled back", delivered);
	else
		cr_log_warn("only %ld deliveries: rollbacks not exercised", delivered);
}

static void totals(struct run *run, long *applied, long *parked, long *timeouts, long *rolled,
		   long *erange)
{
	*applied = *parked = *timeouts = *rolled = *erange = 0;
	for (int i = 0; i < run->nworkers; i++) {
		*applied += run->w[i].applied;
		*parked += run->w[i].parked;
		*timeouts += run->w[i].timeouts;
		*rolled += run->w[i].rolled_back;
		*erange += run->w[i].rollback_erange;
	}
}

TestSuite(engine_stress, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

/* ---- 1. random operations: conservation and serial replay ---- */

#define RANDOM_SEMS 4
#define RANDOM_INIT 4

static long held_total(const struct worker *self)
{
	long n = 0;

	for (int i = 0; i < self->run->nsems; i++)
		n += self->held[i];
	return n;
}

/*
 * Workers take units (simple or two at once), give back what they hold, move units between
 * semaphores in one complex operation, wait for zero now and then, and read. A worker that
 * holds units never waits (it gives them back first), and holds at most two, so units are
 * always on their way back to whoever waits: waits end by a completion far more often than by
 * the owner's timeout. Workers with SEM_UNDO never move units, so that their exit gives back
 * exactly what they hold.
 */
static void random_body(struct worker *self)
{
	const int16_t flg = self->undo ? SV_SEM_UNDO : 0;
	const int n = self->run->nsems, total = n * RANDOM_INIT;

	for (long it = 0; it < self->run->iters; it++) {
		uint16_t i = (uint16_t)(rnd(self) % (uint32_t)n);
		uint16_t j = (uint16_t)((i + 1 + rnd(self) % (uint32_t)(n - 1)) % (uint32_t)n);
		int16_t k = (int16_t)(1 + rnd(self) % 2);
		uint32_t what = rnd(self) % 10;

		if (held_total(self) && what < 8 && what != 5) {
			/* give back first: never waits */
			for (uint16_t s = 0; s < n; s++) {
				if (self->held[s] > 0) {
					int16_t g = (int16_t)self->held[s];

					if (OP(self, { s, g, (int16_t)(flg | SV_IPC_NOWAIT) }))
						fail("giving back %d to %d failed", g, s);
					self->held[s] = 0;
				}
			}
			continue;
		}
		switch (what) {
		case 0:
		case 1:
			if (OP(self, { i, (int16_t)-k, flg }) == 0)
				self->held[i] += k;
			break;
		case 2:
		case 3:
			if (OP(self, { i, -1, flg }, { j, -1, flg }) == 0) {
				self->held[i]++;
				self->held[j]++;
			}
			break;
		case 4:
		case 5:
			/* give back two at once, or a pair that never waits */
			if (self->held[i] && self->held[j]) {
				if (OP(self, { i, 1, flg }, { j, 1, flg }))
					fail("giving back two units failed");
				self->held[i]--;
				self->held[j]--;
			} else {
				OP(self, { i, -1, SV_IPC_NOWAIT | flg }, { i, 1, flg });
			}
			break;
		case 6:
		case 7:
			if (!self->undo)
				OP(self, { i, -1, 0 }, { j, 1, 0 });
			else if (rnd(self) % 8 == 0)
				OP(self, { i, 0, 0 });
			break;
		default:
			read_some(self, total);
			break;
		}
	}
}

static void random_ops(int nworkers, int rollback_pm, long iters)
{
	int init[RANDOM_SEMS];
	struct run *run;
	long applied, parked, timeouts, rolled, erange, held[RANDOM_SEMS] = { 0 }, sum = 0;

	for (int i = 0; i < RANDOM_SEMS; i++)
		init[i] = RANDOM_INIT;
	run = run_new(nworkers, RANDOM_SEMS, init);
	run->rollback_pm = rollback_pm;
	run->iters = iters;
	run->wait_ms = 1;
	for (int i = 0; i < nworkers; i++)
		run->w[i].undo = i % 2;
	run_threads(run, random_body);

	/* conservation: the units are either in the set or held by someone */
	check_replay(run, init, true);
	for (int k = 0; k < nworkers; k++)
		for (int i = 0; i < RANDOM_SEMS; i++)
			held[i] += run->w[k].held[i];
	struct fx_caller *root = fx_caller_new(fx_ns, 100, 0, 0);

	for (int i = 0; i < RANDOM_SEMS; i++)
		sum += fx_getval(root, run->id, i) + held[i];
	cr_assert_eq(sum, RANDOM_SEMS * RANDOM_INIT, "units created or lost: %ld", sum);
	totals(run, &applied, &parked, &timeouts, &rolled, &erange);
	cr_assert_gt(parked, 0, "no operation ever waited: the test tests nothing");
	if (rollback_pm)
		check_rollbacks_happened(run, rolled);

	/* the SEM_UNDO workers' exit gives back what they hold, and nothing else */
	exit_workers(run);
	check_replay(run, init, false);
	fx_caller_exit(root, NULL);
	cr_log_info("random: %ld applied, %ld parked, %ld timed out, %ld rolled back, %ld "
		    "rollbacks refused",
		    applied, parked, timeouts, rolled, erange);
	free(run);
}

Test(engine_stress, random_operations)
{
	random_ops(6, 0, ITERS(30000));
}

Test(engine_stress, random_operations_with_rollbacks)
{
	random_ops(6, 150, ITERS(30000));
}

/* ---- 2. a semaphore as a mutex around a plain counter ---- */

/*
 * Semaphore 0 is the mutex. Between critical sections the workers hammer semaphores 1..3 with
 * paired simple and complex operations whose decrements cannot fail (IPC_NOWAIT: a failure is a
 * lost update), so the set keeps switching between per-semaphore and whole-set locking.
 */
static void mutex_body(struct worker *self)
{
	struct run *run = self->run;
	const int16_t flg = self->undo ? SV_SEM_UNDO : 0;

	for (long it = 0; it < run->iters; it++) {
		long r;

		do
			r = OP(self, { 0, -1, flg });
		while (r);
		if (atomic_exchange(&run->inside, 1))
			fail("two workers inside the critical section");
		run->counter++; /* plain: only the semaphore protects it */
		if (it % 4 == 0)
			sched_yield(); /* hold it a little: others must wait */
		atomic_store(&run->inside, 0);
		if (OP(self, { 0, 1, flg }))
			fail("V failed");

		uint16_t a = (uint16_t)(1 + rnd(self) % 3), b = (uint16_t)(1 + (a % 3));

		switch (rnd(self) % 4) {
		case 0:
			if (OP(self, { a, 2, 0 }) || OP(self, { a, -2, SV_IPC_NOWAIT }))
				fail("simple pair on %d lost an update", a);
			break;
		case 1:
			if (OP(self, { a, 1, 0 }, { b, 1, 0 }) ||
			    OP(self, { b, -1, SV_IPC_NOWAIT }, { a, -1, SV_IPC_NOWAIT }))
				fail("complex pair on %d, %d lost an update", a, b);
			break;
		case 2:
			read_some(self, -1);
			break;
		default:
			break;
		}
	}
}

static void mutex_counter(int nworkers, int rollback_pm, long iters)
{
	const int init[4] = { 1, 0, 0, 0 };
	struct run *run = run_new(nworkers, 4, init);
	long applied, parked, timeouts, rolled, erange;

	run->rollback_pm = rollback_pm;
	run->iters = iters;
	for (int i = 0; i < nworkers; i++)
		run->w[i].undo = i % 2;
	run_threads(run, mutex_body);
	cr_assert_eq(run->counter, nworkers * iters, "counter %ld, expected %ld: lost updates",
		     run->counter, nworkers * iters);
	check_replay(run, init, true);
	totals(run, &applied, &parked, &timeouts, &rolled, &erange);
	cr_assert_gt(parked, 0, "the mutex was never contended");
	if (rollback_pm)
		check_rollbacks_happened(run, rolled);
	exit_workers(run);
	check_replay(run, init, false);
	cr_log_info("mutex: %ld parked, %ld timed out, %ld rolled back", parked, timeouts, rolled);
	free(run);
}

Test(engine_stress, semaphore_as_mutex)
{
	mutex_counter(6, 0, ITERS(20000));
}

Test(engine_stress, semaphore_as_mutex_with_rollbacks)
{
	mutex_counter(6, 200, ITERS(20000));
}

/* ---- 3. a token passed around a ring: every hand-over goes through a parked waiter ---- */

/*
 * Worker t takes the token from semaphore t and puts it on t + 1, either as two simple
 * operations or as one complex move. Only one token exists, so almost every take parks and is
 * completed by the previous worker's give.
 */
static void ring_body(struct worker *self)
{
	struct run *run = self->run;
	uint16_t me = (uint16_t)self->idx, next = (uint16_t)((self->idx + 1) % run->nworkers);

	for (long it = 0; it < run->iters; it++) {
		if (rnd(self) % 2) {
			while (OP(self, { me, -1, 0 }))
				;
			if (OP(self, { next, 1, 0 }))
				fail("give failed");
		} else {
			while (OP(self, { me, -1, 0 }, { next, 1, 0 }))
				;
		}
		if (rnd(self) % 8 == 0)
			read_some(self, 1);
	}
}

static void token_ring(int nworkers, int rollback_pm, long iters)
{
	int init[MAX_SEMS] = { 1 };
	struct run *run = run_new(nworkers, nworkers, init);
	long applied, parked, timeouts, rolled, erange;

	run->rollback_pm = rollback_pm;
	run->iters = iters;
	run_threads(run, ring_body);
	check_replay(run, init, true);
	struct fx_caller *root = fx_caller_new(fx_ns, 100, 0, 0);

	cr_assert_eq(fx_getval(root, run->id, 0), 1, "the token is back where it started");
	for (int i = 1; i < nworkers; i++)
		cr_assert_eq(fx_getval(root, run->id, i), 0);
	fx_caller_exit(root, NULL);
	totals(run, &applied, &parked, &timeouts, &rolled, &erange);
	cr_assert_gt(parked, iters, "hand-overs should mostly go through parked waiters");
	if (rollback_pm)
		check_rollbacks_happened(run, rolled);
	exit_workers(run);
	cr_log_info("ring: %ld parked, %ld timed out, %ld rolled back, %ld refused", parked,
		    timeouts, rolled, erange);
	free(run);
}

Test(engine_stress, token_ring)
{
	token_ring(5, 0, ITERS(6000));
}

Test(engine_stress, token_ring_with_rollbacks)
{
	token_ring(5, 250, ITERS(6000));
}

/* ---- 4. the simple <-> complex switch, constantly ---- */

/*
 * Two workers do single-semaphore operations on every semaphore in turn (per-semaphore locks),
 * two do two-semaphore operations across the set (the set lock, complex mode), one reads with
 * GETALL (whole set) and GETVAL (one semaphore), and two keep a complex waiter parked on
 * semaphores 4 and 5 now and then, so the set also stays in complex mode for a while with
 * simple waiters merged. Decrements only take what the same worker added just before, with
 * IPC_NOWAIT: any update lost across a mode switch shows up as EAGAIN or as a wrong total.
 */
#define SWITCH_SEMS 6

static void switch_body(struct worker *self)
{
	struct run *run = self->run;
	long iters = run->iters;

	switch (self->idx) {
	case 0:
	case 1:
		for (long it = 0; it < iters; it++) {
			uint16_t s = (uint16_t)(it % 4);

			if (OP(self, { s, 1, 0 }))
				fail("simple increment failed");
			if (it % 64 && OP(self, { s, -1, SV_IPC_NOWAIT }))
				fail("simple decrement on %d: an update was lost", s);
		}
		break;
	case 2:
	case 3:
		for (long it = 0; it < iters; it++) {
			uint16_t a = (uint16_t)(it % 4), b = (uint16_t)((it + self->idx - 1) % 4);

			if (OP(self, { a, 2, 0 }, { b, 1, 0 }))
				fail("complex increment failed");
			if (it % 64 && OP(self, { b, -1, SV_IPC_NOWAIT }, { a, -2, SV_IPC_NOWAIT }))
				fail("complex decrement on %d, %d: an update was lost", a, b);
		}
		break;
	case 4:
		for (long it = 0; it < iters / 4; it++) {
			uint16_t v[SWITCH_SEMS];

			if (ctl(self, 0, SV_GETALL, (uint64_t)(uintptr_t)v))
				fail("GETALL failed");
			if (ctl(self, (int)(it % 4), SV_GETVAL, 0) < 0)
				fail("GETVAL failed");
		}
		break;
	case 5:
		/* a complex waiter on 4 and 5, satisfied by worker 6, cancelled after a while */
		while (!atomic_load(&run->stop))
			OP(self, { 4, -1, 0 }, { 5, -1, 0 });
		break;
	case 6:
		for (long it = 0; it < iters / 8; it++) {
			if (OP(self, { 4, 1, 0 }, { 5, 1, 0 }))
				fail("feeding 4 and 5 failed");
			/* and simple waiters that sit in the merged queue meanwhile */
			OP(self, { 4, -1, SV_IPC_NOWAIT });
			if (it % 16 == 0)
				OP(self, { 5, 0, 0 });
		}
		atomic_store(&run->stop, true);
		break;
	}
}

Test(engine_stress, simple_complex_switch)
{
	const int init[SWITCH_SEMS] = { 0 };
	struct run *run = run_new(7, SWITCH_SEMS, init);
	long applied, parked, timeouts, rolled, erange;
	long want[SWITCH_SEMS] = { 0 };
	long iters = ITERS(120000);

	run->iters = iters;
	run->wait_ms = 2;
	run_threads(run, switch_body);
	/* what the increments that were not paired add up to, computed independently */
	for (int w = 0; w < 2; w++)
		for (long it = 0; it < iters; it++)
			if (!(it % 64))
				want[it % 4]++;
	for (int w = 2; w < 4; w++)
		for (long it = 0; it < iters; it++)
			if (!(it % 64)) {
				want[it % 4] += 2;
				want[(it + w - 1) % 4] += 1;
			}
	struct fx_caller *root = fx_caller_new(fx_ns, 100, 0, 0);

	for (int i = 0; i < 4; i++)
		cr_assert_eq(fx_getval(root, run->id, i), want[i], "semaphore %d: %d, expected %ld",
			     i, fx_getval(root, run->id, i), want[i]);
	fx_caller_exit(root, NULL);
	check_replay(run, init, true);
	totals(run, &applied, &parked, &timeouts, &rolled, &erange);
	exit_workers(run);
	cr_log_info("switch: %ld applied, %ld parked, %ld timed out", applied, parked, timeouts);
	free(run);
}

/*
 * The same with only two workers, so that both always run at once on this two-core machine:
 * worker 0 does single-semaphore operations on semaphore 0 (the per-semaphore lock, while the
 * set is in simple mode); worker 1 does one two-semaphore operation on 0 and 1, then fifteen
 * single ones on 1. Each complex operation enters complex mode, and the single operations that
 * follow count the hysteresis down until the set is back in simple mode: the set switches
 * modes every cycle, with worker 0 inside its per-semaphore section at random moments.
 */
static void pair_body(struct worker *self)
{
	struct run *run = self->run;

	if (self->idx == 0) {
		for (long it = 0; it < run->iters * 16; it++) {
			if (OP(self, { 0, 1, 0 }))
				fail("increment of 0 failed");
			if (it % 1024 && OP(self, { 0, -1, SV_IPC_NOWAIT }))
				fail("decrement of 0: an update was lost");
		}
	} else {
		for (long it = 0; it < run->iters; it++) {
			if (OP(self, { 0, 2, 0 }, { 1, 1, 0 }))
				fail("complex increment failed");
			if (it % 1024 &&
			    OP(self, { 1, -1, SV_IPC_NOWAIT }, { 0, -2, SV_IPC_NOWAIT }))
				fail("complex decrement: an update was lost");
			for (int k = 0; k < 15; k++)
				if (OP(self, { 1, 1, 0 }) || OP(self, { 1, -1, SV_IPC_NOWAIT }))
					fail("simple pair on 1 lost an update");
		}
	}
}

Test(engine_stress, simple_complex_switch_two_workers)
{
	const int init[2] = { 0, 0 };
	struct run *run = run_new(2, 2, init);
	long iters = ITERS(250000), want0 = 0, want1 = 0;

	run->iters = iters;
	run_threads(run, pair_body);
	for (long it = 0; it < iters * 16; it++)
		want0 += !(it % 1024);
	for (long it = 0; it < iters; it++)
		if (!(it % 1024)) {
			want0 += 2;
			want1 += 1;
		}
	struct fx_caller *root = fx_caller_new(fx_ns, 100, 0, 0);

	cr_assert_eq(fx_getval(root, run->id, 0), want0, "semaphore 0: %d, expected %ld",
		     fx_getval(root, run->id, 0), want0);
	cr_assert_eq(fx_getval(root, run->id, 1), want1, "semaphore 1: %d, expected %ld",
		     fx_getval(root, run->id, 1), want1);
	fx_caller_exit(root, NULL);
	check_replay(run, init, true);
	exit_workers(run);
	free(run);
}

/*
 * While a complex operation stays parked, every simple decrement that waits sits in the set's
 * merged queue, and the set must stay in complex mode, so that the two independent token rings
 * below (workers 0-1 on semaphores 0 and 1, workers 2-3 on 3 and 4) never walk and change that
 * one queue at the same time under two different semaphore locks.
 */
static void two_rings_body(struct worker *self)
{
	struct run *run = self->run;
	uint16_t base = self->idx < 2 ? 0 : 3;
	uint16_t me = (uint16_t)(base + self->idx % 2),
		 next = (uint16_t)(base + (self->idx + 1) % 2);

	for (long it = 0; it < run->iters; it++) {
		while (OP(self, { me, -1, 0 }))
			;
		if (OP(self, { next, 1, 0 }))
			fail("give failed");
	}
}

Test(engine_stress, merged_queue_two_rings)
{
	const int init[5] = { 1, 0, 0, 1, 0 };
	struct run *run = run_new(4, 5, init);
	struct fx_caller *blocker = fx_caller_new(fx_ns, 99, 0, 0);
	long applied, parked, timeouts, rolled, erange;
	struct sv_waiter *w;

	run->iters = ITERS(80000);
	w = fx_park(blocker, run->id, NULL, NULL, SOPS({ 2, -1, 0 }, { 2, -1, 0 }));
	cr_assert_not_null(w);
	run_threads(run, two_rings_body);
	cr_assert_eq(fx_getncnt(blocker, run->id, 2), 1, "the complex waiter is still parked");
	cr_assert_eq(sv_waiter_cancel(w), 0);
	sv_waiter_free(w);
	check_replay(run, init, true);
	totals(run, &applied, &parked, &timeouts, &rolled, &erange);
	cr_assert_gt(parked, run->iters, "hand-overs should go through parked waiters");
	fx_caller_exit(blocker, NULL);
	exit_workers(run);
	cr_log_info("two rings: %ld parked, %ld timed out", parked, timeouts);
	free(run);
}
