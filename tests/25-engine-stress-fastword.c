/* SPDX-License-Identifier: MIT */
/*
 * The fast path's protocol in C (server/engine/fastword.h), checked as its Promela model is
 * (server/engine/model/fastpath.pml), with real atomics and real threads. One semaphore, used
 * as a lock with SEM_UNDO, starts at 1. A small emulated supervisor does take, give, the slow
 * calls (IPC_NOWAIT: no parking here), what it publishes, and the exit of a process. It is a
 * mutex and a few fields, as the engine will be for one word.
 *
 * - kill_at_each_step: an operation stopped before each of its steps, as a kill there would
 *   stop it. Then the process's exit runs, and the value must be back at 1.
 * - take_at_each_step: the supervisor takes the word before each step. The operation must then
 *   end FW_CALL if it had not reached A5, and FW_DONE if it had. Its call and exit must leave
 *   the value at 1.
 * - moved_storage: the two outcomes of the E2 question, one of them on a forged word.
 * - sempid_and_otime: a fast operation never changes sempid or otime; one that would goes to
 *   the supervisor, which records it as the kernel does.
 * - semadj_range: the ERANGE edges on the whole semadj, against the kernel's rule.
 * - garbage: what the supervisor decodes from words a program wrote.
 * - stress: threads run lives of lock/unlock, each life a new process with a new page. A life
 *   is killed at a random step now and then. A supervisor thread takes and gives the word at
 *   random. Mutual exclusion holds throughout, and at the end the value is 1 and every exit
 *   was applied without clamping.
 * - threads_share_a_page: the same with processes of two threads that share a page, and a
 *   kill that stops both; only the doomed thread's own call may end its doomed operation.
 * - scribbled_words: a program writes anything into the word while two others operate; their
 *   semadj stays exactly what their operations made, and no forged owner holds the word once
 *   every process is gone.
 *
 * `make test-tsan` runs this file under ThreadSanitizer.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/fastword.h"
#include "tests/lib/runner.h"

#define MAX_PAGES 4096

TestSuite(engine_fastword, .timeout = 60);

/* ---- the emulated supervisor: one semaphore's word, under a mutex ---- */

struct sup {
	pthread_mutex_t lock;
	_Atomic uint64_t word;
	struct fw_pub *pub;
	bool held;
	unsigned val;
	uint32_t gen;
	uint32_t sempid; /* the tag of the last operator: a page's, or 0 */
	int64_t otime;
	struct fw_page *page[MAX_PAGES];
	int doomed_slot[MAX_PAGES]; /* per page: its doomed slot, or -1 */
	int ndoomed;
	uint32_t refresh_next;	 /* the page the next SETVAL refreshes */
	int slow_adj[MAX_PAGES]; /* the engine's undo list of each page */
	atomic_int clamped;	 /* exits that needed clamping: conservation broken */
	uint64_t counted;	 /* fast operations the takes found counted in the word */
};

/* The time the emulated programs read, and the supervisor stamps. */
#define T0 1000 /* when a test starts */
static _Atomic int64_t test_clock = T0;

static int64_t read_test_clock(void)
{
	return atomic_load(&test_clock);
}

static void sup_init(struct sup *s, unsigned val)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	for (int i = 0; i < MAX_PAGES; i++)
		s->doomed_slot[i] = -1;
	s->pub = calloc(1, sizeof(*s->pub) + sizeof(s->pub->sem[0]));
	cr_assert_not_null(s->pub);
	atomic_store(&test_clock, T0);
	atomic_store(&s->word, fw_word(val, false, 0));
}

static void sup_fini(struct sup *s)
{
	free(s->pub);
	pthread_mutex_destroy(&s->lock);
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
	s->counted += t.count;
	s->held = true;
	/*
	 * An owner names a doomed operation only if its page is live: a program can write the
	 * owner of a page whose process is gone, and nothing would ever end that operation.
	 */
	if (fw_owner_of(t.own, MAX_PAGES, &page, &slot) && s->page[page] != NULL &&
	    s->doomed_slot[page] < 0) {
		s->doomed_slot[page] = (int)slot;
		s->ndoomed++;
	}
}

/* caller holds s->lock */
static void sup_give(struct sup *s)
{
	if (s->held && s->ndoomed == 0) {
		fw_publish(s->pub, 0, s->gen, s->sempid);
		fw_publish_otime(s->pub, s->otime);
		fw_give(&s->word, s->val);
		s->held = false;
	}
}

/* caller holds s->lock and the word: page's operation completed, as the kernel records it */
static void sup_operated(struct sup *s, uint32_t page)
{
	int64_t now = atomic_load(&test_clock);

	s->sempid = fw_tag(page);
	if (now > s->otime)
		s->otime = now;
}

