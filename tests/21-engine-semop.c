/* SPDX-License-Identifier: MIT */
/*
 * semop/semtimedop (SPEC A4): the order of checks, permissions, all-or-nothing evaluation, and
 * everything about waiting that 24-engine-kernel-diff cannot compare with the kernel: parking,
 * GETNCNT/GETZCNT of sleepers, FIFO wake-up executed by the waker, re-evaluation of sleeping
 * multi-sop calls, bulk wake-up, IPC_RMID with sleepers, and the merging of simple waiters into
 * the set's queue while complex ones sleep.
 *
 * Waiting is modelled by the engine as parking: the call returns SV_PARKED and a ticket, and a
 * later call that lets it proceed puts it on that call's wake queue. "The waker executes the
 * waiter's operation" is therefore directly visible: values change inside the waking call.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "tests/lib/fixture.h"

#define NPROCS 8

static struct fx_caller *root;	    /* pid 100, uid 0 */
static struct fx_caller *P[NPROCS]; /* pids 1000.., uid 0: distinct processes */

static void setup(void)
{
	fx_setup();
	root = fx_caller_new(fx_ns, 100, 0, 0);
	for (int i = 0; i < NPROCS; i++)
		P[i] = fx_caller_new(fx_ns, 1000 + i, 0, 0);
}

static void teardown(void)
{
	for (int i = 0; i < NPROCS; i++)
		fx_caller_exit(P[i], NULL);
	fx_caller_exit(root, NULL);
	fx_teardown();
}

TestSuite(engine_semop, .init = setup, .fini = teardown, .timeout = 30);

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
	for (int i = 0; i < n; i++)
		cr_assert_eq(fx_getval(root, id, i), want[i], "semaphore %d: %d, expected %d", i,
			     fx_getval(root, id, i), want[i]);
}

#define EXPECT_VALS(id, ...)                                                                       \
	expect_vals((id), (int)(sizeof((int[]){ __VA_ARGS__ }) / sizeof(int)),                     \
		    (int[]){ __VA_ARGS__ })

static struct sv_waiter *park(struct fx_caller *fc, int id, intptr_t cookie, unsigned int nsops,
			      const struct sv_sembuf *sops)
{
	long r = 0;
	struct sv_waiter *w = fx_park(fc, id, (void *)cookie, &r, nsops, sops);

	cr_assert_not_null(w, "operation (cookie %ld) did not park: %ld", (long)cookie, r);
	return w;
}

/* Cancel a ticket that must still be parked, and free it. */
static void cancel(struct sv_waiter *w)
{
	cr_assert_eq(sv_waiter_cancel(w), 0, "waiter %ld was not parked any more",
		     (long)(intptr_t)sv_waiter_cookie(w));
	sv_waiter_free(w);
}

/*
 * The wake queue must hold exactly these waiters (by cookie), in this order, with these results.
 * They are freed.
 */
static void expect_woken(struct sv_wakeq *wq, int n, const intptr_t *cookies, const int *res)
{
	struct sv_waiter *w[64];
	int got = fx_take(wq, w, 64);

	for (int i = 0; i < got && i < 64; i++) {
		if (i < n) {
			cr_assert_eq((intptr_t)sv_waiter_cookie(w[i]), cookies[i],
				     "wake queue entry %d is waiter %ld, expected %ld", i,
				     (long)(intptr_t)sv_waiter_cookie(w[i]), (long)cookies[i]);
			cr_assert_eq(sv_waiter_result(w[i]), res[i],
				     "waiter %ld: result %d, not %d", (long)cookies[i],
				     sv_waiter_result(w[i]), res[i]);
			cr_assert_eq(sv_waiter_cancel(w[i]), -EALREADY,
				     "a completed waiter cannot be cancelled");
		}
		sv_waiter_free(w[i]);
	}
	cr_assert_eq(got, n, "%d waiters woken, expected %d", got, n);
}

#define EXPECT_WOKEN(wq, ...)                                                                      \
	do {                                                                                       \
		const intptr_t c_[] = { __VA_ARGS__ };                                             \
		int r_[sizeof(c_) / sizeof(c_[0])];                                                \
		for (size_t i_ = 0; i_ < sizeof(c_) / sizeof(c_[0]); i_++)                         \
			r_[i_] = 0;                                                                \
		expect_woken((wq), (int)(sizeof(c_) / sizeof(c_[0])), c_, r_);                     \
	} while (0)

static void expect_none(struct sv_wakeq *wq)
{
	expect_woken(wq, 0, NULL, NULL);
}

/* One call, whose wake queue is returned in *wq. */
static long op(struct fx_caller *fc, int id, struct sv_wakeq *wq, unsigned int nsops,
	       const struct sv_sembuf *sops)
{
	sv_wakeq_init(wq);
	return fx_semop(fc, id, NULL, wq, nsops, sops);
}

/* ---- the caller's memory: addresses below 4096 fault ---- */

