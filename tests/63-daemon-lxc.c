/* SPDX-License-Identifier: MIT */
/*
 * Real LXC containers (Debian's lxc) served by semvisord through semvisor-lxc: each container's
 * profile is the shipped examples/lxc/semvisor.seccomp (the semaphore calls go to a listener,
 * no notify proxy), and semvisor-lxc hands that listener, which LXC's monitor keeps, to the
 * daemon's agent socket by the container's name.
 *
 * The containers run in a private lxcpath in the test's directory, on a busybox-static rootfs
 * with tests/prog/ct-sem linked statically (tests/60-daemon-ct.h), without a network. Their
 * init is a busybox sh script that announces itself in /sync (a directory bind-mounted from the
 * host, one per container) and waits for /sync/go before its first semaphore call, since a
 * call made before semvisor-lxc has handed the listener over would wait for it: the test runs
 * semvisor-lxc for every container first, then releases them one by one.
 *   A  ct-sem pingpong with --ns NAME: two processes through a keyed set, held until released;
 *   B  ct-sem probe with --ns NAME: the same named namespace, so it sees A's set;
 *   C  ct-sem probe without --ns: its own IPC namespace, where A's key is absent;
 * and, as LXC shares a namespace itself, two containers in one kernel IPC namespace
 * (lxc.namespace.share.ipc), handed over without --ns, which share A's set the same way.
 * ct-sem checks that the kernel holds no set (/proc/sysvipc/sem): every call went to semvisord.
 * Beside them, semvisor-lxc's exit statuses: 1 for usage errors, 2 for a container that does
 * not exist or has no listener, 3 when semvisord is not there or refuses the container (which
 * leaves the container it already serves unharmed).
 *
 * lxc-start runs in the foreground (-F), as a child of the test; the test's cleanup stops every
 * container with lxc-stop -k first, so that LXC's monitor removes its cgroups, then kills what
 * is left. Skipped only when this machine cannot run an LXC container at all (not root, no
 * lxc-start, no busybox-static, or a plain container without our profile fails too: the skip
 * quotes LXC's log).
 */
#include "tests/60-daemon-ct.h"

#define KEY	"0x5e3a00c8"
#define ROUNDS	300
#define SHARED	"semvisor-lxc-test"
#define MAX_CTS 4

struct lxc_ct {
	char name[64];
	char sync[256]; /* the host's side of /sync, in the test's directory */
	char log[272];	/* LXC's log (-o) */
	char out[272];	/* lxc-start's own output */
	pid_t start;	/* lxc-start -F while it runs */
};

static char lxcpath[256], rootfs[256];
/* every container defined, for the cleanup (which runs after the test function has returned) */
static struct lxc_ct cts[MAX_CTS];
static int ncts;

/* lxc-stop -k every container still running, so that its monitor cleans up, then the rest. */
static void lxc_cleanup(void)
{
	for (int i = 0; i < ncts; i++) {
		char cmd[2 * PATH_MAX];

		if (!cts[i].start)
			continue; /* lxc-start -F has ended, and its container with it */
		snprintf(cmd, sizeof(cmd), "lxc-stop -P %s -n %s -k >/dev/null 2>&1", lxcpath,
			 cts[i].name);
		if (system(cmd) != 0) {
			/* it ended meanwhile: nothing to stop */
		}
	}
	ncts = 0;
	dh_cleanup();
}

TestSuite(daemon_lxc, .timeout = 90, .fini = lxc_cleanup);

static void require_lxc(void)
{
	if (geteuid() != 0)
		cr_skip_test("lxc-start needs root here (euid %d)", (int)geteuid());
	if (system("command -v lxc-start >/dev/null 2>&1") != 0)
		cr_skip_test("lxc-start is not installed (Debian package lxc)");
	ct_require_busybox();
	if (access(dh_bin("semvisor-lxc"), X_OK))
		cr_assert_fail("no %s (liblxc's headers missing at build time? Debian package "
			       "lxc-dev)",
			       dh_bin("semvisor-lxc"));
}

