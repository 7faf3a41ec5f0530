/* SPDX-License-Identifier: MIT */
/*
 * The other container runtimes, as tests/60-daemon-runc.c does runc: podman, containerd (`ctr
 * run`) and crun each hand a container's seccomp listener to semvisord through the shipped
 * profile (examples/kubernetes/seccomp-profile.json, its listenerPath the test's daemon's agent
 * socket), and semvisord serves it. One scenario, three containers per runtime:
 *  - A ping-pongs through a keyed set (two processes of one container share it; the kernel holds
 *    no set), marks it and stays alive until the test releases it (files in /sync, a directory
 *    bind-mounted from the host);
 *  - B joins A's IPC namespace, each runtime in its own way (podman --ipc container:A, ctr
 *    --with-ns ipc:/proc/PID/ns/ipc, crun a namespace path in config.json), and sees A's set;
 *  - C has an IPC namespace of its own and does not see the key (ENOENT), its own set with the
 *    same key being another;
 *  - the daemon logged serving each of the three, by the name the runtime gave it.
 * The rootfs, profile and checks are tests/60-daemon-ct.h's.
 *
 * Every runtime keeps its state under the test's directory, so that a failed test can remove
 * whatever it left without touching anyone else's containers:
 *  - podman: --root/--runroot/--tmpdir there, the vfs storage driver (a --rootfs container needs
 *    no layers), cgroupfs, events to a file, runc as the OCI runtime;
 *  - containerd: a daemon of the test's own (root, state, socket, opt directory there; no CRI
 *    plugin) and runc's state there too (--runc-root);
 *  - crun: its --root there.
 * A runtime that is not installed, or that cannot run even a plain container (no profile, nothing
 * of ours) on this machine, skips its test and quotes the runtime's own error.
 */
#include "tests/60-daemon-ct.h"

TestSuite(daemon_runtimes, .timeout = 120, .fini = dh_cleanup);

#define MARK "1234" /* what ct-sem pingpong sets sem0 to before it waits */

struct rt_ct {
	char id[64];	    /* the runtime's name for it */
	char dir[PATH_MAX]; /* its own directory: output, bundle, cidfile */
	char out[PATH_MAX + 8];
	pid_t pid; /* the runtime's process that runs it (podman run, ctr run, crun run) */
};

struct rt {
	struct dh_daemon d;
	char rootfs[PATH_MAX], sync[PATH_MAX], ready[PATH_MAX + 16];
	char profile[PATH_MAX]; /* the shipped profile, pointed at d */
	char *profile_json;
	char state[PATH_MAX];	     /* the runtime's own state directory */
	char address[PATH_MAX + 32]; /* containerd's socket */
	pid_t containerd;
};

/* What differs between runtimes; the scenario is three_containers(). */
struct rt_ops {
	const char *name;
	const char *binary; /* must run with --version */
	const char *package;
	void (*setup)(struct rt *r);
	/* Start c running args; with the profile if seccomp, /sync if sync, in join's IPC ns. */
	void (*start)(struct rt *r, struct rt_ct *c, const char *const *args, bool seccomp,
		      bool sync, const struct rt_ct *join);
	/* The name the daemon logs c by ("agent: serving NAME (pid ..."). */
	void (*served_as)(const struct rt_ct *c, char *buf, size_t len);
	void (*teardown)(struct rt *r);
};

static void rt_ct_init(struct rt_ct *c, const char *name)
{
	snprintf(c->id, sizeof(c->id), "semvisor-test-%d-%s", (int)getpid(), name);
	snprintf(c->dir, sizeof(c->dir), "%s", dh_path(name));
	snprintf(c->out, sizeof(c->out), "%s/out", c->dir);
	cr_assert(mkdir(c->dir, 0755) == 0, "mkdir %s: %s", c->dir, strerror(errno));
	c->pid = 0;
}

