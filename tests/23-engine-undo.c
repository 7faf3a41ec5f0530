/* SPDX-License-Identifier: MIT */
/*
 * SEM_UNDO and process exit (SPEC A5), and the engine's contract for tickets that are not
 * delivered normally (sem.h): sv_waiter_cancel() for a parked waiter, sv_waiter_rollback() for a
 * completed one whose answer could not be delivered. Both must leave values, semadj, sempid,
 * GETNCNT and GETZCNT as if the operation never ran, and a rollback must hand the restored units
 * to whoever else waits for them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/lib/fixture.h"

/* Exit stamps otime with time(NULL): this program's clock runs ahead by skew seconds. */
static int64_t skew;

time_t time(time_t *t)
{
	struct timespec ts;
	time_t now;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	now = (time_t)(ts.tv_sec + skew);
	if (t)
		*t = now;
	return now;
}

static struct fx_caller *root; /* pid 100, uid 0 */

static void setup(void)
{
	fx_setup();
	root = fx_caller_new(fx_ns, 100, 0, 0);
}

static void teardown(void)
{
	fx_caller_exit(root, NULL);
	fx_teardown();
}

TestSuite(engine_undo, .init = setup, .fini = teardown, .timeout = 30);

static struct fx_caller *proc(int32_t pid)
{
	return fx_caller_new(fx_ns, pid, 0, 0);
}

static int mkset(int nsems)
{
	long id = sv_semget(&root->c, SV_IPC_PRIVATE, nsems, 0600);

	cr_assert_geq(id, 0, "semget: %ld", id);
	return (int)id;
}

static void setval(int id, int num, int val)
{
	cr_assert_eq(fx_semctl(root, id, num, SV_SETVAL, (uint64_t)val, NULL), 0);
}

static void expect_vals(int id, int n, const int *want)
{
	for (int i = 0; i < n; i++) {
		int v = fx_getval(root, id, i);

		cr_assert_eq(v, want[i], "semaphore %d: %d, expected %d", i, v, want[i]);
	}
}

#define EXPECT_VALS(id, ...)                                                                       \
	expect_vals((id), (int)(sizeof((int[]){ __VA_ARGS__ }) / sizeof(int)),                     \
		    (int[]){ __VA_ARGS__ })

/* Run one operation (one to four sops inline) that must succeed at once. */
#define OK(fc, id, ...)                                                                            \
	cr_assert_eq(fx_semop((fc), (id), NULL, NULL, SOPS(__VA_ARGS__)), 0, "operation failed")

static struct sv_waiter *park(struct fx_caller *fc, int id, intptr_t cookie, unsigned int nsops,
			      const struct sv_sembuf *sops)
{
	long r = 0;
	struct sv_waiter *w = fx_park(fc, id, (void *)cookie, &r, nsops, sops);

	cr_assert_not_null(w, "operation %ld did not park: %ld", (long)cookie, r);
	return w;
}

#define PARK(fc, id, cookie, ...) park((fc), (id), (cookie), SOPS(__VA_ARGS__))

/* One operation whose completions are taken off its wake queue (not freed): how many. */
static int op_take(struct fx_caller *fc, int id, struct sv_waiter **w, int cap, unsigned int nsops,
		   const struct sv_sembuf *sops)
{
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semop(fc, id, NULL, &wq, nsops, sops), 0);
	return fx_take(&wq, w, cap);
}

/* A process goes away: sv_proc_exit() (its completions returned), then its caller is freed. */
static int exit_take(struct fx_caller *fc, struct sv_waiter **w, int cap)
{
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	fx_caller_exit(fc, &wq);
	return fx_take(&wq, w, cap);
}

static int64_t otime(int id)
{
	struct fx_stat st;

	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	return st.otime;
}

/* ---- SEM_UNDO ---- */

