/* SPDX-License-Identifier: MIT */
/*
 * semget and identifiers (SPEC A2, A3), item by item, plus the per-namespace limits and
 * sem_next_id (A1.2, A3.4).
 *
 * 24-engine-kernel-diff compares random call sequences with the kernel; the tests here pin each
 * rule down on its own, with the reason it exists, so that a regression names the rule it broke.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "tests/lib/fixture.h"

#define KEY 0x5eed

static struct fx_caller *root; /* uid 0: CAP_IPC_OWNER and CAP_SYS_ADMIN */

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

TestSuite(engine_semget, .init = setup, .fini = teardown, .timeout = 30);

static long get(struct fx_caller *fc, int32_t key, int nsems, int flg)
{
	return sv_semget(&fc->c, key, nsems, flg);
}

static long rmid(int id)
{
	return fx_semctl(root, id, 0, SV_IPC_RMID, 0, NULL);
}

/* SEM_INFO: semusz is the number of sets, semaem the number of semaphores (A6.3). */
static void sem_info(int *nsets, int *nsems)
{
	int32_t si[10];

	cr_assert_geq(fx_semctl(root, 0, 0, SV_SEM_INFO, (uint64_t)(uintptr_t)si, NULL), 0);
	*nsets = si[7];
	*nsems = si[9];
}

static void set_limits(int semmsl, int semmns, int semopm, int semmni)
{
	struct sv_limits lim = { semmsl, semmns, semopm, semmni };

	cr_assert_eq(sv_ns_set_limits(fx_ns, &lim), 0);
}

/* A2.1: the nsems range is checked before the key is even looked at. */
Test(engine_semget, nsems_range_checked_first)
{
	struct fx_caller *nobody = fx_caller_new(fx_ns, 200, 4000, 4000);
	long id;

	cr_assert_eq(get(root, KEY, -1, SV_IPC_CREAT | 0600), -EINVAL);
	cr_assert_eq(get(root, KEY, 32001, SV_IPC_CREAT | 0600), -EINVAL, "above default SEMMSL");
	cr_assert_eq(get(root, KEY, -1, 0), -EINVAL, "EINVAL, not ENOENT, for a missing key");
	cr_assert_eq(get(root, KEY, 32000, SV_IPC_CREAT | 0600), 0, "SEMMSL itself is allowed");
	id = get(root, KEY + 1, 2, SV_IPC_CREAT | 0600);
	cr_assert_eq(id, 1);

	/* the key exists now: still EINVAL, before EEXIST and before EACCES */
	cr_assert_eq(get(root, KEY + 1, -1, 0), -EINVAL);
	cr_assert_eq(get(root, KEY + 1, 32001, SV_IPC_CREAT | SV_IPC_EXCL | 0600), -EINVAL,
		     "nsems range must be checked before EEXIST");
	cr_assert_eq(get(nobody, KEY + 1, -5, 0600), -EINVAL,
		     "nsems range must be checked before EACCES");

	/* the limit is the namespace's current SEMMSL */
	set_limits(4, 1000000, 500, 100);
	cr_assert_eq(get(root, KEY + 2, 5, SV_IPC_CREAT | 0600), -EINVAL);
	cr_assert_eq(get(root, KEY + 1, 5, SV_IPC_CREAT | SV_IPC_EXCL | 0600), -EINVAL);
	cr_assert_eq(get(root, KEY + 2, 4, SV_IPC_CREAT | 0600), 2);
	fx_caller_exit(nobody, NULL);
}

