/* SPDX-License-Identifier: MIT */
/*
 * The engine's calling rules, checked in the debug build (make DEBUG=1): an internal function
 * called without the lock or the RCU section its comment asks for aborts there. In every other
 * build the checks are compiled out, and these calls (harmless in a single thread) return
 * normally: each test expects SIGABRT in the debug build and a normal exit otherwise.
 */
#include <criterion/criterion.h>
#include <signal.h>

#include "engine/engine.h"
#include "tests/lib/fixture.h"

#ifdef SV_DEBUG
#define BROKEN .signal = SIGABRT
#else
#define BROKEN .signal = 0
#endif

static struct fx_caller *root;
static int id;

static void setup(void)
{
	fx_setup();
	root = fx_caller_new(fx_ns, 100, 0, 0);
	id = (int)sv_semget(&root->c, SV_IPC_PRIVATE, 2, 0600);
	cr_assert_geq(id, 0);
}

static void teardown(void)
{
	fx_caller_exit(root, NULL);
	fx_teardown();
}

TestSuite(engine_rules, .init = setup, .fini = teardown);

static const struct sv_sembuf sem0 = { .sem_num = 0, .sem_op = 1 };
static const struct sv_sembuf sem1 = { .sem_num = 1, .sem_op = 1 };

Test(engine_rules, kept_rules_pass)
{
	struct sv_wakeq wq;
	struct sv_set *set;
	int locknum;

	sv_wakeq_init(&wq);
	rcu_read_lock();
	set = sv_set_lookup(fx_ns, id);
	cr_assert_not_null(set);
	cr_assert_eq(sv_ipcperms(&root->c, set, 0200), 0);
	locknum = sv_sem_lock(set, &sem0, 1);
	cr_assert_eq(locknum, 0, "a fresh set is in simple mode");
	sv_do_smart_update(set, &sem0, 1, false, &wq);
	sv_sem_unlock(set, locknum);
	sv_sem_lock(set, NULL, 0);
	sv_do_smart_update(set, NULL, 0, false, &wq);
	cr_expect_eq(sv_count_semcnt(set, 1, false), 0);
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
	rcu_read_unlock();
	cr_expect(sv_wakeq_empty(&wq));
}

Test(engine_rules, lookup_outside_rcu, BROKEN)
{
	cr_expect_not_null(sv_set_lookup(fx_ns, id));
}

Test(engine_rules, update_without_any_lock, BROKEN)
{
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	rcu_read_lock();
	sv_do_smart_update(sv_set_lookup(fx_ns, id), NULL, 0, false, &wq);
	rcu_read_unlock();
}

Test(engine_rules, update_of_a_semaphore_not_locked, BROKEN)
{
	struct sv_wakeq wq;
	struct sv_set *set;
	int locknum;

	sv_wakeq_init(&wq);
	rcu_read_lock();
	set = sv_set_lookup(fx_ns, id);
	locknum = sv_sem_lock(set, &sem0, 1);
	sv_do_smart_update(set, &sem1, 1, false, &wq); /* semaphore 1 is not covered */
	sv_sem_unlock(set, locknum);
	rcu_read_unlock();
}

Test(engine_rules, count_under_a_semaphore_lock_only, BROKEN)
{
	struct sv_set *set;
	int locknum;

	rcu_read_lock();
	set = sv_set_lookup(fx_ns, id);
	locknum = sv_sem_lock(set, &sem0, 1);
	cr_expect_eq(sv_count_semcnt(set, 0, false), 0); /* the set's lists need the set lock */
	sv_sem_unlock(set, locknum);
	rcu_read_unlock();
}

Test(engine_rules, permission_check_under_the_set_lock, BROKEN)
{
	struct sv_set *set;

	rcu_read_lock();
	set = sv_set_lookup(fx_ns, id);
	sv_sem_lock(set, NULL, 0);
	/* cred_fill may read /proc: never under a set lock */
	cr_expect_eq(sv_ipcperms(&root->c, set, 0400), 0);
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
	rcu_read_unlock();
}

Test(engine_rules, undo_lookup_outside_rcu, BROKEN)
{
	cr_expect_null(sv_undo_lookup(&root->c, id));
}
