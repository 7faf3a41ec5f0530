/* SPDX-License-Identifier: MIT */
/*
 * A walk through the engine, called directly (no seccomp): a consumer parks on an empty
 * semaphore, a producer's V completes it within the producer's own call, a process holding a
 * SEM_UNDO lock exits and its lock is released, and a removal wakes the rest with EIDRM.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/sem.h"

static void deliver(const char *who, struct sv_wakeq *wq)
{
	struct sv_waiter *w;

	while ((w = sv_wakeq_pop(wq))) {
		int r = sv_waiter_result(w);

		printf("  %s completed the waiting %s: %s\n", who,
		       (const char *)sv_waiter_cookie(w), r ? strerror(-r) : "success");
		sv_waiter_free(w);
	}
}

int main(void)
{
	struct sv_cred root = { .cap_ipc_owner = true, .cap_sys_admin = true };
	struct sv_ns *ns;
	struct sv_proc *p1, *p2;
	struct sv_caller producer, consumer;
	struct sv_park park = { .cookie = (void *)"consumer" };
	struct sv_wakeq wq;
	struct sv_sembuf down = { 0, -1, 0 }, up = { 0, +1, 0 }, lock = { 1, -1, SV_SEM_UNDO };
	unsigned short init[2] = { 0, 1 };
	long id, r;

	sv_thread_register();
	ns = sv_ns_new(NULL);
	p1 = sv_proc_new(ns, 100);
	p2 = sv_proc_new(ns, 200);
	if (!ns || !p1 || !p2)
		return 1;
	producer = (struct sv_caller){ .ns = ns, .cred = &root, .proc = p1 };
	consumer = (struct sv_caller){ .ns = ns, .cred = &root, .proc = p2 };
	sv_wakeq_init(&wq);

	id = sv_semget(&producer, 0x5e3, 2, SV_IPC_CREAT | 0600);
	printf("semget(key 0x5e3, 2 semaphores) = %ld\n", id);
	sv_semctl(&producer, (int)id, 0, SV_SETALL, (uint64_t)(uintptr_t)init, &wq);
	printf("SETALL {0, 1}: semaphore 0 is empty, semaphore 1 is a free lock\n");

	r = sv_semtimedop(&consumer, (int)id, (uint64_t)(uintptr_t)&down, 1, 0, &park, &wq);
	printf("consumer: semop(-1 on sem 0) -> %s\n",
	       r == SV_PARKED ? "parked (would block)" : "?");
	printf("  GETNCNT(0) = %ld\n", sv_semctl(&producer, (int)id, 0, SV_GETNCNT, 0, &wq));

	r = sv_semtimedop(&producer, (int)id, (uint64_t)(uintptr_t)&up, 1, 0, &park, &wq);
	printf("producer: semop(+1 on sem 0) = %ld\n", r);
	printf("  GETVAL(0) = %ld already: the consumer's -1 ran inside the producer's call\n",
	       sv_semctl(&producer, (int)id, 0, SV_GETVAL, 0, &wq));
	deliver("producer", &wq);

	r = sv_semtimedop(&consumer, (int)id, (uint64_t)(uintptr_t)&lock, 1, 0, &park, &wq);
	printf("consumer: semop(-1 with SEM_UNDO on sem 1) = %ld, lock held: GETVAL(1) = %ld\n", r,
	       sv_semctl(&producer, (int)id, 1, SV_GETVAL, 0, &wq));
	sv_proc_exit(p2, &wq);
	printf("consumer process exits: SEM_UNDO gives the lock back: GETVAL(1) = %ld, "
	       "GETPID(1) = %ld\n",
	       sv_semctl(&producer, (int)id, 1, SV_GETVAL, 0, &wq),
	       sv_semctl(&producer, (int)id, 1, SV_GETPID, 0, &wq));

	park.cookie = (void *)"second consumer";
	r = sv_semtimedop(&producer, (int)id, (uint64_t)(uintptr_t)&down, 1, 0, &park, &wq);
	printf("producer: semop(-1 on sem 0) -> %s\n", r == SV_PARKED ? "parked" : "?");
	r = sv_semctl(&producer, (int)id, 0, SV_IPC_RMID, 0, &wq);
	printf("IPC_RMID = %ld\n", r);
	deliver("IPC_RMID", &wq);

	sv_proc_put(p2);
	sv_proc_exit(p1, &wq);
	sv_proc_put(p1);
	sv_ns_put(ns);
	sv_thread_unregister();
	return 0;
}
