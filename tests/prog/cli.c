/* SPDX-License-Identifier: MIT */
/*
 * A helper for the semvisor-run command-line tests (41-run-cli): small behaviours the tests
 * observe from outside.
 *   cli exit N        exit with status N
 *   cli raise SIG     die from signal number SIG (default action)
 *   cli usr1          print "ready", then wait for SIGUSR1 (5 s at most); print "got SIGUSR1"
 *   cli count         exactly 3 semget, 5 glibc semop() (semtimedop system calls), 2 raw
 *                     semop system calls, 1 semctl; nothing else semaphore-related
 *   cli limits        probe the four limits (run with 10,20,5,3): ENOSPC, EINVAL, E2BIG
 *   cli stdin         copy standard input to standard output, then report its size
 *   cli sleep         print "ready", then sleep 5 s (to be killed) and exit 0
 *   cli trace         a child asks to be traced (PTRACE_TRACEME) and stops; print what
 *                     ptrace said and whether its parent saw the stop
 *   cli listener PROG [ARG]...
 *                     run PROG under a seccomp filter with a listener, as a sandbox above
 *                     would have: it traps acct(2) only, and its fd stays open in PROG, so
 *                     PROG can have no listener of its own (EBUSY)
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>

#include "prog.h"

static void on_usr1(int sig)
{
	(void)sig;
}

static int usr1(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct timespec ts = { 5, 0 };
	sigset_t set;
	siginfo_t si;

	/* take the signal synchronously: no race between "ready" and the wait */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	MUST(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
	sigemptyset(&sa.sa_mask);
	MUST(sigaction(SIGUSR1, &sa, NULL) == 0);
	printf("ready\n");
	fflush(stdout);
	if (sigtimedwait(&set, &si, &ts) != SIGUSR1) {
		printf("no SIGUSR1 within 5 s\n");
		return 1;
	}
	printf("got SIGUSR1\n");
	return 0;
}

static int count(void)
{
	struct sembuf up = { 0, 1, 0 }, down = { 0, -1, 0 };
	int a, b, c;

	a = semget(IPC_PRIVATE, 1, 0600);
	b = semget(0x5151, 1, IPC_CREAT | 0600);
	c = semget(0x5151, 0, 0);
	MUST(a >= 0 && b >= 0 && c == b);
	for (int i = 0; i < 5; i++)
		MUST(semop(a, i % 2 ? &down : &up, 1) == 0);
	MUST(syscall(SYS_semop, b, &up, 1) == 0);
	MUST(syscall(SYS_semop, b, &down, 1) == 0);
	MUST(semctl(a, 0, GETVAL) == 1);
	printf("done\n");
	return 0;
}

static int limits(void)
{
	struct sembuf ops[6];
	struct seminfo si;
	int a, b, c, d;

	MUST(semctl(0, 0, IPC_INFO, (union semun){ .__buf = &si }) >= 0);
	printf("limits: semmsl %d semmns %d semopm %d semmni %d\n", si.semmsl, si.semmns, si.semopm,
	       si.semmni);
	a = CHECK("set 1, nsems 1", 0, semget(IPC_PRIVATE, 1, 0600));
	b = CHECK("set 2, nsems 1", 1, semget(IPC_PRIVATE, 1, 0600));
	c = CHECK("set 3, nsems 1", 2, semget(IPC_PRIVATE, 1, 0600));
	CHECK("set 4 (SEMMNI 3)", -ENOSPC, semget(IPC_PRIVATE, 1, 0600));
	CHECK("IPC_RMID set 3", 0, semctl(c, 0, IPC_RMID));
	CHECK("nsems 11 (SEMMSL 10)", -EINVAL, semget(IPC_PRIVATE, 11, 0600));
	d = CHECK("nsems 10", 3, semget(IPC_PRIVATE, 10, 0600));
	CHECK("IPC_RMID set 1", 0, semctl(a, 0, IPC_RMID));
	/* in use: set 2 (1 semaphore) and the set of 10 */
	CHECK("nsems 10 more (11 + 10 > SEMMNS 20)", -ENOSPC, semget(IPC_PRIVATE, 10, 0600));
	CHECK("nsems 9 (exactly 20)", 4, semget(IPC_PRIVATE, 9, 0600));
	CHECK("IPC_RMID set 2", 0, semctl(b, 0, IPC_RMID));
	CHECK("nsems 2 (21 > 20)", -ENOSPC, semget(IPC_PRIVATE, 2, 0600));
	CHECK("nsems 1 (exactly 20)", 5, semget(IPC_PRIVATE, 1, 0600));
	for (int i = 0; i < 6; i++)
		ops[i] = (struct sembuf){ (unsigned short)i, 1, 0 };
	CHECK("semop 6 sops (SEMOPM 5)", -E2BIG, semop(d, ops, 6));
	CHECK("semop 5 sops", 0, semop(d, ops, 5));
	CHECK("GETVAL", 1, getval(d, 4));
	return prog_exit_status();
}

