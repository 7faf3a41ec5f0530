/* SPDX-License-Identifier: MIT */
/*
 * Budgets (budget.c): semaphores and sets bounded across every namespace sharing a budget, in
 * all and per creating uid; ENOSPC exactly past a bound, and the charge given back by IPC_RMID
 * and by the namespace's end. Undo entries and parked calls: ENOMEM exactly past a bound, and
 * the count back to exactly zero whichever way each ended (completed, timed out or cancelled,
 * rolled back, orphaned by its process's exit, IPC_RMID, the namespace's end). Namespaces:
 * the charge the notify layer's registry makes, ENOSPC past a bound.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "tests/lib/fixture.h"

#define A 1000 /* two tenants */
#define B 1001

static struct sv_budget *budget;
static struct sv_ns *ns1, *ns2;
static struct fx_caller *a1, *a2, *b1, *b2; /* tenant, namespace */

static void start(struct sv_budget_limits lim)
{
	struct sv_limits def;

	sv_thread_register();
	sv_limits_default(&def);
	budget = sv_budget_new(&lim);
	cr_assert_not_null(budget);
	ns1 = sv_ns_new_budget(&def, budget);
	ns2 = sv_ns_new_budget(&def, budget);
	cr_assert(ns1 && ns2);
	a1 = fx_caller_new(ns1, 101, A, A);
	a2 = fx_caller_new(ns2, 102, A, A);
	b1 = fx_caller_new(ns1, 103, B, B);
	b2 = fx_caller_new(ns2, 104, B, B);
}

static void stop(void)
{
	fx_caller_exit(a1, NULL);
	fx_caller_exit(b1, NULL);
	if (ns1)
		sv_ns_put(ns1);
	if (ns2) {
		fx_caller_exit(a2, NULL);
		fx_caller_exit(b2, NULL);
		sv_ns_put(ns2);
	}
	sv_budget_put(budget);
	sv_thread_unregister();
}

TestSuite(engine_budget, .timeout = 30);

static long make(struct fx_caller *fc, int nsems)
{
	return sv_semget(&fc->c, SV_IPC_PRIVATE, nsems, 0600);
}

static long rmid(struct fx_caller *fc, long id)
{
	return fx_semctl(fc, (int)id, 0, SV_IPC_RMID, 0, NULL);
}

static struct sv_budget_info info(void)
{
	struct sv_budget_info bi;

	sv_budget_info(budget, &bi);
	return bi;
}

/* One uid's semaphores are counted over both namespaces; another uid has its own. */
Test(engine_budget, per_uid_across_namespaces)
{
	long x, y;

	start((struct sv_budget_limits){ .sems_per_uid = 10 });
	cr_assert_geq(make(a1, 6), 0);
	y = make(a2, 4);
	cr_assert_geq(y, 0, "exactly at the bound is allowed");
	cr_assert_eq(make(a1, 1), -ENOSPC, "one past it, in the first namespace");
	cr_assert_eq(make(a2, 1), -ENOSPC, "one past it, in the second namespace");
	cr_assert_eq(sv_budget_uid_sems(budget, A), 10);
	cr_assert_eq(info().refused, 2);

	/* the other tenant is not affected */
	cr_assert_geq(make(b2, 10), 0);
	cr_assert_eq(make(b1, 1), -ENOSPC);

	/* IPC_RMID gives exactly that set's semaphores back */
	cr_assert_eq(rmid(a2, y), 0);
	cr_assert_eq(sv_budget_uid_sems(budget, A), 6);
	cr_assert_eq(make(a1, 5), -ENOSPC);
	x = make(a1, 4);
	cr_assert_geq(x, 0, "the removed set's budget is back");
	cr_assert_eq(make(a2, 1), -ENOSPC);
	cr_assert_eq(info().refused, 5);
	stop();
}

