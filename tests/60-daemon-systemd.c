/* SPDX-License-Identifier: MIT */
/*
 * semvisord as a systemd service, and its configuration and lifecycle.
 *
 * systemd is installed here but is not PID 1, so the units are checked with
 * `systemd-analyze verify` after systemd/install.sh put them in a DESTDIR, socket activation is
 * exercised with systemd-socket-activate (which hands over a listening socket through LISTEN_FDS
 * and LISTEN_FDNAMES as systemd would), and readiness is observed the way systemd observes it:
 * a datagram socket named by NOTIFY_SOCKET, with the sender's credentials checked
 * (NotifyAccess=main).
 *
 * Then what the service relies on: SIGHUP re-reads the configuration and applies new limits,
 * SIGTERM ends with exit 0 and removes the socket the daemon made, a second daemon refuses the
 * socket of a running one, --check validates a file (naming file and line on error),
 * command-line options override the file, also across a reload, and the unit's capability
 * bounding set still lets the daemon serve another user's program.
 */
#include <ctype.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/60-daemon-harness.h"

#include <seccomp.h>

/* The daemon under test is built as this test is (make SAN=asan|tsan builds both). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/*
 * SystemCallFilter= as systemd applies it: when SV_SYSFILTER names a file of system call
 * names, this binary is only a launcher. Before Criterion starts, it lets those calls through,
 * answers every other one EPERM (the unit's SystemCallErrorNumber=), and executes the rest of
 * its command line, the daemon, under that filter.
 */
__attribute__((constructor)) static void sysfilter_exec(int argc, char **argv)
{
	const char *list = getenv("SV_SYSFILTER");
	scmp_filter_ctx ctx;
	char name[64];
	FILE *f;

	if (!list || argc < 2)
		return;
	f = fopen(list, "re");
	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!f || !ctx)
		_exit(121);
	while (fscanf(f, "%63s", name) == 1) {
		int nr = seccomp_syscall_resolve_name(name);

		/* names of other architectures or newer kernels: systemd skips them too */
		if (nr != __NR_SCMP_ERROR && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0))
			_exit(122);
	}
	fclose(f);
	unsetenv("SV_SYSFILTER");
	if (seccomp_load(ctx))
		_exit(123);
	execv(argv[1], argv + 1);
	_exit(124);
}

TestSuite(daemon_systemd, .timeout = 90, .fini = dh_cleanup);

#define KEY "0x5e3a0005"

/* `semvisord ARGS` to completion (for --check): exit status and output. */
static int daemon_cmd(char **out, const char *const *args)
{
	const char *argv[16];
	int n = 0;

	argv[n++] = dh_daemon_bin();
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return dh_run(argv, 10000, out);
}

/* ---- units ---- */

Test(daemon_systemd, units_verify)
{
	char prefix[256], dest[256], unitdir[600], sbin[300], cmd[2 * PATH_MAX], path[700], *out,
	    *text;
	const char *install = dh_src("systemd/install.sh");
	const char *units[] = { "semvisord.service",	    "semvisord.socket",
				"semvisord-control.socket", "semvisor-metrics.service",
				"semvisor-metrics.timer",   "semvisord-metrics.socket" };
	int rc;

	dh_setup_ns(false);
	cr_assert(install, "systemd/install.sh not found (run from the source tree)");
	if (system("systemd-analyze --version >/dev/null 2>&1") != 0)
		cr_skip_test("systemd-analyze is not installed (Debian package systemd)");
	/*
	 * PREFIX is a directory of the test's and DESTDIR another: the units then name
	 * PREFIX/sbin/semvisord, where the built daemon is put, so that verify, which checks that
	 * ExecStart= is executable on this machine, finds it; nothing goes to the real /etc or /usr.
	 */
	snprintf(prefix, sizeof(prefix), "%s", dh_path("prefix"));
	snprintf(dest, sizeof(dest), "%s", dh_path("dest"));
	snprintf(cmd, sizeof(cmd), "PREFIX=%s DESTDIR=%s sh %s >%s 2>&1", prefix, dest, install,
		 dh_path("install.log"));
	rc = system(cmd);
	cr_assert_eq(rc, 0, "%s failed:\n%s", cmd, dh_slurp(dh_path("install.log")));
	snprintf(sbin, sizeof(sbin), "%s/sbin", prefix);
	cr_assert(mkdir(prefix, 0755) == 0 && mkdir(sbin, 0755) == 0);
	snprintf(cmd, sizeof(cmd), "install -m 0755 %s %s/semvisord", dh_daemon_bin(), sbin);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/bin && install -m 0755 %s %s/bin/semvisorctl",
		 prefix, dh_bin("semvisorctl"), prefix);
	cr_assert_eq(system(cmd), 0, "%s", cmd);

	snprintf(unitdir, sizeof(unitdir), "%s%s/lib/systemd/system", dest, prefix);
	snprintf(path, sizeof(path), "%s/semvisord.service", unitdir);
	text = dh_slurp(path);
	cr_assert(!strstr(text, "@SBINDIR@"), "install.sh left @SBINDIR@ in the unit:\n%s", text);
	snprintf(cmd, sizeof(cmd), "\nExecStart=%s/semvisord\n", sbin);
	cr_assert(strstr(text, cmd), "the installed unit does not start %s/semvisord:\n%s", sbin,
		  text);
	cr_assert(strstr(text, "\nType=notify\n"), "not Type=notify:\n%s", text);
	free(text);
	snprintf(path, sizeof(path), "%s/semvisord.socket", unitdir);
	text = dh_slurp(path);
	cr_assert(strstr(text, "\nFileDescriptorName=agent\n"), "%s", text);
	free(text);
	snprintf(path, sizeof(path), "%s/semvisord-control.socket", unitdir);
	text = dh_slurp(path);
	cr_assert(strstr(text, "\nFileDescriptorName=control\n"), "%s", text);
	free(text);
	snprintf(path, sizeof(path), "%s/semvisord-metrics.socket", unitdir);
	text = dh_slurp(path);
	cr_assert(strstr(text, "\nFileDescriptorName=metrics\n"), "%s", text);
	free(text);

	/* verify: exit 0 and not a word about our units */
	snprintf(cmd, sizeof(cmd), "cd %s && systemd-analyze verify %s %s %s %s %s %s >%s 2>&1",
		 unitdir, units[0], units[1], units[2], units[3], units[4], units[5],
		 dh_path("verify.log"));
	rc = system(cmd);
	out = dh_slurp(dh_path("verify.log"));
	cr_assert(rc == 0 && !strstr(out, "semvisor"), "systemd-analyze verify (exit %d):\n%s",
		  WEXITSTATUS(rc), out);
	free(out);

	/* the example configuration it installs is valid for the daemon it installs */
	snprintf(path, sizeof(path), "%s/etc/semvisor/semvisord.conf", dest);
	rc = daemon_cmd(&out, (const char *const[]){ "--check", "-c", path, NULL });
	cr_assert_eq(rc, 0, "--check of the installed configuration: exit %d:\n%s", rc, out);
	free(out);
	/* and an administrator's configuration survives a reinstall */
	dh_write_file(path, "workers = 3\n");
	snprintf(cmd, sizeof(cmd), "PREFIX=%s DESTDIR=%s sh %s >%s 2>&1", prefix, dest, install,
		 dh_path("install.log"));
	cr_assert_eq(system(cmd), 0);
	text = dh_slurp(path);
	cr_assert_str_eq(text, "workers = 3\n", "install.sh overwrote the configuration");
	free(text);
}