/* A2.2: IPC_PRIVATE always creates, whatever the flags; other keys are 32-bit values. */
Test(engine_semget, private_always_creates)
{
	struct fx_stat st;
	long a, b, c, d;

	a = get(root, SV_IPC_PRIVATE, 1, 0);
	b = get(root, SV_IPC_PRIVATE, 1, 0600);
	c = get(root, SV_IPC_PRIVATE, 1, SV_IPC_CREAT | SV_IPC_EXCL | 0600);
	d = get(root, SV_IPC_PRIVATE, 1, SV_IPC_EXCL);
	cr_assert(a >= 0 && b >= 0 && c >= 0 && d >= 0, "%ld %ld %ld %ld", a, b, c, d);
	cr_assert(a != b && b != c && c != d && a != c, "every IPC_PRIVATE call makes a new set");
	cr_assert_eq(fx_ipc_stat(root, (int)c, &st), 0);
	cr_assert_eq(st.key, 0);

	/*
	 * Keys are matched on all 32 bits: keys that agree in their low 16 bits, and a negative
	 * one, are three different sets.
	 */
	long k1 = get(root, 0x00010001, 1, SV_IPC_CREAT | 0600);
	long k2 = get(root, 0x00000001, 1, SV_IPC_CREAT | 0600);
	long k3 = get(root, (int32_t)0x80000001u, 1, SV_IPC_CREAT | 0600);

	cr_assert(k1 >= 0 && k2 >= 0 && k3 >= 0);
	cr_assert(k1 != k2 && k2 != k3 && k1 != k3);
	cr_assert_eq(get(root, (int32_t)0x80000001u, 0, 0), k3);
	cr_assert_eq(fx_ipc_stat(root, (int)k3, &st), 0);
	cr_assert_eq(st.key, (int32_t)0x80000001u, "key is reported signed, all 32 bits");
	cr_assert_eq(get(root, 0x00010001, 0, 0), k1);
}

/* A2.3: for an existing key, EEXIST, then nsems > size (EINVAL), then permission (EACCES). */
Test(engine_semget, existing_key_error_order)
{
	struct fx_caller *owner = fx_caller_new(fx_ns, 200, 1000, 1000);
	struct fx_caller *other = fx_caller_new(fx_ns, 201, 2000, 2000);
	long id = get(owner, KEY, 2, SV_IPC_CREAT | 0600);

	cr_assert_geq(id, 0);
	cr_assert_eq(get(other, KEY, 3, SV_IPC_CREAT | SV_IPC_EXCL | 0600), -EEXIST,
		     "EEXIST comes before the size and the permission checks");
	cr_assert_eq(get(other, KEY, 0, SV_IPC_CREAT | SV_IPC_EXCL), -EEXIST);
	cr_assert_eq(get(other, KEY, 3, 0600), -EINVAL, "size comes before permission");
	cr_assert_eq(get(other, KEY, 3, SV_IPC_CREAT), -EINVAL,
		     "IPC_CREAT alone on an existing key is a plain lookup");
	cr_assert_eq(get(other, KEY, 2, 0600), -EACCES);
	cr_assert_eq(get(other, KEY, 0, 0), id, "flags 0 ask for no access at all");
	cr_assert_eq(get(other, KEY, 0, 0400), -EACCES);

	cr_assert_eq(get(owner, KEY, 0, 0600), id, "nsems 0 is fine for an existing set");
	cr_assert_eq(get(owner, KEY, 1, 0), id);
	cr_assert_eq(get(owner, KEY, 2, SV_IPC_CREAT | 0600), id);
	cr_assert_eq(get(owner, KEY, 2, SV_IPC_EXCL | 0600), id, "IPC_EXCL without IPC_CREAT");
	cr_assert_eq(get(owner, KEY, 3, 0), -EINVAL);
	/* root's CAP_IPC_OWNER passes the permission check, not the others */
	cr_assert_eq(get(root, KEY, 2, 0666), id);
	cr_assert_eq(get(root, KEY, 3, 0666), -EINVAL);
	fx_caller_exit(owner, NULL);
	fx_caller_exit(other, NULL);
}

