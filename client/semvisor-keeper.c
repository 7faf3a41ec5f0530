/* SPDX-License-Identifier: MIT */
/*
 * semvisor-keeper: systemd's part for semvisord where systemd does not run it (OpenRC, runit, a
 * container's init, tests): a service manager for one Type=notify service with NotifyAccess=main
 * and a file descriptor store, so that semvisord's restarts lose nothing there too
 * (semvisord(8), RESTARTS). It keeps what systemd keeps across a restart and restarts the
 * service on SIGHUP (an upgrade), when it fails (--restart-on-failure), or on a command.
 *
 *   semvisor-keeper [--listen NAME=PATH]... [--fdstore-max N] [--log FILE]
 *                   [--restart-on-failure] [--commands] -- PROGRAM [ARG]...
 *
 * What the service sees, as under systemd:
 *   - NOTIFY_SOCKET: a datagram socket in a private directory, SO_PASSCRED on.
 *   - fds 3, 4, ...: first the --listen sockets (unix stream sockets bound at PATH, mode 0666,
 *     listening for the keeper's whole life like a socket unit's, so that connections made
 *     while the service is down wait in the backlog), then every fd of the store, in the order
 *     they were stored; LISTEN_FDS, LISTEN_FDNAMES (colon separated) and LISTEN_PID (the
 *     service's own pid, set after fork) say so. Every other fd is closed; stdin is /dev/null,
 *     stdout and stderr are the keeper's stderr.
 *   - its own process group (signals go to the group, as KillMode=control-group sends them to
 *     the cgroup) and PR_SET_PDEATHSIG=SIGKILL, so that it never outlives the keeper.
 *
 * The notify protocol (sd_notify(3)), from the service's main pid only (other senders are
 * ignored and the fds they send closed): READY=1, STOPPING=1, RELOADING=1, STATUS=...;
 * FDSTORE=1 with FDNAME= (default "stored"; names as systemd allows: printable ASCII, no ':',
 * 1..255 characters) and FDPOLL=0; FDSTOREREMOVE=1 with FDNAME= (closes every fd of that name).
 * As systemd does, a stored fd that is the same open file as one already stored is not stored
 * twice, and a stored fd is polled and dropped when it reports POLLHUP or POLLERR, unless it
 * came with FDPOLL=0. Beyond --fdstore-max fds (default 4096) an fd is refused and closed. A
 * message that arrives after the main pid died is still taken from it: the socket is drained
 * before the death is acted on, as systemd orders its event sources.
 *
 * Signals: SIGHUP restarts the service (SIGTERM, wait, start again with the store: what
 * `systemctl restart` does); SIGTERM and SIGINT stop it and the keeper. With
 * --restart-on-failure a service that ends by itself other than with status 0, or fails to
 * start, is started again a second later, with the store; after five failed starts in a row
 * the keeper gives up and exits 1.
 *
 * With --commands, control for tests and scripts: one command a line on stdin, one answer a
 * line on stdout (line buffered):
 *   restart TERM|KILL  signal the service, wait for it, start it again with the store:
 *                      "exited STATUS", then "ready PID" or "failed REASON"
 *   stop               SIGTERM, wait: "exited STATUS", and the keeper exits 0
 *   store              "store N NAME,NAME,..." (the store's names, in order)
 *   wait-store NAME    "stored NAME" once an fd of that name is stored ("failed timeout": 10 s)
 * STATUS is "0".."255" or "signal N". At start the keeper answers "ready PID" (or "failed
 * REASON") for the first service; when the service exits on its own it says "exited STATUS"
 * and does not start it again until told. A start that fails (the service exits before
 * READY=1, or is not ready in 30 s) answers "failed exited STATUS" or "failed timeout".
 * Commands wait while one is under way. stdin's end means "stop"; "stop"
 * with no service running answers how it last ended. Every wait is bounded: a service that
 * does not stop within 20 s of SIGTERM is killed.
 *
 * The keeper's own log (what it did, what it refused) goes to --log FILE, else to stderr.
 * Exit status: 0 after stop, 1 on a failure to set up or when --restart-on-failure gave up,
 * 2 for bad usage.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/version.h"

#define FDNAME_MAX    255
#define NOTIFY_MAX    4096 /* systemd's NOTIFY_BUFFER_MAX */
#define FDS_PER_MSG   253  /* SCM_MAX_FD */
#define START_MS      30000
#define STOP_MS	      20000
#define KILL_MS	      5000
#define WAIT_STORE_MS 10000
#define MAX_LISTEN    16
#define CMD_MAX	      1024

