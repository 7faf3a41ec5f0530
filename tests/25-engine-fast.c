/* SPDX-License-Identifier: MIT */
/*
 * The engine with fast storage (server/engine/fast.c): programs change values through the
 * words sv_fast_map() hands out, with fastword.h's steps, while trapped calls go through the
 * engine. Every reader must see what the kernel would show after the same operations done as
 * system calls: values, sempid, ERANGE at the semadj's edge, semadj undone at exit, SETVAL
 * clearing it, wake-ups of parked callers. The expected values are the kernel's semop rules
 * worked by hand in each test's comment (tests/24 compares the engine itself with the kernel).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/fastmem.h"
#include "tests/lib/fixture.h"

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

TestSuite(engine_fast, .init = setup, .fini = teardown, .timeout = 60);

static void prog_map(struct fx_fast *p, struct fx_caller *fc, int id)
{
	int err = fx_fast_map(fc, id, p);

	cr_assert_eq(err, 0, "sv_fast_map: %d", err);
}

/* One fast operation by the program's thread in slot 0. */
static enum fw_result fast(struct fx_fast *p, unsigned num, int d, bool undo)
{
	struct fw_op op = fx_fast_op(p, 0, num, d, undo);

	return fw_try(&op);
}

static int mkset(int nsems, int mode)
{
	long id = sv_semget(&root->c, SV_IPC_PRIVATE, nsems, mode);

	cr_assert_geq(id, 0, "semget: %ld", id);
	return (int)id;
}

static void setval(int id, int num, int val)
{
	cr_assert_eq(fx_semctl(root, id, num, SV_SETVAL, (uint64_t)val, NULL), 0);
}

#define VAL(id, num) fx_getval(root, (id), (num))

/* What `semvisorctl show` says of set id (up to 4 semaphores): in *info, and in sems. */
static int show(int id, struct sv_set_info *info, struct sv_sem_info sems[4])
{
	int n = sv_ns_show_set(fx_ns, id, info, sems, 4);

	cr_assert_geq(n, 1, "show: %d", n);
	return n;
}

/* What `semvisorctl show` says the programs did on the fast path. */
static uint64_t fast_ops(int id)
{
	struct sv_set_info info;
	struct sv_sem_info sems[4];

	show(id, &info, sems);
	return info.fast_ops;
}

/* fc adds a unit to semaphore num through the engine, which must complete waiter w with it. */
static void wake(struct fx_caller *fc, int id, unsigned num, struct sv_waiter *w)
{
	struct sv_wakeq wq;
	struct sv_waiter *done;

	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semop(fc, id, NULL, &wq, 1, &(struct sv_sembuf){ (uint16_t)num, 1, 0 }), 0);
	cr_assert_eq(fx_take(&wq, &done, 1), 1);
	cr_assert_eq(done, w);
	cr_assert_eq(sv_waiter_result(w), 0);
	sv_waiter_free(w);
}

/* A trapped semop that must complete at once. */
static void slow(struct fx_caller *fc, int id, unsigned num, int d, int flg)
{
	struct sv_sembuf sop = { (uint16_t)num, (int16_t)d, (int16_t)flg };
	long r = fx_semop(fc, id, NULL, NULL, 1, &sop);

	cr_assert_eq(r, 0, "semop(%u, %d): %ld", num, d, r);
}

Test(engine_fast, map_checks_alter_permission)
{
	struct fx_caller *other = fx_caller_new(fx_ns, 200, 1000, 1000);
	struct sv_fast_map m = { 0 };
	struct fx_fast p;
	int id = mkset(2, 0644), fd;

	cr_assert_eq(sv_fast_file(&other->c, id, SV_FAST_PAGE, &m), -EACCES,
		     "read permission maps nothing");
	cr_assert_eq(sv_fast_file(&root->c, id + 1, SV_FAST_PAGE, &m), -EINVAL);
	cr_assert_eq(sv_fast_file(&root->c, id, SV_FAST_FILES, &m), -EINVAL);
	cr_assert_eq(sv_fast_file(&root->c, id, SV_FAST_WORDS, &m), -ENOENT, "the page first");
	fd = sv_fast_file(&root->c, id, SV_FAST_PAGE, &m);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(m.nsems, 2);
	m.serial++;
	cr_assert_eq(sv_fast_file(&root->c, id, SV_FAST_PUB, &m), -ESTALE);
	prog_map(&p, root, id);
	cr_assert_eq(p.m.serial, m.serial - 1);
	cr_assert_eq(p.m.page, m.page, "the index of the page it replaced");
	fx_fast_unmap(&p);
	fx_caller_exit(other, NULL);
}

