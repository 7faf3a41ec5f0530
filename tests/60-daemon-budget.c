/* SPDX-License-Identifier: MIT */
/*
 * semvisord's memory budget against real tenants: programs of different uids, served by one
 * daemon, each capped per uid and all together; refusals are ENOSPC (sets, semaphores,
 * namespaces) or ENOMEM (undo entries, parked calls) and counted; a reload applies new maxima;
 * and a tenant's namespace that ends gives its memory back to the system.
 *
 * Each test runs in a fresh IPC namespace (dh_setup) with its own daemon; the programs are
 * tests/prog/daemon-sem, run as other users with setpriv(1).
 */
#include <signal.h>

#include "tests/60-daemon-harness.h"

/* The daemon under test is built as this test is (make SAN=asan builds both). */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

TestSuite(daemon_budget, .timeout = 120, .fini = dh_cleanup);

/* argv for daemon-sem ARGS as uid (in its own user and IPC namespace when own_ns) */
struct uid_cmd {
	char reuid[32], regid[32];
	const char *argv[40];
	struct dh_cmd c;
};

static const char *const *uid_argv(struct uid_cmd *u, const struct dh_daemon *d, int uid,
				   bool own_ns, const char *const *args)
{
	int n = 0;

	snprintf(u->reuid, sizeof(u->reuid), "--reuid=%d", uid);
	snprintf(u->regid, sizeof(u->regid), "--regid=%d", uid);
	u->argv[n++] = "setpriv";
	u->argv[n++] = u->reuid;
	u->argv[n++] = u->regid;
	u->argv[n++] = "--clear-groups";
	u->argv[n++] = "--";
	if (own_ns) {
		u->argv[n++] = "unshare";
		u->argv[n++] = "--user";
		u->argv[n++] = "--map-root-user";
		u->argv[n++] = "--ipc";
		u->argv[n++] = "--";
	}
	for (const char *const *a = dh_prog_argv(&u->c, d->sock, "daemon-sem", args); *a; a++)
		u->argv[n++] = *a;
	u->argv[n] = NULL;
	return u->argv;
}

/* daemon-sem ARGS as uid (in its own user and IPC namespace when own_ns): exit status, output. */
static int as_uid(const struct dh_daemon *d, int uid, bool own_ns, const char *const *args,
		  char **out)
{
	struct uid_cmd u;

	return dh_run(uid_argv(&u, d, uid, own_ns, args), 60000, out);
}

/*
 * The same, again every 100 ms (5 s at most) until its output holds want: what the daemon
 * gives back when a process or namespace ends, it learns of a moment later.
 */
static void as_uid_until(const struct dh_daemon *d, int uid, bool own_ns, const char *const *args,
			 const char *want, const char *what)
{
	char *out;

	for (int i = 0;; i++) {
		cr_assert_eq(as_uid(d, uid, own_ns, args, &out), 0, "%s", out);
		if (strstr(out, want))
			break;
		cr_assert(i < 49, "%s:\n%s", what, out);
		free(out);
		dh_sleep_ms(100);
	}
	free(out);
}

/* The same, in the background, its output in the test directory's file NAME: the pid. */
static pid_t as_uid_bg(const struct dh_daemon *d, int uid, bool own_ns, const char *const *args,
		       const char *name)
{
	struct uid_cmd u;

	return dh_spawn(uid_argv(&u, d, uid, own_ns, args), dh_path(name));
}

/* Wait for a background tenant: it must exit 0 and its output must hold want. */
static void bg_done(pid_t pid, const char *name, const char *want)
{
	char *out;
	int st;

	cr_assert(dh_wait(pid, 30000, &st), "%s did not end", name);
	out = dh_slurp(dh_path(name));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && out && strstr(out, want),
		  "%s: %s, wanted '%s' in:\n%s", name, dh_status_text(st), want, out);
	free(out);
}

static char *stats(const char *ctl, const char *json)
{
	const char *argv[] = { dh_bin("semvisorctl"), "--socket", ctl, "stats", json, NULL };
	char *out;

	cr_assert_eq(dh_run(argv, 10000, &out), 0, "semvisorctl stats:\n%s", out);
	return out;
}