static int low_faults_read(const struct sv_caller *c, uint64_t addr, void *buf, size_t len)
{
	(void)c;
	if (addr < 4096)
		return -EFAULT;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

static const struct sv_caller_ops low_faults = { .read = low_faults_read };

static long raw(struct fx_caller *fc, int id, uint64_t sops, unsigned int nsops, uint64_t ts)
{
	struct sv_park park = { 0 };
	struct sv_wakeq wq;
	long r;

	sv_wakeq_init(&wq);
	r = sv_semtimedop(&fc->c, id, sops, nsops, ts, &park, &wq);
	fx_drain(&wq, NULL, NULL, 0);
	if (r == SV_PARKED)
		cancel(park.waiter);
	return r;
}

#define PTR(p) ((uint64_t)(uintptr_t)(p))

/* A4.1: the kernel's order of checks (the order below was checked against Linux 6.18). */
Test(engine_semop, check_order)
{
	struct fx_caller *fc = fx_caller_new(fx_ns, 300, 0, 0);
	struct fx_caller *other = fx_caller_new(fx_ns, 301, 3000, 3000);
	static struct sv_sembuf many[501];
	struct sv_sembuf one = { 0, 1, 0 };
	struct timespec bad = { 0, 1000000000L }, good = { 1, 0 };
	int id = mkset(2);

	fc->c.ops = &low_faults;
	/* the timeout is copied first */
	cr_assert_eq(raw(fc, -1, 0, 0, 0x10), -EFAULT);
	cr_assert_eq(raw(fc, id, PTR(many), 501, 0x10), -EFAULT);
	/* then nsops against SEMOPM (before the semid and nsops 0 checks), then nsops 0 */
	cr_assert_eq(raw(fc, -1, PTR(many), 501, 0), -E2BIG);
	cr_assert_eq(raw(fc, id, 0, 501, 0), -E2BIG, "E2BIG before the sops are read");
	cr_assert_eq(raw(fc, -1, 0, 0, 0), -EINVAL);
	cr_assert_eq(raw(fc, id, PTR(many), 0, PTR(&bad)), -EINVAL);
	/* then the sops are read, before the semid is looked at */
	cr_assert_eq(raw(fc, -1, 0x20, 1, 0), -EFAULT);
	cr_assert_eq(raw(fc, -1, PTR(&one), 1, 0), -EINVAL);
	/* a bad timeout is EINVAL before the id, the semaphore numbers and the values */
	cr_assert_eq(raw(fc, 12345, PTR(&one), 1, PTR(&bad)), -EINVAL);
	struct sv_sembuf far = { 7, 1, 0 };

	cr_assert_eq(raw(fc, id, PTR(&far), 1, PTR(&bad)), -EINVAL);
	/* SEM_UNDO entry for a set that does not exist */
	struct sv_sembuf undo = { 0, 1, SV_SEM_UNDO };

	cr_assert_eq(raw(fc, 12345, PTR(&undo), 1, 0), -EINVAL);
	cr_assert_eq(raw(fc, 12345, PTR(&one), 1, PTR(&good)), -EINVAL);
	/* EFBIG comes before EACCES */
	other->c.ops = &low_faults;
	struct sv_sembuf edge = { 2, 0, 0 }, last = { 1, 0, 0 }, huge = { 65535, 0, 0 };

	cr_assert_eq(raw(other, id, PTR(&edge), 1, 0), -EFBIG);
	cr_assert_eq(raw(other, id, PTR(&huge), 1, 0), -EFBIG);
	cr_assert_eq(raw(other, id, PTR(&last), 1, 0), -EACCES);
	/* a wide call: the largest sem_num decides */
	struct sv_sembuf two[2] = { { 0, 1, 0 }, { 2, 1, 0 } };

	cr_assert_eq(raw(fc, id, PTR(two), 2, 0), -EFBIG);
	/* SEMOPM itself is allowed (more than the engine's on-stack copy) */
	for (int i = 0; i < 500; i++)
		many[i] = (struct sv_sembuf){ (uint16_t)(i & 1), 1, 0 };
	cr_assert_eq(raw(fc, id, PTR(many), 500, 0), 0);
	EXPECT_VALS(id, 250, 250);
	fx_caller_exit(fc, NULL);
	fx_caller_exit(other, NULL);
}

/* A4.2: alter permission if any sem_op is non-zero, read permission otherwise. */
Test(engine_semop, read_versus_alter_permission)
{
	struct fx_caller *owner = fx_caller_new(fx_ns, 300, 1000, 1000);
	struct fx_caller *other = fx_caller_new(fx_ns, 301, 2000, 2000);
	long id = sv_semget(&owner->c, SV_IPC_PRIVATE, 2, 0604); /* others: read only */
	struct sv_sembuf zero2[2] = { { 0, 0, 0 }, { 1, 0, 0 } };
	struct sv_sembuf mixed[2] = { { 0, 0, 0 }, { 1, 1, 0 } };
	struct sv_sembuf inc = { 0, 1, 0 };
	struct sv_sembuf dec = { 1, -1, SV_IPC_NOWAIT };
	unsigned char ds[104] = { 0 };
	uint32_t mode = 0602; /* others: write only */

	cr_assert_geq(id, 0);
	cr_assert_eq(fx_semop(other, (int)id, NULL, NULL, 2, zero2), 0, "wait-for-zero reads");
	cr_assert_eq(fx_semop(other, (int)id, NULL, NULL, 2, mixed), -EACCES);
	cr_assert_eq(fx_semop(other, (int)id, NULL, NULL, 1, &inc), -EACCES);
	cr_assert_eq(fx_semop(other, (int)id, NULL, NULL, 1, &dec), -EACCES,
		     "EACCES before the operation is tried");
	cr_assert_eq(fx_getval(owner, (int)id, 0), 0);

	memcpy(ds + 4, &(uint32_t){ 1000 }, 4);
	memcpy(ds + 8, &(uint32_t){ 1000 }, 4);
	memcpy(ds + 20, &mode, 4);
	cr_assert_eq(fx_semctl(owner, (int)id, 0, SV_IPC_SET, PTR(ds), NULL), 0);
	cr_assert_eq(fx_semop(other, (int)id, NULL, NULL, 2, zero2), -EACCES);
	/* an altering call needs only alter, even with wait-for-zero sops in it */
	cr_assert_eq(fx_semop(other, (int)id, NULL, NULL, 2, mixed), 0);
	cr_assert_eq(fx_semop(other, (int)id, NULL, NULL, 1, &inc), 0);
	cr_assert_eq(fx_getval(owner, (int)id, 0), 1);
	cr_assert_eq(fx_getval(owner, (int)id, 1), 1);
	fx_caller_exit(owner, NULL);
	fx_caller_exit(other, NULL);
}

/* A4.3: of sem_flg only IPC_NOWAIT and SEM_UNDO count. */
Test(engine_semop, only_nowait_and_undo_flags_count)
{
	const int16_t others = (int16_t)(0xffff & ~(SV_IPC_NOWAIT | SV_SEM_UNDO));
	struct fx_caller *fc = fx_caller_new(fx_ns, 300, 0, 0);
	struct sv_sembuf dec = { 0, -1, others };
	struct sv_sembuf dec_nowait = { 0, -1, (int16_t)(others | SV_IPC_NOWAIT) };
	struct sv_sembuf inc = { 0, 2, others };
	struct sv_sembuf inc_undo = { 1, 3, (int16_t)(others | SV_SEM_UNDO) };
	struct sv_wakeq wq;
	int id = mkset(2);
	long r;

	struct sv_waiter *w = fx_park(fc, id, NULL, &r, 1, &dec);

	cr_assert_not_null(w, "without IPC_NOWAIT the call waits, whatever else is set (%ld)", r);
	cancel(w);
	cr_assert_eq(fx_semop(fc, id, NULL, NULL, 1, &dec_nowait), -EAGAIN);
	cr_assert_eq(fx_semop(fc, id, NULL, NULL, 1, &inc), 0);
	cr_assert_eq(fx_semop(fc, id, NULL, NULL, 1, &inc_undo), 0);
	EXPECT_VALS(id, 2, 3);
	/* exit reverts only the SEM_UNDO operation */
	sv_wakeq_init(&wq);
	fx_caller_exit(fc, &wq);
	expect_none(&wq);
	EXPECT_VALS(id, 2, 0);
}

/* A4.4: all or nothing, values, semadj, sempid and otime included. */
Test(engine_semop, all_or_nothing)
{
	struct fx_caller *fc = fx_caller_new(fx_ns, 300, 0, 0);
	struct sv_sembuf blocks[3] = { { 0, 1, SV_SEM_UNDO },
				       { 1, 2, 0 },
				       { 2, -1, SV_IPC_NOWAIT } };
	struct sv_sembuf range[2] = { { 0, 1, SV_SEM_UNDO }, { 1, 1, 0 } };
	struct fx_stat st;
	int id = mkset(3);

	cr_assert_eq(fx_semop(fc, id, NULL, NULL, 3, blocks), -EAGAIN);
	EXPECT_VALS(id, 0, 0, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(fx_getpid(root, id, i), 0, "a failed call sets no sempid");
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	cr_assert_eq(st.otime, 0, "a failed call sets no otime");

	setval(id, 1, 32767);
	cr_assert_eq(fx_semop(fc, id, NULL, NULL, 2, range), -ERANGE);
	EXPECT_VALS(id, 0, 32767, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 0);

	/* the semadj of the failed SEM_UNDO sops was not kept: exit changes nothing */
	setval(id, 0, 5);
	setval(id, 1, 0);
	cr_assert_eq(fx_semop(fc, id, NULL, NULL, 3, blocks), -EAGAIN);
	fx_caller_exit(fc, NULL);
	EXPECT_VALS(id, 5, 0, 0);
}

/* A4.5: sops on the same semaphore apply in sequence. */
Test(engine_semop, same_semaphore_in_sequence)
{
	int id = mkset(1);
	struct sv_sembuf up_down_zero[3] = { { 0, 1, 0 }, { 0, -1, 0 }, { 0, 0, 0 } };
	struct sv_sembuf down_up[2] = { { 0, -1, SV_IPC_NOWAIT }, { 0, 1, 0 } };
	struct sv_sembuf up_zero[2] = { { 0, 1, 0 }, { 0, 0, SV_IPC_NOWAIT } };
	struct sv_sembuf up2_down2[4] = { { 0, 2, 0 }, { 0, -1, 0 }, { 0, -1, 0 }, { 0, 3, 0 } };

	cr_assert_eq(fx_semop(root, id, NULL, NULL, 3, up_down_zero), 0);
	EXPECT_VALS(id, 0);
	cr_assert_eq(fx_semop(root, id, NULL, NULL, 2, down_up), -EAGAIN,
		     "the decrement comes first and must block");
	cr_assert_eq(fx_semop(root, id, NULL, NULL, 2, up_zero), -EAGAIN,
		     "the wait-for-zero sees the increment before it");
	EXPECT_VALS(id, 0);
	cr_assert_eq(fx_semop(root, id, NULL, NULL, 4, up2_down2), 0);
	EXPECT_VALS(id, 3);
	cr_assert_eq(fx_getpid(root, id, 0), 100);
}

/* A4.6: IPC_NOWAIT counts only on the sop that blocks. */
Test(engine_semop, nowait_is_per_sop)
{
	int id = mkset(2);
	struct sv_sembuf a[2] = { { 0, -1, 0 }, { 1, -1, SV_IPC_NOWAIT } };
	struct sv_sembuf b[2] = { { 0, -1, SV_IPC_NOWAIT }, { 1, -1, 0 } };
	long r;

	/* sop 0 blocks and has no IPC_NOWAIT: wait, although sop 1 has it */
	cancel(park(root, id, 1, 2, a));
	/* sop 0 passes, sop 1 blocks with IPC_NOWAIT: EAGAIN, sop 0 undone */
	setval(id, 0, 1);
	cr_assert_eq(fx_semop(root, id, NULL, NULL, 2, a), -EAGAIN);
	EXPECT_VALS(id, 1, 0);
	/* sop 0 passes (it has IPC_NOWAIT, irrelevant), sop 1 blocks without: wait */
	struct sv_waiter *w = fx_park(root, id, NULL, &r, 2, b);

	cr_assert_not_null(w, "result %ld", r);
	EXPECT_VALS(id, 1, 0);
	cr_assert_eq(fx_getncnt(root, id, 1), 1);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);
	cancel(w);
}

/* A4.4: ERANGE for a value above 32767; the first failing sop decides against blocking. */
Test(engine_semop, erange_for_values)
{
	int id = mkset(2);
	struct sv_sembuf one = { 0, 1, 0 }, big = { 0, 32767, 0 };
	struct sv_sembuf range_first[2] = { { 0, 32767, 0 }, { 1, -1, 0 } };
	struct sv_sembuf block_first[2] = { { 1, -1, 0 }, { 0, 32767, 0 } };
	struct sv_sembuf nowait_first[2] = { { 1, -1, SV_IPC_NOWAIT }, { 0, 32767, 0 } };

	cr_assert_eq(fx_semop(root, id, NULL, NULL, 1, &big), 0);
	cr_assert_eq(fx_semop(root, id, NULL, NULL, 1, &one), -ERANGE);
	EXPECT_VALS(id, 32767, 0);
	setval(id, 0, 1);
	cr_assert_eq(fx_semop(root, id, NULL, NULL, 1, &big), -ERANGE);
	cr_assert_eq(fx_semop(root, id, NULL, NULL, 2, range_first), -ERANGE);
	cancel(park(root, id, 1, 2, block_first));
	cr_assert_eq(fx_semop(root, id, NULL, NULL, 2, nowait_first), -EAGAIN);
	EXPECT_VALS(id, 1, 0);
}

/* A4.4: with SEM_UNDO, the new semadj must stay within [-32768, 32767]. */
Test(engine_semop, erange_for_semadj)
{
	int id = mkset(2);
	struct fx_caller *p = P[0], *q = P[1];
	struct sv_sembuf down_all = { 0, -32767, SV_SEM_UNDO }, down1_undo = { 0, -1, SV_SEM_UNDO };
	struct sv_sembuf down1 = { 0, -1, 0 }, up1 = { 0, 1, 0 };
	struct sv_sembuf up_all = { 1, 32767, SV_SEM_UNDO }, up1_undo = { 1, 1, SV_SEM_UNDO };
	struct sv_sembuf s1_down_all = { 1, -32767, 0 }, s1_down1 = { 1, -1, 0 };

	/* semadj +32767 is the top */
	setval(id, 0, 32767);
	cr_assert_eq(fx_semop(p, id, NULL, NULL, 1, &down_all), 0);
	cr_assert_eq(fx_semop(q, id, NULL, NULL, 1, &up1), 0);
	cr_assert_eq(fx_semop(p, id, NULL, NULL, 1, &down1_undo), -ERANGE, "semadj 32768");
	EXPECT_VALS(id, 1, 0);
	cr_assert_eq(fx_semop(p, id, NULL, NULL, 1, &down1), 0, "without SEM_UNDO it is fine");

	/* -32768 is allowed, -32769 is not */
	cr_assert_eq(fx_semop(p, id, NULL, NULL, 1, &up_all), 0);
	cr_assert_eq(fx_semop(q, id, NULL, NULL, 1, &s1_down_all), 0);
	cr_assert_eq(fx_semop(p, id, NULL, NULL, 1, &up1_undo), 0, "semadj -32768 is in range");
	cr_assert_eq(fx_semop(q, id, NULL, NULL, 1, &s1_down1), 0);
	cr_assert_eq(fx_semop(p, id, NULL, NULL, 1, &up1_undo), -ERANGE, "semadj -32769");
	EXPECT_VALS(id, 0, 0);
	/* another process has its own semadj */
	cr_assert_eq(fx_semop(q, id, NULL, NULL, 1, &up1_undo), 0);
	EXPECT_VALS(id, 0, 1);
}

/* A4.7: sempid of every named semaphore is the caller's process, wait-for-zero included. */
Test(engine_semop, sempid_for_every_named_semaphore)
{
	int id = mkset(4);
	struct fx_caller *p = fx_caller_new(fx_ns, 4242, 0, 0);
	struct fx_caller *thread = fx_caller_thread(p);
	struct sv_sembuf sops[3] = { { 0, 1, 0 }, { 1, 0, 0 }, { 2, -1, 0 } };
	struct sv_sembuf zero3 = { 3, 0, 0 }, fail[2] = { { 3, 1, 0 }, { 2, -1, SV_IPC_NOWAIT } };

	setval(id, 2, 1);
	cr_assert_eq(fx_getpid(root, id, 2), 100, "SETVAL sets sempid");
	cr_assert_eq(fx_semop(p, id, NULL, NULL, 3, sops), 0);
	cr_assert_eq(fx_getpid(root, id, 0), 4242);
	cr_assert_eq(fx_getpid(root, id, 1), 4242, "a wait-for-zero sop sets sempid too");
	cr_assert_eq(fx_getpid(root, id, 2), 4242);
	cr_assert_eq(fx_getpid(root, id, 3), 0, "semaphore 3 was not named");
	cr_assert_eq(fx_semop(P[0], id, NULL, NULL, 1, &zero3), 0);
	cr_assert_eq(fx_getpid(root, id, 3), 1000);
	cr_assert_eq(fx_semop(P[1], id, NULL, NULL, 2, fail), -EAGAIN);
	cr_assert_eq(fx_getpid(root, id, 3), 1000, "a failed call leaves sempid");
	/* another thread of the process: the process's pid (the TGID) */
	cr_assert_eq(fx_semop(thread, id, NULL, NULL, 1, &zero3), 0);
	cr_assert_eq(fx_getpid(root, id, 3), 4242);
	fx_caller_exit(thread, NULL);
	fx_caller_exit(p, NULL);
}

/* A4.7: otime = now on success, a pure wait-for-zero included; failures leave it. */
Test(engine_semop, otime)
{
	int a = mkset(2), b = mkset(1), c = mkset(1);
	struct sv_sembuf zero = { 0, 0, 0 }, fail = { 0, -1, SV_IPC_NOWAIT }, dec = { 0, -1, 0 };
	struct sv_wakeq wq;
	struct fx_stat st;
	time_t t0, t1;

	cr_assert_eq(fx_semop(root, a, NULL, NULL, 1, &fail), -EAGAIN);
	cr_assert_eq(fx_ipc_stat(root, a, &st), 0);
	cr_assert_eq(st.otime, 0);
	t0 = time(NULL);
	cr_assert_eq(fx_semop(root, a, NULL, NULL, 1, &zero), 0);
	t1 = time(NULL);
	cr_assert_eq(fx_ipc_stat(root, a, &st), 0);
	cr_assert(st.otime >= t0 && st.otime <= t1, "otime %lld after a wait-for-zero",
		  (long long)st.otime);

	/* SETVAL is no operation, unless it completes a waiter (A6.4) */
	setval(b, 0, 3);
	cr_assert_eq(fx_ipc_stat(root, b, &st), 0);
	cr_assert_eq(st.otime, 0, "SETVAL without waiters must not set otime");
	park(P[0], c, 1, 1, &dec);
	cr_assert_eq(fx_ipc_stat(root, c, &st), 0);
	cr_assert_eq(st.otime, 0, "parking is not an operation");
	sv_wakeq_init(&wq);
	t0 = time(NULL);
	cr_assert_eq(fx_semctl(root, c, 0, SV_SETVAL, 1, &wq), 0);
	t1 = time(NULL);
	EXPECT_WOKEN(&wq, 1);
	cr_assert_eq(fx_ipc_stat(root, c, &st), 0);
	cr_assert(st.otime >= t0 && st.otime <= t1, "a waiter completed by SETVAL sets otime");
}

/* Parking: both kinds of waiting operation get a ticket, are counted, and complete. */
Test(engine_semop, parking_and_tickets)
{
	int id = mkset(2);
	struct sv_sembuf dec = { 0, -2, 0 }, zero = { 1, 0, 0 };
	struct sv_sembuf inc2 = { 0, 2, 0 }, dec1 = { 1, -1, 0 };
	struct timespec ts = { 5, 250 };
	struct sv_park pk = { .cookie = (void *)7 };
	struct sv_wakeq wq;
	struct sv_ns_info info;

	cr_assert_eq(fx_semtimedop(P[0], id, &ts, &pk, NULL, 1, &dec), SV_PARKED);
	cr_assert_not_null(pk.waiter);
	cr_assert(pk.timed, "a timeout was given");
	cr_assert_eq(pk.timeout.tv_sec, 5);
	cr_assert_eq(pk.timeout.tv_nsec, 250);
	cr_assert_eq(sv_waiter_cookie(pk.waiter), (void *)7);

	setval(id, 1, 1);
	memset(&pk, 0, sizeof(pk));
	pk.cookie = (void *)8;
	cr_assert_eq(fx_semop(P[1], id, &pk, NULL, 1, &zero), SV_PARKED);
	cr_assert(!pk.timed);
	cr_assert_not_null(pk.waiter);

	cr_assert_eq(fx_getncnt(root, id, 0), 1);
	cr_assert_eq(fx_getzcnt(root, id, 0), 0);
	cr_assert_eq(fx_getzcnt(root, id, 1), 1);
	cr_assert_eq(fx_getncnt(root, id, 1), 0);
	sv_ns_info(fx_ns, &info);
	cr_assert_eq(info.nwaiters, 2);

	cr_assert_eq(op(root, id, &wq, 1, &inc2), 0);
	EXPECT_WOKEN(&wq, 7);
	cr_assert_eq(op(root, id, &wq, 1, &dec1), 0);
	EXPECT_WOKEN(&wq, 8);
	EXPECT_VALS(id, 0, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 1000, "the waiter's operation, the waiter's pid");
	cr_assert_eq(fx_getpid(root, id, 1), 1001);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);
	cr_assert_eq(fx_getzcnt(root, id, 1), 0);
	sv_ns_info(fx_ns, &info);
	cr_assert_eq(info.nwaiters, 0);
}

