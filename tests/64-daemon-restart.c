/* SPDX-License-Identifier: MIT */
/*
 * Restarts of the service: semvisor-keeper (client/semvisor-keeper.c) plays systemd's part where systemd
 * is not PID 1, and these tests first check that it plays it right, with a tiny service
 * (tests/prog/fdstore-svc.c) that keeps a counter in the fd store: the counter survives
 * restarts by SIGTERM and by SIGKILL, FDSTOREREMOVE=1 removes, a stored socket that hangs up
 * is dropped (unless FDPOLL=0), messages from a pid other than the main one are ignored, the
 * store has a size limit, and the service gets no fd it was not meant to have.
 *
 * Then semvisord itself under the keeper: it serves again after every restart; restarted
 * twenty times by SIGTERM while clients of every kind are parked in it
 * (tests/prog/restart-load.c), nothing may be lost; and nothing either when it is killed
 * (SIGKILL) twenty times at random instants of the same workload (the crash storm), or ten
 * times while programs are parked in it and others hold a lock with SEM_UNDO.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/60-daemon-harness.h"

TestSuite(daemon_restart, .timeout = 150, .fini = dh_cleanup);

/* ---- driving the keeper ---- */

struct keeper {
	pid_t pid;
	int in, out; /* its stdin (commands), its stdout (answers) */
	char buf[8192];
	size_t len;
	char log[PATH_MAX];
	char err[PATH_MAX]; /* its stderr: the service's output too */
};

/*
 * Start semvisor-keeper (taking commands) with opts (its options, NULL-terminated) and the service argv, its log in
 * dir/NAME.log and its stderr in dir/NAME.err. Its own process group, killed with the test.
 */
static void kp_start(struct keeper *kp, const char *name, const char *const *opts,
		     const char *const *argv)
{
	const char *full[64];
	char logopt[PATH_MAX + 8];
	int in[2], out[2], n = 0;
	pid_t parent = getpid();

	snprintf(kp->log, sizeof(kp->log), "%s/%s.log", dh_dir, name);
	snprintf(kp->err, sizeof(kp->err), "%s/%s.err", dh_dir, name);
	snprintf(logopt, sizeof(logopt), "--log=%s", kp->log);
	full[n++] = dh_bin("semvisor-keeper");
	full[n++] = logopt;
	full[n++] = "--commands";
	for (int i = 0; opts && opts[i] && n < 30; i++)
		full[n++] = opts[i];
	full[n++] = "--";
	for (int i = 0; argv[i] && n < 63; i++)
		full[n++] = argv[i];
	full[n] = NULL;
	cr_assert(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0);
	fflush(NULL);
	kp->pid = fork();
	cr_assert(kp->pid >= 0);
	if (kp->pid == 0) {
		int e = open(kp->err, O_WRONLY | O_CREAT | O_APPEND, 0644);
		sigset_t none;

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(120);
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (e < 0 || dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(e, 2) < 0)
			_exit(121);
		/* its notify socket in the test's directory, which goes even if the keeper is
		   killed */
		setenv("TMPDIR", dh_dir, 1);
		closefrom(3);
		execv(full[0], (char *const *)full);
		dprintf(2, "exec %s: %s\n", full[0], strerror(errno));
		_exit(127);
	}
	setpgid(kp->pid, kp->pid);
	dh_track(kp->pid);
	close(in[0]);
	close(out[1]);
	kp->in = in[1];
	kp->out = out[0];
	kp->len = 0;
}

static char *kp_logs(const struct keeper *kp)
{
	char *log = dh_slurp(kp->log), *err = dh_slurp(kp->err), *both;

	cr_assert(asprintf(&both, "keeper log:\n%s\nservice output:\n%s", dh_tail(log, 40),
			   dh_tail(err, 40)) > 0);
	free(log);
	free(err);
	return both;
}

/* The keeper's next answer line, within timeout_ms; NULL if none came (or it closed stdout). */
static const char *kp_line(struct keeper *kp, int timeout_ms)
{
	static char line[1024];
	int64_t end = dh_now_ms() + timeout_ms;

	for (;;) {
		char *nl = memchr(kp->buf, '\n', kp->len);
		struct pollfd pf = { kp->out, POLLIN, 0 };
		int64_t left = end - dh_now_ms();
		ssize_t n;

		if (nl) {
			size_t used = (size_t)(nl - kp->buf) + 1;

			snprintf(line, sizeof(line), "%.*s", (int)(used - 1), kp->buf);
			memmove(kp->buf, kp->buf + used, kp->len - used);
			kp->len -= used;
			return line;
		}
		if (left <= 0 || kp->len == sizeof(kp->buf))
			return NULL;
		if (poll(&pf, 1, (int)left) <= 0)
			continue;
		n = read(kp->out, kp->buf + kp->len, sizeof(kp->buf) - kp->len);
		if (n <= 0)
			return NULL;
		kp->len += (size_t)n;
	}
}

static void kp_send(struct keeper *kp, const char *cmd)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "%s\n", cmd);

	cr_assert(write(kp->in, line, (size_t)n) == n, "keeper's stdin: %s", strerror(errno));
}

/* The next answer must start with want: it is returned (a static buffer). */
#define kp_expect(kp, want, timeout_ms)                                                            \
	({                                                                                         \
		const char *l_ = kp_line((kp), (timeout_ms));                                      \
		cr_assert(l_ && !strncmp(l_, (want), strlen(want)),                                \
			  "keeper answered %s%s%s, expected %s...\n%s", l_ ? "'" : "(nothing)",    \
			  l_ ? l_ : "", l_ ? "'" : "", (want), kp_logs(kp));                       \
		l_;                                                                                \
	})

/* "ready PID": the pid. */
static pid_t kp_ready(struct keeper *kp, int timeout_ms)
{
	const char *l = kp_expect(kp, "ready ", timeout_ms);

	return (pid_t)atoi(l + 6);
}

