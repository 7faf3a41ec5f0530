/* SPDX-License-Identifier: MIT */
/*
 * Shared by the daemon tests (tests/60-daemon-*.c): start semvisord and the programs it serves,
 * with their output in files, bounded waits, and cleanup that also runs when an assertion fails.
 *
 * Binaries: the daemon is $SEMVISORD if set, else $O/semvisord; semvisor-run is $O/semvisor-run;
 * test programs are $O/tests/prog/NAME ($O defaults to "build").
 *
 * Isolation. Every test that serves host programs first calls dh_setup(), which moves the test's
 * own process (Criterion runs each test in a process of its own) into a fresh IPC namespace, so
 * the daemon and every program it starts share that namespace and nothing else: the host's sets
 * cannot interfere, and two tests running in parallel cannot meet. Each test has its own
 * temporary directory for sockets, logs and configuration.
 *
 * Cleanup. Every child is started in a process group of its own, with PR_SET_PDEATHSIG so that
 * it dies with the test even if the test is killed; dh_cleanup() (the tests' .fini, which
 * Criterion runs after a failed assertion too) kills whatever is left, runs the registered
 * cleanup commands (runc delete -f, ...) and removes the temporary directory.
 *
 * Everything is static: each test file includes this once.
 */
#ifndef SV_TEST_DAEMON_HARNESS_H
#define SV_TEST_DAEMON_HARNESS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DH_MAX_PROCS   256
#define DH_MAX_CLEANUP 8

static char dh_dir[128];	    /* this test's temporary directory */
static pid_t dh_pids[DH_MAX_PROCS]; /* started and not yet reaped */
static char *dh_cleanups[DH_MAX_CLEANUP];

static inline const char *dh_o(void)
{
	const char *o = getenv("O");

	return o && *o ? o : "build";
}

/* An absolute path for a binary under $O: the daemon and runc may run from another cwd. */
static inline const char *dh_bin(const char *rel)
{
	static __thread char path[4][PATH_MAX];
	static __thread int slot;
	char tmp[PATH_MAX];
	char *p = path[slot++ % 4];

	snprintf(tmp, sizeof(tmp), "%s/%s", dh_o(), rel);
	if (!realpath(tmp, p))
		snprintf(p, PATH_MAX, "%s", tmp);
	return p;
}

/* The daemon under test: $SEMVISORD, or $O/semvisord (absolute). */
static inline const char *dh_daemon_bin(void)
{
	static char path[PATH_MAX];
	const char *d = getenv("SEMVISORD");

	if (d && *d)
		return d;
	snprintf(path, sizeof(path), "%s", dh_bin("semvisord"));
	return path;
}

static inline int64_t dh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void dh_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* A path in the test's directory (a few kept at once, for building argument lists). */
static inline const char *dh_path(const char *name)
{
	static __thread char path[8][PATH_MAX];
	static __thread int slot;
	char *p = path[slot++ % 8];

	snprintf(p, PATH_MAX, "%s/%s", dh_dir, name);
	return p;
}

static inline char *dh_slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	char chunk[4096];

	if (f) {
		while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
			if (len + n + 1 > cap) {
				cap = (len + n + 1) * 2;
				buf = realloc(buf, cap);
				cr_assert(buf);
			}
			memcpy(buf + len, chunk, n);
			len += n;
		}
		fclose(f);
	}
	if (!buf)
		buf = calloc(1, 1);
	else
		buf[len] = '\0';
	return buf;
}

/* The last n lines of text (a pointer into it), for messages quoting a long log. */
static inline const char *dh_tail(const char *text, int n)
{
	const char *p = text + strlen(text);

	if (p > text && p[-1] == '\n')
		p--;
	while (p > text && n > 0)
		if (*--p == '\n')
			n--;
	return p == text ? p : p + 1;
}