/* caller holds s->lock and the word */
static void sup_set_slow_adj(struct sup *s, uint32_t page, int adj)
{
	s->slow_adj[page] = adj;
	if (s->page[page] != NULL)
		fw_mirror(s->page[page], 0, adj, s->gen);
}

/* caller holds s->lock and the word: the semadj the kernel would check */
static int sup_semadj(struct sup *s, uint32_t page)
{
	return s->slow_adj[page] + fw_entry_adj(atomic_load(&s->page[page]->adj[0].fast), s->gen);
}

/*
 * caller holds s->lock: a call of the thread of page's pending slot `slot` ends its doomed
 * operation, if it has one; slot -1: the process is gone, and with it any doomed operation.
 * Only the doomed thread's own call may end it: its restore is still to come until then.
 */
static void sup_resolve(struct sup *s, uint32_t page, int slot)
{
	if (s->doomed_slot[page] >= 0 && (slot < 0 || s->doomed_slot[page] == slot)) {
		s->doomed_slot[page] = -1;
		s->ndoomed--;
	}
}

/*
 * The trapped semop with SEM_UNDO and IPC_NOWAIT, by the thread of page's slot `slot`: 0,
 * -EAGAIN or -ERANGE, as the kernel.
 */
static int sup_call(struct sup *s, uint32_t page, int slot, int d)
{
	int rc = -EAGAIN;

	pthread_mutex_lock(&s->lock);
	sup_take(s);
	sup_resolve(s, page, slot);
	if (!fw_adj_ok(sup_semadj(s, page) - d)) {
		rc = -ERANGE;
	} else if ((int)s->val + d >= 0 && (int)s->val + d <= FW_SEMVMX) {
		s->val = (unsigned)((int)s->val + d);
		sup_set_slow_adj(s, page, s->slow_adj[page] - d);
		sup_operated(s, page);
		rc = 0;
	}
	sup_give(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* E2's question, from the thread of page's slot `slot`: did the A5 of its operation count? */
static bool sup_counted(struct sup *s, uint32_t page, int slot)
{
	bool counted;

	pthread_mutex_lock(&s->lock);
	counted = s->doomed_slot[page] != slot;
	pthread_mutex_unlock(&s->lock);
	return counted;
}

/* A new process's page, index `page`; its copy of the slow list's semadj is written first. */
static struct fw_page *sup_page_new(struct sup *s, uint32_t page)
{
	struct fw_page *pg = calloc(1, sizeof(*pg) + sizeof(pg->adj[0]));

	cr_assert_not_null(pg);
	pthread_mutex_lock(&s->lock);
	sup_take(s);
	s->page[page] = pg;
	sup_set_slow_adj(s, page, s->slow_adj[page]);
	sup_give(s);
	pthread_mutex_unlock(&s->lock);
	return pg;
}

/*
 * The exit of the page's process: its undo applied, and its tag published no more, so that
 * the index can be given again. Returns the semadj applied.
 */
static int sup_exit(struct sup *s, uint32_t page)
{
	struct fw_page *pg = s->page[page];
	uint64_t e;
	int adj, v;

	pthread_mutex_lock(&s->lock);
	sup_take(s);
	e = fw_settled_entry(pg, 0, s->doomed_slot[page]);
	sup_resolve(s, page, -1);
	adj = s->slow_adj[page] + fw_entry_adj(e, s->gen);
	s->slow_adj[page] = 0;
	s->page[page] = NULL;
	v = (int)s->val + adj;
	if (v < 0 || v > FW_SEMVMX) {
		atomic_fetch_add(&s->clamped, 1);
		v = v < 0 ? 0 : FW_SEMVMX;
	}
	s->val = (unsigned)v;
	if (adj != 0)
		s->sempid = fw_tag(page); /* the kernel's exit_sem() sets sempid */
	if (s->sempid == fw_tag(page))
		s->sempid = 0; /* the pid stays; the engine keeps it, without a page */
	sup_give(s);
	pthread_mutex_unlock(&s->lock);
	free(pg);
	return adj;
}

static unsigned sup_value(struct sup *s)
{
	unsigned v;

	pthread_mutex_lock(&s->lock);
	v = s->held ? s->val : fw_val(atomic_load(&s->word));
	pthread_mutex_unlock(&s->lock);
	return v;
}

/* One operation to its end, as the library will run it: DONE, or the call's result. */
static int op_run(struct sup *s, struct fw_op *op, uint32_t page, enum fw_result *how)
{
	enum fw_result r = fw_try(op);

	if (r == FW_ASK)
		r = sup_counted(s, page, (int)op->slot) ? (fw_done(op), FW_DONE) : fw_abandon(op);
	if (how != NULL)
		*how = r;
	if (r == FW_STOPPED)
		return -EINTR;
	return r == FW_DONE ? 0 : sup_call(s, page, (int)op->slot, op->d);
}

static struct fw_op op_for(struct sup *s, uint32_t page, int d)
{
	struct fw_op op = {
		.word = &s->word,
		.pub = s->pub,
		.page = s->page[page],
		.owner = fw_owner(page, 0),
		.tag = fw_tag(page),
		.clock = read_test_clock,
		.slot = 0,
		.semnum = 0,
		.d = d,
		.undo = true,
	};
	return op;
}

/* As if page's process had made the last operation on the semaphore, through the trapped call. */
static void sup_sempid(struct sup *s, uint32_t page)
{
	pthread_mutex_lock(&s->lock);
	sup_take(s);
	sup_operated(s, page);
	sup_give(s);
	pthread_mutex_unlock(&s->lock);
}

/*
 * A semaphore at val and one process, page 0, whose trapped operation made it sempid: the
 * state from which that process's operations take the fast path. Returns its page.
 */
static struct fw_page *sup_one_process(struct sup *s, unsigned val)
{
	struct fw_page *pg;

	sup_init(s, val);
	pg = sup_page_new(s, 0);
	sup_sempid(s, 0);
	return pg;
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
			struct at a = { .step = st, .s = &s };
			struct fw_op op;
			enum fw_result how;

			sup_one_process(&s, 1);
			if (unlock) {
				op = op_for(&s, 0, -1);
				cr_assert_eq(op_run(&s, &op, 0, &how), 0);
				cr_assert_eq(how, FW_DONE);
			}
			op = op_for(&s, 0, unlock ? 1 : -1);
			op.hook = at_step;
			op.hook_arg = &a;
			op_run(&s, &op, 0, &how);
			if (st != FW_AT_RESTORE) /* reached only by an operation undone */
				cr_assert_eq(how, FW_STOPPED, "step %d was not reached", st);
			sup_exit(&s, 0);
			cr_assert_eq(sup_value(&s), 1, "%s stopped before step %d: value %u",
				     unlock ? "unlock" : "lock", st, sup_value(&s));
			/* counted exactly when its value was applied: at A5, in the same exchange */
			cr_assert_eq(s.counted, (uint64_t)unlock + (st > FW_AT_A5),
				     "stopped before step %d: %llu counted", st,
				     (unsigned long long)s.counted);
			cr_assert_eq(atomic_load(&s.clamped), 0);
			cr_assert(!fw_slow(atomic_load(&s.word)), "the word is still held");
			sup_fini(&s);
		}
	}
}

