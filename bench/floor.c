/*
 * bench/floor.c - the cost floor of serving semop(2) from user space.
 *
 * What it measures
 * ----------------
 * One thread doing semop(+1), semop(-1) on one System V semaphore, timed by that thread, under
 * each way of getting the call served ("rows"):
 *
 *   native                    the kernel's own semop; no filter at all.
 *   notify                    a seccomp USER_NOTIF filter traps the call; a supervisor process
 *                             answers val=0 at once (NOTIF_RECV, NOTIF_SEND, nothing else).
 *   notify+sync               the same with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP set on the
 *                             listener (kernel 6.6+): the kernel wakes supervisor and target on
 *                             the waker's CPU instead of sending an IPI and a migration.
 *   notify+sync+read          + process_vm_readv of the caller's 6-byte sembuf before answering.
 *                             No correct emulator can skip that read, so this row is the
 *                             "read-inclusive floor" every other row is divided by.
 *   notify+sync+read+idvalid  + NOTIF_ID_VALID after the read, which a correct supervisor must
 *                             also do (the read may have raced with the caller's death and pid
 *                             reuse).
 *   notify+sync+read+creds    + PIDFD_GET_INFO on the caller's pidfd after the read instead:
 *                             the caller's credentials, read on every call, and the same proof
 *                             (the pidfd still names a live thread). What semvisor does
 *                             (server/notify/ident.h); "unsupported" before Linux 6.13.
 *   ptrace                    SECCOMP_RET_TRACE; the tracer skips the call (orig_rax = -1,
 *                             rax = 0, two PTRACE_POKEUSERs) and continues: the fallback when
 *                             a listener is refused.
 *   ptrace+read+creds         + what a correct tracer must learn first, as semvisor's does:
 *                             PTRACE_GET_SYSCALL_INFO (the call's architecture, which the
 *                             registers do not tell), the sembuf read with the caller's rights
 *                             and its credentials through its pidfd: the ptrace analogue of
 *                             notify+sync+read+creds.
 *   --run-under CMD...        the same target loop executed inside an external command, e.g.
 *                             semvisor-run: the real supervisor, measured by the same method.
 *
 * Method (the same for every row)
 * -------------------------------
 * A target process runs target_loop(): it creates a private set (IPC_PRIVATE; in-process rows
 * first move to a fresh IPC namespace when root), warms up for --warm-time seconds while it
 * estimates the per-call cost, derives K (calls per repetition) so one repetition lasts about
 * --rep-time seconds (or takes K from --calls), then times R repetitions of K calls with
 * CLOCK_MONOTONIC (vDSO, so the filter never sees the clock) and writes the R durations to a pipe.
 * The parent computes per-call medians, min and max.  Timing on the caller's side means the figure
 * is exactly what a program sees: trap, queueing, wake-ups, the supervisor's work, the answer.
 *
 * Hand-back protocol (what --run-under relies on)
 * -----------------------------------------------
 * The parent execs "CMD... /proc/self/exe --target-loop --result-fd N ..." with the write end of
 * a pipe left open (no FD_CLOEXEC) as fd N.  The target writes, in one write(2) at the end:
 *
 *     floor 1 calls K reps R
 *     rep NS CPUMASK    (R lines: nanoseconds for K calls; hex mask of the CPUs the target
 *                        was on at the repetition's start and end, for the placement column)
 *     end
 *
 * A wrapper therefore only has to pass inherited fds through exec, as any launcher does.  After
 * "end" the target issues one sentinel semop(-1, NULL, 0) (EINVAL natively) that tells the
 * in-process supervisors the run is over; it is outside the timed region.
 *
 * Adding a row
 * ------------
 * Rows are the builtin_modes[] table: a name, flags, a setup() run in the target after fork and
 * a serve() run in the parent while the target loops.  A row for the project's own notify layer
 * served in-process would reuse notify_setup() and supply a serve() that hands the listener fd
 * to the library; an external launcher needs no code at all (--run-under).
 *
 * Never hanging
 * -------------
 * Each row runs under alarm(--timeout): the parent's SIGALRM handler SIGKILLs the target (the
 * whole process group for --run-under rows) and the row is reported as failed.  Targets also die
 * with the parent (PR_SET_PDEATHSIG, PTRACE_O_EXITKILL) and carry their own alarm.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "bench_util.h"

#ifndef __x86_64__
#error "bench/floor traps x86_64 system call numbers and edits x86_64 registers; port it first"
#endif

/* Debian 12's headers predate kernel 6.6; the values are ABI (include/uapi/linux/seccomp.h). */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

#define MAX_REPS   1000
#define MAX_CALLS  (1L << 40)
#define RESULT_MAX 65536 /* fits a pipe buffer, so the target never blocks writing it */

/* ---- small helpers ------------------------------------------------------------------------ */

static int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* CPUs as a bit mask (CPUs 0-63; placement is reported, not relied on, so the rest is ignored). */
static uint64_t cpu_bit(int cpu)
{
	return cpu >= 0 && cpu < 64 ? UINT64_C(1) << cpu : 0;
}

static void format_cpus(uint64_t mask, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	if (mask == 0) {
		snprintf(buf, size, "?");
		return;
	}
	for (int c = 0; c < 64 && len < size; c++) {
		if (mask & cpu_bit(c))
			len += (size_t)snprintf(buf + len, size - len, "%s%d", len ? "," : "", c);
	}
}

enum {
	PIN_OFF,
	PIN_SPLIT,
	PIN_SAME
};

/* ---- options ------------------------------------------------------------------------------ */

struct opts {
	int reps;
	double rep_time;  /* seconds per repetition when calls == 0 */
	double warm_time; /* seconds of warm-up + calibration before the timed repetitions */
	long calls;	  /* calls per repetition; 0 = calibrate from the warm-up */
	int timeout;	  /* seconds per row before the target is killed */
	int cpu_pin;	  /* PIN_* */
	bool quick;
	bool verbose;
	const char *out;
	const char *only;
	/* --target-loop (the process a --run-under command executes) */
	bool target_loop;
	int result_fd;
	int pin_cpu;
};

/* ---- the target loop (identical for every row) -------------------------------------------- */

/* The target's set, for on_target_term() (an int fits sig_atomic_t). */
static volatile sig_atomic_t g_semid = -1;

struct loop_cfg {
	int reps;
	long calls;
	double rep_time;
	double warm_time;
};

/*
 * n pairs of semop(+1), semop(-1) on semaphore 0 of set id.  The value goes 0 -> 1 -> 0, so no
 * call ever blocks natively; a served call must return 0 as well.
 */
static int updown(int id, long n)
{
	struct sembuf up = { .sem_num = 0, .sem_op = 1, .sem_flg = 0 };
	struct sembuf down = { .sem_num = 0, .sem_op = -1, .sem_flg = 0 };

	for (long i = 0; i < n; i++) {
		if (semop(id, &up, 1) < 0 || semop(id, &down, 1) < 0)
			return -1;
	}
	return 0;
}

/* The semid of the end-of-run sentinel semop, which no set has. */
#define END_SEMID (-1)

/* Is a trapped call, by its first argument, the sentinel? In-process supervisors stop there. */
static bool is_sentinel(uint64_t arg0)
{
	return (int)arg0 == END_SEMID;
}

/* The only calls a supervisor of either kind should see: the target's native semop/semtimedop. */
static bool is_target_call(uint32_t arch, uint64_t nr)
{
	return arch == AUDIT_ARCH_X86_64 && (nr == __NR_semtimedop || nr == __NR_semop);
}

/*
 * Runs in the target: warm up, calibrate, time, report on fd out, send the end sentinel.
 * Returns 0 or -1 (message printed).
 */