/* "restart TERM|KILL": the exit it reported must be want; the new service's pid. */
static pid_t kp_restart(struct keeper *kp, const char *sig, const char *want)
{
	char cmd[32], exited[64];

	snprintf(cmd, sizeof(cmd), "restart %s", sig);
	snprintf(exited, sizeof(exited), "exited %s", want);
	kp_send(kp, cmd);
	cr_assert_str_eq(kp_expect(kp, "exited ", 30000), exited, "%s", kp_logs(kp));
	return kp_ready(kp, 35000);
}

/* "store": the names, comma separated ("" for none). */
static const char *kp_store(struct keeper *kp)
{
	const char *l;

	kp_send(kp, "store");
	l = kp_expect(kp, "store ", 5000);
	l = strchr(l + 6, ' ');
	return l ? l + 1 : "";
}

/* "stop": the service's exit must be want, and the keeper's 0. */
static void kp_stop(struct keeper *kp, const char *want)
{
	char exited[64];
	int st;

	snprintf(exited, sizeof(exited), "exited %s", want);
	kp_send(kp, "stop");
	cr_assert_str_eq(kp_expect(kp, "exited ", 30000), exited);
	cr_assert(dh_wait(kp->pid, 10000, &st), "the keeper did not leave after stop");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "keeper: %s\n%s", dh_status_text(st),
		  kp_logs(kp));
	close(kp->in);
	close(kp->out);
}

/* Wait (bounded) until the store's names are want, asking again and again. */
static void kp_store_becomes(struct keeper *kp, const char *want)
{
	int64_t end = dh_now_ms() + 5000;
	const char *got;

	while (strcmp((got = kp_store(kp)), want) && dh_now_ms() < end)
		dh_sleep_ms(20);
	cr_assert_str_eq(got, want, "the store holds %s, expected %s\n%s", got, want, kp_logs(kp));
}

/* ---- the keeper, with fdstore-svc ---- */

static const char *const *svc_argv(const char *out)
{
	static const char *argv[3];

	argv[0] = dh_bin("tests/prog/fdstore-svc");
	argv[1] = out;
	argv[2] = NULL;
	return argv;
}

Test(daemon_restart, keeper_usage)
{
	char *out;
	const char *keeper;

	dh_setup_ns(false);
	keeper = dh_bin("semvisor-keeper");
	cr_assert_eq(dh_run((const char *const[]){ keeper, "--help", NULL }, 5000, &out), 0);
	cr_assert(strstr(out, "Usage: semvisor-keeper") && strstr(out, "wait-store"), "%s", out);
	free(out);
	cr_assert_eq(dh_run((const char *const[]){ keeper, NULL }, 5000, &out), 2, "%s", out);
	cr_assert(strstr(out, "Usage: semvisor-keeper"), "%s", out);
	free(out);
	cr_assert_eq(
	    dh_run((const char *const[]){ keeper, "--listen", "nopath", "--", "true", NULL }, 5000,
		   &out),
	    2, "%s", out);
	free(out);
	cr_assert_eq(
	    dh_run((const char *const[]){ keeper, "--listen", "a:b=/tmp/x", "--", "true", NULL },
		   5000, &out),
	    2, "a name with ':': %s", out);
	free(out);
	cr_assert_eq(
	    dh_run((const char *const[]){ keeper, "--fdstore-max", "lots", "--", "true", NULL },
		   5000, &out),
	    2, "%s", out);
	free(out);
	cr_assert_eq(
	    dh_run((const char *const[]){ keeper, "--frobnicate", "--", "true", NULL }, 5000, &out),
	    2, "%s", out);
	free(out);
}

/* The pid of the service the keeper (its log at log) started last, or 0. */
static pid_t keeper_service(const char *log)
{
	char *text = dh_slurp(log), *at = text, *next;
	pid_t pid = 0;

	while ((next = strstr(at, ": pid ")))
		pid = (pid_t)atoi(at = next + 6);
	free(text);
	return pid;
}

/*
 * As an administrator runs it where systemd does not: no commands (its stdin at its end from
 * the start), SIGHUP restarts the service with its store, a service killed is started again
 * (--restart-on-failure), SIGTERM stops both; a service that cannot start is given up after
 * five tries, with exit status 1.
 */
Test(daemon_restart, keeper_as_a_service)
{
	const char *out_path, *log;
	char logopt[PATH_MAX + 8], *out;
	pid_t keeper, svc;
	int st;

	dh_setup_ns(false);
	out_path = dh_path("svc.out");
	log = dh_path("keeper.log");
	snprintf(logopt, sizeof(logopt), "--log=%s", log);
	keeper = dh_spawn((const char *const[]){ dh_bin("semvisor-keeper"), logopt,
						 "--restart-on-failure", "--",
						 dh_bin("tests/prog/fdstore-svc"), out_path, NULL },
			  dh_path("keeper.err"));
	cr_assert(dh_wait_file(out_path, "count 1\n", 1, 30000), "no start:\n%s", dh_slurp(log));

	/* SIGHUP: a planned restart, its state handed over */
	kill(keeper, SIGHUP);
	cr_assert(dh_wait_file(out_path, "count 2\n", 1, 30000), "no restart on SIGHUP:\n%s",
		  dh_slurp(log));
	out = dh_slurp(out_path);
	cr_assert(strstr(out, "term\n") && strstr(out, "state 1\n"), "%s", out);
	free(out);

	/* a crash: started again, the store still there */
	svc = keeper_service(log);
	cr_assert_gt(svc, 0);
	kill(svc, SIGKILL);
	cr_assert(dh_wait_file(out_path, "count 3\n", 1, 30000), "not started again:\n%s",
		  dh_slurp(log));

	kill(keeper, SIGTERM);
	cr_assert(dh_wait(keeper, 30000, &st) && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s",
		  dh_status_text(st));
	out = dh_slurp(out_path);
	cr_assert_eq(dh_count(out, "term\n"), 2, "the service was not stopped:\n%s", out);
	free(out);

	/* a service that never starts: five tries a second apart, then exit status 1 */
	keeper = dh_spawn((const char *const[]){ dh_bin("semvisor-keeper"), logopt,
						 "--restart-on-failure", "--", "false", NULL },
			  dh_path("keeper.err"));
	cr_assert(dh_wait(keeper, 20000, &st) && WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s",
		  dh_status_text(st));
	out = dh_slurp(log);
	cr_assert(strstr(out, "5 failed starts in a row: giving up"), "%s", out);
	free(out);
}

