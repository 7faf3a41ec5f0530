/* SPDX-License-Identifier: MIT */
/*
 * The engine against the kernel: the same random sequence of semget/semop/semtimedop/semctl
 * calls goes to the real kernel (raw system calls, in a private IPC namespace) and to the engine,
 * and every return value, errno and output buffer must be equal.
 *
 * The sequences cover: keys and IPC_PRIVATE, IPC_CREAT/IPC_EXCL, nsems rules, ids across removal
 * (so the cyclic index allocation and sequence numbers must match), every semctl command with good
 * and bad arguments, EFAULT on NULL buffers, IPC_NOWAIT and zero timeouts, bad timeouts, SEM_UNDO
 * with semadj limits, exit of child processes applying their undo lists, permissions under four
 * identities (owner, group, other; CAP_IPC_OWNER is dropped so modes matter), IPC_SET changing
 * owners, small limits (ENOSPC, E2BIG) and sem_next_id.
 *
 * Operations never wait (the kernel side would hang): every sop has IPC_NOWAIT or the call has a
 * zero timeout. Waiting is covered by the other engine tests.
 *
 * The same sequences run in the i386 forms too: the kernel's side through int $0x80 (ipc(2), or
 * the direct semget, semctl and semtimedop_time64), the engine's through sv_semctl_compat() and
 * sv_semtimedop_compat(), with the 32-bit structures on both sides.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <grp.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/mman.h>

#include "tests/lib/fixture.h"
#include "tests/prog/i386.h"

#define MAX_IDS	 64
#define MAX_NSEM 8

static int undo_ops_done; /* child SEM_UNDO operations that succeeded: coverage */

/* Which system calls both sides get: x86_64's, or i386's through ipc(2) or directly. */
static enum abi {
	ABI_X86_64,
	ABI_I386_IPC,
	ABI_I386
} abi;
/*
 * int $0x80 takes 32-bit pointers, and so does the engine's i386 semctl: both sides copy their
 * semctl buffers here and back, and the kernel's side its sops and timeout.
 */
static unsigned char *low;
#define LOW_BUF	 0
#define LOW_SOPS 256
#define LOW_TS	 512
#define LOW_ARG	 576
#define LOW_EBUF 640

struct ids {
	struct identity {
		uint32_t uid, gid;
	} who;
	int pool[MAX_IDS];
	int npool;
	struct sv_limits lim;
	uint64_t rng;
	int step;
	unsigned int seed;
};

static uint64_t next_rand(struct ids *s)
{
	/* xorshift64*: reproducible from the seed printed on failure */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 2685821657736338717ull;
}

static int rnd(struct ids *s, int n)
{
	return (int)(next_rand(s) % (uint64_t)n);
}

static long k_ret(long r)
{
	return r < 0 ? -errno : r;
}

/* ipc(2) takes a sixth argument, in ebp, which the compiler will not let an asm operand be. */
static long i386_syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r12 __asm__("r12") = f;
	long ret;

	__asm__ volatile("sub $128, %%rsp\n\tpush %%rbp\n\tmov %%r12, %%rbp\n\t"
			 "int $0x80\n\tpop %%rbp\n\tadd $128, %%rsp"
			 : "=a"(ret)
			 : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e), "r"(r12)
			 : "memory", "r8", "r9", "r10", "r11", "cc");
	return ret; /* -errno on failure, as the engine answers */
}

static long low_addr(const void *p, size_t off, size_t len)
{
	if (!p)
		return 0;
	memcpy(low + off, p, len);
	return (long)(uintptr_t)(low + off);
}

static long k_semget(int key, int nsems, int flg)
{
	if (abi == ABI_I386_IPC)
		return i386_syscall6(I386_IPC, IPCCALL_SEMGET, key, nsems, flg, 0, 0);
	if (abi == ABI_I386)
		return i386_syscall6(I386_SEMGET, key, nsems, flg, 0, 0, 0);
	return k_ret(syscall(SYS_semget, key, nsems, flg));
}

