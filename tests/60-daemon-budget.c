/* SPDX-License-Identifier: MIT */
/*
 * semvisord's memory budget against real tenants: programs of different uids, served by one
 * daemon, each capped per uid and all together; refusals are ENOSPC and counted; a reload
 * applies new maxima; and a tenant's namespace that ends gives its memory back to the system.
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

/* daemon-sem ARGS as uid (in its own user and IPC namespace when own_ns): exit status, output. */
static int as_uid(const struct dh_daemon *d, int uid, bool own_ns, const char *const *args,
		  char **out)
{
	char reuid[32], regid[32];
	const char *argv[40];
	struct dh_cmd c;
	int n = 0;

	snprintf(reuid, sizeof(reuid), "--reuid=%d", uid);
	snprintf(regid, sizeof(regid), "--regid=%d", uid);
	argv[n++] = "setpriv";
	argv[n++] = reuid;
	argv[n++] = regid;
	argv[n++] = "--clear-groups";
	argv[n++] = "--";
	if (own_ns) {
		argv[n++] = "unshare";
		argv[n++] = "--user";
		argv[n++] = "--map-root-user";
		argv[n++] = "--ipc";
		argv[n++] = "--";
	}
	for (const char *const *a = dh_prog_argv(&c, d->sock, "daemon-sem", args); *a; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	return dh_run(argv, 60000, out);
}

static void need_setpriv(void)
{
	char *out;
	const char *argv[] = { "setpriv",
			       "--reuid=1000",
			       "--regid=1000",
			       "--clear-groups",
			       dh_bin("semvisor-run"),
			       "--version",
			       NULL };

	if (system("setpriv --version >/dev/null 2>&1") != 0)
		cr_skip_test("setpriv is not installed (Debian package util-linux)");
	if (dh_run(argv, 10000, &out) != 0)
		cr_skip_test("user 1000 cannot run %s here: %s", dh_bin("semvisor-run"), out);
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
	need_setpriv();
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
	cr_assert(strstr(out, "3 semgets refused (ENOSPC)"), "semvisorctl stats:\n%s", out);
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
	need_setpriv();
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
