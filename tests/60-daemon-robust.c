/* SPDX-License-Identifier: MIT */
/*
 * semvisord against clients that get the agent protocol (SPEC B7) wrong, and under many clients
 * at once.
 *
 * Whoever can connect to the agent socket is outside the daemon's trust. Each bad connection
 * below must be logged (naming the problem and the peer's pid) and dropped, with every fd it
 * brought closed, while the daemon keeps serving everyone else: after each one a normal
 * `semvisor-run --daemon` program is served correctly, and the daemon's fd count ends where it
 * began. The malformed, fd-less, wrong-fd and oversized messages are sent by hand here; the
 * silent client simply connects and says nothing past the receive timeout.
 *
 * Then 100 listeners at once: 100 separately started programs block on one semaphore through
 * the daemon, which must serve them from its fixed worker pool (its thread count stays small),
 * release them all with one semop, and drop each listener when its program is gone. And 100
 * silent connections at once must not make the daemon refuse a well-behaved client.
 */
#include <dirent.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/param.h>
#include <sys/un.h>

#include "tests/60-daemon-harness.h"

TestSuite(daemon_robust, .timeout = 120, .fini = dh_cleanup);

#define KEY		"0x5e3a0004"
#define RECV_TIMEOUT_MS 5000 /* server/daemon/agent.c AGENT_TIMEOUT_MS */
#define WORKERS		2
#define NLISTENERS	100

static int agent_connect(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	cr_assert(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s",
		  sock, strerror(errno));
	return fd;
}

/*
 * Send msg (len bytes) with pass_fd in SCM_RIGHTS on the first segment (-1: no fd). The daemon
 * may hang up before taking all of an oversized message: that ends the sending, not the test.
 */
static void agent_send(int fd, const char *msg, size_t len, int pass_fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	size_t off = 0;

	memset(&ctl, 0, sizeof(ctl));
	while (off < len) {
		struct iovec iov = { (char *)msg + off, len - off };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		ssize_t n;

		if (off == 0 && pass_fd >= 0) {
			struct cmsghdr *c;

			mh.msg_control = ctl.buf;
			mh.msg_controllen = sizeof(ctl.buf);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
		}
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return; /* EPIPE, ECONNRESET: it stopped reading, as it should */
		if (poll(&pfd, 1, 10000) != 1)
			return;
	}
}

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	cr_assert(dir, "%s: %s", path, strerror(errno));
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/*
 * The daemon's fd count once it is quiet: a client that just left may still hold a listener or
 * a pidfd for a moment, until the daemon sees it go. Stable for 200 ms, or whatever it is after
 * 3 s.
 */
static int settled_fds(pid_t pid)
{
	int64_t end = dh_now_ms() + 3000;
	int last = count_fds(pid), same = 0;

	while (same < 10 && dh_now_ms() < end) {
		int n;

		dh_sleep_ms(20);
		n = count_fds(pid);
		same = n == last ? same + 1 : 0;
		last = n;
	}
	return last;
}

/* The daemon closed its copy of a pipe's read end: our write end then gets EPIPE. */
static bool pipe_reader_gone(int wfd)
{
	int64_t end = dh_now_ms() + 3000;

	do {
		if (write(wfd, "x", 1) < 0 && errno == EPIPE)
			return true;
		dh_sleep_ms(10);
	} while (dh_now_ms() < end);
	return false;
}

/* A normal client after each bad one: served, and the value it leaves is the sum of all. */
static void serve_normally(struct dh_daemon *d, int round)
{
	char *out, want[64];

	dh_daemon_alive(d);
	cr_assert_eq(DH_SEM(d->sock, &out, "post", KEY, "1"), 0,
		     "a normal program after bad client %d failed:\n%s\ndaemon log:\n%s", round,
		     out, dh_slurp(d->log));
	free(out);
	cr_assert_eq(DH_SEM(d->sock, &out, "show", KEY), 0, "%s", out);
	snprintf(want, sizeof(want), "show: nsems 1 uid 0 vals %d\n", round);
	cr_assert(strstr(out, want), "after bad client %d the value is wrong:\n%s", round, out);
	free(out);
}