/* ts: the timeout in the form's own layout (old_timespec32 for ipc(2)). */
static long k_semtimedop(int id, void *sops, unsigned int n, void *ts)
{
	long ls, lt;

	if (abi == ABI_X86_64)
		return k_ret(syscall(SYS_semtimedop, id, sops, n, ts));
	ls = low_addr(sops, LOW_SOPS, (n < 8 ? n : 8) * sizeof(struct sv_sembuf));
	/* old_timespec32 for ipc(2), __kernel_timespec for semtimedop_time64 */
	lt = low_addr(ts, LOW_TS, abi == ABI_I386_IPC ? 8 : 16);
	if (abi == ABI_I386_IPC)
		return i386_syscall6(I386_IPC, ts ? IPCCALL_SEMTIMEDOP : IPCCALL_SEMOP, id, (long)n,
				     0, ls, lt);
	return i386_syscall6(I386_SEMTIMEDOP_TIME64, id, ls, (long)n, lt, 0, 0);
}

/*
 * A buffer argument is copied to low memory and back; its size is what the command may use:
 * GETALL and SETALL's arrays are at most MAX_NSEM values (compare_all's arrays are no
 * bigger), the rest get do_semctl()'s 128 bytes.
 */
static size_t semctl_buf_len(int cmd, uint64_t arg)
{
	int base = cmd & ~SV_IPC_64;

	if (!arg || base == SV_SETVAL || base == SV_GETVAL || base == SV_GETPID ||
	    base == SV_GETNCNT || base == SV_GETZCNT || base == SV_IPC_RMID)
		return 0;
	return base == SV_GETALL || base == SV_SETALL ? MAX_NSEM * 2 : 128;
}

static long k_semctl(int id, int num, int cmd, uint64_t arg)
{
	size_t len = semctl_buf_len(cmd, arg);
	uint32_t a32;
	long r;

	if (abi == ABI_X86_64)
		return k_ret(syscall(SYS_semctl, id, num, cmd, arg));
	a32 = len ? (uint32_t)low_addr((void *)(uintptr_t)arg, LOW_BUF, len) : (uint32_t)arg;
	if (abi == ABI_I386_IPC) {
		/* ipc(2) SEMCTL reads the union semun from its pointer */
		memcpy(low + LOW_ARG, &a32, 4);
		r = i386_syscall6(I386_IPC, IPCCALL_SEMCTL, id, num, cmd,
				  (long)(uintptr_t)(low + LOW_ARG), 0);
	} else {
		r = i386_syscall6(I386_SEMCTL, id, num, cmd, a32, 0, 0);
	}
	if (len)
		memcpy((void *)(uintptr_t)arg, low + LOW_BUF, len);
	return r;
}

/* The engine's side of the same forms. */
static long e_semtimedop(struct fx_caller *fc, int id, void *sops, unsigned int n, void *ts,
			 struct sv_park *park, struct sv_wakeq *wq)
{
	if (abi == ABI_X86_64)
		return sv_semtimedop(&fc->c, id, (uint64_t)(uintptr_t)sops, n,
				     (uint64_t)(uintptr_t)ts, park, wq);
	return sv_semtimedop_compat(&fc->c, id, (uint64_t)(uintptr_t)sops, n,
				    (uint64_t)(uintptr_t)ts, abi == ABI_I386_IPC, park, wq);
}

static long e_semctl(struct fx_caller *fc, int id, int num, int cmd, uint64_t arg)
{
	size_t len = semctl_buf_len(cmd, arg);
	struct sv_wakeq wq;
	uint32_t a32;
	long r;

	if (abi == ABI_X86_64)
		return fx_semctl(fc, id, num, cmd, arg, NULL);
	a32 = len ? (uint32_t)low_addr((void *)(uintptr_t)arg, LOW_EBUF, len) : (uint32_t)arg;
	sv_wakeq_init(&wq);
	r = sv_semctl_compat(&fc->c, id, num, cmd, a32, abi == ABI_I386_IPC, &wq);
	fx_drain(&wq, NULL, NULL, 0);
	if (len)
		memcpy((void *)(uintptr_t)arg, low + LOW_EBUF, len);
	return r;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);

	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	cr_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write %s", path);
	close(fd);
}

/* Drop CAP_IPC_OWNER from every set we hold, so the kernel checks modes even for root. */
static void drop_ipc_owner(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	cr_assert(syscall(SYS_capget, &hdr, data) == 0);
	data[0].effective &= ~(1u << CAP_IPC_OWNER);
	data[0].permitted &= ~(1u << CAP_IPC_OWNER);
	data[0].inheritable &= ~(1u << CAP_IPC_OWNER);
	cr_assert(syscall(SYS_capset, &hdr, data) == 0, "capset: %s", strerror(errno));
}

