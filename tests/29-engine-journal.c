/* SPDX-License-Identifier: MIT */
/*
 * The journal (journal.c): a history of every kind of change made with a journal attached,
 * replayed record by record into fresh namespaces, must give the same state as the original
 * (sets, ids, values, sempids, permissions, times, limits, sem_next_id), the same SEM_UNDO
 * entries (the processes' exits adjust both the same way), and the same results for the calls
 * it names. And the journal as input: a zero header ends it, a damaged record is refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/fixture.h"
#include "tests/lib/jsink.h"

#define NSKEY 0x7e57
#define KEY   0x10a1

static struct sv_ns *ns;
static struct js_sink *sink;
static uint64_t next_jid = 1;

static void setup(void)
{
	sv_thread_register();
	ns = sv_ns_new(NULL);
	cr_assert_not_null(ns);
	sv_ns_set_jkey(ns, NSKEY);
	sink = js_start();
}

static void teardown(void)
{
	sv_journal_attach(NULL);
	sv_ns_put(ns);
	js_free(sink);
	sv_thread_unregister();
}

TestSuite(engine_journal, .init = setup, .fini = teardown, .timeout = 60);

/* Results of the calls that changed something, to be found again in the replay. */
static struct {
	uint64_t jid;
	int64_t result;
} expect[512];
static int nexpect;

static void expect_done(uint64_t jid, int64_t result)
{
	cr_assert_lt(nexpect, 512);
	expect[nexpect].jid = jid;
	expect[nexpect++].result = result;
}

static struct fx_caller *caller(int32_t pid, uint32_t uid)
{
	struct fx_caller *fc = fx_caller_new(ns, pid, uid, uid);

	sv_proc_set_jkey(fc->c.proc, 0x900000000ull + (uint64_t)pid);
	return fc;
}

/* Each call under a journal id of its own. */
static uint64_t name(struct fx_caller *fc)
{
	return fc->c.jid = next_jid++;
}

static int mkset(struct fx_caller *fc, int32_t key, int nsems, int flg)
{
	uint64_t jid = name(fc);
	long id = sv_semget(&fc->c, key, nsems, flg);

	cr_assert_geq(id, 0, "semget: %ld", id);
	expect_done(jid, id);
	return (int)id;
}

static void ctl(struct fx_caller *fc, int id, int semnum, int cmd, uint64_t arg)
{
	uint64_t jid = name(fc);

	cr_assert_eq(fx_semctl(fc, id, semnum, cmd, arg, NULL), 0);
	expect_done(jid, 0);
}

static void op(struct fx_caller *fc, int id, unsigned int nsops, const struct sv_sembuf *sops)
{
	uint64_t jid = name(fc);

	cr_assert_eq(fx_semop(fc, id, NULL, NULL, nsops, sops), 0);
	expect_done(jid, 0);
}

/* Calls the replay names, each once however often it was done and undone. */
static size_t distinct_calls(const struct js_calls *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n; i++) {
		size_t k = 0;

		while (k < i && c->jid[k] != c->jid[i])
			k++;
		n += k == i;
	}
	return n;
}

static void same(struct sv_ns *a, struct sv_ns *b)
{
	char why[256] = "";

	cr_assert_eq(js_diff(a, b, why, sizeof(why)), 0, "%s", why);
}

