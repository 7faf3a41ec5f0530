/* SPDX-License-Identifier: MIT */
/*
 * Who is calling, tried as a hostile program would: the supervisor must never serve a call
 * with an identity the caller does not have, nor let any call reach the kernel's own
 * semaphores. Each program of tests/prog runs natively, under semvisor-run and under
 * semvisord (semvisor-run --daemon), each time in a fresh IPC namespace, and the three runs
 * must print the same and end the same way; the native run must succeed (the programs check
 * what the kernel does).
 *
 *   ns-reuse     namespaces that die and are reborn with the same inode number start empty
 *   ns-held      a namespace held only by an open file keeps its sets
 *   i386-creds   root dropped through int $0x80 (setresuid32, the 16-bit setuid)
 *   exec-setuid  a non-leader thread execs a set-user-ID binary
 *   cred-race    setresuid on one thread racing IPC_RMID on another
 *   mem-prot     PROT_NONE, read-only and unmapped buffers for every command
 *   eintr-creds  set*id, setgroups, capset, execve, unshare/setns under a signal flood
 *   i386-entry   every 32-bit semaphore entry point fails closed (not differential)
 *   proc-view    /proc/sysvipc/sem and the tools that read it, with --proc-view
 *
 * A failure shows all three outputs.
 */
#include <criterion/criterion.h>
#include <sys/stat.h>

#include "tests/60-daemon-harness.h"
#include "tests/prog/i386.h"
#include "tests/run-harness.h"

#define I386_SKIP_REASON                                                                           \
	"this kernel does not serve int $0x80 (no IA32 emulation, or a hypervisor without a "      \
	"32-bit mode): no i386 program runs here, natively or confined"

static struct dh_daemon daemon_;
static char daemon_opt[PATH_MAX + 16];

static void setup(void)
{
	dh_setup_ns(false); /* each run makes its own IPC namespace */
	dh_daemon_start(&daemon_, "semvisord", NULL);
	snprintf(daemon_opt, sizeof(daemon_opt), "--daemon=%s", daemon_.sock);
}

static void teardown(void)
{
	run_cleanup();
	dh_cleanup();
}

TestSuite(run_security, .init = setup, .fini = teardown, .timeout = 300);

/* A skipped test does not get the suite's .fini: clean up first (teardown() may run twice). */
static void need_i386(void)
{
	if (!i386_available()) {
		teardown();
		cr_skip_test(I386_SKIP_REASON);
	}
}

static void show(const char *what, const struct run_result *r)
{
	char st[96];

	fprintf(stderr, "==== %s: %s (%s, %lld ms)\n%s%s==== end of %s\n", what, r->cmd,
		run_status_text(r, st, sizeof(st)), (long long)r->ms, r->out,
		r->out_len && r->out[r->out_len - 1] != '\n' ? "\n" : "", what);
}

/* Options only notification serves (semvisor-run(1)): no ptrace run for them. */
static bool needs_notify(const char *const *opts)
{
	for (int i = 0; opts && opts[i]; i++)
		if (!strcmp(opts[i], "--proc-view") || !strncmp(opts[i], "--crash-safe", 12))
			return true;
	return false;
}

/*
 * Run prog with args natively, under semvisor-run (with opts), under semvisord (with opts),
 * under semvisor-run --backend=ptrace and under semvisord tracing it (with opts), whose rules
 * for credentials, namespaces and caller memory are the same; each confined run must match the
 * native one.
 */
static void diff_each(const char *prog, const char *const *args, const char *const *opts,
		      int timeout_s)
{
	struct run_spec s = { .prog = prog, .timeout_ms = timeout_s * 1000 };
	struct run_result native, confined;
	const char *names[] = { "semvisor-run", "semvisord", "semvisor-run --backend=ptrace",
				"semvisord --backend=ptrace" };
	char st1[96], st2[96];

	for (int i = 0; args && args[i]; i++)
		s.args[i] = args[i];
	run(&s, &native);
	if (native.timed_out || !WIFEXITED(native.status) || WEXITSTATUS(native.status))
		show("native", &native);
	cr_assert(!native.timed_out && WIFEXITED(native.status) && !WEXITSTATUS(native.status),
		  "%s: the native run failed (%s): the program is wrong for this kernel", prog,
		  run_status_text(&native, st1, sizeof(st1)));
	for (int mode = 0; mode < 4; mode++) {
		const char *la, *lb;
		int n = 0, line;

		s.confined = true;
		memset(s.opts, 0, sizeof(s.opts));
		if (mode == 1 || mode == 3)
			s.opts[n++] = daemon_opt;
		if (mode >= 2) {
			if (needs_notify(opts))
				break;
			s.opts[n++] = "--backend=ptrace";
		}
		for (int i = 0; opts && opts[i] && n < 7; i++)
			s.opts[n++] = opts[i];
		run(&s, &confined);
		line = run_first_diff(native.out, confined.out, &la, &lb);
		if (line || confined.timed_out || confined.status != native.status) {
			show("native", &native);
			show(names[mode], &confined);
			if (mode == 1 || mode == 3) {
				char *log = dh_log(&daemon_);

				fprintf(stderr, "==== the daemon's log:\n%s", dh_tail(log, 40));
				free(log);
			}
		}
		cr_assert(!confined.timed_out, "%s under %s timed out after %lld ms", prog,
			  names[mode], (long long)confined.ms);
		cr_assert(line == 0, "%s: outputs differ from line %d:\n  native: %.*s\n  %s: %.*s",
			  prog, line, (int)strcspn(la, "\n"), la, names[mode],
			  (int)strcspn(lb, "\n"), lb);
		cr_assert(native.status == confined.status, "%s: native %s, %s %s", prog,
			  run_status_text(&native, st1, sizeof(st1)), names[mode],
			  run_status_text(&confined, st2, sizeof(st2)));
		run_free(&confined);
	}
	run_free(&native);
}

