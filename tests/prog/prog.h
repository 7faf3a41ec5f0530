/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the differential test programs (tests/prog/): plain C, libc and pthreads, no
 * project code, because each program runs both natively and under semvisor-run and the two runs
 * must print the same. So everything printed is deterministic: no pids, no times, only ids that a
 * fresh IPC namespace makes deterministic, and yes/no for timing checks.
 *
 * Each program also checks what the kernel is known to do (EXPECT): a failed expectation prints
 * "FAIL: ..." and makes the exit status 1, so a program that drifts from the kernel fails even
 * natively, and the harness insists on the native status too.
 *
 * Sequencing between processes never relies on sleeping alone: "the other process is blocked in
 * semop now" is established by polling GETNCNT/GETZCNT (wait_cnt), with a bounded wait so that a
 * broken supervisor gives a failure instead of a hang.
 */
#ifndef SV_TEST_PROG_H
#define SV_TEST_PROG_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The caller defines it (semctl(2)): glibc does not. */
union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
	struct seminfo *__buf;
};

#define WAIT_MS 5000 /* bound on every "wait until the other side is there" */

static int prog_failures __attribute__((unused));

/*
 * LeakSanitizer (make SAN=asan) stops the world with ptrace at exit, which a program traced by
 * semvisor-run's ptrace backend cannot do: every such run would end in its fatal error. The
 * programs' own leaks are not what they test.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

/* Line-buffered stdout: output reaches the file line by line, so forks never duplicate it. */
static inline void prog_init(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	setvbuf(stderr, NULL, _IONBF, 0);
}

static inline int prog_exit_status(void)
{
	return prog_failures ? 1 : 0;
}

#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FAIL (%s:%d): ", __FILE__, __LINE__);                              \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
			prog_failures++;                                                           \
		}                                                                                  \
	} while (0)

/* A setup step that must work, or nothing after it means anything. */
#define MUST(cond)                                                                                 \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FATAL (%s:%d): %s: %s\n", __FILE__, __LINE__, #cond,               \
			       strerror(errno));                                                   \
			exit(2);                                                                   \
		}                                                                                  \
	} while (0)

static inline const char *errname(int e)
{
	const char *n = e ? strerrorname_np(e) : "0";

	return n ? n : "E?";
}

/* "= 3" or "= -1 EINVAL": the return of a call and, if it failed, its errno by name. */
static inline const char *res(long r, int e)
{
	static __thread char buf[64];

	if (r == -1)
		snprintf(buf, sizeof(buf), "-1 %s", errname(e));
	else
		snprintf(buf, sizeof(buf), "%ld", r);
	return buf;
}

/* Run a call, print "label: result", and give back the result; errno is kept. */
#define SHOW(label, call)                                                                          \
	({                                                                                         \
		errno = 0;                                                                         \
		long r_ = (long)(call);                                                            \
		int e_ = errno;                                                                    \
		printf("%s: %s\n", label, res(r_, e_));                                            \
		errno = e_;                                                                        \
		r_;                                                                                \
	})

/* Run a call and check it returns want (a value, or -errno for an expected failure). */
#define CHECK(label, want, call)                                                                   \
	({                                                                                         \
		errno = 0;                                                                         \
		long r_ = (long)(call);                                                            \
		int e_ = errno;                                                                    \
		long got_ = r_ == -1 ? -(long)e_ : r_;                                             \
		printf("%s: %s\n", label, res(r_, e_));                                            \
		EXPECT(got_ == (long)(want), "%s: got %s, expected %ld", label, res(r_, e_),       \
		       (long)(want));                                                              \
		errno = e_;                                                                        \
		r_;                                                                                \
	})

static inline int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * Sleep to a deadline: under a flood of signals a relative sleep resumed with what is left may
 * never end (each interruption costs more than the time that passed).
 */
