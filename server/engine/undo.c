/* SPDX-License-Identifier: MIT */
/*
 * SEM_UNDO: per-process adjust-on-exit values (ipc/sem.c's sem_undo_list and sem_undo).
 *
 * A struct sv_proc stands for one thread group in one namespace; its threads share it, as
 * CLONE_SYSVSEM threads share an undo list. It holds one struct sv_undo per set the process has
 * used with SEM_UNDO. Each entry is on two lists: the process's (an RCU list, so semop finds its
 * entry without a lock) and the set's (so SETVAL/SETALL can clear and IPC_RMID can drop them).
 *
 * Lifetimes. IPC_RMID unlinks a set's entries from both lists and frees them after a grace
 * period. Exit applies each entry and unlinks it from its set, but leaves it on the process's
 * list, marked with semid -1, until the proc itself is freed: a completed waiter that is rolled
 * back after the exit still looks at its entry, to learn that exit already compensated it.
 *
 * Budget. An entry is charged to its namespace's budget (budget.c) when it joins its set's list
 * and credited when it leaves it, where live_entries moves: an applied entry kept for rollback
 * costs little and goes with its proc. A refused charge fails the semop with ENOMEM.
 */
#include <errno.h>
#include <string.h>

#include "engine/engine.h"

/* Entries on some set's list: lets callers skip exit bookkeeping nobody needs. */
static atomic_long live_entries;

long sv_undo_entries(void)
{
	return atomic_load_explicit(&live_entries, memory_order_relaxed);
}

struct sv_ns *sv_proc_ns(const struct sv_proc *p)
{
	return p->ns;
}

struct sv_proc *sv_proc_new(struct sv_ns *ns, int32_t pid)
{
	struct sv_proc *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	xmutex_init(&p->lock);
	CDS_INIT_LIST_HEAD(&p->undos);
	sv_ns_get(ns);
	p->ns = ns;
	p->pid = pid;
	p->jkey = (uint64_t)(uint32_t)pid;
	p->refcount = 1;
	return p;
}

void sv_proc_get(struct sv_proc *p)
{
	atomic_fetch_add_explicit(&p->refcount, 1, memory_order_relaxed);
}

static void proc_free_rcu(struct rcu_head *head)
{
	struct sv_proc *p = caa_container_of(head, struct sv_proc, rcu);
	struct sv_undo *un, *tmp;

	/* Only exited entries are left: live ones would still be on a set's list. */
	cds_list_for_each_entry_safe(un, tmp, &p->undos, proc_node)
		free(un);
	xmutex_destroy(&p->lock);
	free(p);
}

void sv_proc_put(struct sv_proc *p)
{
	if (atomic_fetch_sub_explicit(&p->refcount, 1, memory_order_acq_rel) != 1)
		return;
	/* A proc nobody exited would leave entries on sets' lists: exit it now. */
	if (!atomic_load_explicit(&p->dead, memory_order_acquire)) {
		struct sv_wakeq wq;

		sv_wakeq_init(&wq);
		sv_proc_exit(p, &wq);
		/*
		 * Waiters released here have nobody to deliver to: a caller that wants them
		 * delivered calls sv_proc_exit() itself first.
		 */
		while (!sv_wakeq_empty(&wq))
			sv_waiter_free(sv_wakeq_pop(&wq));
	}
	/* Not from the callback: the last namespace reference waits for callbacks (rcu_barrier). */
	sv_ns_put(p->ns);
	call_rcu(&p->rcu, proc_free_rcu);
}

/* caller holds p->lock, or is in RCU (the list is an RCU list) */
static struct sv_undo *lookup_undo(struct sv_proc *p, int semid)
{
	struct sv_undo *un;

	SV_ASSERT(xmutex_held(&p->lock) || sv_rcu_reader());
	cds_list_for_each_entry_rcu(un, &p->undos, proc_node)
	{
		if (un->semid == semid)
			return un;
	}
	return NULL;
}

/* under RCU: the entry returned stays valid until the read side ends */
struct sv_undo *sv_undo_lookup(const struct sv_caller *c, int semid)
{
	struct sv_undo *un;

	sv_rcu_assert_reader();
	if (!c->proc)
		return NULL;
	xlock(&c->proc->lock);
	un = lookup_undo(c->proc, semid);
	xunlock(&c->proc->lock);
	return un;
}

