/* SPDX-License-Identifier: MIT */
/*
 * semctl (SPEC A6): every command, its permission rule, its return value and its errors, the
 * x86_64 layouts of struct semid64_ds and struct seminfo (A7.4), and the caller's translations
 * of pids and ids (sv_caller_ops: pid_out, uid_out/gid_out, uid_in/gid_in).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "tests/lib/fixture.h"

/*
 * The engine stamps ctime and otime with time(NULL). So that a test can see a stamp change
 * without sleeping, time() in this program runs ahead of the real clock by skew seconds.
 */
static int64_t skew;

time_t time(time_t *t)
{
	struct timespec ts;
	time_t now;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	now = (time_t)(ts.tv_sec + skew);
	if (t)
		*t = now;
	return now;
}

/* A time stamp taken between lo and hi (time(NULL) before and after the call). */
#define ASSERT_TIME(v, lo, hi, what)                                                               \
	cr_assert((int64_t)(v) >= (int64_t)(lo) && (int64_t)(v) <= (int64_t)(hi),                  \
		  "%s %lld not in [%lld, %lld]", (what), (long long)(v), (long long)(lo),          \
		  (long long)(hi))

/* Move the clock on, and return the new "now". */
static time_t advance(int64_t sec)
{
	skew += sec;
	return time(NULL);
}

#define PTR(p) ((uint64_t)(uintptr_t)(p))

static struct fx_caller *root; /* pid 100, uid 0 */

static void setup(void)
{
	fx_setup();
	root = fx_caller_new(fx_ns, 100, 0, 0);
}

static void teardown(void)
{
	fx_caller_exit(root, NULL);
	fx_teardown();
}

TestSuite(engine_semctl, .init = setup, .fini = teardown, .timeout = 30);

/* A caller without capabilities. */
static struct fx_caller *user(int32_t pid, uint32_t uid, uint32_t gid)
{
	return fx_caller_new(fx_ns, pid, uid, gid);
}

static int mkset_as(struct fx_caller *fc, int nsems, int mode)
{
	long id = sv_semget(&fc->c, SV_IPC_PRIVATE, nsems, mode);

	cr_assert_geq(id, 0, "semget: %ld", id);
	return (int)id;
}

static long ctl(struct fx_caller *fc, int id, int num, int cmd, uint64_t arg)
{
	return fx_semctl(fc, id, num, cmd, arg, NULL);
}

/* An IPC_SET buffer: only uid, gid and mode are read by the kernel. */
static void set_buf(unsigned char *ds, uint32_t uid, uint32_t gid, uint32_t mode)
{
	memset(ds, 0x5a, 104); /* junk everywhere else: must be ignored */
	memcpy(ds + 4, &uid, 4);
	memcpy(ds + 8, &gid, 4);
	memcpy(ds + 20, &mode, 4);
}

static long ipc_set(struct fx_caller *fc, int id, uint32_t uid, uint32_t gid, uint32_t mode)
{
	unsigned char ds[104];

	set_buf(ds, uid, gid, mode);
	return ctl(fc, id, 0, SV_IPC_SET, PTR(ds));
}

static const int all_cmds[] = { SV_IPC_RMID, SV_IPC_SET,  SV_IPC_STAT, SV_IPC_INFO,    SV_GETPID,
				SV_GETVAL,   SV_GETALL,	  SV_GETNCNT,  SV_GETZCNT,     SV_SETVAL,
				SV_SETALL,   SV_SEM_STAT, SV_SEM_INFO, SV_SEM_STAT_ANY };

/* A6.1: semid < 0 is EINVAL for every command, IPC_INFO and SETVAL with a bad value included. */
Test(engine_semctl, negative_semid)
{
	unsigned char buf[256];
	int id = mkset_as(root, 2, 0600);

	for (size_t i = 0; i < sizeof(all_cmds) / sizeof(all_cmds[0]); i++) {
		memset(buf, 0, sizeof(buf));
		cr_assert_eq(ctl(root, -1, 0, all_cmds[i], PTR(buf)), -EINVAL, "cmd %d",
			     all_cmds[i]);
		cr_assert_eq(ctl(root, -32768, 0, all_cmds[i], PTR(buf)), -EINVAL, "cmd %d",
			     all_cmds[i]);
	}
	cr_assert_eq(ctl(root, -1, 0, SV_SETVAL, (uint64_t)-1), -EINVAL, "before ERANGE");
	cr_assert_eq(fx_getval(root, id, 0), 0);
}

/* A6.1: unknown commands, and IPC_64 is not stripped on x86_64. */
Test(engine_semctl, unknown_commands)
{
	static const int bad[] = { 4,
				   5,
				   6,
				   7,
				   8,
				   9,
				   10,
				   21,
				   99,
				   -1,
				   0x100 | SV_IPC_STAT,
				   0x100 | SV_SEM_STAT,
				   0x100 | SV_GETVAL,
				   0x100 | SV_IPC_RMID,
				   0x100 | SV_IPC_INFO,
				   0x100 | SV_SETVAL };
	unsigned char buf[256] = { 0 };
	int id = mkset_as(root, 2, 0600);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(ctl(root, id, 0, bad[i], PTR(buf)), -EINVAL, "cmd %#x", bad[i]);
	cr_assert_eq(fx_getval(root, id, 0), 0, "IPC_RMID|IPC_64 removed nothing");
}

/* Every command that takes a buffer: EFAULT for an unreadable/unwritable one. */
Test(engine_semctl, efault_on_null_buffers)
{
	int id = mkset_as(root, 2, 0600);

	cr_assert_eq(ctl(root, id, 0, SV_IPC_STAT, 0), -EFAULT);
	cr_assert_eq(ctl(root, id, 0, SV_IPC_SET, 0), -EFAULT);
	cr_assert_eq(ctl(root, id, 0, SV_GETALL, 0), -EFAULT);
	cr_assert_eq(ctl(root, id, 0, SV_SETALL, 0), -EFAULT);
	cr_assert_eq(ctl(root, id, 0, SV_IPC_INFO, 0), -EFAULT);
	cr_assert_eq(ctl(root, id, 0, SV_SEM_INFO, 0), -EFAULT);
	cr_assert_eq(ctl(root, id % 32768, 0, SV_SEM_STAT, 0), -EFAULT);
	cr_assert_eq(ctl(root, id % 32768, 0, SV_SEM_STAT_ANY, 0), -EFAULT);
	/* IPC_SET copies its buffer before the lookup, SETALL after (checked against Linux) */
	cr_assert_eq(ctl(root, 12345, 0, SV_IPC_SET, 0), -EFAULT);
	cr_assert_eq(ctl(root, 12345, 0, SV_SETALL, 0), -EINVAL);
	cr_assert_eq(ctl(root, 12345, 0, SV_IPC_STAT, 0), -EINVAL);
	/* a failed SETALL changed nothing */
	cr_assert_eq(fx_getval(root, id, 0), 0);
	cr_assert_eq(fx_getpid(root, id, 0), 0);
}