/* The daemon-wide bound counts every uid in every namespace; a namespace's end gives back. */
Test(engine_budget, daemon_wide_and_namespace_end)
{
	start((struct sv_budget_limits){ .sems = 20 });
	cr_assert_geq(make(a1, 12), 0);
	cr_assert_geq(make(b2, 5), 0);
	cr_assert_geq(make(a2, 3), 0, "exactly at the bound");
	cr_assert_eq(make(b1, 1), -ENOSPC);
	cr_assert_eq(make(a2, 1), -ENOSPC);
	cr_assert_eq(info().sems, 20);
	cr_assert_eq(info().sets, 3);

	/* the second namespace ends: its 8 semaphores (both tenants') come back */
	fx_caller_exit(a2, NULL);
	fx_caller_exit(b2, NULL);
	sv_ns_put(ns2);
	ns2 = NULL;
	cr_assert_eq(info().sems, 12);
	cr_assert_eq(info().sets, 1);
	cr_assert_eq(sv_budget_uid_sems(budget, B), 0);
	cr_assert_eq(make(b1, 9), -ENOSPC);
	cr_assert_geq(make(b1, 8), 0, "what the ended namespace held is back");
	cr_assert_eq(make(a1, 1), -ENOSPC);
	stop();
}

/* sv_ns_shutdown (the supervisor ending a namespace while others still hold it) gives back too */
Test(engine_budget, shutdown_gives_back)
{
	struct sv_wakeq wq;

	start((struct sv_budget_limits){ .sems_per_uid = 4, .sets = 3 });
	cr_assert_geq(make(a2, 2), 0);
	cr_assert_geq(make(a2, 2), 0);
	cr_assert_geq(make(b1, 1), 0);
	cr_assert_eq(make(b2, 1), -ENOSPC, "three sets in all");
	cr_assert_eq(make(a1, 1), -ENOSPC);
	sv_wakeq_init(&wq);
	sv_ns_shutdown(ns2, &wq);
	cr_assert(sv_wakeq_empty(&wq));
	cr_assert_eq(info().sets, 1);
	cr_assert_geq(make(a1, 4), 0);
	cr_assert_geq(make(b2, 1), 0, "the namespace stays usable");
	cr_assert_eq(make(b2, 1), -ENOSPC);
	stop();
}

/* Sets per uid; opening an existing set charges nothing; the namespace's limits come first. */
Test(engine_budget, sets_and_keys)
{
	struct sv_limits lim;

	start((struct sv_budget_limits){ .sets_per_uid = 2 });
	cr_assert_geq(sv_semget(&a1->c, 0x77, 1, SV_IPC_CREAT | 0666), 0);
	cr_assert_geq(make(a2, 1), 0);
	cr_assert_eq(make(a1, 1), -ENOSPC);
	cr_assert_geq(sv_semget(&a1->c, 0x77, 1, SV_IPC_CREAT | 0666), 0, "found, not created");
	cr_assert_geq(sv_semget(&b1->c, 0x77, 1, 0666), 0);
	cr_assert_eq(sv_budget_uid_sems(budget, B), 0, "opening is not creating");
	cr_assert_eq(info().refused, 1);

	/* SEMMNS says no before the budget is asked: not a budget refusal */
	sv_ns_limits(ns2, &lim);
	lim.semmns = 1;
	cr_assert_eq(sv_ns_set_limits(ns2, &lim), 0);
	cr_assert_eq(make(b2, 2), -ENOSPC);
	cr_assert_eq(info().refused, 1);
	stop();
}

/* New maxima apply to creations only; a namespace without a budget is never charged. */
Test(engine_budget, new_limits_and_no_budget)
{
	struct fx_caller *free_caller;
	struct sv_ns *free_ns;
	struct sv_limits def;
	long id;

	start((struct sv_budget_limits){ 0 });
	id = make(a1, 100);
	cr_assert_geq(id, 0, "0 is no bound");
	sv_budget_set_limits(budget, &(struct sv_budget_limits){ .sems_per_uid = 50 });
	cr_assert_eq(fx_getval(a1, (int)id, 99), 0, "existing sets stay");
	cr_assert_eq(make(a2, 1), -ENOSPC);
	cr_assert_eq(rmid(a1, id), 0);
	cr_assert_geq(make(a2, 50), 0);

	sv_limits_default(&def);
	free_ns = sv_ns_new(&def);
	free_caller = fx_caller_new(free_ns, 105, A, A);
	cr_assert_geq(make(free_caller, 1000), 0);
	cr_assert_eq(sv_budget_uid_sems(budget, A), 50);
	fx_caller_exit(free_caller, NULL);
	sv_ns_put(free_ns);
	stop();
}

static long used(enum sv_budget_kind k)
{
	return info().used[k];
}

