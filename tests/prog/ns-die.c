/* SPDX-License-Identifier: MIT */
/*
 * IPC namespaces made by confined processes, every way there is, each with a set, each left
 * to die while the program goes on: unshare(CLONE_NEWIPC); clone(CLONE_NEWIPC); setns() into
 * one another process made; unshare by a thread of a multi-threaded process. Each ends when
 * its last process leaves it, and a supervisor must let its sets end then too
 * (tests/43-run-security asks the supervisor's control socket, while this program waits).
 *
 * Usage: ns-die DONEFILE   prints "ready" once every namespace is dead, then waits (20 s at
 *                          most) until DONEFILE exists
 */
#include <pthread.h>
#include <sched.h>

#include "prog.h"

static int make_a_set(void)
{
	return semget(IPC_PRIVATE, 1, 0600) >= 0 ? 0 : 1;
}

static int cloned(void *arg)
{
	(void)arg;
	return make_a_set();
}

static void *thread_unshares(void *arg)
{
	(void)arg;
	if (unshare(CLONE_NEWIPC))
		return (void *)1;
	return (void *)(intptr_t)make_a_set();
}

int main(int argc, char **argv)
{
	static char stack[64 * 1024];
	struct chan ready, go;
	char path[64];
	pid_t p, g;

	prog_init();
	MUST(argc == 2);
	chan_open(&ready);
	chan_open(&go);
	MUST(make_a_set() == 0); /* our own namespace: it lives on */

	p = xfork();
	if (p == 0)
		_exit(unshare(CLONE_NEWIPC) ? 9 : make_a_set());
	reap_ok(p, "unshare(CLONE_NEWIPC)");

	p = clone(cloned, stack + sizeof(stack), CLONE_NEWIPC | SIGCHLD, NULL);
	MUST(p > 0);
	reap_ok(p, "clone(CLONE_NEWIPC)");

	g = xfork();
	if (g == 0) {
		if (unshare(CLONE_NEWIPC))
			_exit(9);
		tell(&ready, 'r');
		_exit(hear(&go) == 'g' ? 0 : 8);
	}
	HEAR(&ready, 'r');
	p = xfork();
	if (p == 0) {
		int fd;

		snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)g);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		_exit(fd < 0 || setns(fd, CLONE_NEWIPC) ? 9 : make_a_set());
	}
	reap_ok(p, "setns into another's namespace");
	tell(&go, 'g');
	reap_ok(g, "that namespace's maker");

	p = xfork();
	if (p == 0) {
		pthread_t t;
		void *r;

		MUST(pthread_create(&t, NULL, thread_unshares, NULL) == 0);
		pthread_join(t, &r);
		_exit(r ? 1 : make_a_set());
	}
	reap_ok(p, "a thread's unshare(CLONE_NEWIPC)");

	printf("ready\n");
	(void)wait_file(argv[1], 20000); /* then exit as told, or on our own */
	return prog_exit_status();
}