struct stored {
	int fd;
	dev_t dev; /* its inode, for the duplicate check */
	ino_t ino;
	bool poll;
	char name[FDNAME_MAX + 1];
};

struct listen_sock {
	int fd;
	char name[FDNAME_MAX + 1];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* What is under way: commands wait while it is not OP_NONE. */
enum op {
	OP_NONE,
	OP_START,      /* the service was started: waiting for READY=1 */
	OP_STOP,       /* signalled: waiting for it to exit, then start again or leave */
	OP_WAIT_STORE, /* waiting for an fd of wait_name */
	OP_PAUSE,      /* --restart-on-failure: the next start, at deadline */
};

static struct {
	char *const *argv;
	struct listen_sock listen[MAX_LISTEN];
	int nlisten;
	struct stored *store;
	int nstore, store_cap, store_max;
	FILE *log;

	char dir[sizeof(((struct sockaddr_un *)0)->sun_path) - 8]; /* the notify socket's */
	char notify_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int notify_fd, sig_fd, devnull;

	pid_t child; /* 0: not running */
	char last_status[32];

	enum op op;
	int64_t deadline;
	bool killed;	/* OP_STOP: SIGKILL sent after the SIGTERM timed out */
	bool then_exit; /* OP_STOP: leave once it exited, else start again */
	char wait_name[FDNAME_MAX + 1];

	char cmd[CMD_MAX];
	size_t cmd_len;
	bool cmd_eof;

	bool commands;		 /* --commands: stdin is read */
	bool restart_on_failure; /* --restart-on-failure */
	int failures;		 /* failed starts in a row */
	bool failed;		 /* gave up: exit 1 */
	bool hup;		 /* SIGHUP: a restart, as soon as nothing else is under way */
} k = { .store_max = 4096, .notify_fd = -1, .sig_fd = -1, .devnull = -1 };

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	FILE *f = k.log ? k.log : stderr;
	struct timespec ts;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(f, "semvisor-keeper[%d] %lld.%03ld: ", (int)getpid(), (long long)ts.tv_sec,
		ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fflush(f);
}

/* An answer on stdout. A reader that went away is the same as stdin's end: stop. */
static void answer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void answer(const char *fmt, ...)
{
	char line[CMD_MAX + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	logf_("answer: %s", line);
	/* without --commands nobody asked: stdout may be closed, and that must not stop us */
	if (!k.commands)
		return;
	if (printf("%s\n", line) < 0 || fflush(stdout) == EOF)
		k.cmd_eof = true;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: semvisor-keeper [OPTION]... -- PROGRAM [ARG]...\n"
	    "Run PROGRAM as systemd runs a Type=notify service with NotifyAccess=main and a\n"
	    "file descriptor store, and restart it handing back its sockets and stored fds\n"
	    "(LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID): semvisord's restarts then lose nothing\n"
	    "where systemd does not run it.\n"
	    "\n"
	    "  --listen NAME=PATH    a unix stream socket at PATH (mode 0666), passed as NAME\n"
	    "                        for the keeper's whole life (semvisord: agent=...)\n"
	    "  --fdstore-max N       the store's size (default 4096)\n"
	    "  --log FILE            the keeper's log (default: standard error)\n"
	    "  --restart-on-failure  start PROGRAM again a second after it fails; give up after\n"
	    "                        five failed starts in a row (exit status 1)\n"
	    "  --commands            take commands on standard input, answers on standard output:\n"
	    "                          restart TERM|KILL -> exited STATUS, then ready PID | failed "
	    "R\n"
	    "                          stop              -> exited STATUS (and the keeper exits)\n"
	    "                          store             -> store N NAME,NAME,...\n"
	    "                          wait-store NAME   -> stored NAME | failed timeout\n"
	    "  -h, --help            show this help and exit\n"
	    "  -V, --version         show the version and exit\n"
	    "\n"
	    "SIGHUP restarts PROGRAM (SIGTERM, then start it again with the store); SIGTERM and\n"
	    "SIGINT stop it and the keeper. Exit status: 0 after a stop, 1 on a set-up failure or\n"
	    "when --restart-on-failure gave up, 2 for bad usage.\n");
}

/* systemd's fdname_is_valid(). */
static bool fdname_ok(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (s[n] == ':' || !isprint((unsigned char)s[n]) || s[n] & 0x80)
			return false;
	return n > 0 && n <= FDNAME_MAX;
}

static void status_text(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "%d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "signal %d", WTERMSIG(st));
	else
		snprintf(buf, len, "status %#x", st);
}

/* ---- the store ---- */

/*
 * The same open file (systemd's same_fd()): a different inode says no at once (each stored fd's
 * is kept, so a store of thousands costs no system call per entry); else kcmp where allowed,
 * else the open flags of a file that is not a regular one (two opens of one regular file look
 * alike without kcmp).
 */
static bool same_file(const struct stored *s, int fd, const struct stat *sb)
{
	long r;

	if (s->dev != sb->st_dev || s->ino != sb->st_ino)
		return false;
	r = syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, s->fd, fd);
	if (r >= 0)
		return r == 0;
	return !S_ISREG(sb->st_mode) && fcntl(s->fd, F_GETFL) == fcntl(fd, F_GETFL);
}

