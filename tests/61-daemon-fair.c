/* SPDX-License-Identifier: MIT */
/*
 * One daemon, greedy tenants and a victim: two users, each in a user and IPC namespace of its
 * own, loop SETALL+GETALL on sets of 32000 semaphores while a third tenant's semops are timed
 * (tests/prog/daemon-sem's greedy and probe). What must hold:
 *   - the greedy tenants' calls are served by the bulk lane, all but the few that made them
 *     heavy, and the victim's never are (semvisorctl stats' bulk_calls, exactly accounted);
 *   - every greedy tenant's GETALL reads back its SETALL, and the victim is served throughout;
 *   - the victim's p99 under load stays within RATIO (3, issue 15's goal) times its p99 alone:
 *     medians of three repetitions taken in turns, as bench/tenants.sh takes them (whose
 *     figures the README quotes), with up to two more sets of three if the machine spoiled
 *     the first. Without the bulk lane it was 17-20x. With it and the light threads' short
 *     slices, ten runs on 2 CPUs gave 1.7-2.8x in the first set nine times and 3.25x once:
 *     the rest is the greedy tenants' own processes and memory traffic beside the victim's
 *     (README, "semvisord and containers", Fairness). Sanitizer and debug builds are too
 *     slow and uneven to time, so they check the rest only.
 */
#include "tests/60-daemon-harness.h"

#include <sys/syscall.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(SV_DEBUG)
#define UNTIMED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNTIMED 1
#endif
#endif
#ifndef UNTIMED
#define UNTIMED 0
#endif

#define GREEDY_NSEMS "32000"
#define GREEDY_MS    "2000"
#define PROBES	     "2000"
#define REPS	     3 /* alone, loaded, alone, ...: the medians are compared */
#define ATTEMPTS     3
#define RATIO	     3

TestSuite(daemon_fair, .timeout = 180, .fini = dh_cleanup);

struct tenant {
	char reuid[32], regid[32];
	const char *argv[24];
	struct dh_cmd c;
};

/* daemon-sem greedy as uid, in a user and IPC namespace of its own, in the background */
static pid_t greedy(const struct dh_daemon *d, int uid, const char *name)
{
	struct tenant t;
	const char *const args[] = { "greedy", GREEDY_NSEMS, GREEDY_MS, NULL };
	int n = 0;

	snprintf(t.reuid, sizeof(t.reuid), "--reuid=%d", uid);
	snprintf(t.regid, sizeof(t.regid), "--regid=%d", uid);
	t.argv[n++] = "setpriv";
	t.argv[n++] = t.reuid;
	t.argv[n++] = t.regid;
	t.argv[n++] = "--clear-groups";
	t.argv[n++] = "--";
	t.argv[n++] = "unshare";
	t.argv[n++] = "--user";
	t.argv[n++] = "--map-root-user";
	t.argv[n++] = "--ipc";
	t.argv[n++] = "--";
	for (const char *const *a = dh_prog_argv(&t.c, d->sock, "daemon-sem", args); *a; a++)
		t.argv[n++] = *a;
	t.argv[n] = NULL;
	return dh_spawn(t.argv, dh_path(name));
}

/* Its rounds, once it has ended well. */
static long greedy_done(pid_t pid, const char *name)
{
	char *out;
	long rounds = -1;
	const char *at;
	int st;

	cr_assert(dh_wait(pid, 60000, &st), "%s did not end", name);
	out = dh_slurp(dh_path(name));
	at = out ? strstr(out, "greedy: rounds ") : NULL;
	if (at)
		rounds = strtol(at + strlen("greedy: rounds "), NULL, 10);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && rounds > 0, "%s: %s:\n%s", name,
		  dh_status_text(st), out);
	free(out);
	return rounds;
}