/*
 * The counter survives three restarts by SIGTERM and three by SIGKILL; each start gets the
 * socket-unit socket first and then the store in order, and no other fd; the counter the
 * service stores again at each start is kept once. The socket's backlog takes connections
 * although nobody accepts them.
 */
Test(daemon_restart, keeper_counter_survives)
{
	struct keeper kp;
	const char *out_path, *sock;
	char listen_opt[PATH_MAX + 16], *out;
	pid_t pid, next;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int c;

	dh_setup_ns(false);
	out_path = dh_path("svc.out");
	sock = dh_path("svc.sock");
	snprintf(listen_opt, sizeof(listen_opt), "--listen=sock=%s", sock);
	kp_start(&kp, "keeper", (const char *const[]){ listen_opt, NULL }, svc_argv(out_path));
	pid = kp_ready(&kp, 10000);
	cr_assert_str_eq(kp_store(&kp), "counter,peer,quiet,extra,extra");

	for (int i = 0; i < 6; i++) {
		bool term = i % 2 == 0;

		next = kp_restart(&kp, term ? "TERM" : "KILL", term ? "0" : "signal 9");
		cr_assert_neq(next, pid);
		pid = next;
		/* the state was taken back and removed before READY=1 */
		cr_assert(!strstr(kp_store(&kp), "state"), "%s", kp_logs(&kp));
		/* "peer" hung up when the first service's end closed with it */
		kp_store_becomes(&kp, "counter,quiet,extra,extra");
	}

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(c >= 0 && connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s",
		  sock, strerror(errno));
	close(c);
	kp_stop(&kp, "0");
	cr_assert(access(sock, F_OK) != 0, "the keeper left its socket %s behind", sock);

	out = dh_slurp(out_path);
	cr_assert(strstr(out, "count 1\n") && strstr(out, "count 7\n") && !strstr(out, "count 8\n"),
		  "the counter did not survive:\n%s", out);
	for (int v = 1; v <= 7; v++) {
		char want[32];

		snprintf(want, sizeof(want), "count %d\n", v);
		cr_assert_eq(dh_count(out, want), 1, "%s", out);
	}
	cr_assert_eq(dh_count(out, "fds ok\n"), 7, "fds it was not given:\n%s", out);
	cr_assert_eq(dh_count(out, "names sock\n"), 1, "%s", out);
	/* after SIGTERM the state it stored on its way out comes back (and is removed) */
	cr_assert_eq(dh_count(out, "names sock:counter:quiet:extra:extra:state\n"), 3, "%s", out);
	cr_assert_eq(dh_count(out, "names sock:counter:quiet:extra:extra\n"), 3, "%s", out);
	for (int v = 1; v <= 5; v += 2) {
		char want[32];

		snprintf(want, sizeof(want), "state %d\n", v);
		cr_assert_eq(dh_count(out, want), 1, "%s", out);
	}
	cr_assert_eq(dh_count(out, "state "), 3, "%s", out);
	cr_assert_eq(dh_count(out, "term\n"), 4, "%s", out); /* 3 restarts and the stop */
	free(out);
}

/*
 * FDSTOREREMOVE=1 closes every fd of the name; a stored socket whose peer hangs up is dropped,
 * one stored with FDPOLL=0 is not; a process other than the main pid stores nothing.
 */
Test(daemon_restart, keeper_fdstore_rules)
{
	struct keeper kp;
	const char *out_path;
	char *log;
	pid_t pid;

	dh_setup_ns(false);
	out_path = dh_path("svc.out");
	kp_start(&kp, "keeper", NULL, svc_argv(out_path));
	pid = kp_ready(&kp, 10000);
	cr_assert_str_eq(kp_store(&kp), "counter,peer,quiet,extra,extra");

	kill(pid, SIGUSR1);
	cr_assert(dh_wait_file(out_path, "hung up\n", 1, 5000));
	kp_store_becomes(&kp, "counter,quiet,extra,extra");
	kill(pid, SIGUSR2);
	cr_assert(dh_wait_file(out_path, "removed\n", 1, 5000));
	kp_store_becomes(&kp, "counter,quiet");

	kill(pid, SIGHUP);
	kp_send(&kp, "wait-store marker");
	kp_expect(&kp, "stored marker", 10000);
	cr_assert_str_eq(kp_store(&kp), "counter,quiet,marker");
	log = dh_slurp(kp.log);
	cr_assert(strstr(log, "not the service's main pid"), "%s", log);
	free(log);

	/* what remains is handed to the next start, and the waits answer */
	pid = kp_restart(&kp, "TERM", "0");
	cr_assert_str_eq(kp_store(&kp), "counter,quiet,marker");
	kp_send(&kp, "wait-store nothing-of-that-name");
	kp_expect(&kp, "failed timeout", 15000);
	kp_send(&kp, "bogus");
	kp_expect(&kp, "failed unknown command", 5000);
	kp_stop(&kp, "0");
	log = dh_slurp(out_path);
	cr_assert(strstr(log, "names counter:quiet:marker:state\n") && strstr(log, "count 2\n"),
		  "%s", log);
	free(log);
}