/* A4.8: a zero timeout fails at once with EAGAIN; a bad one is EINVAL even if no wait is needed. */
Test(engine_semop, timeouts)
{
	int id = mkset(1);
	struct sv_sembuf dec = { 0, -1, 0 }, inc = { 0, 1, 0 }, zero = { 0, 0, 0 };
	struct timespec z = { 0, 0 }, max = { 0, 999999999 };
	static const struct timespec bad[] = { { 0, 1000000000L }, { -1, 0 }, { 0, -1 } };
	struct sv_park pk = { 0 };

	cr_assert_eq(fx_semtimedop(root, id, &z, &pk, NULL, 1, &dec), -EAGAIN);
	cr_assert_eq(fx_getncnt(root, id, 0), 0, "nothing was parked");
	cr_assert_eq(fx_semtimedop(root, id, &z, &pk, NULL, 1, &zero), 0, "no wait needed");
	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(fx_semtimedop(root, id, &bad[i], &pk, NULL, 1, &inc), -EINVAL,
			     "timeout {%ld, %ld}", (long)bad[i].tv_sec, (long)bad[i].tv_nsec);
		EXPECT_VALS(id, 0);
	}
	cr_assert_eq(fx_semtimedop(root, id, &max, &pk, NULL, 1, &inc), 0);
	EXPECT_VALS(id, 1);
	cr_assert_eq(fx_semtimedop(root, id, &z, &pk, NULL, 1, &dec), 0);
	EXPECT_VALS(id, 0);
}