/* Store fd (owned: stored or closed). */
static void store_add(int fd, const char *name, bool poll_it)
{
	struct stat sb;

	if (fstat(fd, &sb)) {
		logf_("fd store: fstat of %s: %s: refused", name, strerror(errno));
		close(fd);
		return;
	}
	for (int i = 0; i < k.nstore; i++) {
		if (same_file(&k.store[i], fd, &sb)) {
			logf_("fd store: fd for %s is %s already stored, not stored twice", name,
			      k.store[i].name);
			close(fd);
			return;
		}
	}
	if (k.nstore >= k.store_max) {
		logf_("fd store: full (%d fds, --fdstore-max): %s refused and closed", k.nstore,
		      name);
		close(fd);
		return;
	}
	if (k.nstore == k.store_cap) {
		int cap = k.store_cap ? 2 * k.store_cap : 16;
		struct stored *s = realloc(k.store, (size_t)cap * sizeof(*s));

		if (!s) {
			logf_("fd store: out of memory: %s refused and closed", name);
			close(fd);
			return;
		}
		k.store = s;
		k.store_cap = cap;
	}
	k.store[k.nstore].fd = fd;
	k.store[k.nstore].dev = sb.st_dev;
	k.store[k.nstore].ino = sb.st_ino;
	k.store[k.nstore].poll = poll_it;
	snprintf(k.store[k.nstore].name, sizeof(k.store[k.nstore].name), "%s", name);
	k.nstore++;
	logf_("fd store: stored %s%s (%d fds)", name, poll_it ? "" : " (not polled)", k.nstore);
}

static void store_drop(int i, const char *why)
{
	logf_("fd store: %s dropped: %s (%d fds left)", k.store[i].name, why, k.nstore - 1);
	close(k.store[i].fd);
	memmove(&k.store[i], &k.store[i + 1], (size_t)(k.nstore - i - 1) * sizeof(k.store[0]));
	k.nstore--;
}

static bool store_has(const char *name)
{
	for (int i = 0; i < k.nstore; i++)
		if (!strcmp(k.store[i].name, name))
			return true;
	return false;
}

/* ---- the service ---- */

/*
 * In the child: fds (the listen sockets, then the store) become 3, 4, ... and nothing else
 * stays open. Async-signal-safe calls only up to exec, apart from setenv (one thread).
 */
