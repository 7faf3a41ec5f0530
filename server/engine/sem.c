/* SPDX-License-Identifier: MIT */
/*
 * System V semaphores, served from user space.
 *
 * What callers see
 * ----------------
 * Exactly Linux's semop(2)/semtimedop(2) semantics: an operation (an array of sops) applies
 * atomically and in array order, or not at all; it fails with ERANGE if a value would pass
 * SEMVMX or a semadj would leave [-32768, 32767]; it waits if a decrement would go below zero or
 * a wait-for-zero finds a non-zero value, unless the sop that blocks has IPC_NOWAIT (EAGAIN).
 * Waiting operations are served in FIFO order by whoever changes the values they wait for, and
 * that caller executes them within its own call: a GETVAL right after a V already shows the
 * waiter's decrement. There is no starvation protection (a later -1 completes while an earlier
 * -5 still waits), just as in the kernel.
 *
 * Internals
 * ---------
 * Nobody sleeps here. An operation that has to wait is "parked": a struct sv_waiter goes on a
 * pending list and the caller gets it back as a ticket. Simple waiters (one sop) sit on their
 * semaphore's lists, complex ones (several sops) on the set's; as in the kernel, while any
 * complex waiter exists every simple decrement waiter is merged into the set's list too
 * (merge_queues/unmerge_queues), so one scan sees them all in arrival order.
 *
 * Completing a waiter appends it to the caller's wake queue (struct sv_wakeq); the caller sends
 * the answers after every engine lock is released. If an answer cannot be delivered (the waiting
 * thread was interrupted or died), sv_waiter_rollback() undoes exactly what completing it applied
 * and re-runs the wake-up pass, so no semaphore value is lost.
 *
 * Locking
 * -------
 * Sets are found without a lock, under RCU (ns.c), and permissions are checked there too. Then:
 *  - a semop with one sop takes only that semaphore's lock (sem->lock), if the set is in simple
 *    mode;
 *  - everything else (several sops, semctl on the whole set, exit processing, removal) takes the
 *    set lock and switches the set to complex mode, in which the set lock covers all semaphores.
 * set->use_global_lock says which mode the set is in. Entering complex mode (complexmode_enter)
 * sets it, then takes and drops every semaphore lock once, so every simple operation that
 * started earlier has finished, and every later one sees the flag and queues on the set lock.
 * The set stays in complex mode while complex waiters are parked, and for
 * SV_GLOBAL_LOCK_HYSTERESIS more global sections after that, so that alternating simple and
 * complex calls do not pay for the switch every time.
 *
 * Memory ordering
 * ---------------
 * [SEM_BARRIER_1] A simple op that takes sem->lock and then finds use_global_lock == 0 must see
 *   everything done under the set lock by the last complex-mode holder. The load in sv_sem_lock()
 *   is an acquire that pairs with the release store of 0 in complexmode_tryleave().
 * [SEM_BARRIER_2] Entering complex mode stores use_global_lock (relaxed) before taking and
 *   dropping each sem->lock; the unlock releases that store to the next holder of the sem lock,
 *   whose acquire-load then sees complex mode.
 *
 * Checks
 * ------
 * The rules above are written on each function ("caller holds set->lock") and checked on entry in
 * the debug build (make DEBUG=1): sv_set_locked_global() for the set lock in complex mode,
 * covers() for "the lock(s) covering sops", sv_rcu_assert_reader() for the lockless paths. The
 * debug build also yields at random at SV_DEBUG_YIELD(): inside the two [SEM_BARRIER] windows,
 * between a lockless lookup and the lock that confirms it, and while a lock is held.
 *
 * Deviation from the kernel, on purpose: the kernel keeps an otime per semaphore and reports
 * their maximum; only the maximum is observable, so the set keeps that maximum directly.
 */
#include <errno.h>
#include <string.h>

#include "engine/engine.h"

#define S_IRUGO_    0444
#define S_IWUGO_    0222
#define SEMOPM_FAST 64 /* sops copied on the stack up to this many */

/* ---- the caller's memory ---- */