/* A file of examples/lxc/, absolute: LXC reads it from a working directory of its own. */
static const char *shipped(const char *file)
{
	static char path[2][PATH_MAX];
	static int slot;
	char rel[128];
	const char *src;
	char *p = path[slot++ % 2];

	snprintf(rel, sizeof(rel), "examples/lxc/%s", file);
	src = dh_src(rel);
	cr_assert(src, "%s not found", rel);
	cr_assert(realpath(src, p), "%s: %s", src, strerror(errno));
	return p;
}

/* The shipped config lines: a profile, and no notify proxy (which would answer the calls). */
static void check_shipped_conf(void)
{
	char *text = dh_slurp(shipped("semvisor.conf")), *line, *save = NULL;
	int profiles = 0;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#')
			continue;
		cr_assert(!strstr(line, "lxc.seccomp.notify.proxy"),
			  "semvisor.conf sets a proxy: %s", line);
		profiles += !strncmp(line, "lxc.seccomp.profile = ", 22);
	}
	cr_assert_eq(profiles, 1, "semvisor.conf should set lxc.seccomp.profile once");
	free(text);
}

/* The rootfs, the lxcpath, and the init script every container runs. */
static void lxc_setup(void)
{
	require_lxc();
	dh_setup();
	snprintf(lxcpath, sizeof(lxcpath), "%s", dh_path("lxc"));
	snprintf(rootfs, sizeof(rootfs), "%s", dh_path("rootfs"));
	cr_assert(mkdir(lxcpath, 0755) == 0);
	ct_make_rootfs(rootfs, ct_static_sem());
	/* busybox sh: its test and redirections are built in, sleep is an applet */
	dh_write_file(dh_path("rootfs/bin/ct-init"),
		      "#!/bin/sh\n"
		      ": >/sync/started\n"
		      "while [ ! -e /sync/go ]; do sleep 0.05; done\n"
		      "\"$@\" >/sync/out 2>&1\n"
		      "echo $? >/sync/rc\n");
	cr_assert(chmod(dh_path("rootfs/bin/ct-init"), 0755) == 0);
}

/*
 * Define container tag (its config in lxcpath/NAME), running init_cmd under ct-init; served:
 * with the shipped config lines, their profile path then pointed at the source tree's profile;
 * extra: more config lines, or NULL.
 */
static struct lxc_ct *ct_define(const char *tag, bool served, const char *init_cmd,
				const char *extra)
{
	char dir[PATH_MAX + 128], path[PATH_MAX + 144];
	struct lxc_ct *c;

	cr_assert(ncts < MAX_CTS);
	c = &cts[ncts++];
	snprintf(c->name, sizeof(c->name), "svl-%d-%s", (int)getpid(), tag);
	snprintf(dir, sizeof(dir), "%s/%s", lxcpath, c->name);
	snprintf(c->sync, sizeof(c->sync), "%s", dh_path(tag));
	snprintf(c->log, sizeof(c->log), "%s/lxc.log", dh_path(tag));
	snprintf(c->out, sizeof(c->out), "%s/start.out", dh_path(tag));
	c->start = 0;
	cr_assert(mkdir(dir, 0755) == 0 && mkdir(c->sync, 0755) == 0);
	snprintf(path, sizeof(path), "%s/config", dir);
	dh_write_file(path,
		      "lxc.uts.name = %s\n"
		      "lxc.rootfs.path = dir:%s\n"
		      "lxc.net.0.type = empty\n"
		      "lxc.mount.auto = proc:rw sys:ro\n"
		      "lxc.mount.entry = %s sync none bind,create=dir 0 0\n"
		      "lxc.console.path = none\n"
		      "lxc.tty.max = 0\n"
		      "lxc.apparmor.profile = unconfined\n"
		      "%s%s%s%s%s%s"
		      "lxc.init.cmd = /bin/ct-init %s\n",
		      c->name, rootfs, c->sync, served ? "lxc.include = " : "",
		      served ? shipped("semvisor.conf") : "",
		      served ? "\nlxc.seccomp.profile = " : "",
		      served ? shipped("semvisor.seccomp") : "", served ? "\n" : "",
		      extra ? extra : "", init_cmd);
	return c;
}

static void ct_start(struct lxc_ct *c)
{
	const char *argv[] = { "lxc-start", "-F",   "-P", lxcpath, "-n", c->name,
			       "-o",	    c->log, "-l", "INFO",  NULL };

	c->start = dh_spawn(argv, c->out);
}

