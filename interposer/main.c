/* SPDX-License-Identifier: MIT */
/*
 * semvisor-run: run a program with its System V semaphores served by semvisor.
 *
 * Three processes:
 *   semvisor-run (this one)   waits for the program and passes its exit status on, forwards
 *                             signals sent to it, prints --stats at the end;
 *   the supervisor            forked first, in its own process group (terminal signals do not
 *                             reach it), serves the program tree until its last process is gone, so
 *                             background children keep their semaphores after the program
 *                             itself exits;
 *   the program               installs the filter, hands the listener to the supervisor (or to
 *                             semvisord with --daemon) in the OCI agent message shape, waits
 *                             for the supervisor to take it, then execs.
 * The program is a child of semvisor-run, never of the supervisor, so its wait() calls cannot
 * meet the supervisor.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/control.h"
#include "notify/filter.h"
#include "handoff/xfer.h"
#include "notify/notify.h"
#include "notify/ptrace.h"
#include "util/version.h"

#define EXIT_SELF	125 /* semvisor-run itself failed, as env(1) and timeout(1) */
#define EXIT_CANNOT	126 /* the program was found but could not be run */
#define EXIT_NOTFOUND	127
#define DEFAULT_AGENT	"/run/semvisor/agent.sock"
#define HANDOFF_MS	10000
#define HANDOFF_RETRIES 5   /* a daemon that dies during a handover is asked again */
#define MAX_RESTARTS	100 /* of a supervisor that dies (--crash-safe) */

struct options {
	bool verbose;
	const char *trace_path; /* -o: the -v lines go there instead of standard error */
	FILE *trace;
	bool stats;
	int workers;
	bool have_limits;
	struct sv_limits limits;
	const char *daemon;  /* agent socket, or NULL for an embedded supervisor */
	const char *control; /* control socket to serve, or NULL */
	bool proc_view;	     /* trap opens: /proc/sysvipc/sem shows our sets (procview.h) */
	bool crash_safe;     /* journal everything, restart a supervisor that dies */
	bool fast;	     /* preload the fast path's library into PROGRAM */
	long fast_spin;	     /* --fast-spin microseconds, or -1: the library's own */
	enum {
		BACKEND_AUTO,
		BACKEND_NOTIFY,
		BACKEND_PTRACE
	} backend; /* resolved before forks */
	char **argv;
};

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: semvisor-run [OPTION]... [--] PROGRAM [ARGUMENT]...\n"
	       "Run PROGRAM with its System V semaphores (semget, semop, semtimedop, semctl)\n"
	       "served by semvisor, with the semantics of the Linux kernel, instead of the\n"
	       "kernel's own. Everything PROGRAM starts is served too. Exit status, signals and\n"
	       "standard input and output pass through as if PROGRAM ran alone.\n"
	       "\n"
	       "  -v, --verbose          print one line per served call on standard error, as\n"
	       "                         strace names calls, commands and flags\n"
	       "  -o, --output=FILE      with -v, write those lines to FILE instead\n"
	       "      --stats            print a summary of what was served when PROGRAM exits\n"
	       "      --limits=MSL,MNS,OPM,MNI\n"
	       "                         semaphore limits, as /proc/sys/kernel/sem orders them:\n"
	       "                         per set, in all, per semop call, sets (at most 32768);\n"
	       "                         default: the host's /proc/sys/kernel/sem\n"
	       "      --workers=N        serve with N worker threads (default 1)\n"
	       "      --control=SOCKET   serve semvisorctl's control socket at SOCKET while the\n"
	       "                         supervisor runs\n"
	       "      --proc-view        make /proc/sysvipc/sem show PROGRAM's sets, as natively\n"
	       "                         (ipcs, lsipc); every open then costs a round trip to\n"
	       "                         the supervisor, and an open interrupted by a signal\n"
	       "                         whose handler lacks SA_RESTART fails with EINTR\n"
	       "      --daemon[=SOCKET]  hand the program to a running semvisord instead of an\n"
	       "                         embedded supervisor; SOCKET defaults to\n"
	       "                         " DEFAULT_AGENT "\n"
	       "      --backend=WHICH    how calls are trapped: notify (seccomp user\n"
	       "                         notification), ptrace (for where notification cannot\n"
	       "                         be had: a filter with a listener above, as in nested\n"
	       "                         sandboxes and some containers), or auto (the default:\n"
	       "                         notify, else ptrace, saying why on standard error).\n"
	       "                         Under ptrace PROGRAM cannot trace its own children\n"
	       "                         (gdb, strace inside get EPERM), --proc-view and\n"
	       "                         --crash-safe are not available, and with --daemon\n"
	       "                         PROGRAM dies if semvisord stops\n"
	       "      --fast             serve semop and semtimedop calls that can complete at\n"
	       "                         once in PROGRAM itself, on memory shared with the\n"
	       "                         supervisor, without a trapped call: LD_PRELOAD of\n"
	       "                         libsemvisor-fast.so (beside semvisor-run, or in\n"
	       "                         ../lib/semvisor). Statically linked programs, and\n"
	       "                         calls that wait, wake or need the supervisor, are\n"
	       "                         served as without it. Not with --crash-safe, whose\n"
	       "                         journal must see every change\n"
	       "      --fast-spin=US     with --fast, how long a semop that must wait first\n"
	       "                         waits in PROGRAM, yielding the CPU, before it parks\n"
	       "                         in the supervisor: microseconds from 0 (park at\n"
	       "                         once) to 1000000, 50 by default\n"
	       "      --crash-safe       if the embedded supervisor dies (kill -9 at any\n"
	       "                         instant), start another that loses nothing: every\n"
	       "                         change is journaled in memory semvisor-run keeps\n"
	       "                         (some 80 bytes per call that changes something, for\n"
	       "                         as long as PROGRAM runs)\n"
	       "  -h, --help             show this help and exit\n"
	       "  -V, --version          show the version and exit\n"
	       "\n"
	       "With the embedded supervisor, semaphores live as long as a process of PROGRAM's\n"
	       "tree does; each IPC namespace PROGRAM uses has its own. With --daemon they are\n"
	       "shared with every other program semvisord serves in the same IPC namespace.\n"
	       "\n"
	       "Exit status: PROGRAM's (if it dies from a signal, semvisor-run dies from the same\n"
	       "signal); 125 if semvisor-run itself fails (for example when seccomp user\n"
	       "notification is unavailable with --backend=notify, or PROGRAM cannot be traced\n"
	       "with --backend=ptrace); 126 if PROGRAM cannot be run; 127 if it is not found.\n");
}

