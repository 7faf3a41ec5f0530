/* SPDX-License-Identifier: MIT */
/*
 * The engine with fast storage under threads: processes whose threads take and give units with
 * SEM_UNDO, on the fast path when it lets them and through the engine otherwise, while an
 * observer reads every value (which takes the words and dooms operations in flight) and midway
 * revokes every mapping with IPC_SET, and each process is killed once at a random step of a
 * random fast operation. Nothing may be lost or
 * made up: once every process has exited, every semaphore is back at its starting value, and no
 * reader ever sees more units than exist.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/fastmem.h"
#include "tests/lib/fixture.h"
#include "tests/lib/runner.h"

#define PROCS	3
#define THREADS 2
#define NSEMS	2
#define UNITS	2 /* each semaphore's starting value: fewer than the threads, so they contend */
#define ROUNDS	(UNDER_TSAN ? 300 : 3000)

static struct fx_caller *root;

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

TestSuite(engine_stress_fast, .init = setup, .fini = teardown, .timeout = 120);

struct tproc {
	struct fx_caller *fc;
	struct fx_fast map;
	atomic_bool killed; /* a thread stopped mid-operation: the others stop at their next step */
	atomic_int running; /* the last thread to stop exits the process, which frees its units */
	int kill_thread, kill_round, kill_step;
};

struct tthread {
	struct tproc *pr;
	struct fx_caller *fc;
	unsigned slot;
	unsigned seed;
	long fast, slow, asked;
};

static int id;
static atomic_bool done;
static atomic_int progress; /* rounds done by all workers */
static atomic_int bad_reads;

static int kill_hook(void *arg, enum fw_step step)
{
	struct tproc *pr = arg;

	if (atomic_load(&pr->killed))
		return 1;
	if ((int)step != pr->kill_step)
		return 0;
	atomic_store(&pr->killed, true);
	return 1;
}

/* One sop through the engine, from the thread's slot; false once the process is killed. */
static bool trapped(struct tthread *t, unsigned num, int d)
{
	struct sv_sembuf sop = { (uint16_t)num, (int16_t)d, SV_SEM_UNDO | SV_IPC_NOWAIT };

	t->fc->c.fast_slot = t->slot + 1;
	for (;;) {
		long r;

		if (atomic_load(&t->pr->killed))
			return false;
		r = fx_semop(t->fc, id, NULL, NULL, 1, &sop);
		if (r == 0)
			break;
		cr_assert(r == -EAGAIN, "semop(%u, %d): %ld", num, d, r);
		sched_yield();
	}
	t->slow++;
	return true;
}

/* false: the process is killed (this thread stopped in the middle, or another did) */
static bool one_op(struct tthread *t, unsigned num, int d, bool kill_here)
{
	struct tproc *pr = t->pr;
	struct fw_op op = fx_fast_op(&pr->map, t->slot, num, d, true);

	op.hook = kill_here ? kill_hook : NULL;
	op.hook_arg = pr;
	if (atomic_load(&pr->killed))
		return false;
	if (rand_r(&t->seed) % 4 == 0)
		return trapped(t, num, d);
	switch (fw_try(&op)) {
	case FW_DONE:
		t->fast++;
		return true;
	case FW_CALL:
		return trapped(t, num, d);
	case FW_STOPPED:
		return false;
	case FW_ASK:
		/* the observer's IPC_SET revoked the storage after this A5: did it count? */
		if (sv_fast_ask(&t->fc->c, id, t->slot, pr->map.m.serial) == 1) {
			fw_done(&op);
			t->asked++;
			return true;
		}
		fw_abandon(&op);
		return trapped(t, num, d);
	}
	return false;
}

static void *worker(void *arg)
{
	struct tthread *t = arg;
	struct tproc *pr = t->pr;

	sv_thread_register();
	for (int r = 0; r < ROUNDS; r++) {
		unsigned num = (unsigned)rand_r(&t->seed) % NSEMS;
		bool kill = (int)t->slot == pr->kill_thread && r == pr->kill_round;

		if (!one_op(t, num, -1, kill && rand_r(&t->seed) % 2))
			break;
		if (!one_op(t, num, 1, kill))
			break;
		atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
	}
	if (atomic_fetch_sub(&pr->running, 1) == 1) {
		struct sv_wakeq wq;
		struct sv_waiter *w;

		sv_wakeq_init(&wq);
		sv_proc_exit(pr->fc->c.proc, &wq);
		while ((w = sv_wakeq_pop(&wq)))
			sv_waiter_free(w);
	}
	sv_thread_unregister();
	return NULL;
}

