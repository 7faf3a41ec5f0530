/* SPDX-License-Identifier: MIT */
/*
 * Permissions (SPEC A2.4, A4.2, A6.3, A6.5): root creates sets of various modes and owners, and
 * a child with another identity tries every kind of access on each:
 *   root        CAP_IPC_OWNER and CAP_SYS_ADMIN: everything passes, mode 0000 too;
 *   root-noipc  uid 0 without CAP_IPC_OWNER (capset): the mode bits of the owner apply;
 *   nobody      setuid(65534), gid 65534: owner, group or other bits depending on the set;
 *   supp        uid 65534, gid 1000, supplementary group 65534: group match by supplementary gid;
 *   manygroups  as supp, with 65534 the last of 20000 supplementary groups (a Groups: line of
 *               /proc/TID/status far longer than a page);
 *   fsgid       uid 65534, egid 1000, fsgid 65534: the group match uses fsgid, not egid;
 *   egid        uid 65534, egid 65534, fsgid 1000: ... so this one is "other";
 *   sysadmin    uid 1000 keeping only CAP_SYS_ADMIN: IPC_SET/IPC_RMID on others' sets, but no
 *               read or alter bypass.
 * Under semvisor every one of these identities changes through trapped set*id/capset calls, so
 * this also checks that cached credentials follow them.
 */
#include <grp.h>
#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>

#include "prog.h"

#define KEY0 0x7000

struct setdef {
	const char *name;
	int mode;
	uid_t uid; /* owner after IPC_SET; the creator stays root */
	gid_t gid;
};

static const struct setdef sets[] = {
	{ "S0", 0600, 0, 0 },	  { "S1", 0604, 0, 0 },	    { "S2", 0602, 0, 0 },
	{ "S3", 0606, 0, 0 },	  { "S4", 0660, 0, 65534 }, { "S5", 0640, 0, 65534 },
	{ "S6", 0006, 0, 65534 }, { "S7", 0400, 65534, 0 }, { "S8", 0000, 65534, 0 },
	{ "S9", 0666, 0, 0 },	  { "S10", 0066, 0, 0 },
};
#define NSETS (int)(sizeof(sets) / sizeof(sets[0]))

static int set_caps(uint32_t eff, uint32_t perm)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	data[0].effective = eff;
	data[0].permitted = perm;
	return (int)syscall(SYS_capset, &hdr, data);
}

/* Drop one capability from the effective set only: still uid 0, still able to get it back. */
static int drop_effective(int cap)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return -1;
	data[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
	return (int)syscall(SYS_capset, &hdr, data);
}

static void become(const char *who)
{
	if (!strcmp(who, "root"))
		return;
	if (!strcmp(who, "root-noipc")) {
		MUST(drop_effective(CAP_IPC_OWNER) == 0);
		return;
	}
	if (!strcmp(who, "sysadmin")) {
		MUST(prctl(PR_SET_KEEPCAPS, 1) == 0);
		MUST(setgroups(0, NULL) == 0);
		MUST(setresgid(1000, 1000, 1000) == 0);
		MUST(setresuid(1000, 1000, 1000) == 0);
		MUST(set_caps(1u << CAP_SYS_ADMIN, 1u << CAP_SYS_ADMIN) == 0);
		return;
	}
	if (!strcmp(who, "nobody")) {
		MUST(setgroups(0, NULL) == 0);
		MUST(setgid(65534) == 0);
	} else if (!strcmp(who, "supp")) {
		gid_t g = 65534;

		MUST(setgroups(1, &g) == 0);
		MUST(setgid(1000) == 0);
	} else if (!strcmp(who, "manygroups")) {
		static gid_t many[20000];

		for (int i = 0; i < 19999; i++)
			many[i] = 200000 + (gid_t)i;
		many[19999] = 65534;
		MUST(setgroups(20000, many) == 0);
		MUST(setgid(1000) == 0);
	} else if (!strcmp(who, "fsgid")) {
		MUST(setgroups(0, NULL) == 0);
		MUST(setresgid(1000, 1000, 1000) == 0);
		setfsgid(65534);
		MUST(setfsgid((gid_t)-1) == 65534);
	} else if (!strcmp(who, "egid")) {
		MUST(setgroups(0, NULL) == 0);
		MUST(setresgid(65534, 65534, 65534) == 0);
		setfsgid(1000);
		MUST(setfsgid((gid_t)-1) == 1000);
	}
	MUST(setuid(65534) == 0);
	MUST(geteuid() == 65534);
}

#define OP(label, call)                                                                            \
	do {                                                                                       \
		errno = 0;                                                                         \
		long r_ = (long)(call);                                                            \
		printf(" %s=%s", label, r_ == -1 ? errname(errno) : "ok");                         \
		if (r_ != -1 && r_ != 0)                                                           \
			printf("(%ld)", r_);                                                       \
	} while (0)