/* The victim, as root in the test's namespace: its p99 in nanoseconds. */
static long probe(const struct dh_daemon *d)
{
	char *out;
	long p50 = -1, p99 = -1;
	const char *at;

	cr_assert_eq(DH_SEM(d->sock, &out, "probe", PROBES), 0, "the victim failed:\n%s", out);
	at = strstr(out, "probe: p50 ");
	cr_assert(at && sscanf(at, "probe: p50 %ld p99 %ld", &p50, &p99) == 2, "%s", out);
	free(out);
	return p99;
}

static long bulk_calls(const char *ctl)
{
	const char *argv[] = { dh_bin("semvisorctl"), "--socket", ctl, "stats", "--json", NULL };
	char *out;
	const char *at;
	long n;

	cr_assert_eq(dh_run(argv, 10000, &out), 0, "semvisorctl stats:\n%s", out);
	at = strstr(out, "\"bulk_calls\":");
	cr_assert(at, "no bulk_calls in:\n%s", out);
	n = strtol(at + strlen("\"bulk_calls\":"), NULL, 10);
	free(out);
	return n;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* The median of three. */
static long median3(const long *v)
{
	long c[3] = { v[0], v[1], v[2] };

	qsort(c, 3, sizeof(c[0]), cmp_long);
	return c[1];
}

Test(daemon_fair, greedy_tenants_apart)
{
	char ctl[PATH_MAX + 32], ctlpath[PATH_MAX];
	long alone[REPS] = { 0 }, loaded[REPS] = { 0 };
	bool met = false;
	struct dh_daemon d;
	int attempt = 0;

	dh_setup();
	dh_need_setpriv();
	snprintf(ctlpath, sizeof(ctlpath), "%s", dh_path("ctl.sock"));
	snprintf(ctl, sizeof(ctl), "--control-socket=%s", ctlpath);
	dh_daemon_start(&d, "d",
			(const char *const[]){ ctl, "--set", "agent_socket_mode=0666", NULL });

	for (; attempt < ATTEMPTS && !met; attempt++) {
		for (int rep = 0; rep < REPS; rep++) {
			char n1[24], n2[24];
			long r1, r2, before, after;
			pid_t g1, g2;

			snprintf(n1, sizeof(n1), "g1.%d.%d.out", attempt, rep);
			snprintf(n2, sizeof(n2), "g2.%d.%d.out", attempt, rep);
			before = bulk_calls(ctlpath);
			alone[rep] = probe(&d);
			cr_assert_eq(bulk_calls(ctlpath), before,
				     "a light tenant was served by the bulk lane");

			g1 = greedy(&d, 1000, n1);
			g2 = greedy(&d, 1001, n2);
			/* both are heavy, and served apart, before the victim is timed */
			for (int64_t end = dh_now_ms() + 10000;
			     bulk_calls(ctlpath) < before + 20 && dh_now_ms() < end;)
				dh_sleep_ms(20);
			loaded[rep] = probe(&d);
			r1 = greedy_done(g1, n1);
			r2 = greedy_done(g2, n2);
			/*
			 * Each greedy tenant: a semget, rounds x (SETALL, GETALL), an IPC_RMID.
			 * The semget and the first SETALL come before it is heavy, and the call
			 * after that may still be the receiver's (it hands a listener back after
			 * one call): at most three calls each outside the lane. The victim's
			 * never enter it.
			 */
			after = bulk_calls(ctlpath);
			cr_assert(
			    after - before <= 2 * (r1 + r2) + 2 &&
				after - before >= 2 * (r1 + r2) - 4,
			    "bulk lane served %ld calls; the greedy tenants made %ld (+2 each)",
			    after - before, 2 * (r1 + r2));
			cr_log_info("attempt %d, rep %d: victim p99 %ld ns alone, %ld ns loaded; "
				    "greedy rounds %ld, %ld",
				    attempt + 1, rep + 1, alone[rep], loaded[rep], r1, r2);
			if (UNTIMED)
				break;
		}
		if (UNTIMED)
			break;
		met = median3(loaded) <= RATIO * median3(alone);
	}
	cr_assert(
	    UNTIMED || met,
	    "the victim's median p99 loaded was more than %dx its median p99 alone, %d times: "
	    "last %ld ns against %ld ns",
	    RATIO, attempt, median3(loaded), median3(alone));
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/* ---- short slices for the light threads (super.c) ------------------------------------------ */

/* The fields of struct sched_attr this test reads (the kernel's layout). */
struct sched_view {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime; /* SCHED_OTHER: the thread's slice, in ns (Linux 6.12 and later) */
	uint64_t deadline, period;
	uint32_t util_min, util_max;
};

static struct sched_view sched_of(pid_t tid)
{
	struct sched_view v = { 0 };

	cr_assert_eq(syscall(SYS_sched_getattr, tid, &v, sizeof(v), 0), 0, "sched_getattr(%d): %s",
		     (int)tid, strerror(errno));
	return v;
}

/*
 * Started under nice 3, with one worker (so there is a receiver): the worker and the receiver
 * run with the short slice and keep the daemon's nice value; the bulk worker keeps the default
 * slice and runs at nice 10 more than the others; the main thread is left as it was started.
 */
Test(daemon_fair, light_threads_get_short_slices)
{
	static const char *const wrap[] = { "nice", "-n", "3", NULL };
	struct sched_view main_view;
	struct dh_daemon d;
	char dir[64];
	int workers = 0, receivers = 0, bulk = 0;
	struct dirent *e;
	DIR *tasks;

	dh_setup();
	dh_daemon_wrap = wrap;
	dh_daemon_start(&d, "slices", (const char *const[]){ "--workers=1", NULL });
	dh_daemon_wrap = NULL;
	main_view = sched_of(d.pid);
	cr_assert_eq(main_view.nice, 3, "the daemon runs at nice %d", main_view.nice);
	if (main_view.runtime == 0) {
		dh_daemon_stop(&d);
		cr_skip_test("this kernel reports no slice for SCHED_OTHER threads (before 6.12)");
	}
	cr_assert_neq(main_view.runtime, 100000, "the main thread got the short slice");

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)d.pid);
	tasks = opendir(dir);
	cr_assert(tasks, "%s: %s", dir, strerror(errno));
	while ((e = readdir(tasks)) != NULL) {
		char path[128], *comm;
		struct sched_view v;
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%d/comm", dir, (int)tid);
		comm = dh_slurp(path);
		cr_assert(comm, "%s: %s", path, strerror(errno));
		comm[strcspn(comm, "\n")] = '\0';
		v = sched_of(tid);
		cr_assert_eq(v.policy, SCHED_OTHER, "%s (%d): policy %u", comm, (int)tid, v.policy);
		if (!strcmp(comm, "sv-worker") || !strcmp(comm, "sv-receiver")) {
			workers += comm[3] == 'w';
			receivers += comm[3] == 'r';
			cr_assert_eq(v.runtime, 100000, "%s (%d): slice %llu ns", comm, (int)tid,
				     (unsigned long long)v.runtime);
			cr_assert_eq(v.nice, 3, "%s (%d): nice %d", comm, (int)tid, v.nice);
		} else {
			cr_assert_eq(v.runtime, main_view.runtime, "%s (%d): slice %llu ns", comm,
				     (int)tid, (unsigned long long)v.runtime);
			if (!strcmp(comm, "sv-bulk")) {
				bulk++;
				cr_assert_eq(v.nice, 13, "sv-bulk (%d): nice %d", (int)tid, v.nice);
			} else {
				cr_assert_eq(v.nice, 3, "%s (%d): nice %d", comm, (int)tid, v.nice);
			}
		}
		free(comm);
	}
	closedir(tasks);
	cr_assert(workers == 1 && receivers == 1 && bulk == 1,
		  "threads named: %d sv-worker, %d sv-receiver, %d sv-bulk", workers, receivers,
		  bulk);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}