static char *sync_file(const struct lxc_ct *c, const char *name)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/%s", c->sync, name);
	return dh_slurp(path);
}

static bool sync_has(const struct lxc_ct *c, const char *name)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/%s", c->sync, name);
	return access(path, F_OK) == 0;
}

static void sync_touch(const struct lxc_ct *c, const char *name)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/%s", c->sync, name);
	dh_write_file(path, "go\n");
}

/* What LXC said of c, for messages. */
static char *ct_said(const struct lxc_ct *c)
{
	char *log = dh_slurp(c->log), *out = dh_slurp(c->out), *msg;

	cr_assert(asprintf(&msg, "lxc-start said:\n%s\nits log ends:\n%s", out, dh_tail(log, 25)) >
		  0);
	free(log);
	free(out);
	return msg;
}

/*
 * Wait until c's init has made /sync/name (30 s at most). If lxc-start ends first: skip when a
 * plain container (no seccomp profile, nothing of ours) cannot run either, else fail.
 */
static void ct_wait_file(struct lxc_ct *c, const char *name)
{
	int64_t end = dh_now_ms() + 30000;
	int st;

	while (!sync_has(c, name)) {
		if (c->start && waitpid(c->start, &st, WNOHANG) == c->start) {
			struct lxc_ct *plain;
			char *said = ct_said(c);

			dh_untrack(c->start);
			c->start = 0;
			plain = ct_define("plain", false, "/bin/echo plain", NULL);
			sync_touch(plain, "go");
			ct_start(plain);
			if (!dh_wait(plain->start, 30000, &st) || !sync_has(plain, "rc")) {
				char reason[4096];
				char *psaid = ct_said(plain);

				snprintf(reason, sizeof(reason), "%s", psaid);
				lxc_cleanup();
				cr_skip_test(
				    "LXC cannot run even a plain busybox container here: %s",
				    reason);
			}
			cr_assert_fail("container %s ended (%s) before /sync/%s, though a plain "
				       "container runs; %s",
				       c->name, dh_status_text(st), name, said);
		}
		cr_assert(dh_now_ms() < end, "container %s: no /sync/%s in 30 s; %s", c->name, name,
			  ct_said(c));
		dh_sleep_ms(10);
	}
}

/* Wait for lxc-start -F to end after c's init has: LXC's monitor then has cleaned up. */
static void ct_end(struct lxc_ct *c)
{
	int st;

	cr_assert(dh_wait(c->start, 15000, &st),
		  "container %s did not stop after its init ended; %s", c->name, ct_said(c));
	c->start = 0;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "lxc-start %s: %s; %s", c->name,
		  dh_status_text(st), ct_said(c));
}

/* Release c's init, wait for its program to end: its output, and its exit status in *rc. */
static char *ct_run(struct lxc_ct *c, int *rc)
{
	char *text;

	sync_touch(c, "go");
	ct_wait_file(c, "rc");
	ct_end(c);
	text = sync_file(c, "rc");
	*rc = atoi(text);
	free(text);
	return sync_file(c, "out");
}

/* semvisor-lxc ARGS... NAME: its exit status, its output in *out. */
static int semvisor_lxc(const char *sock, const char *ns, const char *name, char **out)
{
	const char *argv[] = { dh_bin("semvisor-lxc"),
			       "--socket",
			       sock,
			       "--lxcpath",
			       lxcpath,
			       ns ? "--ns" : name,
			       ns,
			       ns ? name : NULL,
			       NULL };

	return dh_run(argv, 20000, out);
}

static char *ctl(const char *ctlpath, const char *cmd, const char *ns)
{
	const char *argv[] = { dh_bin("semvisorctl"), "--socket", ctlpath, cmd,
			       ns ? "--ns" : NULL,    ns,	  NULL };
	char *out;

	cr_assert_eq(dh_run(argv, 10000, &out), 0, "semvisorctl %s:\n%s", cmd, out);
	return out;
}