static int target_loop(const struct loop_cfg *c, int out)
{
	static uint64_t ns[MAX_REPS], cpus[MAX_REPS];
	static char buf[RESULT_MAX];
	struct sembuf none;
	uint64_t t0, t1;
	long pairs, warm_pairs = 0;
	size_t len;
	int id;

	id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	if (id < 0) {
		bu_tmsg("semget(IPC_PRIVATE): %s", strerror(errno));
		return -1;
	}
	g_semid = id;

	/* Warm-up: page faults, caches, the supervisor's first wake-ups, cpufreq.  Its average
	   sizes K, so that every row's repetition lasts about as long whatever its per-call
	   cost. */
	t0 = bu_now_ns();
	do {
		if (updown(id, 64) < 0)
			goto semop_failed;
		warm_pairs += 64;
		t1 = bu_now_ns();
	} while ((double)(t1 - t0) < c->warm_time * 1e9);

	if (c->calls > 0) {
		pairs = (c->calls + 1) / 2;
	} else {
		double per_pair = (double)(t1 - t0) / (double)warm_pairs;

		pairs = (long)(c->rep_time * 1e9 / per_pair) + 1;
		if (pairs < 16)
			pairs = 16;
	}

	for (int r = 0; r < c->reps; r++) {
		/* Where the caller ran: the cost of a wake-up depends on it (see floor.md). */
		cpus[r] = cpu_bit(sched_getcpu());
		t0 = bu_now_ns();
		if (updown(id, pairs) < 0)
			goto semop_failed;
		ns[r] = bu_now_ns() - t0;
		cpus[r] |= cpu_bit(sched_getcpu());
	}

	if (semctl(id, 0, IPC_RMID) < 0) {
		bu_tmsg("semctl(IPC_RMID): %s", strerror(errno));
		return -1;
	}
	g_semid = -1;

	len = (size_t)snprintf(buf, sizeof(buf), "floor 1 calls %ld reps %d\n", 2 * pairs, c->reps);
	for (int r = 0; r < c->reps; r++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len,
					"rep %" PRIu64 " %" PRIx64 "\n", ns[r], cpus[r]);
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, "end\n");
	if (bu_write_all(out, buf, len) < 0) {
		bu_tmsg("writing results to fd %d: %s", out, strerror(errno));
		return -1;
	}

	/* The sentinel (is_sentinel()): a native semop returns EINVAL; its result is irrelevant.
	   Outside the timed region. */
	memset(&none, 0, sizeof(none));
	(void)semop(END_SEMID, &none, 0);
	return 0;

semop_failed:
	bu_tmsg("semop: %s", strerror(errno));
	(void)semctl(id, 0, IPC_RMID);
	return -1;
}

/* ---- rows ---------------------------------------------------------------------------------- */

/* struct pidfd_info as first published (Linux 6.13): the ioctl takes its size. */
struct pidfd_info_v0 {
	uint64_t mask, cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define PIDFD_INFO_CREDS  (1UL << 1)
#define PIDFD_GET_INFO_V0 _IOWR(0xFF, 11, struct pidfd_info_v0)

enum {
	M_NOTIFY = 1u << 0,   /* target installs a USER_NOTIF filter and hands over the listener */
	M_SYNC = 1u << 1,     /* supervisor sets SYNC_WAKE_UP (falls back when refused) */
	M_SYNC_REQ = 1u << 2, /* ...and the row means nothing without it: "unsupported" instead */
	M_READ = 1u << 3,     /* supervisor reads the caller's sembuf */
	M_IDVALID = 1u << 4,  /* ...then checks NOTIF_ID_VALID */
	M_FLOOR = 1u << 5,    /* the read-inclusive floor: the denominator of every ratio */
	M_EXEC = 1u << 6,     /* target loop runs inside an external command (--run-under) */
	M_CREDS = 1u << 7,    /* ...then reads its credentials through its pidfd */
};

struct run;

struct mode {
	const char *name;
	unsigned flags;
	/* In the target after fork and the common setup: 0 = go, 1 = quit quietly, -1 = failed. */
	int (*setup)(struct run *r);
	/* In the parent while the target runs; returns 0 or -1 with r->why set. */
	int (*serve)(struct run *r);
	char **cmd; /* M_EXEC: the command prefix */
};

struct run {
	const struct mode *m;
	const struct opts *o;
	pid_t pid;
	int res[2];  /* result pipe: the target writes, the parent reads */
	int sock[2]; /* M_NOTIFY: listener hand-off, then one byte: 'g'o or 'q'uit */
	int status;  /* wait status, valid when reaped */
	bool reaped;
	bool unsupported;
	bool sync_fallback;
	unsigned long served, stale, bad;
	uint64_t super_cpus; /* CPUs the supervisor was seen on (sampled) */
	char why[256];
};

enum row_status {
	ROW_SKIPPED,
	ROW_OK,
	ROW_UNSUPPORTED,
	ROW_FAILED
};

struct row {
	const struct mode *m;
	enum row_status status;
	long calls;
	int nreps;
	double us[MAX_REPS]; /* per-call microseconds of each repetition */
	double med, min, max;
	uint64_t target_cpus, super_cpus;
	char note[400];
};

/* Process-wide facts the rows share. */
static int g_cpu_target = -1, g_cpu_super = -1;
static int g_sync = -1; /* SYNC_WAKE_UP: -1 not tried, 0 refused, 1 accepted */
static struct seccomp_notif_sizes g_sizes;
static bool g_have_sizes;
static pid_t g_parent;

/* The row's target, for the signal handlers.  pid_t fits sig_atomic_t (both int) on Linux. */
static volatile sig_atomic_t g_victim;
static volatile sig_atomic_t g_victim_group;
static volatile sig_atomic_t g_timed_out;

/*
 * sig is SIGKILL on a timeout (the target may be wedged) and SIGTERM on an interrupt: a
 * --run-under target then removes its set (it lives in the host's IPC namespace, or in the
 * wrapper's supervisor) before it dies; an in-process target lives in its own IPC namespace when
 * root, which vanishes with it, so it is always SIGKILLed.
 */
static void kill_victim(int sig)
{
	pid_t p = (pid_t)g_victim;

	if (p > 0)
		kill(g_victim_group ? -p : p, g_victim_group ? sig : SIGKILL);
}

/* SIGALRM: the row's deadline.  No SA_RESTART, so a blocked RECV/waitpid/read returns EINTR. */
static void on_alarm(int sig)
{
	int saved = errno;

	(void)sig;
	g_timed_out = 1;
	kill_victim(SIGKILL);
	errno = saved;
}

/* SIGINT/SIGTERM/SIGHUP: take the target along, then die of the same signal. */
static void on_fatal(int sig)
{
	struct sigaction sa;

	kill_victim(SIGTERM);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
	raise(sig);
}

/* Trap semtimedop (what glibc's semop() issues on x86_64) and semop; allow everything else,
   including other architectures and x32 (whose numbers carry __X32_SYSCALL_BIT). */
static int install_filter(uint32_t action, unsigned int flags)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_semtimedop, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_semop, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, action),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	/* Without no_new_privs an unprivileged caller gets EACCES; as root it is harmless. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

static int send_fd(int sock, int fd)
{
	char data = 'L';
	struct iovec iov = { .iov_base = &data, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	c = CMSG_FIRSTHDR(&msg);
	if (c == NULL)
		return -1;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	for (;;) {
		ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);

		if (n == 1)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return -1;
	}
}

/* Returns the received fd, or -1 with errno set (0 = the peer closed without sending one). */
static int recv_fd(int sock)
{
	char data;
	struct iovec iov = { .iov_base = &data, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t n;
	int fd;

	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR && !g_timed_out);
	if (n < 0)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (n == 0 || c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(int))) {
		errno = 0;
		return -1;
	}
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* Target side of every notify row. */
static int notify_setup(struct run *r)
{
	ssize_t n;
	char c;
	int fd;

	fd = install_filter(SECCOMP_RET_USER_NOTIF, SECCOMP_FILTER_FLAG_NEW_LISTENER);
	if (fd < 0) {
		if (errno == EBUSY)
			bu_tmsg(
			    "seccomp(NEW_LISTENER): EBUSY: a filter with a live listener is "
			    "already installed above this process (nested sandbox or "
			    "container); the kernel refuses a second one. Run floor outside it.");
		else
			bu_tmsg("seccomp(SET_MODE_FILTER, NEW_LISTENER): %s", strerror(errno));
		return -1;
	}
	if (send_fd(r->sock[1], fd) < 0) {
		bu_tmsg("sending the listener fd: %s", strerror(errno));
		return -1;
	}
	/* The listener lives while any copy is open, ours included (SPEC B4.1): close it, so that
	   only the supervisor's copy decides how long the listener lives. */
	close(fd);
	do
		n = read(r->sock[1], &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1) {
		bu_tmsg("waiting for the supervisor: %s", n < 0 ? strerror(errno) : "it went away");
		return -1;
	}
	return c == 'g' ? 0 : 1;
}