/* A5.1: threads of one process share one semadj per semaphore; another process has its own. */
Test(engine_undo, semadj_shared_by_threads_only)
{
	struct fx_caller *t1 = proc(1000), *t2 = fx_caller_thread(t1), *q = proc(2000);
	int id = mkset(1);

	OK(t1, id, { 0, 32767, SV_SEM_UNDO }); /* the process's semadj: -32767 */
	OK(root, id, { 0, -32767, 0 });
	OK(t2, id, { 0, 1, SV_SEM_UNDO }); /* -32768: still in range */
	OK(root, id, { 0, -1, 0 });
	cr_assert_eq(fx_semop(t2, id, NULL, NULL, SOPS({ 0, 1, SV_SEM_UNDO })), -ERANGE,
		     "thread 2 must see thread 1's semadj: -32769 is out of range");
	cr_assert_eq(fx_semop(t1, id, NULL, NULL, SOPS({ 0, 1, SV_SEM_UNDO })), -ERANGE);
	OK(q, id, { 0, 1, SV_SEM_UNDO }); /* another process: its own semadj, -1 */
	EXPECT_VALS(id, 1);

	/* a thread that ends (not the process) applies nothing */
	sv_proc_put(t2->c.proc);
	free(t2);
	EXPECT_VALS(id, 1);
	/* q's exit applies q's semadj only */
	cr_assert_eq(exit_take(q, NULL, 0), 0);
	EXPECT_VALS(id, 0);
	OK(root, id, { 0, 5, 0 });
	cr_assert_eq(exit_take(t1, NULL, 0), 0);
	EXPECT_VALS(id, 0); /* 5 - 32768, clamped */
}

/* A5.3: exit adds semadj, clamped to [0, 32767], sets sempid where semadj was not 0, and otime. */
Test(engine_undo, exit_applies_semadj_with_clamping)
{
	struct fx_caller *p = proc(1000);
	int id = mkset(4);
	int64_t t0, t1;

	setval(id, 1, 2);
	OK(p, id, { 0, 3, SV_SEM_UNDO }, { 1, -2, SV_SEM_UNDO }, { 2, 4, SV_SEM_UNDO });
	OK(p, id, { 3, 0, SV_SEM_UNDO }); /* names semaphore 3, semadj stays 0 */
	OK(root, id, { 0, -3, 0 }, { 1, 32767, 0 }, { 3, 6, 0 });
	EXPECT_VALS(id, 0, 32767, 4, 6);

	skew += 1000;
	t0 = time(NULL);
	cr_assert_eq(exit_take(p, NULL, 0), 0);
	t1 = time(NULL);
	EXPECT_VALS(id, 0, 32767, 0, 6);
	cr_assert_eq(fx_getpid(root, id, 0), 1000, "clamped, still the exiting process's");
	cr_assert_eq(fx_getpid(root, id, 1), 1000);
	cr_assert_eq(fx_getpid(root, id, 2), 1000);
	cr_assert_eq(fx_getpid(root, id, 3), 100, "semadj 0: sempid untouched");
	cr_assert(otime(id) >= t0 && otime(id) <= t1, "exit sets otime: %lld not in [%lld, %lld]",
		  (long long)otime(id), (long long)t0, (long long)t1);
}

/* A5.3: exit stamps otime even if every semadj is 0 (the kernel's exit_sem always does). */
Test(engine_undo, exit_sets_otime_without_change)
{
	struct fx_caller *p = proc(1000);
	int id = mkset(1);
	int64_t t0;

	/* a failed SEM_UNDO call still creates the undo entry, as in the kernel */
	cr_assert_eq(fx_semop(p, id, NULL, NULL, SOPS({ 0, -1, SV_SEM_UNDO | SV_IPC_NOWAIT })),
		     -EAGAIN);
	cr_assert_eq(otime(id), 0);
	skew += 1000;
	t0 = time(NULL);
	cr_assert_eq(exit_take(p, NULL, 0), 0);
	cr_assert_geq(otime(id), t0);
	EXPECT_VALS(id, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 0);
}