/* A whole decimal number from lo to hi in *out; false for anything else. */
static bool number_in(const char *s, long lo, long hi, long *out)
{
	char *end;
	long n = strtol(s, &end, 10);

	if (!*s || *end || n < lo || n > hi)
		return false;
	*out = n;
	return true;
}

static void parse_options(int argc, char **argv, struct options *o)
{
	enum {
		OPT_STATS = 256,
		OPT_LIMITS,
		OPT_WORKERS,
		OPT_DAEMON,
		OPT_CONTROL,
		OPT_PROC_VIEW,
		OPT_CRASH_SAFE,
		OPT_BACKEND,
		OPT_FAST,
		OPT_FAST_SPIN
	};
	static const struct option longopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "output", required_argument, NULL, 'o' },
		{ "stats", no_argument, NULL, OPT_STATS },
		{ "limits", required_argument, NULL, OPT_LIMITS },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "daemon", optional_argument, NULL, OPT_DAEMON },
		{ "control", required_argument, NULL, OPT_CONTROL },
		{ "proc-view", no_argument, NULL, OPT_PROC_VIEW },
		{ "crash-safe", no_argument, NULL, OPT_CRASH_SAFE },
		{ "fast", no_argument, NULL, OPT_FAST },
		{ "fast-spin", required_argument, NULL, OPT_FAST_SPIN },
		{ "backend", required_argument, NULL, OPT_BACKEND },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	/*
	 * '+': stop at the first non-option, so PROGRAM's own options are left alone. ':' and
	 * opterr 0: our messages, which name the program and not the path it was run by.
	 */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:vo:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'v':
			o->verbose = true;
			break;
		case 'o':
			o->trace_path = optarg;
			break;
		case OPT_STATS:
			o->stats = true;
			break;
		case OPT_LIMITS:
			if (sv_limits_parse(optarg, &o->limits)) {
				fprintf(stderr,
					"semvisor-run: --limits wants four numbers MSL,MNS,OPM,MNI "
					"(MNI at most %d), not '%s'\n",
					SV_IPCMNI, optarg);
				exit(EXIT_SELF);
			}
			o->have_limits = true;
			break;
		case OPT_WORKERS: {
			long n;

			if (!number_in(optarg, 1, 1024, &n)) {
				fprintf(stderr,
					"semvisor-run: --workers wants a number from 1 to 1024, "
					"not '%s'\n",
					optarg);
				exit(EXIT_SELF);
			}
			o->workers = (int)n;
			break;
		}
		case OPT_DAEMON:
			o->daemon = optarg ? optarg : DEFAULT_AGENT;
			break;
		case OPT_CONTROL:
			o->control = optarg;
			break;
		case OPT_PROC_VIEW:
			o->proc_view = true;
			break;
		case OPT_CRASH_SAFE:
			o->crash_safe = true;
			break;
		case OPT_FAST:
			o->fast = true;
			break;
		case OPT_FAST_SPIN:
			if (!number_in(optarg, 0, 1000000, &o->fast_spin)) {
				fprintf(stderr,
					"semvisor-run: --fast-spin wants microseconds from 0 to "
					"1000000, not '%s'\n",
					optarg);
				exit(EXIT_SELF);
			}
			break;
		case OPT_BACKEND:
			if (!strcmp(optarg, "auto")) {
				o->backend = BACKEND_AUTO;
			} else if (!strcmp(optarg, "notify")) {
				o->backend = BACKEND_NOTIFY;
			} else if (!strcmp(optarg, "ptrace")) {
				o->backend = BACKEND_PTRACE;
			} else {
				fprintf(stderr,
					"semvisor-run: --backend is auto, notify or ptrace, not "
					"'%s'\n",
					optarg);
				exit(EXIT_SELF);
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("semvisor-run %s\n", SEMVISOR_VERSION);
			exit(0);
		case ':':
			fprintf(stderr, "semvisor-run: option '%s' needs a value\n",
				argv[optind - 1]);
			fprintf(stderr, "Try 'semvisor-run --help' for more information.\n");
			exit(EXIT_SELF);
		default:
			if (optopt)
				fprintf(stderr, "semvisor-run: unknown option '-%c'\n", optopt);
			else
				fprintf(stderr, "semvisor-run: unknown option '%s'\n",
					argv[optind - 1]);
			fprintf(stderr, "Try 'semvisor-run --help' for more information.\n");
			exit(EXIT_SELF);
		}
	}
	if (o->trace_path && !o->verbose) {
		fprintf(stderr, "semvisor-run: -o names where -v writes; add -v\n");
		exit(EXIT_SELF);
	}
	if (o->trace_path && o->daemon) {
		fprintf(stderr, "semvisor-run: -v belongs to the embedded supervisor; semvisord "
				"traces with its own --trace\n");
		exit(EXIT_SELF);
	}
	if (o->control && o->daemon) {
		fprintf(stderr, "semvisor-run: --control belongs to the embedded supervisor; "
				"semvisord serves its own control socket\n");
		exit(EXIT_SELF);
	}
	if (o->crash_safe && o->daemon) {
		fprintf(stderr, "semvisor-run: --crash-safe belongs to the embedded supervisor; "
				"semvisord is crash-safe under a service manager (semvisord(8))\n");
		exit(EXIT_SELF);
	}
	if (o->fast_spin >= 0 && !o->fast) {
		fprintf(stderr, "semvisor-run: --fast-spin is how long a --fast call waits in "
				"PROGRAM before it parks: it needs --fast\n");
		exit(EXIT_SELF);
	}
	if (o->fast && o->crash_safe) {
		fprintf(stderr, "semvisor-run: --fast changes values without a trapped call, which "
				"the journal of --crash-safe would not see\n");
		exit(EXIT_SELF);
	}
	if (o->backend == BACKEND_PTRACE && (o->crash_safe || o->proc_view)) {
		fprintf(stderr, "semvisor-run: --backend=ptrace serves without --crash-safe or "
				"--proc-view\n");
		exit(EXIT_SELF);
	}
	if (optind >= argc) {
		fprintf(stderr, "semvisor-run: no PROGRAM given\n"
				"Try 'semvisor-run --help' for more information.\n");
		exit(EXIT_SELF);
	}
	o->argv = argv + optind;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("semvisor-run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_SELF);
}