/* Has the target exited?  Leaves it a zombie (WNOWAIT) for the common reaping code. */
static bool target_gone(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return true;
	return si.si_pid == pid;
}

/*
 * The caller's 6-byte sembuf at addr, read with its own rights as a correct supervisor must:
 * 0, -ESRCH (the caller is gone: counted stale) or -EFAULT (counted bad). What is read is
 * checked, so that a broken read cannot pass unnoticed.
 */
static int read_sembuf(struct run *r, pid_t tid, uint64_t addr)
{
	struct sembuf sb;
	struct iovec local = { .iov_base = &sb, .iov_len = sizeof(sb) };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof(sb) };
	ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);

	if (n == (ssize_t)sizeof(sb)) {
		if (sb.sem_num != 0 || (sb.sem_op != 1 && sb.sem_op != -1))
			r->bad++;
		return 0;
	}
	if (n < 0 && errno == ESRCH) {
		r->stale++;
		return -ESRCH;
	}
	r->bad++;
	return -EFAULT;
}

/*
 * The caller's credentials through a pidfd of its thread, opened at its first call and kept
 * (*pidfd, *pidfd_of), as semvisor does; the same ioctl proves the caller still lives. 0, or
 * -ESRCH when it is gone (counted stale).
 */
static int read_creds(struct run *r, int *pidfd, pid_t *pidfd_of, pid_t tid)
{
	struct pidfd_info_v0 info = { .mask = PIDFD_INFO_CREDS };

	if (*pidfd < 0 || *pidfd_of != tid) {
		if (*pidfd >= 0)
			close(*pidfd);
		*pidfd_of = tid;
		*pidfd = (int)syscall(SYS_pidfd_open, tid, O_EXCL);
	}
	if (*pidfd < 0 || ioctl(*pidfd, PIDFD_GET_INFO_V0, &info) < 0) {
		r->stale++;
		return -ESRCH;
	}
	if (info.euid != geteuid())
		r->bad++;
	return 0;
}

/*
 * Supervisor side of every notify row: the minimum a supervisor can do, plus (per row flags) the
 * sembuf read and the ID_VALID check.  Raw ioctls, because libseccomp's wrappers turn ENOENT into
 * -ECANCELED and we must tell a vanished caller from a broken listener.
 */
static int notify_serve(struct run *r)
{
	const unsigned flags = r->m->flags;
	size_t req_size = sizeof(struct seccomp_notif),
	       resp_size = sizeof(struct seccomp_notif_resp);
	struct seccomp_notif *req = NULL;
	struct seccomp_notif_resp *resp = NULL;
	int fd, ret = -1, pidfd = -1;
	pid_t pidfd_of = 0;
	char go = 'g';

	fd = recv_fd(r->sock[0]);
	if (fd < 0) {
		snprintf(r->why, sizeof(r->why), "the target handed over no listener%s%s",
			 errno ? ": " : " (see its message above)", errno ? strerror(errno) : "");
		return -1;
	}

	/* Size the buffers as the running kernel says, in case it is newer than our headers. */
	if (g_have_sizes) {
		if (g_sizes.seccomp_notif > req_size)
			req_size = g_sizes.seccomp_notif;
		if (g_sizes.seccomp_notif_resp > resp_size)
			resp_size = g_sizes.seccomp_notif_resp;
	}
	req = calloc(1, req_size);
	resp = calloc(1, resp_size);
	if (req == NULL || resp == NULL) {
		snprintf(r->why, sizeof(r->why), "out of memory");
		goto out_quit;
	}

	if (flags & M_SYNC) {
		/* The flag is passed by value, not through a pointer (kernel/seccomp.c). */
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) ==
		    0) {
			g_sync = 1;
		} else if (errno == EINVAL || errno == ENOTTY) {
			g_sync = 0;
			if (flags & M_SYNC_REQ) {
				r->unsupported = true;
				ret = 0;
				goto out_quit;
			}
			r->sync_fallback = true;
		} else {
			snprintf(r->why, sizeof(r->why), "ioctl(NOTIF_SET_FLAGS): %s",
				 strerror(errno));
			goto out_quit;
		}
	}

	if (bu_write_all(r->sock[0], &go, 1) < 0) {
		snprintf(r->why, sizeof(r->why), "starting the target: %s", strerror(errno));
		goto out;
	}

	for (;;) {
		/* RECV insists on a zeroed buffer (EINVAL otherwise, 5.5+). */
		memset(req, 0, req_size);
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
			if (errno == EINTR) {
				if (g_timed_out)
					break;
				continue;
			}
			/* ENOENT: the caller vanished before pickup, or no task uses the filter any
			   more (immediate on 6.18).  Only the latter ends the row. */
			if (errno == ENOENT) {
				if (target_gone(r->pid))
					break;
				continue;
			}
			snprintf(r->why, sizeof(r->why), "ioctl(NOTIF_RECV): %s", strerror(errno));
			goto out;
		}

		memset(resp, 0, resp_size);
		resp->id = req->id;
		if (!is_target_call(req->data.arch, (uint64_t)req->data.nr)) {
			r->bad++;
			resp->error = -ENOSYS;
		} else if (is_sentinel(req->data.args[0])) {
			resp->error = -EINVAL;
			if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 && errno != ENOENT) {
				snprintf(r->why, sizeof(r->why), "ioctl(NOTIF_SEND): %s",
					 strerror(errno));
				goto out;
			}
			break;
		} else if (flags & M_READ) {
			if (read_sembuf(r, (pid_t)req->pid, req->data.args[1]) == -EFAULT)
				resp->error = -EFAULT;
			if ((flags & M_CREDS) && read_creds(r, &pidfd, &pidfd_of, (pid_t)req->pid))
				continue; /* the caller is gone */
			if (flags & M_IDVALID) {
				if (ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0) {
					if (errno == ENOENT) {
						r->stale++; /* answering would be wrong */
						continue;
					}
					snprintf(r->why, sizeof(r->why),
						 "ioctl(NOTIF_ID_VALID): %s", strerror(errno));
					goto out;
				}
			}
		}
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0) {
			if (errno != ENOENT) {
				snprintf(r->why, sizeof(r->why), "ioctl(NOTIF_SEND): %s",
					 strerror(errno));
				goto out;
			}
			r->stale++;
			continue;
		}
		/* Sample where the supervisor runs; sched_getcpu() reads rseq, nearly free. */
		if ((r->served++ & 255) == 0)
			r->super_cpus |= cpu_bit(sched_getcpu());
	}
	ret = 0;
	goto out;

out_quit:
	/* Tell the target to leave without looping: it is blocked reading the socket. */
	go = 'q';
	(void)bu_write_all(r->sock[0], &go, 1);
out:
	free(req);
	free(resp);
	close(fd);
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}

