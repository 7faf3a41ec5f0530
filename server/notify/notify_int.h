/* SPDX-License-Identifier: MIT */
/*
 * Notify-layer internals shared by super.c (workers, event sources, listeners) and serve.c
 * (answering one notification); ident.h (who is calling) and nsreg.h (namespaces) have their
 * own.
 *
 * Lock nesting, outermost first:
 *   s->exits_lock  >  thr->lock  >  reg->lock  >  engine locks (engine.h)  >
 *       s->timers_lock, s->parked_lock, proc->lock
 *   s->tables_lock (creation and removal of records) is held with none of the middle ones,
 *   only inside s->exits_lock and with proc->lock inside it; s->lock (listeners) is held alone.
 * Workers hold no lock while they wait, except a thread's own lock while one of its calls is
 * decided and answered (its notification is pending, so nobody else needs the lock but a
 * deliverer, canceller or timer of that thread's parked call, and its own next call, which
 * must find the answer's fate settled), and reads of its memory or /proc made for that call.
 * The engine may ask for the caller's groups and capabilities (ident_cred_fill()) under
 * ns->ids_lock, as the kernel checks permissions under its ids rwsem: /proc/TID/status,
 * capget() and the namespace files never wait for the target, so no caller can stall others.
 */
#ifndef SV_NOTIFY_INT_H
#define SV_NOTIFY_INT_H

#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <urcu.h>
#include <urcu/list.h>
#include <urcu/rculfhash.h>

#include "engine/sem.h"
#include "lock/xpthread.h"
#include "notify/ident.h"
#include "notify/notify.h"
#include "notify/nsreg.h"
#include "notify/target.h"

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif

struct nt_listener {
	struct nt_src src;
	atomic_int refcount; /* the registry's, plus one per request in flight or parked */
	struct nt_super *super;
	struct cds_list_head node; /* s->listeners, under s->lock */
	bool ns_traps;		   /* its filter traps unshare/setns (filter.h), so namespaces
				      may be kept (ident.h) */
	bool sync_wake;		   /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP is set on it */
	/*
	 * The receiver owns it (offered or taken, super.c): its epoll entry then watches for a
	 * hang-up only, which the worker passes on to the receiver instead of handling it.
	 */
	atomic_bool received;
	bool gone;		    /* POLLHUP seen; under s->lock */
	struct nt_ns *fixed_ns;	    /* listener_opts.ns_name (a reference), or NULL */
	atomic_uint_fast64_t calls; /* notifications received */
	atomic_int parked;	    /* its calls on s->parked now */
	char name[64];
};

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
	struct cds_list_head parked_node; /* s->parked, under s->parked_lock */
};

/* Per worker: its counters (folded on read) and reusable buffers. */
struct nt_worker {
	struct nt_super *super;
	pthread_t thread;
	struct nt_stats stats;
	struct seccomp_notif *notif;
	size_t notif_size;
	struct nt_req *spare; /* for the next semop: only a call that waits keeps one */
};

/*
 * The receiver (super.c): beside a lone worker, a thread that takes the calls of one listener,
 * the busiest, with a blocking NOTIF_RECV. Its own cache line: the receiver writes it on every
 * call, the worker reads it only when it hands over a listener or kicks.
 */
struct nt_receiver {
	_Alignas(64) struct nt_worker wk;
	struct nt_listener *hot;	     /* the receiver's; NULL while it has none */
	_Atomic(struct nt_listener *) offer; /* handed over by the worker, not yet taken */
	atomic_uint kick;		     /* kicks sent (the worker) */
	atomic_uint ack;		     /* kicks seen (the receiver) */
	/* Calls it received, for the hand-over rule; not wk.stats.received, which COUNTERS=off
	   compiles out and a statistics reset zeroes. */
	atomic_uint_fast64_t served;
	uint64_t seen;	  /* @served when the worker last looked */
	atomic_bool done; /* it has left its loop (stopping) */
	bool running;	  /* its thread exists */
};

struct nt_super {
	struct nt_config cfg;
	int epfd;
	struct nt_src stop, timer, sweep;
	/*
	 * Process exits live in an epoll set of their own, drained before serving a call while
	 * anything depends on them (SEM_UNDO entries, parked calls): after a parent's waitpid()
	 * returns, the child's SEM_UNDO has been applied, as in the kernel. exits_lock makes
	 * a worker wait for one draining them already.
	 */
	struct nt_src exits;
	pthread_mutex_t exits_lock;
	atomic_int nparked;
	int nworkers, started;
	struct nt_worker *workers;
	struct nt_receiver *rcv; /* NULL: none (more than one worker) */
	size_t resp_size;
	atomic_bool stopping;

	pthread_mutex_t lock; /* listeners */
	struct cds_list_head listeners;
	int nlisteners;

	struct tgt_features feat; /* what this kernel offers (ident.h) */
	struct nsreg reg;	  /* namespaces */
	int probe_ticks;	  /* sweeps until the next namespace probe */

	pthread_mutex_t tables_lock; /* creation and removal in threads/procs (ident.h) */
	struct cds_lfht *threads;
	struct cds_lfht *procs;

	pthread_mutex_t timers_lock;
	struct nt_req **timers; /* min-heap on deadline_ns */
	int ntimers, timers_cap;

	pthread_mutex_t parked_lock;
	struct cds_list_head parked;

	struct nt_stats events; /* counted outside workers (atomic adds) */
};

/* ---- super.c ---- */
int64_t nt_now_ns(void);
void nt_listener_put(struct nt_listener *l);
void nt_rearm(struct nt_super *s, struct nt_src *src);
/* Watch a thread's pidfd (the epoll set) or a process's (the exits set): 0, or -ENOMEM. */
int nt_watch(struct nt_super *s, struct nt_src *src);
int nt_watch_exit(struct nt_super *s, struct nt_src *src);
/* Handle every process exit the kernel has reported. */
void nt_drain_exits(struct nt_worker *wk);
void nt_unwatch(struct nt_super *s, struct nt_src *src);
/*
 * Counters: plain per-worker fields updated with relaxed atomic adds, so a reader on another
 * thread (stats, control socket) sees whole values without any lock on the hot path.
 */
#ifndef SV_NO_COUNTERS
#define NT_ADD(st, field, n) __atomic_fetch_add(&(st)->field, (uint64_t)(n), __ATOMIC_RELAXED)
#else
#define NT_ADD(st, field, n) ((void)(st), (void)(n)) /* COUNTERS=off, for bench/ */
#endif
#define NT_STATS(s, wk)		 ((wk) ? &(wk)->stats : &(s)->events)
#define NT_COUNT_EVENT(s, field) NT_ADD(&(s)->events, field, 1)

/* ---- serve.c ---- */
void nt_serve(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n);
/* Is notification id still pending (received, unanswered) on l? */
bool nt_id_valid(const struct nt_listener *l, uint64_t id);
void nt_deliver(struct nt_worker *wk, struct sv_wakeq *wq);
void nt_timers_expire(struct nt_worker *wk);
void nt_sweep(struct nt_worker *wk);
/* A parked call whose notification is dead: cancel it. Caller holds thr->lock. */
void nt_drop_parked(struct nt_worker *wk, struct nt_thread *thr, bool remember);
void nt_req_put(struct nt_req *r);
void nt_listener_gone(struct nt_worker *wk, struct nt_listener *l);

#endif