/* Become who (effective ids; fsuid/fsgid follow) in the kernel; the engine caller follows too. */
static void become(struct ids *s, struct fx_caller *fc, uint32_t uid, uint32_t gid)
{
	cr_assert(setresuid(-1, 0, -1) == 0);
	cr_assert(setresgid(-1, gid, -1) == 0);
	cr_assert(setresuid(-1, uid, -1) == 0);
	s->who.uid = uid;
	s->who.gid = gid;
	fc->cred.euid = uid;
	fc->cred.egid = gid;
	fc->cred.fsgid = gid;
	fc->cred.cap_ipc_owner = false;
	/* A non-zero euid loses every effective capability, CAP_SYS_ADMIN included. */
	fc->cred.cap_sys_admin = uid == 0;
}

#define CHECK(what, kr, er)                                                                        \
	cr_assert_eq((kr), (er), "seed %u step %d: %s: kernel %ld engine %ld", s->seed, s->step,   \
		     (what), (long)(kr), (long)(er))

static int pick_id(struct ids *s)
{
	switch (rnd(s, 12)) {
	case 0:
		return -1 - rnd(s, 3);
	case 1:
		return rnd(s, 70); /* maybe an index without its sequence */
	case 2:
		return 32768 * (1 + rnd(s, 3)) + rnd(s, 4);
	default:
		return s->npool ? s->pool[rnd(s, s->npool)] : rnd(s, 4);
	}
}

static void remember(struct ids *s, int id)
{
	for (int i = 0; i < s->npool; i++)
		if (s->pool[i] == id)
			return;
	if (s->npool < MAX_IDS)
		s->pool[s->npool++] = id;
	else
		s->pool[rnd(s, MAX_IDS)] = id;
}

static void do_semget(struct ids *s, struct fx_caller *fc)
{
	static const int modes[] = { 0600, 0660, 0666, 0644, 0400, 0200, 0, 0606, 0060, 0006 };
	static const int flagsets[] = { 0, SV_IPC_CREAT, SV_IPC_CREAT | SV_IPC_EXCL, SV_IPC_EXCL };
	int key = rnd(s, 4) ? 1 + rnd(s, 6) : SV_IPC_PRIVATE;
	int nsems = rnd(s, 10) ? rnd(s, MAX_NSEM) : (rnd(s, 2) ? -1 : s->lim.semmsl + 1);
	int flg = flagsets[rnd(s, 4)] | modes[rnd(s, 10)];
	long kr = k_semget(key, nsems, flg);
	long er = sv_semget(&fc->c, key, nsems, flg);

	CHECK("semget", kr, er);
	if (kr >= 0)
		remember(s, (int)kr);
}

/* The set's size as the kernel knows it (arguments only; results are never taken from here). */
static int k_nsems(int id)
{
	unsigned char ds[104];
	uint64_t n;

	if (id < 0 || syscall(SYS_semctl, id, 0, SV_IPC_STAT, ds) < 0)
		return MAX_NSEM;
	memcpy(&n, ds + 80, 8);
	return (int)n;
}

static void rand_sops(struct ids *s, int id, struct sv_sembuf *sops, unsigned int n, bool nowait)
{
	int nsems = k_nsems(id);

	for (unsigned int i = 0; i < n; i++) {
		int r = rnd(s, 40);

		sops[i].sem_num =
		    (uint16_t)(r ? rnd(s, nsems) : (r & 1 ? nsems : 1000 + rnd(s, 3)));
		r = rnd(s, 30);
		sops[i].sem_op = (int16_t)(r < 28 ? rnd(s, 6) - 2 : (r == 28 ? 32767 : -32767));
		sops[i].sem_flg =
		    (int16_t)((nowait ? SV_IPC_NOWAIT : 0) | (rnd(s, 3) == 0 ? SV_SEM_UNDO : 0) |
			      (rnd(s, 10) == 0 ? 0x0200 : 0));
	}
}