/*
 * One bad client: send msg with (if with_pipe) a pipe's read end, expect the log to name the
 * problem (expect) in a line that names our pid, and the pipe to be closed by the daemon.
 */
static void bad_client(struct dh_daemon *d, int round, const char *msg, size_t len, bool with_pipe,
		       const char *expect)
{
	char prefix[128];
	int fd = agent_connect(d->sock), p[2] = { -1, -1 };

	if (with_pipe)
		cr_assert(pipe2(p, O_CLOEXEC) == 0);
	agent_send(fd, msg, len, p[0]);
	/* then EOF, as runc closes after its one message */
	shutdown(fd, SHUT_WR);
	if (with_pipe)
		close(p[0]); /* the daemon's copy is the only read end now */
	snprintf(prefix, sizeof(prefix),
		 "agent: dropped a connection from pid %d (uid 0): ", (int)getpid());
	cr_assert(dh_wait_file(d->log, expect, 1, 5000),
		  "bad client %d: the log does not say '%s':\n%s", round, expect, dh_slurp(d->log));
	{
		char *log = dh_slurp(d->log), *line = strstr(log, expect);

		/* the line that says it also names who it was */
		while (line > log && line[-1] != '\n')
			line--;
		cr_assert(!strncmp(line + strlen("semvisord: "), prefix, strlen(prefix)),
			  "bad client %d: the line does not name the peer (%s):\n%.*s", round,
			  prefix, (int)strcspn(line, "\n"), line);
		free(log);
	}
	if (with_pipe) {
		cr_assert(pipe_reader_gone(p[1]),
			  "bad client %d: the daemon kept the fd it was sent", round);
		close(p[1]);
	}
	/* and the connection itself is closed by the daemon */
	{
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char c;

		cr_assert(poll(&pfd, 1, 3000) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0,
			  "bad client %d: the connection stays open", round);
	}
	close(fd);
	serve_normally(d, round);
}

#define VALID                                                                                      \
	"{\"ociVersion\":\"1.0.2\",\"fds\":[\"seccompFd\"],\"pid\":1,\"state\":{\"ociVersion\":"   \
	"\"1.0.2\",\"id\":\"bad\",\"status\":\"creating\",\"pid\":1,\"bundle\":\"/\"}}"

Test(daemon_robust, bad_clients)
{
	static const char malformed[] =
	    "{\"ociVersion\":\"1.0.2\",\"fds\":[\"seccompFd\"],\"pid\":12x}";
	struct dh_daemon d;
	size_t big_len = 80 * 1024;
	char *big = malloc(big_len + 64), *log;
	int idle, fds_before, fds_after, round = 0;
	int64_t idle_since;

	dh_setup();
	dh_daemon_start(&d, "d", (const char *const[]){ "--workers=2", NULL });
	serve_normally(&d, ++round);
	fds_before = settled_fds(d.pid);

	/* (e) first, so that it waits while everything else goes on: it must stall nobody */
	idle = agent_connect(d.sock);
	idle_since = dh_now_ms();

	/* (a) malformed JSON (with an fd, so that the parser is what refuses it) */
	bad_client(&d, ++round, malformed, strlen(malformed), true,
		   "malformed agent message: '}' expected near 'x' at byte ");
	/* (b) a valid message without an fd */
	bad_client(&d, ++round, VALID, strlen(VALID), false,
		   "no file descriptor came with the agent message");
	/* (c) a valid message whose fd is not a seccomp listener */
	bad_client(&d, ++round, VALID, strlen(VALID), true,
		   "the fd is not a seccomp listener (it is pipe:[");
	/* (d) an oversized message: a metadata string that never ends within 64 KiB */
	{
		size_t n =
		    (size_t)snprintf(big, 64, "{\"fds\":[\"seccompFd\"],\"pid\":1,\"metadata\":\"");

		memset(big + n, 'm', big_len - n);
		bad_client(&d, ++round, big, big_len, true,
			   "the agent message is longer than 65536 bytes");
	}
	/* a connection that closes without a word */
	bad_client(&d, ++round, "", 0, false, "the connection closed before any agent message");

	/* (e) the silent one: dropped after the receive timeout, its connection closed */
	cr_assert(
	    dh_now_ms() - idle_since < RECV_TIMEOUT_MS,
	    "the other clients took longer than the receive timeout: the test proves nothing");
	cr_assert(dh_wait_file(d.log, "no complete agent message within 5000 ms (0 bytes came)", 1,
			       RECV_TIMEOUT_MS + 3000),
		  "the silent client was not dropped:\n%s", dh_slurp(d.log));
	cr_assert_geq(dh_now_ms() - idle_since, RECV_TIMEOUT_MS - 100, "dropped too early");
	{
		struct pollfd pfd = { .fd = idle, .events = POLLIN };
		char c;

		cr_assert(poll(&pfd, 1, 3000) == 1 && recv(idle, &c, 1, MSG_DONTWAIT) == 0,
			  "the silent client's connection is still open");
	}
	close(idle);
	serve_normally(&d, ++round);

	/* every fd the bad clients brought, and their connections, are gone */
	fds_after = settled_fds(d.pid);
	cr_assert_eq(fds_after, fds_before, "the daemon holds %d fds, %d before the bad clients",
		     fds_after, fds_before);
	log = dh_log(&d);
	cr_assert_eq(dh_count(log, "agent: dropped a connection"), 6, "%s", log);
	free(log);
	cr_assert_eq(dh_daemon_stop(&d), 0, "%s", dh_log(&d));
	free(big);
}