/* ---- socket activation ---- */

Test(daemon_systemd, socket_activation)
{
	char sock[256], other[256], log[256], listen_opt[300], other_opt[300], conf_opt[300];
	char *out, *text;
	pid_t pid;
	int st = 0;
	bool stopped;

	dh_setup();
	if (system("systemd-socket-activate --version >/dev/null 2>&1") != 0)
		cr_skip_test("systemd-socket-activate is not installed (Debian package systemd)");
	snprintf(sock, sizeof(sock), "%s", dh_path("activated.sock"));
	snprintf(other, sizeof(other), "%s", dh_path("configured.sock"));
	snprintf(log, sizeof(log), "%s", dh_path("d.log"));
	snprintf(listen_opt, sizeof(listen_opt), "--listen=%s", sock);
	snprintf(other_opt, sizeof(other_opt), "--agent-socket=%s", other);
	/*
	 * systemd-socket-activate listens, and at the first connection execs the daemon in its
	 * own process with the socket as fd 3, named "agent" (what semvisord.socket's
	 * FileDescriptorName= gives). The daemon is told another socket path: it must take the
	 * one it was given and make none.
	 */
	snprintf(conf_opt, sizeof(conf_opt), "--config=%s", dh_empty_config());
	pid = dh_spawn((const char *const[]){ "systemd-socket-activate", listen_opt,
					      "--fdname=agent", "--", dh_daemon_bin(), conf_opt,
					      "--control-socket=", other_opt, NULL },
		       log);
	cr_assert(dh_wait_file(log, "Listening on", 1, 10000), "no socket:\n%s", dh_slurp(log));

	cr_assert_eq(DH_SEM(sock, &out, "post", KEY, "3"), 0, "first program:\n%s\nlog:\n%s", out,
		     dh_slurp(log));
	free(out);
	/* a second client of the same activated daemon: the set is still there */
	cr_assert_eq(DH_SEM(sock, &out, "show", KEY, "rm"), 0, "second program:\n%s\nlog:\n%s", out,
		     dh_slurp(log));
	cr_assert(strstr(out, "show: nsems 1 uid 0 vals 3\n"), "%s", out);
	free(out);

	text = dh_slurp(log);
	cr_assert(strstr(text, "semvisord: serving:"), "%s", text);
	cr_assert_eq(dh_count(text, "agent: serving semvisor-run-"), 2, "%s", text);
	free(text);
	cr_assert(access(other, F_OK) != 0, "the daemon bound %s although it was given a socket",
		  other);
	/* the activated process is the daemon now (exec'd in place): SIGTERM goes to it */
	{
		char path[64], exe[PATH_MAX] = "", want[PATH_MAX] = "";
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
		n = readlink(path, exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = '\0';
		cr_assert(realpath(dh_daemon_bin(), want));
		cr_assert_str_eq(exe, want, "pid %d runs %s, not the daemon", (int)pid, exe);
	}

	/*
	 * systemd stops it with SIGTERM. The socket belongs to whoever made it (systemd): the
	 * daemon must leave the file alone, so that the next start is activated again.
	 */
	kill(pid, SIGTERM);
	stopped = false;
	for (int64_t end = dh_now_ms() + 5000; !stopped && dh_now_ms() < end; dh_sleep_ms(10))
		stopped = waitpid(pid, &st, WNOHANG) == pid;
	if (!stopped) {
		/* where its main thread is stuck, for the report: "NR args..." (x86_64 numbers:
		   288 is accept4) and the kernel function it sleeps in */
		char path[64], *sc, *wchan;

		snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
		sc = dh_slurp(path);
		snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
		wchan = dh_slurp(path);
		text = dh_slurp(log);
		cr_assert_fail("SIGTERM did not stop the socket-activated daemon in 5 s; its main "
			       "thread is in system call %.*s (wchan %s); log:\n%s",
			       (int)strcspn(sc, " \n"), sc, wchan, text);
	}
	dh_untrack(pid);
	text = dh_slurp(log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s\n%s", dh_status_text(st), text);
	cr_assert(strstr(text, "semvisord: stopped"), "%s", text);
	cr_assert_eq(access(sock, F_OK), 0, "the daemon removed the socket systemd made");
	free(text);
}

/* ---- sd_notify ---- */

struct notif {
	char text[1024];
	pid_t pid;
};

/* Next datagram on the notify socket within timeout_ms: false if none. */
static bool notify_recv(int fd, struct notif *n, int timeout_ms)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(16 * sizeof(int))];
	} ctl;
	struct iovec iov = { n->text, sizeof(n->text) - 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t len;

	if (poll(&pfd, 1, timeout_ms) != 1)
		return false;
	len = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	cr_assert(len >= 0, "recvmsg: %s", strerror(errno));
	n->text[len] = '\0';
	n->pid = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
			struct ucred cr;

			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
			n->pid = cr.pid;
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int fds[16];
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			memcpy(fds, CMSG_DATA(c), k * sizeof(int));
			for (size_t i = 0; i < k; i++)
				close(fds[i]);
		}
	}
	return true;
}