/* A4.9: GETNCNT/GETZCNT count a sleeper on the semaphore of its first blocking sop only. */
Test(engine_semop, counts_follow_first_blocking_sop)
{
	int id = mkset(4);
	struct sv_sembuf both_dec[2] = { { 0, -1, 0 }, { 1, -1, 0 } };
	struct sv_sembuf zero_then_dec[2] = { { 2, 0, 0 }, { 3, -1, 0 } };
	struct sv_sembuf zeros[2] = { { 2, 0, 0 }, { 3, 0, 0 } };
	struct sv_sembuf simple_dec = { 1, -1, 0 }, simple_zero = { 2, 0, 0 };
	struct sv_wakeq wq;

	setval(id, 2, 1);
	struct sv_waiter *a = park(P[0], id, 1, 2, both_dec);

	park(P[1], id, 2, 2, zero_then_dec);
	struct sv_waiter *c = park(P[2], id, 3, 1, &simple_dec);

	park(P[3], id, 4, 1, &simple_zero);
	setval(id, 3, 1);
	park(P[4], id, 5, 2, zeros);

	/* a: blocks at sem 0; b: at sem 2 (zero); c: sem 1; d: sem 2 (zero); e: sem 2 (zero) */
	cr_assert_eq(fx_getncnt(root, id, 0), 1);
	cr_assert_eq(fx_getncnt(root, id, 1), 1, "only c: a's sop on sem 1 is not its first block");
	cr_assert_eq(fx_getzcnt(root, id, 2), 3);
	cr_assert_eq(fx_getncnt(root, id, 3), 0);
	cr_assert_eq(fx_getzcnt(root, id, 3), 0);

	/* sem 0 becomes 1: a now blocks on sem 1 */
	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(root, id, 0, SV_SETVAL, 1, &wq), 0);
	expect_none(&wq);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);
	cr_assert_eq(fx_getncnt(root, id, 1), 2, "re-evaluation moved a's blocking sop");

	/*
	 * Sem 2 reaches zero. The wait-for-zero pass runs first: d completes, e now blocks on
	 * sem 3 (1). Then the altering pass: b = {2:0, 3:-1} completes, and the zero it leaves
	 * on sem 3 releases e, all inside the one call.
	 */
	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(root, id, 2, SV_SETVAL, 0, &wq), 0);
	void *ck[8];

	cr_assert_eq(fx_drain(&wq, NULL, ck, 8), 3, "d, b and e complete inside the SETVAL");
	cr_assert(ck[0] == (void *)4 || ck[1] == (void *)4 || ck[2] == (void *)4);
	cr_assert(ck[0] == (void *)2 || ck[1] == (void *)2 || ck[2] == (void *)2);
	cr_assert(ck[0] == (void *)5 || ck[1] == (void *)5 || ck[2] == (void *)5);
	/* e could only run after b had taken sem 3 to zero: it named both last */
	cr_assert_eq(fx_getpid(root, id, 2), 1004);
	cr_assert_eq(fx_getpid(root, id, 3), 1004);
	EXPECT_VALS(id, 1, 0, 0, 0);
	cr_assert_eq(fx_getzcnt(root, id, 2), 0);
	cr_assert_eq(fx_getzcnt(root, id, 3), 0);
	cr_assert_eq(fx_getncnt(root, id, 3), 0);
	cr_assert_eq(fx_getncnt(root, id, 1), 2);
	cancel(a);
	cancel(c);
	cr_assert_eq(fx_getncnt(root, id, 1), 0);
}