/* A2.4: the access asked for is the three rwx triplets of semflg OR-ed together. */
Test(engine_semget, requested_access_is_triplets_ored)
{
	struct fx_caller *owner = fx_caller_new(fx_ns, 200, 1000, 1000);
	long id = get(owner, KEY, 1, SV_IPC_CREAT | 0400); /* owner may read only */
	static const struct {
		int flg;
		int ok;
	} cases[] = {
		{ 0, 1 },
		{ 0400, 1 },
		{ 0040, 1 },
		{ 0004, 1 },
		{ 0444, 1 },
		{ 0200, 0 },
		{ 0020, 0 },
		{ 0002, 0 },
		{ 0600, 0 },
		{ 0060, 0 },
		{ 0006, 0 },
		{ 0100, 0 },
		{ 0001, 0 },
		{ 0500, 0 },
		/* bits above 0777 ask for nothing */
		{ SV_IPC_NOWAIT | SV_IPC_EXCL | 0400, 1 },
	};

	cr_assert_geq(id, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long r = get(owner, KEY, 0, cases[i].flg);

		cr_assert_eq(r, cases[i].ok ? id : -EACCES, "semflg %#o: got %ld", cases[i].flg, r);
	}
	fx_caller_exit(owner, NULL);
}

/*
 * Execute bits are part of the triplets too (requested & ~granted & 7, as the kernel computes
 * it): asking x of a set that grants r-- fails, of one that grants r-x succeeds. Checked against
 * Linux 6.18.
 */
Test(engine_semget, execute_bit_is_checked_like_the_kernel)
{
	struct fx_caller *owner = fx_caller_new(fx_ns, 200, 1000, 1000);
	long ro = get(owner, KEY, 1, SV_IPC_CREAT | 0400);
	long rx = get(owner, KEY + 1, 1, SV_IPC_CREAT | 0500);

	cr_assert_eq(get(owner, KEY, 0, 0100), -EACCES, "x asked, only r granted");
	cr_assert_eq(get(owner, KEY, 0, 0001), -EACCES);
	cr_assert_eq(get(owner, KEY + 1, 0, 0111), rx);
	cr_assert_eq(get(owner, KEY, 0, 0400), ro);
	fx_caller_exit(owner, NULL);
}

/* A2.5: no such key and no IPC_CREAT: ENOENT (and nsems 0 is no reason for EINVAL there). */
Test(engine_semget, missing_key_enoent)
{
	cr_assert_eq(get(root, KEY, 1, 0600), -ENOENT);
	cr_assert_eq(get(root, KEY, 0, 0), -ENOENT);
	cr_assert_eq(get(root, KEY, 1, SV_IPC_EXCL | 0600), -ENOENT);
	/* a removed set's key is free again */
	long id = get(root, KEY, 1, SV_IPC_CREAT | 0600);

	cr_assert_geq(id, 0);
	cr_assert_eq(rmid((int)id), 0);
	cr_assert_eq(get(root, KEY, 1, 0600), -ENOENT);
	long id2 = get(root, KEY, 1, SV_IPC_CREAT | 0600);

	cr_assert_geq(id2, 0);
	cr_assert_neq(id2, id, "a removed id must not come back at once");
}

/* A2.5: creating with nsems 0 is EINVAL. */
Test(engine_semget, create_with_zero_nsems)
{
	int nsets, nsems;

	cr_assert_eq(get(root, KEY, 0, SV_IPC_CREAT | 0600), -EINVAL);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 0, 0600), -EINVAL);
	cr_assert_eq(get(root, KEY, 0, 0), -ENOENT, "the failed creation left no set behind");
	sem_info(&nsets, &nsems);
	cr_assert_eq(nsets, 0);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 0, "no id was used up either");
}