/* Reads every value, taking every word, until the workers are done. */
static void *observer(void *arg)
{
	uint16_t vals[NSEMS];

	uint8_t ds[104] = { 0 };
	bool revoked = false;

	(void)arg;
	memcpy(ds + 20, &(uint32_t){ 0600 }, 4); /* IPC_SET to what it is: uid 0, gid 0, 0600 */
	sv_thread_register();
	while (!atomic_load(&done)) {
		/* midway, every mapping is revoked: the workers go on through the engine */
		if (!revoked && atomic_load(&progress) >= ROUNDS) {
			revoked = true;
			if (fx_semctl(root, id, 0, SV_IPC_SET, (uint64_t)(uintptr_t)ds, NULL) != 0)
				atomic_fetch_add(&bad_reads, 1);
		}
		long r = fx_semctl(root, id, 0, SV_GETALL, (uint64_t)(uintptr_t)vals, NULL);

		if (r != 0)
			atomic_fetch_add(&bad_reads, 1);
		for (int i = 0; i < NSEMS; i++)
			if (vals[i] > UNITS)
				atomic_fetch_add(&bad_reads, 1);
		if (fx_getval(root, id, 1) > UNITS)
			atomic_fetch_add(&bad_reads, 1);
		sched_yield();
	}
	sv_thread_unregister();
	return NULL;
}

static void run(unsigned seed)
{
	static struct tproc procs[PROCS];
	static struct tthread threads[PROCS][THREADS];
	pthread_t tids[PROCS][THREADS], obs;
	long fast = 0, slow = 0, asked = 0;

	srand(seed);
	id = (int)sv_semget(&root->c, SV_IPC_PRIVATE, NSEMS, 0600);
	cr_assert(id >= 0);
	for (int i = 0; i < NSEMS; i++)
		cr_assert_eq(fx_semctl(root, id, i, SV_SETVAL, UNITS, NULL), 0);
	atomic_store(&done, false);
	atomic_store(&bad_reads, 0);
	atomic_store(&progress, 0);
	for (int p = 0; p < PROCS; p++) {
		struct tproc *pr = &procs[p];

		memset(pr, 0, sizeof(*pr));
		pr->fc = fx_caller_new(fx_ns, 300 + p, 0, 0);
		cr_assert_eq(fx_fast_map(pr->fc, id, &pr->map), 0);
		pr->kill_thread = rand() % THREADS;
		pr->kill_round = rand() % ROUNDS;
		pr->kill_step = 1 + rand() % (FW_STEPS - 1);
		atomic_store(&pr->running, THREADS);
		for (int k = 0; k < THREADS; k++) {
			struct tthread *t = &threads[p][k];

			*t = (struct tthread){ .pr = pr,
					       .slot = (unsigned)k,
					       .seed = seed * 131 + (unsigned)(p * THREADS + k) };
			t->fc = fx_caller_thread(pr->fc);
		}
	}
	cr_assert_eq(pthread_create(&obs, NULL, observer, NULL), 0);
	for (int p = 0; p < PROCS; p++)
		for (int k = 0; k < THREADS; k++)
			cr_assert_eq(pthread_create(&tids[p][k], NULL, worker, &threads[p][k]), 0);
	for (int p = 0; p < PROCS; p++) {
		for (int k = 0; k < THREADS; k++) {
			pthread_join(tids[p][k], NULL);
			fast += threads[p][k].fast;
			slow += threads[p][k].slow;
			asked += threads[p][k].asked;
		}
	}
	atomic_store(&done, true);
	pthread_join(obs, NULL);
	cr_assert_eq(atomic_load(&bad_reads), 0, "a reader saw more units than exist");
	for (int p = 0; p < PROCS; p++) {
		struct tproc *pr = &procs[p];

		fx_fast_unmap(&pr->map);
		for (int k = 0; k < THREADS; k++) {
			sv_proc_put(threads[p][k].fc->c.proc);
			free(threads[p][k].fc);
		}
		fx_caller_exit(pr->fc, NULL);
	}
	for (int i = 0; i < NSEMS; i++)
		cr_assert_eq(fx_getval(root, id, i), UNITS,
			     "seed %u, semaphore %d: %d units after every exit, not %d", seed, i,
			     fx_getval(root, id, i), UNITS);
	/* the fast path was taken, and so was the engine: both sides were tried */
	cr_assert(fast > 0 && slow > 0, "fast %ld, trapped %ld", fast, slow);
	if (getenv("FAST_STRESS_VERBOSE"))
		fprintf(stderr, "seed %u: fast %ld, trapped %ld, asked %ld\n", seed, fast, slow,
			asked);
	cr_assert_eq(fx_semctl(root, id, 0, SV_IPC_RMID, 0, NULL), 0);
}

Test(engine_stress_fast, conservation_with_kills)
{
	for (unsigned seed = 1; seed <= (UNDER_TSAN ? 2 : 8); seed++)
		run(seed);
}
