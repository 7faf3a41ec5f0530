/* SPDX-License-Identifier: MIT */
/*
 * Budgets: how many semaphores and sets may exist at once across every namespace that shares a
 * budget, in all and per creating uid.
 *
 * The kernel charges a set's memory to the cgroup of whoever made it, so a tenant that hoards
 * semaphores runs out of its own memory. A supervisor holds every tenant's sets in one process;
 * without a bound shared by all namespaces, the per-namespace limits (about 1e9 semaphores each)
 * and an unbounded number of namespaces let one client grow the supervisor without end. A budget
 * is that bound. A set is charged to its creator (set->cuid, the euid that created it, in the
 * supervisor's view: IPC_SET never changes it) when it gets its id, and credited when it is
 * unlinked (IPC_RMID, or its namespace ending), exactly where ns->used_sems moves; a semget that
 * would go over fails with ENOSPC, as the kernel's does at SEMMNS and SEMMNI. New maxima apply
 * to creations only: sets that exist stay.
 *
 * Locking: b->lock protects the totals' writes and the uid table. It is taken under ns->ids_lock
 * (semget) and under ids_lock plus a set lock (unlink), and is a leaf: nothing is taken under it.
 * Nothing on the semop path touches a budget. The maxima and the totals are atomics, read
 * without the lock (statistics, reloads).
 */
#include <errno.h>
#include <string.h>

#include "engine/engine.h"

#define UID_BUCKETS 256

struct budget_uid {
	struct budget_uid *next;
	uint32_t uid;
	long sems, sets;
};

struct sv_budget {
	pthread_mutex_t lock;
	_Atomic long max_sems, max_sems_uid, max_sets, max_sets_uid; /* 0: no bound */
	_Atomic long sems, sets; /* (lock) written; read anywhere */
	_Atomic uint64_t refused;
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

/* The last reference goes after every namespace charging it has (each holds one). */
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
	SV_SET_RELAXED(&b->max_sems, lim->sems);
	SV_SET_RELAXED(&b->max_sems_uid, lim->sems_per_uid);
	SV_SET_RELAXED(&b->max_sets, lim->sets);
	SV_SET_RELAXED(&b->max_sets_uid, lim->sets_per_uid);
}

void sv_budget_info(struct sv_budget *b, struct sv_budget_info *out)
{
	out->limits = (struct sv_budget_limits){
		.sems = SV_RELAXED(&b->max_sems),
		.sems_per_uid = SV_RELAXED(&b->max_sems_uid),
		.sets = SV_RELAXED(&b->max_sets),
		.sets_per_uid = SV_RELAXED(&b->max_sets_uid),
	};
	out->sems = SV_RELAXED(&b->sems);
	out->sets = SV_RELAXED(&b->sets);
	out->refused = SV_RELAXED(&b->refused);
}

long sv_budget_uid_sems(struct sv_budget *b, uint32_t uid)
{
	long n = 0;

	xlock(&b->lock);
	for (struct budget_uid *u = b->uids[uid % UID_BUCKETS]; u; u = u->next)
		if (u->uid == uid)
			n = u->sems;
	xunlock(&b->lock);
	return n;
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

static bool over(long max, long used, long more)
{
	return max > 0 && used + more > max;
}

/*
 * Charge a new set of nsems semaphores to uid: 0, -ENOSPC (a maximum would be passed) or
 * -ENOMEM. Caller holds the namespace's ids_lock (so the set it charges for is not visible yet).
 */
int sv_budget_charge(struct sv_budget *b, uint32_t uid, int nsems)
{
	struct budget_uid **pp, *u;
	int err = 0;

	xlock(&b->lock);
	pp = uid_slot(b, uid);
	u = *pp;
	if (over(SV_RELAXED(&b->max_sems), SV_RELAXED(&b->sems), nsems) ||
	    over(SV_RELAXED(&b->max_sets), SV_RELAXED(&b->sets), 1) ||
	    over(SV_RELAXED(&b->max_sems_uid), u ? u->sems : 0, nsems) ||
	    over(SV_RELAXED(&b->max_sets_uid), u ? u->sets : 0, 1)) {
		atomic_fetch_add_explicit(&b->refused, 1, memory_order_relaxed);
		err = -ENOSPC;
	} else if (!u && !(u = *pp = calloc(1, sizeof(*u)))) {
		err = -ENOMEM;
	} else {
		u->uid = uid;
		u->sems += nsems;
		u->sets++;
		SV_SET_RELAXED(&b->sems, SV_RELAXED(&b->sems) + nsems);
		SV_SET_RELAXED(&b->sets, SV_RELAXED(&b->sets) + 1);
	}
	xunlock(&b->lock);
	return err;
}

/* Give back what sv_budget_charge() took for the same uid and nsems. */
void sv_budget_credit(struct sv_budget *b, uint32_t uid, int nsems)
{
	struct budget_uid **pp, *u;

	xlock(&b->lock);
	pp = uid_slot(b, uid);
	u = *pp;
	SV_ASSERT(u && u->sems >= nsems && u->sets >= 1);
	if (u) {
		u->sems -= nsems;
		u->sets--;
		if (!u->sets) {
			*pp = u->next;
			free(u);
		}
	}
	SV_SET_RELAXED(&b->sems, SV_RELAXED(&b->sems) - nsems);
	SV_SET_RELAXED(&b->sets, SV_RELAXED(&b->sets) - 1);
	xunlock(&b->lock);
}