int sv_copy_in(const struct sv_caller *c, uint64_t addr, void *buf, size_t len)
{
	if (c->ops && c->ops->read)
		return c->ops->read(c, addr, buf, len);
	if (!addr)
		return -EFAULT;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

int sv_copy_out(const struct sv_caller *c, uint64_t addr, const void *buf, size_t len)
{
	if (c->ops && c->ops->write)
		return c->ops->write(c, addr, buf, len);
	if (!addr)
		return -EFAULT;
	memcpy((void *)(uintptr_t)addr, buf, len);
	return 0;
}

/* ---- permissions (ipcperms) ---- */

/*
 * Have the caller's ops fill in what its credentials lack: 0, -SV_EGONE, or why they could not
 * be read (the call's answer then).
 */
static int cred_need(const struct sv_caller *c, unsigned int what)
{
	int rc;

	if (!(c->cred->missing & what))
		return 0;
	if (!c->ops || !c->ops->cred_fill)
		return -EACCES; /* nobody can tell: no privilege is assumed */
	rc = c->ops->cred_fill(c, what);
	return rc < 0 ? rc : 0;
}

/*
 * in_group_p(cgid) || in_group_p(gid): fsgid, or a supplementary group, is either. The list is
 * asked for only when fsgid is neither. 1, 0, or -errno from cred_need().
 */
static int in_group(const struct sv_caller *c, uint32_t cgid, uint32_t gid)
{
	const struct sv_cred *cr = c->cred;
	int rc;

	if (cr->fsgid == cgid || cr->fsgid == gid)
		return 1;
	if ((rc = cred_need(c, SV_CRED_GROUPS)))
		return rc;
	for (int i = 0; i < cr->ngroups; i++)
		if (cr->groups[i] == cgid || cr->groups[i] == gid)
			return 1;
	return 0;
}

/*
 * A change is committed (sv_committing()) under the set lock while its caller's call is still
 * pending, and so before anything that caller does next: a removal made before its caller
 * dropped root, say. The call may end (a signal) between that check and the change showing,
 * so an observer ordered after the caller's next step could still find the set there, by
 * checks made without the lock (permission, range), and report it there after the removal's
 * caller had lost the right to remove it. The kernel's removal cannot be seen half done by
 * anyone ordered after its caller; waiting out the lock gives the same. Errors only: a call
 * that goes on takes the lock anyway, and finds the set deleted then (EIDRM).
 */
int sv_settle(struct sv_set *set, int err)
{
	bool deleted;

	sv_rcu_assert_reader();
	sv_lock_assert_not_held(&set->lock);
	if (err != -EACCES && err != -EINVAL && err != -EFBIG)
		return err;
	sv_lock(&set->lock);
	deleted = set->deleted;
	sv_unlock(&set->lock);
	return deleted ? -EINVAL : err; /* as a lookup made after the removal finds it */
}

/*
 * ipcperms(): 0 if granted, -EACCES, or -errno from cred_need(). Lockless, under RCU and not
 * under the set lock (cred_fill may read /proc): an IPC_SET racing with this check is as benign
 * here as in the kernel. The groups are looked at only when
 * the class they decide (group or other) grants differently, the capabilities only when the
 * mode denies.
 */
int sv_ipcperms(const struct sv_caller *c, const struct sv_set *set, int flag)
{
	const struct sv_cred *cr = c->cred;
	int requested = (flag >> 6) | (flag >> 3) | flag;
	int granted = (int)SV_RELAXED(&set->mode), in;

	sv_rcu_assert_reader();
	sv_lock_assert_not_held(&set->lock);
	if (cr->euid == SV_RELAXED(&set->cuid) || cr->euid == SV_RELAXED(&set->uid)) {
		granted >>= 6;
	} else if (((granted >> 3) ^ granted) & requested & 0007) {
		in = in_group(c, SV_RELAXED(&set->cgid), SV_RELAXED(&set->gid));
		if (in < 0)
			return in;
		if (in)
			granted >>= 3;
	}
	if (!(requested & ~granted & 0007))
		return 0;
	if ((in = cred_need(c, SV_CRED_CAPS)))
		return in;
	return cr->cap_ipc_owner ? 0 : -EACCES;
}

/*
 * Owner, creator, or CAP_SYS_ADMIN (IPC_SET, IPC_RMID): 0, -EPERM, or -errno (cred_need()).
 * Under RCU and not under the set lock, as sv_ipcperms().
 */
int sv_is_owner(const struct sv_caller *c, const struct sv_set *set)
{
	uint32_t euid = c->cred->euid;
	int rc;

	sv_rcu_assert_reader();
	sv_lock_assert_not_held(&set->lock);
	if (euid == SV_RELAXED(&set->cuid) || euid == SV_RELAXED(&set->uid))
		return 0;
	if ((rc = cred_need(c, SV_CRED_CAPS)))
		return rc;
	return c->cred->cap_sys_admin ? 0 : -EPERM;
}

int sv_committing(const struct sv_caller *c)
{
	if (!c->ops || !c->ops->committing)
		return 0;
	return c->ops->committing(c) ? -SV_EGONE : 0;
}

/* ---- lock modes ---- */

static void lock_set(struct sv_set *set)
{
	switch (sv_lock(&set->lock)) {
	case SV_LOCK_FAST:
		break;
	case SV_LOCK_SPUN:
		SV_COUNT(&set->lock_spun);
		break;
	case SV_LOCK_SLEPT:
		SV_COUNT(&set->lock_slept);
		break;
	}
}

static void lock_sem(struct sv_sem *sem)
{
	switch (sv_lock(&sem->lock)) {
	case SV_LOCK_FAST:
		break;
	case SV_LOCK_SPUN:
		SV_COUNT(&sem->lock_spun);
		break;
	case SV_LOCK_SLEPT:
		SV_COUNT(&sem->lock_slept);
		break;
	}
}

/* caller holds set->lock */
static void complexmode_enter(struct sv_set *set)
{
	sv_lock_assert_held(&set->lock);
	if (SV_RELAXED(&set->use_global_lock)) {
		/* already in complex mode: just restart the hysteresis count */
		SV_SET_RELAXED(&set->use_global_lock, SV_GLOBAL_LOCK_HYSTERESIS);
		return;
	}
	SV_SET_RELAXED(&set->use_global_lock, SV_GLOBAL_LOCK_HYSTERESIS);
	SV_DEBUG_YIELD(); /* simple ops racing with the switch: some still in flight, some not */
	/* [SEM_BARRIER_2]: wait out simple ops in flight; later ones will see the flag */
	for (int i = 0; i < set->nsems; i++) {
		lock_sem(&sv_sems(set)[i]);
		sv_unlock(&sv_sems(set)[i].lock);
	}
}

/* caller holds set->lock */
static void complexmode_tryleave(struct sv_set *set)
{
#ifdef SV_FORCE_GLOBAL_LOCK
	(void)set;
#else
	int v;

	sv_lock_assert_held(&set->lock);
	if (set->complex_count)
		return; /* complex waiters are parked: simple ops must see the set's lists */
	v = SV_RELAXED(&set->use_global_lock);
	if (v == 1)
		atomic_store_explicit(&set->use_global_lock, 0,
				      memory_order_release); /* [SEM_BARRIER_1] */
	else if (v > 1)
		SV_SET_RELAXED(&set->use_global_lock, v - 1);
#endif
}

/*
 * Lock what an operation needs: the single semaphore for a one-sop operation on a set in simple
 * mode, else the whole set (nsops 0: the whole set, for semctl and exit processing).
 * Returns the semaphore number locked or SV_LOCK_GLOBAL. Call under RCU or holding a reference.
 */
int sv_sem_lock(struct sv_set *set, const struct sv_sembuf *sops, unsigned int nsops)
{
	SV_ASSERT(sv_rcu_reader() || SV_RELAXED(&set->refcount) > 0);
#ifndef SV_FORCE_GLOBAL_LOCK
	if (nsops == 1) {
		int semnum = sops->sem_num;
		struct sv_sem *sem = &sv_sems(set)[semnum];

		if (!SV_RELAXED(&set->use_global_lock)) {
			lock_sem(sem);
			SV_DEBUG_YIELD(); /* a complex op may switch modes right now */
			/* [SEM_BARRIER_1] */
			if (!atomic_load_explicit(&set->use_global_lock, memory_order_acquire))
				return semnum;
			sv_unlock(&sem->lock);
		}
		lock_set(set);
		SV_DEBUG_YIELD();
		/* Complex mode ended while we waited: we may take the semaphore after all. */
		if (!SV_RELAXED(&set->use_global_lock)) {
			lock_sem(sem);
			sv_unlock(&set->lock);
			return semnum;
		}
		/* A simple op under the set lock: the set already is in complex mode. */
		return SV_LOCK_GLOBAL;
	}
#else
	(void)sops;
	(void)nsops;
#endif
	lock_set(set);
	complexmode_enter(set);
	return SV_LOCK_GLOBAL;
}

/* caller holds set->lock (complex mode): simple decrement waiters go back to their semaphores */
static void unmerge_queues(struct sv_set *set)
{
	struct sv_waiter *w, *tmp;

	SV_ASSERT(sv_set_locked_global(set));
	if (set->complex_count)
		return;
	cds_list_for_each_entry_safe(w, tmp, &set->pending_alter, node) {
		cds_list_del(&w->node);
		cds_list_add_tail(&w->node, &sv_sems(set)[w->sops[0].sem_num].pending_alter);
	}
}

/*
 * caller holds set->lock (complex mode): the first complex waiter arrives, collect the simple
 * ones
 */
static void merge_queues(struct sv_set *set)
{
	SV_ASSERT(sv_set_locked_global(set));
	/* As the kernel's list_splice_init(): each semaphore's list goes to the front. */
	for (int i = 0; i < set->nsems; i++) {
		struct cds_list_head *l = &sv_sems(set)[i].pending_alter;

		if (cds_list_empty(l))
			continue;
		cds_list_splice(l, &set->pending_alter);
		CDS_INIT_LIST_HEAD(l);
	}
}

void sv_sem_unlock(struct sv_set *set, int locknum)
{
	SV_DEBUG_YIELD(); /* others pile up on the lock held: contention, and mode switches */
	if (sv_jnl_on())
		sv_jnl_flush(); /* before anyone can see what the section changed */
	if (SV_RELAXED(&set->fast_on))
		sv_fast_release(set, locknum);
	if (locknum == SV_LOCK_GLOBAL) {
		unmerge_queues(set);
		complexmode_tryleave(set);
		sv_unlock(&set->lock);
	} else {
		sv_unlock(&sv_sems(set)[locknum].lock);
	}
}

/* ---- times ---- */

/* Any lock on the set: otime only moves forward, so racing updates cannot undo each other. */
static void sv_set_otime(struct sv_set *set)
{
	int64_t now = sv_now();
	int64_t cur = SV_RELAXED(&set->otime);

	while (cur < now && !atomic_compare_exchange_weak_explicit(
				&set->otime, &cur, now, memory_order_relaxed, memory_order_relaxed))
		;
}

/* ---- the operation itself ---- */

/*
 * For assertions: does the caller hold what protects the semaphores of sops (every semaphore when
 * sops is NULL)? The set lock in complex mode covers them all; in simple mode each semaphore's
 * own lock covers it. Debug builds only; release builds get a stand-in that type-checks.
 */
#ifdef SV_DEBUG
static bool covers(const struct sv_set *set, const struct sv_sembuf *sops, unsigned int nsops)
{
	if (sv_set_locked_global(set))
		return true;
	if (!sops)
		return false;
	for (unsigned int i = 0; i < nsops; i++)
		if (!sv_lock_held(&sv_sems(set)[sops[i].sem_num].lock))
			return false;
	return true;
}
#else
#define covers(set, sops, nsops) ((void)(set), (void)(sops), (void)(nsops), true)
#endif

/* For the journal: what applying or undoing sops changed. Caller holds the locks covering sops. */
static void note_sops(struct sv_set *set, const struct sv_sembuf *sops, unsigned int nsops,
		      const struct sv_undo *un)
{
	for (unsigned int i = 0; i < nsops; i++) {
		sv_jnl_sem(set, sops[i].sem_num);
		if ((sops[i].sem_flg & SV_SEM_UNDO) && un)
			sv_jnl_adj(set, un, sops[i].sem_num);
	}
}

/*
 * Apply sops in order, all or nothing. Returns 0 (applied), 1 (must wait: *blocking is the sop
 * that cannot proceed), -EAGAIN (that sop has IPC_NOWAIT) or -ERANGE. On success every named
 * semaphore's sempid becomes pid (whose fast path tag is tag); oldpid (if given) keeps what it
 * was, for rollback. Caller holds the lock(s) covering every semaphore in sops.
 */
static int perform_atomic_semop(struct sv_set *set, const struct sv_sembuf *sops,
				unsigned int nsops, struct sv_undo *un, int32_t pid, uint32_t tag,
				int32_t *oldpid, unsigned int *blocking)
{
	unsigned int i;
	int result;

	SV_ASSERT(covers(set, sops, nsops));
	for (i = 0; i < nsops; i++) {
		const struct sv_sembuf *sop = &sops[i];
		struct sv_sem *sem = sv_sem_val(set, sop->sem_num);

		result = sem->semval;
		if (!sop->sem_op && result)
			goto would_block;
		result += sop->sem_op;
		if (result < 0)
			goto would_block;
		if (result > SV_SEMVMX) {
			result = -ERANGE;
			goto undo;
		}
		if (sop->sem_flg & SV_SEM_UNDO) {
			int adj = un->semadj[sop->sem_num] - sop->sem_op;

			if (adj < -SV_SEMAEM - 1 || adj > SV_SEMAEM) {
				result = -ERANGE;
				goto undo;
			}
			un->semadj[sop->sem_num] = (int16_t)adj;
		}
		sem->semval = result;
	}

	for (i = 0; i < nsops; i++) {
		struct sv_sem *sem = &sv_sems(set)[sops[i].sem_num];

		if (oldpid)
			oldpid[i] = sem->sempid;
		sem->sempid = pid;
		sv_fast_set_tag(set, sops[i].sem_num, tag);
		if (sops[i].sem_flg & SV_SEM_UNDO)
			sv_fast_mirror(set, un, sops[i].sem_num);
		SV_COUNT(&sem->nops);
	}
	if (sv_jnl_on())
		note_sops(set, sops, nsops, un);
	return 0;

would_block:
	*blocking = i;
	result = (sops[i].sem_flg & SV_IPC_NOWAIT) ? -EAGAIN : 1;
undo:
	while (i-- > 0) {
		sv_sems(set)[sops[i].sem_num].semval -= sops[i].sem_op;
		if (sops[i].sem_flg & SV_SEM_UNDO)
			un->semadj[sops[i].sem_num] += sops[i].sem_op;
	}
	return result;
}

static int waiter_perform(struct sv_set *set, struct sv_waiter *w)
{
	unsigned int blocking = w->blocking;
	int ret = perform_atomic_semop(set, w->sops, w->nsops, w->un, w->proc->pid,
				       sv_fast_tag(w->un), w->oldpid, &blocking);

	w->blocking = (uint16_t)blocking;
	return ret;
}

/* ---- wake queues ---- */

void sv_wakeq_init(struct sv_wakeq *q)
{
	q->head = NULL;
	q->tail = &q->head;
}

bool sv_wakeq_empty(const struct sv_wakeq *q)
{
	return !q->head;
}

bool sv_wakeq_many(const struct sv_wakeq *q)
{
	return q->head && q->head->wq_next;
}

struct sv_waiter *sv_wakeq_pop(struct sv_wakeq *q)
{
	struct sv_waiter *w = q->head;

	if (w) {
		q->head = w->wq_next;
		if (!q->head)
			q->tail = &q->head;
		w->wq_next = NULL;
	}
	return w;
}

/* caller holds the lock of the list w is on */
static void unlink_queue(struct sv_set *set, struct sv_waiter *w)
{
	SV_ASSERT(covers(set, w->sops, w->nsops));
	cds_list_del(&w->node);
	sv_fast_parked(set, w->sops, w->nsops, -1);
	if (w->nsops > 1)
		set->complex_count--;
	atomic_fetch_sub_explicit(&set->nwaiters, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&set->ns->nwaiters, 1, memory_order_relaxed);
}

/* caller holds the lock of the list w was on; w is already unlinked */
static void complete(struct sv_waiter *w, int status, struct sv_wakeq *wq)
{
	SV_ASSERT(covers(w->set, w->sops, w->nsops));
	SV_DEBUG_YIELD(); /* a wake-up decided, not yet handed out: cancels and exits race it */
	w->status = status;
	w->applied = status == 0;
	w->state = SV_W_DONE;
	sv_jnl_done(w->set, w->jid, status);
	w->wq_next = NULL;
	*wq->tail = w;
	wq->tail = &w->wq_next;
}

/*
 * A waiter whose whole thread group has exited is dropped unapplied: its undo entry may already
 * have been applied and no thread is left to answer. Pairs with the store in sv_proc_exit().
 */
static bool orphaned(const struct sv_waiter *w)
{
	return atomic_load_explicit(&w->proc->dead, memory_order_acquire);
}

/* ---- the wake-up passes (the kernel's update_queue & co.) ---- */

/* Run wait-for-zero waiters of one semaphore, or of the set (semnum -1). */
static bool wake_const_ops(struct sv_set *set, int semnum, struct sv_wakeq *wq)
{
	struct cds_list_head *list =
	    semnum == -1 ? &set->pending_const : &sv_sems(set)[semnum].pending_const;
	struct sv_waiter *w, *tmp;
	bool completed = false;

	cds_list_for_each_entry_safe(w, tmp, list, node) {
		int err;

		if (orphaned(w)) {
			unlink_queue(set, w);
			complete(w, -EINTR, wq);
			continue;
		}
		err = waiter_perform(set, w);
		if (err > 0)
			continue;
		unlink_queue(set, w);
		complete(w, err, wq);
		if (!err)
			completed = true;
	}
	return completed;
}

/*
 * Is semaphore num at zero, as far as waiters can tell? One whose word the engine does not hold
 * has no waiter naming it (fast.c), so it releases nobody, and its word is not taken for that.
 */
static bool at_zero(struct sv_set *set, int num)
{
	return sv_fast_held(set, num) && sv_sems(set)[num].semval == 0;
}

/* Semaphores that reached zero may release wait-for-zero waiters. sops NULL: look at all. */
static bool do_smart_wakeup_zero(struct sv_set *set, const struct sv_sembuf *sops,
				 unsigned int nsops, struct sv_wakeq *wq)
{
	bool completed = false, got_zero = false;

	if (sops) {
		for (unsigned int i = 0; i < nsops; i++) {
			int num = sops[i].sem_num;

			if (at_zero(set, num)) {
				got_zero = true;
				completed |= wake_const_ops(set, num, wq);
			}
		}
	} else {
		for (int i = 0; i < set->nsems; i++) {
			if (at_zero(set, i)) {
				got_zero = true;
				completed |= wake_const_ops(set, i, wq);
			}
		}
	}
	if (got_zero)
		completed |= wake_const_ops(set, -1, wq);
	return completed;
}

/*
 * After q completed, must the scan start over? Only if q may have enabled something an earlier
 * waiter in the list waits for: never for a simple decrement when no complex waiter exists.
 */
static bool check_restart(struct sv_set *set, const struct sv_waiter *w)
{
	return !cds_list_empty(&set->pending_alter) || w->nsops > 1;
}

/* Run the altering waiters of one semaphore, or of the set (semnum -1), in FIFO order. */
static bool update_queue(struct sv_set *set, int semnum, struct sv_wakeq *wq)
{
	struct cds_list_head *list =
	    semnum == -1 ? &set->pending_alter : &sv_sems(set)[semnum].pending_alter;
	struct sv_waiter *w, *tmp;
	bool completed = false;

again:
	cds_list_for_each_entry_safe(w, tmp, list, node) {
		bool restart = false;
		int err;

		/*
		 * A semaphore's own list holds only decrements of it: once it is zero none of
		 * them can proceed.
		 */
		if (semnum != -1 && sv_sem_val(set, semnum)->semval == 0)
			break;
		if (orphaned(w)) {
			unlink_queue(set, w);
			complete(w, -EINTR, wq);
			continue;
		}
		err = waiter_perform(set, w);
		if (err > 0)
			continue;
		unlink_queue(set, w);
		if (!err) {
			completed = true;
			do_smart_wakeup_zero(set, w->sops, w->nsops, wq);
			restart = check_restart(set, w);
		}
		complete(w, err, wq);
		if (restart)
			goto again;
	}
	return completed;
}

/*
 * Values changed: complete whatever can now proceed. sops are the operation that changed them
 * (NULL: unknown, look at everything). otime: the change itself counts as an operation.
 * Caller holds the lock(s) covering sops (the set lock when sops is NULL).
 */
void sv_do_smart_update(struct sv_set *set, const struct sv_sembuf *sops, unsigned int nsops,
			bool otime, struct sv_wakeq *wq)
{
	SV_ASSERT(covers(set, sops, nsops));
	/*
	 * Nobody waits: nothing to wake. Exact only under the set lock (sops NULL), and there it
	 * saves SETALL and the undo of a whole set a walk over every semaphore's lists, most of
	 * the cost of SETALL on a large set.
	 */
	if (!sops && !atomic_load_explicit(&set->nwaiters, memory_order_relaxed)) {
		SV_ASSERT(cds_list_empty(&set->pending_alter) &&
			  cds_list_empty(&set->pending_const));
		if (otime)
			sv_set_otime(set);
		return;
	}
	otime |= do_smart_wakeup_zero(set, sops, nsops, wq);

	if (!cds_list_empty(&set->pending_alter)) {
		/* complex waiters exist: the set's list holds everyone */
		otime |= update_queue(set, -1, wq);
	} else if (!sops) {
		for (int i = 0; i < set->nsems; i++)
			otime |= update_queue(set, i, wq);
	} else {
		/*
		 * Only simple decrements wait, so only semaphores that went up can release
		 * anyone.
		 */
		for (unsigned int i = 0; i < nsops; i++)
			if (sops[i].sem_op > 0)
				otime |= update_queue(set, sops[i].sem_num, wq);
	}
	if (otime)
		sv_set_otime(set);
}

/*
 * GETNCNT/GETZCNT: waiters whose blocking sop is a decrement / wait-for-zero of semnum. Caller
 * holds the set lock in complex mode.
 */
int sv_count_semcnt(struct sv_set *set, int semnum, bool count_zero)
{
	struct sv_waiter *w;
	int n = 0;

	SV_ASSERT(sv_set_locked_global(set));
	/* every waiter on a semaphore's own lists waits for exactly that semaphore */
	if (count_zero) {
		cds_list_for_each_entry(w, &sv_sems(set)[semnum].pending_const, node)
			n++;
	} else {
		cds_list_for_each_entry(w, &sv_sems(set)[semnum].pending_alter, node)
			n++;
	}
	cds_list_for_each_entry(w, &set->pending_alter, node) {
		const struct sv_sembuf *sop = &w->sops[w->blocking];

		if (sop->sem_num == semnum && (count_zero ? sop->sem_op == 0 : sop->sem_op < 0))
			n++;
	}
	if (count_zero) {
		cds_list_for_each_entry(w, &set->pending_const, node) {
			const struct sv_sembuf *sop = &w->sops[w->blocking];

			if (sop->sem_num == semnum && sop->sem_op == 0)
				n++;
		}
	}
	return n;
}

/* IPC_RMID. Caller holds ids_lock, the set lock (complex mode) and is in RCU. */
void sv_freeary(struct sv_ns *ns, struct sv_set *set, struct sv_wakeq *wq)
{
	struct sv_waiter *w, *tmp;

	xassert_held(&ns->ids_lock);
	SV_ASSERT(sv_set_locked_global(set));
	sv_rcu_assert_reader();
	sv_jnl_rm(set); /* first: removing it is what the section's record is about */
	sv_fast_remove(set);
	sv_undo_unlink_all(set);

	cds_list_for_each_entry_safe(w, tmp, &set->pending_const, node) {
		unlink_queue(set, w);
		complete(w, -EIDRM, wq);
	}
	cds_list_for_each_entry_safe(w, tmp, &set->pending_alter, node) {
		unlink_queue(set, w);
		complete(w, -EIDRM, wq);
	}
	for (int i = 0; i < set->nsems; i++) {
		struct sv_sem *sem = &sv_sems(set)[i];

		cds_list_for_each_entry_safe(w, tmp, &sem->pending_const, node) {
			unlink_queue(set, w);
			complete(w, -EIDRM, wq);
		}
		cds_list_for_each_entry_safe(w, tmp, &sem->pending_alter, node) {
			unlink_queue(set, w);
			complete(w, -EIDRM, wq);
		}
		sem->sempid = 0;
	}
	sv_set_unlink(ns, set);
}

/* ---- semop / semtimedop ---- */

/*
 * A ticket for a call about to park, charged to the caller's euid in its namespace's budget
 * until sv_waiter_free() (budget.c); NULL (ENOMEM) past the budget or out of memory. Caller
 * holds the lock(s) covering sops.
 */
static struct sv_waiter *waiter_new(struct sv_set *set, const struct sv_caller *c,
				    const struct sv_sembuf *sops, unsigned int nsops,
				    struct sv_undo *un, bool alter, unsigned int blocking,
				    void *cookie)
{
	size_t sz = sizeof(struct sv_waiter) + nsops * sizeof(struct sv_sembuf);
	struct sv_budget *b = set->ns->budget;
	struct sv_waiter *w;

	/* the park path only: a semop that completes at once never gets here (budget.c) */
	if (b && sv_budget_charge_waiter(b, c->cred->euid))
		return NULL;
	sz = (sz + 3) & ~(size_t)3;
	w = malloc(sz + nsops * sizeof(int32_t));
	if (!w) {
		if (b)
			sv_budget_credit_waiter(b, c->cred->euid);
		return NULL;
	}
	if (b)
		sv_budget_get(b); /* the credit in sv_waiter_free() must not need the namespace */
	w->budget = b;
	w->budget_uid = c->cred->euid;
	memcpy(w->sops, sops, nsops * sizeof(*sops));
	w->oldpid = (int32_t *)((char *)w + sz);
	w->wq_next = NULL;
	w->set = set;
	w->proc = c->proc;
	w->un = un;
	w->cookie = cookie;
	w->status = 0;
	w->state = SV_W_PARKED;
	w->alter = alter;
	w->applied = false;
	w->blocking = (uint16_t)blocking;
	w->nsops = nsops;
	sv_set_get(set);
	sv_proc_get(c->proc);
	return w;
}

/* caller holds the lock for w's sops */
static void enqueue(struct sv_set *set, struct sv_waiter *w)
{
	SV_ASSERT(covers(set, w->sops, w->nsops));
	if (w->nsops == 1) {
		struct sv_sem *sem = &sv_sems(set)[w->sops[0].sem_num];

		if (!w->alter)
			cds_list_add_tail(&w->node, &sem->pending_const);
		else if (set->complex_count)
			cds_list_add_tail(&w->node, &set->pending_alter);
		else
			cds_list_add_tail(&w->node, &sem->pending_alter);
	} else {
		if (!set->complex_count)
			merge_queues(set);
		cds_list_add_tail(&w->node, w->alter ? &set->pending_alter : &set->pending_const);
		set->complex_count++;
	}
	sv_fast_parked(set, w->sops, w->nsops, 1);
	SV_COUNT(&sv_sems(set)[w->sops[w->blocking].sem_num].nwaits);
	atomic_fetch_add_explicit(&set->nwaiters, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&set->ns->nwaiters, 1, memory_order_relaxed);
}

/* The timeout as the kernel reads it for each form (get_timespec64, get_old_timespec32). */
enum ts_form {
	TS_NATIVE,	/* struct __kernel_timespec: two 64-bit fields */
	TS_I386_TIME32, /* struct old_timespec32: two 32-bit fields, sign-extended */
	TS_I386_TIME64, /* __kernel_timespec from a compat task: tv_nsec's upper half ignored */
};

static int timeout_in(const struct sv_caller *c, uint64_t addr, enum ts_form form,
		      struct timespec *ts)
{
	if (form == TS_I386_TIME32) {
		int32_t v[2];

		if (sv_copy_in(c, addr, v, sizeof(v)))
			return -EFAULT;
		ts->tv_sec = v[0];
		ts->tv_nsec = v[1];
		return 0;
	}
	if (sv_copy_in(c, addr, ts, sizeof(*ts)))
		return -EFAULT;
	if (form == TS_I386_TIME64)
		ts->tv_nsec = (long)(uint32_t)ts->tv_nsec;
	return 0;
}

static long semtimedop(const struct sv_caller *c, int semid, uint64_t usops, unsigned int nsops,
		       uint64_t utimeout, enum ts_form form, struct sv_park *park,
		       struct sv_wakeq *wq)
{
	struct sv_sembuf fast[SEMOPM_FAST], *sops = fast;
	struct timespec ts = { 0, 0 };
	struct sv_undo *un = NULL, *mine;
	struct sv_set *set;
	unsigned int max = 0, blocking = 0;
	bool undos = false, alter = false;
	int locknum;
	long err;

	/* The kernel's order: timeout copy, nsops range, sops copy, then semid and the timeout. */
	if (utimeout && timeout_in(c, utimeout, form, &ts))
		return -EFAULT;
	if (nsops > (unsigned int)SV_RELAXED(&c->ns->semopm))
		return -E2BIG;
	if (nsops < 1)
		return -EINVAL;
	if (nsops > SEMOPM_FAST) {
		sops = malloc(nsops * sizeof(*sops));
		if (!sops)
			return -ENOMEM;
	}
	if (sv_copy_in(c, usops, sops, nsops * sizeof(*sops))) {
		err = -EFAULT;
		goto out_free;
	}
	if (semid < 0) {
		err = -EINVAL;
		goto out_free;
	}
	if (utimeout && (ts.tv_sec < 0 || ts.tv_nsec < 0 || ts.tv_nsec >= 1000000000L)) {
		err = -EINVAL;
		goto out_free;
	}
	for (unsigned int i = 0; i < nsops; i++) {
		if (sops[i].sem_num >= max)
			max = sops[i].sem_num;
		if (sops[i].sem_flg & SV_SEM_UNDO)
			undos = true;
		if (sops[i].sem_op != 0)
			alter = true;
	}

	rcu_read_lock();
	if (undos) {
		int uerr;

		un = sv_undo_find_alloc(c, semid, &uerr);
		if (!un) {
			err = uerr;
			goto out_rcu;
		}
		SV_DEBUG_YIELD(); /* IPC_RMID may unlink the entry before the lock re-checks it */
	}
	set = sv_set_lookup(c->ns, semid);
	if (!set) {
		err = -EINVAL;
		goto out_rcu;
	}
	if (max >= (unsigned int)set->nsems) {
		err = sv_settle(set, -EFBIG);
		goto out_rcu;
	}
	err = sv_ipcperms(c, set, alter ? S_IWUGO_ : S_IRUGO_);
	if (err) {
		err = sv_settle(set, err);
		goto out_rcu;
	}

	/* A process with fast access has an undo entry, which holds its page (fast.c). */
	mine = un || !SV_RELAXED(&set->fast_on) ? un : sv_undo_lookup(c, semid);

	SV_DEBUG_YIELD(); /* found without a lock: IPC_RMID may get there first */
	locknum = sv_sem_lock(set, sops, nsops);
	/*
	 * Removed since the lookup; or the undo entry belongs to a removed set whose id a new set
	 * has taken.
	 */
	if (set->deleted || (un && un->semid == -1)) {
		err = -EIDRM;
		goto out_unlock;
	}
	if (mine && mine->semid != semid)
		mine = NULL;
	sv_fast_enter(set, mine, c->fast_slot, sops, nsops);

	err = perform_atomic_semop(set, sops, nsops, un, c->proc ? c->proc->pid : 0,
				   sv_fast_tag(mine), NULL, &blocking);
	if (err == 0) {
		sv_jnl_done(set, c->jid, 0);
		if (alter)
			sv_do_smart_update(set, sops, nsops, true, wq);
		else
			sv_set_otime(set);
		goto out_unlock;
	}
	if (err < 0)
		goto out_unlock;

	/* It has to wait. A zero timeout expires at once, as the kernel's hrtimer does. */
	if (utimeout && ts.tv_sec == 0 && ts.tv_nsec == 0) {
		err = -EAGAIN;
		goto out_unlock;
	}
	if (!c->proc) {
		err = -ENOMEM;
		goto out_unlock;
	}
	park->waiter = waiter_new(set, c, sops, nsops, un, alter, blocking, park->cookie);
	if (!park->waiter) {
		err = -ENOMEM;
		goto out_unlock;
	}
	park->waiter->jid = park->jid;
	enqueue(set, park->waiter);
	park->timed = utimeout != 0;
	park->timeout = ts;
	err = SV_PARKED;

out_unlock:
	sv_sem_unlock(set, locknum);
out_rcu:
	rcu_read_unlock();
out_free:
	if (sops != fast)
		free(sops);
	return err;
}

long sv_semtimedop(const struct sv_caller *c, int semid, uint64_t usops, unsigned int nsops,
		   uint64_t utimeout, struct sv_park *park, struct sv_wakeq *wq)
{
	return semtimedop(c, semid, usops, nsops, utimeout, TS_NATIVE, park, wq);
}

long sv_semtimedop_compat(const struct sv_caller *c, int semid, uint64_t usops, unsigned int nsops,
			  uint64_t utimeout, bool time32, struct sv_park *park, struct sv_wakeq *wq)
{
	return semtimedop(c, semid, usops, nsops, utimeout,
			  time32 ? TS_I386_TIME32 : TS_I386_TIME64, park, wq);
}

/* ---- waiters ---- */

int sv_waiter_result(const struct sv_waiter *w)
{
	return w->status;
}

void *sv_waiter_cookie(const struct sv_waiter *w)
{
	return w->cookie;
}

const struct sv_sembuf *sv_waiter_sops(const struct sv_waiter *w, unsigned int *nsops)
{
	*nsops = w->nsops;
	return w->sops;
}

int sv_waiter_cancel(struct sv_waiter *w)
{
	struct sv_set *set = w->set;
	int locknum, ret = -EALREADY;

	SV_DEBUG_YIELD(); /* a wake-up pass may complete w first */
	locknum = sv_sem_lock(set, w->sops, w->nsops);
	if (w->state == SV_W_PARKED) {
		unlink_queue(set, w);
		w->state = SV_W_CANCELLED;
		ret = 0;
	}
	sv_sem_unlock(set, locknum);
	return ret;
}

/*
 * Undo sop i of an applied operation (the inverse of its step in perform_atomic_semop()).
 * Returns false, changing nothing, if that would leave a value or semadj out of range.
 * undo_live: un still holds this operation's semadj (else exit already applied it, and with it
 * the inverse of the sop). Caller holds the lock(s) covering the sops.
 */
static bool unapply_sop(struct sv_set *set, const struct sv_sembuf *sop, struct sv_undo *un,
			bool undo_live)
{
	struct sv_sem *sem = sv_sem_val(set, sop->sem_num);
	int val = sem->semval - sop->sem_op;

	SV_ASSERT(covers(set, sop, 1));
	if (sop->sem_flg & SV_SEM_UNDO) {
		int adj;

		if (!undo_live)
			return true;
		adj = un->semadj[sop->sem_num] + sop->sem_op;
		if (val < 0 || val > SV_SEMVMX || adj < -SV_SEMAEM - 1 || adj > SV_SEMAEM)
			return false;
		un->semadj[sop->sem_num] = (int16_t)adj;
		sv_fast_mirror(set, un, sop->sem_num);
	} else if (val < 0 || val > SV_SEMVMX) {
		return false;
	}
	sem->semval = val;
	return true;
}

/*
 * Undo a whole applied operation, last sop first, all or nothing: -ERANGE (and nothing
 * changed) if some step cannot be undone. Then the wake-up pass, told where values moved.
 * Caller holds the lock(s) covering the sops.
 */
static int unapply(struct sv_set *set, const struct sv_sembuf *sops, unsigned int n,
		   struct sv_undo *un, struct sv_wakeq *wq)
{
	bool undo_live = un && un->semid != -1;
	struct sv_sembuf fast[SEMOPM_FAST] = { { 0 } }, *inv = fast;
	unsigned int i;

	SV_ASSERT(covers(set, sops, n));
	for (i = n; i-- > 0;) {
		if (!unapply_sop(set, &sops[i], un, undo_live)) {
			/* Re-apply what we undid: the operation stays done. */
			while (++i < n) {
				const struct sv_sembuf *sop = &sops[i];

				if ((sop->sem_flg & SV_SEM_UNDO) && !undo_live)
					continue;
				sv_sems(set)[sop->sem_num].semval += sop->sem_op;
				if (sop->sem_flg & SV_SEM_UNDO) {
					un->semadj[sop->sem_num] -= sop->sem_op;
					sv_fast_mirror(set, un, sop->sem_num);
				}
			}
			return -ERANGE;
		}
	}
	if (sv_jnl_on())
		note_sops(set, sops, n, undo_live ? un : NULL);
	/*
	 * Values that went back up may release decrements, values that went back down to zero
	 * may release wait-for-zero: the inverse operation tells the wake-up pass where to look.
	 */
	if (n > SEMOPM_FAST)
		inv = malloc(n * sizeof(*inv));
	if (!inv) {
		sv_do_smart_update(set, NULL, 0, false, wq); /* look everywhere instead */
		return 0;
	}
	for (i = 0; i < n; i++) {
		inv[i] = sops[i];
		inv[i].sem_op = (int16_t)-sops[i].sem_op;
	}
	sv_do_smart_update(set, inv, n, false, wq);
	if (inv != fast)
		free(inv);
	return 0;
}

int sv_waiter_rollback(struct sv_waiter *w, struct sv_wakeq *wq)
{
	struct sv_set *set = w->set;
	int locknum, ret = 0;

	if (!w->applied)
		return 0;
	SV_DEBUG_YIELD(); /* the values may move, or the set go, before the undo */
	locknum = sv_sem_lock(set, w->sops, w->nsops);
	if (set->deleted)
		goto out; /* its values went with the set */
	sv_fast_enter(set, w->un, 0, w->sops, w->nsops);
	ret = unapply(set, w->sops, w->nsops, w->un, wq);
	if (!ret) {
		for (unsigned int i = w->nsops; i-- > 0;) {
			struct sv_sem *sem = &sv_sems(set)[w->sops[i].sem_num];

			if (sem->sempid == w->proc->pid) {
				sem->sempid = w->oldpid[i];
				sv_fast_set_tag(set, w->sops[i].sem_num, 0); /* unknown: none */
			}
			sv_jnl_sem(set, w->sops[i].sem_num);
		}
		sv_jnl_done(set, w->jid, SV_JNL_UNDONE);
		w->applied = false;
	}
out:
	sv_sem_unlock(set, locknum);
	return ret;
}

int sv_semop_revert(const struct sv_caller *c, int semid, const struct sv_sembuf *sops,
		    unsigned int nsops, struct sv_wakeq *wq)
{
	struct sv_undo *un = NULL;
	struct sv_set *set;
	int locknum, ret = 0;
	bool undos = false;

	for (unsigned int i = 0; i < nsops; i++)
		undos |= (sops[i].sem_flg & SV_SEM_UNDO) != 0;
	rcu_read_lock();
	set = sv_set_lookup(c->ns, semid);
	if (!set)
		goto out_rcu; /* removed: its values went with it */
	if (undos)
		un = sv_undo_lookup(c, semid);
	SV_DEBUG_YIELD();
	locknum = sv_sem_lock(set, sops, nsops);
	if (!set->deleted)
		sv_fast_enter(set, un && un->semid == semid ? un : NULL, c->fast_slot, sops, nsops);
	if (!set->deleted && !(ret = unapply(set, sops, nsops, un, wq)))
		sv_jnl_done(set, c->jid, SV_JNL_UNDONE);
	sv_sem_unlock(set, locknum);
out_rcu:
	rcu_read_unlock();
	return ret;
}

void sv_waiter_free(struct sv_waiter *w)
{
	if (!w)
		return;
	if (w->budget) {
		sv_budget_credit_waiter(w->budget, w->budget_uid);
		sv_budget_put(w->budget);
	}
	sv_proc_put(w->proc);
	sv_set_put(w->set);
	free(w);
}