/*
 * A store of thousands (a daemon stores one listener per client): all of it comes back in
 * order at the next start, with nothing else.
 */
Test(daemon_restart, keeper_many_fds)
{
	struct keeper kp;
	const char *out_path;
	char *out, *want;
	struct rlimit rl;
	size_t len = 0;
	FILE *f;

	dh_setup_ns(false);
	cr_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 8192)
		cr_skip_test("RLIMIT_NOFILE's hard limit %llu is too low for 3000 stored fds",
			     (unsigned long long)rl.rlim_max);
	out_path = dh_path("svc.out");
	kp_start(&kp, "keeper", NULL,
		 (const char *const[]){ dh_bin("tests/prog/fdstore-svc"), out_path, "3000", NULL });
	kp_ready(&kp, 20000);
	kp_send(&kp, "store");
	cr_assert_eq(atoi(kp_expect(&kp, "store ", 5000) + 6), 3005, "%s", kp_logs(&kp));
	kp_restart(&kp, "KILL", "signal 9");

	f = open_memstream(&want, &len);
	cr_assert(f);
	fprintf(f, "names counter:quiet:extra:extra");
	for (int i = 0; i < 3000; i++)
		fprintf(f, ":many");
	fprintf(f, "\n");
	cr_assert(fclose(f) == 0);
	out = dh_slurp(out_path);
	cr_assert(strstr(out, want), "the second start was not handed the store:\n%.300s...",
		  strstr(out, "count 1\n") ? strstr(out, "count 1\n") : out);
	cr_assert_eq(dh_count(out, "fds ok\n"), 2, "%s", dh_tail(out, 3));
	cr_assert(strstr(out, "count 2\n"));
	free(out);
	free(want);
	kp_stop(&kp, "0");
}

/* --fdstore-max: what goes beyond it is refused (and closed), the rest kept. */
Test(daemon_restart, keeper_fdstore_max)
{
	struct keeper kp;
	char *log;

	dh_setup_ns(false);
	kp_start(&kp, "keeper", (const char *const[]){ "--fdstore-max", "2", NULL },
		 svc_argv(dh_path("svc.out")));
	kp_ready(&kp, 10000);
	cr_assert_str_eq(kp_store(&kp), "counter,peer");
	log = dh_slurp(kp.log);
	cr_assert_eq(dh_count(log, "full"), 3, "%s", log);
	free(log);
	kp_stop(&kp, "0");
}

/*
 * The service's own end is reported and not followed by a start; a restart starts it again.
 * The keeper stops its service at stdin's end and at SIGTERM.
 */
Test(daemon_restart, keeper_ends)
{
	struct keeper kp;
	const char *out_path;
	pid_t pid;
	int st;

	dh_setup_ns(false);
	out_path = dh_path("svc.out");
	kp_start(&kp, "keeper", NULL, svc_argv(out_path));
	pid = kp_ready(&kp, 10000);
	kill(pid, SIGKILL);
	kp_expect(&kp, "exited signal 9", 5000);
	cr_assert_null(kp_line(&kp, 300), "the keeper started the service again by itself");
	pid = kp_restart(&kp, "TERM", "signal 9");
	cr_assert(pid > 0);

	close(kp.in);
	kp_expect(&kp, "exited 0", 30000);
	cr_assert(dh_wait(kp.pid, 10000, &st) && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "keeper at stdin's end: %s", dh_status_text(st));
	close(kp.out);

	kp_start(&kp, "keeper2", NULL, svc_argv(out_path));
	pid = kp_ready(&kp, 10000);
	kill(kp.pid, SIGTERM);
	kp_expect(&kp, "exited 0", 30000);
	cr_assert(dh_wait(kp.pid, 10000, &st) && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "keeper at SIGTERM: %s", dh_status_text(st));
	cr_assert(kill(pid, 0) != 0, "the service outlived the keeper");
	close(kp.in);
	close(kp.out);
}

/* ---- semvisord under the keeper, restarted while clients wait in it ---- */

#define LOAD_KEY     "0x5e57a000"
#define LOAD_N	     150 /* each mutex client's increments, each producer's and consumer's items */
#define LOAD_ROUNDS  120 /* gate rounds */
#define LOAD_TIMED   60	 /* each timed client's expiries (and satisfied waits) */
#define LOAD_CLIENTS 16

struct load_client {
	char args[6][32];
	char out[PATH_MAX];
	pid_t pid;
	int status;
	bool done;
};

/*
 * The sixteen clients: four mutex, three producers and three consumers, a gatekeeper and its
 * three waiters, two timed ones; pace (ms) is their pause after each step.
 */
static void load_clients(struct load_client *c, int pace)
{
	int n = 0;

#define CLIENT(...)                                                                                \
	do {                                                                                       \
		const char *a_[] = { __VA_ARGS__, NULL };                                          \
		memset(&c[n], 0, sizeof(c[n]));                                                    \
		for (int i_ = 0; a_[i_]; i_++)                                                     \
			snprintf(c[n].args[i_], sizeof(c[n].args[i_]), "%s", a_[i_]);              \
		n++;                                                                               \
	} while (0)
	char p[16], nn[16], r[16], t[16];

	snprintf(p, sizeof(p), "%d", pace);
	snprintf(nn, sizeof(nn), "%d", LOAD_N);
	snprintf(r, sizeof(r), "%d", LOAD_ROUNDS);
	snprintf(t, sizeof(t), "%d", LOAD_TIMED);
	for (int i = 0; i < 4; i++)
		CLIENT("mutex", LOAD_KEY, nn, p);
	for (int i = 0; i < 3; i++)
		CLIENT("produce", LOAD_KEY, nn, p);
	for (int i = 0; i < 3; i++)
		CLIENT("consume", LOAD_KEY, nn, "0");
	CLIENT("gatekeeper", LOAD_KEY, r, "3", p);
	for (int i = 0; i < 3; i++)
		CLIENT("gatewait", LOAD_KEY, r);
	CLIENT("timed", LOAD_KEY, "0", t, p);
	CLIENT("timed", LOAD_KEY, "1", t, p);
#undef CLIENT
	cr_assert_eq(n, LOAD_CLIENTS);
}