static void do_semop(struct ids *s, struct fx_caller *fc)
{
	struct sv_sembuf sops[8];
	struct timespec ts = { 0, 0 };
	int32_t ts32[2];
	struct sv_park park = { 0 };
	struct sv_wakeq wq;
	int id = pick_id(s);
	unsigned int n = 1 + (unsigned int)rnd(s, 4);
	int how = rnd(s, 20);
	bool timed = how < 6;
	void *sop_ptr = sops;
	void *ts_ptr = timed ? &ts : NULL;

	if (how == 6)
		n = 0;
	else if (how == 7)
		n = (unsigned int)s->lim.semopm + 1;
	if (n > 8)
		n = 8 > (unsigned int)s->lim.semopm ? (unsigned int)s->lim.semopm + 1 : 8;
	rand_sops(s, id, sops, n > 8 ? 8 : n, !timed);
	if (how == 8)
		sop_ptr = NULL;
	if (how == 9 && timed)
		ts.tv_nsec = 1000000000;
	if (how == 10) {
		ts_ptr = &ts;
		ts.tv_sec = -1;
	}
	/* 2^32 ns: too long natively, 0 where only tv_nsec's low half counts (i386) */
	if (how == 11 && timed)
		ts.tv_nsec = 1L << 32;
	if (abi == ABI_I386_IPC && ts_ptr) {
		ts32[0] = (int32_t)ts.tv_sec;
		ts32[1] = (int32_t)ts.tv_nsec;
		ts_ptr = ts32;
	}

	long kr = k_semtimedop(id, sop_ptr, n, ts_ptr);
	sv_wakeq_init(&wq);
	long er = e_semtimedop(fc, id, sop_ptr, n, ts_ptr, &park, &wq);
	cr_assert(sv_wakeq_empty(&wq), "nobody waits, yet something completed");
	cr_assert_neq(er, SV_PARKED, "seed %u step %d: parked a call that may not wait", s->seed,
		      s->step);
	CHECK("semtimedop", kr, er);
}

static void compare_all(struct ids *s, struct fx_caller *fc, int id)
{
	uint16_t kv[MAX_NSEM] = { 0 }, ev[MAX_NSEM] = { 0 };
	long kr = k_semctl(id, 0, SV_GETALL, (uint64_t)(uintptr_t)kv);
	long er = e_semctl(fc, id, 0, SV_GETALL, (uint64_t)(uintptr_t)ev);

	CHECK("GETALL", kr, er);
	if (kr == 0)
		cr_assert_arr_eq(kv, ev, sizeof(kv), "seed %u step %d: GETALL values differ",
				 s->seed, s->step);
	for (int i = 0; i < MAX_NSEM; i++) {
		static const int cmds[] = { SV_GETVAL, SV_GETPID, SV_GETNCNT, SV_GETZCNT };

		for (int j = 0; j < 4; j++) {
			kr = k_semctl(id, i, cmds[j], 0);
			er = e_semctl(fc, id, i, cmds[j], 0);
			CHECK("GET*", kr, er);
		}
	}
}

/* Where a semid_ds layout keeps its times, and how big it is. */
struct ds_layout {
	size_t size, otime, ctime, tsize; /* times of tsize bytes (i386's: low words) */
};
static const struct ds_layout ds_x86_64 = { 104, 48, 64, 8 };
static const struct ds_layout ds_i386_64 = { 64, 36, 44, 4 };
static const struct ds_layout ds_i386_old = { 44, 16, 20, 4 };

/* semid_ds: everything but the times must match; the times may straddle a second. */
static void compare_ds(struct ids *s, const unsigned char *k, const unsigned char *e,
		       const struct ds_layout *l)
{
	for (size_t off = 0; off < l->size; off++) {
		bool in_time = (off >= l->otime && off < l->otime + l->tsize) ||
			       (off >= l->ctime && off < l->ctime + l->tsize);

		cr_assert(in_time || k[off] == e[off],
			  "seed %u step %d: byte %zu of semid_ds differs: kernel %#x engine %#x",
			  s->seed, s->step, off, k[off], e[off]);
	}
	for (int i = 0; i < 2; i++) {
		size_t off = i ? l->ctime : l->otime;
		int64_t kt = 0, et = 0;

		memcpy(&kt, k + off, l->tsize);
		memcpy(&et, e + off, l->tsize);
		cr_assert((kt == 0) == (et == 0) && llabs(kt - et) <= 1,
			  "seed %u step %d: time at %zu: kernel %lld engine %lld", s->seed, s->step,
			  off, (long long)kt, (long long)et);
	}
}