/* A complex wait-for-zero is counted on the semaphore it blocks on, which moves as values do. */
Test(engine_semop, complex_wait_for_zero_counts)
{
	int id = mkset(2);
	struct sv_sembuf zeros[2] = { { 0, 0, 0 }, { 1, 0, 0 } };
	struct sv_sembuf dec1 = { 1, -1, 0 };
	struct sv_wakeq wq;

	setval(id, 0, 1);
	setval(id, 1, 1);
	struct sv_waiter *w = park(P[0], id, 1, 2, zeros);

	cr_assert_eq(fx_getzcnt(root, id, 0), 1);
	cr_assert_eq(fx_getzcnt(root, id, 1), 0);
	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(root, id, 0, SV_SETVAL, 0, &wq), 0);
	expect_none(&wq);
	cr_assert_eq(fx_getzcnt(root, id, 0), 0);
	cr_assert_eq(fx_getzcnt(root, id, 1), 1);
	cr_assert_eq(op(root, id, &wq, 1, &dec1), 0);
	EXPECT_WOKEN(&wq, 1);
	cr_assert_eq(fx_getpid(root, id, 0), 1000);
	cr_assert_eq(fx_getpid(root, id, 1), 1000);
	(void)w;
}

/* A4.10: FIFO, and the waker runs the waiter's operation inside its own call. */
Test(engine_semop, fifo_and_waker_executes)
{
	int id = mkset(1);
	struct sv_sembuf dec = { 0, -1, 0 }, inc = { 0, 1, 0 }, inc2 = { 0, 2, 0 };
	struct sv_wakeq wq;

	for (int i = 0; i < 3; i++)
		park(P[i], id, i + 1, 1, &dec);
	cr_assert_eq(fx_getncnt(root, id, 0), 3);
	cr_assert_eq(op(root, id, &wq, 1, &inc), 0);
	/* before anything is delivered, the value already shows the waiter's decrement */
	cr_assert_eq(fx_getval(root, id, 0), 0, "the V's caller must execute the waiter's P");
	cr_assert_eq(fx_getpid(root, id, 0), 1000);
	cr_assert_eq(fx_getncnt(root, id, 0), 2);
	EXPECT_WOKEN(&wq, 1);
	cr_assert_eq(op(root, id, &wq, 1, &inc2), 0);
	EXPECT_WOKEN(&wq, 2, 3);
	EXPECT_VALS(id, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 1002);

	/* wait-for-zero waiters, too, in arrival order */
	setval(id, 0, 1);
	struct sv_sembuf zero = { 0, 0, 0 }, dec_now = { 0, -1, 0 };

	for (int i = 0; i < 3; i++)
		park(P[i], id, 10 + i, 1, &zero);
	cr_assert_eq(op(root, id, &wq, 1, &dec_now), 0);
	EXPECT_WOKEN(&wq, 10, 11, 12);
}

