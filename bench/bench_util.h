/* SPDX-License-Identifier: MIT */
/*
 * bench/bench_util.h - what the bench programs share: all of it for the workload programs
 * (semop_multi, lockunlock, bulkwake, scale), the small helpers (messages, clock, parsing) for floor.
 *
 * Every workload program is its own target binary, as bench/floor is: the driver (the process the
 * user starts) runs, for each row, "[CMD...] /proc/self/exe --target ... --result-fd N" in a child
 * process and reads the target's report from the pipe on fd N. Row "native" runs the target
 * directly; each "--run-under[=LABEL] CMD..." group on the command line adds a row run inside CMD
 * (e.g. "semvisor-run --"), so the same code is measured under the kernel and under each
 * supervisor, in the same run, by the same clock (the target's CLOCK_MONOTONIC, read through the
 * vDSO so no filter ever sees it).
 *
 * The report is text: lines the workload defines, then "end". A launcher only has to pass an
 * inherited fd through exec. semvisor-run's supervisor inherits a copy of the write end too and
 * outlives the program by a moment, so EOF cannot mark the end of the report; "end" does.
 *
 * Never hanging, never leaking: each target runs in its own process group and (when root) its own
 * IPC namespace, under a deadline after which the group is SIGKILLed; SIGINT/SIGTERM/SIGHUP to the
 * driver take the current target along; the target has PR_SET_PDEATHSIG and its own alarm().
 *
 * Header-only (static functions), because the Makefile builds every bench/NAME.c into a program of
 * its own and links nothing else from bench/.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#define BU_UNUSED     __attribute__((unused))
#define BU_MAX_ROWS   16
#define BU_MAX_CMD    64
#define BU_REPORT_MAX (1 << 20)

/* The program's name for messages ("semop_multi: ..."); set by bu_init(). */
static const char *bu_prog = "bench";

/* ---- small helpers ---------------------------------------------------------------------------- */

__attribute__((format(printf, 1, 2), noreturn, unused)) static void bu_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", bu_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* A message from a target process, prefixed so it cannot be mistaken for the driver's. */
__attribute__((format(printf, 1, 2), unused)) static void bu_tmsg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: target: ", bu_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

BU_UNUSED static uint64_t bu_now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0) {
		/* Cannot happen with CLOCK_MONOTONIC; a bench with no clock has nothing to say. */
		perror("clock_gettime");
		_exit(2);
	}
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

BU_UNUSED static void bu_sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

BU_UNUSED static int bu_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int bu_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median, min and max of v[0..n-1] (v is left untouched). n == 0 gives NaN. */
struct bu_stat {
	double med, min, max;
	int n;
};

BU_UNUSED static struct bu_stat bu_stats(const double *v, int n)
{
	struct bu_stat s = { .med = NAN, .min = NAN, .max = NAN, .n = n };
	double *t;

	if (n <= 0)
		return s;
	t = malloc(sizeof(double) * (size_t)n);
	if (t == NULL)
		bu_die("out of memory");
	memcpy(t, v, sizeof(double) * (size_t)n);
	qsort(t, (size_t)n, sizeof(double), bu_cmp_double);
	s.min = t[0];
	s.max = t[n - 1];
	s.med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	free(t);
	return s;
}

BU_UNUSED static long bu_parse_long(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < lo || v > hi)
		bu_die("%s: expected an integer in [%ld, %ld], got \"%s\"", opt, lo, hi, s);
	return v;
}

/* ---- the options every workload program takes ------------------------------------------------ */

struct bu_opts {
	int reps;	 /* --reps N; 0: the program's default */
	double timeout;	 /* --timeout SEC; 0: the program's default */
	bool quick;	 /* --quick */
	const char *out; /* --out FILE */
	bool target;	 /* --target: run as the measured target, internal */
	int result_fd;	 /* --result-fd N: the target's report pipe, internal */
};

/* getopt_long values of the shared options; a program numbers its own from BU_OPT_OWN. */
enum {
	BU_OPT_REPS = 256,
	BU_OPT_QUICK,
	BU_OPT_OUT,
	BU_OPT_TIMEOUT,
	BU_OPT_TARGET,
	BU_OPT_RESULT_FD,
	BU_OPT_OWN,
};