static int copy_stdin(void)
{
	char buf[4096];
	size_t total = 0;
	ssize_t n;

	while ((n = read(0, buf, sizeof(buf))) > 0) {
		MUST(fwrite(buf, 1, (size_t)n, stdout) == (size_t)n);
		total += (size_t)n;
	}
	printf("[%zu bytes]\n", total);
	return n < 0;
}

/* What a debugger does first: under the ptrace backend its tracee has a tracer already. */
static int trace(void)
{
	int status;
	pid_t pid = fork();

	MUST(pid >= 0);
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL)) {
			printf("PTRACE_TRACEME: %s\n", strerror(errno));
			_exit(1);
		}
		printf("PTRACE_TRACEME: 0\n");
		fflush(stdout);
		raise(SIGSTOP);
		_exit(0);
	}
	MUST(waitpid(pid, &status, 0) == pid);
	if (WIFSTOPPED(status)) {
		printf("traced child stopped by signal %d\n", WSTOPSIG(status));
		MUST(ptrace(PTRACE_CONT, pid, NULL, NULL) == 0);
		MUST(waitpid(pid, &status, 0) == pid);
	}
	printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}

static int listener(char **argv)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_acct, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };
	int fd;

	/* without CAP_SYS_ADMIN the kernel wants no_new_privs first */
	if (geteuid() != 0)
		MUST(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			  &fprog);
	/* the kernel makes it close-on-exec, and a listener closed is a listener gone */
	MUST(fd >= 0 && fcntl(fd, F_SETFD, 0) == 0);
	execvp(argv[0], argv);
	fprintf(stderr, "cli: cannot run %s: %s\n", argv[0], strerror(errno));
	return 127;
}

int main(int argc, char **argv)
{
	prog_init();
	if (argc >= 3 && !strcmp(argv[1], "exit"))
		return atoi(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "raise")) {
		int sig = atoi(argv[2]);

		signal(sig, SIG_DFL);
		raise(sig);
		return 100;
	}
	if (argc >= 2 && !strcmp(argv[1], "usr1"))
		return usr1();
	if (argc >= 2 && !strcmp(argv[1], "count"))
		return count();
	if (argc >= 2 && !strcmp(argv[1], "limits"))
		return limits();
	if (argc >= 2 && !strcmp(argv[1], "stdin"))
		return copy_stdin();
	if (argc >= 2 && !strcmp(argv[1], "trace"))
		return trace();
	if (argc >= 3 && !strcmp(argv[1], "listener"))
		return listener(argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "sleep")) {
		printf("ready\n");
		fflush(stdout);
		sleep_ms(5000);
		return 0;
	}
	fprintf(stderr,
		"usage: cli exit N | raise SIG | usr1 | count | limits | stdin | sleep | trace | "
		"listener PROG [ARG]...\n");
	return 2;
}