static void child_exec(void)
{
	int n = k.nlisten + k.nstore, base = 3 + n, fds[MAX_LISTEN + k.nstore + 1];
	char num[32], *names, *p;
	size_t len = 1;
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setpgid(0, 0);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	for (int i = 0; i < k.nlisten; i++)
		fds[i] = k.listen[i].fd;
	for (int i = 0; i < k.nstore; i++)
		fds[k.nlisten + i] = k.store[i].fd;
	/* first above every target, so that no dup2 below overwrites a source */
	for (int i = 0; i < n; i++) {
		fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, base);
		if (fds[i] < 0)
			_exit(126);
	}
	if (dup2(k.devnull, 0) < 0 || dup2(2, 1) < 0)
		_exit(126);
	for (int i = 0; i < n; i++)
		if (dup2(fds[i], 3 + i) < 0) /* dup2 leaves FD_CLOEXEC off */
			_exit(126);
	closefrom(base);

	for (int i = 0; i < k.nlisten; i++)
		len += strlen(k.listen[i].name) + 1;
	for (int i = 0; i < k.nstore; i++)
		len += strlen(k.store[i].name) + 1;
	names = malloc(len);
	if (!names)
		_exit(126);
	p = names;
	*p = '\0';
	for (int i = 0; i < n; i++) {
		const char *name = i < k.nlisten ? k.listen[i].name : k.store[i - k.nlisten].name;

		p += sprintf(p, "%s%s", i ? ":" : "", name);
	}
	if (n > 0) {
		snprintf(num, sizeof(num), "%d", n);
		setenv("LISTEN_FDS", num, 1);
		setenv("LISTEN_FDNAMES", names, 1);
		snprintf(num, sizeof(num), "%d", (int)getpid());
		setenv("LISTEN_PID", num, 1);
	} else {
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_FDNAMES");
		unsetenv("LISTEN_PID");
	}
	setenv("NOTIFY_SOCKET", k.notify_path, 1);
	execvp(k.argv[0], k.argv);
	dprintf(2, "semvisor-keeper: exec %s: %s\n", k.argv[0], strerror(errno));
	_exit(127);
}

static void start(void)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		logf_("fork: %s", strerror(errno));
		answer("failed fork: %s", strerror(errno));
		k.op = OP_NONE;
		return;
	}
	if (pid == 0)
		child_exec();
	setpgid(pid, pid);
	k.child = pid;
	k.op = OP_START;
	k.deadline = now_ms() + START_MS;
	logf_("started %s: pid %d, %d listen sockets and %d stored fds", k.argv[0], (int)pid,
	      k.nlisten, k.nstore);
}

static void signal_child(int sig)
{
	if (k.child <= 0)
		return;
	logf_("sending signal %d to %d", sig, (int)k.child);
	if (kill(-k.child, sig) && kill(k.child, sig))
		logf_("kill %d: %s", (int)k.child, strerror(errno));
}

/* stop: SIGTERM or SIGKILL, then restart or leave once it exited. */
static void stop(int sig, bool then_exit)
{
	k.then_exit = then_exit;
	if (k.child <= 0) {
		answer("exited %s", k.last_status[0] ? k.last_status : "none");
		if (then_exit) {
			k.op = OP_STOP;
			return; /* the loop leaves */
		}
		start();
		return;
	}
	signal_child(sig);
	k.op = OP_STOP;
	k.killed = sig == SIGKILL;
	k.deadline = now_ms() + (k.killed ? KILL_MS : STOP_MS);
}

/* ---- notifications ---- */

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* The value of "KEY=value" among the message's lines, or NULL. */
static const char *field(char *const *lines, int n, const char *key)
{
	size_t kl = strlen(key);
	const char *v = NULL;

	for (int i = 0; i < n; i++)
		if (!strncmp(lines[i], key, kl) && lines[i][kl] == '=')
			v = lines[i] + kl + 1;
	return v;
}