/* A2.5: SEMMNS (semaphores in the namespace) and SEMMNI (sets), both ENOSPC. */
Test(engine_semget, enospc_semmns_and_semmni)
{
	int nsets, nsems;
	long a, b, c;

	set_limits(100, 10, 500, 3);
	a = get(root, KEY, 6, SV_IPC_CREAT | 0600);
	b = get(root, SV_IPC_PRIVATE, 4, 0600);
	cr_assert(a >= 0 && b >= 0, "exactly SEMMNS semaphores are allowed");
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), -ENOSPC, "SEMMNS");
	cr_assert_eq(get(root, KEY + 1, 1, SV_IPC_CREAT | 0600), -ENOSPC);
	cr_assert_eq(get(root, KEY + 1, 0, 0), -ENOENT, "no key left behind by the failure");
	sem_info(&nsets, &nsems);
	cr_assert_eq(nsets, 2);
	cr_assert_eq(nsems, 10, "failed creations must not count semaphores");

	/* removal gives the semaphores back */
	cr_assert_eq(rmid((int)a), 0);
	sem_info(&nsets, &nsems);
	cr_assert_eq(nsems, 4);
	a = get(root, SV_IPC_PRIVATE, 5, 0600);
	c = get(root, SV_IPC_PRIVATE, 1, 0600);
	cr_assert(a >= 0 && c >= 0);
	/* three sets, SEMMNI 3: a fourth is refused even though semaphores are left */
	cr_assert_eq(rmid((int)c), 0);
	set_limits(100, 1000, 500, 3);
	c = get(root, SV_IPC_PRIVATE, 1, 0600);
	cr_assert_geq(c, 0);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), -ENOSPC, "SEMMNI");
	/* both limits exceeded at once: still ENOSPC */
	set_limits(100, 10, 500, 3);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 50, 0600), -ENOSPC);
	/* lowering SEMMNI below the sets in use does not remove any, but blocks creation */
	set_limits(100, 1000, 500, 1);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), -ENOSPC);
	sem_info(&nsets, &nsems);
	cr_assert_eq(nsets, 3);
	cr_assert_eq(nsems, 10);
}

/* A2.6: a new set's attributes. */
Test(engine_semget, new_set_attributes)
{
	struct fx_caller *fc = fx_caller_new(fx_ns, 300, 1000, 2000);
	struct fx_stat st;
	uint16_t vals[3] = { 1, 1, 1 };
	time_t t0, t1;
	long id;

	fc->cred.fsgid = 3000; /* gid and cgid come from egid, not fsgid */
	t0 = time(NULL);
	id = get(fc, KEY, 3, SV_IPC_CREAT | SV_IPC_EXCL | SV_IPC_NOWAIT | 0x8000 | 0640);
	t1 = time(NULL);
	cr_assert_geq(id, 0);
	cr_assert_eq(fx_ipc_stat(root, (int)id, &st), 0);
	cr_assert_eq(st.key, KEY);
	cr_assert_eq(st.mode, 0640, "mode is semflg & 0777, got %#o", st.mode);
	cr_assert_eq(st.uid, 1000);
	cr_assert_eq(st.cuid, 1000);
	cr_assert_eq(st.gid, 2000, "gid is the creator's egid");
	cr_assert_eq(st.cgid, 2000);
	cr_assert_eq(st.nsems, 3);
	cr_assert_eq(st.otime, 0, "no operation yet");
	cr_assert(st.ctime >= t0 && st.ctime <= t1, "ctime %lld not in [%lld, %lld]",
		  (long long)st.ctime, (long long)t0, (long long)t1);
	cr_assert_eq(fx_semctl(root, (int)id, 0, SV_GETALL, (uint64_t)(uintptr_t)vals, NULL), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(vals[i], 0);
		cr_assert_eq(fx_getpid(root, (int)id, i), 0);
		cr_assert_eq(fx_getncnt(root, (int)id, i), 0);
		cr_assert_eq(fx_getzcnt(root, (int)id, i), 0);
	}
	fx_caller_exit(fc, NULL);
}

