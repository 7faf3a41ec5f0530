/* SPDX-License-Identifier: MIT */
/*
 * Differential tests of semvisor-run: each program of tests/prog runs natively and under
 * semvisor-run, each time in a fresh IPC namespace, and both runs must print the same (stdout
 * and stderr together, in order) and end the same way. The native run must also succeed: every
 * program checks what the kernel is known to do and exits 1 when it does not, so a program that
 * has drifted from the kernel is caught here as a broken test, not as a semvisor bug.
 *
 * One Test() per program (and argument set) and way of serving calls (run_diff: seccomp user
 * notification; run_diff_ptrace: --backend=ptrace; run_diff_fast: --fast, the fast path's
 * library preloaded), so a failure names the behaviour and the way. On a mismatch both outputs are printed in full, with the first differing line in the
 * assertion message.
 */
#include <criterion/criterion.h>

#include "tests/run-harness.h"

TestSuite(run_diff, .fini = run_cleanup, .timeout = 90);
TestSuite(run_diff_ptrace, .fini = run_cleanup, .timeout = 90);
TestSuite(run_diff_fast, .fini = run_cleanup, .timeout = 90);

static void show_output(const char *what, const struct run_result *r)
{
	char st[96];

	fprintf(stderr, "==== %s: %s (%s, %lld ms)\n%s%s==== end of %s\n", what, r->cmd,
		run_status_text(r, st, sizeof(st)), (long long)r->ms, r->out,
		r->out_len && r->out[r->out_len - 1] != '\n' ? "\n" : "", what);
}

/*
 * Run prog with args natively and confined (with semvisor-run option opt, or NULL); compare.
 * timeout_s bounds each run.
 */
static void diff_args(const char *prog, const char *const *args, int timeout_s, const char *opt)
{
	struct run_spec s = { .prog = prog, .timeout_ms = timeout_s * 1000, .opts = { opt } };
	struct run_result native, confined;
	const char *la, *lb;
	char st1[96], st2[96];
	int line;

	for (int i = 0; args && args[i]; i++)
		s.args[i] = args[i];
	run(&s, &native);
	s.confined = true;
	run(&s, &confined);

	line = run_first_diff(native.out, confined.out, &la, &lb);
	if (line || native.timed_out || confined.timed_out || native.status != confined.status ||
	    !WIFEXITED(native.status) || WEXITSTATUS(native.status) != 0) {
		show_output("native", &native);
		show_output("semvisor-run", &confined);
	}
	cr_assert(!native.timed_out, "%s: the native run timed out (%s)", prog, native.cmd);
	cr_assert(!confined.timed_out, "%s: the run under semvisor-run timed out after %lld ms",
		  prog, (long long)confined.ms);
	cr_assert(WIFEXITED(native.status) && WEXITSTATUS(native.status) == 0,
		  "%s: the native run failed (%s): the test program is wrong for this kernel", prog,
		  run_status_text(&native, st1, sizeof(st1)));
	cr_assert(line == 0,
		  "%s: outputs differ from line %d:\n  native:       %.*s\n  semvisor-run: %.*s",
		  prog, line, (int)strcspn(la, "\n"), la, (int)strcspn(lb, "\n"), lb);
	cr_assert(native.status == confined.status, "%s: native %s, semvisor-run %s", prog,
		  run_status_text(&native, st1, sizeof(st1)),
		  run_status_text(&confined, st2, sizeof(st2)));
	run_free(&native);
	run_free(&confined);
}

/* prog run with its arguments (after the timeout), natively and under each backend */
#define DIFF(name, prog, timeout_s, ...)                                                           \
	Test(run_diff, name)                                                                       \
	{                                                                                          \
		diff_args(prog, (const char *const[]){ __VA_ARGS__ NULL }, timeout_s, NULL);       \
	}                                                                                          \
	Test(run_diff_ptrace, name)                                                                \
	{                                                                                          \
		diff_args(prog, (const char *const[]){ __VA_ARGS__ NULL }, timeout_s,              \
			  "--backend=ptrace");                                                     \
	}                                                                                          \
	Test(run_diff_fast, name)                                                                  \
	{                                                                                          \
		diff_args(prog, (const char *const[]){ __VA_ARGS__ NULL }, timeout_s, "--fast");   \
	}

/* every semctl command and error, and the semget rules */
DIFF(semctl, "semctl", 30)

/* permissions under seven identities, setuid nobody among them */
DIFF(perms, "perms", 30)

/* keyed sharing between separately forked (and exec'd) processes */
DIFF(keyed, "keyed", 30)

/* SEM_UNDO at exit, kill -9, exec, fork, thread exit, clearing, clamping, limits */
DIFF(undo, "undo", 30)

/* a CLONE_VM child's semop before and after its exec: each reads its own address space */
DIFF(exec_vm, "exec-vm", 30)

/* SEM_UNDO applied before the parent can reap: 100 exits and kills, 20 woken waiters */
DIFF(undo_timing, "undo-timing", 30)

/* SEM_UNDO applied at unshare(CLONE_SYSVSEM) and unshare(CLONE_NEWIPC) */
DIFF(undo_unshare, "undo-unshare", 30)

/* bulk wake-ups, FIFO order, wait-for-zero */
DIFF(wake, "wake", 30)

/* multi-semaphore operations: all-or-nothing, blocking, re-evaluation */
DIFF(complex, "complex", 30)

/* semtimedop timeouts, on time */
DIFF(timeout, "timeout", 30)

/* EINTR with and without SA_RESTART, after SIGSTOP/SIGCONT, per thread */
DIFF(eintr, "eintr", 30)

/* the same call again after EINTR: at once, later, alarm() timeouts */
DIFF(eintr_retry, "eintr-retry", 30)

/* calls that cannot sleep never return EINTR, and happen exactly once, under a signal flood */
DIFF(eintr_nosleep, "eintr-nosleep", 30)

/* killed sleepers never consume a unit */
DIFF(killed, "killed", 30)

/* a call made while another waits takes nothing from it, even before it parks (--fast) */
DIFF(fast_wait, "fast-wait", 30)

/* IPC_RMID with sleepers: EIDRM */
DIFF(rmid, "rmid", 30)

/* GETPID seen from inside and outside a new pid namespace */
DIFF(pidns, "pidns", 30)

/* 8 threads x 20000 iterations of a semaphore-guarded plain counter; a set shared by threads */
DIFF(mutex, "mutex", 60, "20000", )

/* a program whose own seccomp filter refuses pause(): waits still end as natively */
DIFF(own_filter, "own-filter", 30)

/* SIGTRAPs whose si_code is a ptrace stop's, sent to itself: delivered as sent */
DIFF(forged_trap, "forged-trap", 30)

/* glibc wrappers and raw system calls, register quirks, check order, user memory */
DIFF(syscalls, "syscalls", 30)

/* the same from a statically linked binary */
DIFF(static_syscalls, "static-syscalls", 30)

/* limits written to /proc/sys/kernel/sem inside the namespace */
DIFF(sysctl, "sysctl", 30)