/* A4.10: no starvation protection: a later -1 passes an earlier -5. */
Test(engine_semop, no_starvation_protection)
{
	int id = mkset(1);
	struct sv_sembuf dec5 = { 0, -5, 0 }, dec1 = { 0, -1, 0 }, inc = { 0, 1, 0 };
	struct sv_sembuf inc4 = { 0, 4, 0 };
	struct sv_wakeq wq;

	park(P[0], id, 1, 1, &dec5);
	park(P[1], id, 2, 1, &dec1);
	park(P[2], id, 3, 1, &dec1);
	cr_assert_eq(op(root, id, &wq, 1, &inc), 0);
	EXPECT_WOKEN(&wq, 2);
	EXPECT_VALS(id, 0);
	cr_assert_eq(fx_getncnt(root, id, 0), 2);
	cr_assert_eq(op(root, id, &wq, 1, &inc4), 0);
	EXPECT_WOKEN(&wq, 3);
	EXPECT_VALS(id, 3);
	cr_assert_eq(op(root, id, &wq, 1, &inc), 0);
	expect_none(&wq);
	cr_assert_eq(op(root, id, &wq, 1, &inc), 0);
	EXPECT_WOKEN(&wq, 1);
	EXPECT_VALS(id, 0);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);
}

/* A4.6: a sleeping multi-sop call is evaluated again and may now fail: EAGAIN and ERANGE. */
Test(engine_semop, reevaluation_fails)
{
	int id = mkset(2);
	struct sv_sembuf nowait_later[2] = { { 0, -1, 0 }, { 1, 0, SV_IPC_NOWAIT } };
	struct sv_sembuf range_later[2] = { { 0, -1, 0 }, { 1, 1, 0 } };
	struct sv_sembuf inc = { 0, 1, 0 };
	struct sv_wakeq wq;
	const intptr_t c1[] = { 1 }, c2[] = { 2 };
	const int eagain[] = { -EAGAIN }, erange[] = { -ERANGE };

	park(P[0], id, 1, 2, nowait_later);
	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(root, id, 1, SV_SETVAL, 1, &wq), 0);
	expect_none(&wq);
	cr_assert_eq(op(root, id, &wq, 1, &inc), 0);
	expect_woken(&wq, 1, c1, eagain);
	EXPECT_VALS(id, 1, 1);
	cr_assert_eq(fx_getpid(root, id, 0), 100, "the failed waiter changed nothing");

	setval(id, 0, 0);
	park(P[1], id, 2, 2, range_later);
	setval(id, 1, 32767);
	cr_assert_eq(fx_getncnt(root, id, 0), 1);
	cr_assert_eq(op(root, id, &wq, 1, &inc), 0);
	expect_woken(&wq, 1, c2, erange);
	EXPECT_VALS(id, 1, 32767);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);
}