/*
 * Collect notifications until one contains want (all of them appended to seen): true if it
 * came within timeout_ms. Every one must come from the main pid (NotifyAccess=main).
 */
static bool notify_until(int fd, pid_t main_pid, const char *want, char *seen, size_t seenlen,
			 int timeout_ms)
{
	int64_t end = dh_now_ms() + timeout_ms;
	struct notif n;

	while (dh_now_ms() < end) {
		if (!notify_recv(fd, &n, (int)(end - dh_now_ms())))
			return false;
		cr_assert_eq(n.pid, main_pid, "notification '%s' from pid %d, not the main pid %d",
			     n.text, (int)n.pid, (int)main_pid);
		strncat(seen, n.text, seenlen - strlen(seen) - 2);
		strcat(seen, "|");
		if (strstr(n.text, want))
			return true;
	}
	return false;
}

/*
 * semvisor-metrics.service's command, as systemd would run it (its ExecStart= line, with
 * TEXTFILE_DIR and the control socket of a daemon of the test's): it writes the metrics file
 * whole, by a rename, and leaves no temporary file; against a daemon that is not there it
 * fails and leaves the last good file alone.
 */
Test(daemon_systemd, metrics_textfile)
{
	char *unit = dh_slurp(dh_src("systemd/semvisor-metrics.service")), *exec, *out;
	char dir[300], ctl[PATH_MAX + 32], ctlpath[PATH_MAX], script[PATH_MAX], cmd[4 * PATH_MAX];
	const char *argv[] = { "/bin/sh", script, NULL };
	struct dh_daemon d;
	DIR *dp;
	struct dirent *e;
	int files = 0;

	dh_setup();
	cr_assert(unit && (exec = strstr(unit, "\nExecStart=/bin/sh -c '")),
		  "no ExecStart=/bin/sh -c '...' in semvisor-metrics.service:\n%s", unit);
	exec += strlen("\nExecStart=/bin/sh -c '");
	exec[strcspn(exec, "\n")] = '\0';
	cr_assert(exec[0] && exec[strlen(exec) - 1] == '\'');
	exec[strlen(exec) - 1] = '\0';
	snprintf(dir, sizeof(dir), "%s", dh_path("textfile"));
	cr_assert_eq(mkdir(dir, 0755), 0);
	snprintf(ctlpath, sizeof(ctlpath), "%s", dh_path("ctl.sock"));
	snprintf(ctl, sizeof(ctl), "--control-socket=%s", ctlpath);
	dh_daemon_start(&d, "d", (const char *const[]){ ctl, NULL });
	/* @BINDIR@ is where make install puts semvisorctl; here, the build's */
	snprintf(script, sizeof(script), "%s", dh_path("metrics.sh"));
	{
		char bindir[PATH_MAX], *at;

		snprintf(bindir, sizeof(bindir), "%s", dh_bin("semvisorctl"));
		*strrchr(bindir, '/') = '\0';
		at = strstr(exec, "@BINDIR@");
		cr_assert(at, "the command does not run @BINDIR@/semvisorctl: %s", exec);
		*at = '\0';
		snprintf(cmd, sizeof(cmd), "export TEXTFILE_DIR=%s SEMVISOR_CONTROL=%s\n%s%s%s\n",
			 dir, ctlpath, exec, bindir, at + strlen("@BINDIR@"));
	}
	dh_write_file(script, "%s", cmd);
	cr_assert_eq(dh_run(argv, 20000, &out), 0, "%s\n%s", cmd, out);
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/semvisor.prom", dir);
	out = dh_slurp(cmd);
	cr_assert(out && strstr(out, "# TYPE semvisor_calls_total counter\n") &&
		      strstr(out, "\nsemvisor_budget_refused_total "),
		  "the metrics file is not whole:\n%s", out);
	free(out);
	dp = opendir(dir);
	cr_assert(dp);
	while ((e = readdir(dp)))
		if (e->d_name[0] != '.')
			files++;
	closedir(dp);
	cr_assert_eq(files, 1, "temporary files left in %s", dir);

	/* no daemon: the command fails, and the last good file stays */
	cr_assert_eq(dh_daemon_stop(&d), 0);
	cr_assert_neq(dh_run(argv, 20000, &out), 0, "it succeeded without a daemon: %s", out);
	free(out);
	out = dh_slurp(cmd);
	cr_assert(out && strstr(out, "semvisor_calls_total"), "the last good file went");
	free(out);
	dp = opendir(dir);
	files = 0;
	while ((e = readdir(dp)))
		if (e->d_name[0] != '.')
			files++;
	closedir(dp);
	cr_assert_eq(files, 1, "a failed run left a temporary file in %s", dir);
	free(unit);
}