#define FILL(d, uid, nsems, count, out)                                                            \
	as_uid((d), (uid), false, (const char *const[]){ "fill", nsems, count, NULL }, (out))

/*
 * One uid fills its budget and gets ENOSPC at exactly the bound while another is still served;
 * the daemon-wide bound stops a third; the refusals show in semvisorctl stats; a reload raises
 * the bounds for new sets.
 */
Test(daemon_budget, per_uid_and_daemon_wide)
{
	char ctl[PATH_MAX + 32], ctlpath[PATH_MAX], confopt[PATH_MAX + 16], conf[PATH_MAX], *out;
	struct dh_daemon d;

	dh_setup();
	dh_need_setpriv();
	/* a copy: dh_path()'s buffers are reused after a few calls */
	snprintf(conf, sizeof(conf), "%s", dh_path("budget.conf"));
	dh_write_file(conf, "agent_socket_mode = 0666\nmax_semaphores_per_uid = 100\n"
			    "max_semaphores = 250\n");
	snprintf(confopt, sizeof(confopt), "--config=%s", conf);
	snprintf(ctlpath, sizeof(ctlpath), "%s", dh_path("ctl.sock"));
	snprintf(ctl, sizeof(ctl), "--control-socket=%s", ctlpath);
	dh_daemon_start(&d, "d", (const char *const[]){ confopt, ctl, NULL });

	cr_assert_eq(FILL(&d, 1000, "10", "20", &out), 0, "%s", out);
	cr_assert(strstr(out, "fill: made 10\nfill: refused ENOSPC\nfill: served\n"),
		  "uid 1000 was not stopped at exactly 100 semaphores:\n%s", out);
	free(out);
	cr_assert_eq(FILL(&d, 1001, "10", "5", &out), 0, "%s", out);
	cr_assert(strstr(out, "fill: made 5\nfill: served\n") && !strstr(out, "refused"),
		  "uid 1001 was not served while 1000 was full:\n%s", out);
	free(out);
	cr_assert_eq(FILL(&d, 1000, "1", "1", &out), 0, "%s", out);
	cr_assert(strstr(out, "fill: made 0\nfill: refused ENOSPC\n"), "%s", out);
	free(out);
	/* 150 in all: a third uid's second 100 would pass 250 */
	cr_assert_eq(FILL(&d, 1002, "100", "2", &out), 0, "%s", out);
	cr_assert(strstr(out, "fill: made 1\nfill: refused ENOSPC\nfill: served\n"),
		  "the daemon-wide bound did not hold:\n%s", out);
	free(out);

	out = stats(ctlpath, NULL);
	cr_assert(strstr(out, "3 refused: 3 semaphores, 0 sets (semget ENOSPC)"),
		  "semvisorctl stats:\n%s", out);
	cr_assert(strstr(out, "ENOSPC 3"), "semvisorctl stats:\n%s", out);
	free(out);
	out = stats(ctlpath, "--json");
	cr_assert(strstr(out, "\"budget_refused\":3"), "semvisorctl stats --json:\n%s", out);
	free(out);

	/* a reload raises both bounds: uid 1000 gets 100 more, and no more */
	dh_write_file(conf, "agent_socket_mode = 0666\nmax_semaphores_per_uid = 200\n"
			    "max_semaphores = 1000\n");
	kill(d.pid, SIGHUP);
	cr_assert(dh_wait_file(d.log, "reload: budget now 1000 semaphores (200 per uid)", 1, 5000),
		  "%s", dh_log(&d));
	cr_assert_eq(FILL(&d, 1000, "10", "20", &out), 0, "%s", out);
	cr_assert(strstr(out, "fill: made 10\nfill: refused ENOSPC\nfill: served\n"), "%s", out);
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/* Wait until semvisorctl stats --json says that many namespaces ended (5 s at most). */
static void wait_ended(const char *ctl, int count)
{
	const char *argv[] = { dh_bin("semvisorctl"), "--socket", ctl, "stats", "--json", NULL };
	char want[64], *out;

	snprintf(want, sizeof(want), "\"namespaces_ended\":%d", count);
	for (int i = 0;; i++) {
		cr_assert_eq(dh_run(argv, 10000, &out), 0, "semvisorctl stats:\n%s", out);
		if (strstr(out, want))
			break;
		cr_assert(i < 100, "not %d namespaces ended after 5 s:\n%s", count, out);
		free(out);
		dh_sleep_ms(50);
	}
	free(out);
}

/*
 * The memory hog of issue 15: two unprivileged tenants, each in its own user and IPC namespace,
 * hold big sets and leave. Once their namespaces end the daemon's RSS comes back to within 10%
 * of where it started (malloc_trim after a namespace ends), instead of keeping what they freed.
 */
Test(daemon_budget, memory_returned)
{
	char ctl[PATH_MAX + 32], ctlpath[PATH_MAX], *out;
	struct dh_daemon d;
	long before, peak, after = 0, slack;

	/* ASan's allocator keeps what is freed in its quarantine: RSS does not come back there */
	if (UNDER_ASAN)
		cr_skip_test("RSS is AddressSanitizer's under ASan");
	dh_setup();
	dh_need_setpriv();
	snprintf(ctlpath, sizeof(ctlpath), "%s", dh_path("ctl.sock"));
	snprintf(ctl, sizeof(ctl), "--control-socket=%s", ctlpath);
	dh_daemon_start(&d, "d",
			(const char *const[]){ ctl, "--set", "agent_socket_mode=0666", "--set",
					       "max_semaphores=0", "--set",
					       "max_semaphores_per_uid=0", NULL });
	/* a first tenant, so that what serving one costs by itself counts in "before" */
	cr_assert_eq(as_uid(&d, 1000, true, (const char *const[]){ "semget", "1", NULL }, &out), 0,
		     "%s", out);
	free(out);
	wait_ended(ctlpath, 1);
	dh_sleep_ms(200);
	before = dh_proc_status(d.pid, "VmRSS");

	/* two tenants, one after the other, 40 sets of 32000 each (80 MB each) */
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(as_uid(&d, 1000 + i, true,
				    (const char *const[]){ "fill", "32000", "40", NULL }, &out),
			     0, "%s", out);
		cr_assert(strstr(out, "fill: made 40\nfill: served\n"), "%s", out);
		free(out);
	}
	peak = dh_proc_status(d.pid, "VmHWM");
	wait_ended(ctlpath, 3);
	/* back within 10% of the start (1 MB at least: a start of 3.5 MB leaves little room) */
	slack = before / 10 > 1024 ? before / 10 : 1024;
	for (int i = 0; i < 60; i++) {
		after = dh_proc_status(d.pid, "VmRSS");
		if (after <= before + slack)
			break;
		dh_sleep_ms(50);
	}
	fprintf(stderr,
		"daemon_budget.memory_returned: VmRSS before %ld kB, peak %ld kB, after %ld kB\n",
		before, peak, after);
	cr_assert_gt(peak, before + 60000, "the tenants did not cost what they should have");
	cr_assert_leq(after, before + slack,
		      "RSS stayed at %ld kB after the tenants left (%ld kB before, %ld kB at peak)",
		      after, before, peak);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/* A daemon with the control socket at ctlpath and these configuration lines. */
static void start_with(struct dh_daemon *d, char *ctlpath, size_t len, const char *conf_text)
{
	char ctl[PATH_MAX + 32], confopt[PATH_MAX + 16], conf[PATH_MAX];

	snprintf(conf, sizeof(conf), "%s", dh_path("budget.conf"));
	dh_write_file(conf, "agent_socket_mode = 0666\n%s", conf_text);
	snprintf(confopt, sizeof(confopt), "--config=%s", conf);
	snprintf(ctlpath, len, "%s", dh_path("ctl.sock"));
	snprintf(ctl, sizeof(ctl), "--control-socket=%s", ctlpath);
	dh_daemon_start(d, "d", (const char *const[]){ confopt, ctl, NULL });
}

/* semvisorctl stats says that many refusals of that kind ("waiters", ...) */
static void expect_refused(const char *ctlpath, const char *kind, int n)
{
	char want[96], *out = stats(ctlpath, NULL);

	snprintf(want, sizeof(want), " %d %s", n, kind);
	cr_assert(strstr(out, want), "wanted '%s' in semvisorctl stats:\n%s", want, out);
	free(out);
	out = stats(ctlpath, "--json");
	snprintf(want, sizeof(want), "\"%s\":%d", kind, n);
	cr_assert(strstr(out, want), "wanted '%s' in semvisorctl stats --json:\n%s", want, out);
	free(out);
}

/*
 * Parked calls: a tenant parking more than max_waiters_per_uid at once gets ENOMEM for the
 * extra ones, while another uid still parks up to the daemon-wide bound; once released, the
 * first one parks as many again.
 */
Test(daemon_budget, waiters)
{
	char ctlpath[PATH_MAX], *out;
	struct dh_daemon d;
	pid_t bg;

	dh_setup();
	dh_need_setpriv();
	start_with(&d, ctlpath, sizeof(ctlpath), "max_waiters_per_uid = 3\nmax_waiters = 5\n");
	bg = as_uid_bg(&d, 1000, false,
		       (const char *const[]){ "park", "0x5100", "5", "4000", NULL }, "park1000");
	cr_assert(
	    dh_wait_file(dh_path("park1000"), "park: parked 3\npark: refused ENOMEM 2\n", 1, 20000),
	    "uid 1000 was not stopped at 3 parked calls:\n%s\n%s", dh_slurp(dh_path("park1000")),
	    dh_log(&d));

	/* while 1000's three wait: 1001 parks two, and the daemon-wide bound refuses a third */
	cr_assert_eq(as_uid(&d, 1001, false,
			    (const char *const[]){ "park", "0x5101", "3", "0", NULL }, &out),
		     0, "%s", out);
	cr_assert(strstr(out, "park: parked 2\npark: refused ENOMEM 1\npark: woken 2\n"),
		  "uid 1001 was not served up to the daemon-wide bound:\n%s", out);
	free(out);
	bg_done(bg, "park1000", "park: woken 3\n");

	/* every waiter ended: the whole budget is back */
	cr_assert_eq(as_uid(&d, 1000, false,
			    (const char *const[]){ "park", "0x5100", "3", "0", NULL }, &out),
		     0, "%s", out);
	cr_assert(strstr(out, "park: parked 3\npark: woken 3\n") && !strstr(out, "refused"), "%s",
		  out);
	free(out);
	expect_refused(ctlpath, "waiters", 3);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/*
 * Undo entries: a tenant making more than max_undos_per_uid gets ENOMEM from the semop (nothing
 * applied) while another uid still makes them up to the daemon-wide bound; its exit gives them
 * back.
 */
Test(daemon_budget, undos)
{
	char ctlpath[PATH_MAX], *out = NULL;
	struct dh_daemon d;
	pid_t bg;

	dh_setup();
	dh_need_setpriv();
	start_with(&d, ctlpath, sizeof(ctlpath), "max_undos_per_uid = 3\nmax_undos = 5\n");
	bg = as_uid_bg(&d, 1000, false, (const char *const[]){ "undo", "5", "4000", NULL },
		       "undo1000");
	cr_assert(dh_wait_file(dh_path("undo1000"),
			       "undo: made 3\nundo: refused ENOMEM\nundo: served\n", 1, 20000),
		  "uid 1000 was not stopped at 3 undo entries:\n%s\n%s",
		  dh_slurp(dh_path("undo1000")), dh_log(&d));

	cr_assert_eq(as_uid(&d, 1001, false, (const char *const[]){ "undo", "3", "0", NULL }, &out),
		     0, "%s", out);
	cr_assert(strstr(out, "undo: made 2\nundo: refused ENOMEM\nundo: served\n"),
		  "uid 1001 was not served up to the daemon-wide bound:\n%s", out);
	free(out);
	bg_done(bg, "undo1000", "undo: served\n");

	/* the exits gave every entry back (the daemon learns of an exit a moment later) */
	as_uid_until(&d, 1000, false, (const char *const[]){ "undo", "3", "0", NULL },
		     "undo: made 3\nundo: served\n", "uid 1000's entries did not come back");
	out = stats(ctlpath, NULL);
	cr_assert(strstr(out, " 2 undo entries"), "semvisorctl stats:\n%s", out);
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/*
 * Namespaces: a tenant making IPC namespaces past max_namespaces_per_uid gets ENOSPC from
 * semget in the new one while its existing ones still work; another uid still gets one, up to
 * the daemon-wide bound; once they end, there is room again.
 */
Test(daemon_budget, namespaces)
{
	char ctlpath[PATH_MAX], *out = NULL;
	struct dh_daemon d;
	pid_t a, b, c;

	dh_setup();
	dh_need_setpriv();
	start_with(&d, ctlpath, sizeof(ctlpath),
		   "max_namespaces_per_uid = 2\nmax_namespaces = 3\n");
	a = as_uid_bg(&d, 1000, true, (const char *const[]){ "keep", "0x5300", "3000", NULL },
		      "ns-a");
	cr_assert(dh_wait_file(dh_path("ns-a"), "keep: made\n", 1, 20000), "%s\n%s",
		  dh_slurp(dh_path("ns-a")), dh_log(&d));
	b = as_uid_bg(&d, 1000, true, (const char *const[]){ "keep", "0x5300", "3000", NULL },
		      "ns-b");
	cr_assert(dh_wait_file(dh_path("ns-b"), "keep: made\n", 1, 20000), "%s\n%s",
		  dh_slurp(dh_path("ns-b")), dh_log(&d));

	cr_assert_eq(
	    as_uid(&d, 1000, true, (const char *const[]){ "keep", "0x5300", "0", NULL }, &out), 0,
	    "%s", out);
	cr_assert(strstr(out, "keep: refused ENOSPC\n"), "uid 1000's third namespace:\n%s", out);
	free(out);
	c = as_uid_bg(&d, 1001, true, (const char *const[]){ "keep", "0x5300", "3000", NULL },
		      "ns-c");
	cr_assert(dh_wait_file(dh_path("ns-c"), "keep: made\n", 1, 20000),
		  "another uid got no namespace:\n%s\n%s", dh_slurp(dh_path("ns-c")), dh_log(&d));
	cr_assert_eq(
	    as_uid(&d, 1002, true, (const char *const[]){ "keep", "0x5300", "0", NULL }, &out), 0,
	    "%s", out);
	cr_assert(strstr(out, "keep: refused ENOSPC\n"), "past the daemon-wide bound:\n%s", out);
	free(out);
	/* the daemon's own namespace is not counted */
	cr_assert_eq(
	    as_uid(&d, 1002, false, (const char *const[]){ "keep", "0x5300", "0", NULL }, &out), 0,
	    "%s", out);
	cr_assert(strstr(out, "keep: made\nkeep: served\n"), "%s", out);
	free(out);

	/* the namespaces taken on kept working */
	bg_done(a, "ns-a", "keep: served\n");
	bg_done(b, "ns-b", "keep: served\n");
	bg_done(c, "ns-c", "keep: served\n");
	wait_ended(ctlpath, 3);
	as_uid_until(&d, 1000, true, (const char *const[]){ "keep", "0x5300", "0", NULL },
		     "keep: made\nkeep: served\n", "no room after the namespaces ended");
	/* each call from a refused namespace counts: two semgets at least */
	out = stats(ctlpath, NULL);
	cr_assert(strstr(out, " namespaces\n") && strstr(out, "(semop ENOMEM); "), "%s", out);
	cr_assert_geq(atoi(strstr(out, "(semop ENOMEM); ") + strlen("(semop ENOMEM); ")), 2,
		      "semvisorctl stats:\n%s", out);
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}
