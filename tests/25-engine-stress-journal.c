/* SPDX-License-Identifier: MIT */
/*
 * The journal under concurrency: threads, each a process of its own, move units between the
 * semaphores of two sets (simple and complex operations, with and without SEM_UNDO) while a
 * journal records every change. Moving units conserves their sum, so every prefix of the journal
 * must replay to a state with the same sum: a record that carried half of an operation, or
 * records of one semaphore out of order, would show as units made or lost at some prefix. The
 * whole journal must replay to exactly the state the threads left, exits included, and name
 * every call that changed something.
 *
 * `make test-tsan` runs this file under ThreadSanitizer, with the iteration counts scaled down.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tests/lib/fixture.h"
#include "tests/lib/jsink.h"
#include "tests/lib/runner.h"

#define ITERS(n) (UNDER_TSAN ? (n) / 4 : (n))

#define NSKEY	0x5eed
#define NTHR	4
#define NSEMS	6
#define INITIAL 20

static struct sv_ns *ns;
static struct js_sink *sink;
static int ids[2];
static atomic_ullong next_jid = 1;

struct worker {
	pthread_t tid;
	struct fx_caller *fc;
	unsigned int seed;
	int iters;
	long done; /* calls that went through */
};

static void *work(void *arg)
{
	struct worker *w = arg;

	sv_thread_register();
	for (int i = 0; i < w->iters; i++) {
		unsigned int r = (unsigned int)rand_r(&w->seed);
		int id = ids[r % 2];
		uint16_t a = (uint16_t)((r >> 1) % NSEMS), b = (uint16_t)((r >> 4) % NSEMS);
		int16_t k = (int16_t)(1 + (r >> 7) % 3);
		int16_t flg = (int16_t)(SV_IPC_NOWAIT | ((r >> 9) % 2 ? SV_SEM_UNDO : 0));
		struct sv_sembuf sops[3] = { { a, (int16_t)-k, flg }, { b, k, flg }, { 0, 0, 0 } };
		unsigned int n = 2;
		long ret;

		if (a == b)
			n = 1, sops[0].sem_op = 0; /* wait-for-zero, at once or EAGAIN */
		else if ((r >> 10) % 4 == 0) {
			/* a three-way move: complex mode for the set */
			uint16_t c = (uint16_t)((a + b) % NSEMS);

			if (c != a && c != b) {
				sops[1].sem_op = (int16_t)(k - 1);
				sops[2] = (struct sv_sembuf){ c, 1, flg };
				n = 3;
			}
		}
		w->fc->c.jid = atomic_fetch_add(&next_jid, 1);
		ret = fx_semop(w->fc, id, NULL, NULL, n, sops);
		if (ret == 0)
			w->done++;
		else if (ret != 0 && ret != -EAGAIN && ret != -ERANGE)
			abort();
	}
	sv_thread_unregister();
	return NULL;
}

static int sum(struct sv_ns *in)
{
	struct sv_sem_info sems[NSEMS];
	struct sv_set_info info;
	int total = 0;

	for (int s = 0; s < 2; s++) {
		if (sv_ns_show_set(in, ids[s], &info, sems, NSEMS) != NSEMS)
			return -1;
		for (int i = 0; i < NSEMS; i++)
			total += sems[i].semval;
	}
	return total;
}

struct prefix_check {
	size_t from; /* records before this are the set-up */
	size_t checked;
	int bad_total;
	size_t bad_at;
};

static void check_sum(struct js_target *t, size_t rec, void *arg)
{
	struct prefix_check *pc = arg;
	int total;

	if (rec + 1 < pc->from || pc->bad_total)
		return;
	total = sum(t->ns[0]);
	pc->checked++;
	if (total != 2 * NSEMS * INITIAL) {
		pc->bad_total = total ? total : -1;
		pc->bad_at = rec;
	}
}

Test(engine_stress_journal, every_prefix_conserves, .timeout = 300)
{
	struct worker w[NTHR];
	struct fx_caller *root;
	struct prefix_check pc = { 0 };
	uint64_t key = NSKEY;
	struct js_target t;
	uint16_t vals[NSEMS];
	long done = 0;
	char why[256] = "";

	sv_thread_register();
	ns = sv_ns_new(NULL);
	cr_assert_not_null(ns);
	sv_ns_set_jkey(ns, NSKEY);
	sink = js_start();
	root = fx_caller_new(ns, 1, 0, 0);
	for (int i = 0; i < NSEMS; i++)
		vals[i] = INITIAL;
	for (int s = 0; s < 2; s++) {
		ids[s] = (int)sv_semget(&root->c, SV_IPC_PRIVATE, NSEMS, 0600);
		cr_assert_geq(ids[s], 0);
		cr_assert_eq(fx_semctl(root, ids[s], 0, SV_SETALL, (uint64_t)(uintptr_t)vals, NULL),
			     0);
	}
	pc.from = sink->nrec;

	for (int i = 0; i < NTHR; i++) {
		w[i] = (struct worker){ .seed = 77u + (unsigned int)i, .iters = ITERS(20000) };
		w[i].fc = fx_caller_new(ns, 1000 + i, 0, 0);
		sv_proc_set_jkey(w[i].fc->c.proc, 0xabc0000ull + (uint64_t)i);
		cr_assert_eq(pthread_create(&w[i].tid, NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < NTHR; i++) {
		pthread_join(w[i].tid, NULL);
		done += w[i].done;
	}
	cr_assert_eq(sum(ns), 2 * NSEMS * INITIAL);
	cr_assert_gt(done, NTHR * ITERS(20000) / 4, "too few operations went through: %ld", done);

	/* every prefix up to here conserves: replay record by record, sum after each */
	js_stop(sink);
	js_target_init(&t, 1, &key);
	cr_assert_eq(js_replay(sink, &t, check_sum, &pc), (long)sink->len);
	cr_assert_eq(pc.bad_total, 0, "after record %zu the units add up to %d, not %d", pc.bad_at,
		     pc.bad_total, 2 * NSEMS * INITIAL);
	cr_assert_eq(pc.checked, sink->nrec - pc.from + 1);
	cr_assert_eq(js_diff(ns, t.ns[0], why, sizeof(why)), 0, "%s", why);
	js_target_fini(&t);

	/* then the exits, journaled too: their adjustments replay the same way */
	sv_journal_attach(&sink->j);
	for (int i = 0; i < NTHR; i++)
		fx_caller_exit(w[i].fc, NULL);
	js_stop(sink);
	js_target_init(&t, 1, &key);
	cr_assert_eq(js_replay(sink, &t, NULL, NULL), (long)sink->len);
	cr_assert_eq(js_diff(ns, t.ns[0], why, sizeof(why)), 0, "%s", why);
	/* every call that went through is named once, with 0 */
	cr_assert_eq(t.calls.n, (size_t)done);
	for (size_t i = 0; i < t.calls.n; i++)
		cr_assert_eq(t.calls.result[i], 0);
	js_target_fini(&t);

	fx_caller_exit(root, NULL);
	sv_ns_put(ns);
	js_free(sink);
	sv_thread_unregister();
}