/* The CALLS column of name's line in `semvisorctl clients`, or -1 if it is not listed. */
static long client_calls(const char *clients, const char *name)
{
	char want[128], ns[128];
	const char *p;
	long calls;

	snprintf(want, sizeof(want), "\n%s (pid ", name);
	p = strstr(clients, want);
	if (!p)
		return -1;
	/* "NAME (pid N)  NAMESPACE  CALLS ..." */
	p = strchr(p + strlen(want), ')');
	if (!p || sscanf(p + 1, "%127s %ld", ns, &calls) != 2)
		return -1;
	return calls;
}

Test(daemon_lxc, three_containers)
{
	struct lxc_ct *a, *b, *c;
	struct dh_daemon d;
	char ctlopt[PATH_MAX + 32], ctlpath[PATH_MAX], init[256], want[256], *out, *log;
	const char *daemon_args[] = { ctlopt, NULL };
	int rc;

	lxc_setup();
	check_shipped_conf();
	snprintf(ctlpath, sizeof(ctlpath), "%s", dh_path("ctl.sock"));
	snprintf(ctlopt, sizeof(ctlopt), "--control-socket=%s", ctlpath);
	dh_daemon_start(&d, "d", daemon_args);

	snprintf(init, sizeof(init), "/bin/ct-sem pingpong %s %d /sync", KEY, ROUNDS);
	a = ct_define("a", true, init, NULL);
	snprintf(init, sizeof(init), "/bin/ct-sem probe %s 1234", KEY);
	b = ct_define("b", true, init, NULL);
	snprintf(init, sizeof(init), "/bin/ct-sem probe %s absent", KEY);
	c = ct_define("c", true, init, NULL);
	ct_start(a);
	ct_start(b);
	ct_start(c);
	ct_wait_file(a, "started");
	ct_wait_file(b, "started");
	ct_wait_file(c, "started");

	/* the ways it can fail, before the real hand-over: each leaves the listener where it is */
	rc = semvisor_lxc(d.sock, NULL, "svl-no-such-container", &out);
	cr_assert_eq(rc, 2, "a missing container: exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "semvisor-lxc: container svl-no-such-container is not defined"), "%s",
		  out);
	free(out);
	rc = semvisor_lxc(dh_path("nobody.sock"), NULL, a->name, &out);
	cr_assert_eq(rc, 3, "no daemon: exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "semvisor-lxc: cannot reach semvisord at "), "%s", out);
	free(out);

	rc = semvisor_lxc(d.sock, SHARED, a->name, &out);
	cr_assert_eq(rc, 0, "semvisor-lxc A: exit %d:\n%s\ndaemon log:\n%s", rc, out,
		     dh_slurp(d.log));
	free(out);
	rc = semvisor_lxc(d.sock, SHARED, b->name, &out);
	cr_assert_eq(rc, 0, "semvisor-lxc B: exit %d:\n%s", rc, out);
	free(out);
	rc = semvisor_lxc(d.sock, NULL, c->name, &out);
	cr_assert_eq(rc, 0, "semvisor-lxc C: exit %d:\n%s", rc, out);
	free(out);

	/* A: its ping-pong, then it holds its set until /sync/release */
	sync_touch(a, "go");
	ct_wait_file(a, "ready");
	dh_daemon_alive(&d);
	out = ctl(ctlpath, "ipcs", SHARED);
	cr_assert(strstr(out, KEY), "A's set is not in namespace %s:\n%s", SHARED, out);
	free(out);

	/* B, in the same named namespace, sees A's set; C, in its own, does not */
	out = ct_run(b, &rc);
	cr_assert_eq(rc, 0, "container B: exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "probe sem0: 1234\n"), "B did not see A's set:\n%s", out);
	cr_assert(strstr(out, "kernel sets: 0\n"), "B's calls reached the kernel:\n%s", out);
	free(out);
	out = ct_run(c, &rc);
	cr_assert_eq(rc, 0, "container C: exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "probe semget: -1 ENOENT\n"), "C saw A's key:\n%s", out);
	cr_assert(strstr(out, "probe own set: created\n"), "C:\n%s", out);
	cr_assert(strstr(out, "probe own getval: 7\n"), "C:\n%s", out);
	cr_assert(strstr(out, "kernel sets: 0\n"), "C's calls reached the kernel:\n%s", out);
	free(out);

	/* A is served, by its LXC name, and its calls were counted: at least its semgets and
	   four timed semops a round on each side */
	out = ctl(ctlpath, "clients", NULL);
	cr_assert_geq(client_calls(out, a->name), 8 * ROUNDS, "A's calls:\n%s", out);
	cr_assert(strstr(out, SHARED), "no client in namespace %s:\n%s", SHARED, out);
	free(out);

	sync_touch(a, "release");
	ct_wait_file(a, "rc");
	ct_end(a);
	out = sync_file(a, "out");
	log = sync_file(a, "rc");
	cr_assert_eq(atoi(log), 0, "container A: exit %s:\n%s", log, out);
	free(log);
	snprintf(want, sizeof(want), "counter: %d\n", 2 * ROUNDS);
	cr_assert(strstr(out, want), "container A: no '%s':\n%s", want, out);
	cr_assert(strstr(out, "lastpid is pong: yes\n"), "container A:\n%s", out);
	cr_assert(strstr(out, "kernel sets: 0\n"), "A's calls reached the kernel:\n%s", out);
	cr_assert(strstr(out, "after probe: same id yes, sem0 1234\n"), "container A:\n%s", out);
	cr_assert(!strstr(out, "FAIL"), "container A:\n%s", out);
	free(out);

	cr_assert_eq(dh_daemon_stop(&d), 0, "semvisord did not exit 0 on SIGTERM:\n%s",
		     dh_slurp(d.log));
	log = dh_slurp(d.log);
	snprintf(want, sizeof(want), "agent: serving %s (pid ", a->name);
	cr_assert(strstr(log, want), "the daemon did not log '%s':\n%s", want, log);
	cr_assert_eq(dh_count(log, " in namespace " SHARED), 2,
		     "A and B should be served from namespace %s:\n%s", SHARED, log);
	snprintf(want, sizeof(want), "agent: serving %s (pid ", c->name);
	cr_assert(strstr(log, want), "the daemon did not log '%s':\n%s", want, log);
	free(log);
}

/* A container whose profile sends nothing to a listener: nothing to hand over, exit 2. */
Test(daemon_lxc, no_listener)
{
	struct lxc_ct *p;
	char *out;
	int rc;

	lxc_setup();
	p = ct_define("p", false, "/bin/echo plain", NULL);
	ct_start(p);
	ct_wait_file(p, "started");
	rc = semvisor_lxc(dh_path("nobody.sock"), NULL, p->name, &out);
	cr_assert_eq(rc, 2, "a container without a listener: exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "has no seccomp listener"), "%s", out);
	free(out);
	free(ct_run(p, &rc));
	cr_assert_eq(rc, 0);
}

/* Usage errors are 1 and name the program; -n is not --ns (lxc-start -n names a container). */
Test(daemon_lxc, usage)
{
	static const char *const bad[][4] = {
		{ NULL },
		{ "--ns=a b", "x", NULL },
		{ "--ns=", "x", NULL },
		{ "-n", "x", NULL },
		{ "x", "y", NULL },
	};
	const char *argv[8];
	char *out;
	int rc;

	dh_setup_ns(false); /* a directory for the output, nothing more */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int n = 0;

		argv[n++] = dh_bin("semvisor-lxc");
		for (int j = 0; bad[i][j]; j++)
			argv[n++] = bad[i][j];
		argv[n] = NULL;
		rc = dh_run(argv, 10000, &out);
		cr_assert_eq(rc, 1, "case %zu: exit %d:\n%s", i, rc, out);
		cr_assert(!strncmp(out, "semvisor-lxc: ", 14), "case %zu:\n%s", i, out);
		cr_assert(strstr(out, "Try 'semvisor-lxc --help'"), "case %zu:\n%s", i, out);
		free(out);
	}
	argv[1] = "--help";
	argv[2] = NULL;
	cr_assert_eq(dh_run(argv, 10000, &out), 0, "%s", out);
	cr_assert(strstr(out, "Usage: semvisor-lxc [OPTION]... NAME"), "%s", out);
	free(out);
}

/*
 * semvisord refuses a container (max_clients reached): semvisor-lxc says so and exits 3. The
 * refused container's calls would wait (LXC's monitor keeps its listener), so it is never
 * released, only stopped.
 */
Test(daemon_lxc, refused)
{
	struct lxc_ct *x, *y;
	struct dh_daemon d;
	char confopt[PATH_MAX + 32], *out;
	const char *daemon_args[] = { confopt, NULL };
	int rc;

	lxc_setup();
	dh_write_file(dh_path("one.conf"), "max_clients = 1\n");
	snprintf(confopt, sizeof(confopt), "--config=%s", dh_path("one.conf"));
	dh_daemon_start(&d, "d", daemon_args);
	x = ct_define("x", true, "/bin/ct-sem probe " KEY " absent", NULL);
	y = ct_define("y", true, "/bin/ct-sem probe " KEY " absent", NULL);
	ct_start(x);
	ct_start(y);
	ct_wait_file(x, "started");
	ct_wait_file(y, "started");

	rc = semvisor_lxc(d.sock, NULL, x->name, &out);
	cr_assert_eq(rc, 0, "semvisor-lxc x: exit %d:\n%s", rc, out);
	free(out);
	rc = semvisor_lxc(d.sock, NULL, y->name, &out);
	cr_assert_eq(rc, 3, "semvisor-lxc y, over max_clients: exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "semvisor-lxc: semvisord at ") && strstr(out, " refused container "),
		  "%s", out);
	free(out);
	dh_daemon_alive(&d);
	out = dh_log(&d);
	cr_assert(strstr(out, " refused: 1 clients already (max_clients)"), "%s", out);
	free(out);

	/* the one served is served still */
	out = ct_run(x, &rc);
	cr_assert_eq(rc, 0, "container x: exit %d:\n%s", rc, out);
	cr_assert(strstr(out, "kernel sets: 0\n"), "x's calls reached the kernel:\n%s", out);
	free(out);
}

/*
 * Two containers in one kernel IPC namespace (lxc.namespace.share.ipc, as LXC shares one),
 * handed over without --ns: served from that namespace, they share its sets as natively.
 */
Test(daemon_lxc, shared_kernel_ipc_namespace)
{
	struct lxc_ct *a, *b;
	struct dh_daemon d;
	char init[256], extra[160], *out, *log;
	int rc;

	lxc_setup();
	dh_daemon_start(&d, "d", NULL);
	snprintf(init, sizeof(init), "/bin/ct-sem pingpong %s %d /sync", KEY, ROUNDS);
	a = ct_define("e", true, init, NULL);
	ct_start(a);
	ct_wait_file(a, "started");
	rc = semvisor_lxc(d.sock, NULL, a->name, &out);
	cr_assert_eq(rc, 0, "semvisor-lxc A: exit %d:\n%s", rc, out);
	free(out);
	sync_touch(a, "go");
	ct_wait_file(a, "ready");

	snprintf(init, sizeof(init), "/bin/ct-sem probe %s 1234", KEY);
	snprintf(extra, sizeof(extra), "lxc.namespace.share.ipc = %s\n", a->name);
	b = ct_define("f", true, init, extra);
	ct_start(b);
	ct_wait_file(b, "started");
	rc = semvisor_lxc(d.sock, NULL, b->name, &out);
	cr_assert_eq(rc, 0, "semvisor-lxc B: exit %d:\n%s", rc, out);
	free(out);
	out = ct_run(b, &rc);
	cr_assert_eq(rc, 0, "container B: exit %d:\n%s\nits LXC log:\n%s", rc, out,
		     dh_slurp(b->log));
	cr_assert(strstr(out, "probe sem0: 1234\n"), "B did not see A's set:\n%s", out);
	cr_assert(strstr(out, "kernel sets: 0\n"), "B's calls reached the kernel:\n%s", out);
	free(out);

	sync_touch(a, "release");
	ct_wait_file(a, "rc");
	ct_end(a);
	log = sync_file(a, "rc");
	out = sync_file(a, "out");
	cr_assert_eq(atoi(log), 0, "container A: exit %s:\n%s", log, out);
	cr_assert(strstr(out, "after probe: same id yes, sem0 1234\n"), "container A:\n%s", out);
	free(log);
	free(out);
	cr_assert_eq(dh_daemon_stop(&d), 0, "semvisord did not exit 0 on SIGTERM:\n%s",
		     dh_slurp(d.log));
}