static inline void dh_write_file(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void dh_write_file(const char *path, const char *fmt, ...)
{
	FILE *f = fopen(path, "we");
	va_list ap;

	cr_assert(f, "cannot write %s: %s", path, strerror(errno));
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	cr_assert(fclose(f) == 0);
}

static inline int dh_count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static inline void dh_track(pid_t pid)
{
	for (int i = 0; i < DH_MAX_PROCS; i++) {
		if (dh_pids[i] == 0) {
			dh_pids[i] = pid;
			return;
		}
	}
	cr_assert_fail("more than %d children at once", DH_MAX_PROCS);
}

static inline void dh_untrack(pid_t pid)
{
	for (int i = 0; i < DH_MAX_PROCS; i++)
		if (dh_pids[i] == pid)
			dh_pids[i] = 0;
}

/* A command run by dh_cleanup() (through sh), e.g. "runc delete -f ID". */
static inline void dh_on_cleanup(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void dh_on_cleanup(const char *fmt, ...)
{
	va_list ap;

	for (int i = 0; i < DH_MAX_CLEANUP; i++) {
		if (!dh_cleanups[i]) {
			va_start(ap, fmt);
			cr_assert(vasprintf(&dh_cleanups[i], fmt, ap) > 0);
			va_end(ap);
			return;
		}
	}
	cr_assert_fail("too many cleanup commands");
}

/*
 * Start argv[0] with stdin from /dev/null and stdout+stderr appended to out (NULL: /dev/null),
 * env (NULL-terminated "NAME=value" list, may be NULL) added to the environment. Its own process
 * group (a timeout kills everything it started); killed if the test process dies.
 */
static inline pid_t dh_spawn_env(const char *const *argv, const char *out, const char *const *env)
{
	pid_t parent = getpid(), pid;

	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		int o = out ? open(out, O_WRONLY | O_CREAT | O_APPEND, 0644)
			    : open("/dev/null", O_WRONLY);
		sigset_t none;

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(120);
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (in < 0 || o < 0 || dup2(in, 0) < 0 || dup2(o, 1) < 0 || dup2(o, 2) < 0)
			_exit(121);
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		/* nothing of Criterion's may leak (its pipes would stay open) */
		closefrom(3);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);
	dh_track(pid);
	return pid;
}

static inline pid_t dh_spawn(const char *const *argv, const char *out)
{
	return dh_spawn_env(argv, out, NULL);
}

/* Wait up to timeout_ms for pid; on timeout kill its group and return false. */
static inline bool dh_wait(pid_t pid, int timeout_ms, int *status)
{
	int64_t end = dh_now_ms() + timeout_ms;
	int st = 0;

	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid) {
			dh_untrack(pid);
			if (status)
				*status = st;
			return true;
		}
		cr_assert(w == 0 || errno == EINTR, "waitpid(%d): %s", (int)pid, strerror(errno));
		if (dh_now_ms() >= end) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			dh_untrack(pid);
			if (status)
				*status = st;
			return false;
		}
		dh_sleep_ms(5);
	}
}