/* Target side of the ptrace row. */
static int ptrace_setup(struct run *r)
{
	(void)r;
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0) {
		bu_tmsg("ptrace(PTRACE_TRACEME): %s", strerror(errno));
		return -1;
	}
	/* Stop so the tracer can set PTRACE_O_TRACESECCOMP before the filter exists: without it a
	   SECCOMP_RET_TRACE call fails with ENOSYS instead of stopping. */
	if (raise(SIGSTOP) != 0) {
		bu_tmsg("raise(SIGSTOP) failed");
		return -1;
	}
	if (install_filter(SECCOMP_RET_TRACE, 0) < 0) {
		bu_tmsg("seccomp(SET_MODE_FILTER, RET_TRACE): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* waitpid that survives the SIGALRM handler (which kills the target, so a retry returns). */
static pid_t wait_target(pid_t pid, int *st)
{
	pid_t w;

	do
		w = waitpid(pid, st, __WALL);
	while (w < 0 && errno == EINTR);
	return w;
}

/*
 * With M_READ, what a correct tracer must learn before it answers, as semvisor's does: the
 * call's architecture (PTRACE_GET_SYSCALL_INFO: an int $0x80 from a 64-bit process cannot be
 * told from its registers), its sembuf, read with the caller's rights, and (M_CREDS) its
 * credentials. 0, or -1 with r->why set.
 */
static int ptrace_learn(struct run *r, int *pidfd, pid_t *pidfd_of)
{
	struct __ptrace_syscall_info info;

	if (ptrace(PTRACE_GET_SYSCALL_INFO, r->pid, sizeof(info), &info) <= 0) {
		snprintf(r->why, sizeof(r->why), "ptrace(GET_SYSCALL_INFO): %s", strerror(errno));
		return -1;
	}
	if (info.op != PTRACE_SYSCALL_INFO_SECCOMP || !is_target_call(info.arch, info.seccomp.nr)) {
		r->bad++;
		return 0;
	}
	if (is_sentinel(info.seccomp.args[0]))
		return 0; /* it has no sembuf */
	if (read_sembuf(r, r->pid, info.seccomp.args[1]) == 0 && (r->m->flags & M_CREDS))
		read_creds(r, pidfd, pidfd_of, r->pid);
	return 0;
}

/* Tracer side of the ptrace rows: skip each trapped call with result 0. */
static int ptrace_serve(struct run *r)
{
	pid_t pidfd_of = 0;
	int st, pidfd = -1, ret = -1;

	if (wait_target(r->pid, &st) < 0) {
		snprintf(r->why, sizeof(r->why), "waitpid: %s", strerror(errno));
		return -1;
	}
	if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP) {
		r->status = st;
		r->reaped = !WIFSTOPPED(st);
		snprintf(r->why, sizeof(r->why),
			 "the target did not stop for the tracer (status %#x)", st);
		return -1;
	}
	if (ptrace(PTRACE_SETOPTIONS, r->pid, NULL,
		   (void *)(long)(PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL)) < 0 ||
	    ptrace(PTRACE_CONT, r->pid, NULL, NULL) < 0) {
		snprintf(r->why, sizeof(r->why), "ptrace(SETOPTIONS/CONT): %s", strerror(errno));
		return -1;
	}
	for (;;) {
		long sig = 0;

		if (wait_target(r->pid, &st) < 0) {
			snprintf(r->why, sizeof(r->why), "waitpid: %s", strerror(errno));
			goto out;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			r->status = st;
			r->reaped = true;
			ret = 0;
			goto out;
		}
		if (!WIFSTOPPED(st))
			continue;
		if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_SECCOMP << 8))) {
			if ((r->m->flags & M_READ) && ptrace_learn(r, &pidfd, &pidfd_of) < 0)
				goto out;
			/*
			 * Syscall number -1 skips the call; rax is then its return value. Two
			 * POKEUSERs are the cheapest way to write them (GETREGS and SETREGS
			 * copy every register out and in), as semvisor's tracer writes them.
			 * The filter traps nothing else, so the bare row need not look first.
			 */
			if (ptrace(PTRACE_POKEUSER, r->pid, offsetof(struct user, regs.orig_rax),
				   (void *)-1L) < 0 ||
			    ptrace(PTRACE_POKEUSER, r->pid, offsetof(struct user, regs.rax),
				   (void *)0L) < 0) {
				snprintf(r->why, sizeof(r->why), "ptrace(POKEUSER): %s",
					 strerror(errno));
				goto out;
			}
			if ((r->served++ & 255) == 0)
				r->super_cpus |= cpu_bit(sched_getcpu());
		} else if (WSTOPSIG(st) != SIGTRAP) {
			sig = WSTOPSIG(st); /* a real signal: deliver it */
		}
		if (ptrace(PTRACE_CONT, r->pid, NULL, (void *)sig) < 0) {
			snprintf(r->why, sizeof(r->why), "ptrace(CONT): %s", strerror(errno));
			goto out;
		}
	}
out:
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}

static const struct mode builtin_modes[] = {
	{ "native", 0, NULL, NULL, NULL },
	{ "notify", M_NOTIFY, notify_setup, notify_serve, NULL },
	{ "notify+sync", M_NOTIFY | M_SYNC | M_SYNC_REQ, notify_setup, notify_serve, NULL },
	{ "notify+sync+read", M_NOTIFY | M_SYNC | M_READ | M_FLOOR, notify_setup, notify_serve,
	  NULL },
	{ "notify+sync+read+idvalid", M_NOTIFY | M_SYNC | M_READ | M_IDVALID, notify_setup,
	  notify_serve, NULL },
	{ "notify+sync+read+creds", M_NOTIFY | M_SYNC | M_READ | M_CREDS, notify_setup,
	  notify_serve, NULL },
	{ "ptrace", 0, ptrace_setup, ptrace_serve, NULL },
	{ "ptrace+read+creds", M_READ | M_CREDS, ptrace_setup, ptrace_serve, NULL },
};
#define N_BUILTIN (sizeof(builtin_modes) / sizeof(builtin_modes[0]))

static struct loop_cfg loop_cfg_of(const struct opts *o)
{
	struct loop_cfg c = { .reps = o->reps,
			      .calls = o->calls,
			      .rep_time = o->rep_time,
			      .warm_time = o->warm_time };

	return c;
}

/* The target process of an in-process row.  Never returns. */
__attribute__((noreturn)) static void child_main(struct run *r)
{
	const struct opts *o = r->o;
	struct loop_cfg cfg = loop_cfg_of(o);
	struct sigaction dfl;
	int rc;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGALRM, &dfl, NULL);
	sigaction(SIGINT, &dfl, NULL);
	sigaction(SIGTERM, &dfl, NULL);
	sigaction(SIGHUP, &dfl, NULL);
	/* A target blocked in a notification nobody will answer must not outlive floor. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
		bu_tmsg("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
		_exit(1);
	}
	if (getppid() != g_parent)
		_exit(1);
	alarm((unsigned)o->timeout + 5);

	close(r->res[0]);
	if (r->sock[0] >= 0)
		close(r->sock[0]);
	/* A fresh IPC namespace keeps the host's ipcs clean and the set uncontended.  EPERM (root
	   without CAP_SYS_ADMIN, e.g. in a container) falls back to an IPC_PRIVATE set. */
	if (geteuid() == 0 && unshare(CLONE_NEWIPC) < 0 && errno != EPERM) {
		bu_tmsg("unshare(CLONE_NEWIPC): %s", strerror(errno));
		_exit(1);
	}
	if (g_cpu_target >= 0 && pin_to(g_cpu_target) < 0) {
		bu_tmsg("sched_setaffinity(CPU %d): %s", g_cpu_target, strerror(errno));
		_exit(1);
	}
	if (r->m->setup) {
		rc = r->m->setup(r);
		if (rc != 0)
			_exit(rc > 0 ? 0 : 1);
	}
	_exit(target_loop(&cfg, r->res[1]) < 0 ? 1 : 0);
}

