/* SPDX-License-Identifier: MIT */
/*
 * Keyed sharing between separately forked processes (SPEC A2, A3): siblings that share nothing
 * but a fixed key (no ftok: the path would differ between runs) find the same set, see each
 * other's values, and wake each other; the set outlives its creator; after IPC_RMID the key is
 * free and a new set under it gets a new id. One sibling also execs a fresh image before looking
 * the key up, so nothing inherited in memory can help it.
 */
#include "prog.h"

#define KEY  0x5eed
#define KEY2 0x5eee

/* The exec'd sibling: look the key up from scratch and take 2. */
static int peer_main(void)
{
	int id = semget(KEY, 0, 0);

	if (id < 0)
		return 10;
	if (sop1(id, 0, -2, 0))
		return 11;
	printf("exec'd peer: id %d, took 2, left %d\n", id, getval(id, 0));
	return 0;
}

int main(int argc, char **argv)
{
	struct chan created, go;
	pid_t creator, finder, waiter, peer;
	int id, r;

	prog_init();
	if (argc > 1 && !strcmp(argv[1], "peer"))
		return peer_main();

	chan_open(&created);
	chan_open(&go);
	/* creator: makes the set under the key, sets values, stays alive until told */
	creator = xfork();
	if (creator == 0) {
		int cid = semget(KEY, 2, IPC_CREAT | IPC_EXCL | 0600);

		if (cid < 0)
			_exit(10);
		if (setval(cid, 0, 5) || setval(cid, 1, 0))
			_exit(11);
		printf("creator: id %d\n", cid);
		fflush(stdout);
		tell(&created, 'c');
		if (hear(&go) != 'g')
			_exit(12);
		printf("creator: sees a[0] = %d\n", getval(cid, 0));
		_exit(0);
	}
	HEAR(&created, 'c');

	/* finder: a sibling, not a child of the creator */
	finder = xfork();
	if (finder == 0) {
		int fid = semget(KEY, 0, 0);

		printf("finder: id %d, a[0] = %d\n", fid, getval(fid, 0));
		CHECK("finder: IPC_CREAT|IPC_EXCL on the key", -EEXIST,
		      semget(KEY, 2, IPC_CREAT | IPC_EXCL | 0600));
		CHECK("finder: nsems 3 on the key", -EINVAL, semget(KEY, 3, 0));
		CHECK("finder: IPC_CREAT nsems 1 on the key", fid,
		      semget(KEY, 1, IPC_CREAT | 0600));
		CHECK("finder: take 1", 0, sop1(fid, 0, -1, 0));
		_exit(prog_exit_status());
	}
	printf("finder: %s\n", reap(finder));
	tell(&go, 'g');
	printf("creator: %s\n", reap(creator));

	/* the creator is gone; the set is not */
	id = CHECK("parent: semget the key after its creator exited", 0, semget(KEY, 0, 0));
	CHECK("parent: a[0]", 4, getval(id, 0));

	/* a sibling waits on a[1]; another sibling, exec'd, finds the key and wakes it */
	waiter = xfork();
	if (waiter == 0) {
		int wid = semget(KEY, 0, 0);

		_exit(wid < 0 ? 99 : sop1(wid, 1, -1, 0) ? errno : 0);
	}
	WAIT_CNT(id, 1, GETNCNT, 1);
	peer = xfork();
	if (peer == 0) {
		int pid_ = semget(KEY, 0, 0);

		if (pid_ < 0 || sop1(pid_, 1, 1, 0))
			_exit(98);
		execl("/proc/self/exe", argv[0], "peer", (char *)NULL);
		_exit(97);
	}
	printf("peer: %s\n", reap(peer));
	printf("waiter: %s\n", reap_errno(waiter));
	CHECK("parent: a[0] after the peer took 2", 2, getval(id, 0));
	CHECK("parent: a[1] after the waiter took the peer's 1", 0, getval(id, 1));

	/* a second key is independent */
	r = CHECK("parent: second key", 1, semget(KEY2, 1, IPC_CREAT | 0600));
	CHECK("parent: second key's value", 0, getval(r, 0));

	CHECK("parent: IPC_RMID the first key's set", 0, semctl(id, 0, IPC_RMID));
	CHECK("parent: semget the key now", -ENOENT, semget(KEY, 0, 0));
	/* a sibling recreates it: cyclic index allocation gives index 2, not the freed 0 */
	creator = xfork();
	if (creator == 0) {
		int cid = semget(KEY, 1, IPC_CREAT | IPC_EXCL | 0600);

		printf("recreator: id %d, value %d\n", cid, getval(cid, 0));
		_exit(cid == 2 ? 0 : 1);
	}
	printf("recreator: %s\n", reap(creator));
	CHECK("parent: semget the recreated key", 2, semget(KEY, 0, 0));
	CHECK("parent: old id stays dead", -EINVAL, getval(id, 0));
	return prog_exit_status();
}