Test(engine_fastword, take_at_each_step)
{
	for (enum fw_step st = FW_AT_A1; st <= FW_AT_A6; st++) {
		struct sup s;
		struct at a = { .step = st, .s = &s, .take = true };
		struct fw_page *pg;
		struct fw_op op;
		enum fw_result how;

		pg = sup_one_process(&s, 1);
		op = op_for(&s, 0, -1);
		op.hook = at_step;
		op.hook_arg = &a;
		cr_assert_eq(op_run(&s, &op, 0, &how), 0);
		cr_assert_eq(how, st <= FW_AT_A5 ? FW_CALL : FW_DONE, "taken before step %d: %d",
			     st, how);
		cr_assert_eq(sup_value(&s), 0);
		cr_assert_eq(s.counted, st > FW_AT_A5, "taken before step %d: %llu counted", st,
			     (unsigned long long)s.counted);
		/* the lock is held exactly once: by the entry or by the slow list */
		cr_assert_eq(fw_entry_adj(atomic_load(&pg->adj[0].fast), s.gen) + s.slow_adj[0], 1);
		cr_assert_eq(fw_copy_adj(atomic_load(&pg->adj[0].slow), s.gen), s.slow_adj[0]);
		cr_assert(!fw_pending_valid(atomic_load(&pg->slot[0].pending)));
		sup_exit(&s, 0);
		cr_assert_eq(sup_value(&s), 1);
		sup_fini(&s);
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
		struct forge f = { .s = &s, .forge = forged };
		struct fw_op op;

		f.pg = sup_one_process(&s, 1);
		op = op_for(&s, 0, -1);
		op.hook = forged ? move_at_a5 : move_at_e2;
		op.hook_arg = &f;
		cr_assert_eq(fw_try(&op), FW_ASK);
		if (forged) {
			/* the A5 landed on a word the supervisor had taken: it must not count */
			cr_assert(!sup_counted(&s, 0, 0));
			cr_assert_eq(fw_abandon(&op), FW_CALL);
			cr_assert_eq(atomic_load(&f.pg->adj[0].fast), op.old_entry);
			cr_assert_eq(sup_call(&s, 0, 0, -1), 0);
		} else {
			cr_assert(sup_counted(&s, 0, 0));
			fw_done(&op);
		}
		cr_assert(!fw_pending_valid(atomic_load(&f.pg->slot[0].pending)));
		cr_assert_eq(sup_value(&s), 0);
		sup_exit(&s, 0);
		cr_assert_eq(sup_value(&s), 1, "forged %d", forged);
		sup_fini(&s);
	}
}

