/* SPDX-License-Identifier: MIT */
/*
 * Budgets: how much of the supervisor's memory the tenants may hold at once, across every
 * namespace that shares a budget, in all and per uid. Five kinds are counted (enum
 * sv_budget_kind): semaphores, sets, SEM_UNDO entries, parked calls (waiters) and IPC
 * namespaces.
 *
 * Why. The kernel charges a set's memory, an undo entry's and a namespace's to the cgroup (and
 * the ucounts) of whoever made them, so a tenant that hoards them runs out of its own memory. A
 * supervisor holds every tenant's objects in one process; without a bound shared by all
 * namespaces, the per-namespace limits (about 1e9 semaphores each) and an unbounded number of
 * namespaces let one client grow the supervisor without end. A budget is that bound.
 *
 * What is charged, to whom, and where (each charge and its credit sit at the one place the
 * object becomes, and stops being, something the supervisor keeps):
 *  - sets and semaphores: to the set's creator (set->cuid, the euid that created it, in the
 *    supervisor's view: IPC_SET never changes it), when it gets its id, credited when it is
 *    unlinked (IPC_RMID, or its namespace ending), exactly where ns->used_sems moves (ns.c). Past
 *    a bound semget fails with ENOSPC, as the kernel's does at SEMMNS and SEMMNI.
 *  - undo entries: to the euid of the thread whose semop with SEM_UNDO made the entry, recorded
 *    in it (the creator again, as for sets: a later setuid does not move the charge), when it is
 *    linked to its set, credited when it leaves the set's list (IPC_RMID, the namespace's end,
 *    the process's exit), exactly where undo.c's live_entries moves. An entry's memory grows
 *    with its set (two bytes per semaphore), so it counts once per SV_BUDGET_UNDO_SEMS
 *    semaphores of its set, rounded up: one for every set of up to 32, 1000 for one of 32000.
 *    Past a bound the semop fails with ENOMEM, as the kernel's does when the entry's
 *    allocation fails.
 *  - waiters (parked semops): to the caller's euid, when the waiter is allocated (on the park
 *    path only), credited when it is freed (sv_waiter_free), whichever way it ended: completed,
 *    timed out or cancelled, dropped with its process, its set or its namespace. The waiter
 *    records the budget and uid it was charged to (and holds a reference to the budget), so the
 *    credit never depends on a namespace still being there. Allocation and freeing, rather than
 *    linking and unlinking, because the memory lives that long (a completed waiter waits on a
 *    wake queue for its answer), and because the wake-up passes, which unlink under set and
 *    semaphore locks, then stay as they were. The kernel has no such bound (a blocked task
 *    costs its own memory); past ours the semop that would park fails with ENOMEM, what an
 *    allocation failure gives.
 *  - namespaces: the notify layer's registry (nsreg.c) charges each IPC namespace it takes on to
 *    the uid owning the namespace's user namespace, as the kernel charges max_ipc_namespaces
 *    to the ucounts of that user namespace; sv_budget_charge_ns() refuses with ENOSPC, as
 *    unshare(CLONE_NEWIPC) fails there. What a refused namespace's calls see is the registry's
 *    business (nsreg.h).
 * New maxima apply to new charges only: what exists stays. So does what a restore brings back
 * from a process that stopped (state.c): its sets and undo entries are charged to the same
 * uids, without the maxima, since they existed already and shrunk maxima must not lose them.
 *
 * Locking: b->lock protects the totals' writes and the uid table. It is a leaf: nothing is
 * taken under it, and it may be taken under any engine lock (ids_lock for semget; ids_lock
 * and a set lock for removal; a set or semaphore lock and proc->lock for undo entries and the
 * park path) or none (sv_waiter_free, the registry). A semop that completes at once touches a
 * budget only when it makes its process's first undo entry for the set, a path that allocates
 * and takes the set lock anyway; the common semop, and one with an undo entry already made,
 * never do. The maxima and the totals are atomics, read without the lock (statistics, reloads).
 * The cost on the park path: the budget lock twice (charge, credit) and a reference count.
 */
#include <errno.h>
#include <string.h>

#include "engine/engine.h"

#define UID_BUCKETS 256

struct budget_uid {
	struct budget_uid *next;
	uint32_t uid;
	long n[SV_BUDGET_KINDS];
};

struct sv_budget {
	pthread_mutex_t lock;
	_Atomic long max[SV_BUDGET_KINDS], max_uid[SV_BUDGET_KINDS]; /* 0: no bound */
	_Atomic long used[SV_BUDGET_KINDS];			     /* (lock) written */
	_Atomic uint64_t refused[SV_BUDGET_KINDS];
	atomic_int refcount;
	struct budget_uid *uids[UID_BUCKETS]; /* (lock) uids with something charged */
};

struct sv_budget *sv_budget_new(const struct sv_budget_limits *lim)
{
	struct sv_budget *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	xmutex_init(&b->lock);
	b->refcount = 1;
	sv_budget_set_limits(b, lim);
	return b;
}

void sv_budget_get(struct sv_budget *b)
{
	atomic_fetch_add_explicit(&b->refcount, 1, memory_order_relaxed);
}