/*
 * --fast: the library goes first in PROGRAM's LD_PRELOAD (which the dynamic linker reads at
 * each exec: every dynamically linked program of the tree gets it). Beside semvisor-run in a
 * build, in ../lib/semvisor once installed. spin_us: --fast-spin, or -1 for the library's own.
 */
static void preload_fastlib(long spin_us)
{
	static const char *const where[] = { "libsemvisor-fast.so",
					     "../lib/semvisor/libsemvisor-fast.so" };
	char exe[PATH_MAX], lib[PATH_MAX + 64], us[24], *slash, *val;
	const char *old = getenv("LD_PRELOAD");
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		die("--fast: cannot find where semvisor-run is: %s", strerror(errno));
	exe[n] = 0;
	slash = strrchr(exe, '/');
	*slash = 0;
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		snprintf(lib, sizeof(lib), "%s/%s", exe, where[i]);
		if (access(lib, R_OK) == 0)
			break;
		lib[0] = 0;
	}
	if (!lib[0])
		die("--fast: libsemvisor-fast.so is neither in %s nor in %s/../lib/semvisor", exe,
		    exe);
	if (old && *old && asprintf(&val, "%s:%s", lib, old) < 0)
		die("out of memory");
	if (setenv("LD_PRELOAD", old && *old ? val : lib, 1))
		die("setenv: %s", strerror(errno));
	/*
	 * A program built with AddressSanitizer loads its runtime as a library, which insists on
	 * coming first, and ours now does: let it (the library has no instrumentation to miss).
	 */
	old = getenv("ASAN_OPTIONS");
	if (!old || !*old)
		old = "";
	if (asprintf(&val, "%s%sverify_asan_link_order=0", old, *old ? ":" : "") < 0)
		die("out of memory");
	if (setenv("ASAN_OPTIONS", val, 1))
		die("setenv: %s", strerror(errno));
	/* the library's wait before a park (fastlib.c's wait_here()); else its default */
	snprintf(us, sizeof(us), "%ld", spin_us);
	if (spin_us >= 0 && setenv("SEMVISOR_FAST_SPIN_US", us, 1))
		die("setenv: %s", strerror(errno));
}