/* A5.3: exit re-evaluates waiters; completions go on the exit's wake queue. Idempotent. */
Test(engine_undo, exit_wakes_waiters_and_is_idempotent)
{
	struct fx_caller *p = proc(1000), *wp = proc(3000), *zp = proc(4000);
	struct sv_waiter *w[4];
	struct sv_wakeq wq;
	int id = mkset(2);

	setval(id, 0, 1);
	OK(p, id, { 0, -1, SV_SEM_UNDO }, { 1, 1, SV_SEM_UNDO });
	PARK(wp, id, 1, { 0, -1, 0 });
	PARK(zp, id, 2, { 1, 0, 0 });
	cr_assert_eq(fx_getncnt(root, id, 0), 1);
	cr_assert_eq(fx_getzcnt(root, id, 1), 1);

	sv_wakeq_init(&wq);
	sv_proc_exit(p->c.proc, &wq);
	cr_assert_eq(fx_take(&wq, w, 4), 2, "both waiters complete inside the exit");
	/* independent semaphores: either order */
	cr_assert(sv_waiter_cookie(w[0]) != sv_waiter_cookie(w[1]));
	cr_assert_eq(sv_waiter_result(w[0]), 0);
	cr_assert_eq(sv_waiter_result(w[1]), 0);
	sv_waiter_free(w[0]);
	sv_waiter_free(w[1]);
	EXPECT_VALS(id, 0, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 3000);
	cr_assert_eq(fx_getpid(root, id, 1), 4000);

	/* again: nothing more is applied */
	OK(root, id, { 0, 2, 0 });
	sv_wakeq_init(&wq);
	sv_proc_exit(p->c.proc, &wq);
	cr_assert(sv_wakeq_empty(&wq));
	EXPECT_VALS(id, 2, 0);
	cr_assert_eq(exit_take(p, NULL, 0), 0); /* and a third time, through the fixture */
	EXPECT_VALS(id, 2, 0);
	fx_caller_exit(wp, NULL);
	fx_caller_exit(zp, NULL);
}

/* A5.4: IPC_RMID drops the set's undo entries: a new set under the same id is unaffected. */
Test(engine_undo, rmid_drops_undo_entries)
{
	struct fx_caller *p = proc(1000);
	int id = mkset(1), other = mkset(1), id2;

	OK(p, id, { 0, 2, SV_SEM_UNDO });
	OK(p, other, { 0, 4, SV_SEM_UNDO });
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_RMID, 0, NULL), 0);
	sv_ns_set_next_id(fx_ns, id);
	id2 = mkset(1);
	cr_assert_eq(id2, id, "the new set has the removed one's id");
	setval(id2, 0, 5);
	OK(p, id2, { 0, 1, SV_SEM_UNDO }); /* a fresh entry: semadj -1, not -3 */
	EXPECT_VALS(id2, 6);
	cr_assert_eq(exit_take(p, NULL, 0), 0);
	EXPECT_VALS(id2, 5);
	EXPECT_VALS(other, 0);
}

/* ---- cancel ---- */

/* A parked waiter cancelled: 0, nothing applied, the counts drop, its units stay available. */
Test(engine_undo, cancel_parked_waiter)
{
	struct fx_caller *p = proc(1000);
	struct sv_ns_info info;
	struct sv_waiter *w[4];
	int id = mkset(3);

	setval(id, 2, 1);
	struct sv_waiter *a = PARK(p, id, 1, { 0, -1, SV_SEM_UNDO });
	struct sv_waiter *b = PARK(p, id, 2, { 1, 1, SV_SEM_UNDO }, { 0, -2, SV_SEM_UNDO });
	struct sv_waiter *z = PARK(p, id, 3, { 2, 0, 0 });

	cr_assert_eq(fx_getncnt(root, id, 0), 2);
	cr_assert_eq(fx_getzcnt(root, id, 2), 1);
	sv_ns_info(fx_ns, &info);
	cr_assert_eq(info.nwaiters, 3);

	cr_assert_eq(sv_waiter_cancel(b), 0);
	sv_waiter_free(b);
	cr_assert_eq(fx_getncnt(root, id, 0), 1);
	cr_assert_eq(sv_waiter_cancel(a), 0);
	sv_waiter_free(a);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);
	cr_assert_eq(sv_waiter_cancel(z), 0);
	sv_waiter_free(z);
	cr_assert_eq(fx_getzcnt(root, id, 2), 0);
	sv_ns_info(fx_ns, &info);
	cr_assert_eq(info.nwaiters, 0);

	/* the units go to nobody: the cancelled waiters are really gone */
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 2, 0 }, { 2, -1, 0 })), 0);
	EXPECT_VALS(id, 2, 0, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(fx_getpid(root, id, i), i == 1 ? 0 : 100, "sempid of %d", i);
	/* and no semadj was recorded for them */
	cr_assert_eq(exit_take(p, NULL, 0), 0);
	EXPECT_VALS(id, 2, 0, 0);
}

