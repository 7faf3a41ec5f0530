/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the engine's state readers (server/engine/state.c): sv_ns_import() and
 * sv_proc_import() read what a process that stopped wrote, and a broken or hostile writer could
 * have written anything.
 *
 * Built and run by tests/fuzz/run.sh (make fuzz), linked with the instrumented server library;
 * to run it longer afterwards:
 *   build/fuzz/state_fuzz -max_total_time=600 NEW_CORPUS_DIR
 *
 * The first byte chooses the reader; the rest is the blob. Beyond "no crash, no sanitizer
 * report" it checks what state.c promises: 0, -EINVAL or -EPROTONOSUPPORT; a refused blob makes
 * nothing; an accepted namespace is consistent (as many sets as it counts) and exports as the
 * very blob it came from; an accepted process's adjustments leave every value in range.
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
			fprintf(stderr, "state_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static int count(const struct sv_set_info *info, void *arg)
{
	(void)info;
	++*(int *)arg;
	return 0;
}

/*
 * One namespace for many inputs, emptied after each: a new one per input would wait for a grace
 * period at every sv_ns_put() (rcu_barrier), a hundred times slower. An import overwrites
 * everything a shutdown leaves (the limits and the allocator's state). Every SCRATCH_RUNS
 * inputs it is put all the same, so that the sets and procs freed through call_rcu() do not
 * pile up faster than the grace periods free them.
 */
#define SCRATCH_RUNS 4096
static struct sv_ns *scratch;
static unsigned int runs;

static void fuzz_ns(const uint8_t *data, size_t size)
{
	struct sv_ns_info info;
	struct sv_ns *ns;
	struct sv_wakeq wq;
	int err, n = 0;

	if (!scratch) {
		struct sv_limits lim;

		sv_limits_default(&lim);
		scratch = sv_ns_new(&lim);
		CHECK(scratch);
	}
	ns = scratch;
	err = sv_ns_import(ns, data, size);
	CHECK(err == 0 || err == -EINVAL || err == -EPROTONOSUPPORT);
	sv_ns_for_each_set_ordered(ns, count, &n);
	sv_ns_info(ns, &info);
	CHECK(info.nsets == n);
	CHECK(err == 0 || n == 0);
	if (!err) {
		void *again = NULL;
		size_t len = 0;

		CHECK(sv_ns_export(ns, &again, &len) == 0);
		CHECK(len == size && !memcmp(again, data, size));
		free(again);
	}
	sv_wakeq_init(&wq);
	sv_ns_shutdown(ns, &wq);
	CHECK(sv_wakeq_empty(&wq));
}

static void pace(void)
{
	if (++runs % SCRATCH_RUNS == 0 && scratch) {
		sv_ns_put(scratch); /* rcu_barrier(): what call_rcu() queued so far is freed */
		scratch = NULL;
	}
}

/* A namespace with sets 0 (3 semaphores) and 1 (1 semaphore), made once. */
static struct sv_ns *proc_ns;

static struct sv_ns *sets(void)
{
	static const struct sv_cred root = { .cap_ipc_owner = true, .cap_sys_admin = true };
	struct sv_caller c = { .cred = &root };
	struct sv_limits lim;

	if (proc_ns)
		return proc_ns;
	sv_limits_default(&lim);
	proc_ns = sv_ns_new(&lim);
	CHECK(proc_ns);
	c.ns = proc_ns;
	CHECK(sv_semget(&c, SV_IPC_PRIVATE, 3, 0600) == 0);
	CHECK(sv_semget(&c, SV_IPC_PRIVATE, 1, 0600) == 1);
	return proc_ns;
}

static void fuzz_proc(const uint8_t *data, size_t size)
{
	static const struct sv_cred root = { .cap_ipc_owner = true, .cap_sys_admin = true };
	struct sv_caller c = { .ns = sets(), .cred = &root };
	struct sv_proc *p = sv_proc_new(c.ns, 42);
	struct sv_wakeq wq;
	int err;

	CHECK(p);
	err = sv_proc_import(p, data, size);
	CHECK(err == 0 || err == -EINVAL || err == -EPROTONOSUPPORT);
	sv_wakeq_init(&wq);
	sv_proc_exit(p, &wq);
	CHECK(sv_wakeq_empty(&wq));
	sv_proc_put(p);
	for (int id = 0; id < 2; id++) {
		uint16_t v[3] = { 0 };

		CHECK(sv_semctl(&c, id, 0, SV_GETALL, (uint64_t)(uintptr_t)v, &wq) == 0);
		CHECK(v[0] <= SV_SEMVMX && v[1] <= SV_SEMVMX && v[2] <= SV_SEMVMX);
		memset(v, 0, sizeof(v));
		CHECK(sv_semctl(&c, id, 0, SV_SETALL, (uint64_t)(uintptr_t)v, &wq) == 0);
		CHECK(sv_wakeq_empty(&wq));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool registered;

	if (!registered) {
		sv_thread_register();
		registered = true;
	}
	pace();
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_proc(data + 1, size - 1);
	else
		fuzz_ns(data + 1, size - 1);
	return 0;
}