static ssize_t read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* ---- the supervisor process ---- */

static struct nt_super *the_super;

/* Answer stats requests from semvisor-run until it hangs up. */
static void *stats_server(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char req;

	pthread_setname_np(pthread_self(), "sv-stats");
	while (read_full(fd, &req, 1) == 1) {
		struct nt_stats st;

		nt_super_stats(the_super, &st);
		if (write(fd, &st, sizeof(st)) != (ssize_t)sizeof(st))
			break;
	}
	close(fd);
	return NULL;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	/* a pidfd per confined thread: take every fd we are allowed */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* One fd over a unix socket, with one byte: 0, or -errno. */
static int send_fd(int sock, int fd)
{
	char byte = 'L', cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

/* The fd send_fd() sent, within timeout_ms: the fd, or -1. */
static int recv_fd(int sock, int timeout_ms)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	struct cmsghdr *cm;
	int fd = -1;

	if (poll(&pfd, 1, timeout_ms) != 1 || recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/*
 * --backend=ptrace: the program sends its pid and waits; we seize it (it has let us, with
 * PR_SET_PTRACER) and serve what the tracer brings. The listener's fd, for lopts.
 */
static int trace_program(int handoff, struct nt_listener_opts *lopts)
{
	struct pollfd pfd = { .fd = handoff, .events = POLLIN };
	struct pt_tracer *t;
	char err[256];
	pid_t pid;
	int fd;

	if (poll(&pfd, 1, HANDOFF_MS) != 1 || read_full(handoff, &pid, sizeof(pid)) != sizeof(pid))
		_exit(EXIT_SELF); /* the program saw it too (no answer) and says why */
	fd = pt_tracer_start(pid, -1, &t, err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr, "semvisor-run: supervisor: %s\n", err);
		_exit(EXIT_SELF);
	}
	lopts->tp = &nt_ptrace_transport;
	lopts->tp_ctx = t;
	return fd;
}

/*
 * The supervisor's process. handoff: where the program hands its listener over; or, for a
 * supervisor started again after the one before died (--crash-safe), again is that listener
 * and journal the memfd it left: the state is recovered from there. journal >= 0 on a first
 * start: journal into it, and give semvisor-run a copy of the listener through ctl, for a
 * supervisor it may have to start again.
 */
static void supervise(const struct options *o, int handoff, int ctl, int journal, int again)
    __attribute__((noreturn));
static void supervise(const struct options *o, int handoff, int ctl, int journal, int again)
{
	struct nt_config cfg = {
		.nworkers = o->workers,
		.limits = o->have_limits ? &o->limits : NULL,
		.trace = o->verbose ? (o->trace ? o->trace : stderr) : NULL,
		.exit_when_idle = true,
	};
	struct nt_listener_opts lopts = { .name = "semvisor-run", .ns_traps = true };
	struct ho_info info;
	struct ctl_server *control = NULL;
	char err[256];
	pthread_t stats_thread;
	int listener, rc, keep = -1;
	char ok = 1;

	/* semvisor-run's signal forwarding, inherited by a supervisor it started again */
	for (int sig = 1; again >= 0 && sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);

	/*
	 * Out of the terminal's reach: Ctrl-C is for the program, not for its semaphores. A
	 * process group of our own does that; a session of our own (setsid) would too, but with
	 * scheduler autogroups each session is its own scheduling group, and caller and supervisor
	 * in different groups lose the same-CPU hand-off of SYNC_WAKE_UP (measured here: 25-27 us
	 * per call instead of 10). As a background process group we must never stop on the
	 * terminal, nor die with it.
	 */
	setpgid(0, 0);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTTOU, SIG_IGN);
	signal(SIGTTIN, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	if (o->backend == BACKEND_PTRACE) {
		/* the tracer's signalfd takes SIGCHLD: no thread of ours may (ptrace.h) */
		sigset_t chld;

		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		pthread_sigmask(SIG_BLOCK, &chld, NULL);
	}
	if (o->verbose)
		setvbuf(o->trace ? o->trace : stderr, NULL, _IOLBF, 0);

	the_super = nt_super_new(&cfg, err, sizeof(err));
	if (!the_super) {
		fprintf(stderr, "semvisor-run: supervisor: %s\n", err);
		_exit(EXIT_SELF);
	}
	/* If this fails, the program saw it too (no answer) and says why; we just leave. */
	if (again >= 0) {
		listener = again;
	} else if (o->backend == BACKEND_PTRACE) {
		listener = trace_program(handoff, &lopts);
	} else if (ho_recv(handoff, &listener, &info, HANDOFF_MS, err, sizeof(err))) {
		_exit(EXIT_SELF);
	}
	if (journal >= 0 && again < 0 && (keep = fcntl(listener, F_DUPFD_CLOEXEC, 3)) < 0)
		_exit(EXIT_SELF);
	lopts.key = journal >= 0; /* found again by it after a crash */
	rc = nt_super_add_listener(the_super, listener, &lopts);
	if (!rc && journal >= 0)
		rc = nt_super_journal_open(the_super, journal, again >= 0);
	if (!rc && journal >= 0 && again >= 0) {
		/* whatever the journal gives, the program is served on from here */
		if (nt_super_recover(the_super, err, sizeof(err))) {
			fprintf(
			    stderr,
			    "semvisor-run: the journal of the supervisor before: %s; its sets and "
			    "waiting calls are lost\n",
			    err);
			rc = nt_super_journal_start(the_super);
		}
	} else if (!rc && journal >= 0) {
		rc = nt_super_journal_start(the_super);
	}
	if (!rc)
		rc = nt_super_start(the_super);
	if (rc) {
		fprintf(stderr, "semvisor-run: supervisor: %s\n", strerror(-rc));
		_exit(EXIT_SELF);
	}
	if (o->control) {
		struct ctl_opts co = CTL_OPTS_INIT;

		co.path = o->control;
		co.mode = 0600; /* the user who ran semvisor-run, and root */
		control = ctl_server_start(the_super, &co, err, sizeof(err));
		if (!control) {
			fprintf(stderr, "semvisor-run: control socket: %s\n", err);
			_exit(EXIT_SELF);
		}
	}
	/* semvisor-run keeps a copy of the listener, to start another of us with */
	if (keep >= 0) {
		if (send_fd(ctl, keep))
			fprintf(stderr,
				"semvisor-run: supervisor: cannot hand semvisor-run a copy of "
				"the listener: a crash would not be survived\n");
		close(keep);
	}
	/* The listener is ours: the program may exec. */
	if (again < 0 && write(handoff, &ok, 1) != 1) {
		/* the program died before exec: its listener will hang up, and we end */
	}
	if (again < 0)
		close(handoff);
	rc = pthread_create(&stats_thread, NULL, stats_server, (void *)(intptr_t)ctl);
	nt_super_wait(the_super);
	/*
	 * Everything we served is gone; semvisor-run may still want the statistics. It asks, or
	 * hangs up when it exits.
	 */
	if (rc == 0)
		pthread_join(stats_thread, NULL);
	ctl_server_stop(control); /* removes its socket file */
	_exit(0);
}

/* ---- the program's process ---- */

/* Tell semvisor-run why we could not become the program: (code, errno, message). */
static void report(int errfd, int code, int err, const char *msg) __attribute__((noreturn));
static void report(int errfd, int code, int err, const char *msg)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "%d %d %s", code, err, msg);

	if (write(errfd, buf, (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1)) < 0) {
		/* nothing left to tell it with */
	}
	_exit(code);
}