/* Wait for the runtime's process (it ends with the container): exit status, -1 timed out. */
static int rt_wait(struct rt_ct *c, int timeout_ms)
{
	int st;

	if (!dh_wait(c->pid, timeout_ms, &st))
		return -1;
	c->pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void served_by_id(const struct rt_ct *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s", c->id);
}

/* ---- podman ---- */

/*
 * podman's global options: everything of its own under the test's directory. runc, not the
 * default crun, so that this test is podman's and crun has a test of its own.
 */
static int podman_argv(const struct rt *r, const char **argv)
{
	static char root[PATH_MAX + 8], runroot[PATH_MAX + 8], tmp[PATH_MAX + 8];
	int n = 0;

	snprintf(root, sizeof(root), "%s/root", r->state);
	snprintf(runroot, sizeof(runroot), "%s/run", r->state);
	snprintf(tmp, sizeof(tmp), "%s/tmp", r->state);
	argv[n++] = "podman";
	argv[n++] = "--root";
	argv[n++] = root;
	argv[n++] = "--runroot";
	argv[n++] = runroot;
	argv[n++] = "--tmpdir";
	argv[n++] = tmp;
	argv[n++] = "--storage-driver=vfs";
	argv[n++] = "--cgroup-manager=cgroupfs";
	argv[n++] = "--events-backend=file";
	argv[n++] = "--runtime=runc";
	return n;
}

static void podman_setup(struct rt *r)
{
	const char *argv[16];
	char cmd[4 * PATH_MAX];
	int n = podman_argv(r, argv);

	cmd[0] = '\0';
	for (int i = 0; i < n; i++)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s ", argv[i]);
	/*
	 * podman run --rm removes nothing when it is killed (conmon keeps the container); rm -f
	 * does, and unmounts each container's /dev/shm from the runroot. A container's end also
	 * starts conmon's exit command (podman container cleanup, on this state), which would
	 * make the directory again after it is removed: wait (10 s at most) until no process but
	 * this shell names the state, then unmount whatever is still there.
	 */
	dh_on_cleanup("%s rm -f -t 0 --all >/dev/null 2>&1; "
		      "for i in $(seq 100); do busy=; for p in /proc/[0-9]*; do "
		      "[ \"${p#/proc/}\" = $$ ] && continue; "
		      "grep -qsa '%s' $p/cmdline && busy=1 && break; done; "
		      "[ -z \"$busy\" ] && break; sleep 0.1; done; "
		      "grep -o ' %s/[^ ]*' /proc/self/mounts | sort -r | xargs -r umount -l",
		      cmd, r->state, r->state);
}

static void podman_start(struct rt *r, struct rt_ct *c, const char *const *args, bool seccomp,
			 bool sync, const struct rt_ct *join)
{
	static char sec[PATH_MAX + 32], vol[PATH_MAX + 16], ipc[96], cid[PATH_MAX + 8];
	const char *argv[64];
	int n = podman_argv(r, argv);

	argv[n++] = "run";
	argv[n++] = "--rm";
	argv[n++] = "--name";
	argv[n++] = c->id;
	snprintf(cid, sizeof(cid), "%s/cid", c->dir);
	argv[n++] = "--cidfile";
	argv[n++] = cid;
	argv[n++] = "--network=none";
	/*
	 * podman asks for 1048576 open files and processes, above this process's hard limits;
	 * raising one needs CAP_SYS_RESOURCE, which root in a container (a CI runner) often lacks.
	 */
	argv[n++] = "--ulimit=nofile=1024:1024";
	argv[n++] = "--ulimit=nproc=1024:1024";
	if (seccomp) {
		snprintf(sec, sizeof(sec), "seccomp=%s", r->profile);
		argv[n++] = "--security-opt";
		argv[n++] = sec;
	}
	if (sync) {
		snprintf(vol, sizeof(vol), "%s:/sync", r->sync);
		argv[n++] = "-v";
		argv[n++] = vol;
	}
	if (join) {
		snprintf(ipc, sizeof(ipc), "container:%s", join->id);
		argv[n++] = "--ipc";
		argv[n++] = ipc;
	}
	argv[n++] = "--rootfs";
	argv[n++] = r->rootfs;
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	c->pid = dh_spawn(argv, c->out);
}

/* podman hands runc its 64-digit container id, not the name: the daemon logs that. */
static void podman_served_as(const struct rt_ct *c, char *buf, size_t len)
{
	char path[PATH_MAX + 8], *id;

	snprintf(path, sizeof(path), "%s/cid", c->dir);
	id = dh_slurp(path);
	cr_assert_eq(strlen(id), 64, "%s: no container id in %s: '%s'", c->id, path, id);
	snprintf(buf, len, "%s", id);
	free(id);
}

static const struct rt_ops podman_ops = {
	.name = "podman",
	.binary = "podman",
	.package = "podman",
	.setup = podman_setup,
	.start = podman_start,
	.served_as = podman_served_as,
};

/* ---- containerd (ctr) ---- */

static const char *ctr_ns(void)
{
	static char ns[64];

	snprintf(ns, sizeof(ns), "semvisor-test-%d", (int)getpid());
	return ns;
}

static void containerd_setup(struct rt *r)
{
	char conf[PATH_MAX + 16], log[PATH_MAX + 16];
	const char *argv[] = { "containerd", "--config", conf, NULL };
	const char *version[] = { "ctr", "--address", r->address, "version", NULL };
	int64_t end = dh_now_ms() + 15000;
	char *out = NULL;

	snprintf(conf, sizeof(conf), "%s/config.toml", r->state);
	snprintf(log, sizeof(log), "%s/containerd.log", r->state);
	snprintf(r->address, sizeof(r->address), "%s/containerd.sock", r->state);
	cr_assert(mkdir(r->state, 0700) == 0, "mkdir %s: %s", r->state, strerror(errno));
	/* the CRI plugin is the kubelet's, not ctr's; opt would default to /opt/containerd */
	dh_write_file(conf,
		      "version = 2\n"
		      "root = \"%s/root\"\n"
		      "state = \"%s/state\"\n"
		      "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
		      "[grpc]\n"
		      "  address = \"%s\"\n"
		      "[plugins.\"io.containerd.internal.v1.opt\"]\n"
		      "  path = \"%s/opt\"\n",
		      r->state, r->state, r->address, r->state);
	r->containerd = dh_spawn(argv, log);
	/*
	 * Not among the children dh_cleanup() kills first: the tasks must be removed through it
	 * (a task's shim outlives containerd), so the cleanup command stops it last, if it is
	 * still this containerd (the test may have stopped it and the pid been reused).
	 */
	dh_untrack(r->containerd);
	dh_on_cleanup("grep -qa %s /proc/%d/cmdline 2>/dev/null || exit 0; "
		      "ctr='ctr --address %s -n %s'; "
		      "for t in $($ctr task ls -q); do $ctr task rm -f $t; done; "
		      "for c in $($ctr c ls -q); do $ctr c rm $c; done; kill -9 %d",
		      conf, (int)r->containerd, r->address, ctr_ns(), (int)r->containerd);
	for (;;) {
		int st;

		free(out);
		if (dh_run(version, 10000, &out) == 0)
			break;
		if (waitpid(r->containerd, &st, WNOHANG) == r->containerd) {
			char *text = dh_slurp(log);

			r->containerd = 0;
			cr_skip_test("containerd cannot start here (%s): %s", dh_status_text(st),
				     dh_tail(text, 5));
		}
		cr_assert(dh_now_ms() < end, "containerd not answering in 15 s: %s\n%s", out,
			  dh_slurp(log));
		dh_sleep_ms(50);
	}
	free(out);
}

/* The pid of task id (its init, in the host's pid namespace), from `ctr task ls`. */
static pid_t ctr_task_pid(const struct rt *r, const char *id)
{
	const char *argv[] = { "ctr", "--address", r->address, "-n", ctr_ns(), "task", "ls", NULL };
	char *out, *line;
	int pid = 0;

	cr_assert_eq(dh_run(argv, 10000, &out), 0, "ctr task ls:\n%s", out);
	for (line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		size_t len = strlen(id);

		if (!strncmp(line, id, len) && (line[len] == ' ' || line[len] == '\t'))
			pid = atoi(line + len);
	}
	cr_assert(pid > 0, "task %s not in:\n%s", id, out);
	free(out);
	return (pid_t)pid;
}

static void ctr_start(struct rt *r, struct rt_ct *c, const char *const *args, bool seccomp,
		      bool sync, const struct rt_ct *join)
{
	static char runc_root[PATH_MAX + 8], mnt[PATH_MAX + 64], ns[64];
	const char *argv[64];
	int n = 0;

	snprintf(runc_root, sizeof(runc_root), "%s/runc", r->state);
	argv[n++] = "ctr";
	argv[n++] = "--address";
	argv[n++] = r->address;
	argv[n++] = "-n";
	argv[n++] = ctr_ns();
	argv[n++] = "run";
	argv[n++] = "--rm";
	argv[n++] = "--runc-root";
	argv[n++] = runc_root;
	if (seccomp) {
		/* ctr takes a profile only together with --seccomp (its default profile) */
		argv[n++] = "--seccomp";
		argv[n++] = "--seccomp-profile";
		argv[n++] = r->profile;
	}
	if (sync) {
		snprintf(mnt, sizeof(mnt), "type=bind,src=%s,dst=/sync,options=rbind:rw", r->sync);
		argv[n++] = "--mount";
		argv[n++] = mnt;
	}
	if (join) {
		snprintf(ns, sizeof(ns), "ipc:/proc/%d/ns/ipc", (int)ctr_task_pid(r, join->id));
		argv[n++] = "--with-ns";
		argv[n++] = ns;
	}
	argv[n++] = "--rootfs";
	argv[n++] = r->rootfs;
	argv[n++] = c->id;
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	c->pid = dh_spawn(argv, c->out);
}

static void containerd_teardown(struct rt *r)
{
	int st;

	if (r->containerd <= 0)
		return;
	kill(r->containerd, SIGTERM);
	cr_assert(dh_wait(r->containerd, 10000, &st), "containerd did not stop on SIGTERM");
	r->containerd = 0;
}

static const struct rt_ops ctr_ops = {
	.name = "ctr",
	.binary = "ctr",
	.package = "containerd",
	.setup = containerd_setup,
	.start = ctr_start,
	.served_as = served_by_id,
	.teardown = containerd_teardown,
};

/* ---- crun ---- */

static void crun_setup(struct rt *r)
{
	cr_assert(mkdir(r->state, 0700) == 0, "mkdir %s: %s", r->state, strerror(errno));
}

/* The pid of container id's init, as `crun state` gives it. */
static pid_t crun_pid(const struct rt *r, const char *id)
{
	const char *argv[] = { "crun", "--root", r->state, "state", id, NULL };
	json_error_t je;
	json_t *st;
	char *out;
	pid_t pid;

	cr_assert_eq(dh_run(argv, 10000, &out), 0, "crun state %s:\n%s", id, out);
	st = json_loads(out, 0, &je);
	cr_assert(st && json_is_integer(json_object_get(st, "pid")), "crun state %s: %s", id, out);
	pid = (pid_t)json_integer_value(json_object_get(st, "pid"));
	json_decref(st);
	free(out);
	return pid;
}

/*
 * crun refuses a cgroup v1/v2 hybrid whose v2 hierarchy has a controller ("cgroups in hybrid
 * mode not supported, drop all controllers from cgroupv2"), which is what a systemd-less Debian
 * host or CI container may mount. So crun runs in a mount namespace of its own where
 * /sys/fs/cgroup is the cgroup2 hierarchy, and with no cgroup manager: on cgroup2 it would load
 * a BPF device filter, which needs a larger RLIMIT_MEMLOCK than root without CAP_SYS_RESOURCE
 * may set. Neither touches how the seccomp listener reaches the daemon.
 */
static void crun_start(struct rt *r, struct rt_ct *c, const char *const *args, bool seccomp,
		       bool sync, const struct rt_ct *join)
{
	char args_json[1024] = "[", ipc[64];
	const char *argv[] = {
		"unshare",
		"-m",
		"sh",
		"-c",
		"mount --make-rprivate / && mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec \"$0\" "
		"\"$@\"",
		"crun",
		"--cgroup-manager=disabled",
		"--root",
		r->state,
		"run",
		"--bundle",
		c->dir,
		c->id,
		NULL,
	};

	for (int i = 0; args[i]; i++)
		snprintf(args_json + strlen(args_json), sizeof(args_json) - strlen(args_json),
			 "%s\"%s\"", i ? ", " : "", args[i]);
	strcat(args_json, "]");
	if (join)
		snprintf(ipc, sizeof(ipc), "/proc/%d/ns/ipc", (int)crun_pid(r, join->id));
	ct_write_oci_config(c->dir, &(struct ct_oci){ .rootfs = r->rootfs,
						      .args_json = args_json,
						      .seccomp = seccomp ? r->profile_json : NULL,
						      .sync = sync ? r->sync : NULL,
						      .ipc_ns = join ? ipc : NULL });
	/* crun run removes nothing on a kill; delete -f stops and removes whatever is left */
	dh_on_cleanup("crun --root %s delete -f %s >/dev/null 2>&1", r->state, c->id);
	c->pid = dh_spawn(argv, c->out);
}

static const struct rt_ops crun_ops = {
	.name = "crun",
	.binary = "crun",
	.package = "crun",
	.setup = crun_setup,
	.start = crun_start,
	.served_as = served_by_id,
};

/* ---- the scenario ---- */

/*
 * A container of ours failed: can the runtime run any container here? If a plain one (no
 * seccomp profile, nothing of ours) fails too, the machine is the problem: skip, quoting it.
 */
static void rt_failed(const struct rt_ops *ops, struct rt *r, struct rt_ct *failed, const char *how)
{
	const char *args[] = { "/bin/sh", "-c", "echo plain container ok", NULL };
	struct rt_ct probe;
	char *out;
	int prc;

	dh_daemon_alive(&r->d);
	rt_ct_init(&probe, "plain");
	ops->start(r, &probe, args, false, false, NULL);
	prc = rt_wait(&probe, 30000);
	out = dh_slurp(probe.out);
	if (prc != 0 || !strstr(out, "plain container ok")) {
		char reason[2048];

		snprintf(reason, sizeof(reason), "%s", dh_tail(out, 10));
		dh_cleanup();
		cr_skip_test("%s cannot run even a plain busybox container here (exit %d): %s",
			     ops->name, prc, reason);
	}
	cr_assert_fail("%s: container %s: %s, though a plain container runs fine; its "
		       "output:\n%s\ndaemon log:\n%s",
		       ops->name, failed->id, how, dh_slurp(failed->out), dh_slurp(r->d.log));
}

/* Run c to its end (30 s at most): its output; a failure goes to rt_failed(). */
static char *rt_run(const struct rt_ops *ops, struct rt *r, struct rt_ct *c,
		    const char *const *args, const struct rt_ct *join)
{
	int rc;

	ops->start(r, c, args, true, false, join);
	rc = rt_wait(c, 30000);
	dh_daemon_alive(&r->d);
	if (rc != 0) {
		char *out = dh_slurp(c->out);

		/* ct-sem said why: ours to fix, not the machine's */
		cr_assert(!strstr(out, "FAIL"), "%s: container %s: exit %d:\n%s\ndaemon log:\n%s",
			  ops->name, c->id, rc, out, dh_slurp(r->d.log));
		free(out);
		rt_failed(ops, r, c, rc < 0 ? "timed out" : "failed");
	}
	return dh_slurp(c->out);
}

static void three_containers(const struct rt_ops *ops)
{
	const char *a_args[] = { "/bin/ct-sem", "pingpong", CT_KEY, NULL, "/sync", NULL };
	const char *b_args[] = { "/bin/ct-sem", "probe", CT_KEY, MARK, NULL };
	const char *c_args[] = { "/bin/ct-sem", "probe", CT_KEY, "absent", NULL };
	struct rt_ct a, b, c;
	char rounds[16], cmd[128], *out, *log;
	struct rt r = { 0 };
	int st, rc;

	if (geteuid() != 0)
		cr_skip_test("%s needs root here (euid %d)", ops->name, (int)geteuid());
	snprintf(cmd, sizeof(cmd), "%s --version >/dev/null 2>&1", ops->binary);
	if (system(cmd) != 0)
		cr_skip_test("%s is not installed (Debian package %s)", ops->binary, ops->package);
	ct_require_busybox();

	dh_setup();
	snprintf(r.rootfs, sizeof(r.rootfs), "%s", dh_path("rootfs"));
	snprintf(r.sync, sizeof(r.sync), "%s", dh_path("sync"));
	snprintf(r.ready, sizeof(r.ready), "%s/ready", r.sync);
	snprintf(r.profile, sizeof(r.profile), "%s", dh_path("profile.json"));
	snprintf(r.state, sizeof(r.state), "%s", dh_path(ops->name));
	cr_assert(mkdir(r.sync, 0755) == 0);
	ct_make_rootfs(r.rootfs, ct_static_sem());
	dh_daemon_start(&r.d, "d", NULL);
	r.profile_json = ct_profile(&r.d, NULL);
	dh_write_file(r.profile, "%s\n", r.profile_json);
	ops->setup(&r);

	rt_ct_init(&a, "a");
	rt_ct_init(&b, "b");
	rt_ct_init(&c, "c");
	snprintf(rounds, sizeof(rounds), "%d", CT_ROUNDS);
	a_args[3] = rounds;

	/* A: its ping-pong, then it holds the marked set until released */
	ops->start(&r, &a, a_args, true, true, NULL);
	if (!ct_wait_ready(a.pid, r.ready, 30000, &st)) {
		cr_assert(st != -1, "%s: container A not ready in 30 s:\n%s", ops->name,
			  dh_slurp(a.out));
		a.pid = 0;
		rt_failed(ops, &r, &a, dh_status_text(st));
	}
	/* B in A's IPC namespace: A's set, with A's mark */
	out = rt_run(ops, &r, &b, b_args, &a);
	ct_check_probe_shared("B", out);
	free(out);
	/* C in an IPC namespace of its own: not the key of A's */
	out = rt_run(ops, &r, &c, c_args, NULL);
	ct_check_probe_absent("C", out);
	free(out);

	dh_write_file(dh_path("sync/release"), "go\n");
	rc = rt_wait(&a, 30000);
	dh_daemon_alive(&r.d);
	out = dh_slurp(a.out);
	cr_assert_eq(rc, 0, "%s: container A: exit %d:\n%s\ndaemon log:\n%s", ops->name, rc, out,
		     dh_slurp(r.d.log));
	ct_check_pingpong(out);
	free(out);

	if (ops->teardown)
		ops->teardown(&r);
	cr_assert_eq(dh_daemon_stop(&r.d), 0, "semvisord did not exit 0 on SIGTERM:\n%s",
		     dh_slurp(r.d.log));
	log = dh_slurp(r.d.log);
	/* each container was the daemon's client, under the name its runtime gave it */
	for (const struct rt_ct *ct = &a; ct; ct = ct == &a ? &b : ct == &b ? &c : NULL) {
		char name[128], want[192];

		ops->served_as(ct, name, sizeof(name));
		snprintf(want, sizeof(want), "agent: serving %s (pid ", name);
		cr_assert(strstr(log, want), "%s: the daemon did not log '%s':\n%s", ops->name,
			  want, log);
	}
	cr_assert_eq(dh_count(log, "agent: serving "), 3,
		     "%s: three containers, three clients:\n%s", ops->name, log);
	free(log);
	free(r.profile_json);
}

Test(daemon_runtimes, podman)
{
	three_containers(&podman_ops);
}

Test(daemon_runtimes, containerd_ctr)
{
	three_containers(&ctr_ops);
}

Test(daemon_runtimes, crun)
{
	three_containers(&crun_ops);
}