/*
 * A fast operation that would not change the value and the semadj alone is the trapped call's:
 * it leaves the word free and as it was, and writes nothing into the page.
 */
static void assert_untouched(struct sup *s, struct fw_page *pg, uint64_t word, uint64_t entry)
{
	cr_assert_eq(atomic_load(&s->word), word, "the word changed: %#llx",
		     (unsigned long long)atomic_load(&s->word));
	cr_assert_eq(atomic_load(&pg->adj[0].fast), entry);
	cr_assert(!fw_pending_valid(atomic_load(&pg->slot[0].pending)));
}

/*
 * The count of fast operations in the word has 24 bits: a full one sends the operation to the
 * trapped call, leaving the word as it was, and the take of that call empties it.
 */
Test(engine_fastword, a_full_count)
{
	uint64_t full = fw_word(5, false, 0) | ((uint64_t)FW_CNT_MAX << FW_CNT_SHIFT);
	struct sup s;
	struct fw_page *pg;
	struct fw_op op;
	enum fw_result how;

	pg = sup_one_process(&s, 5);
	atomic_store(&s.word, full);
	op = op_for(&s, 0, -1);
	cr_assert_eq(fw_try(&op), FW_CALL);
	assert_untouched(&s, pg, full, 0);
	cr_assert_eq(sup_call(&s, 0, 0, -1), 0);
	cr_assert_eq(s.counted, FW_CNT_MAX);
	op = op_for(&s, 0, -1);
	cr_assert_eq(op_run(&s, &op, 0, &how), 0);
	cr_assert_eq(how, FW_DONE);
	cr_assert_eq(atomic_load(&s.word), fw_word(3, false, 0) | FW_CNT_ONE);
	sup_exit(&s, 0);
	cr_assert_eq(sup_value(&s), 5);
	cr_assert_eq(s.counted, (uint64_t)FW_CNT_MAX + 1);
	sup_fini(&s);
}

/*
 * sempid and otime, as the kernel keeps them: the fast path takes an operation only when it
 * would change neither. Another process's operation, or a new second, goes to the supervisor,
 * which records it; the next operation of the same process in the same second is fast.
 */
Test(engine_fastword, sempid_and_otime)
{
	struct sup s;
	struct fw_page *pg[2];
	struct fw_op op;
	enum fw_result how;

	sup_init(&s, 5);
	pg[0] = sup_page_new(&s, 0);
	pg[1] = sup_page_new(&s, 1);
	cr_assert_eq(s.sempid, 0);

	/* nobody has operated: sempid is 0 and otime too, both changed by the first operation */
	op = op_for(&s, 0, -1);
	cr_assert_eq(fw_try(&op), FW_CALL);
	assert_untouched(&s, pg[0], fw_word(5, false, 0), 0);
	cr_assert_eq(sup_call(&s, 0, 0, -1), 0);
	cr_assert_eq(s.sempid, fw_tag(0));
	cr_assert_eq(s.otime, T0);

	op = op_for(&s, 0, -1);
	cr_assert_eq(op_run(&s, &op, 0, &how), 0);
	cr_assert_eq(how, FW_DONE, "same process, same second");
	cr_assert_eq(sup_value(&s), 3);

	/* another process: sempid changes */
	op = op_for(&s, 1, 1);
	cr_assert_eq(fw_try(&op), FW_CALL);
	/* the word still counts page 0's fast operation since the give */
	assert_untouched(&s, pg[1], fw_word(3, false, 0) | FW_CNT_ONE, 0);
	cr_assert_eq(sup_call(&s, 1, 0, 1), 0);
	cr_assert_eq(s.sempid, fw_tag(1));
	op = op_for(&s, 1, 1);
	cr_assert_eq(op_run(&s, &op, 1, &how), 0);
	cr_assert_eq(how, FW_DONE);

	/* the next second: otime changes */
	atomic_store(&test_clock, T0 + 1);
	op = op_for(&s, 1, 1);
	cr_assert_eq(fw_try(&op), FW_CALL);
	cr_assert_eq(s.otime, T0);
	cr_assert_eq(sup_call(&s, 1, 0, 1), 0);
	cr_assert_eq(s.otime, T0 + 1);

	/* a clock set back: otime only moves forward, so the operation changes nothing */
	atomic_store(&test_clock, T0 - 50);
	op = op_for(&s, 1, -1);
	cr_assert_eq(op_run(&s, &op, 1, &how), 0);
	cr_assert_eq(how, FW_DONE);
	cr_assert_eq(s.otime, T0 + 1);
	cr_assert_eq(sup_value(&s), 5);

	/*
	 * Page 1's process exits with a semadj (-2): exit_sem() makes it sempid, and its index is
	 * given to a new process. The new one's first operation must change sempid.
	 */
	sup_exit(&s, 1);
	cr_assert_eq(sup_value(&s), 3);
	cr_assert_eq(fw_pub_tag(atomic_load(&s.pub->sem[0])), 0, "a dead page's tag is published");
	pg[1] = sup_page_new(&s, 1);
	op = op_for(&s, 1, 1);
	cr_assert_eq(fw_try(&op), FW_CALL);
	cr_assert_eq(sup_call(&s, 1, 0, 1), 0);
	cr_assert_eq(s.sempid, fw_tag(1));

	sup_exit(&s, 1);
	sup_exit(&s, 0);
	cr_assert_eq(sup_value(&s), 5);
	sup_fini(&s);
}

