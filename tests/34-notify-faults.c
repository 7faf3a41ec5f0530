/* SPDX-License-Identifier: MIT */
/*
 * Resource failures on the data path, made to happen on demand (server/util/fault.h: this test
 * links the library built with SV_FAULT_INJECT). Each must become an errno for the one call
 * that met it (ENOMEM), never a crash of the supervisor, which goes on serving, and no value
 * may be lost:
 *  - epoll refusing a pidfd, when a process or a thread is first seen;
 *  - every allocation of the data path failing in turn, over a run of calls that exercises
 *    them all (new process, new thread, SEM_UNDO, a timed wait, GETNCNT);
 * and orderings a fault can widen: a removal whose commit is held back 200 ms, before or after
 * it is decided, meanwhile its caller's credentials change, must not happen (or be seen to
 * happen) after the change; a wake-up whose answer
 * was lost (its caller in a signal handler) and whose undo is held back 200 ms, meanwhile the
 * kernel restarts the call, must be settled before the restart is served.
 *
 * The supervisor runs in the test process; confined children install the filter and send the
 * listener over a socketpair, then report each call's result over it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
#include "util/fault.h"

/* The supervisor keeps its namespaces and records for the life of the process. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:nt_super_new\nleak:worker_main\nleak:receiver_main\nleak:ns_new\n"
	       "leak:ident_thread\nleak:process_get\n";
}

TestSuite(faults, .timeout = 120);

#define KEY 0x5e3401

static struct nt_super *S;

static void start(int workers)
{
	struct nt_config cfg = { .nworkers = workers };
	char err[256];

	S = nt_super_new(&cfg, err, sizeof(err));
	cr_assert(S, "nt_super_new: %s", err);
	cr_assert_eq(nt_super_start(S), 0);
}

/*
 * Confined children are forked before the supervisor's threads exist: a child forked while
 * one of them held a lock (the sanitizers' allocator's, say) would inherit it held, and could
 * not start threads of its own.
 */
struct child {
	pid_t pid;
	int sock; /* to tell it to go, and to hear its reports */
	int listener;
};

/* Fork a confined child that runs body(sock) once told to go (go()). */
static void spawn(void (*body)(int sock), struct child *c)
{
	struct ho_info info;
	char err[256];
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	c->pid = fork();
	cr_assert(c->pid >= 0);
	if (c->pid == 0) {
		char g;

		close(sv[0]);
		fx_confine(sv[1]);
		if (read(sv[1], &g, 1) != 1)
			_exit(89);
		body(sv[1]);
		_exit(0);
	}
	close(sv[1]);
	c->sock = sv[0];
	cr_assert_eq(ho_recv(c->sock, &c->listener, &info, 5000, err, sizeof(err)), 0, "%s", err);
}

/* Serve c, starting S with `workers` workers if it is not running yet. */
static void serve(const struct child *c, int workers)
{
	struct nt_listener_opts lo = { .name = "faults", .ns_traps = false };

	if (!S)
		start(workers);
	cr_assert_eq(nt_super_add_listener(S, c->listener, &lo), 0);
}

/* One child, served at once: its pid. */
static pid_t confined(void (*body)(int sock), int *sock_out, int workers)
{
	struct child c;

	spawn(body, &c);
	serve(&c, workers);
	*sock_out = c.sock;
	return c.pid;
}

/* A call's result as the child reports it: the value, or -errno. */
static long result(long r)
{
	return r == -1 ? -errno : r;
}

static void go(int sock)
{
	cr_assert_eq(write(sock, "g", 1), 1);
}

static void report(int sock, long v)
{
	if (write(sock, &v, sizeof(v)) != sizeof(v))
		_exit(90);
}

static long hear(int sock)
{
	long v;

	cr_assert_eq(read(sock, &v, sizeof(v)), (ssize_t)sizeof(v), "the child said nothing");
	return v;
}