/* A7.4 and A6.3: IPC_STAT fills 104 bytes at the documented offsets, the gaps zeroed. */
Test(engine_semctl, ipc_stat_layout)
{
	struct fx_caller *owner = user(300, 1000, 2000);
	unsigned char buf[128];
	struct sv_sembuf op = { 1, 1, 0 };
	uint32_t u32;
	int64_t i64;
	uint64_t u64;
	uint16_t u16;
	int32_t key;
	time_t t_create, t_op, t_op1;
	long id;

	sv_ns_set_next_id(fx_ns, 3 * 32768 + 5);
	t_create = advance(0);
	id = sv_semget(&owner->c, 0x12345678, 5, SV_IPC_CREAT | 0640);
	cr_assert_eq(id, 3 * 32768 + 5);
	cr_assert_eq(ipc_set(owner, (int)id, 3000, 4000, 0604), 0);
	t_op = advance(100);
	cr_assert_eq(fx_semop(owner, (int)id, NULL, NULL, 1, &op), 0);
	t_op1 = time(NULL);
	advance(100);

	memset(buf, 0xa5, sizeof(buf));
	cr_assert_eq(ctl(owner, (int)id, 0, SV_IPC_STAT, PTR(buf)), 0, "IPC_STAT returns 0");
	memcpy(&key, buf + 0, 4);
	cr_assert_eq(key, 0x12345678);
	memcpy(&u32, buf + 4, 4);
	cr_assert_eq(u32, 3000, "uid");
	memcpy(&u32, buf + 8, 4);
	cr_assert_eq(u32, 4000, "gid");
	memcpy(&u32, buf + 12, 4);
	cr_assert_eq(u32, 1000, "cuid");
	memcpy(&u32, buf + 16, 4);
	cr_assert_eq(u32, 2000, "cgid");
	memcpy(&u32, buf + 20, 4);
	cr_assert_eq(u32, 0604, "mode");
	memcpy(&u16, buf + 24, 2);
	cr_assert_eq(u16, 3, "seq");
	memcpy(&i64, buf + 48, 8);
	ASSERT_TIME(i64, t_op, t_op1, "otime");
	memcpy(&i64, buf + 64, 8);
	cr_assert(i64 >= t_create && i64 < t_op, "ctime %lld is IPC_SET's", (long long)i64);
	memcpy(&u64, buf + 80, 8);
	cr_assert_eq(u64, 5, "nsems");
	/* everything else is zero, and nothing beyond 104 bytes is written */
	static const int gaps[][2] = { { 26, 48 }, { 56, 64 }, { 72, 80 }, { 88, 104 } };

	for (int g = 0; g < 4; g++)
		for (int i = gaps[g][0]; i < gaps[g][1]; i++)
			cr_assert_eq(buf[i], 0, "byte %d: %#x", i, buf[i]);
	for (int i = 104; i < 128; i++)
		cr_assert_eq(buf[i], 0xa5, "IPC_STAT wrote byte %d", i);
	fx_caller_exit(owner, NULL);
}

/* A6.5: owner bits if euid is the owner or creator, else group bits, else other bits. */
Test(engine_semctl, permission_classes)
{
	struct fx_caller *creator = user(300, 1000, 2000);
	int id = mkset_as(creator, 1, 0640); /* uid = cuid 1000, gid = cgid 2000 */
	struct fx_caller *egid_only = user(301, 3000, 2000);
	struct fx_caller *fsgid = user(302, 3000, 3000);
	struct fx_caller *supp = user(303, 3000, 3000);
	struct fx_caller *stranger = user(304, 3000, 3000);
	struct fx_caller *newowner = user(305, 4000, 4000);

	egid_only->cred.fsgid = 3000; /* egid matches, fsgid does not: no group access */
	fsgid->cred.fsgid = 2000;
	supp->groups[0] = 5;
	supp->groups[1] = 2000;
	supp->cred.ngroups = 2;

	cr_assert_eq(fx_getval(creator, id, 0), 0);
	cr_assert_eq(ctl(creator, id, 0, SV_SETVAL, 1), 0, "owner may alter");
	cr_assert_eq(fx_getval(egid_only, id, 0), -EACCES, "egid is not what the kernel checks");
	cr_assert_eq(fx_getval(fsgid, id, 0), 1, "fsgid matches cgid");
	cr_assert_eq(fx_getval(supp, id, 0), 1, "a supplementary group matches cgid");
	cr_assert_eq(ctl(supp, id, 0, SV_SETVAL, 2), -EACCES, "group may not alter");
	cr_assert_eq(fx_getval(stranger, id, 0), -EACCES);

	/* IPC_SET: uid 4000, gid 2500. The creator stays an owner, cgid stays a group. */
	cr_assert_eq(ipc_set(creator, id, 4000, 2500, 0640), 0);
	cr_assert_eq(ctl(newowner, id, 0, SV_SETVAL, 3), 0, "the new uid is an owner");
	cr_assert_eq(ctl(creator, id, 0, SV_SETVAL, 4), 0, "the creator is still an owner");
	cr_assert_eq(fx_getval(fsgid, id, 0), 4, "cgid still grants group access");
	stranger->cred.fsgid = 2500;
	cr_assert_eq(fx_getval(stranger, id, 0), 4, "the new gid grants group access");
	stranger->cred.fsgid = 3000;
	stranger->groups[0] = 2500;
	stranger->cred.ngroups = 1;
	cr_assert_eq(fx_getval(stranger, id, 0), 4, "supplementary group = gid");

	/* the owner class wins even when it grants less than the group class */
	cr_assert_eq(ipc_set(creator, id, 4000, 2000, 0040), 0);
	creator->cred.fsgid = 2000;
	cr_assert_eq(fx_getval(creator, id, 0), -EACCES, "owner bits are 0, group bits ignored");
	cr_assert_eq(fx_getval(fsgid, id, 0), 4);
	/* other bits only for a stranger */
	cr_assert_eq(ipc_set(creator, id, 4000, 2000, 0006), 0);
	stranger->cred.ngroups = 0;
	cr_assert_eq(ctl(stranger, id, 0, SV_SETVAL, 5), 0);
	cr_assert_eq(fx_getval(fsgid, id, 0), -EACCES, "group bits are 0, other bits ignored");

	/* CAP_IPC_OWNER bypasses read and alter checks, not the owner check */
	stranger->cred.cap_ipc_owner = true;
	cr_assert_eq(ipc_set(creator, id, 4000, 2000, 0), 0);
	cr_assert_eq(fx_getval(stranger, id, 0), 5);
	cr_assert_eq(ctl(stranger, id, 0, SV_SETVAL, 6), 0);
	cr_assert_eq(ipc_set(stranger, id, 3000, 3000, 0600), -EPERM);
	cr_assert_eq(ctl(stranger, id, 0, SV_IPC_RMID, 0), -EPERM);

	fx_caller_exit(creator, NULL);
	fx_caller_exit(egid_only, NULL);
	fx_caller_exit(fsgid, NULL);
	fx_caller_exit(supp, NULL);
	fx_caller_exit(stranger, NULL);
	fx_caller_exit(newowner, NULL);
}