/*
 * --backend=ptrace: let the supervisor trace us, wait until it has, install a filter that
 * makes tracer stops of what a listener would get, and become the program. The embedded
 * supervisor is sent our pid; semvisord, our handoff message (msg) saying "ptrace", with a
 * pidfd of ours where a listener would go: it seizes whoever connected, which is us.
 */
static void be_traced(const struct options *o, pid_t sup, int handoff, const char *msg,
		      size_t msglen, int errfd) __attribute__((noreturn));
static void be_traced(const struct options *o, pid_t sup, int handoff, const char *msg,
		      size_t msglen, int errfd)
{
	struct filter_opts fopts = { .trap_ns_changes = true, .trace = true };
	struct pollfd pfd = { .fd = handoff, .events = POLLIN };
	pid_t me = getpid();
	char err[512], ok = 0;
	int rc, pidfd;

	if (o->daemon) {
		struct ucred cred;
		socklen_t len = sizeof(cred);

		/* semvisord's pid as we see it; 0 if it is outside our pid namespace */
		sup = getsockopt(handoff, SOL_SOCKET, SO_PEERCRED, &cred, &len) ? 0 : cred.pid;
	}
	/*
	 * Yama's ptrace_scope 1 lets only an ancestor trace us, unless we say otherwise (a
	 * semvisord with CAP_SYS_PTRACE needs no word, nor can it have one from outside our pid
	 * namespace)
	 */
	if (sup > 0 && prctl(PR_SET_PTRACER, (unsigned long)sup, 0, 0, 0) && errno != EINVAL)
		report(errfd, EXIT_SELF, errno, "prctl(PR_SET_PTRACER) failed");
	if (o->daemon) {
		pidfd = (int)syscall(SYS_pidfd_open, me, 0);
		if (pidfd < 0)
			report(errfd, EXIT_SELF, errno, "pidfd_open failed");
		rc = ho_send_msg(handoff, pidfd, msg, msglen);
		close(pidfd);
	} else {
		rc = write(handoff, &me, sizeof(me)) == sizeof(me) ? 0 : -EIO;
	}
	if (rc || poll(&pfd, 1, HANDOFF_MS) != 1 || read(handoff, &ok, 1) != 1 || ok != 1)
		report(errfd, EXIT_SELF, rc ? -rc : 0,
		       o->daemon ? "semvisord could not trace the program (its log says why)"
				 : "the supervisor could not trace the program");
	close(handoff);
	rc = filter_install(&fopts, err, sizeof(err));
	if (rc < 0)
		report(errfd, EXIT_SELF, -rc, err);
	execvp(o->argv[0], o->argv);
	rc = errno;
	snprintf(err, sizeof(err), "cannot run %s: %s", o->argv[0], strerror(rc));
	report(errfd, rc == ENOENT ? EXIT_NOTFOUND : EXIT_CANNOT, rc, err);
}