#define BU_LONG_OPTS                                                                               \
	{ "reps", required_argument, NULL, BU_OPT_REPS },                                          \
	    { "quick", no_argument, NULL, BU_OPT_QUICK },                                          \
	    { "out", required_argument, NULL, BU_OPT_OUT },                                        \
	    { "timeout", required_argument, NULL, BU_OPT_TIMEOUT },                                \
	    { "target", no_argument, NULL, BU_OPT_TARGET },                                        \
	{                                                                                          \
		"result-fd", required_argument, NULL, BU_OPT_RESULT_FD                             \
	}

BU_UNUSED static void bu_opts_init(struct bu_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->result_fd = -1;
}

/* Takes getopt_long's value c if it is a shared option; false if it is not. */
BU_UNUSED static bool bu_opt(struct bu_opts *o, int c, const char *arg, int max_reps)
{
	switch (c) {
	case BU_OPT_REPS:
		o->reps = (int)bu_parse_long("--reps", arg, 1, max_reps);
		return true;
	case BU_OPT_QUICK:
		o->quick = true;
		return true;
	case BU_OPT_OUT:
		o->out = arg;
		return true;
	case BU_OPT_TIMEOUT:
		o->timeout = (double)bu_parse_long("--timeout", arg, 1, 86400);
		return true;
	case BU_OPT_TARGET:
		o->target = true;
		return true;
	case BU_OPT_RESULT_FD:
		o->result_fd = (int)bu_parse_long("--result-fd", arg, 0, INT_MAX);
		return true;
	}
	return false;
}

/*
 * After getopt_long: no argument may be left (a wrapped command goes after --run-under), and
 * what was not given takes the suite's default (3 repetitions with --quick, else 5) or the
 * program's (timeout, in seconds).
 */
BU_UNUSED static void bu_opts_done(struct bu_opts *o, int argc, char **argv, double timeout)
{
	if (optind < argc)
		bu_die("unexpected argument \"%s\" (a wrapped command goes after --run-under)",
		       argv[optind]);
	if (o->reps == 0)
		o->reps = o->quick ? 3 : 5;
	if (o->timeout == 0)
		o->timeout = timeout;
}

BU_UNUSED static double bu_parse_seconds(const char *opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end != '\0' || !(v >= 0.001 && v <= 3600))
		bu_die("%s: expected seconds in [0.001, 3600], got \"%s\"", opt, s);
	return v;
}

/* "1,2,4,8" -> v[], at most max entries, each in [lo, hi]; returns the count. */
BU_UNUSED static int bu_parse_list(const char *opt, const char *s, int *v, int max, long lo,
				   long hi)
{
	int n = 0;

	while (*s) {
		char *end;
		long x;

		errno = 0;
		x = strtol(s, &end, 10);
		if (errno || end == s || (*end != ',' && *end != '\0') || x < lo || x > hi)
			bu_die("%s: expected a comma-separated list of integers in [%ld, %ld], got "
			       "\"%s\"",
			       opt, lo, hi, s);
		if (n == max)
			bu_die("%s: at most %d values", opt, max);
		v[n++] = (int)x;
		s = *end ? end + 1 : end;
	}
	if (n == 0)
		bu_die("%s: empty list", opt);
	return n;
}

/* "1,2,4" for a list, into buf. */
BU_UNUSED static const char *bu_format_list(const int *v, int n, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%d", i ? "," : "", v[i]);
	return buf;
}

/* The 1-minute load average, or -1. */
BU_UNUSED static double bu_loadavg1(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

/* Raise RLIMIT_NOFILE/NPROC soft limits to their hard limits (many threads, many fds). */
BU_UNUSED static void bu_raise_limits(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NPROC, &r) == 0 && r.rlim_cur != r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		(void)setrlimit(RLIMIT_NPROC, &r);
	}
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &r);
	}
}

/*
 * Is thread tid of this process blocked in semop/semtimedop?  /proc/self/task/TID/syscall starts
 * with the number of the system call a blocked thread is in ("running" otherwise); a thread
 * waiting for a seccomp supervisor's answer shows the trapped call too, and one parked by
 * semvisor-run --backend=ptrace shows pause(), where its tracer puts it to sleep (the waiters
 * make no other call, so pause() is theirs).  Reading it is no trapped call, so polling it
 * costs a supervisor nothing.  -1 if the file cannot be read.
 */
BU_UNUSED static int bu_blocked_in_semop(pid_t tid)
{
	char path[64], buf[64];
	ssize_t n;
	long nr;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%ld", &nr) != 1)
		return 0; /* "running" */
	return nr == SYS_semtimedop || nr == SYS_semop || nr == SYS_pause;
}