/* The last reference goes after every namespace and waiter charging it (each holds one). */
void sv_budget_put(struct sv_budget *b)
{
	if (!b || atomic_fetch_sub_explicit(&b->refcount, 1, memory_order_acq_rel) != 1)
		return;
	for (int i = 0; i < UID_BUCKETS; i++) {
		while (b->uids[i]) {
			struct budget_uid *u = b->uids[i];

			b->uids[i] = u->next;
			free(u);
		}
	}
	xmutex_destroy(&b->lock);
	free(b);
}

void sv_budget_set_limits(struct sv_budget *b, const struct sv_budget_limits *lim)
{
	const long max[SV_BUDGET_KINDS] = { lim->sems, lim->sets, lim->undos, lim->waiters,
					    lim->namespaces };
	const long max_uid[SV_BUDGET_KINDS] = { lim->sems_per_uid, lim->sets_per_uid,
						lim->undos_per_uid, lim->waiters_per_uid,
						lim->namespaces_per_uid };

	for (int k = 0; k < SV_BUDGET_KINDS; k++) {
		SV_SET_RELAXED(&b->max[k], max[k]);
		SV_SET_RELAXED(&b->max_uid[k], max_uid[k]);
	}
}

void sv_budget_info(struct sv_budget *b, struct sv_budget_info *out)
{
	memset(out, 0, sizeof(*out));
	out->limits = (struct sv_budget_limits){
		.sems = SV_RELAXED(&b->max[SV_BUDGET_SEMS]),
		.sems_per_uid = SV_RELAXED(&b->max_uid[SV_BUDGET_SEMS]),
		.sets = SV_RELAXED(&b->max[SV_BUDGET_SETS]),
		.sets_per_uid = SV_RELAXED(&b->max_uid[SV_BUDGET_SETS]),
		.undos = SV_RELAXED(&b->max[SV_BUDGET_UNDOS]),
		.undos_per_uid = SV_RELAXED(&b->max_uid[SV_BUDGET_UNDOS]),
		.waiters = SV_RELAXED(&b->max[SV_BUDGET_WAITERS]),
		.waiters_per_uid = SV_RELAXED(&b->max_uid[SV_BUDGET_WAITERS]),
		.namespaces = SV_RELAXED(&b->max[SV_BUDGET_NAMESPACES]),
		.namespaces_per_uid = SV_RELAXED(&b->max_uid[SV_BUDGET_NAMESPACES]),
	};
	for (int k = 0; k < SV_BUDGET_KINDS; k++) {
		out->used[k] = SV_RELAXED(&b->used[k]);
		out->refused_kind[k] = SV_RELAXED(&b->refused[k]);
		out->refused += out->refused_kind[k];
	}
	out->sems = out->used[SV_BUDGET_SEMS];
	out->sets = out->used[SV_BUDGET_SETS];
}

long sv_budget_uid_count(struct sv_budget *b, uint32_t uid, enum sv_budget_kind kind)
{
	long n = 0;

	xlock(&b->lock);
	for (struct budget_uid *u = b->uids[uid % UID_BUCKETS]; u; u = u->next)
		if (u->uid == uid)
			n = u->n[kind];
	xunlock(&b->lock);
	return n;
}

long sv_budget_uid_sems(struct sv_budget *b, uint32_t uid)
{
	return sv_budget_uid_count(b, uid, SV_BUDGET_SEMS);
}

/* caller holds b->lock */
static struct budget_uid **uid_slot(struct sv_budget *b, uint32_t uid)
{
	struct budget_uid **pp = &b->uids[uid % UID_BUCKETS];

	xassert_held(&b->lock);
	while (*pp && (*pp)->uid != uid)
		pp = &(*pp)->next;
	return pp;
}

/* Would n more of kind pass a maximum, for u (NULL: nothing charged yet)? caller holds b->lock */
static bool over(struct sv_budget *b, const struct budget_uid *u, enum sv_budget_kind kind, long n)
{
	long max = SV_RELAXED(&b->max[kind]), max_uid = SV_RELAXED(&b->max_uid[kind]);

	xassert_held(&b->lock);
	return (max > 0 && SV_RELAXED(&b->used[kind]) + n > max) ||
	       (max_uid > 0 && (u ? u->n[kind] : 0) + n > max_uid);
}

/* caller holds b->lock; u is uid's entry */
static void add(struct sv_budget *b, struct budget_uid *u, enum sv_budget_kind kind, long n)
{
	xassert_held(&b->lock);
	u->n[kind] += n;
	SV_SET_RELAXED(&b->used[kind], SV_RELAXED(&b->used[kind]) + n);
}

/* caller holds b->lock; *pp is uid's entry, freed once nothing is charged to it */
static void sub(struct sv_budget *b, struct budget_uid **pp, enum sv_budget_kind kind, long n)
{
	struct budget_uid *u = *pp;
	bool empty = true;

	xassert_held(&b->lock);
	SV_ASSERT(u && u->n[kind] >= n);
	SV_SET_RELAXED(&b->used[kind], SV_RELAXED(&b->used[kind]) - n);
	if (!u)
		return;
	u->n[kind] -= n;
	for (int k = 0; k < SV_BUDGET_KINDS; k++)
		empty &= u->n[k] == 0;
	if (empty) {
		*pp = u->next;
		free(u);
	}
}

