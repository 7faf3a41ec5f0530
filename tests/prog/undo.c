/* SPDX-License-Identifier: MIT */
/*
 * SEM_UNDO (SPEC A5): applied when the process exits normally and when it is killed; kept across
 * execve; not inherited by fork; one list shared by the threads of a process, so a thread's exit
 * applies nothing and the list is applied only when the last thread of the process is gone (also
 * when the main thread exits first); SETVAL/SETALL clear it; semval + semadj is clamped at 0;
 * semadj is limited to [-32768, 32767]; applying it wakes waiters and stamps sempid.
 *
 * The kernel applies the undo list in do_exit, before the parent can reap the child. That
 * promptness is undo-timing.c's subject; here a check after an exit waits (boundedly) for the
 * expected value (settled()), and a check that nothing changed waits a little first (quiesce()).
 */
#include <pthread.h>

#include "prog.h"

static int id;

/* ---- the image exec'd by the exec test ---- */

static int exec_main(int sid)
{
	printf("exec'd child: a[2] = %d (its undo list came along)\n", getval(sid, 2));
	if (sop1(sid, 2, -1, SEM_UNDO))
		return 10;
	printf("exec'd child: took another, a[2] = %d\n", getval(sid, 2));
	return 0;
}

static void at_exit(void)
{
	struct chan held, go;
	pid_t p;
	int r;

	printf("-- exit\n");
	chan_open(&held);
	chan_open(&go);
	p = xfork();
	if (p == 0) {
		if (sop1(id, 0, 2, SEM_UNDO))
			_exit(10);
		tell(&held, 'h');
		_exit(hear(&go) == 'g' ? 0 : 11);
	}
	HEAR(&held, 'h');
	CHECK("a[0] while the child lives", 2, getval(id, 0));
	tell(&go, 'g');
	printf("child: %s\n", reap(p));
	CHECK("a[0] after the exit", 0, settled(id, 0, 0));
	r = semctl(id, 0, GETPID);
	printf("GETPID a[0] is the exited child: %s\n", r == p ? "yes" : "no");
	EXPECT(r == p, "GETPID %d, child %d", r, p);
}

static void at_kill(void)
{
	struct chan held;
	pid_t p;

	printf("-- kill -9\n");
	chan_open(&held);
	MUST(setval(id, 1, 3) == 0);
	p = xfork();
	if (p == 0) {
		/* a positive semadj (took one) and a negative one (gave two) in one list */
		struct sembuf ops[2] = { { 1, -1, SEM_UNDO }, { 0, 2, SEM_UNDO } };

		if (semop(id, ops, 2))
			_exit(10);
		tell(&held, 'h');
		for (;;)
			pause();
	}
	HEAR(&held, 'h');
	CHECK("a[1] while the child lives", 2, getval(id, 1));
	CHECK("a[0] while the child lives", 2, getval(id, 0));
	kill(p, SIGKILL);
	printf("child: %s\n", reap(p));
	CHECK("a[1] after the kill", 3, settled(id, 1, 3));
	CHECK("a[0] after the kill", 0, settled(id, 0, 0));
}

static void across_exec(char *self)
{
	pid_t p;

	printf("-- exec\n");
	MUST(setval(id, 2, 3) == 0);
	p = xfork();
	if (p == 0) {
		char arg[32];

		if (sop1(id, 2, -1, SEM_UNDO))
			_exit(10);
		snprintf(arg, sizeof(arg), "%d", id);
		execl("/proc/self/exe", self, "exec", arg, (char *)NULL);
		_exit(11);
	}
	printf("child: %s\n", reap(p));
	CHECK("a[2] after the exit (both takes undone)", 3, settled(id, 2, 3));
}

static void not_by_fork(void)
{
	pid_t p;

	printf("-- fork\n");
	MUST(setval(id, 3, 0) == 0);
	p = xfork();
	if (p == 0) {
		pid_t g;

		if (sop1(id, 3, 1, SEM_UNDO))
			_exit(10);
		/* a grandchild that does nothing: it inherited no undo list, its exit changes nothing */
		g = xfork();
		if (g == 0)
			_exit(0);
		printf("idle grandchild: %s\n", reap(g));
		quiesce();
		CHECK("a[3] after the idle grandchild", 1, getval(id, 3));
		/* a grandchild with its own list: only its own adjustment goes back */
		g = xfork();
		if (g == 0)
			_exit(sop1(id, 3, 2, SEM_UNDO) ? 10 : 0);
		printf("busy grandchild: %s\n", reap(g));
		CHECK("a[3] after the busy grandchild", 1, settled(id, 3, 1));
		quiesce();
		CHECK("a[3] still", 1, getval(id, 3));
		_exit(prog_exit_status());
	}
	printf("child: %s\n", reap(p));
	CHECK("a[3] after the child", 0, settled(id, 3, 0));
}