/* ---- parked waiters (bulkwake, scale) ------------------------------------------------------ */

/* Semaphores whose GETNCNT bu_park_waiters() checks unless asked to check them all. */
#define BU_CHECK_SAMPLE 64

/* A thread parked in semop(-1) on semaphore num of set id. */
struct bu_waiter {
	pthread_t th;
	pid_t tid;
	int id;
	unsigned short num;
	int err;	  /* errno of its semop, 0 when it succeeded */
	uint64_t woke_ns; /* bu_now_ns() as its semop returned: "the waiter runs again" */
};

BU_UNUSED static atomic_int bu_armed;

BU_UNUSED static void *bu_wait_one(void *arg)
{
	struct bu_waiter *w = arg;
	struct sembuf down = { .sem_num = w->num, .sem_op = -1, .sem_flg = 0 };
	int r;

	w->tid = gettid();
	atomic_fetch_add(&bu_armed, 1);
	do
		r = semop(w->id, &down, 1);
	while (r < 0 && errno == EINTR);
	w->woke_ns = bu_now_ns(); /* the clock first */
	if (r < 0)
		w->err = errno;
	return NULL;
}

/* The steps of bu_park_waiters(), reported to its caller's hook as each is reached. */
enum bu_park_step {
	BU_PARK_RUNNING, /* every thread created and running */
	BU_PARK_BLOCKED, /* every thread blocked in semop, as /proc shows it */
	BU_PARK_COUNTED, /* the server counts them: GETNCNT 1 (every one, or the sample) */
};

/*
 * Start n threads, thread i parked in semop(-1) on semaphore i of set id, and return once all
 * are parked: blocked in semop (from /proc, no trapped call), then counted by the server,
 * which also checks its ncnt bookkeeping. With check_all GETNCNT is asked of every semaphore,
 * otherwise of BU_CHECK_SAMPLE spread over the set and the last: under a seccomp supervisor
 * every call costs time proportional to the calls parked in the kernel's list (bench/README.md),
 * so n GETNCNTs with n waiters parked cost O(n^2), seconds at n = 4000. *started counts the
 * threads created, which the caller joins whatever happens (IPC_RMID releases them with EIDRM).
 * step (may be NULL) is called at each step reached. 0, or -1 with a message.
 */
BU_UNUSED static int bu_park_waiters(struct bu_waiter *w, int n, int id, bool check_all,
				     int *started, void (*step)(enum bu_park_step))
{
	pthread_attr_t attr;
	int nchk;

	atomic_store(&bu_armed, 0);
	/* Small stacks: thousands of threads that only make one call. */
	if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, 1 << 16) != 0) {
		bu_tmsg("pthread_attr set-up failed");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		w[i] = (struct bu_waiter){ .id = id, .num = (unsigned short)i };
		if (pthread_create(&w[i].th, &attr, bu_wait_one, &w[i]) != 0) {
			bu_tmsg("pthread_create: waiter %d of %d failed (RLIMIT_NPROC, "
				"kernel.threads-max, pid_max?)",
				i + 1, n);
			pthread_attr_destroy(&attr);
			return -1;
		}
		(*started)++;
	}
	pthread_attr_destroy(&attr);
	while (atomic_load(&bu_armed) < n)
		bu_sleep_ns(1000000);
	if (step)
		step(BU_PARK_RUNNING);
	for (int i = 0; i < n; i++) {
		int b;

		while ((b = bu_blocked_in_semop(w[i].tid)) == 0)
			bu_sleep_ns(100000);
		if (b < 0) {
			bu_tmsg("cannot read /proc/self/task/%d/syscall", (int)w[i].tid);
			return -1;
		}
	}
	if (step)
		step(BU_PARK_BLOCKED);
	nchk = check_all || n <= BU_CHECK_SAMPLE ? n : BU_CHECK_SAMPLE + 1;
	for (int k = 0; k < nchk; k++) {
		int i = nchk == n	       ? k
			: k == BU_CHECK_SAMPLE ? n - 1
					       : (int)((long)k * n / BU_CHECK_SAMPLE);
		int nc;

		while ((nc = semctl(id, i, GETNCNT)) == 0)
			bu_sleep_ns(200000);
		if (nc != 1) {
			bu_tmsg("GETNCNT of waiter semaphore %d is %d (expected 1)%s%s", i, nc,
				nc < 0 ? ": " : "", nc < 0 ? strerror(errno) : "");
			return -1;
		}
	}
	if (step)
		step(BU_PARK_COUNTED);
	return 0;
}

