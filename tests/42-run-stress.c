/* SPDX-License-Identifier: MIT */
/*
 * Stress under kill -9 (tests/prog/stress.c): worker processes with several threads do random
 * SEM_UNDO takes and give-backs, atomic transfers and waits on shared semaphores while the
 * parent kills, stops and signals them at random; at the end the values must add up to the
 * initial total again and nobody may be left asleep. Run natively first (the invariant must hold
 * there, or the test itself is wrong), then under semvisor-run, with the default worker pool,
 * with a single worker thread, through the ptrace backend, and with the fast path (--fast).
 */
#include <criterion/criterion.h>

#include "tests/run-harness.h"

TestSuite(run_stress, .fini = run_cleanup, .timeout = 90);

static void stress(const char *ms, const char *workers, const char *opt)
{
	struct run_spec s = { .prog = "stress", .args = { ms, workers }, .timeout_ms = 40000 };
	struct run_result native, confined;
	char st1[96], st2[96];

	run(&s, &native);
	s.confined = true;
	s.opts[0] = opt;
	run(&s, &confined);
	if (native.timed_out || confined.timed_out || native.status || confined.status ||
	    strcmp(native.out, confined.out))
		fprintf(stderr, "==== native: %s (%s)\n%s==== semvisor-run: %s (%s)\n%s====\n",
			native.cmd, run_status_text(&native, st1, sizeof(st1)), native.out,
			confined.cmd, run_status_text(&confined, st2, sizeof(st2)), confined.out);
	cr_assert(!native.timed_out && WIFEXITED(native.status) && WEXITSTATUS(native.status) == 0,
		  "the native run failed (%s): the stress test's design is wrong",
		  run_status_text(&native, st1, sizeof(st1)));
	cr_assert(!confined.timed_out, "under semvisor-run: timed out");
	cr_assert_str_eq(confined.out, native.out, "under semvisor-run the output differs");
	cr_assert_eq(confined.status, native.status, "under semvisor-run: %s",
		     run_status_text(&confined, st2, sizeof(st2)));
	run_free(&native);
	run_free(&confined);
}

/* 8 workers of 2-4 threads, 5 s of random kills */
Test(run_stress, conservation)
{
	stress("5000", "8", NULL);
}

/* the same with one worker thread serving everything: parked calls must not hold it */
Test(run_stress, conservation_one_worker)
{
	stress("3000", "6", "--workers=1");
}

/*
 * The same through the ptrace backend: kills, SIGSTOP and signals land on tracees asleep in
 * a parked call, stopped in a trapped one, or between two (server/notify/ptrace.h).
 */
Test(run_stress, conservation_ptrace)
{
	stress("5000", "8", "--backend=ptrace");
}

/*
 * The same with the fast path's library preloaded: SEM_UNDO takes and give-backs run in the
 * workers' own memory where they can, and kill -9 lands at any step of them.
 */
Test(run_stress, conservation_fast)
{
	stress("5000", "8", "--fast");
}