/*
 * A fast operation goes ahead only as the last operator (sempid stays), and changes exactly
 * the value: GETVAL, GETALL and GETPID after it are what three semops would leave.
 */
Test(engine_fast, values_and_sempid)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 201, 0, 0);
	struct fx_fast p;
	uint16_t all[3];
	int id = mkset(3, 0600);

	setval(id, 0, 5);
	prog_map(&p, a, id);
	/* root's SETVAL made root sempid: a's first operation is the engine's */
	cr_assert_eq(fast(&p, 0, -1, false), FW_CALL);
	slow(a, id, 0, -1, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 201);
	cr_assert_eq(fast(&p, 0, -1, false), FW_DONE);
	cr_assert_eq(fast(&p, 0, 2, false), FW_DONE);
	cr_assert_eq(VAL(id, 0), 5, "5 - 1 - 1 + 2");
	cr_assert_eq(fx_getpid(root, id, 0), 201);
	/* the reads took the word; the next fast operation needs nothing else */
	cr_assert_eq(fast(&p, 0, -5, false), FW_DONE);
	cr_assert_eq(fast(&p, 0, -1, false), FW_CALL, "would wait: the engine's");
	cr_assert_eq(fx_semctl(root, id, 0, SV_GETALL, (uint64_t)(uintptr_t)all, NULL), 0);
	cr_assert_eq(all[0], 0);
	cr_assert_eq(fast(&p, 0, 32767, false), FW_DONE);
	cr_assert_eq(fast(&p, 0, 1, false), FW_CALL, "past SEMVMX: the engine's ERANGE");
	cr_assert_eq(VAL(id, 0), 32767);
	cr_assert_eq(fast_ops(id), 4, "the 4 done on the fast path, counted in a's page");
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	cr_assert_eq(fast_ops(id), 4, "still, once a's page has gone");
}

/* `semvisorctl show`'s OPS of semaphore num. */
static uint64_t sem_ops(int id, int num)
{
	struct sv_set_info info;
	struct sv_sem_info sems[4];

	cr_assert_gt(show(id, &info, sems), num);
	return sems[num].nops;
}

/*
 * Each semaphore's OPS counts its fast operations with its trapped ones: every one once,
 * whichever thread did it, however often `show` reads them, once the process has gone, and
 * none after a reset, those still counted in a word included.
 */
Test(engine_fast, operations_counted_per_semaphore)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 202, 0, 0);
	struct fx_caller *b = fx_caller_new(fx_ns, 203, 0, 0);
	struct fx_fast pa, pb;
	int id = mkset(3, 0600);
	struct fw_op op;

	prog_map(&pa, a, id);
	prog_map(&pb, b, id);
	slow(a, id, 0, 1, 0); /* a becomes sem 0's sempid, b sem 1's */
	slow(b, id, 1, 1, 0);
	cr_assert_eq(fast(&pa, 0, 1, false), FW_DONE);
	cr_assert_eq(fast(&pa, 0, -1, true), FW_DONE);
	op = fx_fast_op(&pa, 7, 0, 1, false); /* another thread of a */
	cr_assert_eq(fw_try(&op), FW_DONE);
	cr_assert_eq(fast(&pb, 1, 1, false), FW_DONE);
	cr_assert_eq(sem_ops(id, 0), 4, "one trapped, three fast");
	cr_assert_eq(sem_ops(id, 1), 2, "one trapped, one fast");
	cr_assert_eq(sem_ops(id, 2), 0);
	cr_assert_eq(sem_ops(id, 0), 4, "counted once, not again by a second show");
	cr_assert_eq(fast_ops(id), 4);
	cr_assert_eq(fast(&pb, 1, -1, false), FW_DONE);
	fx_fast_unmap(&pb);
	fx_caller_exit(b, NULL);
	cr_assert_eq(sem_ops(id, 1), 3, "b's last one, taken from the word at its exit");
	cr_assert_eq(fast(&pa, 0, 1, false), FW_DONE);
	sv_ns_reset_stats(fx_ns);
	cr_assert_eq(sem_ops(id, 0), 0, "the reset took the one still in the word too");
	cr_assert_eq(fast(&pa, 0, -1, false), FW_DONE);
	cr_assert_eq(sem_ops(id, 0), 1);
	fx_fast_unmap(&pa);
	fx_caller_exit(a, NULL);
}