/* SETVAL by a process without a page: the value, a new generation, one page refreshed. */
static void sup_setval(struct sup *s, unsigned val, uint32_t npages)
{
	pthread_mutex_lock(&s->lock);
	sup_take(s);
	s->val = val;
	s->gen = (s->gen + 1) & FW_GEN_MASK;
	for (uint32_t p = 0; p < npages; p++)
		s->slow_adj[p] = 0;
	fw_refresh(s->page[s->refresh_next++ % npages], 0, s->gen);
	s->sempid = 0;
	sup_give(s);
	pthread_mutex_unlock(&s->lock);
}

/*
 * The generation wraps after 2^24 SETVALs: an entry written 2^24 generations ago must not
 * count again. Three pages hold a semadj of 5 (entry) and 7 (copy) under generation G; after
 * a SETVAL they count 0. Then the generation is set to just before G, as 2^24 - 1 more SETVALs
 * would leave it, and one more brings G back: nothing may count.
 */
Test(engine_fastword, generation_wrap)
{
	enum {
		PAGES = 3
	};
	const uint32_t g = FW_GEN_MASK - 1;
	struct sup s;

	sup_init(&s, 100);
	s.gen = g;
	for (uint32_t p = 0; p < PAGES; p++) {
		sup_page_new(&s, p);
		atomic_store(&s.page[p]->adj[0].fast, fw_entry(5, g));
		fw_mirror(s.page[p], 0, 7, g);
	}
	for (int i = 0; i < PAGES; i++)
		sup_setval(&s, 100, PAGES);
	for (uint32_t p = 0; p < PAGES; p++) {
		cr_assert_eq(fw_entry_adj(atomic_load(&s.page[p]->adj[0].fast), s.gen), 0);
		cr_assert(fw_entry_gen(atomic_load(&s.page[p]->adj[0].fast)) != g,
			  "page %u was not refreshed", p);
	}
	s.gen = (g - 1) & FW_GEN_MASK;
	sup_setval(&s, 100, PAGES);
	cr_assert_eq(s.gen, g);
	for (uint32_t p = 0; p < PAGES; p++) {
		struct fw_adj *a = &s.page[p]->adj[0];

		cr_assert_eq(fw_entry_adj(atomic_load(&a->fast), g), 0,
			     "page %u: an old entry counts", p);
		cr_assert_eq(fw_copy_adj(atomic_load(&a->slow), g), 0,
			     "page %u: an old copy counts", p);
	}
	for (uint32_t p = 0; p < PAGES; p++)
		sup_exit(&s, p);
	cr_assert_eq(sup_value(&s), 100);
	sup_fini(&s);
}

/* Without a test clock, the seconds of CLOCK_REALTIME, which time() reads too. */
Test(engine_fastword, real_clock)
{
	struct fw_op op = { .clock = NULL };
	int64_t before = time(NULL), now = fw_now(&op), after = time(NULL);

	/* the coarse clock is behind the precise one by at most a tick */
	cr_assert(now >= before - 1 && now <= after, "%lld not in [%lld, %lld]", (long long)now,
		  (long long)before - 1, (long long)after);
}

/*
 * One operation with SEM_UNDO, sem_op d, by a process whose semadj is `slow` in the
 * supervisor's list plus `fast` in its entry, run as the library runs it. Returns the call's
 * result; *how says whether the fast path took it. The value and the semadj after it must be
 * what that result says.
 */
static int range_case(int slow, int fast, int d, enum fw_result *how)
{
	unsigned v = d < 0 ? FW_SEMVMX : 0;
	struct sup s;
	struct fw_page *pg;
	struct fw_op op;
	int rc;

	pg = sup_one_process(&s, v);
	pthread_mutex_lock(&s.lock);
	sup_take(&s);
	sup_set_slow_adj(&s, 0, slow);
	atomic_store(&pg->adj[0].fast, fw_entry(fast, s.gen));
	sup_give(&s);
	pthread_mutex_unlock(&s.lock);

	op = op_for(&s, 0, d);
	rc = op_run(&s, &op, 0, how);
	cr_assert_eq(sup_value(&s), rc == 0 ? v + (unsigned)d : v);
	pthread_mutex_lock(&s.lock);
	sup_take(&s);
	cr_assert_eq(sup_semadj(&s, 0), rc == 0 ? slow + fast - d : slow + fast);
	/* no undo at exit: only the range is tested here */
	sup_set_slow_adj(&s, 0, 0);
	atomic_store(&pg->adj[0].fast, 0);
	sup_give(&s);
	pthread_mutex_unlock(&s.lock);
	sup_exit(&s, 0);
	sup_fini(&s);
	return rc;
}