/* A6.3: IPC_SET and IPC_RMID need owner or creator, or CAP_SYS_ADMIN; mode does not matter. */
Test(engine_semctl, owner_commands)
{
	struct fx_caller *creator = user(300, 1000, 1000);
	struct fx_caller *owner = user(301, 4000, 4000);
	struct fx_caller *group = user(302, 5000, 1000);
	struct fx_caller *admin = user(303, 5000, 5000);
	struct fx_caller *ipcowner = user(304, 5000, 5000);
	int id = mkset_as(creator, 1, 0666), id2;

	admin->cred.cap_sys_admin = true;
	ipcowner->cred.cap_ipc_owner = true;
	cr_assert_eq(ipc_set(creator, id, 4000, 1000, 0), 0, "mode 0: still the owner's to set");
	cr_assert_eq(ipc_set(group, id, 5000, 5000, 0666), -EPERM);
	cr_assert_eq(ipc_set(ipcowner, id, 5000, 5000, 0666), -EPERM);
	cr_assert_eq(ipc_set(owner, id, 4000, 1000, 0600), 0);
	cr_assert_eq(ipc_set(creator, id, 4000, 1000, 0000), 0);
	cr_assert_eq(ipc_set(admin, id, 4000, 1000, 0660), 0);
	cr_assert_eq(ctl(group, id, 0, SV_IPC_RMID, 0), -EPERM);
	cr_assert_eq(ctl(ipcowner, id, 0, SV_IPC_RMID, 0), -EPERM);
	cr_assert_eq(fx_getval(creator, id, 0), 0, "still there");
	cr_assert_eq(ctl(owner, id, 0, SV_IPC_RMID, 0), 0, "IPC_RMID returns 0");
	cr_assert_eq(fx_getval(root, id, 0), -EINVAL);
	cr_assert_eq(ctl(owner, id, 0, SV_IPC_RMID, 0), -EINVAL);

	id2 = mkset_as(creator, 1, 0);
	cr_assert_eq(ctl(admin, id2, 0, SV_IPC_RMID, 0), 0, "CAP_SYS_ADMIN may remove");
	id2 = mkset_as(creator, 1, 0);
	cr_assert_eq(ctl(creator, id2, 0, SV_IPC_RMID, 0), 0, "the creator may remove");

	fx_caller_exit(creator, NULL);
	fx_caller_exit(owner, NULL);
	fx_caller_exit(group, NULL);
	fx_caller_exit(admin, NULL);
	fx_caller_exit(ipcowner, NULL);
}

/* A6.3: IPC_SET sets uid, gid and the low 9 mode bits, and ctime; nothing else. */
Test(engine_semctl, ipc_set_fields)
{
	struct fx_caller *creator = user(300, 1000, 2000);
	struct fx_stat st;
	unsigned char ds[104];
	int id = mkset_as(creator, 3, 0600);
	time_t t, t1;

	t = advance(50);
	set_buf(ds, 7000, 8000, 07777);
	cr_assert_eq(ctl(creator, id, 0, SV_IPC_SET, PTR(ds)), 0, "IPC_SET returns 0");
	t1 = time(NULL);
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	cr_assert_eq(st.uid, 7000);
	cr_assert_eq(st.gid, 8000);
	cr_assert_eq(st.mode, 0777, "only the low 9 bits: %#o", st.mode);
	cr_assert_eq(st.cuid, 1000, "the creator does not change");
	cr_assert_eq(st.cgid, 2000);
	cr_assert_eq(st.key, 0, "the key in the buffer is ignored");
	cr_assert_eq(st.nsems, 3);
	ASSERT_TIME(st.ctime, t, t1, "ctime");
	cr_assert_eq(st.otime, 0);
	int64_t ctime = st.ctime;

	/* (uid_t)-1 and (gid_t)-1 are not ids: EINVAL, nothing changes */
	advance(50);
	cr_assert_eq(ipc_set(creator, id, (uint32_t)-1, 8000, 0600), -EINVAL);
	cr_assert_eq(ipc_set(creator, id, 7000, (uint32_t)-1, 0600), -EINVAL);
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	cr_assert_eq(st.uid, 7000);
	cr_assert_eq(st.mode, 0777);
	cr_assert_eq(st.ctime, ctime, "a failed IPC_SET leaves ctime");
	fx_caller_exit(creator, NULL);
}

/* ---- callers that see other ids: a user namespace shifted by 100000 ---- */

#define SHIFT 100000u

static uint32_t id_out(const struct sv_caller *c, uint32_t id)
{
	(void)c;
	return id >= SHIFT && id < SHIFT + 65536 ? id - SHIFT : 65534; /* overflow id */
}

static bool id_in(const struct sv_caller *c, uint32_t id, uint32_t *out)
{
	(void)c;
	if (id >= 65536)
		return false;
	*out = id + SHIFT;
	return true;
}

static int32_t pid_out(const struct sv_caller *c, int32_t pid)
{
	(void)c;
	return pid == 1000 ? 7 : 0; /* only process 1000 is visible, as pid 7 */
}

static const struct sv_caller_ops shifted = {
	.pid_out = pid_out,
	.uid_out = id_out,
	.gid_out = id_out,
	.uid_in = id_in,
	.gid_in = id_in,
};