/* The history: every kind of change there is. */
static void history(struct fx_caller *root, struct fx_caller *user, struct fx_caller *gone)
{
	int ids[12];
	struct sv_sembuf undo_op[] = { { 0, -1, SV_SEM_UNDO }, { 1, 2, SV_SEM_UNDO } };

	for (int i = 0; i < 70; i++) /* ids past their first cycle */
		ctl(root, mkset(root, SV_IPC_PRIVATE, 1, 0600), 0, SV_IPC_RMID, 0);
	for (int i = 0; i < 12; i++) {
		struct fx_caller *fc = i % 3 ? root : user;

		ids[i] = mkset(fc, i % 2 ? KEY + i : SV_IPC_PRIVATE, 2 + i % 5,
			       SV_IPC_CREAT | (const int[]){ 0600, 0644, 0666, 0400 }[i % 4]);
	}
	for (int i = 0; i < 12; i += 4)
		ctl(root, ids[i], 0, SV_IPC_RMID, 0);
	for (int i = 1; i < 12; i++) {
		if (i % 4 == 0)
			continue;
		ctl(root, ids[i], 0, SV_SETVAL, (uint64_t)(3 * i));
		op(root, ids[i], SOPS({ 0, -1, 0 }));
	}
	{
		uint16_t vals[6] = { 5, 6, 7, 8, 9, 10 }; /* ids[9] has 2 + 9 % 5 */

		ctl(root, ids[9], 0, SV_SETALL, (uint64_t)(uintptr_t)vals);
	}
	/* adjust-on-exit entries for three processes, one of them cleared by SETVAL */
	op(user, ids[2], 2, undo_op);
	op(gone, ids[2], 2, undo_op);
	op(gone, ids[9], 2, undo_op);
	op(root, ids[3], 2, undo_op);
	ctl(root, ids[3], 1, SV_SETVAL, 4);
	/* a process exits: its entries are applied */
	{
		struct sv_wakeq wq;

		sv_wakeq_init(&wq);
		sv_proc_exit(gone->c.proc, &wq);
		cr_assert(sv_wakeq_empty(&wq));
	}
	/* IPC_SET */
	{
		uint32_t ds[26] = { 0 };

		cr_assert_eq(fx_semctl(root, ids[5], 0, SV_IPC_STAT, (uint64_t)(uintptr_t)ds, NULL),
			     0);
		ds[1] = 4242;
		ds[5] = 0640;
		ctl(root, ids[5], 0, SV_IPC_SET, (uint64_t)(uintptr_t)ds);
	}
	/* a parked call completed by another's call: both named */
	{
		struct sv_park park = { .jid = next_jid++ };
		struct sv_wakeq wq;
		uint64_t waker;
		int res[1];

		sv_wakeq_init(&wq);
		ctl(root, ids[6], 1, SV_SETVAL, 0);
		user->c.jid = 0;
		cr_assert_eq(fx_semop(user, ids[6], &park, NULL, SOPS({ 1, -2, SV_SEM_UNDO })),
			     SV_PARKED);
		waker = name(root);
		cr_assert_eq(fx_semop(root, ids[6], NULL, &wq, SOPS({ 1, 3, 0 })), 0);
		cr_assert_eq(fx_drain(&wq, res, NULL, 1), 1);
		cr_assert_eq(res[0], 0);
		expect_done(waker, 0);
		expect_done(park.jid, 0);
	}
	/* a parked call completed, then taken back (its caller was gone): undone */
	{
		struct sv_park park = { .jid = next_jid++ };
		struct sv_wakeq wq, wq2;
		struct sv_waiter *w;
		uint64_t waker;

		sv_wakeq_init(&wq);
		sv_wakeq_init(&wq2);
		user->c.jid = 0;
		cr_assert_eq(fx_semop(user, ids[6], &park, NULL, SOPS({ 0, -50, 0 })), SV_PARKED);
		waker = name(root);
		cr_assert_eq(fx_semop(root, ids[6], NULL, &wq, SOPS({ 0, 60, 0 })), 0);
		expect_done(waker, 0);
		w = sv_wakeq_pop(&wq);
		cr_assert_eq(w, park.waiter);
		cr_assert_eq(sv_waiter_result(w), 0);
		cr_assert_eq(sv_waiter_rollback(w, &wq2), 0);
		cr_assert(sv_wakeq_empty(&wq2));
		sv_waiter_free(w);
		expect_done(park.jid, SV_JNL_UNDONE);
	}
	/* a call done, then reverted because its answer could not be delivered */
	{
		struct sv_sembuf up[] = { { 0, 2, SV_SEM_UNDO }, { 1, 1, 0 } };
		struct sv_wakeq wq;
		uint64_t jid = name(user);

		sv_wakeq_init(&wq);
		cr_assert_eq(fx_semop(user, ids[10], NULL, NULL, 2, up), 0);
		cr_assert_eq(sv_semop_revert(&user->c, ids[10], up, 2, &wq), 0);
		cr_assert(sv_wakeq_empty(&wq));
		expect_done(jid, SV_JNL_UNDONE);
	}
	/* limits and sem_next_id */
	{
		struct sv_limits lim = { 250, 64000, 100, 128 };

		cr_assert_eq(sv_ns_set_limits(ns, &lim), 0);
		sv_ns_set_next_id(ns, 5 * SV_IPCMNI + 17);
	}
}

Test(engine_journal, history_replays_exactly)
{
	struct fx_caller *root = caller(100, 0), *user = caller(200, 1000), *gone = caller(300, 0);
	uint64_t key = NSKEY;
	struct js_target t;
	struct sv_wakeq wq;

	history(root, user, gone);
	js_stop(sink);
	cr_assert_gt(sink->nrec, 100);

	js_target_init(&t, 1, &key);
	cr_assert_eq(js_replay(sink, &t, NULL, NULL), (long)sink->len);
	same(ns, t.ns[0]);
	for (int i = 0; i < nexpect; i++) {
		int64_t r;

		cr_assert_eq(js_call(&t.calls, expect[i].jid, &r), 0, "call %lu not in the journal",
			     (unsigned long)expect[i].jid);
		cr_assert_eq(r, expect[i].result, "call %lu: %ld, not %ld",
			     (unsigned long)expect[i].jid, (long)r, (long)expect[i].result);
	}
	cr_assert_eq(distinct_calls(&t.calls), (size_t)nexpect,
		     "the journal names calls nobody made");

	/* the same adjustments at exit: the undo entries came back as they were */
	cr_assert_not_null(js_target_proc(&t, 0x900000000ull + 100));
	cr_assert_not_null(js_target_proc(&t, 0x900000000ull + 200));
	sv_wakeq_init(&wq);
	sv_proc_exit(root->c.proc, &wq);
	sv_proc_exit(user->c.proc, &wq);
	sv_proc_exit(js_target_proc(&t, 0x900000000ull + 100), &wq);
	sv_proc_exit(js_target_proc(&t, 0x900000000ull + 200), &wq);
	cr_assert(sv_wakeq_empty(&wq));
	same(ns, t.ns[0]);

	/* the next set gets the same id in both: sem_next_id, then the cyclic search */
	for (int i = 0; i < 3; i++) {
		struct fx_caller *a = fx_caller_new(ns, 400, 0, 0);
		struct fx_caller *b = fx_caller_new(t.ns[0], 400, 0, 0);

		cr_assert_eq(sv_semget(&a->c, SV_IPC_PRIVATE, 1, 0600),
			     sv_semget(&b->c, SV_IPC_PRIVATE, 1, 0600));
		fx_caller_exit(a, NULL);
		fx_caller_exit(b, NULL);
	}
	js_target_fini(&t);
	fx_caller_exit(root, NULL);
	fx_caller_exit(user, NULL);
	fx_caller_exit(gone, NULL);
}