/* argv of restart-load ARGS: natively, or under semvisor-run --daemon=sock. */
static const char *const *load_argv(struct dh_cmd *cmd, const char *sock, const char *const *args)
{
	static const char *argv[16];
	int n = 0;

	if (sock)
		return dh_prog_argv(cmd, sock, "restart-load", args);
	argv[n++] = dh_bin("tests/prog/restart-load");
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return argv;
}

/*
 * While any of the n clients runs (60 s at most), a daemon that killed itself
 * (SEMVISORD_TEST_DIE_AT) is started again; each client's end is collected (done, status).
 * Returns how many times; *during counts those that came while some client was running.
 */
static int through_deaths(struct keeper *kp, struct load_client *c, int n, int *during)
{
	int64_t until = dh_now_ms() + 60000;
	bool left = true;
	int deaths = 0;

	while (left && dh_now_ms() < until) {
		const char *l = kp_line(kp, 200);

		if (l) {
			cr_assert_str_eq(l, "exited signal 9", "%s", kp_logs(kp));
			kp_send(kp, "restart TERM");
			kp_expect(kp, "exited signal 9", 5000);
			kp_ready(kp, 35000);
			deaths++;
			*during += left;
		}
		left = false;
		for (int i = 0; i < n; i++) {
			if (!c[i].done && waitpid(c[i].pid, &c[i].status, WNOHANG) == c[i].pid) {
				dh_untrack(c[i].pid);
				c[i].done = true;
			}
			left |= !c[i].done;
		}
	}
	return deaths;
}

/*
 * Run the workload (natively when kp is NULL, else under the daemon kp keeps, at sock) while
 * restarting the daemon `restarts` times with sig ("TERM" or "KILL"), with pauses of 20 to 200
 * ms. Returns what every client and the final check printed, with their exit statuses, in
 * a text that a native run and a run under the daemon must both give; *busy is how many of
 * the restarts came while every client was still running.
 */
static char *load_run(const char *tag, struct keeper *kp, const char *sock, const char *sig,
		      int restarts, int pace, int *busy, int *deaths)
{
	struct load_client c[LOAD_CLIENTS];
	struct dh_cmd cmd;
	char *out, *all = NULL, want[32], name[64];
	size_t len = 0;
	FILE *f = open_memstream(&all, &len);
	int rc, during = 0, seed = (int)(dh_now_ms() % 100000);
	int64_t end;

	cr_assert(f);
	rc = dh_run(load_argv(&cmd, sock, (const char *const[]){ "setup", LOAD_KEY, NULL }), 30000,
		    &out);
	cr_assert(rc == 0 && strstr(out, "setup: ok"), "%s setup: exit %d:\n%s", tag, rc, out);
	free(out);

	load_clients(c, pace);
	for (int i = 0; i < LOAD_CLIENTS; i++) {
		const char *args[8];
		int n = 0;

		for (; c[i].args[n][0]; n++)
			args[n] = c[i].args[n];
		args[n] = NULL;
		snprintf(name, sizeof(name), "%s-%02d.out", tag, i);
		snprintf(c[i].out, sizeof(c[i].out), "%s", dh_path(name));
		c[i].pid = dh_spawn(load_argv(&cmd, sock, args), c[i].out);
	}

	srand((unsigned)seed);
	if (kp && !strcmp(sig, "SELF"))
		restarts = through_deaths(kp, c, LOAD_CLIENTS, &during);
	for (int r = 0; r < restarts && strcmp(sig, "SELF"); r++) {
		bool all_running = true;

		dh_sleep_ms(20 + rand() % 181);
		for (int i = 0; i < LOAD_CLIENTS; i++) {
			if (!c[i].done && waitpid(c[i].pid, &c[i].status, WNOHANG) == c[i].pid) {
				dh_untrack(c[i].pid);
				c[i].done = true;
			}
			all_running &= !c[i].done;
		}
		during += all_running;
		kp_restart(kp, sig, !strcmp(sig, "TERM") ? "0" : "signal 9");
	}

	end = dh_now_ms() + 45000;
	for (int i = 0; i < LOAD_CLIENTS; i++) {
		if (!c[i].done) {
			int64_t left = end - dh_now_ms();

			c[i].done = true;
			if (!dh_wait(c[i].pid, left > 0 ? (int)left : 1, &c[i].status))
				c[i].status = -1;
		}
		out = dh_slurp(c[i].out);
		/* the client by number and mode (its pace differs between the runs) */
		fprintf(f, "%02d %s: %s\n%s", i, c[i].args[0],
			c[i].status == -1 ? "timed out" : dh_status_text(c[i].status), out);
		free(out);
	}
	snprintf(want, sizeof(want), "%d", 4 * LOAD_N);
	if (kp && !strcmp(sig, "SELF")) {
		/* the daemon may die during the check too */
		struct load_client chk = { 0 };
		int ignored;

		snprintf(chk.out, sizeof(chk.out), "%s", dh_path("check.out"));
		chk.pid = dh_spawn(
		    load_argv(&cmd, sock, (const char *const[]){ "check", LOAD_KEY, want, NULL }),
		    chk.out);
		restarts += through_deaths(kp, &chk, 1, &ignored);
		rc = chk.done && WIFEXITED(chk.status) ? WEXITSTATUS(chk.status) : -1;
		out = dh_slurp(chk.out);
	} else {
		rc = dh_run(
		    load_argv(&cmd, sock, (const char *const[]){ "check", LOAD_KEY, want, NULL }),
		    30000, &out);
	}
	fprintf(f, "check: exit %d\n%s", rc, out);
	free(out);
	cr_assert(fclose(f) == 0);
	*busy = during;
	if (restarts > 0)
		fprintf(stderr,
			"%s: %d restarts by SIG%s (pauses of seed %d), %d with every client "
			"running\n",
			tag, restarts, sig, seed, during);
	*deaths = restarts;
	return all;
}