/* A waiter that some call completed cannot be cancelled: -EALREADY, the deliverer owns it. */
Test(engine_undo, cancel_after_completion)
{
	struct fx_caller *p = proc(1000);
	struct sv_waiter *w[4], *mine, *mine2;
	struct sv_wakeq wq;
	int id = mkset(1);

	mine = PARK(p, id, 1, { 0, -1, 0 });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	cr_assert_eq(w[0], mine);
	cr_assert_eq(sv_waiter_cancel(mine), -EALREADY);
	cr_assert_eq(sv_waiter_result(mine), 0, "still completed");
	EXPECT_VALS(id, 0);
	sv_waiter_free(mine);

	mine2 = PARK(p, id, 2, { 0, -1, 0 });
	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_RMID, 0, &wq), 0);
	cr_assert_eq(sv_waiter_cancel(mine2), -EALREADY, "completed with EIDRM by the removal");
	cr_assert_eq(fx_take(&wq, w, 4), 1);
	cr_assert_eq(w[0], mine2);
	cr_assert_eq(sv_waiter_result(mine2), -EIDRM);
	cr_assert_eq(sv_waiter_rollback(mine2, &wq), 0, "nothing to roll back");
	cr_assert(sv_wakeq_empty(&wq));
	sv_waiter_free(mine2);
	fx_caller_exit(p, NULL);
}

/* ---- rollback ---- */

/* A completed decrement rolled back: value, semadj and sempid are as before it ran. */
Test(engine_undo, rollback_restores_value_semadj_sempid)
{
	struct fx_caller *p = proc(1000), *v = proc(4000);
	struct sv_waiter *w[4];
	struct sv_wakeq wq;
	int id = mkset(2);

	PARK(p, id, 1, { 0, -1, SV_SEM_UNDO }, { 1, 3, SV_SEM_UNDO });
	cr_assert_eq(op_take(v, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	EXPECT_VALS(id, 0, 3);
	cr_assert_eq(fx_getpid(root, id, 0), 1000);
	cr_assert_eq(fx_getpid(root, id, 1), 1000);

	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), 0);
	cr_assert(sv_wakeq_empty(&wq));
	EXPECT_VALS(id, 1, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 4000, "the V's pid, as before the waiter ran");
	cr_assert_eq(fx_getpid(root, id, 1), 0);
	sv_waiter_free(w[0]);
	/* its semadj went back too: exit changes nothing */
	cr_assert_eq(exit_take(p, NULL, 0), 0);
	EXPECT_VALS(id, 1, 0);
	fx_caller_exit(v, NULL);
}

/* The unit a rollback restores goes to the next waiter, inside the rollback. */
Test(engine_undo, rollback_reruns_wakeup)
{
	struct fx_caller *a = proc(1000), *b = proc(2000), *c = proc(3000);
	struct sv_waiter *w[4], *x[4];
	struct sv_wakeq wq;
	int id = mkset(2);

	PARK(a, id, 1, { 0, -1, 0 });
	PARK(b, id, 2, { 0, -1, 0 });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	cr_assert_eq(sv_waiter_cookie(w[0]), (void *)1);
	cr_assert_eq(fx_getncnt(root, id, 0), 1);
	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), 0);
	cr_assert_eq(fx_take(&wq, x, 4), 1, "b gets the restored unit");
	cr_assert_eq(sv_waiter_cookie(x[0]), (void *)2);
	cr_assert_eq(sv_waiter_result(x[0]), 0);
	EXPECT_VALS(id, 0, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 2000);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);
	sv_waiter_free(w[0]);
	sv_waiter_free(x[0]);

	/* a rolled-back increment brings a value back to 0: wait-for-zero waiters run */
	PARK(c, id, 3, { 0, -1, 0 }, { 1, 1, 0 });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	EXPECT_VALS(id, 0, 1);
	PARK(a, id, 4, { 1, 0, 0 });
	cr_assert_eq(fx_getzcnt(root, id, 1), 1);
	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), 0);
	cr_assert_eq(fx_take(&wq, x, 4), 1);
	cr_assert_eq(sv_waiter_cookie(x[0]), (void *)4);
	EXPECT_VALS(id, 1, 0);
	cr_assert_eq(fx_getzcnt(root, id, 1), 0);
	sv_waiter_free(w[0]);
	sv_waiter_free(x[0]);
	fx_caller_exit(a, NULL);
	fx_caller_exit(b, NULL);
	fx_caller_exit(c, NULL);
}