/* A3.1/A3.2: the first id is 0; indexes are handed out cyclically, the sequence bumps on wrap. */
Test(engine_semget, ids_cycle_through_indexes)
{
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 0);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 1);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 2);
	/* three sets held: creating and removing one walks indexes 3..63 (max(3*3/2, 64) = 64) */
	for (int want = 3; want < 64; want++) {
		long id = get(root, SV_IPC_PRIVATE, 1, 0600);

		cr_assert_eq(id, want, "expected id %d, got %ld", want, id);
		cr_assert_eq(rmid((int)id), 0);
	}
	/* then it wraps to the lowest free index, 3, with sequence 1 */
	long id = get(root, SV_IPC_PRIVATE, 1, 0600);

	cr_assert_eq(id, 32771, "after the wrap: got %ld", id);
	cr_assert_eq(rmid((int)id), 0);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 32772, "no bump going upwards");

	struct fx_stat st;

	cr_assert_eq(fx_ipc_stat(root, 32772, &st), 0);
	cr_assert_eq(st.seq, 1, "IPC_STAT reports the sequence number");
}

/* A3.2: the cycle's length grows with the sets in use, max(in_use * 3 / 2, 64). */
Test(engine_semget, cycle_length_follows_sets_in_use)
{
	for (int i = 0; i < 50; i++)
		cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), i);
	/* 50 held: the window is [0, 75) */
	for (int want = 50; want < 75; want++) {
		long id = get(root, SV_IPC_PRIVATE, 1, 0600);

		cr_assert_eq(id, want, "expected %d, got %ld", want, id);
		cr_assert_eq(rmid((int)id), 0);
	}
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 32768 + 50);
}

/* A3.3: a removed id is EINVAL everywhere (not EIDRM), and its key is gone. */
Test(engine_semget, removed_id_is_einval)
{
	struct sv_sembuf sop = { 0, 1, 0 };
	struct fx_stat st;
	long id = get(root, KEY, 2, SV_IPC_CREAT | 0600);

	cr_assert_eq(fx_semop(root, (int)id, NULL, NULL, 1, &sop), 0);
	cr_assert_eq(rmid((int)id), 0);
	cr_assert_eq(fx_semop(root, (int)id, NULL, NULL, 1, &sop), -EINVAL);
	cr_assert_eq(fx_getval(root, (int)id, 0), -EINVAL);
	cr_assert_eq(fx_semctl(root, (int)id, 0, SV_SETVAL, 1, NULL), -EINVAL);
	cr_assert_eq(fx_ipc_stat(root, (int)id, &st), -EINVAL);
	cr_assert_eq(rmid((int)id), -EINVAL);
	cr_assert_eq(get(root, KEY, 0, 0), -ENOENT);
	/* an id with the right index but another sequence is just as unknown */
	long id2 = get(root, SV_IPC_PRIVATE, 1, 0600);

	cr_assert_eq(id2, 1);
	cr_assert_eq(fx_getval(root, 1 + 32768, 0), -EINVAL);
	cr_assert_eq(fx_getval(root, 0, 0), -EINVAL);
}

/* A3.4: sem_next_id forces the next id (that index or the next free one), once. */
Test(engine_semget, sem_next_id)
{
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 0);
	sv_ns_set_next_id(fx_ns, 5);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 5);
	/* used once: the cyclic allocator carries on where it was */
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 1);

	sv_ns_set_next_id(fx_ns, 2 * 32768 + 7);
	cr_assert_eq(get(root, KEY, 1, SV_IPC_CREAT | 0600), 2 * 32768 + 7);
	cr_assert_eq(get(root, KEY, 0, 0), 2 * 32768 + 7, "found by key under its forced id");
	cr_assert_eq(fx_getval(root, 2 * 32768 + 7, 0), 0);

	/* index taken: the next free one above it, with the sequence asked for */
	sv_ns_set_next_id(fx_ns, 32768 + 5);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 32768 + 6);

	/* -1 clears it */
	sv_ns_set_next_id(fx_ns, 40);
	sv_ns_set_next_id(fx_ns, -1);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 2);

	/* a creation that fails before an id is allocated keeps the request */
	sv_ns_set_next_id(fx_ns, 20);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 0, 0600), -EINVAL);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 20);
}