/*
 * The kernel's ERANGE: semadj - sem_op outside [-32768, 32767], on the whole semadj (the slow
 * list's part and the fast entry). Every combination at and around the edges; the result
 * must be the kernel's, and a fast operation must never take one the kernel refuses.
 */
Test(engine_fastword, semadj_range)
{
	static const int fasts[] = { -32768, -32767, -20000, -1, 0, 1, 20000, 32766, 32767 };
	static const int slows[] = { -65535, -40000, -32768, -1, 0, 1, 32767, 40000, 65535 };
	static const int ds[] = { -32767, -2, -1, 1, 2, 32767 };
	int cases = 0, fast = 0, erange = 0;

	for (size_t f = 0; f < sizeof(fasts) / sizeof(fasts[0]); f++) {
		for (size_t l = 0; l < sizeof(slows) / sizeof(slows[0]); l++) {
			int whole = fasts[f] + slows[l];

			if (!fw_adj_ok(whole))
				continue; /* no process has such a semadj */
			for (size_t k = 0; k < sizeof(ds) / sizeof(ds[0]); k++) {
				int want = fw_adj_ok(whole - ds[k]) ? 0 : -ERANGE;
				enum fw_result how;
				int rc = range_case(slows[l], fasts[f], ds[k], &how);

				cr_assert_eq(rc, want, "semadj %d + %d, sem_op %d: %d, not %d",
					     slows[l], fasts[f], ds[k], rc, want);
				cases++;
				fast += how == FW_DONE;
				erange += rc == -ERANGE;
			}
		}
	}
	/* both ways were taken, and refusals happened */
	cr_assert(fast > 0 && fast < cases && erange > 0, "%d cases, %d fast, %d ERANGE", cases,
		  fast, erange);
}

