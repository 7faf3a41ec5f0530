/* SPDX-License-Identifier: MIT */
/*
 * Running programs natively and under semvisor-run, for the run tests (40-run-diff, 41-run-cli,
 * 42-run-stress): each run starts in a fresh IPC namespace (fork, unshare(CLONE_NEWIPC), exec),
 * so ids start at 0 and nothing is left from other runs, and a native run and a confined run see
 * the same starting state. Output is captured through pipes (stdout and stderr together, in the
 * order written, or apart), with a deadline: a run that hangs is killed (its whole process group)
 * and reported as timed out, so a broken supervisor fails a test instead of hanging the suite.
 *
 * Binaries come from $O (default "build"): $O/semvisor-run and $O/tests/prog/NAME.
 *
 * Everything here is static: each test file includes it once.
 */
#ifndef SV_TEST_RUN_HARNESS_H
#define SV_TEST_RUN_HARNESS_H

#include <errno.h>
#include <fcntl.h>
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_MAX_ARGS 32

struct run_spec {
	const char *prog;		/* tests/prog name, a path if it contains '/', or NULL for
					 none (semvisor-run's own options only) */
	const char *args[RUN_MAX_ARGS]; /* its arguments, NULL-terminated */
	bool confined;			/* under semvisor-run */
	const char *opts[8];		/* semvisor-run options (confined only), NULL-terminated */
	bool no_dashdash;		/* confined: do not put "--" before the program */
	const char *sem_sysctl;		/* written to /proc/sys/kernel/sem in the new namespace */
	const char *input;		/* stdin (NULL: /dev/null) */
	bool split;			/* stderr apart from stdout */
	int timeout_ms;			/* 0: 60 s */
};

struct run_result {
	char *out, *err; /* NUL-terminated; err only if split */
	size_t out_len, err_len;
	int status; /* as waitpid; meaningless if timed_out */
	bool timed_out;
	int64_t ms;    /* wall time */
	int slot;      /* in run_slots, -1 if none */
	char cmd[512]; /* the command line, for messages */
};

/* A run in progress (run_start/run_finish), for tests that act on it while it runs. */
struct run_handle {
	pid_t pid;
	int out_fd, err_fd, in_fd;
	const char *input;
	size_t input_off;
	int64_t start_ns, deadline_ns;
	struct run_result *res;
	size_t out_cap, err_cap;
};

/*
 * Output buffers not yet freed: a failed assertion leaves its test function at once, so the
 * suite's .fini (run_cleanup) frees what run_free did not get to (LeakSanitizer builds would
 * report it otherwise). The buffers are tracked, not the run_result, which may live on the
 * stack of a test function that is gone by then.
 */
static struct run_slot {
	bool used;
	char *out, *err;
} run_slots[16];

static inline void run_free(struct run_result *r)
{
	if (r->slot >= 0)
		run_slots[r->slot] = (struct run_slot){ 0 };
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
	r->slot = -1;
}

static inline void run_cleanup(void)
{
	for (size_t i = 0; i < sizeof(run_slots) / sizeof(run_slots[0]); i++) {
		if (run_slots[i].used) {
			free(run_slots[i].out);
			free(run_slots[i].err);
		}
		run_slots[i] = (struct run_slot){ 0 };
	}
}

static inline const char *run_dir(void)
{
	const char *o = getenv("O");

	return o && *o ? o : "build";
}

static inline int64_t run_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void run_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 4096;

		while (c < *len + n + 1)
			c *= 2;
		*buf = realloc(*buf, c);
		if (!*buf)
			abort();
		*cap = c;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Child side: fresh IPC namespace, optional limits, pipes in place, exec. Never returns. */
static inline void run_child(const struct run_spec *s, char **argv, int in, int out, int err)
{
	sigset_t none;

	/* a group of its own: a timeout kills the program and everything it started */
	setpgid(0, 0);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (unshare(CLONE_NEWIPC)) {
		dprintf(err, "harness: unshare(CLONE_NEWIPC): %s\n", strerror(errno));
		_exit(120);
	}
	if (s->sem_sysctl) {
		int fd = open("/proc/sys/kernel/sem", O_WRONLY);

		if (fd < 0 || write(fd, s->sem_sysctl, strlen(s->sem_sysctl)) < 0) {
			dprintf(err, "harness: /proc/sys/kernel/sem: %s\n", strerror(errno));
			_exit(121);
		}
		close(fd);
	}
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(122);
	/* nothing of the test runner's must leak into the program (its pipes would stay open) */
	closefrom(3);
	execv(argv[0], argv);
	dprintf(2, "harness: exec %s: %s\n", argv[0], strerror(errno));
	_exit(123);
}