Test(daemon_systemd, sd_notify)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct dh_daemon d;
	char env[300], seen[8192] = "", *out;
	int fd, one = 1, calls = -1, clients = -1;
	const char *status;

	dh_setup();
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", dh_path("notify"));
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	cr_assert(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) == 0);
	snprintf(env, sizeof(env), "NOTIFY_SOCKET=%s", sa.sun_path);

	cr_assert(dh_daemon_start_env(&d, "d", NULL, (const char *const[]){ env, NULL }, NULL),
		  "%s", dh_log(&d));
	/* readiness, then a status line */
	cr_assert(notify_until(fd, d.pid, "READY=1", seen, sizeof(seen), 5000),
		  "no READY=1 (got: %s)", seen);
	if (!strstr(seen, "STATUS="))
		cr_assert(notify_until(fd, d.pid, "STATUS=", seen, sizeof(seen), 5000),
			  "no STATUS= (got: %s)", seen);
	status = strstr(seen, "STATUS=");
	cr_assert(sscanf(status, "STATUS=serving %d clients; %d calls served", &clients, &calls) ==
		      2,
		  "STATUS says: %s", status);
	cr_assert_eq(clients, 0, "%s", status);
	cr_assert_eq(calls, 0, "%s", status);

	/* one client, then a reload: RELOADING=1, READY=1 again, and a status that counts it */
	cr_assert_eq(DH_SEM(d.sock, &out, "post", KEY, "1"), 0, "%s", out);
	free(out);
	seen[0] = '\0';
	kill(d.pid, SIGHUP);
	cr_assert(notify_until(fd, d.pid, "RELOADING=1", seen, sizeof(seen), 5000),
		  "no RELOADING=1 after SIGHUP (got: %s)", seen);
	cr_assert(notify_until(fd, d.pid, "READY=1", seen, sizeof(seen), 5000),
		  "no READY=1 after the reload (got: %s)", seen);
	if (!strstr(strstr(seen, "RELOADING=1"), "STATUS="))
		cr_assert(notify_until(fd, d.pid, "STATUS=", seen, sizeof(seen), 5000),
			  "no STATUS= after the reload (got: %s)", seen);
	status = strstr(strstr(seen, "RELOADING=1"), "STATUS=");
	cr_assert(sscanf(status, "STATUS=serving %d clients; %d calls served", &clients, &calls) ==
		      2,
		  "STATUS says: %s", status);
	/* semget and semop at least (the exec that semvisor-run's filter traps may count too) */
	cr_assert_geq(calls, 2, "%s", status);

	seen[0] = '\0';
	kill(d.pid, SIGTERM);
	cr_assert(notify_until(fd, d.pid, "STOPPING=1", seen, sizeof(seen), 5000),
		  "no STOPPING=1 after SIGTERM (got: %s)", seen);
	cr_assert_eq(dh_daemon_stop(&d), 0);
	close(fd);
}

/* ---- configuration and reload ---- */

/* semget(IPC_PRIVATE, nsems) through the daemon: the printed result ("0", "-1 EINVAL"). */
static char *try_nsems(const char *sock, int nsems)
{
	static char result[64];
	char arg[16], *out, *line;

	snprintf(arg, sizeof(arg), "%d", nsems);
	cr_assert_eq(DH_SEM(sock, &out, "semget", arg), 0, "semget %d:\n%s", nsems, out);
	line = strstr(out, "semget: ");
	cr_assert(line, "%s", out);
	snprintf(result, sizeof(result), "%.*s", (int)strcspn(line + 8, "\n"), line + 8);
	free(out);
	return result;
}

#define ASSERT_NSEMS_OK(sock, n)                                                                   \
	do {                                                                                       \
		const char *r_ = try_nsems((sock), (n));                                           \
		cr_assert(r_[0] != '-', "semget of %d semaphores: %s (should work)", (n), r_);     \
	} while (0)
