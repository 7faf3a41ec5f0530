/* SPDX-License-Identifier: MIT */
/*
 * Calls that change credentials or namespaces never fail with EINTR natively, whatever signals
 * arrive. Here each is made thousands of times while another process sends SIGURG every
 * 20 microseconds, once with a handler installed with SA_RESTART and once without: every call
 * must succeed. A supervisor that trapped these calls to keep its caches exact would make some
 * fail with EINTR (the kernel cannot restart a trapped call whose handler lacks SA_RESTART).
 *
 * Usage: eintr-creds [CALLS]        set*id, setgroups, capset, unshare/setns (UTS), execve
 *        eintr-creds CALLS trapped  the forms a supervisor must trap (unshare(CLONE_SYSVSEM),
 *                                   setns(CLONE_NEWIPC)): counts printed, to judge them by
 *        eintr-creds-exec N         (internal: one link of the execve chain)
 */
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>

#include "prog.h"

static volatile sig_atomic_t handled;

static void on_urg(int sig)
{
	(void)sig;
	handled++;
}

static void handler(bool restart)
{
	struct sigaction sa = { .sa_handler = on_urg, .sa_flags = restart ? SA_RESTART : 0 };

	sigemptyset(&sa.sa_mask);
	MUST(sigaction(SIGURG, &sa, NULL) == 0);
}

/* A process that signals pid every 20 us until killed. */
static pid_t flood(pid_t pid)
{
	pid_t f = xfork();

	if (f == 0) {
		for (;;) {
			int64_t next = now_ns() + 20000;

			if (kill(pid, SIGURG))
				_exit(0);
			while (now_ns() < next)
				;
		}
	}
	return f;
}

static void stop(pid_t f)
{
	kill(f, SIGKILL);
	reap(f);
}

static gid_t groups[64];
static int ngroups;
static struct __user_cap_header_struct caph = { _LINUX_CAPABILITY_VERSION_3, 0 };
static struct __user_cap_data_struct capd[2];
static int uts_fd, ipc_fd;

static long call(const char *what)
{
	if (!strcmp(what, "setgid"))
		return setgid(getegid());
	if (!strcmp(what, "setuid"))
		return setuid(geteuid());
	if (!strcmp(what, "setresuid"))
		return setresuid(-1, -1, -1);
	if (!strcmp(what, "setresgid"))
		return setresgid(-1, -1, -1);
	if (!strcmp(what, "setgroups"))
		return setgroups((size_t)ngroups, groups);
	if (!strcmp(what, "capset"))
		return syscall(SYS_capset, &caph, capd);
	if (!strcmp(what, "unshare(CLONE_NEWUTS)"))
		return unshare(CLONE_NEWUTS);
	if (!strcmp(what, "setns(CLONE_NEWUTS)"))
		return setns(uts_fd, CLONE_NEWUTS);
	if (!strcmp(what, "unshare(CLONE_SYSVSEM)"))
		return unshare(CLONE_SYSVSEM);
	if (!strcmp(what, "setns(CLONE_NEWIPC)"))
		return setns(ipc_fd, CLONE_NEWIPC);
	return -2;
}

static void run(const char *what, int calls, bool restart, bool quiet_counts)
{
	int eintr = 0, other = 0;
	pid_t f;

	handler(restart);
	f = flood(getpid());
	for (int i = 0; i < calls; i++) {
		long r = call(what);

		if (r == -1 && errno == EINTR)
			eintr++;
		else if (r != 0)
			other++;
	}
	stop(f);
	if (quiet_counts) {
		/* the trapped forms: EINTR counts vary from run to run, so they go to stderr */
		fprintf(stderr, "trapped %s (%s): %d calls, %d EINTR, %d other errors\n", what,
			restart ? "SA_RESTART" : "no SA_RESTART", calls, eintr, other);
		printf("%s (%s): no error but EINTR: %s\n", what,
		       restart ? "SA_RESTART" : "no SA_RESTART", other ? "NO" : "yes");
		EXPECT(!other, "%s: %d errors other than EINTR", what, other);
		return;
	}
	printf("%s (%s): %d calls, %d failed with EINTR, %d otherwise\n", what,
	       restart ? "SA_RESTART" : "no SA_RESTART", calls, eintr, other);
	EXPECT(!eintr && !other, "%s: natively every call succeeds", what);
}

/* One link of a chain of execve calls made under the flood; the last one reports. */
static int exec_link(int left, char *self)
{
	char arg[16];
	char *argv[] = { self, (char *)"eintr-creds-exec", arg, NULL };

	if (left == 0) {
		printf("execve: every exec of the chain succeeded\n");
		return 0;
	}
	handler(false); /* exec resets it; SIGURG's default is to ignore it */
	snprintf(arg, sizeof(arg), "%d", left - 1);
	execv(self, argv);
	printf("execve: failed with %s, %d links before the end\n", errname(errno), left);
	return 1;
}

int main(int argc, char **argv)
{
	static const char *const untrapped[] = { "setgid",
						 "setuid",
						 "setresuid",
						 "setresgid",
						 "setgroups",
						 "capset",
						 "unshare(CLONE_NEWUTS)",
						 "setns(CLONE_NEWUTS)" };
	static const char *const trapped[] = { "unshare(CLONE_SYSVSEM)", "setns(CLONE_NEWIPC)" };
	int calls = argc > 1 ? atoi(argv[1]) : 20000;
	char self[4096];
	pid_t p, f;

	prog_init();
	if (argc == 3 && !strcmp(argv[1], "eintr-creds-exec"))
		return exec_link(atoi(argv[2]), argv[0]);
	MUST(geteuid() == 0);
	ngroups = getgroups(64, groups);
	MUST(ngroups >= 0);
	MUST(syscall(SYS_capget, &caph, capd) == 0);
	uts_fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
	ipc_fd = open("/proc/self/ns/ipc", O_RDONLY | O_CLOEXEC);
	MUST(uts_fd >= 0 && ipc_fd >= 0);

	if (argc > 2 && !strcmp(argv[2], "trapped")) {
		for (size_t i = 0; i < sizeof(trapped) / sizeof(trapped[0]); i++) {
			run(trapped[i], calls, true, true);
			run(trapped[i], calls, false, true);
		}
		return prog_exit_status();
	}
	for (size_t i = 0; i < sizeof(untrapped) / sizeof(untrapped[0]); i++) {
		run(untrapped[i], calls, true, false);
		run(untrapped[i], calls, false, false);
	}

	/* execve: a chain of execs in one process, the flood aimed at it throughout */
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

	MUST(len > 0);
	self[len] = '\0';
	p = xfork();
	if (p == 0) {
		char *args[] = { self, (char *)"eintr-creds-exec", (char *)"300", NULL };

		sleep_ms(1); /* let the flood start */
		execv(self, args);
		_exit(3);
	}
	f = flood(p);
	printf("execve chain: %s\n", reap(p));
	stop(f);
	return prog_exit_status();
}