/* The wrapper process of a --run-under row: exec CMD... floor --target-loop ...  Never returns. */
__attribute__((noreturn)) static void exec_target(struct run *r)
{
	const struct opts *o = r->o;
	static char self[PATH_MAX];
	char fdbuf[16], repbuf[16], rtbuf[32], wtbuf[32], callbuf[32], tobuf[16], cpubuf[16];
	char *argv[64 + 20];
	ssize_t n;
	int i = 0;

	/* Own process group: on a timeout the whole tree (wrapper, supervisor, target) dies. */
	if (setpgid(0, 0) < 0) {
		bu_tmsg("setpgid: %s", strerror(errno));
		_exit(127);
	}
	/* SIGTERM, not SIGKILL: it survives exec, and a target that CMD became by exec (env) must
	   still get the chance to remove its set (on_target_term). */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != g_parent)
		_exit(127);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		bu_tmsg("readlink(/proc/self/exe): %s", strerror(errno));
		_exit(127);
	}
	self[n] = '\0';
	/* The one fd the target must inherit through CMD's exec. */
	if (fcntl(r->res[1], F_SETFD, 0) < 0) {
		bu_tmsg("fcntl: %s", strerror(errno));
		_exit(127);
	}
	snprintf(fdbuf, sizeof(fdbuf), "%d", r->res[1]);
	snprintf(repbuf, sizeof(repbuf), "%d", o->reps);
	snprintf(rtbuf, sizeof(rtbuf), "%.9g", o->rep_time);
	snprintf(wtbuf, sizeof(wtbuf), "%.9g", o->warm_time);
	snprintf(callbuf, sizeof(callbuf), "%ld", o->calls);
	snprintf(tobuf, sizeof(tobuf), "%d", o->timeout);
	for (char **c = r->m->cmd; *c != NULL; c++) {
		if (i == 64) {
			bu_tmsg("--run-under: more than 64 words in the command");
			_exit(127);
		}
		argv[i++] = *c;
	}
	argv[i++] = self;
	argv[i++] = (char *)"--target-loop";
	argv[i++] = (char *)"--result-fd";
	argv[i++] = fdbuf;
	argv[i++] = (char *)"--reps";
	argv[i++] = repbuf;
	argv[i++] = (char *)"--rep-time";
	argv[i++] = rtbuf;
	argv[i++] = (char *)"--warm-time";
	argv[i++] = wtbuf;
	argv[i++] = (char *)"--calls";
	argv[i++] = callbuf;
	argv[i++] = (char *)"--timeout";
	argv[i++] = tobuf;
	if (g_cpu_target >= 0) {
		snprintf(cpubuf, sizeof(cpubuf), "%d", g_cpu_target);
		argv[i++] = (char *)"--pin-cpu";
		argv[i++] = cpubuf;
	}
	argv[i] = NULL;
	execvp(argv[0], argv);
	bu_tmsg("exec %s: %s", argv[0], strerror(errno));
	_exit(127);
}

/* Reads the target's report until "end" (a lingering wrapper may keep the pipe open) or EOF. */
static int read_results(struct run *r, struct row *row)
{
	static char buf[RESULT_MAX + 1];
	size_t len = 0;
	char *line, *save = NULL;
	long calls = 0;
	int reps = -1, got = 0;

	buf[0] = '\0'; /* static, and the previous row's text is still there */
	for (;;) {
		ssize_t n;

		if (len >= RESULT_MAX || strstr(buf, "end\n") != NULL)
			break;
		n = read(r->res[0], buf + len, RESULT_MAX - len);
		if (n < 0 && errno == EINTR) {
			if (g_timed_out)
				break;
			continue;
		}
		if (n < 0) {
			snprintf(r->why, sizeof(r->why), "reading results: %s", strerror(errno));
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
	}
	buf[len] = '\0';
	if (strstr(buf, "end\n") == NULL)
		return -1; /* the caller explains, from the exit status */

	for (line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		uint64_t ns, cpus = 0;

		if (sscanf(line, "floor 1 calls %ld reps %d", &calls, &reps) == 2)
			continue;
		/* "rep NS [CPUMASK]": the mask is optional for other producers of the format. */
		if (sscanf(line, "rep %" SCNu64 " %" SCNx64, &ns, &cpus) >= 1 && got < MAX_REPS &&
		    calls > 0) {
			row->us[got++] = (double)ns / 1e3 / (double)calls;
			row->target_cpus |= cpus;
			continue;
		}
		if (strcmp(line, "end") == 0)
			break;
		snprintf(r->why, sizeof(r->why), "unexpected result line \"%.60s\"", line);
		return -1;
	}
	if (calls <= 0 || reps != got || got == 0) {
		snprintf(r->why, sizeof(r->why), "incomplete results (%d of %d repetitions)", got,
			 reps);
		return -1;
	}
	row->calls = calls;
	row->nreps = got;
	row->super_cpus = r->super_cpus;
	return 0;
}

static void run_row(const struct mode *m, const struct opts *o, struct row *row)
{
	struct run r;
	int serve_rc = 0, read_rc;
	char st[96];

	memset(&r, 0, sizeof(r));
	r.m = m;
	r.o = o;
	r.res[0] = r.res[1] = r.sock[0] = r.sock[1] = -1;
	row->m = m;

	if (pipe2(r.res, O_CLOEXEC) < 0)
		bu_die("pipe2: %s", strerror(errno));
	if ((m->flags & M_NOTIFY) && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r.sock) < 0)
		bu_die("socketpair: %s", strerror(errno));

	if (o->verbose)
		fprintf(stderr, "floor: row %s\n", m->name);
	fflush(stdout);
	fflush(stderr);
	g_timed_out = 0;
	r.pid = fork();
	if (r.pid < 0)
		bu_die("fork: %s", strerror(errno));
	if (r.pid == 0) {
		if (m->flags & M_EXEC)
			exec_target(&r);
		child_main(&r);
	}
	if (m->flags & M_EXEC)
		(void)setpgid(r.pid, r.pid); /* also in the child: whichever runs first wins */
	g_victim_group = (m->flags & M_EXEC) != 0;
	g_victim = r.pid;
	alarm((unsigned)o->timeout);

	close(r.res[1]);
	r.res[1] = -1;
	if (r.sock[1] >= 0) {
		close(r.sock[1]);
		r.sock[1] = -1;
	}

	if (m->serve)
		serve_rc = m->serve(&r);
	if (serve_rc < 0)
		kill_victim(SIGKILL); /* a target nobody serves would only wait for the alarm */
	read_rc = r.unsupported ? 0 : read_results(&r, row);
	if (!r.reaped) {
		if (wait_target(r.pid, &r.status) < 0)
			bu_die("waitpid: %s", strerror(errno));
		r.reaped = true;
	}
	alarm(0);
	g_victim = 0;
	close(r.res[0]);
	if (r.sock[0] >= 0)
		close(r.sock[0]);

	bu_describe_status(r.status, st, sizeof(st));
	const char *who = (m->flags & M_EXEC) ? "command" : "target";

	if (r.unsupported) {
		row->status = ROW_UNSUPPORTED;
		snprintf(row->note, sizeof(row->note),
			 "unsupported: NOTIF_SET_FLAGS(SYNC_WAKE_UP) refused (needs 6.6+)");
		return;
	}
	row->status = ROW_FAILED;
	if (g_timed_out)
		snprintf(row->note, sizeof(row->note), "failed: timed out after %d s (--timeout)",
			 o->timeout);
	else if (serve_rc < 0)
		snprintf(row->note, sizeof(row->note), "failed: %s; %s %s", r.why, who, st);
	else if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
		snprintf(row->note, sizeof(row->note), "failed: %s %s%s%s", who, st,
			 read_rc < 0 && r.why[0] ? "; " : "", read_rc < 0 ? r.why : "");
	else if (read_rc < 0)
		snprintf(row->note, sizeof(row->note), "failed: %s",
			 r.why[0] ? r.why : "no results from the target");
	else if (m->serve && r.served < (unsigned long)row->calls * (unsigned long)row->nreps)
		/* The calls returned, but not through us: a filter above floor with a lower
		   (stronger) action, e.g. an outer USER_NOTIF beats our RET_TRACE. */
		snprintf(row->note, sizeof(row->note),
			 "failed: the supervisor served %lu of the %ld timed calls; something "
			 "else answered them (an outer seccomp filter?)",
			 r.served, row->calls * row->nreps);
	else
		row->status = ROW_OK;
	if (row->status != ROW_OK)
		return;

	double sorted[MAX_REPS];
	int n = row->nreps;

	memcpy(sorted, row->us, sizeof(double) * (size_t)n);
	qsort(sorted, (size_t)n, sizeof(double), bu_cmp_double);
	row->min = sorted[0];
	row->max = sorted[n - 1];
	row->med = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;

	size_t l = 0;

	if (r.sync_fallback)
		l += (size_t)snprintf(row->note + l, sizeof(row->note) - l,
				      "ran without SYNC_WAKE_UP (refused by the kernel); ");
	if (r.stale)
		l += (size_t)snprintf(row->note + l, sizeof(row->note) - l,
				      "%lu answers refused with ENOENT; ", r.stale);
	if (r.bad)
		l += (size_t)snprintf(row->note + l, sizeof(row->note) - l,
				      "%lu unexpected calls or reads; ", r.bad);
	if (l >= 2 && l < sizeof(row->note))
		row->note[l - 2] = '\0';
	if (o->verbose) {
		fprintf(stderr, "floor: row %s: K=%ld, served %lu, per-call us:", m->name,
			row->calls, r.served);
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %.3f", row->us[i]);
		fputc('\n', stderr);
	}
}

