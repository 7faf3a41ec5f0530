/* SPDX-License-Identifier: MIT */
/*
 * semvisor-run --fast beyond what the differential suite compares (40-run-diff's run_diff_fast
 * runs every program there with it): that the fast path really serves the calls it may, with
 * kill -9 landing in them (tests/prog/fast-kill.c); that a program scribbling over the memory
 * it was handed reaches nothing it could not reach with system calls, and nothing at all once
 * revoked (tests/prog/fast-hostile.c); that kill -9 before each step of an operation loses
 * nothing (tests/prog/fast-steps.c, by the library's test hook), and neither does a signal
 * handler there that jumps out or calls semop itself (tests/prog/fast-signals.c); that the
 * library, preloaded where no supervisor serves, leaves the kernel to answer; and the options
 * it refuses.
 */
#include <criterion/criterion.h>

#include "tests/60-daemon-harness.h"
#include "tests/run-harness.h"

static void teardown(void)
{
	run_cleanup();
	dh_cleanup();
}

TestSuite(run_fast, .fini = teardown, .timeout = 90);

#define VERDICT "workers killed at random; every unit back: yes\n"

/* A number after `label` in text, or -1. */
static long number_after(const char *text, const char *label)
{
	const char *p = strstr(text, label);

	return p ? strtol(p + strlen(label), NULL, 10) : -1;
}

/* The number right before `label` in text, or -1. */
static long number_before(const char *text, const char *label)
{
	const char *p = strstr(text, label), *q = p;

	while (q && q > text && q[-1] >= '0' && q[-1] <= '9')
		q--;
	return p && q < p ? strtol(q, NULL, 10) : -1;
}

/*
 * Natively, then under --fast: every unit comes back after hundreds of kills, and the fast path
 * served nearly every operation (trapped semtimedop calls, which --stats counts, are a small
 * part of the operations the program counted).
 */
Test(run_fast, kills_during_fast_operations)
{
	struct run_spec s = {
		.prog = "fast-kill", .args = { "2000" }, .split = true, .timeout_ms = 30000
	};
	struct run_result native, fast;
	long ops, trapped, killed, counted;

	run(&s, &native);
	cr_assert(!native.timed_out && WIFEXITED(native.status) && WEXITSTATUS(native.status) == 0,
		  "the native run failed: %s%s", native.out, native.err);
	cr_assert_str_eq(native.out, VERDICT);
	s.confined = true;
	s.opts[0] = "--fast";
	s.opts[1] = "--stats";
	run(&s, &fast);
	cr_assert(!fast.timed_out, "under --fast: timed out");
	cr_assert_str_eq(fast.out, VERDICT, "under --fast: %s (stderr: %s)", fast.out, fast.err);
	cr_assert(WIFEXITED(fast.status) && WEXITSTATUS(fast.status) == 0);
	ops = number_after(fast.err, "fast-kill: ");
	killed = number_after(fast.err, "operations, ");
	trapped = number_after(fast.err, "semtimedop ");
	cr_assert(ops > 0 && trapped >= 0 && killed > 0, "stderr: %s", fast.err);
	cr_assert(trapped * 10 < ops, "%ld of %ld operations were trapped calls: %s", trapped, ops,
		  fast.err);
	/*
	 * What the programs counted in their pages, which --stats adds up as each page goes:
	 * every operation not trapped, but for the pairs a kill cut in two.
	 */
	counted = number_before(fast.err, " semops done in the programs themselves");
	cr_assert(counted >= ops - trapped - 2 * killed && counted <= ops + 2 * killed,
		  "%ld semops counted on the fast path, for %ld operations (%ld trapped, %ld "
		  "kills): %s",
		  counted, ops, trapped, killed, fast.err);
	run_free(&native);
	run_free(&fast);
}

/*
 * The library where nothing serves the program: the kernel answers its request for a set
 * (EINVAL), so it stays out of the way, and the program runs as it would without it.
 */
Test(run_fast, the_library_without_a_supervisor)
{
	struct run_spec s = {
		.prog = "fast-kill", .args = { "500" }, .split = true, .timeout_ms = 30000
	};
	struct run_result r;
	char lib[PATH_MAX];

	snprintf(lib, sizeof(lib), "%s/libsemvisor-fast.so", run_dir());
	cr_assert_eq(access(lib, R_OK), 0, "%s: %s", lib, strerror(errno));
	setenv("LD_PRELOAD", lib, 1);
	/* what semvisor-run --fast adds for programs built with AddressSanitizer */
	setenv("ASAN_OPTIONS", "detect_leaks=0:verify_asan_link_order=0", 1);
	run(&s, &r);
	unsetenv("LD_PRELOAD");
	unsetenv("ASAN_OPTIONS");
	cr_assert_str_eq(r.out, VERDICT, "%s%s", r.out, r.err);
	cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	run_free(&r);
}

