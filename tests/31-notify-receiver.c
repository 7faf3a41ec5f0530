/* SPDX-License-Identifier: MIT */
/*
 * The receiver (server/notify/receiver.c): beside a lone worker, the thread that takes the busiest
 * listener's calls with a blocking NOTIF_RECV. What must hold whatever the timing:
 *  - a listener handed over while the receiver sits in NOTIF_RECV on another, idle one is
 *    served (the kick reaches the receiver; otherwise the new listener's calls hang);
 *  - the listener it leaves goes back to the worker and is served again;
 *  - the hang-up of its listener is seen (with exit_when_idle the supervisor then ends);
 *  - nt_super_stop() ends it while it waits on a live listener;
 *  - every call is served exactly once: the operations' results and the counters add up.
 *
 * The supervisor runs in the test process with one worker; confined children install the filter
 * and send their listener over a socketpair, then run bursts of semaphore operations on command.
 * Criterion runs each test in its own process.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/runner.h"

#include "handoff/xfer.h"
#include "notify/notify.h"
#include "tests/lib/fixture.h"

/* The supervisor keeps its namespaces for the life of the process (see 51-control-live.c). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:nt_super_new\nleak:worker_main\nleak:receiver_main\nleak:nsreg_named\n";
}

TestSuite(receiver, .timeout = 60);

#define KEY	  0x5e3101
#define NCHILD	  3
#define ANSWER_MS 10000

/* ---- the confined child ---- */

struct cmd {
	char op;    /* 'W' work, 'V' value, 'Q' quit */
	int rounds; /* 'W': lock/unlock pairs around a plain counter in the set */
};

static long sem1(int id, short op)
{
	struct sembuf sb = { .sem_num = 0, .sem_op = op };

	return syscall(SYS_semop, id, &sb, 1);
}

/*
 * 'W': rounds x (P(sem 0); sem 1 += 1 with GETVAL/SETVAL; V(sem 0)), answers the rounds that
 * went through; 'V': answers GETVAL of sem 1; 'Q': exits. Sem 0 starts at 1 (a mutex).
 */
static void child_main(int sock) __attribute__((noreturn));
static void child_main(int sock)
{
	struct cmd c;
	int id;

	fx_confine(sock);
	id = (int)syscall(SYS_semget, KEY, 2, IPC_CREAT | IPC_EXCL | 0600);
	if (id >= 0)
		syscall(SYS_semctl, id, 0, SETVAL, 1);
	else
		id = (int)syscall(SYS_semget, KEY, 2, 0);
	for (;;) {
		int answer = 0;

		if (read(sock, &c, sizeof(c)) != sizeof(c))
			_exit(0);
		switch (c.op) {
		case 'W':
			for (int i = 0; i < c.rounds; i++) {
				long v;

				if (sem1(id, -1))
					break;
				v = syscall(SYS_semctl, id, 1, GETVAL, 0);
				syscall(SYS_semctl, id, 1, SETVAL, (int)v + 1);
				if (sem1(id, 1))
					break;
				answer++;
			}
			break;
		case 'V':
			answer = (int)syscall(SYS_semctl, id, 1, GETVAL, 0);
			break;
		default:
			_exit(0);
		}
		if (write(sock, &answer, sizeof(answer)) != sizeof(answer))
			_exit(94);
	}
}

/* ---- the test's side ---- */

struct child {
	pid_t pid;
	int sock;
};

static struct nt_super *S;
static struct child C[NCHILD];

/* Fork the children first: the supervisor's threads must not exist at fork. */
static void setup(bool exit_when_idle)
{
	struct nt_config cfg = { .nworkers = 1, .exit_when_idle = exit_when_idle };
	char err[256];

	if (geteuid() != 0)
		cr_skip_test("serving another process's calls needs root");
	for (int i = 0; i < NCHILD; i++) {
		int sp[2];

		cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
		fflush(NULL);
		C[i].pid = fork();
		cr_assert_geq(C[i].pid, 0);
		if (C[i].pid == 0) {
			/* Only the test may hold the other ends: a child quits on end of file. */
			for (int j = 0; j < i; j++)
				close(C[j].sock);
			close(sp[0]);
			child_main(sp[1]);
		}
		close(sp[1]);
		C[i].sock = sp[0];
	}
	S = nt_super_new(&cfg, err, sizeof(err));
	cr_assert_not_null(S, "%s", err);
	for (int i = 0; i < NCHILD; i++) {
		struct nt_listener_opts lo = { .name = "receiver-test" };
		struct ho_info info;
		int fd;

		cr_assert_eq(ho_recv(C[i].sock, &fd, &info, ANSWER_MS, err, sizeof(err)), 0, "%s",
			     err);
		cr_assert_eq(nt_super_add_listener(S, fd, &lo), 0);
	}
	cr_assert_eq(nt_super_start(S), 0);
}

static int ask(int i, char op, int rounds)
{
	struct cmd c = { .op = op, .rounds = rounds };
	struct pollfd pfd = { .fd = C[i].sock, .events = POLLIN };
	int answer = -1;

	cr_assert_eq(write(C[i].sock, &c, sizeof(c)), (ssize_t)sizeof(c));
	cr_assert_eq(poll(&pfd, 1, ANSWER_MS), 1,
		     "child %d did not answer '%c' within %d ms: its calls are not served", i, op,
		     ANSWER_MS);
	cr_assert_eq(read(C[i].sock, &answer, sizeof(answer)), (ssize_t)sizeof(answer),
		     "child %d died during '%c'", i, op);
	return answer;
}