/* A6.6/B5.4: IPC_STAT and SEM_STAT show ids as the caller's user namespace maps them. */
Test(engine_semctl, ids_out_translated)
{
	struct fx_caller *inner = user(300, SHIFT + 10, SHIFT + 20);
	struct fx_stat st;
	unsigned char buf[104];
	uint32_t u;
	int id;

	inner->c.ops = &shifted;
	id = mkset_as(inner, 1, 0600);
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	cr_assert_eq(st.uid, SHIFT + 10, "stored as the supervisor sees it");
	cr_assert_eq(fx_ipc_stat(inner, id, &st), 0);
	cr_assert_eq(st.uid, 10);
	cr_assert_eq(st.cuid, 10);
	cr_assert_eq(st.gid, 20);
	cr_assert_eq(st.cgid, 20);
	/* an owner the caller cannot see shows as the overflow id */
	cr_assert_eq(ipc_set(root, id, 5, SHIFT + 20, 0666), 0);
	cr_assert_eq(fx_ipc_stat(inner, id, &st), 0);
	cr_assert_eq(st.uid, 65534);
	cr_assert_eq(st.cuid, 10);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(ctl(inner, id % 32768, 0, SV_SEM_STAT, PTR(buf)), id);
	memcpy(&u, buf + 12, 4);
	cr_assert_eq(u, 10, "SEM_STAT translates too");
	fx_caller_exit(inner, NULL);
}

/* A6.3: IPC_SET maps the ids given in; unmappable → EINVAL, but only after the EPERM check. */
Test(engine_semctl, ids_in_translated)
{
	struct fx_caller *inner = user(300, SHIFT + 10, SHIFT + 20);
	struct fx_caller *stranger = user(301, SHIFT + 11, SHIFT + 20);
	struct fx_stat st;
	int id;

	inner->c.ops = &shifted;
	stranger->c.ops = &shifted;
	id = mkset_as(inner, 1, 0660);
	cr_assert_eq(ipc_set(stranger, id, 70000, 30, 0600), -EPERM, "EPERM comes first");
	cr_assert_eq(ipc_set(inner, id, 70000, 30, 0600), -EINVAL, "uid 70000 is unmapped");
	cr_assert_eq(ipc_set(inner, id, 30, 70000, 0600), -EINVAL, "gid 70000 is unmapped");
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	cr_assert_eq(st.uid, SHIFT + 10, "nothing changed");
	cr_assert_eq(st.gid, SHIFT + 20);
	cr_assert_eq(st.mode, 0660);
	cr_assert_eq(ipc_set(inner, id, 11, 21, 0640), 0);
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	cr_assert_eq(st.uid, SHIFT + 11, "stored in the supervisor's view");
	cr_assert_eq(st.gid, SHIFT + 21);
	cr_assert_eq(st.mode, 0640);
	/* and now the stranger (uid SHIFT + 11) owns it */
	cr_assert_eq(ipc_set(stranger, id, 11, 21, 0600), 0);
	fx_caller_exit(inner, NULL);
	fx_caller_exit(stranger, NULL);
}

/* A8.1: GETPID goes through the caller's pid translation; 0 if it cannot see the process. */
Test(engine_semctl, getpid_translated)
{
	struct fx_caller *inner = user(300, 0, 0);
	struct fx_caller *p1000 = fx_caller_new(fx_ns, 1000, 0, 0);
	struct fx_caller *p2000 = fx_caller_new(fx_ns, 2000, 0, 0);
	struct sv_sembuf op0 = { 0, 1, 0 }, op1 = { 1, 1, 0 };
	int id = mkset_as(root, 3, 0600);

	inner->c.ops = &shifted;
	cr_assert_eq(fx_semop(p1000, id, NULL, NULL, 1, &op0), 0);
	cr_assert_eq(fx_semop(p2000, id, NULL, NULL, 1, &op1), 0);
	cr_assert_eq(fx_getpid(inner, id, 0), 7);
	cr_assert_eq(fx_getpid(inner, id, 1), 0, "invisible process: 0");
	cr_assert_eq(fx_getpid(inner, id, 2), 0, "never operated on");
	cr_assert_eq(fx_getpid(root, id, 0), 1000, "no translation: the supervisor's pid");
	cr_assert_eq(fx_getpid(root, id, 1), 2000);
	/* the dead modifier's number is still reported */
	fx_caller_exit(p2000, NULL);
	cr_assert_eq(fx_getpid(root, id, 1), 2000);
	fx_caller_exit(p1000, NULL);
	fx_caller_exit(inner, NULL);
}

/* A6.3: SEM_STAT takes an index and returns the full id; SEM_STAT_ANY needs no permission. */
Test(engine_semctl, sem_stat)
{
	struct fx_caller *owner = user(300, 1000, 1000);
	struct fx_caller *stranger = user(301, 2000, 2000);
	unsigned char a[104], b[104];
	long id;

	sv_ns_set_next_id(fx_ns, 2 * 32768 + 3);
	id = sv_semget(&owner->c, 77, 4, SV_IPC_CREAT | 0600);
	cr_assert_eq(id, 2 * 32768 + 3);
	cr_assert_eq(ctl(owner, 3, 0, SV_SEM_STAT, PTR(a)), id, "SEM_STAT returns the full id");
	cr_assert_eq(ctl(owner, (int)id, 0, SV_IPC_STAT, PTR(b)), 0);
	cr_assert(memcmp(a, b, 104) == 0, "SEM_STAT fills what IPC_STAT fills");
	cr_assert_eq(ctl(owner, (int)id, 0, SV_SEM_STAT, PTR(a)), id,
		     "only the index part of the argument counts");
	cr_assert_eq(ctl(owner, 3 + 32768, 0, SV_SEM_STAT, PTR(a)), id);
	cr_assert_eq(ctl(owner, 4, 0, SV_SEM_STAT, PTR(a)), -EINVAL, "empty slot");
	cr_assert_eq(ctl(owner, 0, 0, SV_SEM_STAT_ANY, PTR(a)), -EINVAL);
	cr_assert_eq(ctl(owner, 3, 0, SV_IPC_STAT, PTR(a)), -EINVAL, "IPC_STAT takes an id");

	cr_assert_eq(ctl(stranger, 3, 0, SV_SEM_STAT, PTR(a)), -EACCES);
	cr_assert_eq(ctl(stranger, (int)id, 0, SV_IPC_STAT, PTR(a)), -EACCES);
	memset(a, 0, sizeof(a));
	cr_assert_eq(ctl(stranger, 3, 0, SV_SEM_STAT_ANY, PTR(a)), id);
	cr_assert(memcmp(a, b, 104) == 0);
	fx_caller_exit(owner, NULL);
	fx_caller_exit(stranger, NULL);
}