/* Bulk wake-up: one +N releases N waiters in a single call, in FIFO order. */
Test(engine_semop, bulk_wakeup)
{
	int id = mkset(1);
	struct sv_sembuf dec = { 0, -1, 0 }, inc8 = { 0, 8, 0 }, inc5 = { 0, 5, 0 };
	struct sv_wakeq wq;

	for (int i = 0; i < 8; i++)
		park(P[i], id, 100 + i, 1, &dec);
	cr_assert_eq(op(root, id, &wq, 1, &inc8), 0);
	EXPECT_WOKEN(&wq, 100, 101, 102, 103, 104, 105, 106, 107);
	EXPECT_VALS(id, 0);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);

	for (int i = 0; i < 8; i++)
		park(P[i], id, 200 + i, 1, &dec);
	cr_assert_eq(op(root, id, &wq, 1, &inc5), 0);
	EXPECT_WOKEN(&wq, 200, 201, 202, 203, 204);
	cr_assert_eq(fx_getncnt(root, id, 0), 3);
	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(root, id, 0, SV_SETVAL, 3, &wq), 0);
	EXPECT_WOKEN(&wq, 205, 206, 207);
	EXPECT_VALS(id, 0);
}

/* IPC_RMID: every sleeper of the set, of every kind, completes with EIDRM; others are untouched. */
Test(engine_semop, rmid_wakes_all_with_eidrm)
{
	int id = mkset(3), other = mkset(1);
	struct sv_sembuf dec = { 0, -1, 0 }, zero = { 1, 0, 0 };
	struct sv_sembuf cdec[2] = { { 0, -1, 0 }, { 2, -1, 0 } },
			 czero[2] = { { 1, 0, 0 }, { 2, 0, 0 } };
	struct sv_sembuf odec = { 0, -1, 0 }, oinc = { 0, 1, 0 };
	struct sv_wakeq wq;
	struct sv_ns_info info;
	int res[8];

	setval(id, 1, 1);
	park(P[0], id, 1, 1, &dec);
	park(P[1], id, 2, 1, &zero);
	park(P[2], id, 3, 2, cdec);
	park(P[3], id, 4, 2, czero);
	park(P[4], other, 5, 1, &odec);
	sv_ns_info(fx_ns, &info);
	cr_assert_eq(info.nwaiters, 5);

	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_RMID, 0, &wq), 0);
	cr_assert_eq(fx_drain(&wq, res, NULL, 8), 4, "every sleeper of the set completes");
	for (int i = 0; i < 4; i++)
		cr_assert_eq(res[i], -EIDRM);
	sv_ns_info(fx_ns, &info);
	cr_assert_eq(info.nwaiters, 1);
	cr_assert_eq(op(root, other, &wq, 1, &oinc), 0);
	EXPECT_WOKEN(&wq, 5);
}

static int count_set(const struct sv_set_info *info, void *arg)
{
	(void)info;
	++*(int *)arg;
	return 0;
}

/*
 * The namespace dies (sv_ns_shutdown): every set goes, in one pass over many of them, every
 * sleeper of every set completes with EIDRM, and the namespace stays usable.
 */
Test(engine_semop, shutdown_removes_every_set)
{
	enum {
		NSETS = 2000
	};
	static int ids[NSETS];
	struct sv_sembuf dec = { 0, -1, 0 };
	struct sv_wakeq wq;
	struct sv_ns_info info;
	int res[4], nsets = 0;

	for (int i = 0; i < NSETS; i++)
		ids[i] = mkset(1 + i % 3);
	park(P[0], ids[0], 1, 1, &dec);
	park(P[1], ids[NSETS / 2], 2, 1, &dec);
	park(P[2], ids[NSETS - 1], 3, 1, &dec);

	sv_wakeq_init(&wq);
	sv_ns_shutdown(fx_ns, &wq);
	cr_assert_eq(fx_drain(&wq, res, NULL, 4), 3, "every sleeper completes");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(res[i], -EIDRM);
	sv_ns_for_each_set(fx_ns, count_set, &nsets);
	cr_assert_eq(nsets, 0, "%d sets left", nsets);
	for (int i = 0; i < NSETS; i += 97)
		cr_assert_eq(fx_getval(root, ids[i], 0), -EINVAL, "set %d still answers", ids[i]);
	sv_ns_info(fx_ns, &info);
	cr_assert_eq(info.nwaiters, 0);
	cr_assert_eq(info.nsets, 0);
	cr_assert_eq(fx_getval(root, mkset(1), 0), 0, "the namespace takes new sets");
}

/*
 * Merging: while a complex waiter sleeps, simple decrements wait on the set's queue; when the
 * last complex one leaves, they go back to their semaphores. Results and counts must not notice.
 */
