/* SPDX-License-Identifier: MIT */
/*
 * Criterion, or under ThreadSanitizer a stand-in for it. Test files that `make test-tsan` runs
 * include this instead of <criterion/criterion.h>.
 *
 * Criterion's runner cannot start under ThreadSanitizer: it maps its shared arena at fixed
 * addresses, nearly all in ranges TSan reserves, and aborts ("Could not initialize inheritable
 * arena", Snaipe/Criterion#274) before any test runs. The stand-in keeps what the tests rely on:
 * each test in a process of its own (fork) between its suite's .init and .fini, a timeout,
 * expected signals, fatal and non-fatal checks, skips, and Criterion's summary line, which is
 * what tests/run.sh reads. The runner's own process never starts a thread, so forking it is safe.
 */
#ifndef SV_TEST_RUNNER_H
#define SV_TEST_RUNNER_H

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#if !UNDER_TSAN
#include <criterion/criterion.h>
#else
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MINI_MAX_TESTS 64

struct mini_suite {
	void (*init)(void);
	void (*fini)(void);
	double timeout;
};

struct mini_test {
	const char *suite, *name;
	void (*fn)(void);
	int signal;
	double timeout;
};

static struct mini_suite mini_suite;
static struct mini_test mini_tests[MINI_MAX_TESTS];
static int mini_ntests;
static const char *mini_current;
static bool mini_failed;

__attribute__((format(printf, 6, 7))) static void
mini_check(bool ok, bool fatal, const char *file, int line, const char *what, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	fprintf(stderr, "[----] %s: %s:%d: failed: %s. ", mini_current, file, line, what);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	mini_failed = true;
	if (fatal)
		exit(1);
}

/* A file has one suite, as every file here does. */
#define TestSuite(suite, ...)                                                                      \
	__attribute__((constructor)) static void mini_suite_##suite(void)                          \
	{                                                                                          \
		mini_suite = (struct mini_suite){ __VA_ARGS__ };                                   \
	}

#define MINI_TEST(suite, name, ...)                                                                \
	static void mini_##suite##_##name(void);                                                   \
	__attribute__((constructor)) static void mini_reg_##suite##_##name(void)                   \
	{                                                                                          \
		struct mini_test t = { #suite, #name, mini_##suite##_##name, __VA_ARGS__ };        \
		if (mini_ntests < MINI_MAX_TESTS)                                                  \
			mini_tests[mini_ntests++] = t;                                             \
	}                                                                                          \
	static void mini_##suite##_##name(void)
/* One level more, so that a suite given as a macro is expanded before pasting. */
#define Test(suite, name, ...) MINI_TEST(suite, name, __VA_ARGS__)

#define MINI_CHECK(fatal, cond, ...)                                                               \
	mini_check(!!(cond), fatal, __FILE__, __LINE__, #cond, " " __VA_ARGS__)
#define cr_assert(c, ...)	    MINI_CHECK(true, c, __VA_ARGS__)
#define cr_assert_not(c, ...)	    MINI_CHECK(true, !(c), __VA_ARGS__)
#define cr_assert_eq(a, b, ...)	    MINI_CHECK(true, (a) == (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...)	    MINI_CHECK(true, (a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...)    MINI_CHECK(true, (a) >= (b), __VA_ARGS__)
#define cr_assert_not_null(p, ...)  MINI_CHECK(true, (p) != NULL, __VA_ARGS__)
#define cr_expect(c, ...)	    MINI_CHECK(false, c, __VA_ARGS__)
#define cr_expect_not(c, ...)	    MINI_CHECK(false, !(c), __VA_ARGS__)
#define cr_expect_eq(a, b, ...)	    MINI_CHECK(false, (a) == (b), __VA_ARGS__)
#define cr_expect_lt(a, b, ...)	    MINI_CHECK(false, (a) < (b), __VA_ARGS__)
#define cr_expect_leq(a, b, ...)    MINI_CHECK(false, (a) <= (b), __VA_ARGS__)
#define cr_expect_gt(a, b, ...)	    MINI_CHECK(false, (a) > (b), __VA_ARGS__)
#define cr_expect_geq(a, b, ...)    MINI_CHECK(false, (a) >= (b), __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) MINI_CHECK(false, strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_log_info(...)	    (fprintf(stderr, "[----] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_warn(...)	    (fprintf(stderr, "[WARN] " __VA_ARGS__), fputc('\n', stderr))
#define cr_skip_test(...)                                                                          \
	(fprintf(stderr, "[SKIP] %s: ", mini_current), fprintf(stderr, __VA_ARGS__),               \
	 fputc('\n', stderr), exit(0))

/*
 * liburcu is not instrumented, so TSan cannot see the ordering its grace periods provide:
 *  - the call_rcu() callbacks of the engine and of the notify layer, which free an object
 *    after the grace period, would be reported as racing with its last use before call_rcu();
 *  - liburcu's own helper threads free what its callers allocated (rcu_barrier() and the
 *    hash tables' work queue), through the intercepted free().
 * Only those are excused; races in our code that liburcu calls back (the hash tables' match
 * functions) are still reported.
 */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
	return "race:proc_free_rcu\n"
	       "race:set_free_rcu\n"
	       "race:undo_free_rcu\n"
	       "race:process_free_rcu\n"
	       "race:thread_free_rcu\n"
	       "called_from_lib:liburcu-memb.so\n"
	       "called_from_lib:liburcu-cds.so\n"
	       "called_from_lib:liburcu-common.so\n";
}

static bool mini_run(const struct mini_test *t)
{
	double timeout = t->timeout > 0		  ? t->timeout
			 : mini_suite.timeout > 0 ? mini_suite.timeout
						  : 60;
	struct timespec t0, t1;
	int status;
	bool ok;
	pid_t pid;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		mini_current = t->name;
		/* TSan's slowdown: the timeouts are Criterion's, so allow some more */
		alarm((unsigned)(2 * timeout));
		if (mini_suite.init)
			mini_suite.init();
		t->fn();
		if (mini_suite.fini)
			mini_suite.fini();
		exit(mini_failed ? 1 : 0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("waitpid");
			exit(2);
		}
	if (t->signal)
		ok = WIFSIGNALED(status) && WTERMSIG(status) == t->signal;
	else
		ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "[%s] %s::%s: (%.2fs)%s\n", ok ? "PASS" : "FAIL", t->suite, t->name,
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
		ok || !WIFSIGNALED(status) ? "" : " killed by a signal");
	return ok;
}

int main(void)
{
	int failed = 0;

	for (int i = 0; i < mini_ntests; i++)
		failed += !mini_run(&mini_tests[i]);
	fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d\n", mini_ntests,
		mini_ntests - failed, failed);
	return failed != 0;
}
#endif /* UNDER_TSAN */

#endif /* SV_TEST_RUNNER_H */
