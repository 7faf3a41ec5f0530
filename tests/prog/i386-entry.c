/* SPDX-License-Identifier: MIT */
/*
 * Every semaphore entry point of i386's table, from a 64-bit program (int $0x80): ipc(2) with
 * SEMGET, SEMCTL, SEMOP and SEMTIMEDOP, each with versions 0 to 3 in the call number's upper
 * 16 bits (the kernel ignores them), and the direct semget, semctl and semtimedop_time64.
 * Natively each reaches the kernel's semaphores; under semvisor each must fail with ENOSYS and
 * leave the kernel's semaphores untouched (/proc/sysvipc/sem stays empty), while ipc(2)'s
 * message-queue calls, which are not ours, still reach the kernel.
 *
 * Usage: i386-entry native|confined (what to expect)
 */
#include <sys/mman.h>

#include "i386.h"
#include "prog.h"

#define IPCCALL_MSGGET 13

static bool confined;
static int bad;

static void entry(const char *what, long r, int err)
{
	printf("%s: %s\n", what, res(r, err));
	if (confined ? !(r == -1 && err == ENOSYS) : (r == -1 && err == ENOSYS)) {
		printf("FAIL: %s: %s\n", what,
		       confined ? "reached the kernel" : "not served natively");
		bad++;
	}
}

static int kernel_sets(void)
{
	FILE *f = fopen("/proc/sysvipc/sem", "r");
	char line[512];
	int n = -1; /* the header */

	MUST(f);
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	/* 32-bit pointers: memory below 4 GiB */
	char *low = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	struct sembuf *sops;
	int *semun;
	char what[64];

	prog_init();
	MUST(argc == 2);
	confined = !strcmp(argv[1], "confined");
	MUST(low != MAP_FAILED);
	sops = (struct sembuf *)low;
	semun = (int *)(low + 64);
	*sops = (struct sembuf){ 0, 0, IPC_NOWAIT };
	*semun = 0;

	for (long ver = 0; ver < 4; ver++) {
		long id, r;

		snprintf(what, sizeof(what), "ipc(SEMGET, version %ld)", ver);
		id = i386_syscall(I386_IPC, IPCCALL_SEMGET | ver << 16, IPC_PRIVATE, 1, 0600, 0);
		entry(what, id, errno);
		if (id < 0)
			id = 0;
		snprintf(what, sizeof(what), "ipc(SEMCTL GETVAL, version %ld)", ver);
		r = i386_syscall(I386_IPC, IPCCALL_SEMCTL | ver << 16, id, 0, GETVAL,
				 (long)(uintptr_t)semun);
		entry(what, r, errno);
		snprintf(what, sizeof(what), "ipc(SEMOP, version %ld)", ver);
		r = i386_syscall(I386_IPC, IPCCALL_SEMOP | ver << 16, id, 1, 0,
				 (long)(uintptr_t)sops);
		entry(what, r, errno);
		snprintf(what, sizeof(what), "ipc(SEMTIMEDOP, version %ld)", ver);
		r = i386_syscall(I386_IPC, IPCCALL_SEMTIMEDOP | ver << 16, id, 1, 0,
				 (long)(uintptr_t)sops);
		/* natively its timeout (ebp) is whatever the register held: any answer but
		   ENOSYS shows it was served */
		entry(what, r, errno);
	}
	entry("semget", i386_syscall(I386_SEMGET, IPC_PRIVATE, 1, 0600, 0, 0), errno);
	entry("semctl GETVAL", i386_syscall(I386_SEMCTL, 0, 0, GETVAL, 0, 0), errno);
	entry("semtimedop_time64",
	      i386_syscall(I386_SEMTIMEDOP_TIME64, 0, (long)(uintptr_t)sops, 1, 0, 0), errno);

	/* not ours: message queues go to the kernel either way */
	long q = i386_syscall(I386_IPC, IPCCALL_MSGGET, IPC_PRIVATE, 0600, 0, 0);

	printf("ipc(MSGGET): %s\n", q >= 0 ? "a queue" : res(q, errno));
	EXPECT(q >= 0, "message queues are not ours to refuse");
	printf("kernel semaphore sets now: %d\n", kernel_sets());
	if (confined)
		EXPECT(kernel_sets() == 0, "a semaphore call reached the kernel's semaphores");
	EXPECT(!bad, "%d entry points", bad);
	return prog_exit_status();
}
