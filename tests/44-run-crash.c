/* SPDX-License-Identifier: MIT */
/*
 * semvisor-run --crash-safe: its supervisor killed (SIGKILL) again and again while the
 * program's processes wait in it and take a lock with SEM_UNDO; another supervisor takes over
 * each time from the journal, and the program sees what it sees natively. Without the option,
 * the same kill leaves the program's calls failing with ENOSYS (the test of the test: the kills
 * must land while the work is under way).
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "tests/run-harness.h"

TestSuite(run_crash, .fini = run_cleanup, .timeout = 120);

/*
 * The program: a shell that starts the restart-load clients (tests/prog/restart-load.c), kills
 * its supervisor KILLS times, 100 ms apart (natively there is none to kill), and prints what
 * every client printed, in order, then the final check.
 */
static const char script[] =
    "P=$1; K=$2; KILLS=$3; D=$4\n"
    "sup() {\n"
    "  for s in /proc/[0-9]*/stat; do\n"
    "    read -r pid comm st ppid rest <\"$s\" 2>/dev/null || continue\n"
    "    [ \"$ppid\" = \"$PPID\" ] && [ \"$comm\" = \"(semvisor-run)\" ] && echo \"$pid\"\n"
    "  done\n"
    "}\n"
    "$P setup $K || exit 9\n"
    "for i in 1 2 3 4; do $P mutex $K 60 5 >$D/m$i 2>&1 & done\n"
    "$P consume $K 100 0 >$D/c 2>&1 &\n"
    "$P produce $K 100 4 >$D/p 2>&1 &\n"
    "killed=0\n"
    "for k in $(seq $KILLS); do\n"
    "  sleep 0.1\n"
    "  s=$(sup)\n"
    "  [ -n \"$s\" ] && kill -9 $s && killed=$((killed + 1))\n"
    "done\n"
    "wait\n"
    "cat $D/m1 $D/m2 $D/m3 $D/m4 $D/c $D/p\n"
    "$P check $K 240\n"
    "echo \"kills $killed\" >&2\n";

static int count(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static void crash_run(bool confined, const char *opt, int kills, struct run_result *r)
{
	char path[600], dir[512], key[32], nkills[16], prog[512];
	struct run_spec s = { .prog = "/bin/sh", .confined = confined, .split = true };
	static int round;
	FILE *f;

	/* tests run side by side: each run has a directory of its own */
	snprintf(dir, sizeof(dir), "%s/crash-XXXXXX", run_dir());
	cr_assert_not_null(mkdtemp(dir));
	round++;
	snprintf(path, sizeof(path), "%s/crash.sh", dir);
	f = fopen(path, "w");
	cr_assert(f && fputs(script, f) >= 0 && fclose(f) == 0);
	snprintf(key, sizeof(key), "%#x", 0x7e570000 + round * 16);
	snprintf(nkills, sizeof(nkills), "%d", kills);
	snprintf(prog, sizeof(prog), "%s/tests/prog/restart-load", run_dir());
	s.args[0] = path;
	s.args[1] = prog;
	s.args[2] = key;
	s.args[3] = nkills;
	s.args[4] = dir;
	s.opts[0] = opt;
	s.timeout_ms = 60000;
	run(&s, r);
	for (int i = 0; i < 7; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir,
			 (const char *const[]){ "crash.sh", "m1", "m2", "m3", "m4", "c", "p" }[i]);
		unlink(path);
	}
	rmdir(dir);
}

Test(run_crash, supervisor_killed_loses_nothing)
{
	struct run_result native, confined;
	char st[96];

	crash_run(false, NULL, 6, &native);
	cr_assert(!native.timed_out && native.status == 0 && strstr(native.out, "check: counter"),
		  "natively: %s\n%s%s", run_status_text(&native, st, sizeof(st)), native.out,
		  native.err);
	crash_run(true, "--crash-safe", 6, &confined);
	cr_assert(!confined.timed_out, "--crash-safe: timed out\n%s%s", confined.out, confined.err);
	cr_assert_str_eq(confined.out, native.out,
			 "--crash-safe, the supervisor killed: the program saw something else "
			 "(%s)\n%s\nnatively:\n%s",
			 confined.err, confined.out, native.out);
	cr_assert_eq(confined.status, 0, "%s", run_status_text(&confined, st, sizeof(st)));
	/* the kills landed while the clients were at work: each started another supervisor */
	cr_assert(strstr(confined.err, "kills 6"), "%s", confined.err);
	cr_assert_geq(count(confined.err, "another takes over from its journal"), 6, "%s",
		      confined.err);
	run_free(&native);
	run_free(&confined);
}

/* The test of the test: the same kills without --crash-safe lose the program's calls. */
Test(run_crash, without_the_option_the_kill_is_seen)
{
	struct run_result confined;

	crash_run(true, NULL, 1, &confined);
	cr_assert(!confined.timed_out, "timed out\n%s%s", confined.out, confined.err);
	cr_assert(strstr(confined.out, "ENOSYS"), "the kill did not meet the work:\n%s%s",
		  confined.out, confined.err);
	run_free(&confined);
}
