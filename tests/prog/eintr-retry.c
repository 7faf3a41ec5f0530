/* SPDX-License-Identifier: MIT */
/*
 * What a program does after EINTR (SPEC A4.8, BRIEF "Signals"): it calls the very same semop
 * again, with the same arguments from the same thread. Natively that is a new call like any
 * other: it sleeps if it must, or succeeds if it can. A supervisor that recognises the kernel's
 * silent restart of an interrupted call by "same thread, same arguments" must not mistake these
 * deliberate retries for restarts, neither at once nor later.
 *
 * The child reports every return of semop through a pipe; the parent prints the sequence.
 */
#include <sys/time.h>

#include "prog.h"

static int id;
static struct chan results, go;

static void on_signal(int sig)
{
	(void)sig;
}

static void handle(int sig, int flags)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	MUST(sigaction(sig, &sa, NULL) == 0);
}

/* Read reports until a 0 (success) or nothing more comes in ms; print them. */
static void results_until_success(const char *label, int ms)
{
	printf("%s:", label);
	for (int i = 0; i < 6; i++) {
		int r = hear_ms(&results, ms);

		if (r < 0) {
			printf(" (nothing more)");
			break;
		}
		printf(" %s", errname(r));
		if (r == 0)
			break;
	}
	printf("\n");
}

/* Retry at once: the retry must sleep again until the V. */
static void at_once(int flags)
{
	pid_t p;
	int first;

	MUST(setval(id, 0, 0) == 0);
	p = xfork();
	if (p == 0) {
		struct sembuf b = { 0, -1, 0 };

		handle(SIGUSR1, flags);
		for (int i = 0; i < 8; i++) {
			int r = semop(id, &b, 1) ? errno : 0;

			tell(&results, (char)r);
			if (r == 0)
				break;
		}
		_exit(0);
	}
	WAIT_CNT(id, 0, GETNCNT, 1);
	kill(p, SIGUSR1);
	first = hear(&results);
	printf("first return: %s\n", first < 0 ? "(none)" : errname(first));
	/*
	 * The retry is asleep now: nothing is reported for a while. Natively no retry returns
	 * at once. Under a seccomp supervisor an immediate retry is told from the kernel's restart
	 * of the interrupted call by the signal frame the handler left on the stack; when the
	 * program's own code has overwritten that frame before retrying, one retry may still
	 * return EINTR (semvisor-run(1), NOTES). The contract compared here: at most one.
	 */
	{
		int extra = 0, r;

		while ((r = hear_ms(&results, 300)) == EINTR && extra < 5)
			extra++;
		printf("a retry sleeps, after at most one extra EINTR: %s\n",
		       r < 0 && extra <= 1 ? "yes" : "no");
		EXPECT(r < 0 && extra <= 1, "retries returned %d extra EINTR, then %s", extra,
		       r < 0 ? "slept" : errname(r));
	}
	CHECK("GETNCNT (the retry sleeps)", 1, semctl(id, 0, GETNCNT));
	CHECK("V", 0, sop1(id, 0, 1, 0));
	results_until_success("after the V", 2000);
	printf("child: %s\n", reap(p));
	CHECK("a[0]", 0, getval(id, 0));
}

/* Retry later, when it can succeed: it must succeed. */
static void later(void)
{
	pid_t p;

	MUST(setval(id, 0, 0) == 0);
	p = xfork();
	if (p == 0) {
		struct sembuf b = { 0, -1, 0 };
		int r;

		handle(SIGUSR1, 0);
		r = semop(id, &b, 1) ? errno : 0;
		tell(&results, (char)r);
		if (hear(&go) != 'g')
			_exit(10);
		r = semop(id, &b, 1) ? errno : 0;
		tell(&results, (char)r);
		_exit(0);
	}
	WAIT_CNT(id, 0, GETNCNT, 1);
	kill(p, SIGUSR1);
	{
		int r = hear(&results);

		printf("interrupted: %s\n", r < 0 ? "(none)" : errname(r));
	}
	sleep_ms(300);
	CHECK("V (the retry will find it)", 0, sop1(id, 0, 1, 0));
	CHECK("a[0] before the retry", 1, getval(id, 0));
	tell(&go, 'g');
	results_until_success("retry 300 ms later", 2000);
	printf("child: %s\n", reap(p));
	CHECK("a[0]", 0, getval(id, 0));
}

/* The classic alarm() timeout: EINTR from SIGALRM, later the same call again. */
static void alarm_timeout(void)
{
	pid_t p;

	MUST(setval(id, 1, 0) == 0);
	p = xfork();
	if (p == 0) {
		struct sembuf b = { 1, -1, 0 };
		struct itimerval it = { { 0, 0 }, { 0, 100000 } };
		int r;

		handle(SIGALRM, 0);
		MUST(setitimer(ITIMER_REAL, &it, NULL) == 0);
		r = semop(id, &b, 1) ? errno : 0;
		tell(&results, (char)r);
		/* the same call again, with a new alarm: it must sleep and time out again */
		MUST(setitimer(ITIMER_REAL, &it, NULL) == 0);
		r = semop(id, &b, 1) ? errno : 0;
		tell(&results, (char)r);
		/* and once the value is there, it succeeds */
		if (hear(&go) != 'g')
			_exit(10);
		r = semop(id, &b, 1) ? errno : 0;
		tell(&results, (char)r);
		_exit(0);
	}
	{
		int64_t t0 = now_ns();
		int r1 = hear(&results), r2 = hear(&results);
		int64_t el = (now_ns() - t0) / 1000000;

		printf("two alarm timeouts: %s %s, both slept (>= 150 ms in all): %s\n",
		       r1 < 0 ? "(none)" : errname(r1), r2 < 0 ? "(none)" : errname(r2),
		       el >= 150 ? "yes" : "no");
		EXPECT(r1 == EINTR && r2 == EINTR && el >= 150,
		       "alarm timeouts %s %s after %lld ms", errname(r1), errname(r2),
		       (long long)el);
	}
	CHECK("V", 0, sop1(id, 1, 1, 0));
	tell(&go, 'g');
	results_until_success("third call", 2000);
	printf("child: %s\n", reap(p));
	CHECK("a[1]", 0, getval(id, 1));
}

int main(void)
{
	prog_init();
	chan_open(&results);
	chan_open(&go);
	id = semget(IPC_PRIVATE, 2, 0600);
	MUST(id >= 0);
	printf("-- retry at once, handler without SA_RESTART\n");
	at_once(0);
	printf("-- retry at once, handler with SA_RESTART\n");
	at_once(SA_RESTART);
	printf("-- retry later\n");
	later();
	printf("-- alarm timeouts\n");
	alarm_timeout();
	return prog_exit_status();
}
