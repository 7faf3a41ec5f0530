/* SPDX-License-Identifier: MIT */
/*
 * An IPC namespace lives as long as anything holds it, not only its processes: here an open
 * /proc/PID/ns/ipc file (a pod's pause container, or a bind mount, does the same). Its last
 * process sets a keyed set to 77 and exits; more than a second later (long enough for a
 * supervisor to look at it) another process enters it with setns() and must find the set, its
 * value, its undo-free state and the namespace's id sequence as the first one left them.
 */
#include <sched.h>

#include "prog.h"

#define KEY 0x1111

int main(void)
{
	struct chan ready;
	char path[64];
	int fd, id;
	pid_t p;

	prog_init();
	chan_open(&ready);
	p = xfork();
	if (p == 0) {
		if (unshare(CLONE_NEWIPC))
			_exit(9);
		id = semget(KEY, 1, IPC_CREAT | 0600);
		if (id != 0 || setval(id, 0, 77) || semget(IPC_PRIVATE, 1, 0600) != 1)
			_exit(8);
		tell(&ready, 'r');
		for (;;)
			pause();
	}
	HEAR(&ready, 'r');
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)p);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	MUST(fd >= 0);
	kill(p, SIGKILL);
	printf("the namespace's last process: %s\n", reap(p));
	sleep_ms(1500);

	p = xfork();
	if (p == 0) {
		if (setns(fd, CLONE_NEWIPC))
			_exit(9);
		CHECK("key 0x1111 in the held namespace", 0, semget(KEY, 0, 0));
		CHECK("its value", 77, getval(0, 0));
		CHECK("the next new set's id", 2, semget(IPC_PRIVATE, 1, 0600));
		_exit(prog_exit_status());
	}
	reap_ok(p, "a process entering it");
	close(fd);
	return prog_exit_status();
}