static uint64_t refused(enum sv_budget_kind k)
{
	return info().refused_kind[k];
}

static long uid_n(uint32_t uid, enum sv_budget_kind k)
{
	return sv_budget_uid_count(budget, uid, k);
}

/* a set of nsems at 0 that anyone may use */
static int open_set(struct fx_caller *fc, int nsems)
{
	long id = sv_semget(&fc->c, SV_IPC_PRIVATE, nsems, 0666);

	cr_assert_geq(id, 0);
	return (int)id;
}

static long post(struct fx_caller *fc, int id, int semnum, struct sv_wakeq *wq)
{
	struct sv_sembuf v = { (uint16_t)semnum, 1, 0 };

	return fx_semop(fc, id, NULL, wq, 1, &v);
}

static const struct sv_sembuf P0 = { 0, -1, 0 };

/*
 * Parked calls: per uid and in all, ENOMEM exactly past the bound (and nothing parked then), and
 * the charge back whichever way a waiter ends. The charge lasts until the waiter is freed.
 */
Test(engine_budget, waiters_every_end)
{
	struct fx_caller *x, *y;
	struct sv_waiter *w1, *w2, *w3, *w;
	struct sv_sembuf two[2] = { { 0, -1, 0 }, { 1, -1, 0 } };
	struct sv_wakeq wq;
	int id, id2, res[4];
	long ret;

	start((struct sv_budget_limits){ .waiters = 3, .waiters_per_uid = 2 });
	id = open_set(a1, 2);
	sv_wakeq_init(&wq);

	w1 = fx_park(a1, id, NULL, NULL, 1, &P0);
	x = fx_caller_new(ns1, 201, A, A);
	w2 = fx_park(x, id, NULL, NULL, 2, two); /* a complex waiter counts the same */
	cr_assert(w1 && w2);
	cr_assert_null(fx_park(a1, id, NULL, &ret, 1, &P0));
	cr_assert_eq(ret, -ENOMEM, "A's third parked call");
	cr_assert_eq(fx_getncnt(a1, id, 0), 2, "the refused call is not parked");
	cr_assert_eq(uid_n(A, SV_BUDGET_WAITERS), 2);
	w3 = fx_park(b1, id, NULL, NULL, 1, &P0);
	cr_assert_not_null(w3, "another uid still parks");
	cr_assert_null(fx_park(b2, open_set(b2, 1), NULL, &ret, 1, &P0));
	cr_assert_eq(ret, -ENOMEM, "past the daemon-wide bound (in another namespace, too)");
	cr_assert_eq(used(SV_BUDGET_WAITERS), 3);
	cr_assert_eq(refused(SV_BUDGET_WAITERS), 2);
	cr_assert_eq(info().refused, 2, "the total counts every kind");

	/* not parking is not charged: IPC_NOWAIT, a zero timeout, an operation that proceeds */
	two[0].sem_flg = SV_IPC_NOWAIT;
	cr_assert_eq(fx_semop(b1, id, NULL, NULL, 2, two), -EAGAIN);
	cr_assert_eq(fx_semtimedop(b1, id, &(struct timespec){ 0, 0 }, NULL, NULL, 1, &P0),
		     -EAGAIN);
	cr_assert_eq(refused(SV_BUDGET_WAITERS), 2);

	/* completed: charged until the deliverer frees it */
	cr_assert_eq(post(b1, id, 0, &wq), 0);
	cr_assert_eq(fx_take(&wq, &w, 1), 1);
	cr_assert_eq(w, w1);
	cr_assert_eq(used(SV_BUDGET_WAITERS), 3, "done, not yet answered");
	sv_waiter_free(w);
	cr_assert_eq(used(SV_BUDGET_WAITERS), 2);
	cr_assert_eq(uid_n(A, SV_BUDGET_WAITERS), 1);

	/* timed out or interrupted (the caller cancels it) */
	cr_assert_eq(sv_waiter_cancel(w3), 0);
	sv_waiter_free(w3);
	cr_assert_eq(uid_n(B, SV_BUDGET_WAITERS), 0);

	/* completed, delivery failed, rolled back: credited once, when freed */
	cr_assert_eq(post(b1, id, 0, &wq), 0);
	cr_assert_eq(post(b1, id, 1, &wq), 0);
	cr_assert_eq(fx_take(&wq, &w, 1), 1);
	cr_assert_eq(w, w2);
	cr_assert_eq(sv_waiter_rollback(w, &wq), 0);
	cr_assert(sv_wakeq_empty(&wq));
	sv_waiter_free(w);
	cr_assert_eq(used(SV_BUDGET_WAITERS), 0);
	cr_assert_eq(
	    fx_semctl(a1, id, 0, SV_SETALL, (uint64_t)(uintptr_t)(uint16_t[]){ 0, 0 }, NULL), 0);

	/* orphaned: its process exits; the next wake-up pass drops it (EINTR) */
	y = fx_caller_new(ns1, 202, A, A);
	cr_assert_not_null(fx_park(y, id, NULL, NULL, 1, &P0));
	fx_caller_exit(y, NULL);
	cr_assert_eq(used(SV_BUDGET_WAITERS), 1, "still allocated");
	cr_assert_eq(post(b1, id, 0, &wq), 0);
	cr_assert_eq(fx_drain(&wq, res, NULL, 4), 1);
	cr_assert_eq(res[0], -EINTR);
	cr_assert_eq(used(SV_BUDGET_WAITERS), 0);

	/* IPC_RMID */
	cr_assert_eq(fx_semctl(a1, id, 0, SV_SETVAL, 0, NULL), 0);
	cr_assert_not_null(fx_park(a1, id, NULL, NULL, 1, &P0));
	cr_assert_not_null(fx_park(b1, id, NULL, NULL, 1, &P0));
	cr_assert_eq(fx_semctl(a1, id, 0, SV_IPC_RMID, 0, &wq), 0);
	cr_assert_eq(fx_drain(&wq, res, NULL, 4), 2);
	cr_assert_eq(res[0], -EIDRM);
	cr_assert_eq(used(SV_BUDGET_WAITERS), 0);

	/* the namespace's end */
	id2 = open_set(a2, 1);
	cr_assert_not_null(fx_park(a2, id2, NULL, NULL, 1, &P0));
	cr_assert_not_null(fx_park(b2, id2, NULL, NULL, 1, &P0));
	cr_assert_eq(used(SV_BUDGET_WAITERS), 2);
	sv_ns_shutdown(ns2, &wq);
	cr_assert_eq(fx_drain(&wq, res, NULL, 4), 2);
	cr_assert_eq(res[1], -EIDRM);

	cr_assert_eq(used(SV_BUDGET_WAITERS), 0);
	cr_assert_eq(uid_n(A, SV_BUDGET_WAITERS), 0);
	cr_assert_eq(uid_n(B, SV_BUDGET_WAITERS), 0);
	fx_caller_exit(x, NULL);
	stop();
}