/* "exit 3", "signal 9", for messages. */
static inline const char *dh_status_text(int st)
{
	static __thread char buf[4][48];
	static __thread int slot;
	char *b = buf[slot++ % 4];

	if (WIFEXITED(st))
		snprintf(b, 48, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(b, 48, "signal %d", WTERMSIG(st));
	else
		snprintf(b, 48, "status %#x", st);
	return b;
}

/* Run argv to completion (bounded): its exit status (-1: timed out), its output in *out. */
static inline int dh_run(const char *const *argv, int timeout_ms, char **out)
{
	static int seq;
	char name[64];
	const char *path;
	int st;
	bool done;

	snprintf(name, sizeof(name), "run-%d.out", seq++);
	path = dh_path(name);
	unlink(path);
	done = dh_wait(dh_spawn(argv, path), timeout_ms, &st);
	if (out)
		*out = dh_slurp(path);
	if (!done)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * Wait until the file at path contains what (at least count times): true, or false after
 * timeout_ms. A daemon's log is the usual file: it writes each line at once (line-buffered).
 */
static inline bool dh_wait_file(const char *path, const char *what, int count, int timeout_ms)
{
	int64_t end = dh_now_ms() + timeout_ms;

	for (;;) {
		char *text = dh_slurp(path);
		bool ok = dh_count(text, what) >= count;

		free(text);
		if (ok)
			return true;
		if (dh_now_ms() >= end)
			return false;
		dh_sleep_ms(10);
	}
}

/*
 * A file of the source tree (e.g. "systemd/install.sh"): next to this header (its path as
 * compiled, relative to the working directory the build ran in), in the working directory, or
 * two levels above the test binary ($O/tests/NAME with O=build). NULL if none is readable.
 */
static inline const char *dh_src(const char *rel)
{
	static __thread char path[2][PATH_MAX];
	static __thread int slot;
	char here[PATH_MAX], exe[PATH_MAX], *p = path[slot++ % 2], *slash;
	ssize_t n;

	snprintf(here, sizeof(here), "%s", __FILE__);
	slash = strrchr(here, '/');
	if (slash) {
		*slash = '\0';
		snprintf(p, PATH_MAX, "%.2000s/../%.2000s", here, rel);
		if (!access(p, R_OK))
			return p;
	}
	snprintf(p, PATH_MAX, "%s", rel);
	if (!access(p, R_OK))
		return p;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		for (int up = 0; up < 3 && (slash = strrchr(exe, '/')); up++)
			*slash = '\0';
		snprintf(p, PATH_MAX, "%.2000s/%.2000s", exe, rel);
		if (!access(p, R_OK))
			return p;
	}
	return NULL;
}

/* ---- the daemon ---- */

/*
 * An empty configuration file: the daemon reads /etc/semvisor/semvisord.conf by default, and a
 * machine where semvisor is installed may have one (namespaces = shared would break every
 * isolation test), so the tests always name a file of their own.
 */
static inline const char *dh_empty_config(void)
{
	const char *path = dh_path("empty.conf");

	if (access(path, F_OK))
		dh_write_file(path, "# the daemon tests' configuration: the defaults\n");
	return path;
}

/* A command the daemon runs under (e.g. setpriv ...), NULL-terminated; NULL: none. */
static const char *const *dh_daemon_wrap;

struct dh_daemon {
	pid_t pid;
	char sock[PATH_MAX]; /* agent socket */
	char log[PATH_MAX];
};

/*
 * Start semvisord with its log in dir/NAME.log, its agent socket at dir/NAME.sock (unless
 * args name another), no control socket and an empty configuration file (args may say
 * otherwise), plus args (NULL-terminated) and env. Waits until it logs "serving:" (it is accepting then) and returns true; false if it
 * exited or did not get there in time (the status in *status when it exited).
 */
static inline bool dh_daemon_start_env(struct dh_daemon *d, const char *name,
				       const char *const *args, const char *const *env, int *status)
{
	const char *argv[64];
	char sockopt[PATH_MAX + 32], confopt[PATH_MAX + 32];
	int n = 0, st;
	int64_t end = dh_now_ms() + 10000;

	snprintf(d->sock, sizeof(d->sock), "%s/%s.sock", dh_dir, name);
	snprintf(d->log, sizeof(d->log), "%s/%s.log", dh_dir, name);
	snprintf(sockopt, sizeof(sockopt), "--agent-socket=%s", d->sock);
	for (int i = 0; dh_daemon_wrap && dh_daemon_wrap[i] && n < 20; i++)
		argv[n++] = dh_daemon_wrap[i];
	argv[n++] = dh_daemon_bin();
	/* never the machine's /etc/semvisor/semvisord.conf (args may name another file) */
	snprintf(confopt, sizeof(confopt), "--config=%s", dh_empty_config());
	argv[n++] = confopt;
	argv[n++] = sockopt;
	argv[n++] = "--control-socket=";
	for (int i = 0; args && args[i] && n < 62; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	unlink(d->log);
	d->pid = dh_spawn_env(argv, d->log, env);
	for (;;) {
		char *text = dh_slurp(d->log);
		bool up = strstr(text, "semvisord: serving:") != NULL;

		free(text);
		if (up)
			return true;
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			dh_untrack(d->pid);
			d->pid = 0;
			if (status)
				*status = st;
			return false;
		}
		if (dh_now_ms() >= end)
			return false;
		dh_sleep_ms(5);
	}
}

static inline void dh_daemon_start(struct dh_daemon *d, const char *name, const char *const *args)
{
	int st = 0;
	bool up = dh_daemon_start_env(d, name, args, NULL, &st);
	char *log = dh_slurp(d->log);

	cr_assert(up, "semvisord did not start (%s); its log:\n%s",
		  d->pid ? "no 'serving:' line within 10 s" : dh_status_text(st), log);
	free(log);
}

/* SIGTERM and wait (bounded): the exit status, or -1 if it had to be killed. */
static inline int dh_daemon_stop(struct dh_daemon *d)
{
	int st;
	bool done;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	done = dh_wait(d->pid, 5000, &st);
	d->pid = 0;
	if (!done)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * Fail the test if the daemon is no longer running, saying how it ended: a crash of the daemon
 * otherwise shows only as its clients' calls failing with ENOSYS (their listeners closed).
 * dh_daemon_gone() gives that message, or NULL while it runs.
 */
static inline char *dh_daemon_gone(struct dh_daemon *d)
{
	char *log, *msg = NULL;
	int st;

	if (d->pid <= 0 || waitpid(d->pid, &st, WNOHANG) != d->pid)
		return NULL;
	dh_untrack(d->pid);
	d->pid = 0;
	log = dh_slurp(d->log);
	cr_assert(asprintf(&msg, "semvisord is gone (%s%s); its log:\n%s", dh_status_text(st),
			   WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? ": it crashed" : "",
			   log) > 0);
	free(log);
	return msg;
}

#define dh_daemon_alive(d)                                                                         \
	do {                                                                                       \
		char *gone_ = dh_daemon_gone(d);                                                   \
		cr_assert(!gone_, "%s", gone_);                                                    \
	} while (0)

static inline char *dh_log(const struct dh_daemon *d)
{
	return dh_slurp(d->log);
}

/* The value of a "Name:\t123" line of /proc/PID/status, or -1. */
static inline long dh_proc_status(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t fl = strlen(field);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':')
			v = strtol(line + fl + 1, NULL, 10);
	fclose(f);
	return v;
}

/* ---- programs under semvisor-run --daemon ---- */

/*
 * argv for `semvisor-run --daemon=SOCK -- $O/tests/prog/PROG ARGS...`, built in c (which must
 * outlive the spawn).
 */
struct dh_cmd {
	const char *argv[16];
	char daemon_opt[PATH_MAX + 16];
	char run[PATH_MAX];
	char prog[PATH_MAX];
};

static inline const char *const *dh_prog_argv(struct dh_cmd *c, const char *sock, const char *prog,
					      const char *const *args)
{
	int n = 0;

	snprintf(c->daemon_opt, sizeof(c->daemon_opt), "--daemon=%s", sock);
	snprintf(c->run, sizeof(c->run), "%s", dh_bin("semvisor-run"));
	snprintf(c->prog, sizeof(c->prog), "%s/tests/prog/%s", dh_o(), prog);
	c->argv[n++] = c->run;
	c->argv[n++] = c->daemon_opt;
	c->argv[n++] = "--";
	c->argv[n++] = c->prog;
	for (int i = 0; args[i] && n < 15; i++)
		c->argv[n++] = args[i];
	c->argv[n] = NULL;
	return c->argv;
}

/* Run daemon-sem ARGS under the daemon at sock: exit status (-1 timed out) and output. */
#define DH_SEM(sock, out, ...)                                                                     \
	({                                                                                         \
		struct dh_cmd c_;                                                                  \
		dh_run(dh_prog_argv(&c_, (sock), "daemon-sem",                                     \
				    (const char *const[]){ __VA_ARGS__, NULL }),                   \
		       30000, (out));                                                              \
	})

/* Run daemon-sem ARGS inside pid's IPC namespace (nsenter), under the daemon at sock. */
static inline int dh_sem_in_ns(pid_t pid, const char *sock, char **out, const char *const *args)
{
	struct dh_cmd c;
	const char *argv[24];
	char target[32];
	int n = 0;

	snprintf(target, sizeof(target), "--target=%d", (int)pid);
	argv[n++] = "nsenter";
	argv[n++] = target;
	argv[n++] = "--ipc";
	argv[n++] = "--";
	for (const char *const *a = dh_prog_argv(&c, sock, "daemon-sem", args); *a && n < 23; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	return dh_run(argv, 30000, out);
}

/* Skip unless setpriv(1) can run semvisor-run as user 1000 (tenants of other users). */
static inline void dh_need_setpriv(void)
{
	char *out;
	const char *argv[] = { "setpriv",
			       "--reuid=1000",
			       "--regid=1000",
			       "--clear-groups",
			       dh_bin("semvisor-run"),
			       "--version",
			       NULL };

	if (system("setpriv --version >/dev/null 2>&1") != 0)
		cr_skip_test("setpriv is not installed (Debian package util-linux)");
	if (dh_run(argv, 10000, &out) != 0)
		cr_skip_test("user 1000 cannot run %s here: %s", dh_bin("semvisor-run"), out);
	free(out);
}

/* ---- setup and cleanup ---- */

static inline int dh_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static inline void dh_cleanup(void)
{
	for (int i = 0; i < DH_MAX_PROCS; i++) {
		if (dh_pids[i] > 0) {
			kill(-dh_pids[i], SIGKILL);
			kill(dh_pids[i], SIGKILL);
			waitpid(dh_pids[i], NULL, 0);
			dh_pids[i] = 0;
		}
	}
	for (int i = 0; i < DH_MAX_CLEANUP; i++) {
		if (dh_cleanups[i]) {
			if (system(dh_cleanups[i]) != 0) {
				/* already gone, or never created: nothing to undo */
			}
			free(dh_cleanups[i]);
			dh_cleanups[i] = NULL;
		}
	}
	if (dh_dir[0] && !getenv("DH_KEEP"))
		nftw(dh_dir, dh_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	dh_dir[0] = '\0';
}

/* pid's IPC namespace as the daemon names it (and the kernel: readlink /proc/PID/ns/ipc). */
static inline void dh_ns_name(pid_t pid, char *buf, size_t len)
{
	char path[64];
	struct stat sb;

	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)pid);
	cr_assert_eq(stat(path, &sb), 0, "%s: %s", path, strerror(errno));
	snprintf(buf, len, "ipc:[%llu]", (unsigned long long)sb.st_ino);
}

/* A temporary directory and, with ipc_ns, a fresh IPC namespace for this test's process. */
static inline void dh_setup_ns(bool ipc_ns)
{
	snprintf(dh_dir, sizeof(dh_dir), "/tmp/semvisor-daemon-test-XXXXXX");
	cr_assert(mkdtemp(dh_dir), "mkdtemp: %s", strerror(errno));
	chmod(dh_dir, 0755);
	signal(SIGPIPE, SIG_IGN);
	if (ipc_ns)
		cr_assert(unshare(CLONE_NEWIPC) == 0, "unshare(CLONE_NEWIPC): %s (run as root)",
			  strerror(errno));
	if (access(dh_daemon_bin(), X_OK))
		cr_assert_fail("no daemon at %s (build it: make %s/semvisord, or set SEMVISORD)",
			       dh_daemon_bin(), dh_o());
}

static inline void dh_setup(void)
{
	dh_setup_ns(true);
}

#endif