static void become_program(const struct options *o, pid_t sup, int handoff, int errfd)
    __attribute__((noreturn));
static void become_program(const struct options *o, pid_t sup, int handoff, int errfd)
{
	struct filter_opts fopts = { .trap_ns_changes = true, .trap_opens = o->proc_view };
	struct ho_info info = { .pid = getpid() };
	char err[512], msg[HO_BUILD_MAX], ok = 0;
	struct pollfd pfd;
	size_t msglen;
	int listener, rc;

	if (o->daemon) {
		handoff = ho_connect(o->daemon, err, sizeof(err));
		if (handoff < 0)
			report(errfd, EXIT_SELF, 0, err);
		snprintf(info.metadata, sizeof(info.metadata), "semvisor-run ns-traps%s",
			 o->backend == BACKEND_PTRACE ? " ptrace" : "");
	}
	snprintf(info.id, sizeof(info.id), "semvisor-run-%d", (int)getpid());
	/*
	 * Everything this process does between the filter and the handoff must stay clear of
	 * what the filter traps, since nobody serves it yet: the message is built first.
	 */
	rc = ho_build(&info, msg, sizeof(msg), &msglen);
	if (rc)
		report(errfd, EXIT_SELF, -rc, "building the handoff message failed");

	if (o->backend == BACKEND_PTRACE)
		be_traced(o, sup, handoff, msg, msglen, errfd); /* and exec */
	listener = filter_install(&fopts, err, sizeof(err));
	if (listener < 0)
		report(errfd, EXIT_SELF, -listener, err);
	/*
	 * Wait until the supervisor holds the listener: every call from here on needs it. A
	 * daemon killed in the middle (its socket, kept by the service manager, stays) is asked
	 * again: the next one takes the listener, or says it holds it already (its store gave
	 * it back). None of this is a call the filter traps.
	 */
	for (int attempt = 0;; attempt++) {
		rc = ho_send_msg(handoff, listener, msg, msglen);
		pfd = (struct pollfd){ .fd = handoff, .events = POLLIN };
		if (!rc && poll(&pfd, 1, HANDOFF_MS) == 1 && read(handoff, &ok, 1) == 1 && ok == 1)
			break;
		close(handoff);
		if (!o->daemon || attempt == HANDOFF_RETRIES ||
		    (handoff = ho_connect(o->daemon, err, sizeof(err))) < 0)
			report(errfd, EXIT_SELF, rc ? -rc : 0,
			       o->daemon ? "semvisord did not accept the program"
					 : "the supervisor failed");
	}
	/* Our copy must go: the listener lives while any copy is open, ours included. */
	close(listener);
	close(handoff);

	execvp(o->argv[0], o->argv);
	rc = errno;
	snprintf(err, sizeof(err), "cannot run %s: %s", o->argv[0], strerror(rc));
	report(errfd, rc == ENOENT ? EXIT_NOTFOUND : EXIT_CANNOT, rc, err);
}