/* ---- rows --------------------------------------------------------------------------------------- */

struct bu_row {
	char *label; /* "native", or --run-under's LABEL (default "under:BASENAME") */
	char **cmd;  /* NULL-terminated command prefix; NULL for native */
};

struct bu_rows {
	struct bu_row v[BU_MAX_ROWS];
	int n;
};

static bool bu_is_run_under(const char *a)
{
	return strcmp(a, "--run-under") == 0 || strncmp(a, "--run-under=", 12) == 0;
}

/*
 * Splits argv at the first --run-under: returns the number of leading words that are the
 * program's own options, and fills rows with "native" followed by one row per --run-under group.
 * Everything after a --run-under up to the next one is that row's command, so the groups come
 * last; the --run-under words themselves are overwritten with NULL so that each group's command
 * is NULL-terminated in place (argv[argc] terminates the last).
 */
BU_UNUSED static int bu_split_rows(int argc, char **argv, struct bu_rows *rows)
{
	int own = argc;

	memset(rows, 0, sizeof(*rows));
	rows->v[rows->n++].label = strdup("native");
	for (int i = 1; i < argc; i++) {
		if (bu_is_run_under(argv[i])) {
			own = i;
			break;
		}
	}
	for (int i = own; i < argc; i++) {
		const char *eq;
		char *label;

		if (!bu_is_run_under(argv[i]))
			continue;
		if (i + 1 >= argc || bu_is_run_under(argv[i + 1]))
			bu_die("%s needs a command (e.g. --run-under env --)", argv[i]);
		if (rows->n == BU_MAX_ROWS)
			bu_die("at most %d --run-under rows", BU_MAX_ROWS - 1);
		eq = strchr(argv[i], '=');
		if (eq && eq[1]) {
			label = strdup(eq + 1);
		} else {
			const char *base = strrchr(argv[i + 1], '/');

			base = base ? base + 1 : argv[i + 1];
			if (asprintf(&label, "under:%s", base) < 0)
				label = NULL;
		}
		if (label == NULL)
			bu_die("out of memory");
		/* Labels go into tab-separated files and markdown tables. */
		for (char *p = label; *p; p++) {
			if (*p == '\t' || *p == '\n' || *p == '|')
				*p = ' ';
		}
		rows->v[rows->n].label = label;
		rows->v[rows->n].cmd = &argv[i + 1];
		rows->n++;
	}
	for (int i = own; i < argc; i++) {
		if (bu_is_run_under(argv[i]))
			argv[i] = NULL;
	}
	return own;
}

BU_UNUSED static void bu_free_rows(struct bu_rows *rows)
{
	for (int r = 0; r < rows->n; r++)
		free(rows->v[r].label);
	rows->n = 0;
}

/* ---- running a target ------------------------------------------------------------------------- */

/* The current target's process group, for the signal handlers (pid_t fits sig_atomic_t). */
static volatile sig_atomic_t bu_victim;
static pid_t bu_driver_pid;

static void bu_on_fatal(int sig)
{
	struct sigaction sa;

	if (bu_victim > 0)
		kill(-(pid_t)bu_victim, SIGKILL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
	raise(sig);
}

/* Driver set-up: program name, signal handling. */
BU_UNUSED static void bu_init(const char *prog)
{
	struct sigaction sa;

	bu_prog = prog;
	bu_driver_pid = getpid();
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = bu_on_fatal;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
	    sigaction(SIGHUP, &sa, NULL) < 0)
		bu_die("sigaction: %s", strerror(errno));
}