/* A6.3: IPC_INFO and SEM_INFO: the highest index in use, and struct seminfo. */
Test(engine_semctl, ipc_info_and_sem_info)
{
	struct fx_caller *nobody = user(300, 5000, 5000);
	struct sv_limits lim = { 250, 32000, 32, 128 }; /* the pre-3.19 values: all different */
	unsigned char raw[48];
	int32_t si[10];
	int a, b, c;

	cr_assert_eq(sv_ns_set_limits(fx_ns, &lim), 0);
	memset(raw, 0xa5, sizeof(raw));
	cr_assert_eq(ctl(nobody, 0, 0, SV_IPC_INFO, PTR(raw)), 0, "no sets: 0");
	for (int i = 40; i < 48; i++)
		cr_assert_eq(raw[i], 0xa5, "seminfo is 40 bytes; byte %d written", i);
	memcpy(si, raw, 40);
	cr_assert_eq(si[0], 1024000000, "semmap");
	cr_assert_eq(si[1], 128, "semmni");
	cr_assert_eq(si[2], 32000, "semmns");
	cr_assert_eq(si[3], 1024000000, "semmnu");
	cr_assert_eq(si[4], 250, "semmsl");
	cr_assert_eq(si[5], 32, "semopm");
	cr_assert_eq(si[6], 500, "semume");
	cr_assert_eq(si[7], 20, "semusz");
	cr_assert_eq(si[8], 32767, "semvmx");
	cr_assert_eq(si[9], 32767, "semaem");

	a = mkset_as(root, 1, 0600);
	b = mkset_as(root, 2, 0600);
	c = mkset_as(root, 3, 0);
	cr_assert_eq(ctl(nobody, 12345, 0, SV_IPC_INFO, PTR(si)), 2,
		     "highest index; any semid >= 0, no permission needed");
	cr_assert_eq(ctl(nobody, 0, 0, SV_SEM_INFO, PTR(si)), 2);
	cr_assert_eq(si[7], 3, "SEM_INFO semusz: sets in use");
	cr_assert_eq(si[9], 6, "SEM_INFO semaem: semaphores in use");
	cr_assert_eq(si[1], 128);
	cr_assert_eq(si[4], 250);
	cr_assert_eq(ctl(root, c, 0, SV_IPC_RMID, 0), 0);
	cr_assert_eq(ctl(nobody, 0, 0, SV_IPC_INFO, PTR(si)), 1);
	cr_assert_eq(si[7], 20, "IPC_INFO semusz is the constant");
	cr_assert_eq(ctl(root, a, 0, SV_IPC_RMID, 0), 0);
	cr_assert_eq(ctl(nobody, 0, 0, SV_SEM_INFO, PTR(si)), 1, "index 1 is still in use");
	cr_assert_eq(si[7], 1);
	cr_assert_eq(si[9], 2);
	sv_ns_set_next_id(fx_ns, 32768 + 40);
	a = mkset_as(root, 1, 0600);
	cr_assert_eq(a, 32768 + 40);
	cr_assert_eq(ctl(nobody, 0, 0, SV_IPC_INFO, PTR(si)), 40);
	cr_assert_eq(ctl(root, a, 0, SV_IPC_RMID, 0), 0);
	cr_assert_eq(ctl(root, b, 0, SV_IPC_RMID, 0), 0);
	cr_assert_eq(ctl(nobody, 0, 0, SV_SEM_INFO, PTR(si)), 0);
	cr_assert_eq(si[7], 0);
	cr_assert_eq(si[9], 0);
	fx_caller_exit(nobody, NULL);
}

/* A6.3: GETVAL, GETPID, GETNCNT, GETZCNT: read permission, then the semaphore number. */
Test(engine_semctl, get_single_values)
{
	static const int cmds[] = { SV_GETVAL, SV_GETPID, SV_GETNCNT, SV_GETZCNT };
	struct fx_caller *owner = user(300, 1000, 1000);
	struct fx_caller *stranger = user(301, 2000, 2000);
	struct fx_caller *reader = user(302, 3000, 1000);
	int id = mkset_as(owner, 2, 0640);
	struct sv_sembuf op = { 1, 5, 0 };

	cr_assert_eq(fx_semop(owner, id, NULL, NULL, 1, &op), 0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(ctl(stranger, id, 2, cmds[i], 0), -EACCES, "permission before semnum");
		cr_assert_eq(ctl(stranger, id, 0, cmds[i], 0), -EACCES);
		cr_assert_eq(ctl(reader, id, 2, cmds[i], 0), -EINVAL);
		cr_assert_eq(ctl(reader, id, -1, cmds[i], 0), -EINVAL);
		cr_assert_eq(ctl(reader, 12345, 0, cmds[i], 0), -EINVAL);
	}
	cr_assert_eq(ctl(reader, id, 1, SV_GETVAL, 0), 5);
	cr_assert_eq(ctl(reader, id, 1, SV_GETPID, 0), 300);
	cr_assert_eq(ctl(reader, id, 0, SV_GETPID, 0), 0);
	cr_assert_eq(ctl(reader, id, 1, SV_GETNCNT, 0), 0);
	cr_assert_eq(ctl(reader, id, 1, SV_GETZCNT, 0), 0);
	fx_caller_exit(owner, NULL);
	fx_caller_exit(stranger, NULL);
	fx_caller_exit(reader, NULL);
}

/* A6.4: SETVAL: value range first (even before the id), then id, semnum, permission. */
Test(engine_semctl, setval_check_order)
{
	struct fx_caller *owner = user(300, 1000, 1000);
	struct fx_caller *reader = user(301, 2000, 1000);
	int id = mkset_as(owner, 2, 0640);

	cr_assert_eq(ctl(owner, 12345, 0, SV_SETVAL, (uint64_t)(uint32_t)-1), -ERANGE);
	cr_assert_eq(ctl(owner, 12345, 9, SV_SETVAL, 32768), -ERANGE);
	cr_assert_eq(ctl(owner, id, 0, SV_SETVAL, 32768), -ERANGE);
	cr_assert_eq(ctl(owner, 12345, 0, SV_SETVAL, 1), -EINVAL);
	cr_assert_eq(ctl(reader, id, 2, SV_SETVAL, 1), -EINVAL, "semnum before permission");
	cr_assert_eq(ctl(reader, id, -1, SV_SETVAL, 1), -EINVAL);
	cr_assert_eq(ctl(reader, id, 0, SV_SETVAL, 1), -EACCES, "read permission is not enough");
	cr_assert_eq(ctl(owner, id, 0, SV_SETVAL, 32767), 0, "SETVAL returns 0");
	/* the value is the low 32 bits of the register, as an int */
	cr_assert_eq(ctl(owner, id, 1, SV_SETVAL, 0xdead00000003ull), 0);
	cr_assert_eq(fx_getval(owner, id, 1), 3);
	cr_assert_eq(ctl(owner, id, 1, SV_SETVAL, 0x00000001ffffffffull), -ERANGE, "low bits: -1");
	cr_assert_eq(fx_getval(owner, id, 0), 32767);
	fx_caller_exit(owner, NULL);
	fx_caller_exit(reader, NULL);
}