/*
 * While a caller is parked on a semaphore the word stays with the engine, so an increment
 * goes through it and wakes the waiter; once nobody waits, the word is given back.
 */
Test(engine_fast, parked_waiter_keeps_the_word)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 202, 0, 0);
	struct fx_caller *b = fx_caller_new(fx_ns, 203, 0, 0);
	struct sv_sembuf down = { 0, -1, 0 };
	struct sv_waiter *w;
	struct fx_fast p;
	int id = mkset(1, 0600);

	prog_map(&p, a, id);
	slow(a, id, 0, 1, 0);
	cr_assert_eq(fast(&p, 0, -1, false), FW_DONE);
	w = fx_park(b, id, NULL, NULL, 1, &down);
	cr_assert_not_null(w, "value 0: b waits");
	cr_assert_eq(fast(&p, 0, 1, false), FW_CALL, "a waiter names it: the engine wakes it");
	wake(a, id, 0, w);
	cr_assert_eq(VAL(id, 0), 0, "b took the unit");
	cr_assert_eq(fx_getpid(root, id, 0), 203);
	/* nobody waits now, but b was the last operator: a's next one asks once */
	cr_assert_eq(fast(&p, 0, 1, false), FW_CALL);
	slow(a, id, 0, 1, 0);
	cr_assert_eq(fast(&p, 0, 1, false), FW_DONE);
	cr_assert_eq(VAL(id, 0), 2);
	fx_fast_unmap(&p);
	fx_caller_exit(b, NULL);
	fx_caller_exit(a, NULL);
}

/*
 * SEM_UNDO on both paths adds up: two units taken fast and one trapped leave semadj +3, which
 * exit gives back. 5 - 1 (trapped) - 1 - 1 (fast) = 2; exit: 2 + 3 = 5.
 */
Test(engine_fast, semadj_of_both_paths_undone_at_exit)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 204, 0, 0);
	struct fx_fast p;
	int id = mkset(2, 0600);

	setval(id, 1, 5);
	prog_map(&p, a, id);
	slow(a, id, 1, -1, SV_SEM_UNDO);
	cr_assert_eq(fast(&p, 1, -1, true), FW_DONE);
	cr_assert_eq(fast(&p, 1, -1, true), FW_DONE);
	cr_assert_eq(VAL(id, 1), 2);
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	cr_assert_eq(VAL(id, 1), 5);
	cr_assert_eq(fx_getpid(root, id, 1), 204, "exit's adjustment records the exiting pid");
}

/* SETVAL clears every semadj of the semaphore, the fast entries too: exit changes nothing. */
Test(engine_fast, setval_clears_fast_semadj)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 205, 0, 0);
	struct fx_fast p;
	int id = mkset(1, 0600);

	setval(id, 0, 5);
	prog_map(&p, a, id);
	slow(a, id, 0, -1, SV_SEM_UNDO);
	cr_assert_eq(fast(&p, 0, -2, true), FW_DONE);
	setval(id, 0, 7);
	slow(a, id, 0, 1, 0);
	cr_assert_eq(fast(&p, 0, -4, true), FW_DONE, "a new semadj after the SETVAL");
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	cr_assert_eq(VAL(id, 0), 8, "7 + 1 - 4, then the exit gives back 4 only");
}