static inline void run_start(const struct run_spec *s, struct run_handle *h, struct run_result *r)
{
	char run_path[PATH_MAX], prog_path[PATH_MAX];
	char *argv[RUN_MAX_ARGS * 2 + 8];
	int n = 0, outp[2], errp[2] = { -1, -1 }, inp[2];
	size_t off = 0;

	memset(r, 0, sizeof(*r));
	memset(h, 0, sizeof(*h));
	/* a program that does not read its input must not kill the test with SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	h->res = r;
	snprintf(run_path, sizeof(run_path), "%s/semvisor-run", run_dir());
	if (!s->prog)
		prog_path[0] = '\0';
	else if (strchr(s->prog, '/'))
		snprintf(prog_path, sizeof(prog_path), "%s", s->prog);
	else
		snprintf(prog_path, sizeof(prog_path), "%s/tests/prog/%s", run_dir(), s->prog);
	if (s->confined) {
		argv[n++] = run_path;
		for (int i = 0; s->opts[i]; i++)
			argv[n++] = (char *)s->opts[i];
		if (!s->no_dashdash && s->prog)
			argv[n++] = (char *)"--";
	}
	if (s->prog)
		argv[n++] = prog_path;
	for (int i = 0; s->prog && s->args[i]; i++)
		argv[n++] = (char *)s->args[i];
	argv[n] = NULL;
	for (int i = 0; i < n && off < sizeof(r->cmd) - 1; i++)
		off += (size_t)snprintf(r->cmd + off, sizeof(r->cmd) - off, "%s%s", i ? " " : "",
					argv[i]);

	if (pipe2(outp, O_CLOEXEC) || pipe2(inp, O_CLOEXEC) || (s->split && pipe2(errp, O_CLOEXEC)))
		abort();
	fflush(NULL);
	h->start_ns = run_now_ns();
	h->deadline_ns = h->start_ns + (int64_t)(s->timeout_ms ? s->timeout_ms : 60000) * 1000000;
	h->pid = fork();
	if (h->pid < 0)
		abort();
	if (h->pid == 0)
		run_child(s, argv, inp[0], outp[1], s->split ? errp[1] : outp[1]);
	/* in the parent too, so that a kill of the group cannot miss an early child */
	setpgid(h->pid, h->pid);
	close(outp[1]);
	close(inp[0]);
	if (s->split)
		close(errp[1]);
	h->out_fd = outp[0];
	h->err_fd = s->split ? errp[0] : -1;
	h->input = s->input;
	h->in_fd = inp[1];
	if (!s->input) {
		close(h->in_fd);
		h->in_fd = -1;
	} else {
		fcntl(h->in_fd, F_SETFL, O_NONBLOCK);
	}
	r->out = calloc(1, 1);
	r->err = calloc(1, 1);
	r->slot = -1;
	for (int i = 0; i < (int)(sizeof(run_slots) / sizeof(run_slots[0])); i++)
		if (!run_slots[i].used) {
			run_slots[i] = (struct run_slot){ true, r->out, r->err };
			r->slot = i;
			break;
		}
}

/*
 * Pump the pipes until stop_at appears in stdout (if non-NULL), or until the program and every
 * holder of its pipes are done, or the deadline passes. True if stop_at was seen / all is done.
 */
static inline bool run_pump(struct run_handle *h, const char *stop_at)
{
	struct run_result *r = h->res;

	for (;;) {
		struct pollfd pf[3];
		int n = 0, left_ms;
		int64_t now = run_now_ns();

		if (stop_at && r->out && strstr(r->out, stop_at))
			return true;
		if (h->out_fd < 0 && h->err_fd < 0)
			return !stop_at;
		if (now >= h->deadline_ns)
			return false;
		left_ms = (int)((h->deadline_ns - now) / 1000000) + 1;
		if (h->out_fd >= 0)
			pf[n++] = (struct pollfd){ .fd = h->out_fd, .events = POLLIN };
		if (h->err_fd >= 0)
			pf[n++] = (struct pollfd){ .fd = h->err_fd, .events = POLLIN };
		if (h->in_fd >= 0)
			pf[n++] = (struct pollfd){ .fd = h->in_fd, .events = POLLOUT };
		if (poll(pf, (nfds_t)n, left_ms) < 0 && errno != EINTR)
			abort();
		for (int i = 0; i < n; i++) {
			char buf[8192];
			ssize_t k;

			if (!pf[i].revents)
				continue;
			if (pf[i].fd == h->in_fd) {
				size_t len = strlen(h->input);

				k = write(h->in_fd, h->input + h->input_off, len - h->input_off);
				if (k > 0)
					h->input_off += (size_t)k;
				if (k < 0 && errno != EAGAIN) {
					close(h->in_fd);
					h->in_fd = -1;
				} else if (h->input_off == len) {
					close(h->in_fd); /* EOF for the program */
					h->in_fd = -1;
				}
				continue;
			}
			k = read(pf[i].fd, buf, sizeof(buf));
			if (k > 0) {
				if (pf[i].fd == h->out_fd)
					run_append(&r->out, &r->out_len, &h->out_cap, buf,
						   (size_t)k);
				else
					run_append(&r->err, &r->err_len, &h->err_cap, buf,
						   (size_t)k);
				if (r->slot >= 0) {
					run_slots[r->slot].out = r->out;
					run_slots[r->slot].err = r->err;
				}
			} else if (k == 0 || errno != EINTR) {
				close(pf[i].fd);
				if (pf[i].fd == h->out_fd)
					h->out_fd = -1;
				else
					h->err_fd = -1;
			}
		}
	}
}