static inline void sleep_ms(int ms)
{
	int64_t end = now_ns() + ms * 1000000LL;
	struct timespec ts = { end / 1000000000LL, end % 1000000000LL };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static inline int getval(int id, int num)
{
	return semctl(id, num, GETVAL);
}

static inline int setval(int id, int num, int val)
{
	union semun u = { .val = val };

	return semctl(id, num, SETVAL, u);
}

static inline int sop1(int id, unsigned short num, short op, short flg)
{
	struct sembuf b = { num, op, flg };

	return semop(id, &b, 1);
}

/*
 * Wait until semctl(id, num, cmd) (GETNCNT, GETZCNT, GETVAL) reads want, polling: this is how a
 * program knows that another process is now asleep in semop. False after WAIT_MS.
 */
static inline bool wait_cnt(int id, int num, int cmd, int want)
{
	int64_t end = now_ns() + WAIT_MS * 1000000LL;

	for (;;) {
		int v = semctl(id, num, cmd);

		if (v == want)
			return true;
		if (now_ns() > end) {
			printf("wait: semctl(%d, %d, %d) stays %d, want %d\n", id, num, cmd, v,
			       want);
			return false;
		}
		usleep(500);
	}
}

#define WAIT_CNT(id, num, cmd, want) MUST(wait_cnt(id, num, cmd, want))

/* Wait until a file exists at path (a test's word to go on), polling: false after ms. */
static inline bool wait_file(const char *path, int ms)
{
	struct stat sb;

	for (int waited = 0; stat(path, &sb) != 0; waited += 10) {
		if (waited >= ms)
			return false;
		sleep_ms(10);
	}
	return true;
}

/*
 * The value of a semaphore once it reads want, or whatever it reads after WAIT_MS. For checks
 * after a process exit whose undo list must have been applied: natively that is done before
 * waitpid() returns; tests that are about something else give a supervisor the time it takes
 * to notice the exit (undo-timing.c checks the promptness itself).
 */
static inline int settled(int id, int num, int want)
{
	int64_t end = now_ns() + WAIT_MS * 1000000LL;
	int v;

	while ((v = semctl(id, num, GETVAL)) != want && now_ns() < end)
		usleep(500);
	return v;
}

/* Time for a wrong change to show (e.g. an undo applied when it must not be) before a check. */
static inline void quiesce(void)
{
	sleep_ms(200);
}

/* fork with stdout flushed first, so nothing buffered is printed twice. */
static inline pid_t xfork(void)
{
	pid_t p;

	fflush(NULL);
	p = fork();
	MUST(p >= 0);
	if (p == 0)
		prog_failures = 0; /* the child's exit status speaks for the child only */
	return p;
}

/* "exited 3", "killed by SIGKILL": how a child ended, deterministic text. */
static inline const char *how(int status)
{
	static __thread char buf[64];

	if (WIFEXITED(status))
		snprintf(buf, sizeof(buf), "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sizeof(buf), "killed by SIG%s",
			 sigabbrev_np(WTERMSIG(status)) ?: "?");
	else
		snprintf(buf, sizeof(buf), "status %#x", status);
	return buf;
}

/* Reap one child; its status as text. */
static inline const char *reap(pid_t p)
{
	int st;

	while (waitpid(p, &st, 0) < 0)
		MUST(errno == EINTR);
	return how(st);
}

/* Reap a child whose own checks must all pass: "label: exited 0", else a failure here too. */
static inline void reap_ok(pid_t p, const char *label)
{
	const char *h = reap(p);

	printf("%s: %s\n", label, h);
	EXPECT(!strcmp(h, "exited 0"), "%s: %s", label, h);
}

/* Reap a child that reports an errno (or 0) as its exit status: that errno's name. */
static inline const char *reap_errno(pid_t p)
{
	int st;

	while (waitpid(p, &st, 0) < 0)
		MUST(errno == EINTR);
	if (WIFEXITED(st))
		return errname(WEXITSTATUS(st));
	return how(st);
}

/* A one-byte message pipe between processes: tell/hear with a bounded wait. */
struct chan {
	int r, w;
};

static inline void chan_open(struct chan *c)
{
	int fd[2];

	MUST(pipe(fd) == 0);
	c->r = fd[0];
	c->w = fd[1];
}

static inline void tell(struct chan *c, char b)
{
	MUST(write(c->w, &b, 1) == 1);
}

/* The next byte, or -1 if none came within ms (or the writers are gone). */
static inline int hear_ms(struct chan *c, int ms)
{
	int64_t end = now_ns() + (int64_t)ms * 1000000LL;
	char b;

	for (;;) {
		struct timeval tv;
		fd_set set;
		int64_t left = end - now_ns();
		int n;

		if (left < 0)
			left = 0;
		tv.tv_sec = left / 1000000000LL;
		tv.tv_usec = (left % 1000000000LL) / 1000;
		FD_ZERO(&set);
		FD_SET(c->r, &set);
		n = select(c->r + 1, &set, NULL, NULL, &tv);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		if (read(c->r, &b, 1) == 1)
			return (unsigned char)b;
		if (errno != EINTR)
			return -1;
	}
}

static inline int hear(struct chan *c)
{
	return hear_ms(c, WAIT_MS);
}

#define HEAR(c, want) MUST(hear(c) == (want))

#endif