/*
 * The kernel's ERANGE is about the whole semadj: 32700 units taken fast count when a trapped
 * SEM_UNDO call takes 100 more (32800 > SEMAEM), and the value is left as it was.
 */
Test(engine_fast, erange_counts_the_fast_semadj)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 206, 0, 0);
	struct sv_sembuf take100 = { 0, -100, SV_SEM_UNDO };
	struct fx_fast p;
	int id = mkset(1, 0600);

	setval(id, 0, 32767);
	prog_map(&p, a, id);
	slow(a, id, 0, -1, SV_SEM_UNDO);
	for (int i = 1; i < 32700; i++)
		cr_assert_eq(fast(&p, 0, -1, true), FW_DONE, "unit %d", i);
	cr_assert_eq(VAL(id, 0), 67);
	slow(root, id, 0, 100, 0);
	slow(a, id, 0, 1, 0); /* a is the last operator again */
	cr_assert_eq(fx_semop(a, id, NULL, NULL, 1, &take100), -ERANGE);
	cr_assert_eq(VAL(id, 0), 168);
	take100.sem_op = -67; /* 32700 + 67 = SEMAEM: allowed */
	cr_assert_eq(fx_semop(a, id, NULL, NULL, 1, &take100), 0);
	cr_assert_eq(fast(&p, 0, -1, true), FW_CALL, "past SEMAEM: the engine's ERANGE");
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	cr_assert_eq(VAL(id, 0), 32767, "101 + 32767, clamped to SEMVMX as Linux does");
}

static int stop_at;

static int stop_hook(void *arg, enum fw_step step)
{
	(void)arg;
	return (int)step == stop_at;
}

/*
 * A fast operation with SEM_UNDO by the thread in `slot`, stopped before step `at` as a thread
 * preempted or killed there is: it can go on with fw_abandon() or fw_done().
 */
static struct fw_op stopped_op(struct fx_fast *p, unsigned slot, unsigned num, int d,
			       enum fw_step at)
{
	struct fw_op op = fx_fast_op(p, slot, num, d, true);

	op.hook = stop_hook;
	stop_at = at;
	cr_assert_eq(fw_try(&op), FW_STOPPED);
	op.hook = NULL;
	return op;
}

/*
 * A fast operation stopped between its semadj entry (A4) and its value (A5), as a thread
 * preempted or killed there is: a trapped call takes the word and dooms it. Killed: the exit
 * finds its pending record and counts the entry from before it. Not killed: the thread's own
 * trapped call resolves it and the semaphore goes back to the fast path.
 */
Test(engine_fast, doomed_operation)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 207, 0, 0);
	struct fx_fast p;
	struct fw_op op;
	int id = mkset(1, 0600);

	setval(id, 0, 10);
	prog_map(&p, a, id);
	slow(a, id, 0, -1, SV_SEM_UNDO);
	cr_assert_eq(fast(&p, 0, -1, true), FW_DONE);
	op = stopped_op(&p, 3, 0, -1, FW_AT_A5);
	cr_assert_eq(VAL(id, 0), 8, "the stopped operation has not happened");
	/* another thread of a (slot 0): the word stays with the engine while slot 3 is doomed */
	slow(a, id, 0, 1, 0);
	cr_assert_eq(fast(&p, 0, -1, true), FW_CALL);
	/* slot 3 goes on: its A5 fails, it restores its entry and makes its trapped call */
	cr_assert_eq(fw_abandon(&op), FW_CALL);
	a->c.fast_slot = 3 + 1;
	slow(a, id, 0, -1, SV_SEM_UNDO);
	a->c.fast_slot = 0;
	cr_assert_eq(fast(&p, 0, -1, true), FW_DONE, "resolved: the word is given again");
	cr_assert_eq(VAL(id, 0), 7);

	/* stopped again, and killed there */
	op = stopped_op(&p, 5, 0, -1, FW_AT_A5);
	cr_assert_eq(VAL(id, 0), 7);
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	cr_assert_eq(VAL(id, 0), 11, "7 + the 4 units a took with SEM_UNDO; not the stopped one");
}

