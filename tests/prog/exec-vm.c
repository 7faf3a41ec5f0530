/* SPDX-License-Identifier: MIT */
/*
 * A process that shares its parent's address space (clone with CLONE_VM, as posix_spawn does),
 * makes a semop there, then execs and makes another semop from its new address space, with its
 * sembuf at the same address where the parent's memory holds a different one. Each call must
 * read the sembuf of the address space it was made from: a supervisor that kept reading the
 * child's memory through a file opened before the exec would read the parent's sembuf again.
 *
 * Usage: exec-vm            (the test)
 *        exec-vm image2 ID  (the child after its exec; internal)
 */
#include <sched.h>
#include <sys/mman.h>

#include "prog.h"

/* The same address in both images, so only the address space tells the two sembufs apart. */
#define SOPS_ADDR ((void *)0x5e0000000000UL)

static char *g_self;
static int g_id;

static struct sembuf *map_sops(unsigned short num)
{
	struct sembuf *sb = mmap(SOPS_ADDR, 4096, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	MUST(sb == SOPS_ADDR);
	*sb = (struct sembuf){ .sem_num = num, .sem_op = 1 };
	return sb;
}

/* The clone child, on the parent's memory: sem 0 += 1 from SOPS_ADDR, then exec. */
static int child(void *arg)
{
	char id[16];

	(void)arg;
	if (syscall(SYS_semop, g_id, SOPS_ADDR, 1) != 0)
		_exit(20);
	snprintf(id, sizeof(id), "%d", g_id);
	execl("/proc/self/exe", g_self, "image2", id, (char *)NULL);
	_exit(21);
}

int main(int argc, char **argv)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));
	int status = -1;
	pid_t p;

	prog_init();
	if (argc == 3 && !strcmp(argv[1], "image2")) {
		/* The new image: its own memory says sem 1 at the same address. */
		map_sops(1);
		return syscall(SYS_semop, atoi(argv[2]), SOPS_ADDR, 1) == 0 ? 0 : 22;
	}
	g_self = argv[0];
	g_id = semget(IPC_PRIVATE, 2, 0600);
	MUST(g_id >= 0);
	map_sops(0);
	/* Like posix_spawn: the parent waits until the child has exec'd. */
	p = clone(child, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	MUST(p > 0);
	MUST(waitpid(p, &status, 0) == p);
	printf("child: %s\n", how(status));
	CHECK("sem 0 (the call from the shared memory)", 1, getval(g_id, 0));
	CHECK("sem 1 (the call after the exec)", 1, getval(g_id, 1));
	semctl(g_id, 0, IPC_RMID);
	return prog_exit_status();
}