/* IPC namespaces born again with a dead one's inode number start empty, as natively */
Test(run_security, namespaces_reborn_empty)
{
	diff_each("ns-reuse", NULL, NULL, 120);
}

/* a namespace held by an open file keeps its sets while no process is in it */
Test(run_security, namespace_held_by_a_file)
{
	diff_each("ns-held", NULL, NULL, 60);
}

/* root dropped through i386's table (int $0x80) is dropped for us too */
Test(run_security, i386_credential_drop)
{
	need_i386();
	diff_each("i386-creds", NULL, NULL, 60);
}

/*
 * --proc-view: /proc/sysvipc/sem shows the program's own sets in the kernel's format, however
 * its path is written (relative, through /proc/self, a symlink, a dirfd, a second proc mount,
 * openat2's resolve flags), and ipcs, lsipc and ipcrm print what they print natively.
 */
Test(run_security, proc_sysvipc_sem_view)
{
	diff_each("proc-view", NULL, (const char *const[]){ "--proc-view", NULL }, 60);
}

/*
 * With --limits the supervisor no longer follows /proc/sys/kernel/sem, and --proc-view shows
 * what it holds: the program reads the limits it is served with, as natively it reads the
 * ones written into its namespace's file, and ipcs -l says the same.
 */
Test(run_security, proc_sysctl_view_with_limits)
{
	struct run_spec s = { .prog = "proc-view", .args = { "sysctl" }, .timeout_ms = 60000 };
	struct run_result native, confined;
	const char *la, *lb;
	int line;

	s.sem_sysctl = "250 32000 32 128";
	run(&s, &native);
	cr_assert(!native.timed_out && native.status == 0, "natively:\n%s", native.out);
	cr_assert(strstr(native.out, "250\t32000\t32\t128"), "the file was not written:\n%s",
		  native.out);
	s.sem_sysctl = NULL;
	s.confined = true;
	s.opts[0] = "--limits=250,32000,32,128";
	s.opts[1] = "--proc-view";
	run(&s, &confined);
	line = run_first_diff(native.out, confined.out, &la, &lb);
	if (line || confined.status != native.status) {
		show("native", &native);
		show("semvisor-run", &confined);
	}
	cr_assert(line == 0, "outputs differ from line %d:\n  native: %.*s\n  confined: %.*s", line,
		  (int)strcspn(la, "\n"), la, (int)strcspn(lb, "\n"), lb);
	cr_assert_eq(confined.status, native.status);
	run_free(&native);
	run_free(&confined);
}

/* a non-leader thread's exec of a set-user-ID binary: the new credentials count */
Test(run_security, exec_setuid_from_a_thread)
{
	diff_each("exec-setuid", NULL, NULL, 60);
}

/* a removal is never ordered after a credential change that has completed */
Test(run_security, setresuid_racing_rmid)
{
	diff_each("cred-race", (const char *const[]){ "3000", NULL }, NULL, 240);
}

/* the same with four workers, where the calls of two threads are served at once */
Test(run_security, setresuid_racing_rmid_four_workers)
{
	diff_each("cred-race", (const char *const[]){ "3000", NULL },
		  (const char *const[]){ "--workers=4", NULL }, 240);
}

/* caller memory is read and written with the caller's own access rights */
Test(run_security, memory_protections)
{
	diff_each("mem-prot", NULL, NULL, 60);
}

/* credential changes, execve and untrapped namespace changes never fail with EINTR */
Test(run_security, no_eintr_under_a_signal_flood)
{
	diff_each("eintr-creds", (const char *const[]){ "20000", NULL }, NULL, 240);
}

/*
 * unshare(CLONE_SYSVSEM) and setns(CLONE_NEWIPC) are trapped (filter.h): interrupted by a
 * handler without SA_RESTART they may fail with EINTR, and never otherwise. The counts are
 * logged, for the record of what that costs.
 */