static void on_message(char *buf, int *fds, int nfds, pid_t sender)
{
	char *lines[64];
	const char *v, *name;
	int n = 0;

	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l && n < 64;
	     l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;

	if ((v = field(lines, n, "STATUS")))
		logf_("service status: %s", v);
	if ((v = field(lines, n, "STOPPING")) && !strcmp(v, "1"))
		logf_("service is stopping");
	if ((v = field(lines, n, "RELOADING")) && !strcmp(v, "1"))
		logf_("service is reloading");

	name = field(lines, n, "FDNAME");
	if ((v = field(lines, n, "FDSTOREREMOVE")) && !strcmp(v, "1")) {
		if (!name || !fdname_ok(name)) {
			logf_("FDSTOREREMOVE=1 without a valid FDNAME=: ignored");
		} else {
			int before = k.nstore;

			for (int i = k.nstore - 1; i >= 0; i--)
				if (!strcmp(k.store[i].name, name))
					store_drop(i, "FDSTOREREMOVE=1");
			if (before == k.nstore)
				logf_("FDSTOREREMOVE=1: no fd named %s", name);
		}
	}
	if (nfds > 0) {
		v = field(lines, n, "FDSTORE");
		if (!v || strcmp(v, "1")) {
			logf_("%d fds without FDSTORE=1: closed", nfds);
			close_fds(fds, nfds);
		} else if (name && !fdname_ok(name)) {
			logf_("FDSTORE=1 with an invalid FDNAME=%.64s: %d fds refused and closed",
			      name, nfds);
			close_fds(fds, nfds);
		} else {
			const char *p = field(lines, n, "FDPOLL");

			for (int i = 0; i < nfds; i++)
				store_add(fds[i], name ? name : "stored", !p || strcmp(p, "0"));
		}
	}
	if ((v = field(lines, n, "READY")) && !strcmp(v, "1")) {
		logf_("service %d is ready", (int)sender);
		k.failures = 0;
		if (k.op == OP_START) {
			k.op = OP_NONE;
			answer("ready %d", (int)sender);
		}
	}
	if (k.op == OP_WAIT_STORE && store_has(k.wait_name)) {
		k.op = OP_NONE;
		answer("stored %s", k.wait_name);
	}
}

/* One datagram; false when there is none left. */
static bool notify_read(void)
{
	char buf[NOTIFY_MAX + 1];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
	} ctl;
	struct iovec iov = { buf, NOTIFY_MAX };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof(ctl)
	};
	int fds[FDS_PER_MSG], nfds = 0;
	struct ucred *cred = NULL;
	ssize_t len = recvmsg(k.notify_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);

	if (len < 0) {
		if (errno != EAGAIN && errno != EINTR)
			logf_("notify socket: %s", strerror(errno));
		return errno == EINTR;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_RIGHTS) {
			int m = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (int i = 0; i < m && nfds < FDS_PER_MSG; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		} else if (c->cmsg_type == SCM_CREDENTIALS &&
			   c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
			cred = (struct ucred *)CMSG_DATA(c);
		}
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		logf_("notification with too many fds: refused");
		close_fds(fds, nfds);
		return true;
	}
	if ((size_t)len > NOTIFY_MAX) {
		logf_("notification of %zd bytes: refused", len);
		close_fds(fds, nfds);
		return true;
	}
	if (!cred || k.child <= 0 || cred->pid != k.child) {
		logf_("notification from pid %d, not the service's main pid %d: ignored%s",
		      cred ? (int)cred->pid : -1, (int)k.child, nfds ? ", its fds closed" : "");
		close_fds(fds, nfds);
		return true;
	}
	buf[len] = '\0';
	on_message(buf, fds, nfds, cred->pid);
	return true;
}

static void notify_drain(void)
{
	while (notify_read())
		;
}

/* ---- the child's end ---- */

#define RESTART_MS   1000 /* --restart-on-failure: the pause before a start */
#define MAX_FAILURES 5	  /* ... and the failed starts in a row it tries */

/* --restart-on-failure: the next start a second from now, unless too many failed. */
static void restart_later(void)
{
	if (!k.restart_on_failure || k.op != OP_NONE)
		return;
	if (k.failures >= MAX_FAILURES) {
		logf_("%d failed starts in a row: giving up", k.failures);
		k.op = OP_STOP;
		k.then_exit = true;
		k.failed = true;
		return;
	}
	logf_("starting it again in %d ms", RESTART_MS);
	k.op = OP_PAUSE;
	k.deadline = now_ms() + RESTART_MS;
}

static void on_child_exit(int st)
{
	/* its last words first: the state it stored on the way out */
	notify_drain();
	status_text(st, k.last_status, sizeof(k.last_status));
	logf_("service %d exited: %s", (int)k.child, k.last_status);
	/* whatever of its group is left goes with it (KillMode=control-group) */
	kill(-k.child, SIGKILL);
	k.child = 0;
	switch (k.op) {
	case OP_START:
		k.op = OP_NONE;
		answer("failed exited %s", k.last_status);
		k.failures++;
		restart_later();
		break;
	case OP_STOP:
		answer("exited %s", k.last_status);
		if (!k.then_exit)
			start();
		break;
	default:
		answer("exited %s", k.last_status);
		if (strcmp(k.last_status, "0"))
			restart_later();
	}
}

