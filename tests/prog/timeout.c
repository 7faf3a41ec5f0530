/* SPDX-License-Identifier: MIT */
/*
 * semtimedop timeouts (SPEC A4.1, A4.8): a sleep that nobody ends fails with EAGAIN no earlier
 * than the timeout and not much later (printed as yes/no: [timeout, timeout + 100 ms]); a zero
 * timeout fails at once; a sleep ended in time by someone else succeeds; concurrent sleepers
 * with different timeouts each expire on their own; an expired sleeper leaves nothing behind
 * (GETNCNT back to 0, a later V stays in the semaphore); bad timeouts are EINVAL even when the
 * operation could proceed, and checked before the id; an unreadable timeout is EFAULT.
 */
#include <pthread.h>

#include "prog.h"

#define SLACK_MS 100

static int id;

/* semtimedop(sops) with a timeout of ms; prints result and whether it took [ms, ms + slack]. */
static void timed(const char *label, unsigned short num, short op, int ms)
{
	struct sembuf b = { num, op, 0 };
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	int64_t t0 = now_ns(), el;
	int r, e;

	r = semtimedop(id, &b, 1, &ts);
	e = errno;
	el = (now_ns() - t0) / 1000000;
	printf("%s: %s, after >= %d ms: %s, within %d ms more: %s\n", label, res(r, e), ms,
	       el >= ms ? "yes" : "no", SLACK_MS, el <= ms + SLACK_MS ? "yes" : "no");
	EXPECT(r == -1 && e == EAGAIN, "%s: %s", label, res(r, e));
	EXPECT(el >= ms && el <= ms + SLACK_MS, "%s: %lld ms for %d ms", label, (long long)el, ms);
}

struct tw {
	int ms;
	int result;
	int64_t elapsed_ms;
};

static void *timed_thread(void *arg)
{
	struct tw *t = arg;
	struct sembuf b = { 1, -1, 0 };
	struct timespec ts = { t->ms / 1000, (long)(t->ms % 1000) * 1000000L };
	int64_t t0 = now_ns();

	t->result = semtimedop(id, &b, 1, &ts) ? errno : 0;
	t->elapsed_ms = (now_ns() - t0) / 1000000;
	return NULL;
}

static void bad_timeouts(void)
{
	struct sembuf up = { 0, 1, 0 };
	struct timespec ts;

	printf("-- bad timeouts\n");
	ts = (struct timespec){ 0, 1000000000L };
	CHECK("tv_nsec 1e9 (op could proceed)", -EINVAL, semtimedop(id, &up, 1, &ts));
	ts = (struct timespec){ 0, -1 };
	CHECK("tv_nsec -1", -EINVAL, semtimedop(id, &up, 1, &ts));
	ts = (struct timespec){ -1, 0 };
	CHECK("tv_sec -1", -EINVAL, semtimedop(id, &up, 1, &ts));
	ts = (struct timespec){ 0, 1000000000L };
	{
		/* checked before the semaphore number (EFBIG) and before blocking (EAGAIN) */
		struct sembuf far = { 5, 1, 0 }, nowait = { 1, -1, IPC_NOWAIT };

		CHECK("tv_nsec 1e9, sem_num 5 of 2", -EINVAL, semtimedop(id, &far, 1, &ts));
		CHECK("tv_nsec 1e9, would block with IPC_NOWAIT", -EINVAL,
		      semtimedop(id, &nowait, 1, &ts));
		ts = (struct timespec){ 0, 0 };
		CHECK("sem_num 5 of 2, good timeout", -EFBIG, semtimedop(id, &far, 1, &ts));
	}
	CHECK("timeout pointer 8 (unreadable)", -EFAULT,
	      semtimedop(id, &up, 1, (struct timespec *)8));
	CHECK("a[0] unchanged", 0, getval(id, 0));
	ts = (struct timespec){ 0, 999999999L };
	CHECK("tv_nsec 999999999 (valid; op proceeds)", 0, semtimedop(id, &up, 1, &ts));
	CHECK("a[0]", 1, getval(id, 0));
}

int main(void)
{
	struct timespec zero = { 0, 0 };
	struct sembuf down = { 0, -1, 0 };
	pthread_t th[3];
	struct tw tw[3] = { { 300, 0, 0 }, { 100, 0, 0 }, { 200, 0, 0 } };
	int64_t t0, el;
	pid_t p;

	prog_init();
	id = semget(IPC_PRIVATE, 2, 0600);
	MUST(id >= 0);

	printf("-- expiry\n");
	CHECK("zero timeout", -EAGAIN, semtimedop(id, &down, 1, &zero));
	timed("-1 for 200 ms", 0, -1, 200);
	CHECK("GETNCNT after the timeout", 0, semctl(id, 0, GETNCNT));
	MUST(setval(id, 0, 1) == 0);
	timed("wait-for-zero for 150 ms", 0, 0, 150);
	CHECK("GETZCNT after the timeout", 0, semctl(id, 0, GETZCNT));
	timed("-2 for 1100 ms (seconds and nanoseconds)", 0, -2, 1100);
	CHECK("a[0] (a V after the timeouts stays)", 1, getval(id, 0));
	MUST(setval(id, 0, 0) == 0);

	printf("-- three threads, timeouts 300, 100, 200 ms\n");
	t0 = now_ns();
	for (int i = 0; i < 3; i++)
		MUST(pthread_create(&th[i], NULL, timed_thread, &tw[i]) == 0);
	for (int i = 0; i < 3; i++)
		MUST(pthread_join(th[i], NULL) == 0);
	el = (now_ns() - t0) / 1000000;
	for (int i = 0; i < 3; i++) {
		bool ok = tw[i].elapsed_ms >= tw[i].ms && tw[i].elapsed_ms <= tw[i].ms + SLACK_MS;

		printf("thread %d ms: %s, on time: %s\n", tw[i].ms, errname(tw[i].result),
		       ok ? "yes" : "no");
		EXPECT(tw[i].result == EAGAIN && ok, "thread %d ms: %s after %lld ms", tw[i].ms,
		       errname(tw[i].result), (long long)tw[i].elapsed_ms);
	}
	printf("all three within 300 + %d ms: %s\n", SLACK_MS, el <= 300 + SLACK_MS ? "yes" : "no");
	CHECK("GETNCNT a[1]", 0, semctl(id, 1, GETNCNT));

	printf("-- woken before the timeout\n");
	p = xfork();
	if (p == 0) {
		struct timespec ts = { 10, 0 };
		int64_t c0 = now_ns();
		int r = semtimedop(id, &down, 1, &ts);

		/* well before the 10 s timeout */
		_exit(r ? errno : (now_ns() - c0) / 1000000 < 5000 ? 0 : 99);
	}
	WAIT_CNT(id, 0, GETNCNT, 1);
	CHECK("a[0] +1", 0, sop1(id, 0, 1, 0));
	CHECK("a[0] right after (taken by the sleeper)", 0, getval(id, 0));
	printf("sleeper: %s\n", reap_errno(p));

	bad_timeouts();
	return prog_exit_status();
}