/* ---- semvisor-run itself ---- */

static volatile sig_atomic_t child_pid;

/* Signals sent to us with kill() go on to the program. Terminal signals reach it directly. */
static void forward(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	if (si->si_code != SI_KERNEL && child_pid > 0)
		kill((pid_t)child_pid, sig);
}

static void forward_signals(void)
{
	static const int sigs[] = { SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
				    SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH };
	struct sigaction sa = { .sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* Die the way the program died, so our parent sees the same status. */
static void pass_on(int status) __attribute__((noreturn));
static void pass_on(int status)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		struct rlimit no_core = { 0, 0 };
		sigset_t set;

		setrlimit(RLIMIT_CORE, &no_core); /* the program dumped its own core */
		signal(sig, SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(sig);
		_exit(128 + sig);
	}
	exit(WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_SELF);
}

/*
 * --crash-safe: the supervisor died other than by ending its work; another takes over from the
 * journal it left, with the copy of the listener we kept. *ctl becomes the new one's.
 */
static pid_t supervise_again(const struct options *o, int *ctl, int journal, int listener,
			     int status)
{
	int pair[2];
	pid_t pid;

	if (WIFSIGNALED(status))
		fprintf(stderr,
			"semvisor-run: the supervisor died (%s); another takes over from its "
			"journal\n",
			strsignal(WTERMSIG(status)));
	else
		fprintf(
		    stderr,
		    "semvisor-run: the supervisor failed (exit %d); another takes over from its "
		    "journal\n",
		    WEXITSTATUS(status));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(pair[1]);
		close(*ctl);
		supervise(o, -1, pair[0], journal, fcntl(listener, F_DUPFD_CLOEXEC, 3));
	}
	close(pair[0]);
	if (pid < 0) {
		close(pair[1]);
		return -1;
	}
	close(*ctl);
	*ctl = pair[1];
	return pid;
}

