/* SPDX-License-Identifier: MIT */
/*
 * semvisord serving programs started separately with `semvisor-run --daemon=SOCKET`: they meet
 * through a keyed set exactly as on one kernel (and only within one IPC namespace), the set
 * outlives them in the daemon, and without a daemon semvisor-run fails clearly.
 *
 * Each test runs in a fresh IPC namespace (dh_setup) with its own daemon; the programs are
 * tests/prog/daemon-sem.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/60-daemon-harness.h"

TestSuite(daemon_share, .timeout = 90, .fini = dh_cleanup);

#define KEY    "0x5e3a0001"
#define ROUNDS 1000

/* Sets the kernel holds in the caller's IPC namespace (/proc/sysvipc/sem minus its header). */
static int kernel_sets(void)
{
	char *text = dh_slurp("/proc/sysvipc/sem");
	int n = dh_count(text, "\n") - 1;

	free(text);
	return n;
}

Test(daemon_share, pingpong)
{
	struct dh_daemon d;
	struct dh_cmd cping, cpong;
	char rounds[16], *ping_out, *pong_out, *out, *log, want[128], ping_path[256],
	    pong_path[256];
	pid_t ping, pong;
	int st_ping, st_pong, lastpid = -1, pong_pid = -2, counter = -1, s0 = -1, s1 = -1, n;

	dh_setup();
	dh_daemon_start(&d, "d", NULL);
	snprintf(rounds, sizeof(rounds), "%d", ROUNDS);
	snprintf(ping_path, sizeof(ping_path), "%s", dh_path("ping.out"));
	snprintf(pong_path, sizeof(pong_path), "%s", dh_path("pong.out"));

	/* Two separate semvisor-run invocations, as two unrelated programs would be started. */
	ping = dh_spawn(dh_prog_argv(&cping, d.sock, "daemon-sem",
				     (const char *const[]){ "ping", KEY, rounds, NULL }),
			ping_path);
	pong = dh_spawn(dh_prog_argv(&cpong, d.sock, "daemon-sem",
				     (const char *const[]){ "pong", KEY, rounds, NULL }),
			pong_path);
	cr_assert(dh_wait(ping, 60000, &st_ping), "ping timed out:\n%s", dh_slurp(ping_path));
	cr_assert(dh_wait(pong, 60000, &st_pong), "pong timed out:\n%s", dh_slurp(pong_path));
	dh_daemon_alive(&d);
	ping_out = dh_slurp(ping_path);
	pong_out = dh_slurp(pong_path);
	log = dh_log(&d);
	cr_assert(WIFEXITED(st_ping) && WEXITSTATUS(st_ping) == 0, "ping: %s\n%s\ndaemon log:\n%s",
		  dh_status_text(st_ping), ping_out, log);
	cr_assert(WIFEXITED(st_pong) && WEXITSTATUS(st_pong) == 0, "pong: %s\n%s\ndaemon log:\n%s",
		  dh_status_text(st_pong), pong_out, log);

	/* What ping saw after pong's last turn: every turn counted, both semaphores back to 0. */
	n = sscanf(ping_out, "ping: rounds %*d counter %d sem0 %d sem1 %d lastpid %d", &counter,
		   &s0, &s1, &lastpid);
	cr_assert_eq(n, 4, "ping printed:\n%s", ping_out);
	cr_assert_eq(counter, 2 * ROUNDS, "counter %d, expected %d", counter, 2 * ROUNDS);
	cr_assert_eq(s0, 0, "sem0 %d at the end", s0);
	cr_assert_eq(s1, 0, "sem1 %d at the end", s1);
	cr_assert_eq(sscanf(pong_out, "pong: rounds %*d pid %d", &pong_pid), 1, "pong printed:\n%s",
		     pong_out);
	/* GETPID of the counter names pong, the last to change it, as ping's pid namespace sees it */
	cr_assert_eq(lastpid, pong_pid, "GETPID says %d, pong is %d", lastpid, pong_pid);

	/* Both were the daemon's clients, each under its own listener. */
	snprintf(want, sizeof(want), "agent: serving semvisor-run-%d ", pong_pid);
	cr_assert(strstr(log, want), "the log does not name pong's listener (%s):\n%s", want, log);
	cr_assert_eq(dh_count(log, "agent: serving semvisor-run-"), 2, "daemon log:\n%s", log);
	/* The kernel never saw the set: the daemon served every call. */
	cr_assert_eq(kernel_sets(), 0, "the kernel holds sets in the test's IPC namespace:\n%s",
		     dh_slurp("/proc/sysvipc/sem"));

	/* The set outlives both programs (the daemon's IPC namespace, like the host's). */
	cr_assert_eq(DH_SEM(d.sock, &out, "show", KEY, "rm"), 0, "show:\n%s", out);
	snprintf(want, sizeof(want), "show: nsems 3 uid 0 vals 0 0 %d\n", 2 * ROUNDS);
	cr_assert(strstr(out, want), "show printed:\n%s\nexpected: %s", out, want);
	free(out);
	cr_assert_eq(DH_SEM(d.sock, &out, "gone", KEY), 0, "after IPC_RMID:\n%s", out);
	free(out);

	cr_assert_eq(dh_daemon_stop(&d), 0, "semvisord did not exit 0 on SIGTERM:\n%s", dh_log(&d));
	free(ping_out);
	free(pong_out);
	free(log);
}

