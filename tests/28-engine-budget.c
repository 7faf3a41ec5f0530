/* SPDX-License-Identifier: MIT */
/*
 * Budgets (budget.c): semaphores and sets bounded across every namespace sharing a budget, in
 * all and per creating uid; ENOSPC exactly past a bound, and the charge given back by IPC_RMID
 * and by the namespace's end.
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