/*
 * IPC_RMID revokes: the old mapping changes nothing from then on, and a new set under the same
 * id has storage of its own.
 */
Test(engine_fast, removal_revokes_the_mapping)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 208, 0, 0);
	struct fx_fast p, q;
	int id = mkset(1, 0600), id2;

	setval(id, 0, 3);
	prog_map(&p, a, id);
	slow(a, id, 0, -1, 0);
	cr_assert_eq(fast(&p, 0, -1, false), FW_DONE);
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_RMID, 0, NULL), 0);
	cr_assert_eq(fast(&p, 0, -1, false), FW_CALL);
	cr_assert_neq(atomic_load(&p.page->epoch), p.m.epoch, "the epoch moved: E1 and E2 see it");
	sv_ns_set_next_id(fx_ns, id);
	id2 = mkset(1, 0600);
	cr_assert_eq(id2, id, "sem_next_id: the same id, in the same slot");
	setval(id2, 0, 4);
	prog_map(&q, a, id2);
	cr_assert_neq(q.words, p.words);
	/* whatever a writes into the old storage, the new set does not see it */
	atomic_store(fw_word_at(p.words, 0), fw_word(1000, false, 0));
	cr_assert_eq(VAL(id2, 0), 4);
	slow(a, id2, 0, -1, 0);
	cr_assert_eq(fast(&q, 0, -1, false), FW_DONE);
	cr_assert_eq(VAL(id2, 0), 2);
	fx_fast_unmap(&q);
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
}

/*
 * A page's index is given again after its process exits, and with it the tag that stands for
 * sempid. The tags naming the old page went with it: the new process's first operation is the
 * engine's, which records the new sempid (the kernel's GETPID after a semop by 210).
 */
Test(engine_fast, a_reused_page_inherits_no_sempid)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 209, 0, 0);
	struct fx_caller *b = fx_caller_new(fx_ns, 210, 0, 0);
	struct fx_fast p, q;
	int id = mkset(1, 0600);

	setval(id, 0, 4);
	prog_map(&p, a, id);
	slow(a, id, 0, -1, 0);
	cr_assert_eq(fast(&p, 0, -1, false), FW_DONE);
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	prog_map(&q, b, id);
	cr_assert_eq(q.m.page, p.m.page, "the first free index");
	cr_assert_eq(fast(&q, 0, -1, false), FW_CALL);
	cr_assert_eq(fx_getpid(root, id, 0), 209);
	slow(b, id, 0, -1, 0);
	cr_assert_eq(fx_getpid(root, id, 0), 210);
	cr_assert_eq(VAL(id, 0), 1);
	fx_fast_unmap(&q);
	fx_caller_exit(b, NULL);
}

/*
 * An operation of several sops waits on two semaphores: neither word goes back to the fast
 * path while it is parked, since a change to either may let it through (the kernel wakes it
 * once both are 1).
 */
Test(engine_fast, a_complex_waiter_holds_every_word_it_names)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 211, 0, 0);
	struct fx_caller *b = fx_caller_new(fx_ns, 212, 0, 0);
	struct sv_sembuf both[2] = { { 0, -1, 0 }, { 1, -1, 0 } };
	struct sv_waiter *w;
	struct fx_fast p;
	int id = mkset(2, 0600);

	prog_map(&p, a, id);
	w = fx_park(b, id, NULL, NULL, 2, both);
	cr_assert_not_null(w);
	slow(a, id, 0, 1, 0);
	cr_assert_eq(fast(&p, 0, 1, false), FW_CALL);
	cr_assert_eq(fast(&p, 1, 1, false), FW_CALL);
	cr_assert_eq(fx_getncnt(root, id, 1), 1, "it now waits for semaphore 1");
	wake(a, id, 1, w);
	cr_assert_eq(VAL(id, 0), 0);
	cr_assert_eq(VAL(id, 1), 0);
	slow(a, id, 0, 1, 0);
	slow(a, id, 1, 1, 0);
	cr_assert_eq(fast(&p, 0, 1, false), FW_DONE, "nobody waits: given back");
	cr_assert_eq(fast(&p, 1, 1, false), FW_DONE);
	cr_assert_eq(VAL(id, 0), 2);
	cr_assert_eq(VAL(id, 1), 2);
	fx_fast_unmap(&p);
	fx_caller_exit(b, NULL);
	fx_caller_exit(a, NULL);
}