/* Programs in another IPC namespace do not see the key; the same namespace again does. */
Test(daemon_share, ipc_namespaces_isolated)
{
	struct dh_daemon d;
	struct dh_cmd c;
	const char *argv[20];
	char *out;
	int rc, n = 0;

	dh_setup();
	dh_daemon_start(&d, "d", NULL);
	cr_assert_eq(DH_SEM(d.sock, &out, "post", KEY, "5"), 0, "post:\n%s", out);
	free(out);

	/* unshare(1) puts the next semvisor-run, and so its program, in a new IPC namespace */
	argv[n++] = "unshare";
	argv[n++] = "--ipc";
	argv[n++] = "--";
	for (const char *const *a =
		 dh_prog_argv(&c, d.sock, "daemon-sem", (const char *const[]){ "gone", KEY, NULL });
	     *a; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	rc = dh_run(argv, 30000, &out);
	cr_assert_eq(rc, 0, "another IPC namespace sees the key (exit %d):\n%s", rc, out);
	cr_assert(strstr(out, "gone: semget: -1 ENOENT"), "%s", out);
	free(out);

	cr_assert_eq(DH_SEM(d.sock, &out, "show", KEY, "rm"), 0, "show:\n%s", out);
	cr_assert(strstr(out, "show: nsems 1 uid 0 vals 5\n"), "the set changed:\n%s", out);
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

static void check_no_daemon(const char *sock, const char *why)
{
	char *out;
	int rc = DH_SEM(sock, &out, "semget", "1");

	cr_assert_eq(rc, 125, "%s: exit %d, expected 125:\n%s", why, rc, out);
	cr_assert(strstr(out, sock), "%s: the message does not name the socket %s:\n%s", why, sock,
		  out);
	cr_assert(strstr(out, "semvisord"), "%s: the message does not say what is missing:\n%s",
		  why, out);
	/* the program never ran: it would have printed its semget */
	cr_assert(!strstr(out, "semget:"), "%s: the program ran anyway:\n%s", why, out);
	free(out);
}

Test(daemon_share, no_daemon)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct dh_daemon d;
	int fd;

	dh_setup();
	/* nothing there at all */
	check_no_daemon(dh_path("absent.sock"), "no socket file");

	/* a socket file nobody listens on (a daemon killed without cleaning up) */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", dh_path("stale.sock"));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	check_no_daemon(sa.sun_path, "stale socket file");

	/* a daemon that was there and stopped: its socket is gone with it */
	dh_daemon_start(&d, "d", NULL);
	cr_assert_eq(dh_daemon_stop(&d), 0);
	check_no_daemon(d.sock, "stopped daemon");
}

/*
 * A pod: its IPC namespace is held by a process the daemon does not serve (the pause
 * container), and served containers come and go in it. The sets live as long as the namespace
 * does, not as long as its served clients; once the holder is gone the namespace ends, and
 * its sets with it, within a second or two, and the daemon's statistics say so.
 */
Test(daemon_share, namespace_outlives_its_clients)
{
	struct dh_daemon d;
	char ctl[PATH_MAX + 32], ctlpath[PATH_MAX], name[64], *out;
	pid_t holder;
	int rc, st;

	dh_setup();
	snprintf(ctlpath, sizeof(ctlpath), "%s", dh_path("ctl.sock"));
	snprintf(ctl, sizeof(ctl), "--control-socket=%s", ctlpath);
	dh_daemon_start(&d, "d", (const char *const[]){ ctl, NULL });
	holder = dh_spawn((const char *const[]){ "unshare", "--ipc", "sleep", "60", NULL },
			  dh_path("holder.log"));
	for (int i = 0; i < 200; i++) {
		char mine[64];

		dh_ns_name(holder, name, sizeof(name));
		dh_ns_name(getpid(), mine, sizeof(mine));
		if (strcmp(name, mine))
			break;
		dh_sleep_ms(5);
	}

	rc = dh_sem_in_ns(holder, d.sock, &out,
			  (const char *const[]){ "post", "0x1111", "77", NULL });
	cr_assert_eq(rc, 0, "the first client:\n%s", out);
	free(out);
	/* no served client in it now: long enough for the daemon to look at it */
	dh_sleep_ms(1500);
	rc = dh_sem_in_ns(holder, d.sock, &out, (const char *const[]){ "show", "0x1111", NULL });
	cr_assert_eq(rc, 0, "the second client found nothing:\n%s", out);
	cr_assert(strstr(out, "show: nsems 1 uid 0 vals 77\n"), "the set changed:\n%s", out);
	free(out);

	/* the holder goes: the namespace ends, and the daemon notices */
	kill(holder, SIGKILL);
	cr_assert(dh_wait(holder, 5000, &st));
	for (int i = 0;; i++) {
		const char *argv[] = {
			dh_bin("semvisorctl"), "--socket", ctlpath, "stats", "--json", NULL
		};

		cr_assert_eq(dh_run(argv, 10000, &out), 0, "semvisorctl stats:\n%s", out);
		if (!strstr(out, name) && strstr(out, "\"namespaces_ended\":1"))
			break;
		cr_assert(i < 100, "the dead namespace %s is still served after 5 s:\n%s", name,
			  out);
		free(out);
		dh_sleep_ms(50);
	}
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/*
 * Without CAP_SYS_ADMIN the daemon cannot ask the kernel whether a namespace it is not in
 * still lives (nsreg.h): it then holds each such namespace while it serves a process in it,
 * and ends it with its last one. Namespaces born one after the other, each likely with the
 * last one's inode number, must still each start empty and each end.
 */
Test(daemon_share, namespaces_without_cap_sys_admin)
{
	static const char *const wrap[] = { "setpriv", "--inh-caps=-all",
					    "--bounding-set=-all,+sys_ptrace,+chown", "--", NULL };
	char ctl[PATH_MAX + 32], ctlpath[PATH_MAX], *out;
	struct dh_daemon d;
	const int rounds = 10;

	dh_setup();
	if (system("setpriv --version >/dev/null 2>&1") != 0)
		cr_skip_test("setpriv is not installed (Debian package util-linux)");
	snprintf(ctlpath, sizeof(ctlpath), "%s", dh_path("ctl.sock"));
	snprintf(ctl, sizeof(ctl), "--control-socket=%s", ctlpath);
	dh_daemon_wrap = wrap;
	dh_daemon_start(&d, "d", (const char *const[]){ ctl, NULL });
	dh_daemon_wrap = NULL;
	for (int i = 0; i < rounds; i++) {
		struct dh_cmd c;
		const char *argv[24];
		int n = 0, rc;

		argv[n++] = "unshare";
		argv[n++] = "--ipc";
		argv[n++] = "--";
		for (const char *const *a = dh_prog_argv(&c, d.sock, "daemon-sem",
							 (const char *const[]){ "new", KEY, NULL });
		     *a; a++)
			argv[n++] = *a;
		argv[n] = NULL;
		/* a fresh namespace: its first set, whatever the last one left */
		rc = dh_run(argv, 30000, &out);
		cr_assert_eq(rc, 0, "round %d found an old namespace's set:\n%s", i, out);
		cr_assert(strstr(out, "new: 0\n"), "round %d:\n%s", i, out);
		free(out);
	}
	for (int i = 0;; i++) {
		char want[64];
		const char *argv[] = {
			dh_bin("semvisorctl"), "--socket", ctlpath, "stats", "--json", NULL
		};

		snprintf(want, sizeof(want), "\"namespaces_ended\":%d", rounds);
		cr_assert_eq(dh_run(argv, 10000, &out), 0, "semvisorctl stats:\n%s", out);
		if (strstr(out, want))
			break;
		cr_assert(i < 100, "not every namespace ended after 5 s:\n%s", out);
		free(out);
		dh_sleep_ms(50);
	}
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/*
 * argv for semvisor-run --daemon=sock [opt] -- daemon-sem args, run under `cli listener` (a
 * sandbox above whose listener leaves none for semvisor-run) when nested.
 */
static const char *const *traced_argv(const char **argv, const char *sock, const char *opt,
				      bool nested, const char *const *args)
{
	static __thread char daemon_opt[4][PATH_MAX + 16];
	static __thread int slot;
	char *dopt = daemon_opt[slot++ % 4];
	int n = 0;

	snprintf(dopt, PATH_MAX + 16, "--daemon=%s", sock);
	if (nested) {
		argv[n++] = dh_bin("tests/prog/cli");
		argv[n++] = "listener";
	}
	argv[n++] = dh_bin("semvisor-run");
	argv[n++] = dopt;
	if (opt)
		argv[n++] = opt;
	argv[n++] = "--";
	argv[n++] = dh_bin("tests/prog/daemon-sem");
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return argv;
}

/*
 * Where notification cannot be had, semvisord traces the program instead (semvisor-run
 * --daemon --backend=ptrace; or, under a sandbox whose listener leaves none, the default
 * --backend=auto, which says so), and it meets the daemon's other clients as any client does.
 * Three pairs play ping-pong at once on three keys: a traced ping with a notified pong, a
 * traced pair, and a nested pair, so that several tracers of one daemon take each other's
 * SIGCHLD (ptrace.c) many times over. Every turn must be counted and nothing reach the kernel.
 */
Test(daemon_share, ptrace_clients)
{
	static const char *const keys[] = { "0x5e3a0011", "0x5e3a0012", "0x5e3a0013" };
	/* per pair: ping's option and nesting, then pong's */
	static const struct {
		const char *opt[2];
		bool nested[2];
	} pairs[] = {
		{ { "--backend=ptrace", NULL }, { false, false } },
		{ { "--backend=ptrace", "--backend=ptrace" }, { false, false } },
		{ { NULL, NULL }, { true, true } },
	};
	const char *argv[6][16];
	char rounds[16], outp[6][PATH_MAX], *log, *out, want[128];
	struct dh_daemon d;
	pid_t pid[6];
	int st;

	dh_setup();
	dh_daemon_start(&d, "d", NULL);
	snprintf(rounds, sizeof(rounds), "%d", ROUNDS);
	for (int i = 0; i < 6; i++) {
		int p = i / 2, who = i % 2;
		char name[32];

		snprintf(name, sizeof(name), "%s%d.out", who ? "pong" : "ping", p);
		snprintf(outp[i], sizeof(outp[i]), "%s", dh_path(name));
		pid[i] =
		    dh_spawn(traced_argv(argv[i], d.sock, pairs[p].opt[who], pairs[p].nested[who],
					 (const char *const[]){ who ? "pong" : "ping", keys[p],
								rounds, NULL }),
			     outp[i]);
	}
	for (int i = 0; i < 6; i++) {
		cr_assert(dh_wait(pid[i], 60000, &st), "%s timed out:\n%s", outp[i],
			  dh_slurp(outp[i]));
		log = dh_log(&d);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s\n%s\ndaemon log:\n%s",
			  outp[i], dh_status_text(st), dh_slurp(outp[i]), log);
		free(log);
	}
	dh_daemon_alive(&d);
	for (int p = 0; p < 3; p++) {
		int counter = -1, s0 = -1, s1 = -1;

		out = dh_slurp(outp[2 * p]);
		cr_assert_eq(sscanf(strstr(out, "ping: ") ? strstr(out, "ping: ") : out,
				    "ping: rounds %*d counter %d sem0 %d sem1 %d", &counter, &s0,
				    &s1),
			     3, "ping %d printed:\n%s", p, out);
		cr_assert(counter == 2 * ROUNDS && s0 == 0 && s1 == 0,
			  "pair %d: counter %d sem0 %d sem1 %d, expected %d 0 0", p, counter, s0,
			  s1, 2 * ROUNDS);
		free(out);
	}
	/* the nested ones said why they are traced */
	for (int i = 4; i < 6; i++) {
		out = dh_slurp(outp[i]);
		cr_assert(strstr(out, "EBUSY") && strstr(out, "semvisord traces the program"),
			  "%s does not say it falls back:\n%s", outp[i], out);
		free(out);
	}
	log = dh_log(&d);
	cr_assert_eq(dh_count(log, " through ptrace"), 5, "five traced clients:\n%s", log);
	cr_assert_eq(kernel_sets(), 0, "the kernel holds sets:\n%s", dh_slurp("/proc/sysvipc/sem"));
	free(log);

	/* the daemon kept the sets: a notified client reads what the traced ones left */
	cr_assert_eq(DH_SEM(d.sock, &out, "show", keys[1], "rm"), 0, "show:\n%s", out);
	snprintf(want, sizeof(want), "show: nsems 3 uid 0 vals 0 0 %d\n", 2 * ROUNDS);
	cr_assert(strstr(out, want), "show printed:\n%s\nexpected: %s", out, want);
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0, "%s", dh_slurp(d.log));
}

/*
 * A traced program dies with the daemon that traces it (PTRACE_O_EXITKILL): left without a
 * tracer, a call it waits in would never end. It must die, not hang.
 */
Test(daemon_share, ptrace_client_dies_with_daemon)
{
	const char *argv[16];
	struct dh_daemon d;
	char *out;
	pid_t pid;
	int st;

	dh_setup();
	dh_daemon_start(&d, "d", NULL);
	/* waits for ever: its pong never comes */
	pid = dh_spawn(traced_argv(argv, d.sock, "--backend=ptrace", false,
				   (const char *const[]){ "ping", KEY, "1", NULL }),
		       dh_path("ping.out"));
	cr_assert(dh_wait_file(d.log, " through ptrace", 1, 10000), "never traced:\n%s",
		  dh_slurp(d.log));
	dh_sleep_ms(200);
	kill(d.pid, SIGKILL);
	cr_assert(dh_wait(pid, 10000, &st), "the traced program outlived its daemon:\n%s",
		  dh_slurp(dh_path("ping.out")));
	out = dh_slurp(dh_path("ping.out"));
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s:\n%s", dh_status_text(st), out);
	free(out);
	free(dh_daemon_gone(&d)); /* reaps it */
}

/* fast-kill under the daemon with --fast: its verdict, and the daemon's count of fast semops. */
static long fast_through(const struct dh_daemon *d, const char *ctl)
{
	char daemon_opt[PATH_MAX + 16], prog[PATH_MAX], *out;
	const char *stats[] = { dh_bin("semvisorctl"), "--socket", ctl, "stats", "--json", NULL };
	const char *p;
	long n;

	snprintf(daemon_opt, sizeof(daemon_opt), "--daemon=%s", d->sock);
	snprintf(prog, sizeof(prog), "%s/tests/prog/fast-kill", dh_o());
	cr_assert_eq(dh_run((const char *const[]){ dh_bin("semvisor-run"), daemon_opt, "--fast",
						   "--", prog, "500", NULL },
			    30000, &out),
		     0, "%s", out);
	cr_assert(strstr(out, "every unit back: yes"), "%s", out);
	free(out);
	cr_assert_eq(dh_run(stats, 10000, &out), 0, "semvisorctl stats:\n%s", out);
	p = strstr(out, "\"fast_ops\":");
	cr_assert(p, "semvisorctl stats --json:\n%s", out);
	n = strtol(p + strlen("\"fast_ops\":"), NULL, 10);
	free(out);
	return n;
}

/*
 * semvisor-run --daemon --fast: the daemon answers the fast path's requests (it keeps no
 * journal here), and the programs' own operations show in its statistics; with fast_path = no
 * it refuses them as the kernel would, and every operation is a served call.
 */
Test(daemon_share, fast_path)
{
	char ctl[PATH_MAX], ctlopt[PATH_MAX + 32], conf[PATH_MAX], confopt[PATH_MAX + 16];
	struct dh_daemon d;

	dh_setup();
	snprintf(ctl, sizeof(ctl), "%s", dh_path("ctl.sock"));
	snprintf(ctlopt, sizeof(ctlopt), "--control-socket=%s", ctl);
	dh_daemon_start(&d, "d", (const char *const[]){ ctlopt, NULL });
	cr_assert_gt(fast_through(&d, ctl), 1000, "the fast path was not taken");
	dh_daemon_stop(&d);

	snprintf(conf, sizeof(conf), "%s", dh_path("nofast.conf"));
	dh_write_file(conf, "fast_path = no\n");
	snprintf(confopt, sizeof(confopt), "--config=%s", conf);
	dh_daemon_start(&d, "nofast", (const char *const[]){ confopt, ctlopt, NULL });
	cr_assert_eq(fast_through(&d, ctl), 0,
		     "fast_path = no, yet programs did semops themselves");
	dh_daemon_stop(&d);
}