/* Every kind of access to set s (index idx in the namespace), one line. */
static void try_set(int s, int id, int idx)
{
	struct semid_ds ds;
	unsigned short arr[1] = { 0 };
	struct sembuf zero = { 0, 0, IPC_NOWAIT }, pair[2] = { { 0, 1, 0 }, { 0, -1, 0 } },
		      far = { 5, 1, IPC_NOWAIT };
	struct timespec ts = { 0, 0 };

	printf("%-4s %04o owner %u group %u:", sets[s].name, sets[s].mode, sets[s].uid,
	       sets[s].gid);
	/* semget asks for the rwx of all three triplets of its flags OR-ed together */
	OP("get0", semget(KEY0 + s, 0, 0));
	OP("get0400", semget(KEY0 + s, 0, 0400));
	OP("get0020", semget(KEY0 + s, 0, 0020));
	OP("get0006", semget(KEY0 + s, 0, 0006));
	printf("\n    ");
	/* read */
	OP("GETVAL", semctl(id, 0, GETVAL));
	OP("GETALL", semctl(id, 0, GETALL, (union semun){ .array = arr }));
	OP("GETNCNT", semctl(id, 0, GETNCNT));
	OP("GETZCNT", semctl(id, 0, GETZCNT));
	OP("GETPID", semctl(id, 0, GETPID) >= 0 ? 0 : -1); /* a pid: not printable */
	OP("IPC_STAT", semctl(id, 0, IPC_STAT, (union semun){ .buf = &ds }));
	OP("SEM_STAT", semctl(idx, 0, SEM_STAT, (union semun){ .buf = &ds }) == id ? 0 : -1);
	OP("SEM_STAT_ANY",
	   semctl(idx, 0, SEM_STAT_ANY, (union semun){ .buf = &ds }) == id ? 0 : -1);
	OP("zero", semop(id, &zero, 1));
	OP("zero-timed", semtimedop(id, &zero, 1, &ts));
	/* EFBIG is checked before permission */
	OP("far", semop(id, &far, 1));
	printf("\n    ");
	/* alter */
	OP("SETVAL", setval(id, 0, 0));
	OP("SETALL", semctl(id, 0, SETALL, (union semun){ .array = arr }));
	OP("pair", semop(id, pair, 2));
	OP("IPC_INFO",
	   semctl(id, 0, IPC_INFO, (union semun){ .__buf = (void *)&ds }) >= 0 ? 0 : -1);
	/* owner, creator or CAP_SYS_ADMIN: IPC_SET with what SEM_STAT_ANY shows, then IPC_RMID */
	MUST(semctl(idx, 0, SEM_STAT_ANY, (union semun){ .buf = &ds }) == id);
	OP("IPC_SET", semctl(id, 0, IPC_SET, (union semun){ .buf = &ds }));
	OP("IPC_RMID", semctl(id, 0, IPC_RMID));
	printf("\n");
}

static void run_identity(const char *who)
{
	int ids[NSETS], idx[NSETS];
	pid_t p;

	/* fresh sets for each identity: the last one tried IPC_RMID on them */
	for (int s = 0; s < NSETS; s++) {
		struct semid_ds ds;

		ids[s] = semget(KEY0 + s, 1, IPC_CREAT | IPC_EXCL | sets[s].mode);
		MUST(ids[s] >= 0);
		idx[s] = ids[s] % 32768;
		MUST(semctl(ids[s], 0, IPC_STAT, (union semun){ .buf = &ds }) == 0);
		ds.sem_perm.uid = sets[s].uid;
		ds.sem_perm.gid = sets[s].gid;
		MUST(semctl(ids[s], 0, IPC_SET, (union semun){ .buf = &ds }) == 0);
	}
	printf("== %s\n", who);
	p = xfork();
	if (p == 0) {
		become(who);
		for (int s = 0; s < NSETS; s++)
			try_set(s, ids[s], idx[s]);
		fflush(stdout);
		_exit(0);
	}
	printf("%s: %s\n", who, reap(p));
	for (int s = 0; s < NSETS; s++)
		if (semctl(ids[s], 0, IPC_RMID) == 0)
			printf("  %s was left, removed by root\n", sets[s].name);
}

int main(int argc, char **argv)
{
	static const char *const who[] = { "root",	 "root-noipc", "nobody", "supp",
					   "manygroups", "fsgid",      "egid",	 "sysadmin" };

	prog_init();
	for (size_t i = 0; i < sizeof(who) / sizeof(who[0]); i++)
		if (argc < 2 || !strcmp(argv[1], who[i]))
			run_identity(who[i]);
	return prog_exit_status();
}
