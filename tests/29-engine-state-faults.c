/* SPDX-License-Identifier: MIT */
/*
 * An import that runs out of memory (state.c): each allocation fails in turn, built with fault
 * injection (util/fault.h). Every failure must return ENOMEM and leave the namespace or process
 * as it was, with nothing charged to the budget, so that the same import then succeeds whole.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "tests/lib/fixture.h"
#include "util/fault.h"

#define U 1000

static struct sv_budget *budget;
static struct fx_caller *root, *user;

static void setup(void)
{
	fx_setup();
	budget = sv_budget_new(&(struct sv_budget_limits){ 0 });
	cr_assert_not_null(budget);
	root = fx_caller_new(fx_ns, 100, 0, 0);
	user = fx_caller_new(fx_ns, 200, U, U);
}

static void teardown(void)
{
	sv_fault_arm(SV_FAULT_ALLOC, 0, 0);
	fx_caller_exit(root, NULL);
	fx_caller_exit(user, NULL);
	fx_teardown();
	sv_budget_put(budget);
}

TestSuite(engine_state_faults, .init = setup, .fini = teardown, .timeout = 60);

static int mkset(struct fx_caller *fc, int32_t key, int nsems)
{
	long id = sv_semget(&fc->c, key, nsems, SV_IPC_CREAT | 0666);

	cr_assert_geq(id, 0);
	return (int)id;
}

static long used(enum sv_budget_kind kind)
{
	struct sv_budget_info bi;

	sv_budget_info(budget, &bi);
	return bi.used[kind];
}

/* fx_ns's sets and user's undo entries, exported (fx_ns has no budget; the importers do). */
static void export_all(void **ns_buf, size_t *ns_len, void **p_buf, size_t *p_len)
{
	int a = mkset(root, 0x5ee1, 3), b = mkset(user, SV_IPC_PRIVATE, 40);

	mkset(user, 0x5ee2, 1);
	cr_assert_eq(fx_semop(user, a, NULL, NULL, SOPS({ 0, 2, SV_SEM_UNDO })), 0);
	cr_assert_eq(fx_semop(user, b, NULL, NULL, SOPS({ 39, 5, SV_SEM_UNDO })), 0);
	cr_assert_eq(sv_ns_export(fx_ns, ns_buf, ns_len), 0);
	cr_assert_eq(sv_proc_export(user->c.proc, p_buf, p_len), 0);
}

Test(engine_state_faults, export_fails_whole)
{
	void *buf = NULL;
	size_t len;

	sv_fault_arm(SV_FAULT_ALLOC, 0, 1);
	cr_assert_eq(sv_ns_export(fx_ns, &buf, &len), -ENOMEM);
	sv_fault_arm(SV_FAULT_ALLOC, 0, 1);
	cr_assert_eq(sv_proc_export(user->c.proc, &buf, &len), -ENOMEM);
	sv_fault_arm(SV_FAULT_ALLOC, 0, 0);
}

Test(engine_state_faults, ns_import_rolls_back)
{
	void *ns_buf, *p_buf;
	size_t ns_len, p_len;
	int skip, failed = 0;

	export_all(&ns_buf, &ns_len, &p_buf, &p_len);
	for (skip = 0;; skip++) {
		struct sv_limits def;
		struct sv_ns_info info;
		struct sv_ns *ns;
		int err, hits;

		sv_limits_default(&def);
		ns = sv_ns_new_budget(&def, budget);
		cr_assert_not_null(ns);
		hits = sv_fault_hits(SV_FAULT_ALLOC);
		sv_fault_arm(SV_FAULT_ALLOC, skip, 1);
		err = sv_ns_import(ns, ns_buf, ns_len);
		sv_fault_arm(SV_FAULT_ALLOC, 0, 0);
		if (sv_fault_hits(SV_FAULT_ALLOC) == hits) {
			cr_assert_eq(err, 0, "no allocation failed, yet %d", err);
			sv_ns_put(ns);
			break;
		}
		failed++;
		cr_assert_eq(err, -ENOMEM, "allocation %d failed: %d", skip, err);
		sv_ns_info(ns, &info);
		cr_assert_eq(info.nsets, 0);
		cr_assert_eq(info.nsems, 0);
		cr_assert_eq(sv_ns_next_id(ns), -1);
		cr_assert_eq(used(SV_BUDGET_SETS), 0, "charged though refused");
		cr_assert_eq(used(SV_BUDGET_SEMS), 0);
		/* nothing left behind is in the way: the same import now succeeds */
		cr_assert_eq(sv_ns_import(ns, ns_buf, ns_len), 0);
		sv_ns_info(ns, &info);
		cr_assert_eq(info.nsets, 3);
		sv_ns_put(ns);
		cr_assert_eq(used(SV_BUDGET_SETS), 0);
	}
	cr_assert_geq(failed, 5, "every allocation was failed once (%d)", failed);
	free(ns_buf);
	free(p_buf);
}

Test(engine_state_faults, proc_import_rolls_back)
{
	struct sv_limits def;
	struct sv_ns *ns;
	void *ns_buf, *p_buf;
	size_t ns_len, p_len;
	long entries;
	int skip, failed = 0;

	export_all(&ns_buf, &ns_len, &p_buf, &p_len);
	sv_limits_default(&def);
	ns = sv_ns_new_budget(&def, budget);
	cr_assert_not_null(ns);
	cr_assert_eq(sv_ns_import(ns, ns_buf, ns_len), 0);
	entries = sv_undo_entries();
	for (skip = 0;; skip++) {
		struct fx_caller *p = fx_caller_new(ns, 200, U, U);
		int err, hits = sv_fault_hits(SV_FAULT_ALLOC);

		sv_fault_arm(SV_FAULT_ALLOC, skip, 1);
		err = sv_proc_import(p->c.proc, p_buf, p_len);
		sv_fault_arm(SV_FAULT_ALLOC, 0, 0);
		if (sv_fault_hits(SV_FAULT_ALLOC) == hits) {
			cr_assert_eq(err, 0);
			cr_assert_eq(sv_undo_entries(), entries + 2);
			cr_assert_eq(sv_budget_uid_count(budget, U, SV_BUDGET_UNDOS), 1 + 2);
			fx_caller_exit(p, NULL);
			break;
		}
		failed++;
		cr_assert_eq(err, -ENOMEM, "allocation %d failed: %d", skip, err);
		cr_assert_eq(sv_undo_entries(), entries);
		cr_assert_eq(used(SV_BUDGET_UNDOS), 0, "charged though refused");
		cr_assert_eq(sv_proc_import(p->c.proc, p_buf, p_len), 0);
		cr_assert_eq(sv_undo_entries(), entries + 2);
		fx_caller_exit(p, NULL);
	}
	cr_assert_geq(failed, 4);
	sv_ns_put(ns);
	free(ns_buf);
	free(p_buf);
}