/* Rolling back a wait-for-zero: no value changes, sempid comes back. */
Test(engine_undo, rollback_wait_for_zero)
{
	struct fx_caller *z = proc(1000);
	struct sv_waiter *w[4];
	struct sv_wakeq wq;
	int id = mkset(1);

	setval(id, 0, 1);
	PARK(z, id, 1, { 0, 0, 0 });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, -1, 0 })), 1);
	cr_assert_eq(fx_getpid(root, id, 0), 1000);
	cr_assert_eq(fx_getzcnt(root, id, 0), 0);
	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), 0);
	cr_assert(sv_wakeq_empty(&wq));
	EXPECT_VALS(id, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 100);
	cr_assert_eq(fx_getzcnt(root, id, 0), 0, "a rolled-back waiter does not wait again");
	sv_waiter_free(w[0]);
	fx_caller_exit(z, NULL);
}

/* A rollback after the set was removed touches nothing, not even a new set with the same id. */
Test(engine_undo, rollback_after_removal)
{
	struct fx_caller *p = proc(1000);
	struct sv_waiter *w[4];
	struct sv_wakeq wq;
	int id = mkset(1), id2;

	PARK(p, id, 1, { 0, -1, SV_SEM_UNDO });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_RMID, 0, NULL), 0);
	sv_ns_set_next_id(fx_ns, id);
	id2 = mkset(1);
	cr_assert_eq(id2, id);
	setval(id2, 0, 3);
	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), 0);
	cr_assert(sv_wakeq_empty(&wq));
	EXPECT_VALS(id2, 3);
	cr_assert_eq(fx_getpid(root, id2, 0), 100);
	sv_waiter_free(w[0]);
	cr_assert_eq(exit_take(p, NULL, 0), 0);
	EXPECT_VALS(id2, 3);
}

/*
 * A complex operation's increment was used up by a later call: undoing it would drive a value
 * below 0, so the rollback refuses (-ERANGE) and leaves the operation applied, values and
 * semadj exactly as they were, whichever sop is the one that cannot be undone.
 */
Test(engine_undo, rollback_erange_keeps_operation)
{
	struct fx_caller *p = proc(1000);
	struct sv_waiter *w[4];
	struct sv_wakeq wq;
	int id = mkset(2);

	/* the increment is the last sop: the first one undone fails */
	PARK(p, id, 1, { 0, -1, 0 }, { 1, 1, 0 });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	OK(root, id, { 1, -1, 0 });
	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), -ERANGE);
	cr_assert(sv_wakeq_empty(&wq));
	EXPECT_VALS(id, 0, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 1000, "still the waiter's operation");
	sv_waiter_free(w[0]);

	/* the increment is the first sop: the decrement is undone, then must be redone */
	PARK(p, id, 2, { 1, 1, SV_SEM_UNDO }, { 0, -1, SV_SEM_UNDO });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	OK(root, id, { 1, -1, 0 });
	EXPECT_VALS(id, 0, 0);
	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), -ERANGE);
	cr_assert(sv_wakeq_empty(&wq));
	EXPECT_VALS(id, 0, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 1000);
	sv_waiter_free(w[0]);
	/* semadj is the operation's: +1 on 0, -1 on 1; exit applies exactly that */
	cr_assert_eq(exit_take(p, NULL, 0), 0);
	EXPECT_VALS(id, 1, 0);
}

/* ---- exit with tickets outstanding ---- */