/* The daemon's configuration file for daemon_under_keeper(): NULL, the defaults. */
static const char *keeper_config;

/* The daemon under a keeper that holds its agent socket (named "agent", as the socket unit). */
static const char *daemon_under_keeper(struct keeper *kp)
{
	static char sock[PATH_MAX], listen_opt[PATH_MAX + 32], conf_opt[PATH_MAX + 16],
	    other_opt[PATH_MAX + 32];

	snprintf(sock, sizeof(sock), "%s", dh_path("agent.sock"));
	snprintf(listen_opt, sizeof(listen_opt), "--listen=agent=%s", sock);
	snprintf(conf_opt, sizeof(conf_opt), "--config=%s",
		 keeper_config ? keeper_config : dh_empty_config());
	/* a path of its own that it must not bind: it was given the keeper's socket */
	snprintf(other_opt, sizeof(other_opt), "--agent-socket=%s", dh_path("configured.sock"));
	kp_start(kp, "semvisord", (const char *const[]){ listen_opt, NULL },
		 (const char *const[]){ dh_daemon_bin(), conf_opt, "--control-socket=", other_opt,
					NULL });
	kp_ready(kp, 15000);
	return sock;
}

/*
 * The workload natively and under the daemon, restarted `restarts` times with sig: both runs
 * must print the same, every client must end with 0 and the check must hold. sig "SELF": the
 * daemon kills itself at the kill point die_at ("POINT:N", util/killpoint.h), each time it is
 * started again; restarts is then the fewest deaths that make the run mean something.
 */
static void restart_load_at(const char *sig, const char *die_at, int restarts, int pace)
{
	struct keeper kp;
	const char *sock;
	char *native, *served, *logs;
	int busy, deaths;

	dh_setup();
	native = load_run("native", NULL, NULL, sig, 0, 0, &busy, &deaths);
	/* every client and the check */
	cr_assert(!strstr(native, "FAIL") && dh_count(native, ": exit 0\n") == LOAD_CLIENTS + 1,
		  "the workload fails natively:\n%s", native);

	if (die_at)
		setenv("SEMVISORD_TEST_DIE_AT", die_at, 1);
	sock = daemon_under_keeper(&kp);
	unsetenv("SEMVISORD_TEST_DIE_AT");
	served = load_run("served", &kp, sock, sig, restarts, pace, &busy, &deaths);
	logs = kp_logs(&kp);
	cr_assert_str_eq(served, native,
			 "under the daemon (restarted %d times with SIG%s) the clients saw "
			 "something else:\n%s\nnatively:\n%s\n%s",
			 restarts, sig, served, native, logs);
	free(logs);
	/* a pass means something only if the restarts met the clients at work */
	cr_assert(deaths >= restarts && busy >= restarts / 2,
		  "%d restarts, %d of them while every client was running, of %d wanted: the "
		  "workload is too short to show anything",
		  deaths, busy, restarts);
	kp_stop(&kp, "0");
	cr_assert(access(dh_path("configured.sock"), F_OK) != 0,
		  "the daemon bound its own socket although it was given one");
	free(native);
	free(served);
}

static void restart_load(const char *sig, int restarts, int pace)
{
	restart_load_at(sig, NULL, restarts, pace);
}

/*
 * What works already: the daemon starts under the keeper on the socket it is handed (named
 * "agent"), and after each restart, by SIGTERM or SIGKILL, serves new programs on the same
 * socket; it never binds a socket of its own.
 */
Test(daemon_restart, daemon_serves_after_restart)
{
	struct keeper kp;
	const char *sock;
	char *out, *err;

	dh_setup();
	sock = daemon_under_keeper(&kp);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(DH_SEM(sock, &out, "post", "0x5e57a100", "1"), 0,
			     "after %d restarts:\n%s\n%s", i, out, kp_logs(&kp));
		free(out);
		kp_restart(&kp, i % 2 ? "KILL" : "TERM", i % 2 ? "signal 9" : "0");
	}
	cr_assert_eq(DH_SEM(sock, &out, "post", "0x5e57a100", "1"), 0, "%s\n%s", out, kp_logs(&kp));
	free(out);
	kp_stop(&kp, "0");
	err = dh_slurp(kp.err);
	cr_assert_eq(dh_count(err, "(socket activation)"), 5, "%s", err);
	free(err);
	cr_assert(access(dh_path("configured.sock"), F_OK) != 0,
		  "the daemon bound its own socket although it was given one");
}

/* The same workload and keeper without restarts: the comparison itself holds. */
Test(daemon_restart, load_without_restart)
{
	restart_load("TERM", 0, 1);
}

/* 20 restarts by SIGTERM while clients of every kind are parked in the daemon. */
Test(daemon_restart, restart_with_parked_waiters)
{
	restart_load("TERM", 20, 60);
}

/* The crash storm: 20 restarts by SIGKILL, nothing written on the way out, nothing lost. */
Test(daemon_restart, crash_storm)
{
	restart_load("KILL", 20, 60);
}

/*
 * Deaths where a crash is hardest to survive (util/killpoint.h), each incarnation of the daemon
 * killing itself the Nth time it gets there: with a call received and nothing done for it yet;
 * with a call decided, its change journaled, and its answer not sent; with a journal record
 * half written; with a new checkpoint written and not yet the current one (a checkpoint at
 * every 4 KiB of journal). The clients must see what they see natively.
 */