/* The child of bu_run_target(): becomes [CMD...] SELF TARGS... --result-fd N. */
__attribute__((noreturn)) static void bu_exec_target(const struct bu_row *row, char *const *targs,
						     int resfd)
{
	static char self[PATH_MAX];
	char fdbuf[16];
	char *argv[BU_MAX_CMD + 64];
	ssize_t n;
	int i = 0;

	/* Own process group: on a deadline the whole tree (wrapper, target, its children) dies.
	   semvisor-run's supervisor leaves with its last client. */
	if (setpgid(0, 0) < 0)
		_exit(127);
	/* SIGTERM survives exec; semvisor-run forwards it to the program. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != bu_driver_pid)
		_exit(127);
	/* A fresh IPC namespace (when root): native sets vanish with the target, whatever happens,
	   and no run sees another's sets. EPERM (no CAP_SYS_ADMIN) falls back to IPC_PRIVATE sets,
	   which the targets remove themselves. */
	if (geteuid() == 0 && unshare(CLONE_NEWIPC) < 0 && errno != EPERM) {
		bu_tmsg("unshare(CLONE_NEWIPC): %s", strerror(errno));
		_exit(127);
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		bu_tmsg("readlink(/proc/self/exe): %s", strerror(errno));
		_exit(127);
	}
	self[n] = '\0';
	if (fcntl(resfd, F_SETFD, 0) < 0)
		_exit(127);
	snprintf(fdbuf, sizeof(fdbuf), "%d", resfd);
	for (char **c = row->cmd; c && *c; c++) {
		if (i == BU_MAX_CMD) {
			bu_tmsg("--run-under: more than %d words in the command", BU_MAX_CMD);
			_exit(127);
		}
		argv[i++] = *c;
	}
	argv[i++] = self;
	for (char *const *a = targs; *a; a++) {
		if (i == BU_MAX_CMD + 60)
			_exit(127);
		argv[i++] = *a;
	}
	argv[i++] = (char *)"--result-fd";
	argv[i++] = fdbuf;
	argv[i] = NULL;
	execvp(argv[0], argv);
	bu_tmsg("exec %s: %s", argv[0], strerror(errno));
	_exit(127);
}