/*
 * A program writes garbage into everything it maps writable. The engine takes what it finds
 * as a value the program could have set (clamped to SEMVMX), ignores owners naming no page,
 * and another process's semadj, which lives in that process's page, stays whole.
 */
Test(engine_fast, a_scribbler_reaches_only_what_it_could_set)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 213, 0, 0);
	struct fx_caller *v = fx_caller_new(fx_ns, 214, 0, 0);
	struct fx_fast p, q;
	int id = mkset(3, 0600);

	for (int i = 0; i < 3; i++)
		setval(id, i, 10);
	prog_map(&p, a, id);
	prog_map(&q, v, id);
	slow(v, id, 2, -1, 0);
	cr_assert_eq(fast(&q, 2, -3, true), FW_DONE, "the victim's semadj: +3");
	atomic_store(fw_word_at(p.words, 0), UINT64_MAX);
	atomic_store(fw_word_at(p.words, 1), fw_word(7, false, fw_owner(FW_PAGES - 1, 5)));
	memset(p.page, 0xa5, sv_fastpage_len(3));
	cr_assert_eq(VAL(id, 0), 32767, "0xffff clamped to SEMVMX");
	cr_assert_eq(VAL(id, 1), 7);
	slow(v, id, 1, -1, 0);
	cr_assert_eq(fast(&q, 1, -1, false), FW_DONE, "a forged owner of no page holds nothing");
	cr_assert_eq(VAL(id, 2), 6);
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	fx_fast_unmap(&q);
	fx_caller_exit(v, NULL);
	cr_assert_eq(VAL(id, 2), 9, "6 + the victim's 3");
	cr_assert_eq(VAL(id, 1), 5);
}

/* A caller parked before the set had fast storage keeps its semaphore with the engine too. */
Test(engine_fast, a_waiter_from_before_the_mapping_counts)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 215, 0, 0);
	struct fx_caller *b = fx_caller_new(fx_ns, 216, 0, 0);
	struct sv_sembuf down = { 0, -1, 0 };
	struct sv_waiter *w;
	struct fx_fast p;
	int id = mkset(1, 0600);

	w = fx_park(b, id, NULL, NULL, 1, &down);
	cr_assert_not_null(w);
	prog_map(&p, a, id);
	slow(a, id, 0, 0, 0); /* a is sempid: only the waiter can stop its fast path */
	cr_assert_eq(fast(&p, 0, 1, false), FW_CALL, "b waits: the engine must wake it");
	wake(a, id, 0, w);
	fx_fast_unmap(&p);
	fx_caller_exit(b, NULL);
	fx_caller_exit(a, NULL);
}

/*
 * IPC_SET revokes: after the set goes to 0600 of another user, a's old mapping changes nothing
 * (its operations go to the engine, which refuses them, and what it writes there is not read),
 * it cannot map the set again, and the semadj it made on the fast path is not lost: its exit
 * gives back the unit, as the kernel's would. The new owner maps new storage.
 */