/* Every prefix replays: a crash after any record leaves a journal the replay takes whole. */
Test(engine_journal, every_prefix_replays)
{
	struct fx_caller *root = caller(100, 0), *user = caller(200, 1000), *gone = caller(300, 0);
	uint64_t key = NSKEY;
	size_t off = 0, n = 0;

	history(root, user, gone);
	js_stop(sink);
	for (;;) {
		struct js_sink cut = *sink;
		struct js_target t;
		uint32_t len;

		cut.len = off;
		js_target_init(&t, 1, &key);
		cr_assert_eq(js_replay(&cut, &t, NULL, NULL), (long)off, "prefix of %zu records",
			     n);
		js_target_fini(&t);
		if (off == sink->len)
			break;
		memcpy(&len, sink->buf + off, 4);
		off += len;
		n++;
	}
	cr_assert_eq(n, sink->nrec);
	fx_caller_exit(root, NULL);
	fx_caller_exit(user, NULL);
	fx_caller_exit(gone, NULL);
}

/* Records of a namespace the reader no longer keeps are skipped, not refused. */
Test(engine_journal, unknown_namespace_is_skipped)
{
	struct fx_caller *root = caller(100, 0), *user = caller(200, 1000), *gone = caller(300, 0);
	uint64_t other = NSKEY + 1;
	struct js_target t;
	struct sv_ns_info info;

	history(root, user, gone);
	js_stop(sink);
	js_target_init(&t, 1, &other);
	cr_assert_eq(js_replay(sink, &t, NULL, NULL), (long)sink->len);
	sv_ns_info(t.ns[0], &info);
	cr_assert_eq(info.nsets, 0);
	/* the calls are still named: whatever namespace they were in, they were done */
	cr_assert_eq(distinct_calls(&t.calls), (size_t)nexpect);
	js_target_fini(&t);
	fx_caller_exit(root, NULL);
	fx_caller_exit(user, NULL);
	fx_caller_exit(gone, NULL);
}

/* A zero header ends the journal; anything else that is not a record is refused. */
Test(engine_journal, damaged_records_are_refused)
{
	struct fx_caller *root = caller(100, 0);
	uint64_t key = NSKEY;
	struct js_target t;
	unsigned char *buf;
	uint32_t len;
	int id;

	id = mkset(root, SV_IPC_PRIVATE, 3, 0600);
	ctl(root, id, 2, SV_SETVAL, 7);
	js_stop(sink);
	buf = malloc(sink->len + 8);
	cr_assert_not_null(buf);

	/* what follows a zero header is not read */
	memcpy(buf, sink->buf, sink->len);
	memcpy(&len, buf, 4);
	memset(buf + len, 0, 8);
	js_target_init(&t, 1, &key);
	cr_assert_eq(sv_journal_replay(buf, sink->len, &t.r), (long)len);
	js_target_fini(&t);

	/* a bad magic, a length past the end, a length not a multiple of 8 */
	for (int k = 0; k < 3; k++) {
		memcpy(buf, sink->buf, sink->len);
		if (k == 0)
			buf[4] ^= 1;
		else if (k == 1)
			*(uint32_t *)buf = (uint32_t)sink->len + 8;
		else
			*(uint32_t *)buf += 4;
		js_target_init(&t, 1, &key);
		cr_assert_eq(sv_journal_replay(buf, sink->len, &t.r), -EINVAL, "case %d", k);
		js_target_fini(&t);
	}

	/* the second record (SETVAL) without the first: its set is not there */
	memcpy(&len, sink->buf, 4);
	js_target_init(&t, 1, &key);
	cr_assert_eq(sv_journal_replay(sink->buf + len, sink->len - len, &t.r), -EINVAL);
	js_target_fini(&t);

	/* every byte of the items changed in turn: refused or applied, never a crash */
	for (size_t i = 8; i < sink->len; i++) {
		memcpy(buf, sink->buf, sink->len);
		buf[i] ^= 0x5a;
		js_target_init(&t, 1, &key);
		(void)sv_journal_replay(buf, sink->len, &t.r);
		js_target_fini(&t);
	}
	free(buf);
	fx_caller_exit(root, NULL);
}