Test(engine_fastword, garbage)
{
	_Atomic uint64_t w = UINT64_MAX;
	struct fw_taken t = fw_take(&w);
	uint32_t page;
	unsigned slot;
	struct fw_page *pg = calloc(1, sizeof(*pg) + 2 * sizeof(pg->adj[0]));

	cr_assert_not_null(pg);
	cr_assert_eq(t.val, FW_SEMVMX);
	cr_assert(t.was_slow);
	cr_assert(!fw_owner_of(t.own, 4, &page, &slot), "owner %u is no page's", t.own);
	cr_assert(!fw_owner_of(0, 4, &page, &slot));
	cr_assert(fw_owner_of(fw_owner(3, 63), 4, &page, &slot) && page == 3 && slot == 63);
	cr_assert_eq(fw_entry_adj(fw_entry(-32768, 5), 5), -32768);
	cr_assert_eq(fw_entry_adj(fw_entry(32767, 5), 5), 32767);
	cr_assert_eq(fw_entry_adj(fw_entry(-7, 5), 5), -7);
	cr_assert_eq(fw_entry_adj(fw_entry(-7, 5), 6), 0, "an older generation counts as 0");
	cr_assert_eq(fw_copy_adj(fw_copy(-65535, 5), 5), -65535);
	cr_assert_eq(fw_copy_adj(fw_copy(65535, FW_GEN_MASK), FW_GEN_MASK), 65535);
	cr_assert_eq(fw_copy_adj(fw_copy(7, 5), 6), 0);

	/* a pending record for another semaphore, or out of range, is not used */
	atomic_store(&pg->adj[1].fast, fw_entry(2, 0));
	atomic_store(&pg->slot[5].pending, fw_pending(1, 0, fw_entry(9, 0)));
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
	atomic_int fast; /* operations the fast path completed */
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
static int life_op(struct life *l, uint32_t page, int d)
{
	struct fw_op op;
	enum fw_result how;
	int rc;

	do {
		op = op_for(&l->st->s, page, d);
		op.hook = maybe_kill;
		op.hook_arg = l;
		rc = op_run(&l->st->s, &op, page, &how);
	} while (rc == -EAGAIN);
	if (how == FW_DONE)
		atomic_fetch_add(&l->st->fast, 1);
	return rc;
}

static void *stress_thread(void *arg)
{
	struct life *l = arg;
	struct stress *st = l->st;

	for (int life = 0; life < st->lives; life++) {
		uint32_t page = atomic_fetch_add(&st->next_page, 1);

		sup_page_new(&st->s, page);
		for (int i = 0; i < st->ops_per_life; i++) {
			if (life_op(l, page, -1) < 0)
				break;
			if (atomic_fetch_add(&st->inside, 1) != 0)
				atomic_fetch_add(&st->overlap, 1);
			atomic_fetch_sub(&st->inside, 1);
			if (life_op(l, page, 1) < 0)
				break;
		}
		/* killed, or done: the process exits either way */
		sup_exit(&st->s, page);
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

/*
 * What a stress run must end with, whatever was killed: the lock was never held twice, every
 * exit applied its semadj without clamping, the value is back at 1, nothing waits on a doomed
 * operation, and the fast path was taken at all.
 */
static void assert_lock_kept(struct stress *st)
{
	cr_assert_eq(atomic_load(&st->overlap), 0, "two threads held the lock at once");
	cr_assert_eq(atomic_load(&st->s.clamped), 0, "an exit needed clamping");
	cr_assert_eq(sup_value(&st->s), 1, "the value is %u after every process exited",
		     sup_value(&st->s));
	cr_assert_eq(st->s.ndoomed, 0);
	cr_assert_gt(atomic_load(&st->fast), 0, "no operation took the fast path");
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

	assert_lock_kept(&st);
	sup_fini(&st.s);
}

/* ---- threads sharing a page ---- */

/*
 * Processes of two threads each, which share the process's page (pending slots 0 and 1) and
 * undo list, as pthreads do. A kill stops both threads before their next step; the process
 * then exits and a new one, with a new page, takes its place. This is the model's THREADS
 * case: if a call of the other thread ended a doomed operation, the word could be given back
 * while the doomed thread has its restore still to do, and the restore would overwrite what
 * its sibling commits meanwhile (BUG_DOOMED).
 */
#define PROCS	 2
#define PER_PROC 2

struct tproc {
	struct stress *st;
	uint32_t page;
	atomic_bool killed;
};

struct tthread {
	struct tproc *pr;
	unsigned slot;
	unsigned seed;
	pthread_t th;
};

static int tthread_kill(void *arg, enum fw_step step)
{
	struct tthread *t = arg;

	(void)step;
	if (atomic_load(&t->pr->killed))
		return 1;
	if (rand_r(&t->seed) % 3000 != 0)
		return 0;
	atomic_store(&t->pr->killed, true);
	return 1;
}

/* sem_op d to its end, retrying while the lock is held elsewhere: 0, or -EINTR when killed. */
static int tthread_op(struct tthread *t, int d)
{
	struct stress *st = t->pr->st;
	struct fw_op op;
	enum fw_result how;
	int rc;

	do {
		if (atomic_load(&t->pr->killed))
			return -EINTR;
		op = op_for(&st->s, t->pr->page, d);
		op.owner = fw_owner(t->pr->page, t->slot);
		op.slot = t->slot;
		op.hook = tthread_kill;
		op.hook_arg = t;
		rc = op_run(&st->s, &op, t->pr->page, &how);
	} while (rc == -EAGAIN);
	if (how == FW_DONE)
		atomic_fetch_add(&st->fast, 1);
	return rc;
}

static void *tthread_main(void *arg)
{
	struct tthread *t = arg;
	struct stress *st = t->pr->st;

	for (int i = 0; i < st->ops_per_life; i++) {
		if (tthread_op(t, -1) < 0)
			break;
		if (atomic_fetch_add(&st->inside, 1) != 0)
			atomic_fetch_add(&st->overlap, 1);
		atomic_fetch_sub(&st->inside, 1);
		if (tthread_op(t, 1) < 0)
			break;
	}
	return NULL;
}

static void *tproc_lives(void *arg)
{
	struct stress *st = arg;
	struct tthread th[PER_PROC];
	struct tproc pr = { .st = st };

	for (int life = 0; life < st->lives; life++) {
		pr.page = atomic_fetch_add(&st->next_page, 1);
		atomic_store(&pr.killed, false);
		sup_page_new(&st->s, pr.page);
		for (unsigned k = 0; k < PER_PROC; k++) {
			th[k] = (struct tthread){ .pr = &pr, .slot = k, .seed = pr.page * 7 + k };
			cr_assert_eq(pthread_create(&th[k].th, NULL, tthread_main, &th[k]), 0);
		}
		for (unsigned k = 0; k < PER_PROC; k++)
			pthread_join(th[k].th, NULL);
		sup_exit(&st->s, pr.page); /* killed, or done: the process exits either way */
	}
	return NULL;
}

Test(engine_fastword, threads_share_a_page)
{
	static struct stress st;
	pthread_t procs[PROCS], touch;

	memset(&st, 0, sizeof(st));
	sup_init(&st.s, 1);
	st.lives = UNDER_TSAN ? 40 : 1000;
	st.ops_per_life = 200;
	cr_assert(st.lives * PROCS <= MAX_PAGES);
	cr_assert_eq(pthread_create(&touch, NULL, toucher, &st), 0);
	for (int i = 0; i < PROCS; i++)
		cr_assert_eq(pthread_create(&procs[i], NULL, tproc_lives, &st), 0);
	for (int i = 0; i < PROCS; i++)
		pthread_join(procs[i], NULL);
	atomic_store(&st.stop, true);
	pthread_join(touch, NULL);

	assert_lock_kept(&st);
	sup_fini(&st.s);
}

/* ---- a program that writes anything into the words ---- */

/*
 * What a program with the words mapped can do to others: set any value, make their fast
 * operations fail or vanish, keep the word held. What it must not be able to do: change
 * another process's semadj, make the supervisor hang, or leave the word held for good by
 * naming a process that is gone. Two victims, each a process of its own, do random +1/-1
 * with SEM_UNDO and count what their successful operations owe back; a scribbler writes
 * garbage, free-looking words, words naming a victim and words naming a dead process; a
 * supervisor thread takes and gives. At each victim's exit, the semadj applied must be what
 * it counted.
 */
struct scribble {
	struct stress st;
	uint32_t dead_page;
	atomic_int exits_wrong;
};

struct victim {
	struct scribble *sc;
	uint32_t page;
	unsigned seed;
	int owed; /* the semadj its successful operations made */
	long ops;
};

static void *victim_main(void *arg)
{
	struct victim *v = arg;
	struct sup *s = &v->sc->st.s;

	for (long i = 0; i < v->ops; i++) {
		int d = rand_r(&v->seed) % 2 ? 1 : -1;
		struct fw_op op = op_for(s, v->page, d);

		if (op_run(s, &op, v->page, NULL) == 0)
			v->owed -= d;
	}
	return NULL;
}

static void *scribbler(void *arg)
{
	struct scribble *sc = arg;
	_Atomic uint64_t *w = &sc->st.s.word;
	unsigned seed = 99;

	while (!atomic_load(&sc->st.stop)) {
		uint64_t r = ((uint64_t)rand_r(&seed) << 33) ^ ((uint64_t)rand_r(&seed) << 11) ^
			     (uint64_t)rand_r(&seed);
		unsigned v = (unsigned)r % 8;

		switch (rand_r(&seed) % 5) {
		case 0:
			atomic_store(w, r);
			break;
		case 1:
			atomic_store(w, fw_word(v, false, 0)); /* free, whoever holds it */
			break;
		case 2:
			atomic_store(w, fw_word(v, false, fw_owner(1 + (unsigned)r % 2, 0)));
			break;
		case 3:
			atomic_store(w, fw_word(v, r & 1, fw_owner(sc->dead_page, 0)));
			break;
		default:
			sched_yield();
			break;
		}
	}
	return NULL;
}

Test(engine_fastword, scribbled_words)
{
	static struct scribble sc;
	struct victim v[2];
	pthread_t vt[2], touch, scrib;

	memset(&sc, 0, sizeof(sc));
	sup_init(&sc.st.s, 4);
	sc.dead_page = 3;
	sup_page_new(&sc.st.s, sc.dead_page);
	sup_exit(&sc.st.s, sc.dead_page);
	for (int i = 0; i < 2; i++) {
		v[i] = (struct victim){ .sc = &sc,
					.page = 1 + (uint32_t)i,
					.seed = 5u + (unsigned)i,
					.ops = UNDER_TSAN ? 20000 : 200000 };
		sup_page_new(&sc.st.s, v[i].page);
		sup_sempid(&sc.st.s, v[i].page);
	}
	cr_assert_eq(pthread_create(&touch, NULL, toucher, &sc.st), 0);
	cr_assert_eq(pthread_create(&scrib, NULL, scribbler, &sc), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&vt[i], NULL, victim_main, &v[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(vt[i], NULL);
	atomic_store(&sc.st.stop, true);
	pthread_join(scrib, NULL);
	pthread_join(touch, NULL);

	for (int i = 0; i < 2; i++) {
		int applied = sup_exit(&sc.st.s, v[i].page);

		cr_assert_eq(applied, v[i].owed, "victim %d: semadj %d applied, %d owed", i,
			     applied, v[i].owed);
	}
	/* every process is gone: nothing may keep the word held */
	pthread_mutex_lock(&sc.st.s.lock);
	sup_take(&sc.st.s);
	cr_assert_eq(sc.st.s.ndoomed, 0, "an operation of a dead process is waited for");
	sup_give(&sc.st.s);
	cr_assert(!sc.st.s.held);
	cr_assert(sc.st.s.val <= FW_SEMVMX, "value %u", sc.st.s.val);
	pthread_mutex_unlock(&sc.st.s.lock);
	sup_fini(&sc.st.s);
}
