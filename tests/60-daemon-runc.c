/* SPDX-License-Identifier: MIT */
/*
 * Real containers: runc (the Debian package) hands each container's seccomp listener to
 * semvisord through linux.seccomp.listenerPath (SPEC B7), exactly as it would to any OCI seccomp
 * agent; semvisord serves the container's semaphore calls.
 *
 * The rootfs, config.json and profiles come from tests/60-daemon-ct.h (busybox-static plus
 * tests/prog/ct-sem linked statically; see there for what it checks), shared with the other
 * runtimes' tests (tests/62-daemon-runtimes.c). Each container gets its own IPC namespace (runc's default), so:
 *  - two processes of one container share a keyed set (ct-sem's ping-pong, which also checks
 *    that the kernel holds no set: every call went to the daemon);
 *  - a second container cannot see that key while the first container and its set are alive,
 *    and its own set with the same key is a different one;
 *  - with listenerMetadata "ns=NAME" (honoured from root) two containers share one namespace on
 *    purpose, and the second does see the first one's set.
 *  - semvisor-run inside a served container cannot have a listener, falls back to ptrace,
 *    and the program behaves as natively (the daemon above serves it).
 * The first container must stay alive while the second probes: it waits for a file to appear
 * in a directory bind-mounted from the host (/sync), after announcing itself with another.
 *
 * runc runs with a state directory of the test's own (--root), so that the containers can be
 * deleted (runc delete -f) even when an assertion fails, without touching anyone else's.
 * If runc itself cannot run a container here (no root, no runc, no busybox, or a plain container
 * without our seccomp profile also fails), the test is skipped and says exactly why.
 */
#include "tests/60-daemon-ct.h"

TestSuite(daemon_runc, .timeout = 120, .fini = dh_cleanup);

#define KEY    CT_KEY
#define ROUNDS CT_ROUNDS

struct ct {
	char id[64];
	char bundle[256]; /* in the test's directory */
	char out[272];
	pid_t runc; /* `runc run` while it runs */
};

static char runc_state[PATH_MAX];

/* runc's bundle for c, with the brief's profile (agent: NULL for none) and metadata. */
static void write_config(const struct ct *c, const char *rootfs, const char *args_json,
			 const char *agent, const char *metadata, const char *sync)
{
	char *seccomp = agent ? ct_seccomp_json(agent, metadata) : NULL;

	ct_write_oci_config(c->bundle, &(struct ct_oci){ .rootfs = rootfs,
							 .args_json = args_json,
							 .seccomp = seccomp,
							 .sync = sync });
	free(seccomp);
}

/* Environment checks that are not ours to fix: skip with the reason. */
static void require_runc(void)
{
	if (geteuid() != 0)
		cr_skip_test("runc needs root (euid %d)", (int)geteuid());
	if (system("runc --version >/dev/null 2>&1") != 0)
		cr_skip_test("runc is not installed (Debian package runc)");
	ct_require_busybox();
}

static void ct_init(struct ct *c, const char *name)
{
	snprintf(c->id, sizeof(c->id), "semvisor-test-%d-%s", (int)getpid(), name);
	snprintf(c->bundle, sizeof(c->bundle), "%s", dh_path(name));
	snprintf(c->out, sizeof(c->out), "%s/out", c->bundle);
	cr_assert(mkdir(c->bundle, 0755) == 0);
	c->runc = 0;
	/* runc run -b removes nothing on a kill; delete -f stops and removes whatever is left */
	dh_on_cleanup("runc --root %s delete -f %s >/dev/null 2>&1", runc_state, c->id);
}

static void ct_start(struct ct *c)
{
	const char *argv[] = { "runc", "--root", runc_state, "run", "-b", c->bundle, c->id, NULL };

	c->runc = dh_spawn(argv, c->out);
}