static void wait_ok(pid_t p)
{
	int st;

	cr_assert_eq(waitpid(p, &st, 0), p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}

static long sem_op(int id, short op, short flg)
{
	struct sembuf b = { 0, op, flg };

	return result(syscall(SYS_semop, id, &b, 1));
}

/* ---- epoll refusing a pidfd ---- */

static void *thread_semop(void *arg)
{
	int id = (int)(intptr_t)arg;

	return (void *)(intptr_t)sem_op(id, 1, 0);
}

static void epoll_child(int sock)
{
	char go;
	pthread_t t;
	void *r;
	long id;

	/* the first call of this process: its process record cannot be watched */
	report(sock, result(syscall(SYS_semget, KEY, 1, IPC_CREAT | 0600)));
	id = result(syscall(SYS_semget, KEY, 1, IPC_CREAT | 0600));
	report(sock, id);
	if (read(sock, &go, 1) != 1)
		_exit(91);
	/* a new thread: its record cannot be watched, then it can */
	pthread_create(&t, NULL, thread_semop, (void *)(intptr_t)id);
	pthread_join(t, &r);
	report(sock, (long)(intptr_t)r);
	pthread_create(&t, NULL, thread_semop, (void *)(intptr_t)id);
	pthread_join(t, &r);
	report(sock, (long)(intptr_t)r);
	report(sock, result(syscall(SYS_semctl, id, 0, GETVAL)));
}

Test(faults, epoll_refusing_a_pidfd)
{
	int sock;
	pid_t p;

	p = confined(epoll_child, &sock, 1);
	sv_fault_arm(SV_FAULT_EPOLL, 0, 1);
	go(sock);
	cr_expect_eq(hear(sock), -ENOMEM, "a process whose exit cannot be watched: ENOMEM");
	cr_assert_geq(hear(sock), 0, "the next call of that process is served");
	sv_fault_arm(SV_FAULT_EPOLL, 0, 1);
	cr_assert_eq(write(sock, "g", 1), 1);
	cr_expect_eq(hear(sock), -ENOMEM, "a thread whose exit cannot be watched: ENOMEM");
	cr_expect_eq(hear(sock), 0, "another thread is served");
	cr_expect_eq(hear(sock), 1, "the failed call changed nothing, the served one added 1");
	cr_expect_eq(sv_fault_hits(SV_FAULT_EPOLL), 2);
	wait_ok(p);
	nt_super_stop(S);
	nt_super_wait(S);
}

/* ---- every allocation failing in turn ---- */

static void *thread_post(void *arg)
{
	return (void *)(intptr_t)sem_op((int)(intptr_t)arg, 1, 0);
}

/* A result neither normal (ok) nor ENOMEM, as step * 1000 - errno; else 0. */
static long step(int n, long r, bool ok)
{
	return ok || r == -ENOMEM ? 0 : n * 1000L - r;
}

/*
 * One round: a new process posts +1 with SEM_UNDO (undone at its exit), +1 plainly, waits
 * 10 ms for zero in vain (a timer), has a thread post +1, asks GETNCNT. Reports the plain +1's
 * that went through (they stay) and whether every result was the normal one or ENOMEM.
 */
static void alloc_child(int sock)
{
	struct sembuf zero = { 0, 0, 0 }; /* the value is never 0 then: a wait that times out */
	struct timespec ts = { 0, 10000000 };
	long id = -ENOMEM, r, kept = 0, odd = 0;
	pthread_t t;
	void *tr;

	for (int i = 0; i < 3 && id == -ENOMEM; i++)
		id = result(syscall(SYS_semget, KEY, 1, IPC_CREAT | 0600));
	if (id < 0)
		_exit(80);
	r = sem_op((int)id, 1, SEM_UNDO);
	odd = odd ?: step(1, r, r == 0);
	r = sem_op((int)id, 1, 0);
	odd = odd ?: step(2, r, r == 0);
	kept += r == 0;
	r = result(syscall(SYS_semtimedop, id, &zero, 1, &ts));
	odd = odd ?: step(3, r, r == -EAGAIN);
	pthread_create(&t, NULL, thread_post, (void *)(intptr_t)id);
	pthread_join(t, &tr);
	r = (long)(intptr_t)tr;
	odd = odd ?: step(4, r, r == 0);
	kept += r == 0;
	r = result(syscall(SYS_semctl, id, 0, GETNCNT));
	odd = odd ?: step(5, r, r == 0);
	report(sock, kept);
	report(sock, odd);
}

static void getval_child(int sock)
{
	long id = result(syscall(SYS_semget, KEY, 1, 0));

	report(sock, id < 0 ? id : result(syscall(SYS_semctl, id, 0, GETVAL)));
}

Test(faults, every_allocation_failing_in_turn)
{
	struct child kids[32], last;
	long kept = 0, odd;
	int sock, rounds = 32;
	pid_t p;

	/* a round allocates about six times: each of them fails in turn, four times over */
	for (int round = 0; round < rounds; round++)
		spawn(alloc_child, &kids[round]);
	spawn(getval_child, &last);
	for (int round = 0, skip = 0; round < rounds; round++, skip = round % 8) {
		serve(&kids[round], 1);
		p = kids[round].pid;
		sock = kids[round].sock;
		sv_fault_arm(SV_FAULT_ALLOC, skip, 1);
		go(sock);
		kept += hear(sock);
		odd = hear(sock);
		cr_expect_eq(odd, 0, "round %d: step %ld: %s, neither its normal result nor ENOMEM",
			     round, odd / 1000, strerrorname_np((int)(odd % 1000)));
		wait_ok(p);
		close(sock);
	}
	sv_fault_arm(SV_FAULT_ALLOC, 0, 0);
	cr_expect_gt(sv_fault_hits(SV_FAULT_ALLOC), rounds / 2, "few allocations were reached");
	/* SEM_UNDO's +1 went at each exit; what stays is every plain +1 that was served */
	serve(&last, 1);
	go(last.sock);
	cr_expect_eq(hear(last.sock), kept, "a value was lost or invented");
	p = last.pid;
	wait_ok(p);
	nt_super_stop(S);
	nt_super_wait(S);
}

/* ---- a removal held back while its caller's credentials change ---- */

static int rmid_id;
static long rmid_result;

static void *remover(void *arg)
{
	(void)arg;
	rmid_result = result(semctl(rmid_id, 0, IPC_RMID));
	return NULL;
}

static void order_child(int sock)
{
	struct semid_ds ds;
	pthread_t t;

	rmid_id = semget(IPC_PRIVATE, 1, 0600);
	if (rmid_id < 0)
		_exit(81);
	pthread_create(&t, NULL, remover, NULL);
	usleep(50000); /* the removal is being committed, 200 ms late */
	if (setresuid(65534, 65534, 65534))
		_exit(82);
	/* every thread has dropped root now (glibc waits for them): the set must be either gone
	   already or out of reach, and then it must stay */
	report(sock, result(semctl(rmid_id, 0, IPC_STAT, &ds)));
	pthread_join(t, NULL);
	report(sock, rmid_result);
}

static void removal_order(enum sv_fault_site site)
{
	long seen, removed;
	int sock;
	pid_t p;

	p = confined(order_child, &sock, 4);
	/* the set's creation commits first, at once; then the removal, late */
	sv_fault_arm(site, 1, 1);
	go(sock);
	seen = hear(sock);
	removed = hear(sock);
	cr_expect_eq(sv_fault_hits(site), 1, "the removal was not held back");
	cr_assert(seen == -EACCES || seen == -EINVAL, "IPC_STAT after the drop: %ld", seen);
	/* there after the drop (EACCES), so a removal now would be one made without root */
	cr_expect(!(seen == -EACCES && removed == 0),
		  "the removal was made after every thread had dropped root");
	wait_ok(p);
	nt_super_stop(S);
	nt_super_wait(S);
}

/* held back before it is decided: the decision sees the caller gone */
Test(faults, removal_never_after_a_credential_change)
{
	removal_order(SV_FAULT_SLOW_COMMIT);
}

/* decided, then held back before it shows: whoever is ordered after the caller waits for it */
Test(faults, removal_decided_before_a_credential_change_shows_before_it)
{
	removal_order(SV_FAULT_SLOW_CHANGE);
}

/* ---- a lost wake-up answer, undone late, and the call's restart ---- */

static atomic_int in_handler;
static pid_t waiter_tid;
static int lost_id;

static void slow_handler(int sig)
{
	(void)sig;
	atomic_store(&in_handler, 1);
	usleep(100000); /* the +1 completes the call that is no longer waiting */
}

static void *poster(void *arg)
{
	(void)arg;
	usleep(50000); /* the waiter is parked */
	syscall(SYS_tgkill, getpid(), waiter_tid, SIGUSR1);
	while (!atomic_load(&in_handler))
		;
	return (void *)(intptr_t)sem_op(lost_id, 1, 0);
}

static void lost_child(int sock)
{
	struct sigaction sa = { .sa_handler = slow_handler, .sa_flags = SA_RESTART };
	pthread_t t;
	void *posted;
	long waited;

	sigaction(SIGUSR1, &sa, NULL);
	lost_id = semget(IPC_PRIVATE, 1, 0600);
	if (lost_id < 0)
		_exit(81);
	waiter_tid = (pid_t)syscall(SYS_gettid);
	pthread_create(&t, NULL, poster, NULL);
	waited = sem_op(lost_id, -1, 0);
	pthread_join(t, &posted);
	report(sock, waited);
	report(sock, (long)(intptr_t)posted);
	report(sock, result(semctl(lost_id, 0, GETVAL)));
}

/*
 * Natively a semop interrupted by a handler returns EINTR even with SA_RESTART, and a +1 made
 * while the handler runs stays. Here the +1 completes the parked call, whose answer is then
 * lost; the kernel restarts the call while the undo is held back. Served before the undo is
 * settled, the restart would take the value a second time, or be parked and then completed
 * by the undo: 0 returned, the value gone.
 */
Test(faults, restart_waits_for_a_lost_answer_to_settle)
{
	long waited, posted, val;
	int sock;
	pid_t p;

	p = confined(lost_child, &sock, 4);
	sv_fault_arm(SV_FAULT_SLOW_UNDO, 0, 1);
	go(sock);
	waited = hear(sock);
	posted = hear(sock);
	val = hear(sock);
	cr_assert_eq(posted, 0);
	if (sv_fault_hits(SV_FAULT_SLOW_UNDO) == 0)
		cr_log_warn("the +1 did not meet the lost answer: the ordering was not exercised");
	cr_expect_eq(waited, -EINTR, "the interrupted semop, restarted by the kernel: %ld", waited);
	cr_expect_eq(val, 1, "the +1 made while the handler ran stays");
	wait_ok(p);
	nt_super_stop(S);
	nt_super_wait(S);
}
