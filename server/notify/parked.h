/* SPDX-License-Identifier: MIT */
/*
 * The life of a parked call: a semop that waits stays unanswered in the kernel while its
 * waiter sits in the engine. It ends in one of four ways, each here: another call completes it
 * (nt_deliver()), its timeout passes (nt_timers_expire()), its caller is interrupted or dies
 * (nt_drop_parked(), found by a new call of the thread, by the sweep, by an exit, or by the
 * listener's hang-up), or the supervisor stops.
 *
 * Signals. A caller parked here sleeps interruptibly in the kernel. A caught signal cancels its
 * notification: without SA_RESTART it returns EINTR at once; with SA_RESTART (or after
 * SIGSTOP/SIGCONT) the kernel silently restarts the system call as a new notification with the
 * same arguments. Natively semop never restarts: a wait interrupted by a signal always returns
 * EINTR. So: a thread has at most one system call in flight, and a new notification from a
 * thread whose parked call is still registered proves that call dead (serve.c). A sweep (every
 * 100 ms) finds parked calls whose caller vanished without calling again, and remembers them so
 * that a later restart is still answered EINTR.
 *
 * Completions that cannot be delivered (the answer says ENOENT: the caller was interrupted or
 * died between the decision and the answer) are rolled back in the engine, so no value is
 * lost. If the caller restarted the call in between, the restart takes the completed result.
 *
 * Locking: a parked call is its thread's (thr->parked, under thr->lock); s->timers_lock (the
 * heap) and s->parked_lock (the sweep's list) are leaves, taken inside thread locks.
 */
#ifndef SV_NOTIFY_PARKED_H
#define SV_NOTIFY_PARKED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <urcu/list.h>

#include "engine/sem.h"

struct nt_super;
struct nt_worker;
struct nt_listener;
struct nt_thread;
struct nt_ns;

/* One notification being served, or parked. */
struct nt_req {
	atomic_int refcount;
	struct nt_listener *l; /* reference */
	struct nt_thread *thr; /* reference */
	uint64_t id;
	int nr;
	uint64_t args[6];
	struct sv_waiter *w; /* once parked */
	struct nt_ns *ns;    /* where it waits (for GETNCNT's check of vanished callers) */
	int semnum;	     /* the semaphore a one-sop call waits on, -1 for several */
	bool adopted;	     /* a restart of this call took its result (under thr->lock) */
	int64_t received_ns;
	int64_t parked_ns;
	int64_t deadline_ns;		  /* 0: no timeout */
	int heap_idx;			  /* in s->timers, or -1; under s->timers_lock */
	int slot;			  /* its slot in s->dur (freed with it), or -1 */
	struct cds_list_head parked_node; /* s->parked, under s->parked_lock */
};

/*
 * r, whole, with its waiter published by the engine and holding references to its listener,
 * thread and namespace, becomes r->thr's parked call: on the sweep's list and, with a
 * deadline, the timer heap. 0; or -ENOMEM when no timer could be had and the call was taken
 * back (the caller answers it). Caller holds r->thr->lock.
 */
int nt_park(struct nt_super *s, struct nt_req *r);

/*
 * thr's parked call is dead (interrupted, its caller gone): cancel it, remembered as
 * interrupted (for a restart to be answered EINTR) if remember. True if it was cancelled;
 * false if it had completed already and sits on a wake queue, whose deliverer will find its
 * answer lost and roll it back. Caller holds thr->lock.
 */
bool nt_drop_parked(struct nt_worker *wk, struct nt_thread *thr, bool remember);

/* Answer every waiter the engine completed onto wq: how many. Caller holds no thread lock. */
unsigned int nt_deliver(struct nt_worker *wk, struct sv_wakeq *wq);

/* The timer fired: answer the calls whose deadline passed (EAGAIN). */
void nt_timers_expire(struct nt_worker *wk);
/* A batch of parked calls: drop those whose caller vanished without a word. */
void nt_sweep(struct nt_worker *wk);
/* l hung up: every call parked through it is dead. */
void nt_listener_gone(struct nt_worker *wk, struct nt_listener *l);
/*
 * Before GETNCNT or GETZCNT count waiters of semnum in set semid: drop those whose caller
 * has vanished, as natively it would no longer be counted. Caller holds no thread lock.
 */
void nt_drop_vanished(struct nt_worker *wk, struct nt_ns *ns, int semid, int semnum);

#endif