/* charge()'s refusal for a restore: the maxima do not apply (sv_budget_charge_restore()). */
#define UNBOUNDED 0

/*
 * Charge n of kind (and, with n2, n2 of kind2 too, all or nothing) to uid: 0, refusal (passing
 * a maximum; counted against the first kind that would pass one), or -ENOMEM (no memory for
 * the uid's entry). refusal UNBOUNDED: no maximum is looked at.
 */
static int charge(struct sv_budget *b, uint32_t uid, enum sv_budget_kind kind, long n,
		  enum sv_budget_kind kind2, long n2, int refusal)
{
	struct budget_uid **pp, *u;
	int err = 0;

	xlock(&b->lock);
	pp = uid_slot(b, uid);
	u = *pp;
	if (refusal != UNBOUNDED && over(b, u, kind, n)) {
		atomic_fetch_add_explicit(&b->refused[kind], 1, memory_order_relaxed);
		err = refusal;
	} else if (refusal != UNBOUNDED && n2 && over(b, u, kind2, n2)) {
		atomic_fetch_add_explicit(&b->refused[kind2], 1, memory_order_relaxed);
		err = refusal;
	} else if (!u && !(u = *pp = calloc(1, sizeof(*u)))) {
		err = -ENOMEM;
	} else {
		u->uid = uid;
		add(b, u, kind, n);
		if (n2)
			add(b, u, kind2, n2);
	}
	xunlock(&b->lock);
	return err;
}

/* Charge n of one kind: charge() without a second. */
static int charge1(struct sv_budget *b, uint32_t uid, enum sv_budget_kind kind, long n, int refusal)
{
	return charge(b, uid, kind, n, kind, 0, refusal);
}

static void credit(struct sv_budget *b, uint32_t uid, enum sv_budget_kind kind, long n)
{
	xlock(&b->lock);
	sub(b, uid_slot(b, uid), kind, n);
	xunlock(&b->lock);
}

/*
 * Charge a new set of nsems semaphores to uid: 0, -ENOSPC (a maximum would be passed) or
 * -ENOMEM. Caller holds the namespace's ids_lock (so the set it charges for is not visible yet).
 */
int sv_budget_charge(struct sv_budget *b, uint32_t uid, int nsems)
{
	return charge(b, uid, SV_BUDGET_SEMS, nsems, SV_BUDGET_SETS, 1, -ENOSPC);
}

int sv_budget_charge_restore(struct sv_budget *b, uint32_t uid, int nsems)
{
	return charge(b, uid, SV_BUDGET_SEMS, nsems, SV_BUDGET_SETS, 1, UNBOUNDED);
}

/* Give back what sv_budget_charge() took for the same uid and nsems. */
void sv_budget_credit(struct sv_budget *b, uint32_t uid, int nsems)
{
	struct budget_uid **pp;

	xlock(&b->lock);
	pp = uid_slot(b, uid);
	/* the semaphores first: the entry goes with the last count, and sets is the last here */
	sub(b, pp, SV_BUDGET_SEMS, nsems);
	sub(b, uid_slot(b, uid), SV_BUDGET_SETS, 1);
	xunlock(&b->lock);
}

/* What an undo entry for a set of nsems semaphores counts (budget.c's header). */
static long undo_units(int nsems)
{
	return nsems <= 0 ? 1 : (nsems + SV_BUDGET_UNDO_SEMS - 1) / SV_BUDGET_UNDO_SEMS;
}

int sv_budget_charge_undo(struct sv_budget *b, uint32_t uid, int nsems)
{
	return charge1(b, uid, SV_BUDGET_UNDOS, undo_units(nsems), -ENOMEM);
}

void sv_budget_credit_undo(struct sv_budget *b, uint32_t uid, int nsems)
{
	credit(b, uid, SV_BUDGET_UNDOS, undo_units(nsems));
}

int sv_budget_charge_undo_restore(struct sv_budget *b, uint32_t uid, int nsems)
{
	return charge1(b, uid, SV_BUDGET_UNDOS, undo_units(nsems), UNBOUNDED);
}

int sv_budget_charge_waiter(struct sv_budget *b, uint32_t uid)
{
	return charge1(b, uid, SV_BUDGET_WAITERS, 1, -ENOMEM);
}

void sv_budget_credit_waiter(struct sv_budget *b, uint32_t uid)
{
	credit(b, uid, SV_BUDGET_WAITERS, 1);
}

int sv_budget_charge_ns(struct sv_budget *b, uint32_t uid)
{
	return charge1(b, uid, SV_BUDGET_NAMESPACES, 1, -ENOSPC);
}

void sv_budget_credit_ns(struct sv_budget *b, uint32_t uid)
{
	credit(b, uid, SV_BUDGET_NAMESPACES, 1);
}