/*
 * find_alloc_undo(). Called under rcu_read_lock(); the entry returned stays valid while the set
 * is locked and un->semid is checked again under that lock.
 */
struct sv_undo *sv_undo_find_alloc(const struct sv_caller *c, int semid, int *err)
{
	struct sv_proc *p = c->proc;
	struct sv_undo *un, *fresh;
	struct sv_set *set;

	sv_rcu_assert_reader();
	if (!p) {
		*err = -ENOMEM;
		return NULL;
	}
	xlock(&p->lock);
	un = lookup_undo(p, semid);
	xunlock(&p->lock);
	if (un)
		return un;

	SV_DEBUG_YIELD(); /* another thread of the process may add the entry meanwhile */
	set = sv_set_lookup(c->ns, semid);
	if (!set) {
		*err = -EINVAL;
		return NULL;
	}
	fresh = calloc(1, sizeof(*fresh) + (size_t)set->nsems * sizeof(fresh->semadj[0]));
	if (!fresh) {
		*err = -ENOMEM;
		return NULL;
	}

	SV_DEBUG_YIELD(); /* found without a lock: IPC_RMID may get there first */
	sv_sem_lock(set, NULL, 0);
	if (set->deleted) {
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
		free(fresh);
		*err = -EIDRM;
		return NULL;
	}
	xlock(&p->lock);
	/* Another thread of the process may have been quicker; or the process is gone. */
	un = lookup_undo(p, semid);
	*err = -EIDRM;
	if (!un && !atomic_load_explicit(&p->dead, memory_order_relaxed) &&
	    !(set->ns->budget &&
	      (*err = sv_budget_charge_undo(set->ns->budget, c->cred->euid, set->nsems)))) {
		fresh->proc = p;
		fresh->semid = semid;
		fresh->nsems = set->nsems;
		fresh->budget_uid = c->cred->euid;
		cds_list_add_rcu(&fresh->proc_node, &p->undos);
		cds_list_add(&fresh->set_node, &set->undos);
		atomic_fetch_add_explicit(&live_entries, 1, memory_order_relaxed);
		un = fresh;
		fresh = NULL;
	}
	xunlock(&p->lock);
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
	free(fresh);
	return un;
}

void sv_undo_link(struct sv_proc *p, struct sv_set *set, struct sv_undo *un)
{
	SV_ASSERT(sv_set_locked_global(set) && !set->deleted);
	sv_rcu_assert_reader();
	un->proc = p;
	xlock(&p->lock);
	SV_ASSERT(!atomic_load_explicit(&p->dead, memory_order_relaxed));
	cds_list_add_rcu(&un->proc_node, &p->undos);
	cds_list_add(&un->set_node, &set->undos);
	atomic_fetch_add_explicit(&live_entries, 1, memory_order_relaxed);
	xunlock(&p->lock);
}

static void undo_free_rcu(struct rcu_head *head)
{
	free(caa_container_of(head, struct sv_undo, rcu));
}

/* IPC_RMID drops the set's entries. Caller holds the set lock (complex mode), is in RCU. */
void sv_undo_unlink_all(struct sv_set *set)
{
	struct sv_undo *un, *tmp;

	SV_ASSERT(sv_set_locked_global(set));
	sv_rcu_assert_reader();
	cds_list_for_each_entry_safe(un, tmp, &set->undos, set_node) {
		struct sv_proc *p = un->proc;

		cds_list_del(&un->set_node);
		atomic_fetch_sub_explicit(&live_entries, 1, memory_order_relaxed);
		if (set->ns->budget)
			sv_budget_credit_undo(set->ns->budget, un->budget_uid, un->nsems);
		xlock(&p->lock);
		un->semid = -1;
		cds_list_del_rcu(&un->proc_node);
		xunlock(&p->lock);
		call_rcu(&un->rcu, undo_free_rcu);
	}
}

/* The first entry not yet applied, or NULL. Caller holds p->lock. */
static struct sv_undo *first_live(struct sv_proc *p)
{
	struct sv_undo *un;

	xassert_held(&p->lock);
	cds_list_for_each_entry(un, &p->undos, proc_node) {
		if (un->semid != -1)
			return un;
	}
	return NULL;
}