#define ASSERT_NSEMS_EINVAL(sock, n)                                                               \
	cr_assert_str_eq(try_nsems((sock), (n)), "-1 EINVAL", "semget of %d semaphores", (n))

Test(daemon_systemd, reload_limits)
{
	struct dh_daemon d;
	const char *conf = dh_path("d.conf");
	char confopt[300], *log;

	dh_setup();
	dh_write_file(conf, "# limits: SEMMSL,SEMMNS,SEMOPM,SEMMNI\nlimits = 250,32000,32,128\n");
	snprintf(confopt, sizeof(confopt), "--config=%s", conf);
	dh_daemon_start(&d, "d", (const char *const[]){ confopt, NULL });
	ASSERT_NSEMS_OK(d.sock, 200);
	ASSERT_NSEMS_EINVAL(d.sock, 251);

	dh_write_file(conf, "limits = 100,32000,32,128\n");
	kill(d.pid, SIGHUP);
	cr_assert(dh_wait_file(d.log, "reload: limits now 100 32000 32 128", 1, 5000), "%s",
		  dh_log(&d));
	/* the same namespace (the daemon's own) and a new set in it: the new SEMMSL holds */
	ASSERT_NSEMS_EINVAL(d.sock, 200);
	ASSERT_NSEMS_EINVAL(d.sock, 101);
	ASSERT_NSEMS_OK(d.sock, 100);

	/* a broken file is refused as a whole: nothing of it applies, the log says where */
	dh_write_file(conf, "limits = 50,32000,32,128\nbogus = 1\n");
	kill(d.pid, SIGHUP);
	cr_assert(dh_wait_file(d.log, "keeping the running configuration", 1, 5000), "%s",
		  dh_log(&d));
	log = dh_log(&d);
	{
		char want[400];

		snprintf(want, sizeof(want), "%s:2: unknown setting 'bogus'", conf);
		cr_assert(strstr(log, want), "the log does not say '%s':\n%s", want, log);
	}
	cr_assert(!strstr(log, "limits now 50"), "part of a broken file was applied:\n%s", log);
	free(log);
	ASSERT_NSEMS_OK(d.sock, 100);
	ASSERT_NSEMS_EINVAL(d.sock, 101);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/* Options win over the file: at start, in --check, and still after a reload. */
Test(daemon_systemd, options_override_config)
{
	char conf[256], file_sock[256], opt_sock[256], line[700], *out;
	const char *args[8];
	int rc;

	dh_setup();
	snprintf(conf, sizeof(conf), "%s", dh_path("d.conf"));
	snprintf(file_sock, sizeof(file_sock), "%s", dh_path("from-file.sock"));
	snprintf(opt_sock, sizeof(opt_sock), "%s", dh_path("from-option.sock"));
	dh_write_file(conf,
		      "agent_socket = %s\ncontrol_socket =\nnamespaces = shared\n"
		      "limits = 250,32000,32,128\nworkers = 3\n",
		      file_sock);

	rc = daemon_cmd(&out, (const char *const[]){ "--check", "-c", conf, NULL });
	snprintf(line, sizeof(line),
		 "configuration OK: agent %s, control (none), namespaces shared\n", file_sock);
	cr_assert(rc == 0 && strstr(out, line), "--check: exit %d:\n%s\nexpected: %s", rc, out,
		  line);
	free(out);

	snprintf(line, sizeof(line), "--agent-socket=%s", opt_sock);
	args[0] = "--check";
	args[1] = "-c";
	args[2] = conf;
	args[3] = line;
	args[4] = "--namespaces=per-ipc-namespace";
	args[5] = NULL;
	rc = daemon_cmd(&out, args);
	snprintf(line, sizeof(line),
		 "configuration OK: agent %s, control (none), namespaces per-ipc-namespace\n",
		 opt_sock);
	cr_assert(rc == 0 && strstr(out, line), "--check with options: exit %d:\n%s\nexpected: %s",
		  rc, out, line);
	free(out);

	/* --set KEY=VALUE is an option too, and options apply in order */
	rc = daemon_cmd(&out,
			(const char *const[]){ "--check", "-c", conf, "--namespaces=shared",
					       "--set", "namespaces=per-ipc-namespace", NULL });
	cr_assert(rc == 0 && strstr(out, "namespaces per-ipc-namespace\n"), "exit %d:\n%s", rc,
		  out);
	free(out);
}

Test(daemon_systemd, options_override_config_live)
{
	struct dh_daemon d;
	char conf[256], file_sock[256], confopt[300];

	dh_setup();
	snprintf(conf, sizeof(conf), "%s", dh_path("d.conf"));
	snprintf(file_sock, sizeof(file_sock), "%s", dh_path("from-file.sock"));
	snprintf(confopt, sizeof(confopt), "--config=%s", conf);
	dh_write_file(conf, "agent_socket = %s\nlimits = 250,32000,32,128\n", file_sock);
	/* dh_daemon_start gives --agent-socket: the option's socket, not the file's */
	dh_daemon_start(&d, "d",
			(const char *const[]){ confopt, "--limits=10,32000,32,128", NULL });
	cr_assert(access(file_sock, F_OK) != 0, "the file's socket was made despite the option");
	ASSERT_NSEMS_OK(d.sock, 10);
	ASSERT_NSEMS_EINVAL(d.sock, 11);

	/*
	 * A reload re-reads the file, but the options still override it: the limits stay those
	 * of --limits (systemctl reload must not undo what the command line of the unit says).
	 */
	kill(d.pid, SIGHUP);
	cr_assert(dh_wait_file(d.log, "reload", 1, 5000), "%s", dh_log(&d));
	dh_sleep_ms(100);
	{
		const char *r = try_nsems(d.sock, 11);

		cr_assert_str_eq(r, "-1 EINVAL",
				 "after SIGHUP a set of 11 semaphores gave %s: the file's limits "
				 "replaced those of --limits=10,...; log:\n%s",
				 r, dh_log(&d));
	}
	ASSERT_NSEMS_EINVAL(d.sock, 200);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

Test(daemon_systemd, check_config)
{
	char good[256], bad[256], badval[256], want[400], *out;
	int rc;

	dh_setup_ns(false);
	snprintf(good, sizeof(good), "%s", dh_path("good.conf"));
	snprintf(bad, sizeof(bad), "%s", dh_path("bad.conf"));
	snprintf(badval, sizeof(badval), "%s", dh_path("badval.conf"));
	dh_write_file(good, "# comment\n\nworkers = 2   # trailing comment\nlimits = "
			    "250,32000,32,128\nmax_clients = 10\ntrace = no\n");
	dh_write_file(bad, "workers = 2\n# fine so far\nwrokers = 3\n");
	dh_write_file(badval, "workers = 2\nlimits = 1,2\n");

	rc = daemon_cmd(&out, (const char *const[]){ "--check", "-c", good, NULL });
	cr_assert(rc == 0 && strstr(out, "configuration OK"), "good file: exit %d:\n%s", rc, out);
	free(out);

	rc = daemon_cmd(&out, (const char *const[]){ "--check", "-c", bad, NULL });
	snprintf(want, sizeof(want), "%s:3: unknown setting 'wrokers'", bad);
	cr_assert(rc == 1 && strstr(out, want), "unknown key: exit %d:\n%s\nexpected: %s", rc, out,
		  want);
	cr_assert(!strstr(out, "configuration OK"), "%s", out);
	free(out);

	rc = daemon_cmd(&out, (const char *const[]){ "--check", "-c", badval, NULL });
	snprintf(want, sizeof(want), "%s:2: limits wants", badval);
	cr_assert(rc == 1 && strstr(out, want), "bad value: exit %d:\n%s\nexpected: %s", rc, out,
		  want);
	free(out);

	/* a file named explicitly must exist */
	rc = daemon_cmd(&out,
			(const char *const[]){ "--check", "-c", dh_path("missing.conf"), NULL });
	cr_assert(rc == 1 && strstr(out, "missing.conf"), "missing file: exit %d:\n%s", rc, out);
	free(out);

	/* bad options: exit 1 too, before anything starts */
	rc = daemon_cmd(&out,
			(const char *const[]){ "--check", "-c", good, "--workers=lots", NULL });
	cr_assert(rc == 1 && strstr(out, "workers"), "--workers=lots: exit %d:\n%s", rc, out);
	free(out);
}

/* ---- lifecycle ---- */

Test(daemon_systemd, second_daemon_refused)
{
	struct dh_daemon d1, d2;
	char *out, *log, want[PATH_MAX + 64];
	int st = -1;

	dh_setup();
	dh_daemon_start(&d1, "d", NULL);
	/* the same name: the same socket and log path, so d2 logs to its own file below */
	cr_assert(!dh_daemon_start_env(&d2, "d2",
				       (const char *const[]){ "--agent-socket", d1.sock, NULL },
				       NULL, &st),
		  "a second daemon started on %s:\n%s", d1.sock, dh_log(&d2));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "second daemon: %s", dh_status_text(st));
	log = dh_log(&d2);
	snprintf(want, sizeof(want), "another semvisord is already serving %s", d1.sock);
	cr_assert(strstr(log, want), "the second daemon did not say '%s':\n%s", want, log);
	free(log);

	/* the first one is unharmed: its socket is still there and still serves */
	cr_assert_eq(access(d1.sock, F_OK), 0, "the second daemon removed the first one's socket");
	cr_assert_eq(DH_SEM(d1.sock, &out, "post", KEY, "1"), 0, "%s", out);
	free(out);
	cr_assert_eq(dh_daemon_stop(&d1), 0);
}

/*
 * SIGTERM: exit 0, the socket file the daemon made is gone, and a confined program parked in
 * semop sees what main.c documents (ENOSYS at once) instead of hanging.
 */
Test(daemon_systemd, sigterm)
{
	struct dh_daemon d;
	struct dh_cmd c;
	const char *wout = dh_path("wait.out");
	char *out, *log;
	pid_t w;
	int st, rc;
	int64_t t0;

	dh_setup();
	dh_daemon_start(&d, "d", NULL);
	w = dh_spawn(
	    dh_prog_argv(&c, d.sock, "daemon-sem", (const char *const[]){ "wait", KEY, NULL }),
	    wout);
	cr_assert_eq(DH_SEM(d.sock, &out, "ncnt", KEY, "1"), 0, "the waiter never parked:\n%s\n%s",
		     out, dh_slurp(wout));
	free(out);

	t0 = dh_now_ms();
	rc = dh_daemon_stop(&d);
	log = dh_slurp(d.log);
	cr_assert_eq(rc, 0, "SIGTERM: %d\n%s", rc, log);
	cr_assert(strstr(log, "signal 15: stopping") && strstr(log, "semvisord: stopped"), "%s",
		  log);
	cr_assert(access(d.sock, F_OK) != 0, "the agent socket %s is still there after SIGTERM",
		  d.sock);
	free(log);

	/* the waiter's semtimedop (20 s) ended at once, with ENOSYS */
	cr_assert(dh_wait(w, 5000, &st), "the parked program still waits after the daemon left");
	out = dh_slurp(wout);
	cr_assert(dh_now_ms() - t0 < 5000);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(out, "ENOSYS"),
		  "parked program: %s:\n%s", dh_status_text(st), out);
	free(out);
}