Test(daemon_restart, die_when_received)
{
	restart_load_at("SELF", "received:150", 8, 60);
}

Test(daemon_restart, die_when_committed)
{
	restart_load_at("SELF", "committed:150", 8, 60);
}

Test(daemon_restart, die_in_a_journal_record)
{
	restart_load_at("SELF", "journal:120", 8, 60);
}

Test(daemon_restart, die_in_a_checkpoint)
{
	static char conf[PATH_MAX];

	dh_setup();
	snprintf(conf, sizeof(conf), "%s", dh_path("checkpoints.conf"));
	dh_write_file(conf, "checkpoint_bytes = 4096\n");
	keeper_config = conf;
	restart_load_at("SELF", "checkpoint:2", 4, 60);
	keeper_config = NULL;
}

/*
 * Sets outlive the programs that made them, as on the kernel: killed when no client is left,
 * the daemon comes back with the set and its value (the journal is the state, clients or none).
 */
Test(daemon_restart, crash_with_no_client_keeps_the_sets)
{
	struct keeper kp;
	const char *sock;
	char *out;

	dh_setup();
	sock = daemon_under_keeper(&kp);
	cr_assert_eq(DH_SEM(sock, &out, "post", "0x5e57d000", "3"), 0, "%s", out);
	free(out);
	for (int i = 0; i < 3; i++) {
		kp_restart(&kp, "KILL", "signal 9");
		cr_assert_eq(DH_SEM(sock, &out, "show", "0x5e57d000"), 0,
			     "after %d crashes: %s\n%s", i + 1, out, kp_logs(&kp));
		cr_assert(strstr(out, " vals 3\n"), "after %d crashes the set shows: %s", i + 1,
			  out);
		free(out);
	}
	kp_stop(&kp, "0");
}

/*
 * A crash while programs wait, ten times over: the programs served when the daemon is killed
 * (two parked in semop for items nobody has produced yet, two taking a lock with SEM_UNDO)
 * go on as if nothing had happened once the daemon is back: the items produced after the
 * crash reach the parked consumers, the lock's counter adds up, the undo entries are applied
 * at their exits. And the restarted daemon serves new programs at once.
 */
Test(daemon_restart, crash_while_parked_loses_nothing)
{
	struct keeper kp;
	struct dh_cmd cmd;
	const char *sock;
	char key[32], *out;
	int served = 0, rc, seed = (int)(dh_now_ms() % 100000);

	dh_setup();
	sock = daemon_under_keeper(&kp);
	srand((unsigned)seed);
	for (int round = 0; round < 10; round++) {
		static const char *const kinds[5][5] = {
			{ "consume", NULL, "5", "0", NULL },  { "consume", NULL, "5", "0", NULL },
			{ "mutex", NULL, "100", "5", NULL },  { "mutex", NULL, "100", "5", NULL },
			{ "produce", NULL, "10", "0", NULL },
		};
		static const char *const said[5] = { "consume: items 5\n", "consume: items 5\n",
						     "mutex: adds 100\n", "mutex: adds 100\n",
						     "produce: items 10\n" };
		pid_t pid[5];
		char path[5][PATH_MAX];

		snprintf(key, sizeof(key), "%#x", 0x5e57b000 + round * 16);
		rc = dh_run(load_argv(&cmd, sock, (const char *const[]){ "setup", key, NULL }),
			    30000, &out);
		cr_assert(rc == 0 && strstr(out, "setup: ok"),
			  "round %d: the restarted daemon does not serve: exit %d\n%s\n%s", round,
			  rc, out, kp_logs(&kp));
		free(out);
		served++;
		for (int i = 0; i < 5; i++) {
			const char *args[5] = { kinds[i][0], key, kinds[i][2], kinds[i][3], NULL };
			char name[64];

			if (i == 4) {
				/* the items come only after the crash: the consumers were parked */
				dh_sleep_ms(20 + rand() % 181);
				kp_restart(&kp, "KILL", "signal 9");
			}
			snprintf(name, sizeof(name), "crash-%d-%d.out", round, i);
			snprintf(path[i], sizeof(path[i]), "%s", dh_path(name));
			pid[i] = dh_spawn(load_argv(&cmd, sock, args), path[i]);
			if (i == 3) {
				/* all four handed over (and the setup before them) before the crash */
				served += 4;
				cr_assert(dh_wait_file(kp.err, "agent: serving semvisor-run-",
						       served, 10000),
					  "round %d: the programs were not served\n%s", round,
					  kp_logs(&kp));
			}
		}
		served++;
		for (int i = 0; i < 5; i++) {
			int st;

			cr_assert(dh_wait(pid[i], 30000, &st),
				  "round %d (seed %d): %s still runs 30 s after the crash\n%s",
				  round, seed, kinds[i][0], kp_logs(&kp));
			out = dh_slurp(path[i]);
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, said[i]),
				  "round %d (seed %d): %s after the crash: %s\n%s\n%s", round, seed,
				  kinds[i][0], dh_status_text(st), out, kp_logs(&kp));
			free(out);
		}
		rc = dh_run(
		    load_argv(&cmd, sock, (const char *const[]){ "check", key, "200", NULL }),
		    30000, &out);
		cr_assert(rc == 0, "round %d: check after the crash: exit %d\n%s", round, rc, out);
		free(out);
		served++;
	}
	kp_stop(&kp, "0");
}

/*
 * A state the daemon cannot read (here, one from a newer format) is refused with the reason in
 * the log, kept aside byte for byte next to the agent socket, and applied in no part: the
 * daemon starts empty and serves. The state comes as systemd would hand it back (LISTEN_FDS,
 * named "state"), from a file.
 */
