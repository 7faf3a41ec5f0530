/* SPDX-License-Identifier: MIT */
/*
 * The fast path's protocol in C (server/engine/fastword.h), checked as its Promela model is
 * (server/engine/model/fastpath.pml), with real atomics and real threads. One semaphore, used
 * as a lock with SEM_UNDO, starts at 1. A small emulated supervisor does take, give, the slow
 * calls (IPC_NOWAIT: no parking here) and the exit of a process. It is a mutex and a few
 * fields, as the engine will be for one word.
 *
 * - kill_at_each_step: an operation stopped before each of its steps, as a kill there would
 *   stop it. Then the process's exit runs, and the value must be back at 1.
 * - take_at_each_step: the supervisor takes the word before each step. The operation must then
 *   end FW_CALL if it had not reached A5, and FW_DONE if it had. Its call and exit must leave
 *   the value at 1.
 * - moved_storage: the two outcomes of the E2 question, one of them on a forged word.
 * - garbage: what the supervisor decodes from words a program wrote.
 * - stress: threads run lives of lock/unlock, each life a new process with a new page. A life
 *   is killed at a random step now and then. A supervisor thread takes and gives the word at
 *   random. Mutual exclusion holds throughout, and at the end the value is 1 and every exit
 *   was applied without clamping.
 *
 * `make test-tsan` runs this file under ThreadSanitizer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/fastword.h"
#include "tests/lib/runner.h"

#define MAX_PAGES 4096

TestSuite(engine_fastword, .timeout = 60);

/* ---- the emulated supervisor: one semaphore's word, under a mutex ---- */

struct sup {
	pthread_mutex_t lock;
	_Atomic uint64_t word;
	bool held;
	unsigned val;
	uint32_t gen;
	int doomed_slot[MAX_PAGES]; /* per page: its doomed slot, or -1 */
	int ndoomed;
	int slow_adj[MAX_PAGES]; /* the engine's undo list of each page */
	atomic_int clamped;	 /* exits that needed clamping: conservation broken */
};

static void sup_init(struct sup *s, unsigned val)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	for (int i = 0; i < MAX_PAGES; i++)
		s->doomed_slot[i] = -1;
	atomic_store(&s->word, fw_word(val, false, 0, 0));
}

/* caller holds s->lock */
static void sup_take(struct sup *s)
{
	struct fw_taken t;
	uint32_t page;
	unsigned slot;

	if (s->held)
		return;
	t = fw_take(&s->word);
	s->val = t.val;
	s->gen = t.gen;
	s->held = true;
	if (fw_owner_of(t.own, MAX_PAGES, &page, &slot) && s->doomed_slot[page] < 0) {
		s->doomed_slot[page] = (int)slot;
		s->ndoomed++;
	}
}

/* caller holds s->lock */
static void sup_give(struct sup *s)
{
	if (s->held && s->ndoomed == 0) {
		fw_give(&s->word, s->val, s->gen);
		s->held = false;
	}
}

/* caller holds s->lock: a call of page's thread ends its doomed operation, if any */
static void sup_resolve(struct sup *s, uint32_t page)
{
	if (s->doomed_slot[page] >= 0) {
		s->doomed_slot[page] = -1;
		s->ndoomed--;
	}
}