Test(run_security, trapped_namespace_calls_fail_only_with_eintr)
{
	struct run_spec s = { .prog = "eintr-creds",
			      .args = { "5000", "trapped" },
			      .confined = true,
			      .split = true,
			      .timeout_ms = 120000 };
	struct run_result r;
	char st[96];

	run(&s, &r);
	if (r.timed_out || !WIFEXITED(r.status) || WEXITSTATUS(r.status))
		show("semvisor-run", &r);
	cr_assert(!r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
		  "trapped namespace calls failed otherwise than with EINTR (%s)",
		  run_status_text(&r, st, sizeof(st)));
	cr_log_info("%s", r.err);
	run_free(&r);
}

/* every i386 semaphore entry point fails with ENOSYS; natively each is served */
Test(run_security, i386_entry_points_fail_closed)
{
	struct run_spec s = { .prog = "i386-entry", .timeout_ms = 60000 };
	struct run_result r;
	char st[96];

	need_i386();

	s.args[0] = "native";
	run(&s, &r);
	if (r.timed_out || r.status)
		show("native", &r);
	cr_assert(!r.timed_out && r.status == 0, "natively the i386 entry points misbehave (%s)",
		  run_status_text(&r, st, sizeof(st)));
	run_free(&r);
	s.args[0] = "confined";
	s.confined = true;
	for (int mode = 0; mode < 2; mode++) {
		if (mode == 1)
			s.opts[0] = daemon_opt;
		run(&s, &r);
		if (r.timed_out || r.status)
			show(mode ? "semvisord" : "semvisor-run", &r);
		cr_assert(!r.timed_out && r.status == 0,
			  "an i386 semaphore entry point was not refused (%s), %s",
			  run_status_text(&r, st, sizeof(st)), mode ? "semvisord" : "semvisor-run");
		run_free(&r);
	}
}

/*
 * On kernels before 6.13 (no PIDFD_GET_INFO, PIDFD_THREAD before 6.9, no namespace ids before
 * 6.18) the supervisor reads everything from /proc on every call and proves it with
 * NOTIF_ID_VALID (ident.h): the same programs, with those interfaces turned off for
 * semvisor-run (the daemon keeps them: both ways are checked).
 */
Test(run_security, without_the_newer_kernel_interfaces)
{
	setenv("SEMVISOR_KERNEL_FEATURES_OFF", "all", 1);
	diff_each("ns-reuse", NULL, NULL, 120);
	if (i386_available())
		diff_each("i386-creds", NULL, NULL, 60);
	else
		fprintf(stderr, "i386-creds left out: %s\n", I386_SKIP_REASON);
	diff_each("exec-setuid", NULL, NULL, 60);
	diff_each("mem-prot", NULL, NULL, 60);
	/* every call reads /proc/TID/status, whose Groups: line is here longer than a page */
	diff_each("perms", (const char *const[]){ "manygroups", NULL }, NULL, 60);
	diff_each("cred-race", (const char *const[]){ "1000", NULL },
		  (const char *const[]){ "--workers=4", NULL }, 240);
}

/*
 * Namespaces a confined program makes (unshare, clone, setns, a thread's unshare) end with
 * the kernel's: once each has died, semvisor-run's control socket shows them ended and lists
 * only the program's own namespace, while the program still runs.
 */
Test(run_security, namespaces_end_while_the_program_runs)
{
	char ctl[PATH_MAX], ctlopt[PATH_MAX + 16], done[PATH_MAX];
	struct run_spec s = { .prog = "ns-die", .confined = true, .timeout_ms = 60000 };
	struct run_handle h;
	struct run_result r;
	char *out = NULL;

	snprintf(ctl, sizeof(ctl), "%s", dh_path("ctl.sock"));
	snprintf(done, sizeof(done), "%s", dh_path("done"));
	snprintf(ctlopt, sizeof(ctlopt), "--control=%s", ctl);
	s.args[0] = done;
	s.opts[0] = ctlopt;
	run_start(&s, &h, &r);
	cr_assert(run_pump(&h, "ready\n"), "ns-die never got ready:\n%s", r.out);
	for (int i = 0;; i++) {
		const char *argv[] = {
			dh_bin("semvisorctl"), "--socket", ctl, "stats", "--json", NULL
		};

		free(out);
		cr_assert_eq(dh_run(argv, 10000, &out), 0, "semvisorctl stats:\n%s", out);
		if (strstr(out, "\"namespaces_ended\":4") && dh_count(out, "\"name\":\"ipc:[") == 1)
			break;
		cr_assert(i < 100, "4 dead namespaces not ended after 5 s:\n%s", out);
		dh_sleep_ms(50);
	}
	free(out);
	dh_write_file(done, "done\n");
	run_finish(&h);
	cr_assert(!r.timed_out && r.status == 0, "ns-die:\n%s", r.out);
	run_free(&r);
}