/* --backend=auto: notification if a child of ours could have a listener, else ptrace. */
static void choose_backend(struct options *o)
{
	int rc;

	if (o->backend != BACKEND_AUTO)
		return;
	o->backend = BACKEND_NOTIFY;
	/* --crash-safe and --proc-view need notification */
	if (o->crash_safe || o->proc_view)
		return;
	rc = filter_probe_notify();
	if (rc == 0 || rc == -EACCES)
		return; /* EACCES: the real filter says why */
	fprintf(stderr,
		"semvisor-run: seccomp user notification is unavailable here (%s); serving "
		"through ptrace%s\n",
		rc == -EBUSY ? "a filter with a listener is installed above: EBUSY" : strerror(-rc),
		o->daemon ? " (semvisord traces the program)" : "");
	o->backend = BACKEND_PTRACE;
}

int main(int argc, char **argv)
{
	struct options o = { .fast_spin = -1 };
	int handoff[2], ctl[2] = { -1, -1 }, errpipe[2], journal = -1, listener = -1, restarts = 0;
	char msg[512];
	ssize_t n;
	pid_t sup = 0, prog, w;
	int status;

	parse_options(argc, argv, &o);
	choose_backend(&o);
	if (o.fast)
		preload_fastlib(o.fast_spin);
	/* Opened here, so that a bad path is said before PROGRAM runs; never PROGRAM's (CLOEXEC). */
	if (o.trace_path && !(o.trace = fopen(o.trace_path, "we")))
		die("cannot write %s: %s", o.trace_path, strerror(errno));

	if (pipe2(errpipe, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	if (!o.daemon) {
		/* ours, not the supervisor's: it outlives a supervisor that dies */
		if (o.crash_safe &&
		    (journal = memfd_create("semvisor-run-journal", MFD_CLOEXEC)) < 0)
			die("memfd_create: %s", strerror(errno));
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, handoff) ||
		    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl))
			die("socketpair: %s", strerror(errno));
		fflush(NULL);
		sup = fork();
		if (sup < 0)
			die("fork: %s", strerror(errno));
		if (sup == 0) {
			close(handoff[1]);
			close(ctl[1]);
			close(errpipe[0]);
			close(errpipe[1]);
			supervise(&o, handoff[0], ctl[0], journal, -1);
		}
		close(handoff[0]);
		close(ctl[0]);
	}

	fflush(NULL);
	prog = fork();
	if (prog < 0)
		die("fork: %s", strerror(errno));
	if (prog == 0) {
		close(errpipe[0]);
		if (ctl[1] >= 0)
			close(ctl[1]);
		become_program(&o, sup, o.daemon ? -1 : handoff[1], errpipe[1]);
	}
	child_pid = prog;
	forward_signals();
	close(errpipe[1]);
	if (!o.daemon)
		close(handoff[1]);

	/* Nothing comes through the pipe once the program has exec'd (close-on-exec). */
	n = read_full(errpipe[0], msg, sizeof(msg) - 1);
	close(errpipe[0]);
	if (n > 0) {
		int code = EXIT_SELF, err = 0, off = 0;

		msg[n] = '\0';
		sscanf(msg, "%d %d %n", &code, &err, &off);
		fprintf(stderr, "semvisor-run: %s\n", msg + off);
		waitpid(prog, &status, 0);
		exit(code);
	}

	/* the supervisor's copy of the listener, to start another supervisor with */
	if (journal >= 0 && (listener = recv_fd(ctl[1], HANDOFF_MS)) < 0)
		fprintf(stderr, "semvisor-run: no copy of the listener: a crash of the supervisor "
				"would not be survived\n");
	while ((w = waitpid(-1, &status, 0)) != prog) {
		if (w < 0 && errno != EINTR)
			die("waitpid: %s", strerror(errno));
		if (w != sup || listener < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
			continue;
		if (++restarts > MAX_RESTARTS ||
		    (sup = supervise_again(&o, &ctl[1], journal, listener, status)) < 0) {
			/* no more: the program's calls fail (ENOSYS) rather than wait for ever */
			fprintf(stderr, "semvisor-run: the supervisor is not started again\n");
			close(listener);
			listener = -1;
		}
	}
	child_pid = 0;

	if (o.stats && ctl[1] >= 0) {
		struct nt_stats st;
		char req = 's';

		if (send(ctl[1], &req, 1, MSG_NOSIGNAL) == 1 &&
		    read_full(ctl[1], &st, sizeof(st)) == sizeof(st))
			nt_stats_print(&st, stderr);
		else
			fprintf(stderr, "semvisor-run: the supervisor gave no statistics\n");
	}
	pass_on(status);
}