/* Wait for `runc run` (it ends with the container): the container's exit status, -1 timed out. */
static int ct_wait(struct ct *c, int timeout_ms)
{
	int st;

	if (!dh_wait(c->runc, timeout_ms, &st))
		return -1;
	c->runc = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * A container of ours failed: is runc able to run any container here? If a plain one (no
 * seccomp profile, nothing of ours) fails too, the machine is the problem: skip, quoting runc.
 */
static void ct_failed(const char *rootfs, const struct ct *failed, int rc, struct dh_daemon *d)
{
	struct ct probe;
	char *out, *log;
	int prc;

	dh_daemon_alive(d);
	ct_init(&probe, "probe");
	write_config(&probe, rootfs, "[\"sh\", \"-c\", \"echo plain container ok\"]", NULL, NULL,
		     NULL);
	ct_start(&probe);
	prc = ct_wait(&probe, 30000);
	out = dh_slurp(probe.out);
	if (prc != 0 || !strstr(out, "plain container ok")) {
		char reason[1024];

		snprintf(reason, sizeof(reason), "%s", out);
		dh_cleanup();
		cr_skip_test("runc cannot run even a plain busybox container here (exit %d): %s",
			     prc, reason);
	}
	log = dh_slurp(d->log);
	cr_assert_fail("container %s: exit %d, though runc runs a plain container fine; its "
		       "output:\n%s\ndaemon log:\n%s",
		       failed->id, rc, dh_slurp(failed->out), log);
}

/* Wait (30 s at most) until container c has made the file ready; a container that exits first
   goes to ct_failed(). */
static void runc_wait_ready(struct ct *c, const char *ready, const char *rootfs,
			    struct dh_daemon *d)
{
	int st;

	if (ct_wait_ready(c->runc, ready, 30000, &st))
		return;
	cr_assert(st != -1, "container %s not ready in 30 s:\n%s", c->id, dh_slurp(c->out));
	c->runc = 0;
	ct_failed(rootfs, c, WIFEXITED(st) ? WEXITSTATUS(st) : -1, d);
}

/*
 * The two-container scenario: A ping-pongs through KEY and holds the set; B probes KEY while A
 * waits; then A is released and checks its set. metadata goes to both containers.
 */
static void two_containers(const char *metadata, const char *probe_want, char **a_out, char **b_out,
			   char **log)
{
	struct dh_daemon d;
	struct ct a, b;
	char rootfs[PATH_MAX], sync[PATH_MAX], args[512], ready[PATH_MAX + 16];
	int rc;

	require_runc();
	dh_setup();
	snprintf(runc_state, sizeof(runc_state), "%s", dh_path("runc-state"));
	snprintf(rootfs, sizeof(rootfs), "%s", dh_path("rootfs"));
	snprintf(sync, sizeof(sync), "%s", dh_path("sync"));
	snprintf(ready, sizeof(ready), "%s/ready", sync);
	cr_assert(mkdir(sync, 0755) == 0);
	ct_make_rootfs(rootfs, ct_static_sem());
	dh_daemon_start(&d, "d", NULL);

	ct_init(&a, "a");
	ct_init(&b, "b");
	snprintf(args, sizeof(args), "[\"/bin/ct-sem\", \"pingpong\", \"%s\", \"%d\", \"/sync\"]",
		 KEY, ROUNDS);
	write_config(&a, rootfs, args, d.sock, metadata, sync);
	snprintf(args, sizeof(args), "[\"/bin/ct-sem\", \"probe\", \"%s\", \"%s\"]", KEY,
		 probe_want);
	write_config(&b, rootfs, args, d.sock, metadata, NULL);

	/* A: runs its ping-pong, then waits in /sync for the release */
	ct_start(&a);
	runc_wait_ready(&a, ready, rootfs, &d);
	/* B: while A and its set are alive */
	ct_start(&b);
	rc = ct_wait(&b, 30000);
	dh_daemon_alive(&d);
	*b_out = dh_slurp(b.out);
	cr_assert_eq(rc, 0, "container B: %s:\n%s\ndaemon log:\n%s",
		     rc < 0 ? "timed out" : "failed", *b_out, dh_slurp(d.log));

	dh_write_file(dh_path("sync/release"), "go\n");
	rc = ct_wait(&a, 30000);
	dh_daemon_alive(&d);
	*a_out = dh_slurp(a.out);
	cr_assert_eq(rc, 0, "container A: exit %d:\n%s\ndaemon log:\n%s", rc, *a_out,
		     dh_slurp(d.log));

	cr_assert_eq(dh_daemon_stop(&d), 0, "semvisord did not exit 0 on SIGTERM:\n%s",
		     dh_slurp(d.log));
	*log = dh_slurp(d.log);
	/* the daemon served both, by container id */
	for (int i = 0; i < 2; i++) {
		char want[128];

		snprintf(want, sizeof(want), "agent: serving %s (pid ", i ? b.id : a.id);
		cr_assert(strstr(*log, want), "the daemon did not log '%s':\n%s", want, *log);
	}
}

Test(daemon_runc, containers_isolated)
{
	char *a_out, *b_out, *log;

	two_containers(NULL, "absent", &a_out, &b_out, &log);
	ct_check_pingpong(a_out);
	/* B, in its own IPC namespace, did not see A's key, and its own set was another */
	cr_assert(strstr(b_out, "probe semget: -1 ENOENT\n"), "B saw A's key:\n%s", b_out);
	cr_assert(strstr(b_out, "probe own set: created\n"), "B:\n%s", b_out);
	cr_assert(strstr(b_out, "probe own getval: 7\n"), "B:\n%s", b_out);
	cr_assert(strstr(b_out, "kernel sets: 0\n"), "B's calls reached the kernel:\n%s", b_out);
	cr_assert(!strstr(b_out, "FAIL"), "B:\n%s", b_out);
	cr_assert(!strstr(log, " in namespace "), "no metadata, yet a named namespace:\n%s", log);
	free(a_out);
	free(b_out);
	free(log);
}

/* listenerMetadata "ns=NAME" from root: both containers in one named namespace, on purpose. */
Test(daemon_runc, metadata_names_namespace)
{
	char *a_out, *b_out, *log;

	two_containers("ns=semvisor-test-shared", "1234", &a_out, &b_out, &log);
	ct_check_pingpong(a_out);
	cr_assert(strstr(b_out, "probe sem0: 1234\n"), "B did not see A's set:\n%s", b_out);
	cr_assert(!strstr(b_out, "FAIL"), "B:\n%s", b_out);
	cr_assert_eq(dh_count(log, " in namespace semvisor-test-shared"), 2,
		     "both containers should be served from the named namespace:\n%s", log);
	free(a_out);
	free(b_out);
	free(log);
}

/* The container's init, as `runc state` gives it. */
static pid_t ct_init_pid(const struct ct *c)
{
	const char *argv[] = { "runc", "--root", runc_state, "state", c->id, NULL };
	json_error_t je;
	json_t *st;
	char *out;
	pid_t pid;

	cr_assert_eq(dh_run(argv, 10000, &out), 0, "runc state %s:\n%s", c->id, out);
	st = json_loads(out, 0, &je);
	cr_assert(st && json_is_integer(json_object_get(st, "pid")), "runc state %s: %s", c->id,
		  out);
	pid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	json_decref(st);
	free(out);
	return pid;
}

static char *ctl_out(const char *ctlpath, const char *cmd, const char *ns)
{
	const char *argv[] = { dh_bin("semvisorctl"), "--socket", ctlpath, cmd,
			       ns ? "--ns" : NULL,    ns,	  NULL };
	char *out;

	cr_assert_eq(dh_run(argv, 10000, &out), 0, "semvisorctl %s:\n%s", cmd, out);
	return out;
}

/* One pod container served by a daemon with a control socket, from start to its ping-pong's end. */
struct pod_run {
	char rootfs[PATH_MAX], sync[PATH_MAX], ready[PATH_MAX + 16];
	char ctl[PATH_MAX + 32], ctlpath[PATH_MAX];
	struct dh_daemon d;
	struct ct a;
};

/* Starts the daemon and container A with the shipped profile; returns once A holds KEY. */
static void pod_start(struct pod_run *r, const char *metadata, const char *ann)
{
	const char *daemon_args[] = { r->ctl, NULL };
	char args[512], *profile;

	require_runc();
	dh_setup();
	snprintf(runc_state, sizeof(runc_state), "%s", dh_path("runc-state"));
	snprintf(r->rootfs, sizeof(r->rootfs), "%s", dh_path("rootfs"));
	snprintf(r->sync, sizeof(r->sync), "%s", dh_path("sync"));
	snprintf(r->ready, sizeof(r->ready), "%s/ready", r->sync);
	snprintf(r->ctlpath, sizeof(r->ctlpath), "%s", dh_path("ctl.sock"));
	snprintf(r->ctl, sizeof(r->ctl), "--control-socket=%s", r->ctlpath);
	cr_assert(mkdir(r->sync, 0755) == 0);
	ct_make_rootfs(r->rootfs, ct_static_sem());
	dh_daemon_start(&r->d, "d", daemon_args);

	profile = ct_profile(&r->d, metadata);
	ct_init(&r->a, "a");
	snprintf(args, sizeof(args), "[\"/bin/ct-sem\", \"pingpong\", \"%s\", \"%d\", \"/sync\"]",
		 KEY, ROUNDS);
	ct_write_oci_config(r->a.bundle, &(struct ct_oci){ .rootfs = r->rootfs,
							   .args_json = args,
							   .seccomp = profile,
							   .annotations = ann,
							   .sync = r->sync });
	free(profile);
	ct_start(&r->a);
	runc_wait_ready(&r->a, r->ready, r->rootfs, &r->d);
}

/* Releases A, checks what it saw of its set, and stops the daemon; returns the daemon's log. */
static char *pod_finish(struct pod_run *r)
{
	char *out;
	int rc;

	dh_write_file(dh_path("sync/release"), "go\n");
	rc = ct_wait(&r->a, 30000);
	dh_daemon_alive(&r->d);
	out = dh_slurp(r->a.out);
	cr_assert_eq(rc, 0, "container A: exit %d:\n%s\ndaemon log:\n%s", rc, out,
		     dh_slurp(r->d.log));
	ct_check_pingpong(out);
	free(out);
	cr_assert_eq(dh_daemon_stop(&r->d), 0, "semvisord did not exit 0 on SIGTERM:\n%s",
		     dh_slurp(r->d.log));
	return dh_slurp(r->d.log);
}

/*
 * Kubernetes' way (examples/kubernetes/): the shipped profile, its listenerPath pointed at the
 * test's daemon, with listenerMetadata in lines as seccompagent writes it, and the annotations
 * containerd's CRI plugin puts in the config (runc hands them on in the state it sends). The
 * container is served (ct-sem's checks: every call reached the daemon), from the namespace its
 * metadata names, and `semvisorctl clients` shows it by its Kubernetes names.
 */
Test(daemon_runc, kubernetes_example_profile)
{
	const char *ann = "\"io.kubernetes.cri.container-type\": \"container\", "
			  "\"io.kubernetes.cri.sandbox-namespace\": \"default\", "
			  "\"io.kubernetes.cri.sandbox-name\": \"db-0\", "
			  "\"io.kubernetes.cri.container-name\": \"postgres\", "
			  "\"io.kubernetes.pod.name\": \"evil\\nline\"";
	struct pod_run r;
	char want[256], *out, *log;

	pod_start(&r, "MKDIR_TMPL=/tmp/{{.Namespace}}\nns=semvisor-k8s-test\nMIDDLEWARE=a, b", ann);
	/* while it is served: listed by its names, not its id */
	out = ctl_out(r.ctlpath, "clients", NULL);
	cr_assert(strstr(out, "default/db-0/postgres "), "not listed by its names:\n%s", out);
	cr_assert(strstr(out, "semvisor-k8s-test"), "not in its namespace:\n%s", out);
	cr_assert(!strstr(out, r.a.id), "listed by its id:\n%s", out);
	free(out);

	log = pod_finish(&r);
	/* the id is kept where people look a container up: the log */
	snprintf(want, sizeof(want), "agent: serving default/db-0/postgres (container %s, pid ",
		 r.a.id);
	cr_assert(strstr(log, want), "the daemon did not log '%s':\n%s", want, log);
	cr_assert(strstr(log, " in namespace semvisor-k8s-test"), "%s", log);
	/* the hostile older annotation: ignored, named in the log, its value never shown */
	cr_assert(strstr(log, "io.kubernetes.pod.name ignored"), "%s", log);
	cr_assert(!strstr(log, "evil"), "%s", log);
	cr_assert(!strstr(log, "listenerMetadata:"), "other agents' lines were reported:\n%s", log);
	free(log);
}

/*
 * A pod's container served in its own IPC namespace (no ns= metadata): that namespace is known
 * by the pod's names too. `ipcs` shows the container's set as default/db-0's and `--ns
 * default/db-0` selects it; the metrics carry Kubernetes' labels (namespace, pod, container)
 * beside ipc_namespace; `clients` names the IPC namespace the container is served in.
 */
Test(daemon_runc, kubernetes_pod_names)
{
	const char *ann = "\"io.kubernetes.cri.sandbox-namespace\": \"default\", "
			  "\"io.kubernetes.cri.sandbox-name\": \"db-0\", "
			  "\"io.kubernetes.cri.container-name\": \"postgres\"";
	char ipcns[64], want[512], *out;
	struct pod_run r;
	const char *p;
	int rc;

	pod_start(&r, NULL, ann);
	/* the container's IPC namespace, as the kernel names it: the daemon must say the same */
	snprintf(want, sizeof(want), "/proc/%d/ns/ipc", (int)ct_init_pid(&r.a));
	rc = (int)readlink(want, ipcns, sizeof(ipcns) - 1);
	cr_assert(rc > 0, "%s: %s", want, strerror(errno));
	ipcns[rc] = '\0';

	out = ctl_out(r.ctlpath, "clients", NULL);
	p = strstr(out, "default/db-0/postgres ");
	cr_assert(p, "not listed by its names:\n%s", out);
	cr_assert(strstr(p, ipcns), "its IPC namespace %s not named:\n%s", ipcns, out);
	free(out);

	out = ctl_out(r.ctlpath, "ipcs", NULL);
	p = strstr(out, "\ndefault/db-0 ");
	cr_assert(p, "its set is not shown as the pod's:\n%s", out);
	cr_assert(strstr(p, KEY), "the pod's set is not %s:\n%s", KEY, out);
	free(out);
	out = ctl_out(r.ctlpath, "ipcs", "default/db-0");
	cr_assert(strstr(out, KEY), "--ns default/db-0 does not select it:\n%s", out);
	free(out);
	out = ctl_out(r.ctlpath, "ipcs", ipcns);
	cr_assert(strstr(out, KEY), "--ns %s does not select it:\n%s", ipcns, out);
	free(out);

	out = ctl_out(r.ctlpath, "metrics", NULL);
	snprintf(want, sizeof(want),
		 "semvisor_client_calls_total{client=\"default/db-0/postgres\","
		 "ipc_namespace=\"%s\",namespace=\"default\",pod=\"db-0\",container=\"postgres\"} ",
		 ipcns);
	cr_assert(strstr(out, want), "no '%s' in:\n%s", want, out);
	snprintf(want, sizeof(want),
		 "semvisor_namespace_sets{ipc_namespace=\"%s\",namespace=\"default\","
		 "pod=\"db-0\"} 1\n",
		 ipcns);
	cr_assert(strstr(out, want), "no '%s' in:\n%s", want, out);
	free(out);

	free(pod_finish(&r));
}

/*
 * semvisor-run inside a container that semvisord serves: the container's filter has the
 * listener, so the inner supervisor cannot get one (EBUSY), says so and falls back to ptrace
 * (--backend=auto). The outer filter's USER_NOTIF takes precedence over the inner TRACE, so the
 * daemon serves the calls, and the program prints what it prints natively.
 */
Test(daemon_runc, nested_semvisor_run)
{
	const char *prog = dh_bin("tests/prog/semctl");
	const char *native_argv[] = { prog, NULL };
	char rootfs[PATH_MAX], host[PATH_MAX], path[PATH_MAX + 16];
	char *native, *out, *log, *seccomp;
	struct dh_daemon d;
	struct ct c;
	int rc, st;

	require_runc();
	dh_setup();
	cr_assert(realpath(dh_o(), host), "%s: %s", dh_o(), strerror(errno));
	snprintf(runc_state, sizeof(runc_state), "%s", dh_path("runc-state"));
	snprintf(rootfs, sizeof(rootfs), "%s", dh_path("rootfs"));
	ct_make_rootfs(rootfs, ct_static_sem());
	/* the host's build and libraries: semvisor-run and the program are linked dynamically */
	snprintf(path, sizeof(path), "%s/host", rootfs);
	cr_assert(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/usr", rootfs);
	cr_assert(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/lib", rootfs);
	cr_assert(symlink("usr/lib", path) == 0);
	snprintf(path, sizeof(path), "%s/lib64", rootfs);
	cr_assert(symlink("usr/lib64", path) == 0);

	cr_assert(dh_wait(dh_spawn(native_argv, dh_path("native.out")), 30000, &st) &&
		      WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "%s natively: %s", prog, dh_slurp(dh_path("native.out")));
	native = dh_slurp(dh_path("native.out"));

	dh_daemon_start(&d, "d", NULL);
	ct_init(&c, "nested");
	seccomp = ct_seccomp_json(d.sock, NULL);
	ct_write_oci_config(
	    c.bundle,
	    &(struct ct_oci){ .rootfs = rootfs,
			      .args_json =
				  "[\"/host/semvisor-run\", \"--\", \"/host/tests/prog/semctl\"]",
			      .seccomp = seccomp,
			      .host_bin = host });
	free(seccomp);
	ct_start(&c);
	rc = ct_wait(&c, 60000);
	dh_daemon_alive(&d);
	out = dh_slurp(c.out);
	if (rc != 0)
		ct_failed(rootfs, &c, rc, &d);
	cr_assert(strstr(out, "EBUSY") && strstr(out, "ptrace"),
		  "the inner semvisor-run did not say it falls back:\n%s", out);
	cr_assert(strstr(out, native), "inside the container:\n%s\nnatively:\n%s", out, native);
	cr_assert_eq(dh_daemon_stop(&d), 0, "%s", dh_slurp(d.log));
	log = dh_slurp(d.log);
	cr_assert(strstr(log, "agent: serving "), "the daemon did not serve it:\n%s", log);
	free(native);
	free(out);
	free(log);
}