static void bu_describe_status(int st, char *buf, size_t size)
{
	if (WIFEXITED(st))
		snprintf(buf, size, "exit status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else
		snprintf(buf, size, "wait status %#x", st);
}

/*
 * Runs one target for row: "[CMD...] SELF TARGS... --result-fd N" (targs NULL-terminated) and
 * collects its report (without the final "end") into *report (malloc'd; the caller frees).
 * Returns 0, or -1 with why filled: the target failed, timed out or sent no complete report.
 */
BU_UNUSED static int bu_run_target(const struct bu_row *row, char *const *targs, double timeout_s,
				   char **report, char *why, size_t whysz)
{
	uint64_t deadline = bu_now_ns() + (uint64_t)(timeout_s * 1e9);
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap + 1);
	bool done = false, timed_out = false;
	int res[2], st = 0;
	pid_t pid, w;

	*report = NULL;
	why[0] = '\0';
	if (buf == NULL)
		bu_die("out of memory");
	buf[0] = '\0';
	if (pipe2(res, O_CLOEXEC) < 0)
		bu_die("pipe2: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		bu_die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(res[0]);
		bu_exec_target(row, targs, res[1]);
	}
	(void)setpgid(pid, pid); /* also in the child: whichever runs first wins */
	bu_victim = pid;
	close(res[1]);

	/* Read until "end" (the supervisor may hold the pipe open after the target exits), EOF
	   (the target died: its status says why), or the deadline. */
	while (!done) {
		struct pollfd p = { .fd = res[0], .events = POLLIN };
		uint64_t now = bu_now_ns();
		ssize_t n;
		int r;

		if (now >= deadline) {
			timed_out = true;
			break;
		}
		r = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			bu_die("poll: %s", strerror(errno));
		if (r == 0)
			continue;
		if (len == cap) {
			cap *= 2;
			if (cap > BU_REPORT_MAX)
				break;
			buf = realloc(buf, cap + 1);
			if (buf == NULL)
				bu_die("out of memory");
		}
		n = read(res[0], buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		done = len >= 4 && strcmp(buf + len - 4, "end\n") == 0 &&
		       (len == 4 || buf[len - 5] == '\n');
	}
	close(res[0]);

	/* The wrapper (or the target itself) must now exit on its own; give it until the deadline
	   (at least a second, so a slow supervisor shutdown after a good report is not a failure).
	   On a timeout the group is killed first: nothing in it is going to report any more. */
	if (timed_out)
		kill(-pid, SIGKILL);
	else if (deadline < bu_now_ns() + 1000000000u)
		deadline = bu_now_ns() + 1000000000u;
	for (;;) {
		w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			bu_die("waitpid: %s", strerror(errno));
		if (!timed_out && bu_now_ns() >= deadline) {
			timed_out = true;
			kill(-pid, SIGKILL);
		}
		bu_sleep_ns(2000000);
	}
	if (timed_out)
		kill(-pid, SIGKILL); /* whatever of the group is left */
	bu_victim = 0;

	if (timed_out) {
		snprintf(why, whysz, "timed out after %.0f s", timeout_s);
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char s[96];

		bu_describe_status(st, s, sizeof(s));
		snprintf(why, whysz, "target %s", s);
	} else if (!done) {
		snprintf(why, whysz, "incomplete report from the target");
	}
	if (why[0]) {
		free(buf);
		return -1;
	}
	buf[len - 4] = '\0'; /* drop "end\n" */
	*report = buf;
	return 0;
}

/*
 * The driver's measuring loop: reps repetitions, each running every row's target once in turn,
 * so that a change in the machine's load hits every row alike. Each report goes to
 * parse(report, row, arg, why, whysz), which returns 0, or -1 with why filled. A row whose
 * target or report fails is named on stderr, marked in failed[] and not run again. Returns 1 if
 * any row failed, else 0.
 */
BU_UNUSED static int
bu_run_rounds(const struct bu_rows *rows, char *const *targs, int reps, double timeout_s,
	      bool *failed, int (*parse)(char *report, int row, void *arg, char *why, size_t whysz),
	      void *arg)
{
	int any_failed = 0;

	for (int rep = 0; rep < reps; rep++) {
		for (int r = 0; r < rows->n; r++) {
			char *report, why[256];
			int bad;

			if (failed[r])
				continue;
			bad =
			    bu_run_target(&rows->v[r], targs, timeout_s, &report, why, sizeof(why));
			if (bad == 0)
				bad = parse(report, r, arg, why, sizeof(why));
			if (bad < 0) {
				fprintf(stderr, "%s: row %s, repetition %d: %s\n", bu_prog,
					rows->v[r].label, rep + 1, why);
				failed[r] = true;
				any_failed = 1;
			}
			free(report);
		}
	}
	return any_failed;
}

/* ---- the target side -------------------------------------------------------------------------- */

/* Checks the result fd, keeps it out of exec'd children, arms a last-resort alarm. */
BU_UNUSED static void bu_target_init(const char *prog, int resfd, double timeout_s)
{
	bu_prog = prog;
	if (resfd < 0 || fcntl(resfd, F_GETFD) < 0) {
		bu_tmsg("--result-fd %d is not an open fd (did the wrapper close it?)", resfd);
		exit(2);
	}
	if (fcntl(resfd, F_SETFD, FD_CLOEXEC) < 0) {
		bu_tmsg("fcntl: %s", strerror(errno));
		exit(2);
	}
	/* SIGALRM's default action: never outlive the driver's deadline by much. */
	alarm((unsigned)timeout_s + 5);
}

/* The report, then "end", in as few writes as the pipe allows. */
BU_UNUSED static int bu_target_report(int resfd, const char *text)
{
	size_t len = strlen(text);
	char *buf = malloc(len + 8);
	int rc;

	if (buf == NULL)
		return -1;
	memcpy(buf, text, len);
	if (len && buf[len - 1] != '\n')
		buf[len++] = '\n';
	memcpy(buf + len, "end\n", 4);
	rc = bu_write_all(resfd, buf, len + 4);
	free(buf);
	return rc;
}

/* A growing text buffer for reports. */
struct bu_text {
	char *s;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3), unused)) static void bu_text_add(struct bu_text *t,
								      const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = t->cap - t->len;

		va_start(ap, fmt);
		n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			bu_die("vsnprintf failed");
		if (t->s && (size_t)n < room)
			break;
		t->cap = (t->cap ? t->cap * 2 : 4096) + (size_t)n;
		t->s = realloc(t->s, t->cap);
		if (t->s == NULL)
			bu_die("out of memory");
		if (t->len == 0)
			t->s[0] = '\0';
	}
	t->len += (size_t)n;
}

/* ---- output ------------------------------------------------------------------------------------- */

/* The conditions line every program prints first. */
BU_UNUSED static void bu_print_conditions(FILE *f, const char *what)
{
	struct utsname u;

	if (uname(&u) < 0)
		memset(&u, 0, sizeof(u));
	fprintf(f, "%s: kernel %s, %ld CPUs online, load average (1 min) %.2f at start\n", what,
		u.release, sysconf(_SC_NPROCESSORS_ONLN), bu_loadavg1());
}

/* "1.23x" or "NA". */
BU_UNUSED static const char *bu_ratio(double a, double b, char *buf, size_t size)
{
	if (isnan(a) || isnan(b) || b == 0)
		snprintf(buf, size, "NA");
	else
		snprintf(buf, size, "%.2fx", a / b);
	return buf;
}

#endif