static long undo_op(struct fx_caller *fc, int id)
{
	struct sv_sembuf v = { 0, 1, SV_SEM_UNDO };

	return fx_semop(fc, id, NULL, NULL, 1, &v);
}

/*
 * Undo entries: one per process and set, per uid and in all, ENOMEM exactly past the bound
 * (nothing applied then), an entry of a big set counting once per 32 semaphores; the charge back
 * at IPC_RMID, at the process's exit and at the namespace's end.
 */
Test(engine_budget, undos_every_end)
{
	struct fx_caller *x, *t;
	struct sv_wakeq wq;
	int s1, s2, big, s4;

	start((struct sv_budget_limits){ .undos = 6, .undos_per_uid = 4 });
	sv_wakeq_init(&wq);
	s1 = open_set(a1, 1);
	s2 = open_set(a1, 1);
	big = open_set(a1, 33); /* two units */
	s4 = open_set(a1, 1);

	cr_assert_eq(undo_op(a1, s1), 0);
	cr_assert_eq(undo_op(a1, s1), 0, "the same entry again");
	t = fx_caller_thread(a1);
	cr_assert_eq(undo_op(t, s1), 0, "another thread shares the process's entry");
	cr_assert_eq(uid_n(A, SV_BUDGET_UNDOS), 1);
	cr_assert_eq(undo_op(a1, big), 0);
	cr_assert_eq(uid_n(A, SV_BUDGET_UNDOS), 3, "33 semaphores count twice");
	cr_assert_eq(undo_op(a1, s2), 0);
	cr_assert_eq(undo_op(a1, s4), -ENOMEM, "past A's bound");
	cr_assert_eq(fx_getval(a1, s4, 0), 0, "nothing applied");
	cr_assert_eq(fx_semop(a1, s4, NULL, NULL, 1, &(struct sv_sembuf){ 0, 1, 0 }), 0,
		     "without SEM_UNDO it proceeds");
	x = fx_caller_new(ns1, 301, A, A);
	cr_assert_eq(undo_op(x, s4), -ENOMEM, "A's bound counts every process of A");
	cr_assert_eq(undo_op(b1, s4), 0, "another uid still makes entries");
	cr_assert_eq(undo_op(b2, open_set(b2, 1)), 0);
	cr_assert_eq(undo_op(b1, s1), -ENOMEM, "past the daemon-wide bound");
	cr_assert_eq(used(SV_BUDGET_UNDOS), 6);
	cr_assert_eq(refused(SV_BUDGET_UNDOS), 3);

	/* IPC_RMID of a set drops every process's entry for it */
	cr_assert_eq(fx_semctl(a1, s4, 0, SV_IPC_RMID, 0, NULL), 0);
	cr_assert_eq(uid_n(B, SV_BUDGET_UNDOS), 1);
	cr_assert_eq(fx_semctl(a1, big, 0, SV_IPC_RMID, 0, NULL), 0);
	cr_assert_eq(uid_n(A, SV_BUDGET_UNDOS), 2);
	cr_assert_eq(undo_op(x, s1), 0);
	cr_assert_eq(undo_op(x, s2), 0);
	cr_assert_eq(undo_op(x, open_set(x, 1)), -ENOMEM);

	/* the process's exit applies and drops its entries */
	sv_proc_put(t->c.proc); /* a thread ends: the process lives on */
	free(t);
	cr_assert_eq(uid_n(A, SV_BUDGET_UNDOS), 4);
	fx_caller_exit(a1, &wq);
	a1 = NULL;
	cr_assert(sv_wakeq_empty(&wq));
	cr_assert_eq(uid_n(A, SV_BUDGET_UNDOS), 2);
	cr_assert_eq(fx_getval(x, s1, 0), 1, "the three +1 of a1's threads went back, x's stays");
	fx_caller_exit(x, NULL);
	cr_assert_eq(uid_n(A, SV_BUDGET_UNDOS), 0);

	/* the namespace's end */
	cr_assert_eq(uid_n(B, SV_BUDGET_UNDOS), 1);
	fx_caller_exit(a2, NULL);
	fx_caller_exit(b2, NULL);
	sv_ns_put(ns2);
	ns2 = NULL;
	cr_assert_eq(uid_n(B, SV_BUDGET_UNDOS), 0);
	cr_assert_eq(used(SV_BUDGET_UNDOS), 0);
	fx_caller_exit(b1, NULL);
	b1 = NULL;
	sv_ns_put(ns1);
	ns1 = NULL;
	cr_assert_eq(used(SV_BUDGET_SEMS), 0);
	cr_assert_eq(used(SV_BUDGET_SETS), 0);
	sv_budget_put(budget);
	sv_thread_unregister();
}

/* Namespaces, as the registry charges them: ENOSPC past a bound, back when credited. */
Test(engine_budget, namespaces)
{
	start((struct sv_budget_limits){ .namespaces = 3, .namespaces_per_uid = 2 });
	cr_assert_eq(sv_budget_charge_ns(budget, A), 0);
	cr_assert_eq(sv_budget_charge_ns(budget, A), 0);
	cr_assert_eq(sv_budget_charge_ns(budget, A), -ENOSPC);
	cr_assert_eq(sv_budget_charge_ns(budget, B), 0);
	cr_assert_eq(sv_budget_charge_ns(budget, 0), -ENOSPC, "in all");
	cr_assert_eq(refused(SV_BUDGET_NAMESPACES), 2);
	sv_budget_credit_ns(budget, A);
	cr_assert_eq(sv_budget_charge_ns(budget, 0), 0);
	sv_budget_credit_ns(budget, 0);
	sv_budget_credit_ns(budget, A);
	sv_budget_credit_ns(budget, B);
	cr_assert_eq(used(SV_BUDGET_NAMESPACES), 0);
	cr_assert_eq(info().limits.namespaces_per_uid, 2);
	stop();
}