/*
 * The service's hardening still lets the daemon do its job: under the unit's
 * CapabilityBoundingSet= (read from systemd/semvisord.service, so the test follows the unit),
 * NoNewPrivileges=, PrivateDevices=, PrivateMounts= and UMask=, applied here with setpriv(1),
 * unshare(1) and a /dev of the pseudo-devices only, as systemd would apply them to a root service,
 * the daemon serves a program of another user: it reads that program's memory and /proc entries
 * (which needs CAP_SYS_PTRACE) and credentials (the set it creates is owned by that user), and
 * then traces one (semvisor-run --backend=ptrace), which the system call filter must allow.
 */
Test(daemon_systemd, hardened_capabilities)
{
	const char *unit = dh_src("systemd/semvisord.service");
	char *text, *line, bounding[256] = "--bounding-set=-all", want_caps[32], *out, caps[256];
	static char filter[PATH_MAX], filter_env[PATH_MAX + 16], self_path[PATH_MAX];
	const char *wrap[24],
	    *nobody[] = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", NULL };
	const char *argv[24];
	struct dh_daemon d;
	struct dh_cmd c;
	unsigned long long capeff = 0, want = 0;
	bool nnp;
	int n = 0, rc;

	dh_setup();
	cr_assert(unit, "systemd/semvisord.service not found (run from the source tree)");
	if (system("setpriv --version >/dev/null 2>&1") != 0)
		cr_skip_test("setpriv is not installed (Debian package util-linux)");
	text = dh_slurp(unit);
	line = strstr(text, "\nCapabilityBoundingSet=");
	cr_assert(line, "the unit sets no CapabilityBoundingSet=:\n%s", text);
	line += strlen("\nCapabilityBoundingSet=");
	/* a copy of the line: the unit's later settings are read from text below */
	snprintf(caps, sizeof(caps), "%.*s", (int)strcspn(line, "\n"), line);
	/* "CAP_SYS_PTRACE CAP_CHOWN" -> "-all,+sys_ptrace,+chown" and the CapEff mask */
	for (char *cap = strtok(caps, " \t"); cap; cap = strtok(NULL, " \t")) {
		static const struct {
			const char *name;
			int bit;
		} known[] = { { "CAP_CHOWN", 0 },      { "CAP_DAC_OVERRIDE", 1 },
			      { "CAP_KILL", 5 },       { "CAP_SETUID", 7 },
			      { "CAP_SETGID", 6 },     { "CAP_SYS_PTRACE", 19 },
			      { "CAP_SYS_ADMIN", 21 }, { "CAP_IPC_OWNER", 15 } };
		size_t k;

		for (k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			if (!strcmp(cap, known[k].name))
				break;
		cr_assert(k < sizeof(known) / sizeof(known[0]), "capability %s: add it here", cap);
		want |= 1ULL << known[k].bit;
		strcat(bounding, ",+");
		for (char *p = cap + 4, *q = bounding + strlen(bounding); *p; p++, q++) {
			q[0] = (char)tolower((unsigned char)*p);
			q[1] = '\0';
		}
	}
	/*
	 * PrivateDevices= (a /dev of the pseudo-devices only), PrivateMounts= (a mount namespace
	 * of its own) and UMask=0077, as systemd would set them up, when the unit asks.
	 */
	if (strstr(text, "\nPrivateDevices=yes") || strstr(text, "\nPrivateMounts=yes") ||
	    strstr(text, "\nUMask=0077")) {
		wrap[n++] = "unshare";
		wrap[n++] = "--mount";
		wrap[n++] = "--propagation";
		wrap[n++] = "private";
		wrap[n++] = "--";
		wrap[n++] = "/bin/sh";
		wrap[n++] = "-c";
		wrap[n++] =
		    strstr(text, "\nPrivateDevices=yes")
			? "mount -t tmpfs -o mode=755 tmpfs /dev && "
			  "mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && "
			  "mknod -m 666 /dev/full c 1 7 && mknod -m 666 /dev/random c 1 8 && "
			  "mknod -m 666 /dev/urandom c 1 9 && umask 077 && exec \"$@\""
			: "umask 077 && exec \"$@\"";
		wrap[n++] = "sh";
	}
	wrap[n++] = "setpriv";
	wrap[n++] = bounding;
	wrap[n++] = "--inh-caps=-all";
	nnp = strstr(text, "\nNoNewPrivileges=yes") != NULL;
	if (nnp)
		wrap[n++] = "--no-new-privs";
	wrap[n++] = "--";
	/*
	 * SystemCallFilter=: its groups expanded by systemd-analyze, as systemd expands them. Not
	 * for a sanitizer's build of the daemon: its leak check at exit stops the world with
	 * ptrace, which no service filter allows.
	 */
	if ((line = strstr(text, "\nSystemCallFilter=")) && !SANITIZED) {
		char cmd[2 * PATH_MAX + 1024], self[PATH_MAX];
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

		cr_assert(len > 0);
		self[len] = '\0';
		if (system("systemd-analyze syscall-filter @system-service >/dev/null 2>&1") != 0)
			cr_skip_test("systemd-analyze cannot expand SystemCallFilter= groups here");
		cr_assert(strstr(text, "\nSystemCallErrorNumber=EPERM"),
			  "the test answers filtered calls EPERM, the unit must say so too");
		line += strlen("\nSystemCallFilter=");
		snprintf(filter, sizeof(filter), "%s", dh_path("syscalls"));
		snprintf(
		    cmd, sizeof(cmd),
		    "expand() { for g in \"$@\"; do case $g in @*) expand $(systemd-analyze "
		    "syscall-filter $g | sed 1d | grep -v '^ *#'); ;; *) echo $g;; esac; done; }; "
		    "expand %.*s > %s",
		    (int)strcspn(line, "\n"), line, filter);
		cr_assert_eq(system(cmd), 0, "%s", cmd);
		snprintf(self_path, sizeof(self_path), "%s", self);
		wrap[n++] = self_path;
		snprintf(filter_env, sizeof(filter_env), "SV_SYSFILTER=%s", filter);
	}
	wrap[n] = NULL;
	free(text);

	/* can user 65534 run our binaries at all (the tree may be private)? */
	n = 0;
	for (int i = 0; nobody[i]; i++)
		argv[n++] = nobody[i];
	argv[n++] = dh_bin("semvisor-run");
	argv[n++] = "--version";
	argv[n] = NULL;
	if (dh_run(argv, 10000, &out) != 0)
		cr_skip_test("user 65534 cannot run %s here: %s", dh_bin("semvisor-run"), out);
	free(out);

	dh_daemon_wrap = wrap;
	{
		int st = 0;
		bool up = dh_daemon_start_env(
		    &d, "d", (const char *const[]){ "--set", "agent_socket_mode=0666", NULL },
		    filter_env[0] ? (const char *const[]){ filter_env, NULL } : NULL, &st);
		char *log = dh_slurp(d.log);

		cr_assert(up, "semvisord did not start under the unit's confinement (%s):\n%s",
			  d.pid ? "no 'serving:' line" : dh_status_text(st), log);
		free(log);
	}
	dh_daemon_wrap = NULL;
	text = dh_slurp(
	    (snprintf(want_caps, sizeof(want_caps), "/proc/%d/status", (int)d.pid), want_caps));
	line = strstr(text, "\nCapEff:");
	cr_assert(line && sscanf(line, "\nCapEff: %llx", &capeff) == 1);
	cr_assert_eq(capeff, want, "the daemon runs with CapEff %llx, the unit allows %llx", capeff,
		     want);
	/* and the confinement the wrapper set up is the one it runs in */
	cr_assert(!nnp || strstr(text, "\nNoNewPrivs:\t1\n"), "the daemon can gain privileges");
	cr_assert(!filter_env[0] || strstr(text, "\nSeccomp:\t2\n"),
		  "the daemon runs without the unit's system call filter");
	line = strstr(text, "\nUmask:");
	cr_assert(line && !strncmp(line, "\nUmask:\t0077", 12), "the daemon's umask: %.16s", line);
	free(text);
	{
		char devdir[64];
		DIR *dp;
		struct dirent *e;
		int devs = 0;

		snprintf(devdir, sizeof(devdir), "/proc/%d/root/dev", (int)d.pid);
		dp = opendir(devdir);
		cr_assert(dp, "%s: %s", devdir, strerror(errno));
		while ((e = readdir(dp)))
			if (e->d_name[0] != '.')
				devs++;
		closedir(dp);
		cr_assert_eq(devs, 5, "the daemon's /dev is not the private one (%d entries)",
			     devs);
	}

	for (int round = 0; round < 2; round++) {
		n = 0;
		for (int i = 0; nobody[i]; i++)
			argv[n++] = nobody[i];
		for (const char *const *a =
			 dh_prog_argv(&c, d.sock, "daemon-sem",
				      round ? (const char *const[]){ "show", KEY, "rm", NULL }
					    : (const char *const[]){ "post", KEY, "2", NULL });
		     *a; a++) {
			argv[n++] = *a;
			/* the second round is traced: the unit must let the daemon do that too */
			if (round && !strncmp(*a, "--daemon=", 9))
				argv[n++] = "--backend=ptrace";
		}
		argv[n] = NULL;
		rc = dh_run(argv, 30000, &out);
		cr_assert_eq(rc, 0,
			     "program of user 65534 (round %d): exit %d:\n%s\ndaemon log:\n%s",
			     round, rc, out, dh_slurp(d.log));
		if (round)
			cr_assert(strstr(out, "show: nsems 1 uid 65534 vals 2\n"), "%s", out);
		free(out);
	}
	cr_assert_eq(dh_daemon_stop(&d), 0);
}