static void quit(int i)
{
	int st = -1;

	close(C[i].sock);
	cr_assert_eq(waitpid(C[i].pid, &st, 0), C[i].pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status 0x%x", i, st);
}

/* Calls a child makes per round: P and V (semop), GETVAL and SETVAL (semctl). */
#define SEMOPS_PER_ROUND 2
#define CALLS_PER_ROUND	 4

/*
 * Bursts that move from child to child, each while the others sit idle (their listeners
 * quiet): every move is a hand-over to a receiver waiting in NOTIF_RECV on an idle listener.
 */
Test(receiver, bursts_move_between_listeners)
{
	const int bursts = 30, rounds = 40;
	struct nt_stats st;
	int total = 0;

	setup(false);
	for (int b = 0; b < bursts; b++) {
		int got = ask(b % NCHILD, 'W', rounds);

		cr_assert_eq(got, rounds, "burst %d: %d of %d rounds", b, got, rounds);
		total += got;
	}
	cr_assert_eq(ask(0, 'V', 0), total, "the counter lost updates");
	nt_super_stats(S, &st);
	cr_assert_eq(st.calls[NT_SEMOP], (uint64_t)(SEMOPS_PER_ROUND * total),
		     "semop calls counted %llu, made %d", (unsigned long long)st.calls[NT_SEMOP],
		     SEMOPS_PER_ROUND * total);
	/* Every burst after the first is another child's: each one moved the receiver. */
	cr_assert_geq(st.handovers, (uint64_t)(bursts - 1), "%llu hand-overs for %d bursts",
		      (unsigned long long)st.handovers, bursts);
	/*
	 * A burst makes CALLS_PER_ROUND * rounds calls; its first two go through the worker (the
	 * hand-over's rule), a third when the worker looks before the receiver has counted the
	 * last call of the burst before. The receiver takes all the others.
	 */
	cr_assert_geq(st.received, (uint64_t)(bursts * (CALLS_PER_ROUND * rounds - 3)),
		      "the receiver took only %llu calls", (unsigned long long)st.received);
	for (int i = 0; i < NCHILD; i++)
		quit(i);
	nt_super_stop(S);
	nt_super_wait(S);
	nt_super_free(S);
}

/* All children at once: hand-overs and kicks while every listener is busy. */
Test(receiver, concurrent_listeners)
{
	const int rounds = 3000;
	struct cmd c = { .op = 'W', .rounds = rounds };
	struct nt_stats st;
	int total = 0;

	setup(false);
	for (int i = 0; i < NCHILD; i++)
		cr_assert_eq(write(C[i].sock, &c, sizeof(c)), (ssize_t)sizeof(c));
	for (int i = 0; i < NCHILD; i++) {
		struct pollfd pfd = { .fd = C[i].sock, .events = POLLIN };
		int got = -1;

		cr_assert_eq(poll(&pfd, 1, 4 * ANSWER_MS), 1, "child %d hangs", i);
		cr_assert_eq(read(C[i].sock, &got, sizeof(got)), (ssize_t)sizeof(got));
		cr_assert_eq(got, rounds, "child %d: %d of %d rounds", i, got, rounds);
		total += got;
	}
	cr_assert_eq(ask(1, 'V', 0), total, "the counter lost updates");
	nt_super_stats(S, &st);
	cr_assert_eq(st.calls[NT_SEMOP], (uint64_t)(SEMOPS_PER_ROUND * total));
	for (int i = 0; i < NCHILD; i++)
		quit(i);
	nt_super_stop(S);
	nt_super_wait(S);
	nt_super_free(S);
}

/* The receiver's listener hangs up last: the supervisor sees it and ends by itself. */
Test(receiver, hangup_of_received_listener_ends_supervisor)
{
	setup(true);
	for (int i = 0; i < NCHILD; i++)
		cr_assert_eq(ask(i, 'W', 50), 50);
	for (int i = 0; i < NCHILD - 1; i++)
		quit(i);
	/* The last one's listener is the receiver's now; more calls make sure of it. */
	cr_assert_eq(ask(NCHILD - 1, 'W', 50), 50);
	quit(NCHILD - 1);
	nt_super_wait(S); /* returns once every listener is gone, or the suite's timeout fails */
	cr_assert_eq(nt_super_nlisteners(S), 0);
	nt_super_free(S);
}

/* nt_super_stop() while the receiver waits in NOTIF_RECV on a live, idle listener. */
Test(receiver, stop_while_receiving)
{
	setup(false);
	for (int i = 0; i < NCHILD; i++)
		cr_assert_eq(ask(i, 'W', 20), 20);
	nt_super_stop(S);
	nt_super_wait(S); /* hangs if the kick does not end the receiver's wait */
	nt_super_free(S);
	/* The listeners are closed: the children's next calls fail instead of waiting. */
	for (int i = 0; i < NCHILD; i++)
		quit(i);
}