Test(engine_fast, ipc_set_revokes_the_mapping)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 217, 1000, 1000);
	struct fx_caller *o = fx_caller_new(fx_ns, 218, 2000, 2000);
	struct sv_sembuf down = { 0, -1, 0 };
	struct fx_fast p, q;
	int id = mkset(1, 0666);
	uint8_t ds[104] = { 0 };

	setval(id, 0, 5);
	prog_map(&p, a, id);
	slow(a, id, 0, -1, SV_SEM_UNDO);
	cr_assert_eq(fast(&p, 0, -1, true), FW_DONE);
	/* IPC_SET: uid 2000, gid 2000, mode 0600 at struct ipc64_perm's offsets (SPEC A7.4) */
	memcpy(ds + 4, &(uint32_t){ 2000 }, 4);
	memcpy(ds + 8, &(uint32_t){ 2000 }, 4);
	memcpy(ds + 20, &(uint32_t){ 0600 }, 4);
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_SET, (uint64_t)(uintptr_t)ds, NULL), 0);
	cr_assert_eq(fast(&p, 0, -1, true), FW_CALL);
	cr_assert_neq(atomic_load(&p.page->epoch), p.m.epoch);
	atomic_store(fw_word_at(p.words, 0), fw_word(100, false, 0));
	cr_assert_eq(fx_semop(a, id, NULL, NULL, 1, &down), -EACCES);
	cr_assert_eq(VAL(id, 0), 3, "what a wrote after the revocation is not read");
	cr_assert_eq(fx_fast_map(a, id, &q), -EACCES);
	prog_map(&q, o, id);
	slow(o, id, 0, -1, 0);
	cr_assert_eq(fast(&q, 0, -1, false), FW_DONE);
	cr_assert_eq(VAL(id, 0), 1);
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	cr_assert_eq(VAL(id, 0), 3, "a's exit gives back its 2 units, the fast one included");
	fx_fast_unmap(&q);
	fx_caller_exit(o, NULL);
}

/*
 * E2 after a revocation: the process asks whether its operation counted. One past its A5 when
 * the storage was revoked did; one the revocation's take doomed did not, whatever a forged
 * word let its A5 do afterwards. Its semadj follows the same answer.
 */
Test(engine_fast, the_question_after_a_revocation)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 219, 0, 0);
	struct fx_fast p;
	uint8_t ds[104] = { 0 };
	int id = mkset(2, 0600);

	setval(id, 0, 5);
	setval(id, 1, 5);
	prog_map(&p, a, id);
	slow(a, id, 0, -1, SV_SEM_UNDO);
	slow(a, id, 1, -1, SV_SEM_UNDO);
	stopped_op(&p, 1, 0, -1, FW_AT_E2); /* counted */
	stopped_op(&p, 2, 1, -1, FW_AT_A5); /* doomed by the revocation */
	memcpy(ds + 20, &(uint32_t){ 0600 }, 4);
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_SET, (uint64_t)(uintptr_t)ds, NULL), 0);
	cr_assert_eq(sv_fast_ask(&a->c, id, 1, p.m.serial), 1);
	cr_assert_eq(sv_fast_ask(&a->c, id, 2, p.m.serial), 0);
	cr_assert_eq(sv_fast_ask(&a->c, id, 64, p.m.serial), -EINVAL);
	cr_assert_eq(VAL(id, 0), 3);
	cr_assert_eq(VAL(id, 1), 4);
	fx_fast_unmap(&p);
	fx_caller_exit(a, NULL);
	cr_assert_eq(VAL(id, 0), 5, "both units back: the counted operation's semadj was frozen");
	cr_assert_eq(VAL(id, 1), 5, "one unit back: the doomed operation's entry was not");
}

/*
 * exec ends the other threads wherever they are, a fast operation included, and the new image
 * maps the set again. Its page request settles the old page as an exit would: the operation a
 * thread was in when exec ended it did not happen, and nothing of the old page is lost.
 */
Test(engine_fast, a_new_image_settles_the_old_page)
{
	struct fx_caller *a = fx_caller_new(fx_ns, 220, 0, 0);
	struct fx_fast p, q;
	int id = mkset(1, 0600);

	setval(id, 0, 10);
	prog_map(&p, a, id);
	slow(a, id, 0, -1, SV_SEM_UNDO);
	cr_assert_eq(fast(&p, 0, -1, true), FW_DONE);
	/* its entry written, not its value: the exec ends the thread there */
	stopped_op(&p, 1, 0, -1, FW_AT_A5);
	prog_map(&q, a, id);
	slow(a, id, 0, -1, SV_SEM_UNDO);
	cr_assert_eq(fast(&q, 0, -1, true), FW_DONE);
	cr_assert_eq(VAL(id, 0), 6);
	fx_fast_unmap(&p);
	fx_fast_unmap(&q);
	fx_caller_exit(a, NULL);
	cr_assert_eq(VAL(id, 0), 10, "4 units taken with SEM_UNDO, 4 back");
}