static void do_semctl(struct ids *s, struct fx_caller *fc)
{
	static const int cmds[] = { SV_IPC_STAT, SV_SEM_STAT, SV_SEM_STAT_ANY,	   SV_IPC_INFO,
				    SV_SEM_INFO, SV_GETVAL,   SV_GETPID,	   SV_GETNCNT,
				    SV_GETZCNT,	 SV_GETALL,   SV_SETVAL,	   SV_SETALL,
				    SV_IPC_SET,	 SV_IPC_RMID, SV_IPC_STAT | 0x100, 99 };
	static const int vals[] = { -1, 0, 1, 2, 5, 32767, 32768, 3 };
	static const uint32_t owners[] = { 0, 1000, 1002, (uint32_t)-1 };
	unsigned char kbuf[128], ebuf[128];
	int cmd = cmds[rnd(s, 16)];
	int id = pick_id(s);
	int semnum = rnd(s, 10) ? rnd(s, MAX_NSEM) : -1;
	bool null_buf = rnd(s, 15) == 0;
	uint64_t karg = (uint64_t)(uintptr_t)kbuf, earg = (uint64_t)(uintptr_t)ebuf;
	bool old_layout;
	long kr, er;

	if (cmd == SV_IPC_RMID && rnd(s, 3))
		cmd = SV_GETVAL; /* keep sets around long enough to matter */
	/* i386: ipc(2)'s layout flag, or the direct call's quirks with it */
	if (abi != ABI_X86_64 && rnd(s, 2))
		cmd |= SV_IPC_64;
	old_layout = abi == ABI_I386_IPC && !(cmd & SV_IPC_64);
	if ((cmd & ~SV_IPC_64) == SV_SEM_STAT || (cmd & ~SV_IPC_64) == SV_SEM_STAT_ANY)
		id = rnd(s, 3) ? (s->npool ? s->pool[rnd(s, s->npool)] % 32768 : 0) : rnd(s, 70);
	memset(kbuf, 0xa5, sizeof(kbuf));
	memset(ebuf, 0xa5, sizeof(ebuf));
	if ((cmd & ~SV_IPC_64) == SV_SETVAL) {
		karg = earg =
		    (uint64_t)(uint32_t)vals[rnd(s, 8)] | (rnd(s, 4) ? 0 : 0xdead00000000ull);
	} else if ((cmd & ~SV_IPC_64) == SV_SETALL) {
		uint16_t v[MAX_NSEM];

		for (int i = 0; i < MAX_NSEM; i++)
			v[i] = (uint16_t)(rnd(s, 30) ? rnd(s, 4) : 40000);
		memcpy(kbuf, v, sizeof(v));
		memcpy(ebuf, v, sizeof(v));
	} else if ((cmd & ~SV_IPC_64) == SV_IPC_SET) {
		uint32_t uid = owners[rnd(s, 4)], gid = owners[rnd(s, 4)];
		uint32_t mode = (uint32_t)rnd(s, 01000) | (rnd(s, 4) ? 0 : 07000);

		memset(kbuf, 0, sizeof(kbuf));
		if (old_layout) { /* 16-bit uid, gid and mode */
			memcpy(kbuf + 4, &uid, 2);
			memcpy(kbuf + 6, &gid, 2);
			memcpy(kbuf + 12, &mode, 2);
		} else {
			memcpy(kbuf + 4, &uid, 4);
			memcpy(kbuf + 8, &gid, 4);
			memcpy(kbuf + 20, &mode, 4);
		}
		memcpy(ebuf, kbuf, sizeof(kbuf));
	}
	if (null_buf && (cmd & ~SV_IPC_64) != SV_SETVAL)
		karg = earg = 0;

	kr = k_semctl(id, semnum, cmd, karg);
	er = e_semctl(fc, id, semnum, cmd, earg);
	CHECK("semctl", kr, er);
	if (kr < 0 || !karg)
		return;
	switch (cmd & ~SV_IPC_64) {
	case SV_IPC_STAT:
	case SV_SEM_STAT:
	case SV_SEM_STAT_ANY:
		compare_ds(s, kbuf, ebuf,
			   abi == ABI_X86_64 ? &ds_x86_64
			   : old_layout	     ? &ds_i386_old
					     : &ds_i386_64);
		break;
	case SV_IPC_INFO:
	case SV_SEM_INFO:
	case SV_GETALL:
		cr_assert(memcmp(kbuf, ebuf, sizeof(kbuf)) == 0,
			  "seed %u step %d: semctl %d output differs", s->seed, s->step, cmd);
		break;
	}
}

