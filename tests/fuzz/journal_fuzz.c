/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the journal's replay (server/engine/journal.c): sv_journal_replay()
 * reads records a process that crashed wrote, possibly half-written or damaged.
 *
 * Built and run by tests/fuzz/run.sh (make fuzz), linked with the instrumented server library;
 * to run it longer afterwards:
 *   build/fuzz/journal_fuzz -max_total_time=600 NEW_CORPUS_DIR
 *
 * The input is the journal. Beyond "no crash, no sanitizer report" it checks what journal.c
 * promises: the bytes used, -EINVAL or -ENOMEM; a namespace left consistent (as many sets as it
 * counts, every value in range, also after the processes' exits apply their adjustments).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "journal_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define NSKEY  7
#define NPROCS 4

struct ctx {
	struct sv_ns *ns;
	uint64_t keys[NPROCS];
	struct sv_proc *procs[NPROCS];
	int n;
};

static struct sv_ns *r_ns(void *c, uint64_t key)
{
	return key == NSKEY ? ((struct ctx *)c)->ns : NULL;
}

static struct sv_proc *r_proc(void *c, struct sv_ns *ns, uint64_t key, int32_t pid)
{
	struct ctx *x = c;

	for (int i = 0; i < x->n; i++)
		if (x->keys[i] == key)
			return x->procs[i];
	if (x->n == NPROCS)
		return NULL; /* as out of memory: the replay stops with -ENOMEM */
	x->procs[x->n] = sv_proc_new(ns, pid);
	CHECK(x->procs[x->n]);
	x->keys[x->n] = key;
	return x->procs[x->n++];
}

struct sets {
	int n;
	int32_t id[64];
	int nsems[64];
};

static int collect(const struct sv_set_info *info, void *arg)
{
	struct sets *s = arg;

	CHECK(info->mode <= 0777 && info->nsems >= 1);
	if (s->n < 64) {
		s->id[s->n] = info->id;
		s->nsems[s->n] = info->nsems;
	}
	s->n++;
	return 0;
}

/* The sets counted as many as there are, their values in range as GETALL reads them. */
static int check_sets(struct sv_ns *ns)
{
	static const struct sv_cred root = { .cap_ipc_owner = true, .cap_sys_admin = true };
	struct sv_caller c = { .ns = ns, .cred = &root };
	struct sv_ns_info info;
	struct sv_wakeq wq;
	struct sets s = { 0 };

	sv_ns_for_each_set_ordered(ns, collect, &s);
	sv_ns_info(ns, &info);
	CHECK(info.nsets == s.n);
	sv_wakeq_init(&wq);
	for (int i = 0; i < s.n && i < 64; i++) {
		uint16_t v[64];

		if (s.nsems[i] > 64)
			continue;
		CHECK(sv_semctl(&c, s.id[i], 0, SV_GETALL, (uint64_t)(uintptr_t)v, &wq) == 0);
		for (int k = 0; k < s.nsems[i]; k++)
			CHECK(v[k] <= SV_SEMVMX);
	}
	CHECK(sv_wakeq_empty(&wq));
	return s.n;
}

/*
 * One namespace for many inputs, emptied after each (a new one per input would wait for a grace
 * period every time: see state_fuzz.c), put every SCRATCH_RUNS inputs.
 */
#define SCRATCH_RUNS 4096
static struct sv_ns *scratch;
static unsigned int runs;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx x = { 0 };
	struct sv_replay r = { r_ns, r_proc, NULL, &x };
	struct sv_limits lim;
	struct sv_wakeq wq;
	long used;
	int n;

	sv_limits_default(&lim);
	lim.semmsl = 64; /* sets the values check can read whole */
	if (!runs)
		sv_thread_register();
	if (!scratch) {
		scratch = sv_ns_new(&lim);
		CHECK(scratch);
		sv_ns_set_jkey(scratch, NSKEY);
	}
	x.ns = scratch;
	sv_ns_set_limits(x.ns, &lim);
	sv_ns_set_next_id(x.ns, -1);
	used = sv_journal_replay(data, size, &r);
	CHECK((used >= 0 && (size_t)used <= size && used % 8 == 0) || used == -EINVAL ||
	      used == -ENOMEM);
	n = check_sets(x.ns);
	sv_wakeq_init(&wq);
	for (int i = 0; i < x.n; i++) {
		sv_proc_exit(x.procs[i], &wq);
		sv_proc_put(x.procs[i]);
	}
	CHECK(sv_wakeq_empty(&wq));
	CHECK(check_sets(x.ns) == n);
	sv_ns_shutdown(x.ns, &wq);
	CHECK(sv_wakeq_empty(&wq));
	if (++runs % SCRATCH_RUNS == 0) {
		sv_ns_put(scratch);
		scratch = NULL;
	}
	return 0;
}