static void reap(void)
{
	int st;
	pid_t w;

	while ((w = waitpid(-1, &st, WNOHANG)) > 0)
		if (w == k.child)
			on_child_exit(st);
}

/* ---- commands ---- */

static void command(char *line)
{
	logf_("command: %s", line);
	if (!strcmp(line, "restart TERM") || !strcmp(line, "restart KILL")) {
		stop(!strcmp(line + 8, "TERM") ? SIGTERM : SIGKILL, false);
	} else if (!strcmp(line, "stop")) {
		stop(SIGTERM, true);
	} else if (!strcmp(line, "store")) {
		char out[CMD_MAX + 64];
		size_t o = (size_t)snprintf(out, sizeof(out), "store %d", k.nstore);

		for (int i = 0; i < k.nstore && o < sizeof(out); i++)
			o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", i ? "," : " ",
					      k.store[i].name);
		if (o >= sizeof(out))
			snprintf(out + sizeof(out) - 4, 4, "...");
		answer("%s", out);
	} else if (!strncmp(line, "wait-store ", 11) && fdname_ok(line + 11)) {
		snprintf(k.wait_name, sizeof(k.wait_name), "%.255s", line + 11);
		if (store_has(k.wait_name)) {
			answer("stored %s", k.wait_name);
		} else {
			k.op = OP_WAIT_STORE;
			k.deadline = now_ms() + WAIT_STORE_MS;
		}
	} else {
		answer("failed unknown command: %.100s", line);
	}
}

/* Take what stdin has; run complete lines while nothing is under way. */
static void commands(bool readable)
{
	if (readable && !k.cmd_eof) {
		ssize_t n = read(0, k.cmd + k.cmd_len, sizeof(k.cmd) - k.cmd_len);

		if (n > 0)
			k.cmd_len += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			k.cmd_eof = true;
	}
	while (k.op == OP_NONE) {
		char *nl = memchr(k.cmd, '\n', k.cmd_len);
		size_t used;

		if (!nl) {
			if (k.cmd_len == sizeof(k.cmd)) {
				answer("failed command too long");
				k.cmd_len = 0;
			}
			if (k.cmd_eof) {
				logf_("end of commands: stopping");
				stop(SIGTERM, true);
			}
			return;
		}
		*nl = '\0';
		used = (size_t)(nl - k.cmd) + 1;
		if (nl > k.cmd && nl[-1] == '\r')
			nl[-1] = '\0';
		if (k.cmd[0])
			command(k.cmd);
		memmove(k.cmd, k.cmd + used, k.cmd_len - used);
		k.cmd_len -= used;
	}
}

static void on_deadline(void)
{
	switch (k.op) {
	case OP_START:
		logf_("service %d not ready in %d s", (int)k.child, START_MS / 1000);
		k.op = OP_NONE;
		answer("failed timeout");
		if (k.restart_on_failure) {
			/* a failed start: its exit (op none, not status 0) starts it again */
			k.failures++;
			signal_child(SIGKILL);
		}
		break;
	case OP_STOP:
		if (!k.killed) {
			logf_("service %d did not stop in %d s: killing it", (int)k.child,
			      STOP_MS / 1000);
			signal_child(SIGKILL);
			k.killed = true;
			k.deadline = now_ms() + KILL_MS;
		} else {
			/* a process SIGKILL does not end (stuck in the kernel): give it up */
			logf_("service %d does not die: given up", (int)k.child);
			k.child = 0;
			answer("exited unknown");
			if (!k.then_exit)
				start();
		}
		break;
	case OP_WAIT_STORE:
		k.op = OP_NONE;
		answer("failed timeout");
		break;
	case OP_PAUSE:
		start();
		break;
	default:
		break;
	}
}

/* ---- set-up ---- */