/* --fast with --crash-safe: refused, since its journal would not see a fast operation */
Test(run_fast, not_with_crash_safe)
{
	struct run_spec s = { .prog = "fast-kill",
			      .args = { "100" },
			      .confined = true,
			      .opts = { "--fast", "--crash-safe" } };
	struct run_result r;

	run(&s, &r);
	cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 125, "%s", r.out);
	cr_assert(strstr(r.out, "--crash-safe") != NULL, "%s", r.out);
	run_free(&r);
}

/*
 * A program writing what it likes into the memory --fast handed it (tests/prog/fast-hostile.c):
 * another process's semadj stays whole, and after IPC_SET to another user's 0600 or IPC_RMID
 * what it writes into its old mapping changes nothing.
 */
Test(run_fast, a_hostile_program)
{
	struct run_spec s = {
		.prog = "fast-hostile", .confined = true, .opts = { "--fast" }, .timeout_ms = 30000
	};
	struct run_result r;

	run(&s, &r);
	cr_assert(!r.timed_out, "timed out: %s", r.out);
	cr_assert_str_eq(r.out, "scribbler: exited 0\n"
				"victim: exited 0\n"
				"the victim's 3 units came back: yes\n"
				"after IPC_SET to another user's 0600, its semop: EACCES\n"
				"process: exited 0\n"
				"its write into the old mapping changed nothing: 5\n"
				"after IPC_RMID and a new set of the same id, its semop: 0\n"
				"process: exited 0\n"
				"the new set: 7, less that semop's unit: 6\n");
	cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	run_free(&r);
}

/*
 * The steps of enum fw_step an uncontended operation with SEM_UNDO goes through, as the hook's
 * programs name them.
 */
static const char *const steps[] = { "A1", "E1", "A2", "A3", "A4", "A5", "E2", "A6" };
#define NSTEPS (sizeof(steps) / sizeof(steps[0]))

/* prog under --fast, which must print exactly want and exit 0. */
static void run_fast_expecting(const char *prog, const char *want)
{
	struct run_spec s = {
		.prog = prog, .confined = true, .opts = { "--fast" }, .timeout_ms = 30000
	};
	struct run_result r;

	run(&s, &r);
	cr_assert(!r.timed_out, "timed out: %s", r.out);
	cr_assert_str_eq(r.out, want);
	cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	run_free(&r);
}

/*
 * kill -9 before each step of a fast operation with SEM_UNDO, by the library's test hook
 * (tests/prog/fast-steps.c): whether the operation happened or not, the exit gives back exactly
 * what the process holds.
 */
Test(run_fast, a_kill_at_each_step)
{
	char want[1024] = "";

	for (size_t i = 0; i < NSTEPS; i++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want),
			 "killed before %s: killed by SIGKILL, value: 10\n", steps[i]);
	run_fast_expecting("fast-steps", want);
}

/*
 * A signal handler before each step of a fast operation, by the same hook
 * (tests/prog/fast-signals.c): one that jumps out of the operation, leaving it wherever it was,
 * and one that makes operations of its own in the middle of it. Nothing the children did is
 * lost or counted twice, inside them and after their exits.
 */
Test(run_fast, a_signal_at_each_step)
{
	char want[2048] = "";

	for (size_t i = 0; i < NSTEPS; i++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want),
			 "jump before %s: ok, values 10 5; nest before %s: ok, values 10 5\n",
			 steps[i], steps[i]);
	run_fast_expecting("fast-signals", want);
}

/*
 * A call that must wait first waits in the program, and takes nothing from one parked before
 * it (tests/prog/fast-wait.c, whose output the differential suite compares with the kernel's):
 * with --fast-spin=1000000 its second sleeper, which waits some 200 ms, never parks, so the
 * supervisor saw one wait (the first sleeper's, which has a timeout and so parks at once);
 * with --fast-spin=0 both park, two waits. The output is the kernel's either way.
 */