/* SETVAL or a decrement on a semaphore of a known set: what makes exit clamp or find semadj 0 */
static void lower_or_set(struct ids *s, struct fx_caller *fc)
{
	int id = s->npool ? s->pool[rnd(s, s->npool)] : 0;
	int num = rnd(s, k_nsems(id));
	long kr, er;

	if (rnd(s, 2)) {
		int val = rnd(s, 3);

		kr = k_semctl(id, num, SV_SETVAL, (uint64_t)val);
		er = fx_semctl(fc, id, num, SV_SETVAL, (uint64_t)val, NULL);
		CHECK("SETVAL", kr, er);
	} else {
		struct sv_sembuf sop = { (uint16_t)num, (int16_t) - (1 + rnd(s, 2)),
					 SV_IPC_NOWAIT };

		kr = k_semtimedop(id, &sop, 1, NULL);
		er = fx_semop(fc, id, NULL, NULL, 1, &sop);
		CHECK("decrement", kr, er);
	}
}

/*
 * A child does SEM_UNDO operations, then waits while the parent does its own random calls (so
 * exit finds values that moved, and must clamp), then exits. The engine mirrors the child with a
 * process of the child's pid, which it exits at the same point.
 */
static void child_episode(struct ids *s, struct fx_caller *fc)
{
	uint64_t seed = next_rand(s);
	int nops = 1 + rnd(s, 6);
	long kres[8];
	int up[2], down[2];
	pid_t pid;
	int status;
	char go;

	cr_assert(pipe(up) == 0 && pipe(down) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct ids cs = *s;

		cs.rng = seed;
		for (int i = 0; i < nops; i++) {
			struct sv_sembuf sop[2];
			unsigned int n = 1 + (unsigned int)rnd(&cs, 2);
			int id = cs.npool ? cs.pool[rnd(&cs, cs.npool)] : 0;

			rand_sops(&cs, id, sop, n, true);
			for (unsigned int j = 0; j < n; j++)
				sop[j].sem_flg |= SV_SEM_UNDO;
			kres[i] = k_semtimedop(id, sop, n, NULL);
		}
		if (write(up[1], kres, sizeof(kres)) != sizeof(kres))
			_exit(1);
		_exit(read(down[0], &go, 1) == 1 ? 0 : 1);
	}
	close(up[1]);
	close(down[0]);
	cr_assert(read(up[0], kres, sizeof(kres)) == sizeof(kres));
	close(up[0]);

	struct fx_caller *child = fx_caller_new(fx_ns, pid, s->who.uid, s->who.gid);
	struct ids cs = *s;

	child->cred = fc->cred;
	child->cred.groups = child->groups;
	cs.rng = seed;
	for (int i = 0; i < nops; i++) {
		struct sv_sembuf sop[2];
		unsigned int n = 1 + (unsigned int)rnd(&cs, 2);
		int id = cs.npool ? cs.pool[rnd(&cs, cs.npool)] : 0;

		rand_sops(&cs, id, sop, n, true);
		for (unsigned int j = 0; j < n; j++)
			sop[j].sem_flg |= SV_SEM_UNDO;
		long er = fx_semop(child, id, NULL, NULL, n, sop);

		CHECK("child semop", kres[i], er);
		if (er == 0)
			undo_ops_done++;
	}

	/* the parent moves values, sets them, removes sets, while the child still lives */
	for (int i = rnd(s, 8); i > 0; i--) {
		switch (rnd(s, 4)) {
		case 0:
			do_semop(s, fc);
			break;
		case 1:
			do_semctl(s, fc);
			break;
		default:
			lower_or_set(s, fc);
			break;
		}
	}

	go = 1;
	cr_assert(write(down[1], &go, 1) == 1);
	close(down[1]);
	cr_assert(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status));
	fx_caller_exit(child, NULL);
	for (int i = 0; i < s->npool; i++)
		compare_all(s, fc, s->pool[i]);
}

