/* SPDX-License-Identifier: MIT */
/*
 * Real containers: runc (the Debian package) hands each container's seccomp listener to
 * semvisord through linux.seccomp.listenerPath (SPEC B7), exactly as it would to any OCI seccomp
 * agent; semvisord serves the container's semaphore calls.
 *
 * The rootfs is built here from busybox-static plus tests/prog/ct-sem linked statically (see
 * there for what it checks). Each container gets its own IPC namespace (runc's default), so:
 *  - two processes of one container share a keyed set (ct-sem's ping-pong, which also checks
 *    that the kernel holds no set: every call went to the daemon);
 *  - a second container cannot see that key while the first container and its set are alive,
 *    and its own set with the same key is a different one;
 *  - with listenerMetadata "ns=NAME" (honoured from root) two containers share one namespace on
 *    purpose, and the second does see the first one's set.
 * The first container must stay alive while the second probes: it waits for a file to appear
 * in a directory bind-mounted from the host (/sync), after announcing itself with another.
 *
 * runc runs with a state directory of the test's own (--root), so that the containers can be
 * deleted (runc delete -f) even when an assertion fails, without touching anyone else's.
 * If runc itself cannot run a container here (no root, no runc, no busybox, or a plain container
 * without our seccomp profile also fails), the test is skipped and says exactly why.
 */
#include <jansson.h>

#include "tests/60-daemon-harness.h"
#include "tests/60-daemon-rootfs.h"

TestSuite(daemon_runc, .timeout = 120, .fini = dh_cleanup);

#define KEY    "0x5e3a00c7"
#define ROUNDS 300

struct ct {
	char id[64];
	char bundle[256]; /* in the test's directory */
	char out[272];
	pid_t runc; /* `runc run` while it runs */
};

static char runc_state[PATH_MAX];

static void write_config_ex(const struct ct *c, const char *rootfs, const char *args_json,
			    const char *seccomp_json, const char *annotations_json,
			    const char *sync);

/*
 * config.json: `runc spec`'s default (1.1.5) with process.args, an absolute root, no terminal,
 * /sync bind-mounted (if sync), and the seccomp profile of the brief: allow everything, send
 * the four semaphore calls to the agent at listenerPath.
 */

static void write_config(const struct ct *c, const char *rootfs, const char *args_json,
			 const char *agent, const char *metadata, const char *sync)
{
	char meta[256] = "", seccomp[PATH_MAX + 1024] = "";

	if (metadata)
		snprintf(meta, sizeof(meta), "\t\t\t\"listenerMetadata\": \"%s\",\n", metadata);
	if (agent)
		snprintf(seccomp, sizeof(seccomp),
			 "{\n"
			 "\t\t\t\"defaultAction\": \"SCMP_ACT_ALLOW\",\n"
			 "\t\t\t\"listenerPath\": \"%s\",\n"
			 "%s"
			 "\t\t\t\"architectures\": [\"SCMP_ARCH_X86_64\", \"SCMP_ARCH_X86\", "
			 "\"SCMP_ARCH_X32\"],\n"
			 "\t\t\t\"syscalls\": [{\"names\": [\"semget\", \"semop\", \"semtimedop\", "
			 "\"semctl\"], \"action\": \"SCMP_ACT_NOTIFY\"}]\n"
			 "\t\t}",
			 agent, meta);
	write_config_ex(c, rootfs, args_json, agent ? seccomp : NULL, NULL, sync);
}

/*
 * The same, with the seccomp object given whole (seccomp_json: NULL for no profile) and top-level annotations (annotations_json: the members of the object, or NULL),
 * which runc hands on in the state it sends the agent.
 */