Test(daemon_robust, hundred_listeners)
{
	struct dh_daemon d;
	static struct dh_cmd cmds[NLISTENERS];
	pid_t pids[NLISTENERS];
	char workers[32], *out, *log, name[32];
	long threads_busy, threads_max = 0;
	int fds_before, fds, failed = 0;
	int64_t end;

	dh_setup();
	snprintf(workers, sizeof(workers), "--workers=%d", WORKERS);
	dh_daemon_start(&d, "d", (const char *const[]){ workers, NULL });
	/*
	 * One client first: the namespace it creates keeps two fds (its IPC namespace's
	 * /proc/sys/kernel/sem and sem_next_id) for as long as it lives, which for the daemon's
	 * own namespace is the daemon's life. What must not stay is anything per client.
	 */
	cr_assert_eq(DH_SEM(d.sock, &out, "post", "0x7ea1", "1"), 0, "%s", out);
	free(out);
	fds_before = count_fds(d.pid);

	for (int i = 0; i < NLISTENERS; i++) {
		snprintf(name, sizeof(name), "w%d.out", i);
		pids[i] = dh_spawn(dh_prog_argv(&cmds[i], d.sock, "daemon-sem",
						(const char *const[]){ "wait", KEY, NULL }),
				   dh_path(name));
		/* sample while clients arrive: the receiving threads are the only extra ones */
		threads_max = MAX(threads_max, dh_proc_status(d.pid, "Threads"));
	}
	/* all 100 parked in the daemon at once */
	cr_assert_eq(DH_SEM(d.sock, &out, "ncnt", KEY, "100"), 0,
		     "not all %d programs got to wait:\n%s\ndaemon log:\n%s", NLISTENERS, out,
		     dh_slurp(d.log));
	free(out);
	dh_daemon_alive(&d);
	threads_busy = dh_proc_status(d.pid, "Threads");
	log = dh_log(&d);
	/* each program was its own client */
	cr_assert_geq(dh_count(log, "agent: serving semvisor-run-"), NLISTENERS + 1, "%s", log);
	free(log);
	/*
	 * main thread + WORKERS workers + a handful of helpers (timers, pidfds): never one per
	 * client. The limit leaves room for helpers but is far below 100.
	 */
	cr_assert_leq(threads_busy, WORKERS + 6,
		      "%ld threads while serving %d clients with %d workers", threads_busy,
		      NLISTENERS, WORKERS);

	/* one semop releases all of them */
	cr_assert_eq(DH_SEM(d.sock, &out, "post", KEY, "100"), 0, "%s", out);
	free(out);
	for (int i = 0; i < NLISTENERS; i++) {
		int st;

		snprintf(name, sizeof(name), "w%d.out", i);
		if (!dh_wait(pids[i], 30000, &st) || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			out = dh_slurp(dh_path(name));
			fprintf(stderr, "waiter %d: %s:\n%s", i, dh_status_text(st), out);
			free(out);
			failed++;
		} else {
			out = dh_slurp(dh_path(name));
			cr_assert(strstr(out, "woken\n"), "waiter %d:\n%s", i, out);
			free(out);
		}
	}
	dh_daemon_alive(&d);
	cr_assert_eq(failed, 0, "%d of %d waiters failed", failed, NLISTENERS);
	cr_assert_eq(DH_SEM(d.sock, &out, "show", KEY, "rm"), 0, "%s", out);
	cr_assert(strstr(out, "show: nsems 1 uid 0 vals 0\n"), "%s", out);
	free(out);

	/* each listener is released when its program is gone (POLLHUP) */
	end = dh_now_ms() + 5000;
	while ((fds = count_fds(d.pid)) > fds_before && dh_now_ms() < end)
		dh_sleep_ms(20);
	cr_assert_leq(fds, fds_before, "%d fds after all clients left, %d before", fds, fds_before);
	cr_log_info("threads: %ld with %d clients parked, at most %ld while they arrived",
		    threads_busy, NLISTENERS, threads_max);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/*
 * Many silent clients at once (a burst of runtimes that connect and stall, or someone holding
 * connections open on purpose) must not delay a well-behaved client: connections are accepted
 * at once, each uid may keep only a few being received, and a newer one of the same uid drops
 * its oldest. NSILENT silent connections from root and as many from user 65534; a program is
 * then served at once (before, it waited for the silent ones' 5 s timeouts, 9 s and more), and
 * the daemon says it dropped 65534's oldest ones.
 */
#define NSILENT 200

/* A child that opens n connections as euid 65534 (SO_PEERCRED reports the euid), keeping its
   capabilities so that the socket's directory and mode do not matter, then waits for EOF on
   the pipe. Returns when they are all open. */
static pid_t silent_nobody(const char *sock, int n, int *hold)
{
	int ready[2], stay[2];
	pid_t pid;
	char c;

	cr_assert(pipe(ready) == 0 && pipe(stay) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int *fds = calloc((size_t)n, sizeof(int));

		close(ready[0]);
		close(stay[1]);
		if (!fds || prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP) ||
		    setresgid(-1, 65534, -1) || setresuid(-1, 65534, -1))
			_exit(2);
		for (int i = 0; i < n; i++) {
			struct sockaddr_un sa = { .sun_family = AF_UNIX };

			fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (strlen(sock) >= sizeof(sa.sun_path))
				_exit(5);
			memcpy(sa.sun_path, sock, strlen(sock) + 1);
			if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)))
				_exit(3);
		}
		if (write(ready[1], "r", 1) != 1 || read(stay[0], &c, 1) < 0)
			_exit(4);
		_exit(0);
	}
	close(ready[1]);
	close(stay[0]);
	cr_assert_eq(read(ready[0], &c, 1), 1, "the child could not open its connections");
	close(ready[0]);
	*hold = stay[1];
	return pid;
}