/* ---- command line ------------------------------------------------------------------------- */

/* The help text is laid out as it prints, so clang-format must leave it alone. */
/* clang-format off */
static void usage(FILE *f)
{
	fputs(
	"NAME\n"
	"    floor - the cost floor of serving semop(2) from a seccomp supervisor\n"
	"\n"
	"SYNOPSIS\n"
	"    floor [OPTIONS] [--run-under[=LABEL] CMD...]...\n"
	"\n"
	"DESCRIPTION\n"
	"    Measures, in one run and by one method, the cost of one semop on one\n"
	"    System V semaphore as the calling thread sees it, for each row:\n"
	"\n"
	"    native            the kernel's semop, no filter\n"
	"    notify            seccomp user notification; a supervisor process\n"
	"                      answers val=0 at once (NOTIF_RECV, NOTIF_SEND)\n"
	"    notify+sync       the same with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP\n"
	"                      (kernel 6.6+); \"unsupported\" if the kernel refuses it\n"
	"    notify+sync+read  + process_vm_readv of the caller's 6-byte sembuf:\n"
	"                      the read-inclusive floor, the denominator of the\n"
	"                      \"x floor\" column\n"
	"    notify+sync+read+idvalid\n"
	"                      + NOTIF_ID_VALID after the read, as a correct\n"
	"                      supervisor must also do\n"
	"    notify+sync+read+creds\n"
	"                      + PIDFD_GET_INFO on the caller's pidfd instead: its\n"
	"                      credentials on every call, as semvisor reads them\n"
	"    ptrace            SECCOMP_RET_TRACE; the tracer skips the call\n"
	"                      (orig_rax = -1, rax = 0: two PTRACE_POKEUSERs)\n"
	"    ptrace+read+creds + PTRACE_GET_SYSCALL_INFO, the sembuf read and\n"
	"                      PIDFD_GET_INFO first, as semvisor's tracer must\n"
	"    LABEL             one row per --run-under: the same target loop\n"
	"                      executed inside CMD... (e.g. semvisor-run)\n"
	"\n"
	"    The notify and ptrace filters trap semtimedop (which glibc's semop()\n"
	"    issues on x86_64) and semop, and allow every other system call and\n"
	"    architecture.\n"
	"\n"
	"METHOD\n"
	"    Each row starts a target process.  It creates a private set (in a\n"
	"    fresh IPC namespace when root, for the built-in rows), warms up for\n"
	"    --warm-time seconds while estimating its per-call cost, sizes K so\n"
	"    that one repetition of K calls (semop +1, semop -1, ...) lasts about\n"
	"    --rep-time seconds (or takes K from --calls), times --reps such\n"
	"    repetitions with CLOCK_MONOTONIC and reports them over a pipe.  A\n"
	"    row's figures are the median, min and max per-call time over its\n"
	"    repetitions.  The supervisor of a built-in row is this process.\n"
	"\n"
	"OPTIONS\n"
	"    --reps N         repetitions per row (default 7; --quick: 5)\n"
	"    --rep-time SEC   target length of one repetition (default 0.3;\n"
	"                     --quick: 0.15)\n"
	"    --warm-time SEC  warm-up and calibration per row (default 0.15;\n"
	"                     --quick: 0.1)\n"
	"    --calls K        exactly K calls per repetition, no calibration\n"
	"    --quick          the short settings above: built-in rows in 5-10 s\n"
	"    --only LIST      run only these built-in rows (comma-separated\n"
	"                     names); --run-under rows always run\n"
	"    --cpu-pin[=split|same]\n"
	"                     split (the default when given): pin the target to\n"
	"                     one CPU and the supervisor (this process, and the\n"
	"                     --run-under command) to another; needs 2 CPUs.\n"
	"                     same: both on one CPU.  Without it the scheduler\n"
	"                     places both, as in production.  Placement decides\n"
	"                     the cost of a wake-up: see the cpus column.\n"
	"    --out FILE       also write the machine-readable table (see OUTPUT)\n"
	"    --timeout SEC    kill a row's processes after SEC seconds (default:\n"
	"                     30 + ten times the row's expected length)\n"
	"    -v, --verbose    progress and every repetition's figure on stderr\n"
	"    -h, --help       this text\n"
	"    --run-under[=LABEL] CMD...\n"
	"                     add a row measured inside CMD...; floor runs\n"
	"                       CMD... /proc/self/exe --target-loop --result-fd N\n"
	"                     so CMD must run its arguments and pass fd N through\n"
	"                     (env, semvisor-run --, strace -f do).  Everything\n"
	"                     after --run-under up to the next --run-under is\n"
	"                     CMD, so it comes last.  LABEL defaults to \"under:\"\n"
	"                     and CMD's basename.\n"
	"\n"
	"    Internal, what --run-under executes:\n"
	"    --target-loop    run only the target loop, report on --result-fd\n"
	"    --result-fd N    the inherited pipe to report on\n"
	"    --pin-cpu C      pin the target loop to CPU C\n"
	"    The report: \"floor 1 calls K reps R\", R lines \"rep NS CPUMASK\"\n"
	"    (nanoseconds for K calls; optional hex mask of the CPUs seen at the\n"
	"    repetition's start and end), \"end\".  Then one semop(-1, NULL, 0)\n"
	"    tells a supervisor the run is over.\n"
	"\n"
	"OUTPUT\n"
	"    stdout: the conditions (kernel, CPUs, pinning, whether SYNC_WAKE_UP\n"
	"    was accepted), then per row: K, the median, min and max microseconds\n"
	"    per call, spread = (max - min) / median, median / floor median, and\n"
	"    the CPUs the target (at each repetition's edges) and a built-in\n"
	"    supervisor (every 256th answer) ran on.  Notes follow: failures,\n"
	"    fallbacks, answers refused with ENOENT.\n"
	"    --out FILE: the header \"# name median_us min_us max_us ratio\", one\n"
	"    tab-separated line per row (NA where the row was unsupported or\n"
	"    failed or no floor was measured), and a last '#' line with the\n"
	"    conditions.\n"
	"\n"
	"EXIT STATUS\n"
	"    0  every row was measured or is unsupported by this kernel\n"
	"    1  a row failed (see its note)\n"
	"    2  usage or setup error\n"
	"\n"
	"EXAMPLES\n"
	"    floor                          all built-in rows, about 15 s\n"
	"    floor --quick --out /tmp/floor.tsv\n"
	"    floor --run-under env --       the native figure, through a wrapper\n"
	"    floor --run-under=semvisor-run build/semvisor-run --\n"
	, f);
}
/* clang-format on */