static void *give2(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)sop1(id, 4, 2, SEM_UNDO);
}

static struct chan leader_gone, leader_go;

/* Wait until the main thread of this process has exited (state Z while we still run). */
static bool leader_is_zombie(void)
{
	char path[64], buf[256];
	int64_t end = now_ns() + WAIT_MS * 1000000LL;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", getpid());
	while (now_ns() < end) {
		FILE *f = fopen(path, "r");
		char *p = NULL;

		if (f) {
			if (fgets(buf, sizeof(buf), f))
				p = strrchr(buf, ')');
			fclose(f);
		}
		if (!p || (p[1] == ' ' && p[2] == 'Z'))
			return true;
		usleep(1000);
	}
	return false;
}

static void *survivor(void *arg)
{
	(void)arg;
	if (sop1(id, 5, 1, SEM_UNDO))
		_exit(10);
	if (!leader_is_zombie())
		_exit(11);
	tell(&leader_gone, 'z');
	_exit(hear(&leader_go) == 'g' ? 0 : 12);
}

static void threads(void)
{
	pid_t p;

	printf("-- threads\n");
	MUST(setval(id, 4, 0) == 0);
	p = xfork();
	if (p == 0) {
		pthread_t t;
		void *ret;

		MUST(pthread_create(&t, NULL, give2, NULL) == 0);
		MUST(pthread_join(t, &ret) == 0);
		CHECK("thread's semop", 0, (long)(intptr_t)ret);
		CHECK("a[4] after the thread exited (nothing undone)", 2, getval(id, 4));
		/* the main thread's op joins the same list: semadj -2 + 1 = -1 */
		CHECK("main thread takes 1", 0, sop1(id, 4, -1, SEM_UNDO));
		_exit(prog_exit_status());
	}
	printf("child: %s\n", reap(p));
	CHECK("a[4] after the process exited (semadj -1 applied)", 0, settled(id, 4, 0));

	/* the main thread exits first: nothing is undone until the last thread is gone */
	chan_open(&leader_gone);
	chan_open(&leader_go);
	MUST(setval(id, 5, 0) == 0);
	p = xfork();
	if (p == 0) {
		pthread_t t;

		MUST(pthread_create(&t, NULL, survivor, NULL) == 0);
		pthread_exit(NULL);
	}
	HEAR(&leader_gone, 'z');
	quiesce();
	CHECK("a[5] with the main thread gone, a thread alive", 1, getval(id, 5));
	tell(&leader_go, 'g');
	printf("child: %s\n", reap(p));
	CHECK("a[5] after the last thread exited", 0, settled(id, 5, 0));
}

static void cleared_and_clamped(void)
{
	struct chan held, go;
	pid_t p;

	printf("-- SETVAL/SETALL clear, clamping\n");
	chan_open(&held);
	chan_open(&go);
	MUST(setval(id, 6, 0) == 0);
	MUST(setval(id, 7, 0) == 0);
	p = xfork();
	if (p == 0) {
		struct sembuf ops[2] = { { 6, 3, SEM_UNDO }, { 7, 3, SEM_UNDO } };

		if (semop(id, ops, 2))
			_exit(10);
		tell(&held, 'h');
		_exit(hear(&go) == 'g' ? 0 : 11);
	}
	HEAR(&held, 'h');
	CHECK("SETVAL a[6] = 10 (clears the child's semadj of a[6])", 0, setval(id, 6, 10));
	CHECK("a[7] -2 without undo", 0, sop1(id, 7, -2, 0));
	tell(&go, 'g');
	printf("child: %s\n", reap(p));
	/* a[7] changes in the same undo pass that must leave a[6] alone */
	CHECK("a[7] (1 - 3 clamped at 0)", 0, settled(id, 7, 0));
	CHECK("a[6] (cleared: nothing undone)", 10, getval(id, 6));

	p = xfork();
	if (p == 0) {
		struct sembuf ops[2] = { { 6, 1, SEM_UNDO }, { 7, 1, SEM_UNDO } };

		if (semop(id, ops, 2))
			_exit(10);
		tell(&held, 'h');
		_exit(hear(&go) == 'g' ? 0 : 11);
	}
	HEAR(&held, 'h');
	CHECK("SETALL", 0,
	      semctl(id, 0, SETALL,
		     (union semun){ .array = (unsigned short[]){ 0, 0, 0, 0, 0, 0, 20, 20 } }));
	tell(&go, 'g');
	printf("child: %s\n", reap(p));
	quiesce();
	CHECK("a[6] after SETALL (cleared)", 20, getval(id, 6));
	CHECK("a[7] after SETALL (cleared)", 20, getval(id, 7));
}