Test(daemon_robust, silent_burst_does_not_lock_out)
{
	struct dh_daemon d;
	int idle[NSILENT], hold, rc, st;
	int64_t t0, took;
	pid_t child;
	char *out, *log;

	dh_setup();
	dh_daemon_start(&d, "d", NULL);
	child = silent_nobody(d.sock, NSILENT, &hold);
	for (int i = 0; i < NSILENT; i++)
		idle[i] = agent_connect(d.sock);
	dh_sleep_ms(200); /* let the daemon take them in */
	t0 = dh_now_ms();
	rc = DH_SEM(d.sock, &out, "post", KEY, "1");
	took = dh_now_ms() - t0;
	log = dh_log(&d);
	cr_assert_eq(rc, 0,
		     "with %d silent connections of root and %d of 65534 open, a normal program "
		     "was not served (exit %d after %lld ms):\n%s\ndaemon log (last lines):\n%s",
		     NSILENT, NSILENT, rc, (long long)took, out, dh_tail(log, 3));
	/* far below the silent ones' 5 s receive timeout, which it used to wait out */
	cr_assert_lt(took, 2000, "served only after %lld ms", (long long)took);
	cr_assert(strstr(log, "(uid 65534): it sent nothing while newer ones of its uid came"),
		  "user 65534's oldest silent connections were not dropped:\n%s", dh_tail(log, 5));
	free(log);
	free(out);
	for (int i = 0; i < NSILENT; i++)
		close(idle[i]);
	close(hold);
	cr_assert_eq(waitpid(child, &st, 0), child);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	cr_assert_eq(dh_daemon_stop(&d), 0);
}