static void write_config_ex(const struct ct *c, const char *rootfs, const char *args_json,
			    const char *seccomp_json, const char *annotations_json,
			    const char *sync)
{
	char path[300], sync_mount[PATH_MAX + 256] = "", ann[4096] = "";
	char *seccomp = NULL;

	if (seccomp_json)
		cr_assert(asprintf(&seccomp, ",\n\t\t\"seccomp\": %s", seccomp_json) > 0);
	if (annotations_json)
		snprintf(ann, sizeof(ann), "\t\"annotations\": {%s},\n", annotations_json);
	if (sync)
		snprintf(
		    sync_mount, sizeof(sync_mount),
		    ",\n\t\t{\"destination\": \"/sync\", \"type\": \"bind\", \"source\": \"%s\", "
		    "\"options\": [\"rbind\", \"rw\"]}",
		    sync);
	snprintf(path, sizeof(path), "%s/config.json", c->bundle);
	dh_write_file(
	    path,
	    "{\n"
	    "%s"
	    "\t\"ociVersion\": \"1.0.2-dev\",\n"
	    "\t\"process\": {\n"
	    "\t\t\"terminal\": false,\n"
	    "\t\t\"user\": {\"uid\": 0, \"gid\": 0},\n"
	    "\t\t\"args\": %s,\n"
	    "\t\t\"env\": "
	    "[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"],\n"
	    "\t\t\"cwd\": \"/\",\n"
	    "\t\t\"capabilities\": {\n"
	    "\t\t\t\"bounding\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
	    "\t\t\t\"effective\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
	    "\t\t\t\"permitted\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
	    "\t\t\t\"ambient\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"]\n"
	    "\t\t},\n"
	    "\t\t\"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"hard\": 1024, \"soft\": 1024}],\n"
	    "\t\t\"noNewPrivileges\": true\n"
	    "\t},\n"
	    "\t\"root\": {\"path\": \"%s\", \"readonly\": true},\n"
	    "\t\"hostname\": \"runc\",\n"
	    "\t\"mounts\": [\n"
	    "\t\t{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},\n"
	    "\t\t{\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\", "
	    "\"options\": [\"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\"]},\n"
	    "\t\t{\"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\", "
	    "\"mode=0620\", \"gid=5\"]},\n"
	    "\t\t{\"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"mode=1777\", \"size=65536k\"]},\n"
	    "\t\t{\"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"nodev\"]},\n"
	    "\t\t{\"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"ro\"]},\n"
	    "\t\t{\"destination\": \"/sys/fs/cgroup\", \"type\": \"cgroup\", \"source\": "
	    "\"cgroup\", "
	    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"relatime\", \"ro\"]}%s\n"
	    "\t],\n"
	    "\t\"linux\": {\n"
	    "\t\t\"resources\": {\"devices\": [{\"allow\": false, \"access\": \"rwm\"}]},\n"
	    "\t\t\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"network\"}, {\"type\": "
	    "\"ipc\"}, "
	    "{\"type\": \"uts\"}, {\"type\": \"mount\"}],\n"
	    "\t\t\"maskedPaths\": [\"/proc/acpi\", \"/proc/asound\", \"/proc/kcore\", "
	    "\"/proc/keys\", "
	    "\"/proc/latency_stats\", \"/proc/timer_list\", \"/proc/timer_stats\", "
	    "\"/proc/sched_debug\", \"/sys/firmware\", \"/proc/scsi\"],\n"
	    "\t\t\"readonlyPaths\": [\"/proc/bus\", \"/proc/fs\", \"/proc/irq\", \"/proc/sys\", "
	    "\"/proc/sysrq-trigger\"]%s\n"
	    "\t}\n"
	    "}\n",
	    ann, args_json, rootfs, sync_mount, seccomp ? seccomp : "");
	free(seccomp);
}