/* A6.4, A5.4: SETVAL sets sempid and ctime, clears that semaphore's semadj everywhere, wakes. */
Test(engine_semctl, setval_effects)
{
	struct fx_caller *p = fx_caller_new(fx_ns, 1000, 0, 0);
	struct fx_caller *q = fx_caller_new(fx_ns, 2000, 0, 0);
	struct fx_caller *w = fx_caller_new(fx_ns, 3000, 0, 0);
	struct sv_sembuf p_ops[2] = { { 0, 2, SV_SEM_UNDO }, { 1, 2, SV_SEM_UNDO } };
	struct sv_sembuf q_ops[2] = { { 0, 3, SV_SEM_UNDO }, { 1, 3, SV_SEM_UNDO } };
	struct sv_sembuf dec = { 2, -4, 0 };
	struct sv_wakeq wq;
	struct fx_stat st;
	int res[4];
	void *ck[4];
	int id = mkset_as(root, 3, 0600);
	time_t t, t1;

	cr_assert_eq(fx_semop(p, id, NULL, NULL, 2, p_ops), 0);
	cr_assert_eq(fx_semop(q, id, NULL, NULL, 2, q_ops), 0);
	cr_assert_not_null(fx_park(w, id, (void *)11, NULL, 1, &dec));
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	int64_t otime = st.otime;

	t = advance(60);
	cr_assert_eq(fx_semctl(root, id, 0, SV_SETVAL, 10, NULL), 0);
	t1 = time(NULL);
	cr_assert_eq(fx_getpid(root, id, 0), 100, "sempid = SETVAL's caller");
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	ASSERT_TIME(st.ctime, t, t1, "ctime");
	cr_assert_eq(st.otime, otime, "no waiter completed: otime stays");

	/* waking: the decrement of 4 on semaphore 2 */
	t = advance(60);
	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(root, id, 2, SV_SETVAL, 5, &wq), 0);
	t1 = time(NULL);
	cr_assert_eq(fx_drain(&wq, res, ck, 4), 1);
	cr_assert_eq(res[0], 0);
	cr_assert_eq(ck[0], (void *)11);
	cr_assert_eq(fx_getval(root, id, 2), 1, "the waiter ran inside SETVAL");
	cr_assert_eq(fx_getpid(root, id, 2), 3000);
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	ASSERT_TIME(st.otime, t, t1, "otime after a waiter completed");

	/* semadj of semaphore 0 is gone in both processes; semaphore 1's remains */
	fx_caller_exit(p, NULL);
	fx_caller_exit(q, NULL);
	cr_assert_eq(fx_getval(root, id, 0), 10, "exit must not undo anything on semaphore 0");
	cr_assert_eq(fx_getval(root, id, 1), 0, "exit undoes semaphore 1 (5 - 2 - 3)");
	fx_caller_exit(w, NULL);
}

/* A6.3: SETALL: alter permission, all values checked first, sempid, semadj, ctime, wake-ups. */
Test(engine_semctl, setall)
{
	struct fx_caller *owner = user(300, 1000, 1000);
	struct fx_caller *reader = user(301, 2000, 1000);
	struct fx_caller *p = fx_caller_new(fx_ns, 1000, 0, 0);
	struct sv_sembuf p_ops[3] = { { 0, 1, SV_SEM_UNDO },
				      { 1, 1, SV_SEM_UNDO },
				      { 2, 1, SV_SEM_UNDO } };
	struct sv_sembuf zero = { 1, 0, 0 }, dec = { 2, -2, 0 };
	uint16_t vals[3], bad[3] = { 1, 32768, 1 }, got[3];
	struct sv_wakeq wq;
	struct fx_stat st;
	void *ck[4];
	int id = mkset_as(owner, 3, 0640);
	time_t t, t1;

	cr_assert_eq(fx_semop(p, id, NULL, NULL, 3, p_ops), 0);
	cr_assert_eq(ctl(reader, id, 0, SV_SETALL, PTR(vals)), -EACCES);
	cr_assert_eq(ctl(owner, id, 0, SV_SETALL, PTR(bad)), -ERANGE);
	cr_assert_eq(fx_getval(root, id, 0), 1, "ERANGE: nothing was set");
	cr_assert_eq(fx_getpid(root, id, 0), 1000);

	struct fx_caller *zw = fx_caller_new(fx_ns, 4000, 0, 0),
			 *dw = fx_caller_new(fx_ns, 5000, 0, 0);

	cr_assert_not_null(fx_park(zw, id, (void *)1, NULL, 1, &zero));
	cr_assert_not_null(fx_park(dw, id, (void *)2, NULL, 1, &dec));
	t = advance(60);
	vals[0] = 7;
	vals[1] = 0;
	vals[2] = 32767;
	sv_wakeq_init(&wq);
	cr_assert_eq(fx_semctl(owner, id, 99, SV_SETALL, PTR(vals), &wq), 0, "semnum is ignored");
	t1 = time(NULL);
	cr_assert_eq(fx_drain(&wq, NULL, ck, 4), 2, "both waiters run inside SETALL");
	cr_assert_eq(fx_semctl(owner, id, -5, SV_GETALL, PTR(got), NULL), 0);
	cr_assert_eq(got[0], 7);
	cr_assert_eq(got[1], 0);
	cr_assert_eq(got[2], 32765);
	cr_assert_eq(fx_getpid(root, id, 0), 300, "SETALL sets every sempid");
	cr_assert_eq(fx_getpid(root, id, 1), 4000, "then the waiter ran");
	cr_assert_eq(fx_getpid(root, id, 2), 5000);
	cr_assert_eq(fx_ipc_stat(root, id, &st), 0);
	ASSERT_TIME(st.ctime, t, t1, "ctime");
	/* every semadj of the set was cleared */
	fx_caller_exit(p, NULL);
	cr_assert_eq(fx_semctl(root, id, 0, SV_GETALL, PTR(got), NULL), 0);
	cr_assert_eq(got[0], 7);
	cr_assert_eq(got[1], 0);
	cr_assert_eq(got[2], 32765);
	fx_caller_exit(owner, NULL);
	fx_caller_exit(reader, NULL);
	fx_caller_exit(zw, NULL);
	fx_caller_exit(dw, NULL);
}