/* A parked waiter of a process that exited is dropped, unapplied, when values next change. */
Test(engine_undo, exit_with_parked_waiter)
{
	struct fx_caller *p = proc(1000), *q = proc(2000);
	struct sv_waiter *dec, *zero, *undo, *w[4];
	int id = mkset(3), n;

	setval(id, 1, 1);
	OK(q, id, { 2, 1, SV_SEM_UNDO });
	dec = PARK(p, id, 1, { 0, -1, 0 });
	zero = PARK(p, id, 2, { 1, 0, 0 });
	undo = PARK(q, id, 3, { 0, -1, SV_SEM_UNDO });
	cr_assert_eq(exit_take(p, NULL, 0), 0, "p has no undo entry: nothing runs yet");

	/* the V runs the queue: p's waiters are dropped, q's waiter gets the unit */
	n = op_take(root, id, w, 4, SOPS({ 0, 1, 0 }));
	cr_assert_eq(n, 2);
	cr_assert_eq(w[0], dec);
	cr_assert_neq(sv_waiter_result(dec), 0, "a dead process's operation must not complete");
	cr_assert_eq(w[1], undo);
	cr_assert_eq(sv_waiter_result(undo), 0);
	EXPECT_VALS(id, 0, 1, 1);
	cr_assert_eq(fx_getpid(root, id, 0), 2000);
	sv_waiter_free(dec);
	sv_waiter_free(undo);

	n = op_take(root, id, w, 4, SOPS({ 1, -1, 0 }));
	cr_assert_eq(n, 1);
	cr_assert_eq(w[0], zero);
	cr_assert_neq(sv_waiter_result(zero), 0);
	cr_assert_eq(fx_getpid(root, id, 1), 100, "the dropped wait-for-zero set no sempid");
	sv_waiter_free(zero);
	cr_assert_eq(fx_getzcnt(root, id, 1), 0);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);

	/* q exits with a parked SEM_UNDO waiter: its exit applies semadj and drops the waiter */
	undo = PARK(q, id, 4, { 1, -1, SV_SEM_UNDO });
	n = exit_take(q, w, 4);
	EXPECT_VALS(id, 1, 0, 0); /* semaphore 0: +1 (the undo of q's -1); 2: -1 */
	if (n) {
		/* dropped inside the exit's pass */
		cr_assert_eq(w[0], undo);
		cr_assert_neq(sv_waiter_result(undo), 0);
		sv_waiter_free(undo);
	} else {
		/* or on the next change of semaphore 1 */
		cr_assert_eq(op_take(root, id, w, 4, SOPS({ 1, 1, 0 })), 1);
		cr_assert_eq(w[0], undo);
		cr_assert_neq(sv_waiter_result(undo), 0);
		sv_waiter_free(undo);
		EXPECT_VALS(id, 1, 1, 0);
	}
}

/*
 * A SEM_UNDO waiter completed, but before its answer was delivered its process exited (which
 * applied the semadj of that very operation), and only then is the delivery found to have
 * failed. The rollback must not undo the SEM_UNDO sops again: no unit created, none lost.
 */
Test(engine_undo, rollback_after_exit_of_undo_waiter)
{
	struct fx_caller *p = proc(1000), *q = proc(2000);
	struct sv_waiter *w[4];
	struct sv_wakeq wq;
	int id = mkset(2);

	PARK(p, id, 1, { 0, -1, SV_SEM_UNDO });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	EXPECT_VALS(id, 0, 0);
	cr_assert_eq(exit_take(p, NULL, 0), 0);
	EXPECT_VALS(id, 1, 0); /* exit undid the decrement */
	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), 0);
	cr_assert(sv_wakeq_empty(&wq));
	EXPECT_VALS(id, 1, 0);
	sv_waiter_free(w[0]);

	/* mixed: the SEM_UNDO sop is compensated by exit, the other one by the rollback */
	PARK(q, id, 2, { 0, -2, SV_SEM_UNDO }, { 1, 1, 0 });
	cr_assert_eq(op_take(root, id, w, 4, SOPS({ 0, 1, 0 })), 1);
	EXPECT_VALS(id, 0, 1);
	cr_assert_eq(exit_take(q, NULL, 0), 0);
	EXPECT_VALS(id, 2, 1);
	sv_wakeq_init(&wq);
	cr_assert_eq(sv_waiter_rollback(w[0], &wq), 0);
	cr_assert(sv_wakeq_empty(&wq));
	EXPECT_VALS(id, 2, 0);
	sv_waiter_free(w[0]);
}