/*
 * Collect the rest of the output and the exit status. A run that passes its deadline is killed
 * (its process group) and marked timed out. Once the program itself has exited, whatever it left
 * behind in its group (a sleeper orphaned by a failing test) gets two seconds to finish
 * writing, then is killed, so that leftovers neither hang the test nor outlive it.
 */
static inline void run_finish(struct run_handle *h)
{
	struct run_result *r = h->res;
	bool reaped = false;

	for (;;) {
		int64_t now = run_now_ns(), step = now + 20000000LL;
		int64_t deadline = h->deadline_ns;

		if (!reaped) {
			pid_t w = waitpid(h->pid, &r->status, WNOHANG);

			if (w == h->pid) {
				reaped = true;
				if (now + 2000000000LL < h->deadline_ns)
					h->deadline_ns = now + 2000000000LL;
				continue;
			}
			if (w < 0 && errno != EINTR)
				abort();
		}
		/* pump the pipes in short steps so the exit is noticed */
		h->deadline_ns = step < deadline ? step : deadline;
		bool all_done = run_pump(h, NULL);
		h->deadline_ns = deadline;
		if (all_done && reaped)
			break;
		if (run_now_ns() >= h->deadline_ns) {
			if (!reaped)
				r->timed_out = true;
			kill(-h->pid, SIGKILL);
			if (!reaped) {
				kill(h->pid, SIGKILL);
				while (waitpid(h->pid, &r->status, 0) < 0 && errno == EINTR)
					;
				reaped = true;
			}
			/* what is left holding the pipes is not ours to wait for */
			break;
		}
	}
	kill(-h->pid, SIGKILL); /* stragglers of the group, if any */
	if (h->out_fd >= 0)
		close(h->out_fd);
	if (h->err_fd >= 0)
		close(h->err_fd);
	if (h->in_fd >= 0)
		close(h->in_fd);
	h->out_fd = h->err_fd = h->in_fd = -1;
	r->ms = (run_now_ns() - h->start_ns) / 1000000;
}

static inline void run(const struct run_spec *s, struct run_result *r)
{
	struct run_handle h;

	run_start(s, &h, r);
	run_finish(&h);
}

/* "exit 3", "signal 15 (Terminated)", "timed out": for messages. */
static inline const char *run_status_text(const struct run_result *r, char *buf, size_t len)
{
	if (r->timed_out)
		snprintf(buf, len, "timed out after %lld ms", (long long)r->ms);
	else if (WIFEXITED(r->status))
		snprintf(buf, len, "exit %d", WEXITSTATUS(r->status));
	else if (WIFSIGNALED(r->status))
		snprintf(buf, len, "signal %d (%s)", WTERMSIG(r->status),
			 strsignal(WTERMSIG(r->status)));
	else
		snprintf(buf, len, "status %#x", r->status);
	return buf;
}

/* Line number (1-based) of the first line where a and b differ, 0 if equal. */
static inline int run_first_diff(const char *a, const char *b, const char **la, const char **lb)
{
	int line = 1;

	*la = a;
	*lb = b;
	for (;;) {
		const char *ea = strchr(*la, '\n'), *eb = strchr(*lb, '\n');
		size_t na = ea ? (size_t)(ea - *la) : strlen(*la);
		size_t nb = eb ? (size_t)(eb - *lb) : strlen(*lb);

		if (na != nb || memcmp(*la, *lb, na) || !ea != !eb)
			return line;
		if (!ea)
			return 0;
		*la = ea + 1;
		*lb = eb + 1;
		line++;
	}
}

#endif