/* A6.3: GETALL: read permission; writes exactly nsems unsigned shorts. */
Test(engine_semctl, getall)
{
	struct fx_caller *owner = user(300, 1000, 1000);
	struct fx_caller *stranger = user(301, 2000, 2000);
	int id = mkset_as(owner, 5, 0600);
	uint16_t got[8];

	for (int i = 0; i < 5; i++)
		cr_assert_eq(ctl(owner, id, i, SV_SETVAL, (uint64_t)(100 * i + 1)), 0);
	memset(got, 0xa5, sizeof(got));
	cr_assert_eq(ctl(stranger, id, 0, SV_GETALL, PTR(got)), -EACCES);
	cr_assert_eq(got[0], 0xa5a5);
	cr_assert_eq(ctl(owner, id, 0, SV_GETALL, PTR(got)), 0, "GETALL returns 0");
	for (int i = 0; i < 5; i++)
		cr_assert_eq(got[i], 100 * i + 1);
	for (int i = 5; i < 8; i++)
		cr_assert_eq(got[i], 0xa5a5, "GETALL wrote beyond nsems (entry %d)", i);
	fx_caller_exit(owner, NULL);
	fx_caller_exit(stranger, NULL);
}

/* ---- the i386 forms (sv_semctl_compat): layouts from the kernel's compat structures ---- */

static long ctl32(struct fx_caller *fc, int id, int semnum, int cmd, uint64_t arg, bool old)
{
	struct sv_wakeq wq;
	long r;

	sv_wakeq_init(&wq);
	r = sv_semctl_compat(&fc->c, id, semnum, cmd, (uint32_t)arg, old, &wq);
	fx_drain(&wq, NULL, NULL, 0);
	return r;
}

/* An i386 program's buffer: below 4 GiB. */
static unsigned char *low_buf(void)
{
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);

	cr_assert(p != MAP_FAILED, "mmap(MAP_32BIT): %s", strerror(errno));
	memset(p, 0xa5, 4096);
	return p;
}

static unsigned overflow_id(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned v = 65534;

	if (f) {
		cr_assert_eq(fscanf(f, "%u", &v), 1);
		fclose(f);
	}
	return v;
}

/*
 * struct compat_semid64_ds: 64 bytes, 32-bit ids, a 16-bit mode, each time in a low and a high
 * word; written whole by IPC_STAT through the direct semctl and through ipc(2) with IPC_64.
 */
Test(engine_semctl, i386_semid64_layout)
{
	struct fx_caller *owner = user(300, 100000, 2000);
	unsigned char *buf = low_buf();
	struct sv_sembuf op = { 0, 1, 0 };
	uint32_t u32;
	uint16_t u16;
	time_t t0, t1;
	long id;

	sv_ns_set_next_id(fx_ns, 2 * 32768 + 7);
	id = sv_semget(&owner->c, 0x5e3a, 3, SV_IPC_CREAT | 0640);
	cr_assert_eq(id, 2 * 32768 + 7);
	t0 = advance(50);
	cr_assert_eq(fx_semop(owner, (int)id, NULL, NULL, 1, &op), 0);
	t1 = time(NULL);
	for (int old = 0; old < 2; old++) {
		memset(buf, 0xa5, 128);
		cr_assert_eq(
		    ctl32(owner, (int)id, 0, SV_IPC_STAT | (old ? SV_IPC_64 : 0), PTR(buf), old),
		    0);
		memcpy(&u32, buf + 0, 4);
		cr_assert_eq(u32, 0x5e3a, "key");
		memcpy(&u32, buf + 4, 4);
		cr_assert_eq(u32, 100000, "uid, all 32 bits");
		memcpy(&u32, buf + 12, 4);
		cr_assert_eq(u32, 100000, "cuid");
		memcpy(&u32, buf + 16, 4);
		cr_assert_eq(u32, 2000, "cgid");
		memcpy(&u16, buf + 20, 2);
		cr_assert_eq(u16, 0640, "mode");
		memcpy(&u16, buf + 24, 2);
		cr_assert_eq(u16, 2, "seq");
		memcpy(&u32, buf + 36, 4);
		ASSERT_TIME(u32, t0, t1, "otime, low word");
		memcpy(&u32, buf + 40, 4);
		cr_assert_eq(u32, 0, "otime, high word");
		memcpy(&u32, buf + 52, 4);
		cr_assert_eq(u32, 3, "nsems");
		for (int i = 56; i < 64; i++)
			cr_assert_eq(buf[i], 0, "unused byte %d: %#x", i, buf[i]);
		for (int i = 64; i < 128; i++)
			cr_assert_eq(buf[i], 0xa5, "compat_semid64_ds is 64 bytes; byte %d written",
				     i);
	}
	fx_caller_exit(owner, NULL);
}

/*
 * ipc(2) without IPC_64: struct compat_semid_ds, 44 bytes, 16-bit ids (one past 65535 reads as
 * the kernel's overflowuid/gid), 32-bit times; IPC_SET reads the same layout.
 */