static void run_sequence(unsigned int seed, int steps, bool small_limits)
{
	struct ids st = { .seed = seed, .rng = 0x9e3779b97f4a7c15ull ^ seed };
	struct ids *s = &st;
	struct fx_caller *fc;

	cr_assert(unshare(CLONE_NEWIPC) == 0, "unshare(CLONE_NEWIPC): %s (run as root)",
		  strerror(errno));
	sv_limits_default(&s->lim);
	if (small_limits) {
		s->lim = (struct sv_limits){ .semmsl = 6, .semmns = 40, .semopm = 5, .semmni = 12 };
		write_file("/proc/sys/kernel/sem", "6 40 5 12");
		cr_assert_eq(sv_ns_set_limits(fx_ns, &s->lim), 0);
	}
	cr_assert(setgroups(0, NULL) == 0);
	drop_ipc_owner();
	fc = fx_caller_new(fx_ns, getpid(), 0, 0);
	become(s, fc, 0, 0);

	for (s->step = 0; s->step < steps; s->step++) {
		int what = rnd(s, 100);

		if (what < 14) {
			do_semget(s, fc);
		} else if (what < 55) {
			do_semop(s, fc);
		} else if (what < 88) {
			do_semctl(s, fc);
		} else if (what < 92) {
			static const struct identity who[] = {
				{ 0, 0 }, { 1000, 1000 }, { 1001, 1000 }, { 1002, 1002 }
			};
			int w = rnd(s, 4);

			become(s, fc, who[w].uid, who[w].gid);
		} else if (what < 96) {
			child_episode(s, fc);
		} else if (what < 97 && s->who.uid == 0) {
			char text[32];
			int next = rnd(s, 2) ? rnd(s, 40) : 32768 * rnd(s, 3) + rnd(s, 40);

			snprintf(text, sizeof(text), "%d", next);
			write_file("/proc/sys/kernel/sem_next_id", text);
			sv_ns_set_next_id(fx_ns, next);
		} else if (s->npool) {
			compare_all(s, fc, s->pool[rnd(s, s->npool)]);
		}
	}
	become(s, fc, 0, 0);
	fx_caller_exit(fc, NULL);
}

/* Each seed gets a fresh kernel IPC namespace and a fresh engine namespace. */
/* Each sequence in a fresh namespace, as the kernel's side is: also across calls in one test. */
static void run_seeds(unsigned int first, unsigned int last, int steps, bool small_limits)
{
	static bool ns_used; /* fx_ns has served a sequence */

	for (unsigned int seed = first; seed <= last; seed++) {
		struct sv_limits lim;

		if (ns_used) {
			sv_ns_put(fx_ns);
			sv_limits_default(&lim);
			fx_ns = sv_ns_new(&lim);
		}
		ns_used = true;
		run_sequence(seed, steps, small_limits);
	}
}

TestSuite(engine_kernel_diff, .init = fx_setup, .fini = fx_teardown, .timeout = 300);

Test(engine_kernel_diff, default_limits)
{
	run_seeds(1, 8, 3000, false);
	cr_expect_gt(undo_ops_done, 200, "only %d child SEM_UNDO operations succeeded",
		     undo_ops_done);
}

Test(engine_kernel_diff, small_limits)
{
	run_seeds(101, 108, 3000, true);
}

Test(engine_kernel_diff, long_sequence)
{
	run_seeds(1001, 1001, 40000, false);
}

static void low_memory(void)
{
	if (!i386_available())
		cr_skip_test("this kernel does not serve int $0x80 (no IA32 emulation, or a "
			     "hypervisor without a 32-bit mode): the kernel's side cannot run");
	low = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1,
		   0);
	cr_assert(low != MAP_FAILED, "mmap(MAP_32BIT): %s", strerror(errno));
}

/* ipc(2), each semctl in the old layout or semid64's */
Test(engine_kernel_diff, i386_ipc)
{
	low_memory();
	abi = ABI_I386_IPC;
	run_seeds(201, 206, 3000, false);
	run_seeds(211, 212, 3000, true);
}

/* semget, semctl and semtimedop_time64 through i386's own numbers */
Test(engine_kernel_diff, i386_direct)
{
	low_memory();
	abi = ABI_I386;
	run_seeds(301, 306, 3000, false);
	run_seeds(311, 312, 3000, true);
}