/* The trapped semop, with IPC_NOWAIT: 0 or -EAGAIN. */
static int sup_call(struct sup *s, uint32_t page, int d)
{
	int rc = -EAGAIN;

	pthread_mutex_lock(&s->lock);
	sup_take(s);
	sup_resolve(s, page);
	if ((int)s->val + d >= 0 && (int)s->val + d <= FW_SEMVMX) {
		s->val = (unsigned)((int)s->val + d);
		s->slow_adj[page] -= d;
		rc = 0;
	}
	sup_give(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* E2's question: did the A5 of page's operation count? */
static bool sup_counted(struct sup *s, uint32_t page)
{
	bool counted;

	pthread_mutex_lock(&s->lock);
	counted = s->doomed_slot[page] < 0;
	pthread_mutex_unlock(&s->lock);
	return counted;
}

/* The exit of the page's process: its undo applied. */
static void sup_exit(struct sup *s, uint32_t page, struct fw_page *pg)
{
	uint64_t e;
	int adj, v;

	pthread_mutex_lock(&s->lock);
	sup_take(s);
	e = fw_settled_entry(pg, 0, s->doomed_slot[page]);
	sup_resolve(s, page);
	adj = s->slow_adj[page] + fw_entry_adj(e, s->gen);
	s->slow_adj[page] = 0;
	v = (int)s->val + adj;
	if (v < 0 || v > FW_SEMVMX) {
		atomic_fetch_add(&s->clamped, 1);
		v = v < 0 ? 0 : FW_SEMVMX;
	}
	s->val = (unsigned)v;
	sup_give(s);
	pthread_mutex_unlock(&s->lock);
}

static unsigned sup_value(struct sup *s)
{
	unsigned v;

	pthread_mutex_lock(&s->lock);
	v = s->held ? s->val : fw_val(atomic_load(&s->word));
	pthread_mutex_unlock(&s->lock);
	return v;
}

static struct fw_page *page_new(unsigned nsems)
{
	struct fw_page *pg = calloc(1, sizeof(*pg) + nsems * sizeof(pg->entry[0]));

	cr_assert_not_null(pg);
	return pg;
}

/* One operation to its end, as the library will run it: DONE, or the call's result. */
static int op_run(struct sup *s, struct fw_op *op, uint32_t page, enum fw_result *how)
{
	enum fw_result r = fw_try(op);

	if (r == FW_ASK)
		r = sup_counted(s, page) ? (fw_finish(op), FW_DONE) : fw_abandon(op);
	if (how != NULL)
		*how = r;
	if (r == FW_STOPPED)
		return -EINTR;
	return r == FW_DONE ? 0 : sup_call(s, page, op->d);
}

static struct fw_op op_for(struct sup *s, struct fw_page *pg, uint32_t page, int d)
{
	struct fw_op op = {
		.word = &s->word,
		.page = pg,
		.owner = fw_owner(page, 0),
		.slot = 0,
		.semnum = 0,
		.d = d,
		.undo = true,
	};
	return op;
}

/* ---- one operation, stopped or taken before each step ---- */

struct at {
	enum fw_step step;
	struct sup *s;
	bool take; /* take the word there instead of stopping */
};

static int at_step(void *arg, enum fw_step step)
{
	struct at *a = arg;

	if (step != a->step)
		return 0;
	if (!a->take)
		return 1;
	pthread_mutex_lock(&a->s->lock);
	sup_take(a->s);
	pthread_mutex_unlock(&a->s->lock);
	return 0;
}

Test(engine_fastword, kill_at_each_step)
{
	for (int unlock = 0; unlock <= 1; unlock++) {
		for (enum fw_step st = FW_AT_A1; st < FW_STEPS; st++) {
			struct sup s;
			struct fw_page *pg = page_new(1);
			struct at a = { .step = st, .s = &s };
			struct fw_op op;

			sup_init(&s, 1);
			if (unlock) {
				op = op_for(&s, pg, 0, -1);
				cr_assert_eq(op_run(&s, &op, 0, NULL), 0);
			}
			op = op_for(&s, pg, 0, unlock ? 1 : -1);
			op.hook = at_step;
			op.hook_arg = &a;
			op_run(&s, &op, 0, NULL);
			sup_exit(&s, 0, pg);
			cr_assert_eq(sup_value(&s), 1, "%s stopped before step %d: value %u",
				     unlock ? "unlock" : "lock", st, sup_value(&s));
			cr_assert_eq(atomic_load(&s.clamped), 0);
			cr_assert(!fw_slow(atomic_load(&s.word)), "the word is still held");
			free(pg);
		}
	}
}

Test(engine_fastword, take_at_each_step)
{
	for (enum fw_step st = FW_AT_A1; st <= FW_AT_A6; st++) {
		struct sup s;
		struct fw_page *pg = page_new(1);
		struct at a = { .step = st, .s = &s, .take = true };
		struct fw_op op;
		enum fw_result how;

		sup_init(&s, 1);
		op = op_for(&s, pg, 0, -1);
		op.hook = at_step;
		op.hook_arg = &a;
		cr_assert_eq(op_run(&s, &op, 0, &how), 0);
		cr_assert_eq(how, st <= FW_AT_A5 ? FW_CALL : FW_DONE, "taken before step %d: %d",
			     st, how);
		cr_assert_eq(sup_value(&s), 0);
		/* the lock is held exactly once: by the entry or by the slow list */
		cr_assert_eq(fw_entry_adj(atomic_load(&pg->entry[0]), s.gen) + s.slow_adj[0], 1);
		cr_assert(!fw_pending_valid(atomic_load(&pg->pending[0])));
		sup_exit(&s, 0, pg);
		cr_assert_eq(sup_value(&s), 1);
		free(pg);
	}
}

/* The storage moved between A5 and E2: whether A5 counted is the supervisor's to say. */
struct forge {
	struct sup *s;
	struct fw_page *pg;
	bool forge; /* after the take, write the word back as the program left it */
};

static int move_at_a5(void *arg, enum fw_step step)
{
	struct forge *f = arg;
	uint64_t w;

	if (step != FW_AT_A5)
		return 0;
	w = atomic_load(&f->s->word);
	pthread_mutex_lock(&f->s->lock);
	atomic_fetch_add(&f->pg->epoch, 1);
	sup_take(f->s);
	pthread_mutex_unlock(&f->s->lock);
	if (f->forge)
		atomic_store(&f->s->word, w); /* a process that lost access, writing */
	return 0;
}

static int move_at_e2(void *arg, enum fw_step step)
{
	struct forge *f = arg;

	if (step == FW_AT_E2)
		atomic_fetch_add(&f->pg->epoch, 1);
	return 0;
}

Test(engine_fastword, moved_storage)
{
	for (int forged = 0; forged <= 1; forged++) {
		struct sup s;
		struct fw_page *pg = page_new(1);
		struct forge f = { .s = &s, .pg = pg, .forge = forged };
		struct fw_op op;

		sup_init(&s, 1);
		op = op_for(&s, pg, 0, -1);
		op.hook = forged ? move_at_a5 : move_at_e2;
		op.hook_arg = &f;
		cr_assert_eq(fw_try(&op), FW_ASK);
		if (forged) {
			/* the A5 landed on a word the supervisor had taken: it must not count */
			cr_assert(!sup_counted(&s, 0));
			cr_assert_eq(fw_abandon(&op), FW_CALL);
			cr_assert_eq(atomic_load(&pg->entry[0]), op.old_entry);
			cr_assert_eq(sup_call(&s, 0, -1), 0);
		} else {
			cr_assert(sup_counted(&s, 0));
			fw_finish(&op);
		}
		cr_assert(!fw_pending_valid(atomic_load(&pg->pending[0])));
		cr_assert_eq(sup_value(&s), 0);
		sup_exit(&s, 0, pg);
		cr_assert_eq(sup_value(&s), 1, "forged %d", forged);
		free(pg);
	}
}

Test(engine_fastword, garbage)
{
	_Atomic uint64_t w = UINT64_MAX;
	struct fw_taken t = fw_take(&w);
	uint32_t page;
	unsigned slot;
	struct fw_page *pg = page_new(2);

	cr_assert_eq(t.val, FW_SEMVMX);
	cr_assert(t.was_slow);
	cr_assert(!fw_owner_of(t.own, 4, &page, &slot), "owner %u is no page's", t.own);
	cr_assert(!fw_owner_of(0, 4, &page, &slot));
	cr_assert(fw_owner_of(fw_owner(3, 63), 4, &page, &slot) && page == 3 && slot == 63);
	cr_assert_eq(fw_entry_adj(fw_entry(-32768, 5), 5), -FW_SEMAEM);
	cr_assert_eq(fw_entry_adj(fw_entry(-7, 5), 5), -7);
	cr_assert_eq(fw_entry_adj(fw_entry(-7, 5), 6), 0, "an older generation counts as 0");

	/* a pending record for another semaphore, or out of range, is not used */
	atomic_store(&pg->entry[1], fw_entry(2, 0));
	atomic_store(&pg->pending[5], fw_pending(1, 0, fw_entry(9, 0)));
	cr_assert_eq(fw_settled_entry(pg, 1, 5), fw_entry(2, 0));
	cr_assert_eq(fw_settled_entry(pg, 1, 64), fw_entry(2, 0));
	cr_assert_eq(fw_settled_entry(pg, 0, 5), fw_entry(9, 0));
	cr_assert_eq(fw_frozen_entry(pg, 1, -1), fw_entry(2, 0));
	cr_assert_eq(fw_frozen_entry(pg, 0, 5), fw_entry(9, 0));
	free(pg);
}

/* ---- stress ---- */

#define THREADS 4

struct stress {
	struct sup s;
	atomic_int inside;  /* threads in the critical section */
	atomic_int overlap; /* times two were */
	atomic_uint next_page;
	atomic_bool stop;
	int lives;
	int ops_per_life;
};

struct life {
	struct stress *st;
	unsigned seed;
	unsigned kill_one_in; /* chance per step */
};

static int maybe_kill(void *arg, enum fw_step step)
{
	struct life *l = arg;

	(void)step;
	return rand_r(&l->seed) % l->kill_one_in == 0;
}

/* sem_op d to its end, retrying while the lock is held elsewhere: 0, or -EINTR when killed. */
static int life_op(struct life *l, struct fw_page *pg, uint32_t page, int d)
{
	struct fw_op op;
	int rc;

	do {
		op = op_for(&l->st->s, pg, page, d);
		op.hook = maybe_kill;
		op.hook_arg = l;
		rc = op_run(&l->st->s, &op, page, NULL);
	} while (rc == -EAGAIN);
	return rc;
}

static void *stress_thread(void *arg)
{
	struct life *l = arg;
	struct stress *st = l->st;

	for (int life = 0; life < st->lives; life++) {
		uint32_t page = atomic_fetch_add(&st->next_page, 1);
		struct fw_page *pg = page_new(1);

		for (int i = 0; i < st->ops_per_life; i++) {
			if (life_op(l, pg, page, -1) < 0)
				break;
			if (atomic_fetch_add(&st->inside, 1) != 0)
				atomic_fetch_add(&st->overlap, 1);
			atomic_fetch_sub(&st->inside, 1);
			if (life_op(l, pg, page, 1) < 0)
				break;
		}
		/* killed, or done: the process exits either way */
		sup_exit(&st->s, page, pg);
		free(pg);
	}
	return NULL;
}

static void *toucher(void *arg)
{
	struct stress *st = arg;
	unsigned seed = 7;

	while (!atomic_load(&st->stop)) {
		pthread_mutex_lock(&st->s.lock);
		sup_take(&st->s);
		if (rand_r(&seed) % 4 == 0)
			sup_give(&st->s);
		pthread_mutex_unlock(&st->s.lock);
		pthread_mutex_lock(&st->s.lock);
		sup_give(&st->s);
		pthread_mutex_unlock(&st->s.lock);
	}
	return NULL;
}

Test(engine_fastword, stress)
{
	static struct stress st;
	struct life lives[THREADS];
	pthread_t th[THREADS], touch;

	memset(&st, 0, sizeof(st));
	sup_init(&st.s, 1);
	st.lives = UNDER_TSAN ? 60 : 400;
	st.ops_per_life = 200;
	cr_assert(st.lives * THREADS <= MAX_PAGES);
	cr_assert_eq(pthread_create(&touch, NULL, toucher, &st), 0);
	for (int i = 0; i < THREADS; i++) {
		lives[i] =
		    (struct life){ .st = &st, .seed = 11u + (unsigned)i, .kill_one_in = 4000 };
		cr_assert_eq(pthread_create(&th[i], NULL, stress_thread, &lives[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&st.stop, true);
	pthread_join(touch, NULL);

	cr_assert_eq(atomic_load(&st.overlap), 0, "two threads held the lock at once");
	cr_assert_eq(atomic_load(&st.s.clamped), 0, "an exit needed clamping");
	cr_assert_eq(sup_value(&st.s), 1, "the value is %u after every process exited",
		     sup_value(&st.s));
	cr_assert_eq(st.s.ndoomed, 0);
}
