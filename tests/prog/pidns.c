/* SPDX-License-Identifier: MIT */
/*
 * GETPID across pid namespaces (SPEC A8): sempid refers to a process, and GETPID shows it as
 * the caller sees it. A child started right after unshare(CLONE_NEWPID) is pid 1 of a new
 * namespace; when it changes a semaphore, it reads GETPID 1 and the parent reads the child's pid
 * as the parent knows it; when the parent changes one, the child (which cannot see the parent)
 * reads 0. A dead modifier's number is still reported. The child's own child is pid 2 inside.
 * Printed as yes/no, never as numbers that differ between runs.
 *
 * The unshare happens in a short-lived middle process that forks the pid-1 child and leaves;
 * this process, a child subreaper, inherits the child. (A process that has unshared its pid
 * namespace creates its later children in there, and cannot create any once that namespace's
 * pid 1 is dead: tools that clone at exit, like LeakSanitizer, do not survive that.)
 */
#include <sched.h>
#include <sys/prctl.h>

#include "prog.h"

int main(void)
{
	struct chan start, ready, go, pidc;
	pid_t mid, p = 0;
	int id, r;

	prog_init();
	chan_open(&start);
	chan_open(&ready);
	chan_open(&go);
	chan_open(&pidc);
	id = semget(IPC_PRIVATE, 3, 0600);
	MUST(id >= 0);
	MUST(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);

	mid = xfork();
	if (mid == 0) {
		MUST(unshare(CLONE_NEWPID) == 0);
		p = xfork();
		if (p == 0) {
			pid_t g;

			/* print only once the parent is done printing about the middle process */
			if (hear(&start) != 's')
				_exit(9);
			printf("child: getpid() is 1: %s\n", getpid() == 1 ? "yes" : "no");
			CHECK("child: a[0] +1", 0, sop1(id, 0, 1, 0));
			r = semctl(id, 0, GETPID);
			printf("child: GETPID a[0] sees 1: %s\n", r == 1 ? "yes" : "no");
			EXPECT(r == 1, "child: GETPID a[0] = %d", r);
			tell(&ready, 'r');
			if (hear(&go) != 'g')
				_exit(10);
			/* the parent changed a[1]; the parent is outside our namespace */
			CHECK("child: GETPID a[1] (set by the invisible parent)", 0,
			      semctl(id, 1, GETPID));
			g = xfork();
			if (g == 0)
				_exit(sop1(id, 2, 1, 0) ? 1 : 0);
			printf("grandchild: %s\n", reap(g));
			CHECK("child: GETPID a[2] (the grandchild, pid 2 here)", 2,
			      semctl(id, 2, GETPID));
			_exit(prog_exit_status());
		}
		MUST(write(pidc.w, &p, sizeof(p)) == (ssize_t)sizeof(p));
		/* the raw call: sanitizers' exit hooks would clone into the new namespace */
		syscall(SYS_exit_group, 0);
	}
	printf("middle process: %s\n", reap(mid));
	MUST(read(pidc.r, &p, sizeof(p)) == (ssize_t)sizeof(p));
	tell(&start, 's');

	HEAR(&ready, 'r');
	r = semctl(id, 0, GETPID);
	printf("parent: GETPID a[0] sees the child's pid: %s\n", r == p ? "yes" : "no");
	EXPECT(r == p, "parent: GETPID a[0] = %d, child %d", r, p);
	CHECK("parent: a[1] +1", 0, sop1(id, 1, 1, 0));
	tell(&go, 'g');
	printf("child: %s\n", reap(p));
	r = semctl(id, 0, GETPID);
	printf("parent: GETPID a[0] after the child died is still its pid: %s\n",
	       r == p ? "yes" : "no");
	EXPECT(r == p, "parent: GETPID a[0] = %d, child %d", r, p);
	r = semctl(id, 2, GETPID);
	printf("parent: GETPID a[2] is neither 2 nor the child nor 0: %s\n",
	       r != 2 && r != p && r > 0 ? "yes" : "no");
	EXPECT(r != 2 && r != p && r > 0, "parent: GETPID a[2] = %d", r);
	r = semctl(id, 1, GETPID);
	printf("parent: GETPID a[1] is the parent: %s\n", r == getpid() ? "yes" : "no");
	EXPECT(r == getpid(), "parent: GETPID a[1] = %d", r);
	return prog_exit_status();
}