static void fast_wait(const char *spin, long waits)
{
	struct run_spec s = { .prog = "fast-wait",
			      .confined = true,
			      .split = true,
			      .opts = { "--fast", spin, "--stats" },
			      .timeout_ms = 30000 };
	struct run_result r;

	run(&s, &r);
	cr_assert(!r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		  "fast-wait %s: %s %s", spin, r.out, r.err);
	cr_assert(strstr(r.out, "first woken: W\nthen, before another +1: -\n") &&
		      strstr(r.out, "woken by it: S\n"),
		  "fast-wait %s: %s", spin, r.out);
	cr_assert_eq(number_after(r.err, "semvisor: waits "), waits, "%s: %s", spin, r.err);
	run_free(&r);
}

Test(run_fast, a_wait_spins_first_and_takes_nothing_from_a_parked_one)
{
	fast_wait("--fast-spin=1000000", 1);
	fast_wait("--fast-spin=0", 2);
}

/*
 * Every completed operation is counted, those the program did in its own memory included,
 * while the program runs (tests/prog/fast-count.c: 6000 on semaphore 0 by two threads, 1501
 * on semaphore 1, the last 500 of them since the engine last held its word): first in
 * `semvisorctl stats`' totals, the fast ones and the trapped semop and semtimedop calls; then
 * in each semaphore's OPS in `semvisorctl show`. After it, the operations --stats says were
 * done on the fast path and the trapped semtimedop calls add up to exactly the 7502 it made.
 */
Test(run_fast, every_operation_counted_per_semaphore)
{
	char ctl[PATH_MAX], ctlopt[PATH_MAX + 16], done[PATH_MAX], idtext[16];
	const char *show[] = {
		dh_bin("semvisorctl"), "--socket", ctl, "show", idtext, "--json", NULL
	};
	const char *stats[] = { dh_bin("semvisorctl"), "--socket", ctl, "stats", "--json", NULL };
	struct run_spec s = {
		.prog = "fast-count", .confined = true, .split = true, .timeout_ms = 60000
	};
	struct run_handle h;
	struct run_result r;
	char *out;
	long fast, trapped, semop, semtimedop, probes;
	int id;

	dh_setup_ns(false); /* a directory for the socket and the file that ends the program */
	snprintf(ctl, sizeof(ctl), "%s", dh_path("ctl.sock"));
	snprintf(done, sizeof(done), "%s", dh_path("done"));
	snprintf(ctlopt, sizeof(ctlopt), "--control=%s", ctl);
	s.args[0] = done;
	s.opts[0] = "--fast";
	s.opts[1] = "--stats";
	s.opts[2] = ctlopt;
	run_start(&s, &h, &r);
	cr_assert(run_pump(&h, " ready\n"), "fast-count never got ready: %s %s", r.out, r.err);
	id = (int)number_before(r.out, " ready\n");
	snprintf(idtext, sizeof(idtext), "%d", id);
	/* stats first: show would take the words back itself */
	cr_assert_eq(dh_run(stats, 10000, &out), 0, "semvisorctl stats:\n%s", out);
	fast = number_after(out, "\"fast_ops\":");
	semop = number_after(out, "\"semop\":");
	semtimedop = number_after(out, "\"semtimedop\":");
	probes = number_after(out, "\"busy_probes\":");
	cr_assert(fast > 0 && semop >= 0 && semtimedop >= 0 && probes >= 0, "semvisorctl stats: %s",
		  out);
	/* a wait's tries that found the semaphore short are calls, not operations */
	cr_assert_eq(fast + semop + semtimedop - probes, 7501,
		     "stats counted %ld fast and %ld + %ld - %ld trapped semops of 7501: %s", fast,
		     semop, semtimedop, probes, out);
	free(out);
	cr_assert_eq(dh_run(show, 10000, &out), 0, "semvisorctl show:\n%s", out);
	cr_assert(strstr(out, "\"num\":0,\"value\":1,") && strstr(out, "\"ops\":6000,"),
		  "semaphore 0, 6000 operations: %s", out);
	cr_assert(strstr(out, "\"num\":1,\"value\":1501,") && strstr(out, "\"ops\":1501,"),
		  "semaphore 1, 1501 operations: %s", out);
	free(out);
	dh_write_file(done, "done\n");
	run_finish(&h);
	cr_assert(!r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		  "fast-count: %s %s", r.out, r.err);
	fast = number_before(r.err, " semops done in the programs themselves");
	trapped = number_after(r.err, "semtimedop ");
	probes = number_before(r.err, " of the semtimedop calls were busy probes");
	probes = probes < 0 ? 0 : probes; /* the line is there only when some were */
	cr_assert(fast > 0 && trapped >= 0, "stderr: %s", r.err);
	cr_assert_eq(fast + trapped - probes, 7502, "%ld fast and %ld - %ld trapped: %s", fast,
		     trapped, probes, r.err);
	run_free(&r);
}