Test(engine_semctl, i386_old_semid_layout)
{
	struct fx_caller *owner = user(300, 100000, 2000);
	unsigned char *buf = low_buf();
	uint16_t u16;
	int32_t i32;
	uint32_t u32;
	time_t t0, t1;
	long id;

	t0 = time(NULL);
	id = sv_semget(&owner->c, 0x5e3b, 4, SV_IPC_CREAT | 0600);
	t1 = time(NULL);
	cr_assert_geq(id, 0);
	cr_assert_eq(ctl32(owner, (int)id, 0, SV_IPC_STAT, PTR(buf), true), 0);
	memcpy(&i32, buf + 0, 4);
	cr_assert_eq(i32, 0x5e3b, "key");
	memcpy(&u16, buf + 4, 2);
	cr_assert_eq(u16, overflow_id("/proc/sys/kernel/overflowuid"), "uid 100000 in 16 bits");
	memcpy(&u16, buf + 6, 2);
	cr_assert_eq(u16, 2000, "gid");
	memcpy(&u16, buf + 12, 2);
	cr_assert_eq(u16, 0600, "mode");
	memcpy(&i32, buf + 16, 4);
	cr_assert_eq(i32, 0, "otime: no semop yet");
	memcpy(&i32, buf + 20, 4);
	ASSERT_TIME(i32, t0, t1, "ctime");
	memcpy(&u16, buf + 40, 2);
	cr_assert_eq(u16, 4, "nsems");
	for (int i = 24; i < 40; i++)
		cr_assert_eq(buf[i], 0, "the pointers the kernel leaves 0: byte %d", i);
	for (int i = 44; i < 128; i++)
		cr_assert_eq(buf[i], 0xa5, "compat_semid_ds is 44 bytes; byte %d written", i);

	/* IPC_SET in the same layout: uid 1234 (16 bits), mode 0644 */
	memset(buf, 0, 44);
	u16 = 1234;
	memcpy(buf + 4, &u16, 2);
	u16 = 2000;
	memcpy(buf + 6, &u16, 2);
	u16 = 0644;
	memcpy(buf + 12, &u16, 2);
	cr_assert_eq(ctl32(root, (int)id, 0, SV_IPC_SET, PTR(buf), true), 0);
	cr_assert_eq(ctl32(root, (int)id, 0, SV_IPC_STAT | SV_IPC_64, PTR(buf), true), 0);
	memcpy(&u32, buf + 4, 4);
	cr_assert_eq(u32, 1234, "IPC_SET's uid");
	memcpy(&u16, buf + 20, 2);
	cr_assert_eq(u16, 0644, "IPC_SET's mode");
	fx_caller_exit(owner, NULL);
}

/*
 * The direct i386 semctl keeps IPC_64 in the command where the kernel's helpers see it:
 * IPC_STAT|IPC_64 returns the id, SEM_INFO|IPC_64 reports IPC_INFO's figures, GETVAL|IPC_64
 * and IPC_RMID|IPC_64 fail with EINVAL once their checks pass, and the set stays.
 */
Test(engine_semctl, i386_direct_ipc64_quirks)
{
	unsigned char *buf = low_buf();
	int32_t si[10];
	int id = mkset_as(root, 2, 0600);

	cr_assert_eq(ctl32(root, id, 0, SV_IPC_STAT | SV_IPC_64, PTR(buf), false), id);
	cr_assert_eq(ctl32(root, id, 0, SV_IPC_STAT, PTR(buf), false), 0);
	cr_assert_geq(ctl32(root, 0, 0, SV_SEM_INFO | SV_IPC_64, PTR(buf), false), 0);
	memcpy(si, buf, sizeof(si));
	cr_assert_eq(si[7], 20, "semusz: IPC_INFO's constant, not the sets in use");
	cr_assert_eq(ctl32(root, 0, 0, SV_SEM_INFO, PTR(buf), false), 0);
	memcpy(si, buf, sizeof(si));
	cr_assert_eq(si[7], 1, "plain SEM_INFO: the sets in use");
	cr_assert_eq(ctl32(root, id, 0, SV_GETVAL | SV_IPC_64, 0, false), -EINVAL);
	cr_assert_eq(ctl32(root, id, 5, SV_GETVAL | SV_IPC_64, 0, false), -EINVAL);
	cr_assert_eq(ctl32(root, id, 0, SV_IPC_RMID | SV_IPC_64, 0, false), -EINVAL);
	cr_assert_eq(ctl32(root, id, 0, SV_GETVAL, 0, false), 0, "the set is still there");
	cr_assert_eq(ctl32(root, id, 1, SV_SETVAL, 7, false), 0);
	cr_assert_eq(fx_getval(root, id, 1), 7);
	/* through ipc(2) the flag is the layout, and stripped */
	cr_assert_eq(ctl32(root, id, 1, SV_GETVAL | SV_IPC_64, 0, true), 7);
	cr_assert_eq(ctl32(root, id, 0, SV_IPC_RMID | SV_IPC_64, 0, true), 0);
	cr_assert_eq(ctl32(root, id, 0, SV_GETVAL, 0, false), -EINVAL, "removed");
}

/*
 * i386 timeouts: ipc(2) SEMTIMEDOP reads a struct old_timespec32; semtimedop_time64 a
 * __kernel_timespec of which the kernel keeps tv_nsec's low 32 bits for a compat task.
 */
Test(engine_semctl, i386_timeouts)
{
	unsigned char *buf = low_buf();
	int id = mkset_as(root, 1, 0600);
	struct sv_sembuf *down = (struct sv_sembuf *)buf;
	struct sv_park park = { 0 };
	struct sv_wakeq wq;
	int32_t *ts32 = (int32_t *)(buf + 64);
	int64_t *ts64 = (int64_t *)(buf + 128);

	*down = (struct sv_sembuf){ 0, -1, 0 };
	sv_wakeq_init(&wq);
	ts32[0] = 0;
	ts32[1] = 0;
	cr_assert_eq(sv_semtimedop_compat(&root->c, id, PTR(down), 1, PTR(ts32), true, &park, &wq),
		     -EAGAIN, "a zero old_timespec32 expires at once");
	ts32[1] = -1;
	cr_assert_eq(sv_semtimedop_compat(&root->c, id, PTR(down), 1, PTR(ts32), true, &park, &wq),
		     -EINVAL, "tv_nsec -1, sign-extended");
	ts32[0] = -1;
	ts32[1] = 0;
	cr_assert_eq(sv_semtimedop_compat(&root->c, id, PTR(down), 1, PTR(ts32), true, &park, &wq),
		     -EINVAL, "tv_sec -1, sign-extended");
	ts64[0] = 0;
	ts64[1] = 1LL << 32;
	cr_assert_eq(sv_semtimedop_compat(&root->c, id, PTR(down), 1, PTR(ts64), false, &park, &wq),
		     -EAGAIN, "tv_nsec 2^32 counts as 0 for a compat task");
	cr_assert_eq(sv_semtimedop(&root->c, id, PTR(down), 1, PTR(ts64), &park, &wq), -EINVAL,
		     "natively 2^32 ns is out of range");
	ts64[1] = 0xffffffffLL;
	cr_assert_eq(sv_semtimedop_compat(&root->c, id, PTR(down), 1, PTR(ts64), false, &park, &wq),
		     -EINVAL);
	cr_assert(sv_wakeq_empty(&wq));
}