/*
 * An entry applied at exit leaves its set's list; it stays on the process's until the process
 * is freed. Caller holds the set lock (complex mode) and p->lock.
 */
static void retire(struct sv_set *set, struct sv_undo *un)
{
	SV_ASSERT(sv_set_locked_global(set));
	cds_list_del(&un->set_node);
	atomic_fetch_sub_explicit(&live_entries, 1, memory_order_relaxed);
	if (set->ns->budget)
		sv_budget_credit_undo(set->ns->budget, un->budget_uid, un->nsems);
	un->semid = -1;
}

struct sv_undo *sv_undo_replay_entry(struct sv_proc *p, struct sv_set *set, uint32_t budget_uid)
{
	struct sv_budget *b = set->ns->budget;
	struct sv_undo *un;

	xlock(&p->lock);
	un = lookup_undo(p, set->id);
	xunlock(&p->lock);
	if (un)
		return un;
	un = calloc(1, sizeof(*un) + (size_t)set->nsems * sizeof(un->semadj[0]));
	if (!un)
		return NULL;
	if (b && sv_budget_charge_undo_restore(b, budget_uid, set->nsems)) {
		free(un);
		return NULL;
	}
	un->semid = set->id;
	un->nsems = set->nsems;
	un->budget_uid = budget_uid;
	rcu_read_lock();
	sv_sem_lock(set, NULL, 0);
	sv_undo_link(p, set, un);
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
	rcu_read_unlock();
	return un;
}

void sv_undo_replay_retire(struct sv_proc *p, struct sv_set *set)
{
	struct sv_undo *un;

	rcu_read_lock();
	sv_sem_lock(set, NULL, 0);
	xlock(&p->lock);
	un = lookup_undo(p, set->id);
	if (un)
		retire(set, un);
	xunlock(&p->lock);
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
	rcu_read_unlock();
}

void sv_proc_exit(struct sv_proc *p, struct sv_wakeq *wq)
{
	struct sv_undo *un;

	xlock(&p->lock);
	/* Pairs with the acquire in sem.c's orphaned(): from here on its waiters are dropped. */
	if (atomic_exchange_explicit(&p->dead, true, memory_order_seq_cst)) {
		xunlock(&p->lock);
		return;
	}
	xunlock(&p->lock);

	for (;;) {
		struct sv_set *set;
		int semid;

		rcu_read_lock();
		xlock(&p->lock);
		un = first_live(p);
		semid = un ? un->semid : -1;
		xunlock(&p->lock);
		if (!un) {
			rcu_read_unlock();
			break;
		}

		SV_DEBUG_YIELD(); /* the entry was seen under p->lock only: IPC_RMID may take it */
		set = sv_set_lookup(p->ns, semid);
		if (!set) {
			/* IPC_RMID got there first and is unlinking the entry: look again. */
			rcu_read_unlock();
			continue;
		}
		sv_sem_lock(set, NULL, 0);
		if (set->deleted) {
			sv_sem_unlock(set, SV_LOCK_GLOBAL);
			rcu_read_unlock();
			continue;
		}
		xlock(&p->lock);
		un = lookup_undo(p, semid);
		if (un)
			retire(set, un);
		xunlock(&p->lock);
		if (!un) {
			/* removed, and a new set took the same id: nothing to do for it */
			sv_sem_unlock(set, SV_LOCK_GLOBAL);
			rcu_read_unlock();
			continue;
		}

		sv_fast_exit(set, un); /* its page's semadj joins the list's */
		for (int i = 0; i < set->nsems && i < un->nsems; i++) {
			struct sv_sem *sem;

			if (!un->semadj[i])
				continue;
			sem = sv_sem_val(set, i);
			sem->semval += un->semadj[i];
			/* Not defined by SUS; Linux clamps to the valid range. */
			if (sem->semval < 0)
				sem->semval = 0;
			if (sem->semval > SV_SEMVMX)
				sem->semval = SV_SEMVMX;
			sem->sempid = p->pid;
			sv_fast_set_tag(set, i, 0); /* it has no page any more */
			sv_jnl_sem(set, i);
		}
		sv_jnl_undo_gone(set, un);
		sv_do_smart_update(set, NULL, 0, true, wq);
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
		rcu_read_unlock();
	}
}
