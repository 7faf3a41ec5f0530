/* SPDX-License-Identifier: MIT */
/*
 * Signals and sleeping semops (SPEC A4.8, BRIEF "Signals"): natively a sleeping semop that is
 * interrupted returns EINTR whether the handler has SA_RESTART or not, and also after
 * SIGSTOP/SIGCONT without any handler; semtimedop too, at once rather than at its timeout. An
 * ignored or blocked signal does not interrupt. A signal to one thread interrupts only that
 * thread. After an interruption the sleeper is gone: GETNCNT drops and a later V stays in the
 * semaphore instead of going to the interrupted call.
 */
#include <pthread.h>

#include "prog.h"

static int id;
static volatile sig_atomic_t handled;

static void on_signal(int sig)
{
	(void)sig;
	handled++;
}

static void handle(int sig, int flags)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	MUST(sigaction(sig, &sa, NULL) == 0);
}

/*
 * A child sleeping in semop(a[num] -1) (semtimedop with timeout_ms if > 0); it reports its
 * result (errno or 0) plus whether its handler ran through `done`, then waits for `go` so the
 * parent can look at the semaphore while the child still lives.
 */
static struct chan done, go;

static pid_t sleeper(int num, int timeout_ms, void (*setup)(void))
{
	pid_t p = xfork();

	if (p == 0) {
		struct sembuf b = { (unsigned short)num, -1, 0 };
		struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
		int64_t t0;
		int r;

		if (setup)
			setup();
		t0 = now_ns();
		r = timeout_ms > 0 ? semtimedop(id, &b, 1, &ts) : semop(id, &b, 1);
		r = r ? errno : 0;
		tell(&done, (char)r);
		tell(&done, (char)handled);
		/* well before its timeout: the signal ended it, not the clock */
		tell(&done, (char)(timeout_ms > 0 && (now_ns() - t0) / 1000000 < timeout_ms / 2));
		_exit(hear(&go) == 'g' ? 0 : 1);
	}
	WAIT_CNT(id, num, GETNCNT, 1);
	return p;
}

static void report(const char *label, pid_t p, int num)
{
	int r = hear(&done), h = hear(&done), early = hear(&done);

	printf("%s: semop %s, handler ran %d time(s)%s\n", label,
	       r < 0 ? "(no answer)" : errname(r), h, early ? ", early" : "");
	CHECK("  GETNCNT with the sleeper still alive", 0, semctl(id, num, GETNCNT));
	CHECK("  V", 0, sop1(id, (unsigned short)num, 1, 0));
	CHECK("  GETVAL right after the V (not taken by the interrupted call)", 1, getval(id, num));
	tell(&go, 'g');
	printf("  child: %s\n", reap(p));
	MUST(setval(id, num, 0) == 0);
}

static void usr1_plain(void)
{
	handle(SIGUSR1, 0);
}

static void usr1_restart(void)
{
	handle(SIGUSR1, SA_RESTART);
}

static void usr2_ignored(void)
{
	signal(SIGUSR2, SIG_IGN);
}

static void usr1_masked(void)
{
	sigset_t s;

	handle(SIGUSR1, 0);
	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	MUST(sigprocmask(SIG_BLOCK, &s, NULL) == 0);
}

static void interrupted(void)
{
	pid_t p;
	int st;

	printf("-- handler without SA_RESTART\n");
	p = sleeper(0, 0, usr1_plain);
	kill(p, SIGUSR1);
	report("SIGUSR1", p, 0);

	printf("-- handler with SA_RESTART (still EINTR: semop is never restarted)\n");
	p = sleeper(0, 0, usr1_restart);
	kill(p, SIGUSR1);
	report("SIGUSR1", p, 0);

	printf("-- semtimedop, handler with SA_RESTART\n");
	p = sleeper(0, 4000, usr1_restart);
	kill(p, SIGUSR1);
	report("SIGUSR1", p, 0);

	printf("-- SIGSTOP then SIGCONT, no handler\n");
	p = sleeper(0, 0, NULL);
	kill(p, SIGSTOP);
	MUST(waitpid(p, &st, WUNTRACED) == p && WIFSTOPPED(st));
	printf("stopped: yes\n");
	kill(p, SIGCONT);
	report("SIGSTOP/SIGCONT", p, 0);

	printf("-- SIGSTOP then SIGCONT, semtimedop\n");
	p = sleeper(0, 4000, NULL);
	kill(p, SIGSTOP);
	MUST(waitpid(p, &st, WUNTRACED) == p && WIFSTOPPED(st));
	kill(p, SIGCONT);
	report("SIGSTOP/SIGCONT", p, 0);
}

/* Signals that must not interrupt: the sleeper is still there and takes the V. */
static void not_interrupted(const char *label, void (*setup)(void), int sig)
{
	pid_t p;
	int r, h;

	p = sleeper(0, 0, setup);
	kill(p, sig);
	/* give a wrong interruption time to show */
	sleep_ms(100);
	CHECK("  GETNCNT after the signal", 1, semctl(id, 0, GETNCNT));
	CHECK("  V", 0, sop1(id, 0, 1, 0));
	CHECK("  GETVAL right after the V (taken by the sleeper)", 0, getval(id, 0));
	r = hear(&done);
	h = hear(&done);
	(void)hear(&done);
	printf("%s: semop %s, handler ran %d time(s) before it returned\n", label,
	       r < 0 ? "(no answer)" : errname(r), h);
	tell(&go, 'g');
	printf("  child: %s\n", reap(p));
}

static void *thread_sleeper(void *arg)
{
	int num = (int)(intptr_t)arg;

	return (void *)(intptr_t)(sop1(id, (unsigned short)num, -1, 0) ? errno : 0);
}

/* pthread_kill interrupts the one thread; the other keeps sleeping. */
static void one_thread(void)
{
	pid_t p;

	printf("-- a signal to one of two sleeping threads\n");
	p = xfork();
	if (p == 0) {
		pthread_t t1, t2;
		void *r1, *r2;

		handle(SIGUSR1, SA_RESTART);
		MUST(pthread_create(&t1, NULL, thread_sleeper, (void *)1) == 0);
		MUST(pthread_create(&t2, NULL, thread_sleeper, (void *)2) == 0);
		WAIT_CNT(id, 1, GETNCNT, 1);
		WAIT_CNT(id, 2, GETNCNT, 1);
		MUST(pthread_kill(t1, SIGUSR1) == 0);
		MUST(pthread_join(t1, &r1) == 0);
		printf("thread on a[1]: %s\n", errname((int)(intptr_t)r1));
		CHECK("GETNCNT a[1]", 0, semctl(id, 1, GETNCNT));
		CHECK("GETNCNT a[2] (the other thread still sleeps)", 1, semctl(id, 2, GETNCNT));
		CHECK("a[2] +1", 0, sop1(id, 2, 1, 0));
		MUST(pthread_join(t2, &r2) == 0);
		printf("thread on a[2]: %s\n", errname((int)(intptr_t)r2));
		CHECK("a[2]", 0, getval(id, 2));
		_exit(prog_exit_status());
	}
	printf("child: %s\n", reap(p));
}

int main(void)
{
	prog_init();
	chan_open(&done);
	chan_open(&go);
	id = semget(IPC_PRIVATE, 3, 0600);
	MUST(id >= 0);
	interrupted();
	printf("-- ignored signal\n");
	not_interrupted("SIGUSR2 ignored", usr2_ignored, SIGUSR2);
	printf("-- blocked signal\n");
	not_interrupted("SIGUSR1 blocked", usr1_masked, SIGUSR1);
	one_thread();
	return prog_exit_status();
}