/*
 * The agent and control sockets are bound with care (server/util/usock.h): a file, directory
 * or symlink at the path is refused and left as it was; a dead instance's socket is replaced;
 * a live instance's is refused.
 */
static void refuses(const char *which, const char *what_is_there)
{
	struct dh_daemon d;
	char opt[PATH_MAX + 32], *log, *text;
	const char *path = dh_path(which);
	int st = 0;
	bool up;

	snprintf(opt, sizeof(opt), "--%s=%s",
		 strstr(which, "agent") ? "agent-socket" : "control-socket", path);
	up = dh_daemon_start_env(&d, "d", (const char *const[]){ opt, NULL }, NULL, &st);
	log = dh_log(&d);
	cr_assert(!up, "semvisord started with %s at its %s:\n%s", what_is_there, which, log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %#x:\n%s", st, log);
	cr_assert(strstr(log, "exists and is not a socket: not replacing it"),
		  "no clear refusal:\n%s", log);
	free(log);
	if (!strcmp(what_is_there, "a file")) {
		text = dh_slurp(path);
		cr_assert_str_eq(text, "precious\n", "the file was changed");
		free(text);
	}
}

Test(daemon_robust, socket_paths_never_clobbered)
{
	struct dh_daemon d, d2;
	char opt[PATH_MAX + 32], *log;
	struct stat sb;
	int st = 0;

	dh_setup();
	dh_write_file(dh_path("agent"), "precious\n");
	refuses("agent", "a file");
	dh_write_file(dh_path("control"), "precious\n");
	refuses("control", "a file");
	cr_assert_eq(mkdir(dh_path("agentdir"), 0755), 0);
	refuses("agentdir", "a directory");
	cr_assert_eq(symlink(dh_path("nowhere"), dh_path("agentlink")), 0);
	refuses("agentlink", "a dangling symlink");
	cr_assert(lstat(dh_path("agentlink"), &sb) == 0 && S_ISLNK(sb.st_mode));

	/* a live instance's socket is refused (by its lock, or failing that its socket) */
	dh_daemon_start(&d, "live", NULL);
	snprintf(opt, sizeof(opt), "--agent-socket=%s", d.sock);
	cr_assert(
	    !dh_daemon_start_env(&d2, "second", (const char *const[]){ opt, NULL }, NULL, &st),
	    "a second daemon started on a live socket");
	log = dh_log(&d2);
	cr_assert(strstr(log, "already"), "no clear refusal:\n%s", log);
	free(log);
	/* killed, it leaves a stale socket and lock: the next one replaces them and serves */
	kill(d.pid, SIGKILL);
	cr_assert(dh_wait(d.pid, 5000, &st));
	cr_assert(lstat(d.sock, &sb) == 0 && S_ISSOCK(sb.st_mode));
	dh_daemon_start(&d2, "third", (const char *const[]){ opt, NULL });
	cr_assert_eq(DH_SEM(d.sock, &log, "post", "0x7ea2", "1"), 0, "%s", log);
	free(log);
	cr_assert_eq(dh_daemon_stop(&d2), 0);
	cr_assert(lstat(d.sock, &sb) && errno == ENOENT, "the socket file outlived its daemon");
}