/* A1.2: limits are per namespace; semmni outside [0, 32768] is ERANGE, the rest is taken. */
Test(engine_semget, limits)
{
	struct sv_limits lim, got;

	sv_ns_limits(fx_ns, &got);
	cr_assert_eq(got.semmsl, 32000);
	cr_assert_eq(got.semmns, 1024000000);
	cr_assert_eq(got.semopm, 500);
	cr_assert_eq(got.semmni, 32000);

	lim = (struct sv_limits){ 5, 6, 7, 32769 };
	cr_assert_eq(sv_ns_set_limits(fx_ns, &lim), -ERANGE);
	sv_ns_limits(fx_ns, &got);
	cr_assert_eq(got.semmsl, 5, "the other values are written, as /proc/sys/kernel/sem does");
	cr_assert_eq(got.semmns, 6);
	cr_assert_eq(got.semopm, 7);
	cr_assert_eq(got.semmni, 32000, "semmni keeps its old value");
	lim.semmni = -1;
	cr_assert_eq(sv_ns_set_limits(fx_ns, &lim), -ERANGE);
	sv_ns_limits(fx_ns, &got);
	cr_assert_eq(got.semmni, 32000);
	lim.semmni = 32768;
	cr_assert_eq(sv_ns_set_limits(fx_ns, &lim), 0);
	sv_ns_limits(fx_ns, &got);
	cr_assert_eq(got.semmni, 32768);

	/* the new values apply */
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 6, 0600), -EINVAL, "SEMMSL 5");
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 5, 0600), 0);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 2, 0600), -ENOSPC, "SEMMNS 6");
	struct sv_sembuf sops[8];

	for (int i = 0; i < 8; i++)
		sops[i] = (struct sv_sembuf){ (uint16_t)(i % 5), 1, 0 };
	cr_assert_eq(fx_semop(root, 0, NULL, NULL, 8, sops), -E2BIG, "SEMOPM 7");
	cr_assert_eq(fx_semop(root, 0, NULL, NULL, 7, sops), 0);
	cr_assert_eq(fx_getval(root, 0, 0), 2);
	lim = (struct sv_limits){ 5, 100, 7, 0 };
	cr_assert_eq(sv_ns_set_limits(fx_ns, &lim), 0);
	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), -ENOSPC, "SEMMNI 0");

	/* another namespace is untouched */
	struct sv_limits def;
	struct sv_ns *ns2;

	sv_limits_default(&def);
	ns2 = sv_ns_new(&def);
	cr_assert_not_null(ns2);
	sv_ns_limits(ns2, &got);
	cr_assert_eq(got.semmsl, 32000);
	cr_assert_eq(got.semmni, 32000);
	sv_ns_put(ns2);
}

/* A1.3: keys and ids are per namespace; a new namespace starts at id 0 again. */
Test(engine_semget, namespaces_are_independent)
{
	struct sv_limits def;
	struct sv_ns *ns2;
	struct fx_caller *fc2;
	long a, b;

	sv_limits_default(&def);
	ns2 = sv_ns_new(&def);
	cr_assert_not_null(ns2);
	fc2 = fx_caller_new(ns2, 100, 0, 0);

	cr_assert_eq(get(root, SV_IPC_PRIVATE, 1, 0600), 0);
	a = get(root, KEY, 1, SV_IPC_CREAT | 0600);
	cr_assert_eq(a, 1);
	cr_assert_eq(get(fc2, KEY, 1, 0600), -ENOENT, "a key of one namespace is not another's");
	b = get(fc2, KEY, 1, SV_IPC_CREAT | 0600);
	cr_assert_eq(b, 0, "a new namespace issues id 0");
	cr_assert_eq(fx_semctl(root, (int)a, 0, SV_SETVAL, 7, NULL), 0);
	cr_assert_eq(fx_getval(fc2, (int)b, 0), 0);
	cr_assert_eq(fx_getval(root, (int)a, 0), 7);
	cr_assert_eq(fx_getval(fc2, 1, 0), -EINVAL);

	fx_caller_exit(fc2, NULL);
	sv_ns_put(ns2);
}