static void limits(void)
{
	pid_t p;

	printf("-- semadj limits\n");
	MUST(setval(id, 0, 0) == 0);
	p = xfork();
	if (p == 0) {
		CHECK("+32767 undo", 0, sop1(id, 0, 32767, SEM_UNDO));
		CHECK("+1 (value would be 32768)", -ERANGE, sop1(id, 0, 1, 0));
		CHECK("-32767 no undo", 0, sop1(id, 0, -32767, 0));
		CHECK("+1 undo (semadj -32768)", 0, sop1(id, 0, 1, SEM_UNDO));
		CHECK("-1 no undo", 0, sop1(id, 0, -1, 0));
		CHECK("+1 undo (semadj would be -32769)", -ERANGE, sop1(id, 0, 1, SEM_UNDO));
		CHECK("a[0]", 0, getval(id, 0));
		/* all-or-nothing: the failing second sop leaves the first undone too */
		{
			struct sembuf ops[2] = { { 1, 1, SEM_UNDO }, { 0, 1, SEM_UNDO } };

			CHECK("{a[1] +1, a[0] +1} undo", -ERANGE, semop(id, ops, 2));
		}
		_exit(prog_exit_status());
	}
	printf("child: %s\n", reap(p));
	quiesce();
	CHECK("a[0] after exit (0 - 32768 clamped)", 0, getval(id, 0));
	CHECK("a[1] untouched (SETALL left it 0)", 0, getval(id, 1));
}

static void wakes_waiters(void)
{
	struct chan held;
	pid_t holder, waiter;
	int r;

	printf("-- undo wakes waiters\n");
	chan_open(&held);
	MUST(setval(id, 1, 1) == 0);
	holder = xfork();
	if (holder == 0) {
		if (sop1(id, 1, -1, SEM_UNDO))
			_exit(10);
		tell(&held, 'h');
		for (;;)
			pause();
	}
	HEAR(&held, 'h');
	waiter = xfork();
	if (waiter == 0)
		_exit(sop1(id, 1, -1, 0) ? errno : 0);
	WAIT_CNT(id, 1, GETNCNT, 1);
	kill(holder, SIGKILL);
	printf("holder: %s\n", reap(holder));
	/* the undo returned the unit and the waiter took it inside the holder's exit */
	CHECK("GETNCNT a[1] after the holder died", 0,
	      (wait_cnt(id, 1, GETNCNT, 0), semctl(id, 1, GETNCNT)));
	CHECK("a[1]", 0, getval(id, 1));
	printf("waiter: %s\n", reap_errno(waiter));
	r = semctl(id, 1, GETPID);
	printf("GETPID a[1] is the waiter: %s\n", r == waiter ? "yes" : "no");
}

static void removed_set(void)
{
	struct chan held, go;
	pid_t p;
	int other, fresh;

	printf("-- undo entries of a removed set\n");
	chan_open(&held);
	chan_open(&go);
	other = semget(IPC_PRIVATE, 1, 0600);
	MUST(other >= 0);
	p = xfork();
	if (p == 0) {
		if (sop1(other, 0, 5, SEM_UNDO))
			_exit(10);
		tell(&held, 'h');
		_exit(hear(&go) == 'g' ? 0 : 11);
	}
	HEAR(&held, 'h');
	CHECK("IPC_RMID the set the child has undo for", 0, semctl(other, 0, IPC_RMID));
	fresh = semget(IPC_PRIVATE, 1, 0600);
	MUST(fresh >= 0);
	CHECK("SETVAL fresh set = 2", 0, setval(fresh, 0, 2));
	tell(&go, 'g');
	printf("child: %s\n", reap(p));
	quiesce();
	CHECK("fresh set unaffected", 2, getval(fresh, 0));
	MUST(semctl(fresh, 0, IPC_RMID) == 0);
}

int main(int argc, char **argv)
{
	prog_init();
	if (argc > 2 && !strcmp(argv[1], "exec"))
		return exec_main(atoi(argv[2]));
	id = semget(IPC_PRIVATE, 8, 0600);
	MUST(id >= 0);
	at_exit();
	at_kill();
	across_exec(argv[0]);
	not_by_fork();
	threads();
	cleared_and_clamped();
	limits();
	wakes_waiters();
	removed_set();
	return prog_exit_status();
}