Test(daemon_restart, refused_state_kept_aside)
{
	static const char *const wrap[] = {
		"sh", "-c",
		"exec 3<\"$0\"; LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=state exec \"$@\"", NULL,
		NULL
	};
	const char *statefile, *w[5];
	unsigned char state[32] = "SVSTATE";
	uint32_t version = 99;
	struct dh_daemon d;
	struct dh_cmd cmd;
	char *log, *kept, *out, path[PATH_MAX];
	const char *at;
	FILE *f;

	dh_setup();
	memcpy(state + 8, &version, sizeof(version));
	statefile = dh_path("state.bin");
	f = fopen(statefile, "w");
	cr_assert(f && fwrite(state, 1, sizeof(state), f) == sizeof(state) && !fclose(f));
	memcpy(w, wrap, sizeof(wrap));
	w[3] = statefile;
	dh_daemon_wrap = w;
	dh_daemon_start(&d, "refused", NULL);
	dh_daemon_wrap = NULL;

	log = dh_log(&d);
	cr_assert(strstr(log, "state refused (state version 99, newer than this build reads"),
		  "no refusal with its reason:\n%s", log);
	at = strstr(log, "kept aside in ");
	cr_assert(at, "not kept aside:\n%s", log);
	sscanf(at + strlen("kept aside in "), "%4095s", path);
	cr_assert(!strncmp(path, dh_dir, strlen(dh_dir)), "kept aside elsewhere: %s", path);
	kept = dh_slurp(path);
	cr_assert(!memcmp(kept, state, 12), "what was kept aside is not the state");
	free(kept);
	free(log);
	/* and it serves, from nothing */
	cr_assert_eq(
	    dh_run(load_argv(&cmd, d.sock, (const char *const[]){ "setup", "0x5e57d000", NULL }),
		   30000, &out),
	    0, "%s", out);
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/* Reap every child but keep (killed programs orphaned to us, a subreaper). */
static void reap_orphans(pid_t keep)
{
	char path[64], *list;
	int st;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)gettid());
	list = dh_slurp(path);
	for (char *tok = strtok(list, " \n"); tok; tok = strtok(NULL, " \n")) {
		pid_t pid = (pid_t)atoi(tok);

		if (pid > 0 && pid != keep)
			cr_assert(dh_wait(pid, 5000, &st), "child %d does not end", (int)pid);
	}
	free(list);
}

/*
 * A process that exits while no daemon runs: its SEM_UNDO adjustments are applied when the
 * next daemon takes over, as its exit would have applied them. A mutex client (a member with
 * SEM_UNDO, taking the lock with SEM_UNDO) is killed after the daemon saved its state and
 * before the next one starts (held back a second by a wrapper); natively its death gives the
 * lock back and takes its membership away, so the set must read lock 1, members 0.
 */
Test(daemon_restart, exit_while_stopped_applies_undo)
{
	struct keeper kp;
	struct dh_cmd cmd;
	char listen_opt[PATH_MAX + 32], conf_opt[PATH_MAX + 16], other_opt[PATH_MAX + 32], *out,
	    *logs;
	const char *sock, *slow, *mutex_out;
	pid_t mutex;
	int st;

	dh_setup();
	sock = dh_path("agent.sock");
	slow = dh_path("slow");
	snprintf(listen_opt, sizeof(listen_opt), "--listen=agent=%s", sock);
	snprintf(conf_opt, sizeof(conf_opt), "--config=%s", dh_empty_config());
	/* a path of its own (its instance lock is beside it), though it serves the keeper's */
	snprintf(other_opt, sizeof(other_opt), "--agent-socket=%s", dh_path("configured.sock"));
	/* exec keeps the pid the keeper named in LISTEN_PID */
	kp_start(&kp, "semvisord", (const char *const[]){ listen_opt, NULL },
		 (const char *const[]){
		     "sh", "-c", "if [ -e \"$0\" ]; then sleep 1; fi; exec \"$@\"", slow,
		     dh_daemon_bin(), conf_opt, "--control-socket=", other_opt, NULL });
	kp_ready(&kp, 15000);
	cr_assert_eq(dh_run(load_argv(&cmd, sock, (const char *const[]){ "setup", LOAD_KEY, NULL }),
			    30000, &out),
		     0, "%s", out);
	free(out);
	/* its program, orphaned when semvisor-run is killed, is ours to reap: reaped, it is gone
	   (no zombie to find) when the next daemon looks for it */
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	mutex_out = dh_path("mutex.out");
	mutex = dh_spawn(
	    load_argv(&cmd, sock, (const char *const[]){ "mutex", LOAD_KEY, "100000", "5", NULL }),
	    mutex_out);
	cr_assert(dh_wait_file(kp.err, "agent: serving semvisor-run-", 2, 10000), "%s",
		  kp_logs(&kp));
	dh_sleep_ms(300); /* a member by now, taking the lock in turns */

	dh_write_file(slow, "hold the next start back\n");
	kp_send(&kp, "restart TERM");
	cr_assert_str_eq(kp_expect(&kp, "exited ", 30000), "exited 0", "%s", kp_logs(&kp));
	/* its group: semvisor-run and the program it started, both reaped */
	kill(-mutex, SIGKILL);
	cr_assert(dh_wait(mutex, 5000, &st) && WIFSIGNALED(st), "%s", dh_status_text(st));
	reap_orphans(kp.pid);
	kp_ready(&kp, 35000);

	cr_assert_eq(dh_run(dh_prog_argv(&cmd, sock, "daemon-sem",
					 (const char *const[]){ "show", LOAD_KEY, NULL }),
			    30000, &out),
		     0, "%s", out);
	logs = kp_logs(&kp);
	cr_assert(strstr(out, "show: nsems 3 ") && strstr(out, " vals 1 ") &&
		      !strcmp(strrchr(out, ' '), " 0\n"),
		  "the killed client's undo was not applied (lock, counter, members):\n%s\n%s", out,
		  logs);
	free(logs);
	free(out);
	unlink(slow);
	kp_stop(&kp, "0");
}