/* Environment checks that are not ours to fix: skip with the reason. */
static void require_runc(void)
{
	if (geteuid() != 0)
		cr_skip_test("runc needs root (euid %d)", (int)geteuid());
	if (system("runc --version >/dev/null 2>&1") != 0)
		cr_skip_test("runc is not installed (Debian package runc)");
	if (access(BUSYBOX, X_OK))
		cr_skip_test("%s is missing (Debian package busybox-static)", BUSYBOX);
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
static void ct_wait_ready(struct ct *c, const char *ready, const char *rootfs, struct dh_daemon *d)
{
	int64_t end = dh_now_ms() + 30000;

	while (access(ready, F_OK)) {
		int st;

		if (waitpid(c->runc, &st, WNOHANG) == c->runc) {
			dh_untrack(c->runc);
			c->runc = 0;
			ct_failed(rootfs, c, WIFEXITED(st) ? WEXITSTATUS(st) : -1, d);
		}
		cr_assert(dh_now_ms() < end, "container %s not ready in 30 s:\n%s", c->id,
			  dh_slurp(c->out));
		dh_sleep_ms(10);
	}
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
	make_rootfs(rootfs, static_ct_sem());
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
	ct_wait_ready(&a, ready, rootfs, &d);
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

/* A's output after its ping-pong: every value as expected, none of it from the kernel. */
static void check_a(const char *out)
{
	static const char *const want[] = {
		"created: yes\n",
		"ping: exited 0\n",
		"pong: exited 0\n",
		"sem0 sem1: 0 0\n",
		"lastpid is pong: yes\n",
		"kernel sets: 0\n",
		"mark: 0\n",
		"after probe: same id yes, sem0 1234\n",
		"rmid: 0\n",
	};
	char counter[64];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert(strstr(out, want[i]), "container A did not print '%.*s':\n%s",
			  (int)strlen(want[i]) - 1, want[i], out);
	snprintf(counter, sizeof(counter), "counter: %d\n", 2 * ROUNDS);
	cr_assert(strstr(out, counter), "container A: expected '%s':\n%s", counter, out);
	cr_assert(!strstr(out, "FAIL"), "container A:\n%s", out);
}

Test(daemon_runc, containers_isolated)
{
	char *a_out, *b_out, *log;

	two_containers(NULL, "absent", &a_out, &b_out, &log);
	check_a(a_out);
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
	check_a(a_out);
	cr_assert(strstr(b_out, "probe sem0: 1234\n"), "B did not see A's set:\n%s", b_out);
	cr_assert(!strstr(b_out, "FAIL"), "B:\n%s", b_out);
	cr_assert_eq(dh_count(log, " in namespace semvisor-test-shared"), 2,
		     "both containers should be served from the named namespace:\n%s", log);
	free(a_out);
	free(b_out);
	free(log);
}

/* The shipped profile (examples/kubernetes/), its listenerPath the test's daemon's. */
static char *k8s_profile(const struct dh_daemon *d, const char *metadata)
{
	const char *src = dh_src("examples/kubernetes/seccomp-profile.json");
	json_error_t je;
	char *profile;
	json_t *prof;

	cr_assert(src, "examples/kubernetes/seccomp-profile.json not found");
	prof = json_load_file(src, JSON_REJECT_DUPLICATES, &je);
	cr_assert(prof, "%s: %s", src, je.text);
	cr_assert_eq(json_object_set_new(prof, "listenerPath", json_string(d->sock)), 0);
	if (metadata)
		cr_assert_eq(json_object_set_new(prof, "listenerMetadata", json_string(metadata)),
			     0);
	profile = json_dumps(prof, JSON_INDENT(1));
	json_decref(prof);
	cr_assert(profile);
	return profile;
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
	make_rootfs(r->rootfs, static_ct_sem());
	dh_daemon_start(&r->d, "d", daemon_args);

	profile = k8s_profile(&r->d, metadata);
	ct_init(&r->a, "a");
	snprintf(args, sizeof(args), "[\"/bin/ct-sem\", \"pingpong\", \"%s\", \"%d\", \"/sync\"]",
		 KEY, ROUNDS);
	write_config_ex(&r->a, r->rootfs, args, profile, ann, r->sync);
	free(profile);
	ct_start(&r->a);
	ct_wait_ready(&r->a, r->ready, r->rootfs, &r->d);
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
	check_a(out);
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