static int listen_on(struct listen_sock *l)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat sb;
	int fd;

	if (strlen(l->path) >= sizeof(sa.sun_path)) {
		logf_("--listen %s: path too long", l->path);
		return -1;
	}
	memcpy(sa.sun_path, l->path, strlen(l->path));
	/* a stale socket file (a keeper killed before it cleaned up), as a socket unit does */
	if (!lstat(l->path, &sb) && S_ISSOCK(sb.st_mode))
		unlink(l->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(l->path, 0666) ||
	    listen(fd, SOMAXCONN)) {
		logf_("--listen %s=%s: %s", l->name, l->path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	l->fd = fd;
	return 0;
}

static int notify_setup(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *tmp = getenv("TMPDIR");
	int on = 1, rcvbuf = 8 << 20;

	/* in $TMPDIR if its path leaves room for the socket's name, else in /tmp */
	if (!tmp || !*tmp || strlen(tmp) + sizeof("/semvisor-keeper-XXXXXX") > sizeof(k.dir))
		tmp = "/tmp";
	snprintf(k.dir, sizeof(k.dir), "%s/semvisor-keeper-XXXXXX", tmp);
	if (!mkdtemp(k.dir)) {
		logf_("mkdtemp %s: %s", k.dir, strerror(errno));
		k.dir[0] = '\0';
		return -1;
	}
	/* the service may run as another user: the directory must let it reach the socket */
	chmod(k.dir, 0755);
	snprintf(k.notify_path, sizeof(k.notify_path), "%s/notify", k.dir);
	memcpy(sa.sun_path, k.notify_path, strlen(k.notify_path) + 1);
	k.notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (k.notify_fd < 0 || bind(k.notify_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(k.notify_path, 0666) ||
	    setsockopt(k.notify_fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on))) {
		logf_("notify socket %s: %s", k.notify_path, strerror(errno));
		return -1;
	}
	/* systemd's 8 MiB: a service that stores thousands of fds at once must not block */
	if (setsockopt(k.notify_fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		setsockopt(k.notify_fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	return 0;
}

static void cleanup(void)
{
	for (int i = 0; i < k.nlisten; i++) {
		if (k.listen[i].fd >= 0) {
			close(k.listen[i].fd);
			unlink(k.listen[i].path);
		}
	}
	while (k.nstore > 0)
		store_drop(k.nstore - 1, "the keeper leaves");
	if (k.notify_fd >= 0)
		close(k.notify_fd);
	if (k.notify_path[0])
		unlink(k.notify_path);
	if (k.dir[0])
		rmdir(k.dir);
}

static int parse_args(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;

		if (!strcmp(a, "--"))
			break;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("semvisor-keeper %s\n", SEMVISOR_VERSION);
			exit(0);
		}
		if (!strcmp(a, "--commands")) {
			k.commands = true;
			continue;
		}
		if (!strcmp(a, "--restart-on-failure")) {
			k.restart_on_failure = true;
			continue;
		}
		if (!strncmp(a, "--", 2) && strchr(a, '=')) {
			v = strchr(a, '=') + 1;
		} else if (!strcmp(a, "--listen") || !strcmp(a, "--fdstore-max") ||
			   !strcmp(a, "--log")) {
			if (i + 1 >= argc)
				goto bad;
			v = argv[++i];
		} else {
			goto bad;
		}
		if (!strncmp(a, "--listen", 8) && (a[8] == '\0' || a[8] == '=')) {
			const char *eq = strchr(v, '=');
			struct listen_sock *l = &k.listen[k.nlisten];

			if (!eq || k.nlisten == MAX_LISTEN || (size_t)(eq - v) > FDNAME_MAX ||
			    strlen(eq + 1) >= sizeof(l->path) || !eq[1])
				goto bad;
			snprintf(l->name, sizeof(l->name), "%.*s", (int)(eq - v), v);
			snprintf(l->path, sizeof(l->path), "%s", eq + 1);
			l->fd = -1;
			if (!fdname_ok(l->name))
				goto bad;
			k.nlisten++;
		} else if (!strncmp(a, "--fdstore-max", 13) && (a[13] == '\0' || a[13] == '=')) {
			char *end;
			long m = strtol(v, &end, 10);

			if (!*v || *end || m < 0 || m > 1000000)
				goto bad;
			k.store_max = (int)m;
		} else if (!strncmp(a, "--log", 5) && (a[5] == '\0' || a[5] == '=')) {
			k.log = fopen(v, "ae");
			if (!k.log) {
				fprintf(stderr, "semvisor-keeper: %s: %s\n", v, strerror(errno));
				exit(1);
			}
		} else {
			goto bad;
		}
	}
	if (i + 1 >= argc)
		goto bad;
	k.argv = argv + i + 1;
	return 0;
bad:
	fprintf(stderr, "semvisor-keeper: bad usage%s%s\n", i < argc ? " at " : "",
		i < argc ? argv[i] : "");
	usage(stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	sigset_t sigs;

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	/* the store may hold thousands of fds: take what the hard limit allows */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	k.sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	k.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (k.commands)
		fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	if (k.sig_fd < 0 || k.devnull < 0 || notify_setup()) {
		logf_("set-up failed: %s", strerror(errno));
		cleanup();
		return 1;
	}
	for (int i = 0; i < k.nlisten; i++) {
		if (listen_on(&k.listen[i])) {
			cleanup();
			return 1;
		}
	}
	logf_("notify socket %s; %d listen sockets; store up to %d fds", k.notify_path, k.nlisten,
	      k.store_max);
	start();

	for (;;) {
		struct pollfd *pf = calloc((size_t)(3 + k.nstore), sizeof(*pf));
		int npf = 3, timeout = -1, r;
		bool cmd_ready;

		if (!pf) {
			logf_("out of memory");
			signal_child(SIGKILL);
			cleanup();
			return 1;
		}
		pf[0] = (struct pollfd){ k.notify_fd, POLLIN, 0 };
		pf[1] = (struct pollfd){ k.sig_fd, POLLIN, 0 };
		pf[2] = (struct pollfd){ k.commands && !k.cmd_eof ? 0 : -1, POLLIN, 0 };
		for (int i = 0; i < k.nstore; i++)
			pf[npf++] = (struct pollfd){ k.store[i].poll ? k.store[i].fd : -1, 0, 0 };
		if (k.op != OP_NONE) {
			int64_t left = k.deadline - now_ms();

			timeout = left < 0 ? 0 : (int)left;
		}
		r = poll(pf, (nfds_t)npf, timeout);
		if (r < 0 && errno != EINTR) {
			logf_("poll: %s", strerror(errno));
			free(pf);
			signal_child(SIGKILL);
			cleanup();
			return 1;
		}
		/* notifications before deaths: a service's last message counts */
		if (r > 0 && pf[0].revents)
			notify_drain();
		/* stored fds that hung up, from the end (the indices of the earlier ones hold) */
		for (int i = npf - 1; r > 0 && i >= 3; i--)
			if (pf[i].revents & (POLLHUP | POLLERR | POLLNVAL))
				store_drop(i - 3,
					   pf[i].revents & POLLHUP ? "it hung up" : "poll error");
		if (r > 0 && pf[1].revents) {
			struct signalfd_siginfo si;

			while (read(k.sig_fd, &si, sizeof(si)) == sizeof(si)) {
				/* what `systemctl restart` does, once a start or stop under way is
				   done */
				if (si.ssi_signo == SIGHUP) {
					logf_("SIGHUP: restarting the service");
					k.hup = true;
				}
				if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) &&
				    !(k.op == OP_STOP && k.then_exit)) {
					logf_("signal %d: stopping", (int)si.ssi_signo);
					k.cmd_eof = true;
					k.cmd_len = 0;
					if (k.op == OP_STOP)
						k.then_exit = true;
					else
						k.op = OP_NONE;
				}
			}
			reap();
		}
		cmd_ready = r > 0 && pf[2].revents;
		free(pf);
		if (k.op != OP_NONE && now_ms() >= k.deadline)
			on_deadline();
		if (k.hup && (k.op == OP_NONE || k.op == OP_PAUSE)) {
			k.hup = false;
			k.op = OP_NONE;
			stop(SIGTERM, false);
		}
		commands(cmd_ready);
		if (k.op == OP_STOP && k.then_exit && k.child <= 0)
			break;
	}
	logf_("stopped");
	cleanup();
	return k.failed ? 1 : 0;
}