enum {
	OPT_REPS = 256,
	OPT_REP_TIME,
	OPT_WARM_TIME,
	OPT_CALLS,
	OPT_QUICK,
	OPT_ONLY,
	OPT_CPU_PIN,
	OPT_OUT,
	OPT_TIMEOUT,
	OPT_TARGET_LOOP,
	OPT_RESULT_FD,
	OPT_PIN_CPU,
};

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "reps", required_argument, NULL, OPT_REPS },
		{ "rep-time", required_argument, NULL, OPT_REP_TIME },
		{ "warm-time", required_argument, NULL, OPT_WARM_TIME },
		{ "calls", required_argument, NULL, OPT_CALLS },
		{ "quick", no_argument, NULL, OPT_QUICK },
		{ "only", required_argument, NULL, OPT_ONLY },
		{ "cpu-pin", optional_argument, NULL, OPT_CPU_PIN },
		{ "out", required_argument, NULL, OPT_OUT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "target-loop", no_argument, NULL, OPT_TARGET_LOOP },
		{ "result-fd", required_argument, NULL, OPT_RESULT_FD },
		{ "pin-cpu", required_argument, NULL, OPT_PIN_CPU },
		{ NULL, 0, NULL, 0 },
	};
	int reps = 0, c;
	double rep_time = 0, warm_time = 0;

	memset(o, 0, sizeof(*o));
	o->result_fd = -1;
	o->pin_cpu = -1;
	while ((c = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		switch (c) {
		case OPT_REPS:
			reps = (int)bu_parse_long("--reps", optarg, 1, MAX_REPS);
			break;
		case OPT_REP_TIME:
			rep_time = bu_parse_seconds("--rep-time", optarg);
			break;
		case OPT_WARM_TIME:
			warm_time = bu_parse_seconds("--warm-time", optarg);
			break;
		case OPT_CALLS:
			o->calls = bu_parse_long("--calls", optarg, 0, MAX_CALLS);
			break;
		case OPT_QUICK:
			o->quick = true;
			break;
		case OPT_ONLY:
			o->only = optarg;
			break;
		case OPT_CPU_PIN:
			if (optarg == NULL || strcmp(optarg, "split") == 0)
				o->cpu_pin = PIN_SPLIT;
			else if (strcmp(optarg, "same") == 0)
				o->cpu_pin = PIN_SAME;
			else
				bu_die("--cpu-pin: expected split or same, got \"%s\"", optarg);
			break;
		case OPT_OUT:
			o->out = optarg;
			break;
		case OPT_TIMEOUT:
			o->timeout = (int)bu_parse_long("--timeout", optarg, 1, 86400);
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case OPT_TARGET_LOOP:
			o->target_loop = true;
			break;
		case OPT_RESULT_FD:
			o->result_fd = (int)bu_parse_long("--result-fd", optarg, 0, INT_MAX);
			break;
		case OPT_PIN_CPU:
			o->pin_cpu = (int)bu_parse_long("--pin-cpu", optarg, 0, CPU_SETSIZE - 1);
			break;
		default:
			fputs("Try 'floor --help'.\n", stderr);
			exit(2);
		}
	}
	if (optind < argc)
		bu_die("unexpected argument \"%s\" (a wrapped command goes after --run-under)",
		       argv[optind]);
	o->reps = reps ? reps : o->quick ? 5 : 7;
	o->rep_time = rep_time > 0 ? rep_time : o->quick ? 0.15 : 0.3;
	o->warm_time = warm_time > 0 ? warm_time : o->quick ? 0.1 : 0.15;
	if (o->timeout == 0)
		o->timeout = 30 + (int)(10 * (o->warm_time + o->reps * o->rep_time));
}

static bool selected(const char *only, const char *name)
{
	const char *p = only;
	size_t n = strlen(name);

	if (only == NULL)
		return true;
	while (*p) {
		size_t len = strcspn(p, ",");

		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p += len;
		if (*p == ',')
			p++;
	}
	return false;
}

static void check_only(const char *only)
{
	const char *p = only;

	while (only && *p) {
		size_t len = strcspn(p, ",");
		bool ok = false;

		for (size_t i = 0; i < N_BUILTIN; i++)
			ok |= strlen(builtin_modes[i].name) == len &&
			      strncmp(builtin_modes[i].name, p, len) == 0;
		if (!ok)
			bu_die("--only: no row named \"%.*s\" (see --help)", (int)len, p);
		p += len;
		if (*p == ',')
			p++;
	}
}

/* SIGTERM/SIGINT/SIGHUP in a --run-under target: do not leave the set behind. */
static void on_target_term(int sig)
{
	if (g_semid >= 0)
		(void)semctl(g_semid, 0, IPC_RMID);
	_exit(128 + sig);
}

/* The process a --run-under command executes. */
static int target_main(const struct opts *o)
{
	struct loop_cfg cfg = loop_cfg_of(o);
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_target_term;
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0 ||
	    sigaction(SIGHUP, &sa, NULL) < 0)
		bu_die("sigaction: %s", strerror(errno));

	if (o->result_fd < 0 || fcntl(o->result_fd, F_GETFD) < 0)
		bu_die(
		    "--target-loop: --result-fd %d is not an open fd (did the wrapper close it?)",
		    o->result_fd);
	/* Do not leak the report pipe into anything the target might start. */
	if (fcntl(o->result_fd, F_SETFD, FD_CLOEXEC) < 0)
		bu_die("fcntl: %s", strerror(errno));
	if (o->pin_cpu >= 0 && pin_to(o->pin_cpu) < 0)
		bu_die("sched_setaffinity(CPU %d): %s", o->pin_cpu, strerror(errno));
	alarm((unsigned)o->timeout + 5); /* SIGALRM's default action: never outlive the row */
	return target_loop(&cfg, o->result_fd) < 0 ? 1 : 0;
}

/* ---- output -------------------------------------------------------------------------------- */

static const char *status_word(const struct row *r)
{
	switch (r->status) {
	case ROW_UNSUPPORTED:
		return "unsupported";
	case ROW_FAILED:
		return "FAILED";
	default:
		return "-";
	}
}

/* Seccomp_filters from /proc/self/status: filters floor itself runs under (inherited). */
static long own_filters(void)
{
	char line[256];
	long n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "Seccomp_filters: %ld", &n) == 1)
			break;
	}
	fclose(f);
	return n;
}

static void print_table(const struct row *rows, size_t n, const struct row *floor_row,
			const struct opts *o, const char *kernel, const char *pinning)
{
	printf("floor: one semop on one SysV semaphore, per-call time as the calling thread sees "
	       "it\n");
	printf("  kernel %s, %ld CPUs online, CPU pinning: %s\n", kernel,
	       sysconf(_SC_NPROCESSORS_ONLN), pinning);
	if (o->calls)
		printf("  per row: %.2f s warm-up, then %d repetitions of %ld calls%s\n",
		       o->warm_time, o->reps, o->calls, o->quick ? " (--quick)" : "");
	else
		printf(
		    "  per row: %.2f s warm-up sizing K, then %d repetitions of K calls (~%.2f s "
		    "each)%s\n",
		    o->warm_time, o->reps, o->rep_time, o->quick ? " (--quick)" : "");
	if (own_filters() > 0)
		printf(
		    "  WARNING: floor itself runs under %ld seccomp filter(s): every row, native\n"
		    "  included, pays for them, and a listener above it defeats the notify rows\n",
		    own_filters());
	printf("  SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: %s\n",
	       g_sync == 1   ? "supported"
	       : g_sync == 0 ? "unsupported (NOTIF_SET_FLAGS refused)"
			     : "not tried");
	printf("\n%-26s %10s %10s %10s %10s %8s %9s  %s\n", "row", "calls/rep", "median us",
	       "min us", "max us", "spread", "x floor", "cpus t/s");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		char tc[40], sc[40], ratio[16];

		if (r->status == ROW_SKIPPED)
			continue;
		if (r->status != ROW_OK) {
			printf("%-26s %10s %10s %10s %10s %8s %9s\n", r->m->name, "-",
			       status_word(r), "-", "-", "-", "-");
			continue;
		}
		format_cpus(r->target_cpus, tc, sizeof(tc));
		if (r->m->serve)
			format_cpus(r->super_cpus, sc, sizeof(sc));
		else
			snprintf(sc, sizeof(sc), "%s", (r->m->flags & M_EXEC) ? "?" : "-");
		if (floor_row)
			snprintf(ratio, sizeof(ratio), "%.2fx", r->med / floor_row->med);
		else
			snprintf(ratio, sizeof(ratio), "NA");
		printf("%-26s %10ld %10.3f %10.3f %10.3f %7.1f%% %9s  %s/%s%s\n", r->m->name,
		       r->calls, r->med, r->min, r->max, 100 * (r->max - r->min) / r->med, ratio,
		       tc, sc, r == floor_row ? "  <- floor" : "");
	}
	for (size_t i = 0; i < n; i++) {
		if (rows[i].status != ROW_SKIPPED && rows[i].note[0])
			printf("  note: %s: %s\n", rows[i].m->name, rows[i].note);
	}
	if (floor_row == NULL)
		printf("  note: the floor row (notify+sync+read) was not measured: no ratios\n");
	printf("  spread = (max - min) / median over the repetitions\n"
	       "  cpus t/s = CPUs the target was on at the repetitions' edges / CPUs the\n"
	       "  supervisor answered on (every 256th answer)\n");
}

