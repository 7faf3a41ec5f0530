/* SPDX-License-Identifier: MIT */
/*
 * SEM_UNDO applied without an exit (SPEC A5.2): when the only holder of an undo list calls
 * unshare(CLONE_SYSVSEM) or unshare(CLONE_NEWIPC), the kernel applies the list at once and the
 * process continues with an empty one (in the new IPC namespace for CLONE_NEWIPC, where a new
 * set gets id 0 again).
 */
#include <sched.h>

#include "prog.h"

int main(void)
{
	struct chan done, go;
	pid_t p;
	int id;

	prog_init();
	chan_open(&done);
	chan_open(&go);
	id = semget(IPC_PRIVATE, 3, 0600);
	MUST(id >= 0);

	p = xfork();
	if (p == 0) {
		if (sop1(id, 0, 1, SEM_UNDO))
			_exit(10);
		if (unshare(CLONE_SYSVSEM))
			_exit(11);
		tell(&done, 'u');
		if (hear(&go) != 'g')
			_exit(12);
		/* a new, empty list: this one is undone at exit, the old one is not undone twice */
		_exit(sop1(id, 1, 2, SEM_UNDO) ? 13 : 0);
	}
	HEAR(&done, 'u');
	CHECK("a[0] after the child's unshare(CLONE_SYSVSEM)", 0, getval(id, 0));
	tell(&go, 'g');
	printf("child: %s\n", reap(p));
	CHECK("a[0] after its exit", 0, getval(id, 0));
	CHECK("a[1] after its exit", 0, getval(id, 1));

	p = xfork();
	if (p == 0) {
		int nid;

		if (sop1(id, 2, 1, SEM_UNDO))
			_exit(10);
		if (unshare(CLONE_NEWIPC))
			_exit(11);
		tell(&done, 'u');
		if (hear(&go) != 'g')
			_exit(12);
		nid = semget(IPC_PRIVATE, 1, 0600);
		printf("child: a set in its new IPC namespace: id %d\n", nid);
		CHECK("child: GETVAL of the new set", 0, getval(nid, 0));
		/* the same id names the new one-semaphore set now, not the old set of three */
		CHECK("child: GETVAL semnum 2 of the old set's id", -EINVAL, getval(id, 2));
		_exit(sop1(nid, 0, 1, SEM_UNDO) ? 13 : prog_exit_status());
	}
	HEAR(&done, 'u');
	CHECK("a[2] after the child's unshare(CLONE_NEWIPC)", 0, getval(id, 2));
	tell(&go, 'g');
	printf("child: %s\n", reap(p));
	CHECK("a[2] after its exit", 0, getval(id, 2));
	CHECK("the parent's set is still there", 0, semctl(id, 0, GETNCNT));
	return prog_exit_status();
}