Test(engine_semop, simple_and_complex_waiters_mixed)
{
	int id = mkset(2);
	struct sv_sembuf dec0 = { 0, -1, 0 }, dec1 = { 1, -1, 0 };
	struct sv_sembuf both[2] = { { 0, -1, 0 }, { 1, -1, 0 } };
	struct sv_sembuf inc0 = { 0, 1, 0 }, inc1 = { 1, 1, 0 };
	struct sv_wakeq wq;

	park(P[0], id, 1, 1, &dec0); /* simple, on semaphore 0's own queue */
	park(P[1], id, 2, 1, &dec1); /* simple, on semaphore 1's own queue */
	park(P[2], id, 3, 2, both);  /* complex: the simple ones move to the set's queue */
	park(P[3], id, 4, 1, &dec0); /* simple, queued on the set while complex mode lasts */
	cr_assert_eq(fx_getncnt(root, id, 0), 3);
	cr_assert_eq(fx_getncnt(root, id, 1), 1);

	cr_assert_eq(op(root, id, &wq, 1, &inc1), 0);
	EXPECT_WOKEN(&wq, 2);
	cr_assert_eq(op(root, id, &wq, 1, &inc1), 0);
	expect_none(&wq);
	cr_assert_eq(op(root, id, &wq, 1, &inc0), 0);
	EXPECT_WOKEN(&wq, 1);
	cr_assert_eq(fx_getncnt(root, id, 0), 2);
	cr_assert_eq(op(root, id, &wq, 1, &inc0), 0);
	EXPECT_WOKEN(&wq, 3);
	EXPECT_VALS(id, 0, 0);
	/* the last complex waiter is gone: waiter 4 is back on semaphore 0's own queue */
	cr_assert_eq(fx_getncnt(root, id, 0), 1);
	cr_assert_eq(fx_getncnt(root, id, 1), 0);
	/*
	 * Leave complex mode completely so the next V takes the simple path: every single-semaphore
	 * call made under the set lock counts the hysteresis down (whole-set calls restart it).
	 */
	for (int i = 0; i < 16; i++)
		cr_assert_eq(fx_getval(root, id, 1), 0);
	cr_assert_eq(op(root, id, &wq, 1, &inc0), 0);
	EXPECT_WOKEN(&wq, 4);
	EXPECT_VALS(id, 0, 0);
	cr_assert_eq(fx_getncnt(root, id, 0), 0);
}

/* A complex waiter arrives and is cancelled: the simple one it displaced must still be served. */
Test(engine_semop, unmerge_after_cancel)
{
	int id = mkset(3);
	struct sv_sembuf dec0 = { 0, -1, 0 }, dec2 = { 2, -1, 0 };
	struct sv_sembuf both[2] = { { 1, -1, 0 }, { 2, -1, 0 } };
	struct sv_sembuf inc0 = { 0, 1, 0 }, inc2 = { 2, 1, 0 };
	struct sv_wakeq wq;

	park(P[0], id, 1, 1, &dec0);
	park(P[1], id, 2, 1, &dec2);
	struct sv_waiter *c = park(P[2], id, 3, 2, both);

	cancel(c);
	cr_assert_eq(fx_getncnt(root, id, 1), 0);
	cr_assert_eq(fx_getncnt(root, id, 0), 1);
	cr_assert_eq(fx_getncnt(root, id, 2), 1);
	for (int round = 0; round < 2; round++) {
		/* round 0 right after (complex mode lingers), round 1 in simple mode */
		if (round == 1) {
			park(P[0], id, 1, 1, &dec0);
			park(P[1], id, 2, 1, &dec2);
			for (int i = 0; i < 16; i++)
				cr_assert_eq(fx_getval(root, id, 1), 0);
		}
		cr_assert_eq(op(root, id, &wq, 1, &inc2), 0);
		EXPECT_WOKEN(&wq, 2);
		cr_assert_eq(op(root, id, &wq, 1, &inc0), 0);
		EXPECT_WOKEN(&wq, 1);
		EXPECT_VALS(id, 0, 0, 0);
	}
}

/* A completing complex waiter that produces units restarts the scan for earlier waiters. */
Test(engine_semop, completion_releases_earlier_waiter)
{
	int id = mkset(3);
	struct sv_sembuf dec1 = { 1, -1, 0 };
	struct sv_sembuf move[2] = { { 0, -1, 0 }, { 1, 1, 0 } };
	struct sv_sembuf zero1[2] = { { 1, 0, 0 }, { 2, 0, 0 } };
	struct sv_sembuf inc0 = { 0, 1, 0 };
	struct sv_wakeq wq;

	park(P[0], id, 1, 1, &dec1); /* waits for a unit on 1 */
	park(P[1], id, 2, 2, move);  /* takes one from 0, gives one to 1 */
	setval(id, 1, 0);
	cr_assert_eq(op(root, id, &wq, 1, &inc0), 0);
	/* the V ran 2, whose unit on 1 let 1 run: both inside the V */
	EXPECT_WOKEN(&wq, 2, 1);
	EXPECT_VALS(id, 0, 0, 0);

	/* a simple decrement to zero releases a complex wait-for-zero */
	setval(id, 1, 1);
	park(P[2], id, 3, 2, zero1);
	cr_assert_eq(fx_getzcnt(root, id, 1), 1);
	cr_assert_eq(op(root, id, &wq, 1, &dec1), 0);
	EXPECT_WOKEN(&wq, 3);
	EXPECT_VALS(id, 0, 0, 0);
	cr_assert_eq(fx_getpid(root, id, 2), 1002);
}

/* Long operations (more sops than the engine copies on its stack) park and complete whole. */
Test(engine_semop, long_operation_parks)
{
	int id = mkset(4);
	static struct sv_sembuf sops[200];
	struct sv_sembuf inc3 = { 3, 1, 0 };
	struct sv_wakeq wq;

	for (int i = 0; i < 199; i++)
		sops[i] = (struct sv_sembuf){ (uint16_t)(i % 3), 1, 0 };
	sops[199] = (struct sv_sembuf){ 3, -1, 0 };
	park(P[0], id, 9, 200, sops);
	cr_assert_eq(fx_getncnt(root, id, 3), 1);
	EXPECT_VALS(id, 0, 0, 0, 0);
	cr_assert_eq(op(root, id, &wq, 1, &inc3), 0);
	EXPECT_WOKEN(&wq, 9);
	EXPECT_VALS(id, 67, 66, 66, 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(fx_getpid(root, id, i), 1000);
}