static int write_out(const char *path, const struct row *rows, size_t n,
		     const struct row *floor_row, const struct opts *o, const char *kernel,
		     const char *pinning)
{
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		fprintf(stderr, "floor: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "# name\tmedian_us\tmin_us\tmax_us\tratio\n");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		if (r->status == ROW_SKIPPED)
			continue;
		if (r->status != ROW_OK) {
			fprintf(f, "%s\tNA\tNA\tNA\tNA\n", r->m->name);
			continue;
		}
		fprintf(f, "%s\t%.4f\t%.4f\t%.4f\t", r->m->name, r->med, r->min, r->max);
		if (floor_row)
			fprintf(f, "%.4f\n", r->med / floor_row->med);
		else
			fprintf(f, "NA\n");
	}
	fprintf(f,
		"# kernel=%s cpus=%ld reps=%d rep_time=%g calls=%ld pin=\"%s\" sync_wake_up=%s\n",
		kernel, sysconf(_SC_NPROCESSORS_ONLN), o->reps, o->rep_time, o->calls, pinning,
		g_sync == 1   ? "yes"
		: g_sync == 0 ? "no"
			      : "untried");
	if (ferror(f) | (fclose(f) != 0)) {
		fprintf(stderr, "floor: writing %s failed\n", path);
		return -1;
	}
	return 0;
}

/* ---- main ---------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct mode *modes;
	struct row *rows;
	const struct row *floor_row = NULL;
	size_t nmodes = 0, nunder = 0;
	struct opts o;
	struct utsname u;
	struct sigaction sa;
	char pinning[64];
	int own_argc = argc, failed = 0;

	bu_prog = "floor"; /* for bu_die() and bu_tmsg(); floor handles its own signals */
	/* Everything from the first --run-under on belongs to the wrapped commands, so cut it off
	   before getopt (which would otherwise permute CMD's options into ours). */
	for (int i = 1; i < argc; i++) {
		if (bu_is_run_under(argv[i])) {
			own_argc = i;
			break;
		}
	}
	for (int i = own_argc; i < argc; i++)
		nunder += bu_is_run_under(argv[i]);
	parse_opts(own_argc, argv, &o);
	g_parent = getpid();

	if (o.target_loop)
		return target_main(&o);
	check_only(o.only);

	modes = calloc(N_BUILTIN + nunder, sizeof(*modes));
	rows = calloc(N_BUILTIN + nunder, sizeof(*rows));
	if (modes == NULL || rows == NULL)
		bu_die("out of memory");
	for (size_t i = 0; i < N_BUILTIN; i++) {
		if (selected(o.only, builtin_modes[i].name))
			modes[nmodes++] = builtin_modes[i];
	}
	/* --run-under[=LABEL] CMD... groups.  Labels are taken first; then each group's leading
	   --run-under token is overwritten with NULL, which terminates the previous group's CMD
	   (argv[argc] already terminates the last one). */
	for (int i = own_argc; i < argc; i++) {
		const char *eq;
		char *label;

		if (!bu_is_run_under(argv[i]))
			continue;
		if (i + 1 >= argc || bu_is_run_under(argv[i + 1]))
			bu_die("%s needs a command (e.g. --run-under env --)", argv[i]);
		eq = strchr(argv[i], '=');
		if (eq && eq[1]) {
			label = strdup(eq + 1);
		} else {
			const char *base = strrchr(argv[i + 1], '/');

			base = base ? base + 1 : argv[i + 1];
			if (asprintf(&label, "under:%s", base) < 0)
				label = NULL;
		}
		if (label == NULL)
			bu_die("out of memory");
		for (char *p = label; *p; p++) {
			if (*p == '\t' || *p == '\n')
				*p = ' ';
		}
		modes[nmodes].name = label;
		modes[nmodes].flags = M_EXEC;
		modes[nmodes].cmd = &argv[i + 1];
		nmodes++;
	}
	for (int i = own_argc; i < argc; i++) {
		if (bu_is_run_under(argv[i]))
			argv[i] = NULL;
	}

	if (uname(&u) < 0)
		bu_die("uname: %s", strerror(errno));
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &g_sizes) == 0)
		g_have_sizes = true;

	snprintf(pinning, sizeof(pinning), "off");
	if (o.cpu_pin != PIN_OFF) {
		cpu_set_t set;
		int found = 0;

		if (sched_getaffinity(0, sizeof(set), &set) < 0)
			bu_die("sched_getaffinity: %s", strerror(errno));
		for (int c = 0; c < CPU_SETSIZE && found < 2; c++) {
			if (!CPU_ISSET(c, &set))
				continue;
			if (found++ == 0)
				g_cpu_target = c;
			else
				g_cpu_super = c;
		}
		if (o.cpu_pin == PIN_SAME && found >= 1) {
			g_cpu_super = g_cpu_target;
			if (pin_to(g_cpu_super) < 0)
				bu_die("sched_setaffinity(CPU %d): %s", g_cpu_super,
				       strerror(errno));
			snprintf(pinning, sizeof(pinning), "same (target and supervisor on CPU %d)",
				 g_cpu_target);
		} else if (found < 2) {
			g_cpu_target = -1;
			snprintf(pinning, sizeof(pinning), "off (split requested, 1 CPU allowed)");
		} else {
			if (pin_to(g_cpu_super) < 0)
				bu_die("sched_setaffinity(CPU %d): %s", g_cpu_super,
				       strerror(errno));
			snprintf(pinning, sizeof(pinning),
				 "split (target CPU %d, supervisor CPU %d)", g_cpu_target,
				 g_cpu_super);
		}
	}

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_alarm; /* no SA_RESTART: blocked calls must return on the deadline */
	if (sigaction(SIGALRM, &sa, NULL) < 0)
		bu_die("sigaction: %s", strerror(errno));
	sa.sa_handler = on_fatal;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
	    sigaction(SIGHUP, &sa, NULL) < 0)
		bu_die("sigaction: %s", strerror(errno));

	for (size_t i = 0; i < nmodes; i++) {
		run_row(&modes[i], &o, &rows[i]);
		if (rows[i].status == ROW_FAILED)
			failed = 1;
		if (rows[i].status == ROW_OK && (modes[i].flags & M_FLOOR))
			floor_row = &rows[i];
	}

	print_table(rows, nmodes, floor_row, &o, u.release, pinning);
	if (o.out && write_out(o.out, rows, nmodes, floor_row, &o, u.release, pinning) < 0)
		failed = 1;
	for (size_t i = 0; i < nmodes; i++) {
		if (modes[i].flags & M_EXEC)
			free((char *)modes[i].name); /* strdup/asprintf above */
	}
	free(modes);
	free(rows);
	return failed;
}
