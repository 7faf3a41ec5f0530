/* SPDX-License-Identifier: MIT */
/*
 * Notify-layer internals shared by super.c (workers, event sources, listeners), ident.c (what we
 * know about confined threads and processes) and serve.c (answering one notification).
 *
 * Lock nesting, outermost first:
 *   thr->lock  >  engine locks (engine.h)  >  s->timers_lock, s->parked_lock, proc->lock
 *   s->tables_lock (creation/removal of records) is never held with any of them except
 *   proc->lock inside it.
 * Workers hold no lock while they wait, send answers, or read a target's memory or /proc, except
 * that a thread's own lock is held while its call is evaluated (its notification is pending,
 * so nobody else needs the lock but a deliverer, canceller or timer of that thread's parked call).
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
#include "notify/notify.h"
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

/* What an epoll event points at. */
enum nt_src_kind {
	SRC_LISTENER,
	SRC_EXITS,   /* the epoll set of process pidfds below has something */
	SRC_PROCESS, /* a thread group's pidfd (in s->exits): it exited */
	SRC_THREAD,  /* one thread's pidfd (PIDFD_THREAD): it exited */
	SRC_TIMER,   /* parked semtimedop deadlines */
	SRC_SWEEP,   /* periodic check of parked callers that vanished without a word */
	SRC_STOP,
};

struct nt_src {
	enum nt_src_kind kind;
	int fd;
};

struct nt_listener {
	struct nt_src src;
	atomic_int refcount; /* the registry's, plus one per request in flight or parked */
	struct nt_super *super;
	struct cds_list_head node; /* s->listeners, under s->lock */
	bool cred_traps;
	bool sync_wake; /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP is set on it */
	/*
	 * The receiver owns it (offered or taken, super.c): its epoll entry then watches for a
	 * hang-up only, which the worker passes on to the receiver instead of handling it.
	 */
	atomic_bool received;
	bool gone;		    /* POLLHUP seen; under s->lock */
	struct nt_ns *fixed_ns;	    /* listener_opts.ns_name, or NULL */
	atomic_uint_fast64_t calls; /* notifications received */
	atomic_int parked;	    /* its calls on s->parked now */
	struct nt_ns **used;	    /* namespaces its processes have used; under s->lock */
	int nused;
	char name[64];
};

/* One engine namespace, and what picks it: an IPC namespace inode, or a name. */
struct nt_ns {
	struct cds_list_head node; /* s->namespaces, under s->lock */
	uint64_t ipc_inode;	   /* 0 for named namespaces */
	char name[64];
	struct sv_ns *ns;
	int nlisteners;	 /* listeners that have used it; under s->lock */
	bool persistent; /* the supervisor's own IPC namespace, or a named one */
	/*
	 * The IPC namespace's /proc/sys/kernel/sem and sem_next_id, opened from inside it (an
	 * open sysctl file keeps serving the namespace it was opened in), when its limits follow
	 * the kernel's as they would natively; -1 when limits were given explicitly.
	 */
	int sem_fd;
	int next_id_fd;
};

/* A user namespace's id maps, read once (inode -> maps). */
struct nt_userns {
	struct cds_list_head node; /* s->usernss, under s->lock */
	uint64_t inode;
	struct tgt_idmap uid, gid;
};

/*
 * A confined thread group. Found by tgid in s->procs (RCU). Holds the engine's view of the
 * process (its SEM_UNDO owner) for the namespace it currently uses.
 */
struct nt_process {
	struct cds_lfht_node node;
	struct rcu_head rcu;
	struct nt_src src; /* leader pidfd: readable when the whole group has exited */
	struct nt_super *super;
	atomic_int refcount; /* the table's, one per thread record, one per user */
	int32_t tgid;
	pthread_mutex_t lock; /* svp, svp_ns, threads, volatile_creds */
	struct sv_proc *svp;
	struct nt_ns *svp_ns;
	struct cds_list_head threads; /* struct nt_thread.proc_node */
	bool volatile_creds; /* a non-leader thread exec'd: never trust cached credentials */
	bool exited;
	/*
	 * /proc/TGID/mem, opened at the first read through it (NT_MEM_UNOPENED until then,
	 * NT_MEM_NONE if it could not be): a pread on it costs less than process_vm_readv, which
	 * looks the task up and checks ptrace access on every call. The file keeps reading the
	 * address space it was opened on, so an execve, which the listener must trap
	 * (cred_traps), retires it for good. It is closed only with the record, so no reader can
	 * ever find its number reused for another file.
	 */
	atomic_int mem_fd;
	atomic_bool mem_retired;
	/* pid namespaces, for GETPID: nspid[i] is our pid at level i (0: the supervisor's) */
	int levels;
	int32_t nspid[TGT_MAX_LEVELS];
	uint64_t pidns[TGT_MAX_LEVELS];
};

/* The call a thread made last, to recognise a restart of an interrupted one. */
struct nt_callsig {
	bool valid;
	int nr;
	uint64_t args[6];
	long result; /* for kept completions */
};

/*
 * A confined thread. Found by tid in s->threads (RCU). Everything below is under thr->lock.
 */
struct nt_thread {
	struct cds_lfht_node node;
	struct rcu_head rcu;
	struct nt_src src; /* PIDFD_THREAD pidfd for non-leaders, or fd -1 */
	atomic_int refcount;
	int32_t tid;
	struct nt_process *proc;	/* reference */
	struct cds_list_head proc_node; /* proc->threads, under proc->lock */
	pthread_mutex_t lock;
	atomic_bool valid; /* the fields below are current; cleared without the lock */
	bool dead;
	struct sv_cred cred;
	uint32_t groups[TGT_MAX_GROUPS];
	int pid_level; /* depth of its pid namespace below ours */
	uint64_t pidns;
	struct nt_userns *userns; /* NULL: same user namespace as the supervisor */
	struct nt_ns *ns;
	struct nt_ns *ns_noted;	       /* ns already recorded as used by its listener */
	struct nt_req *parked;	       /* its waiting call */
	struct nt_callsig interrupted; /* its last call died while parked */
	struct nt_callsig kept;	       /* its last call completed, answer lost, not undone */
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
	/*
	 * /proc/TGID/mem files are a saving, pidfds a necessity: a mem file whose number reaches
	 * this (half the fd limit at start) is closed again and the process reads without one.
	 */
	int mem_fd_limit;
	size_t resp_size;
	atomic_bool stopping;

	pthread_mutex_t lock; /* listeners, namespaces, usernss */
	struct cds_list_head listeners;
	int nlisteners;
	struct cds_list_head namespaces;
	struct cds_list_head usernss;
	struct sv_limits limits;
	bool sync_limits; /* no limits were given: each IPC namespace's own apply */
	int my_ipc_fd;	  /* our IPC namespace, to come back to after opening a sysctl */

	pthread_mutex_t tables_lock; /* creation and removal in threads/procs */
	struct cds_lfht *threads;
	struct cds_lfht *procs;
	uint64_t my_userns, my_pidns, my_ipcns;

	pthread_mutex_t timers_lock;
	struct nt_req **timers; /* min-heap on deadline_ns */
	int ntimers, timers_cap;

	pthread_mutex_t parked_lock;
	struct cds_list_head parked;

	struct nt_stats events; /* counted outside workers (atomic adds) */
};

/* A mutex call that fails is a broken invariant, never a condition to handle. */
static inline void xlock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m))
		abort();
}

static inline void xunlock(pthread_mutex_t *m)
{
	if (pthread_mutex_unlock(m))
		abort();
}

/* ---- super.c ---- */
int64_t nt_now_ns(void);
void nt_listener_put(struct nt_listener *l);
/* Record that l's processes use namespace n (for end_namespaces). */
void nt_listener_uses(struct nt_super *s, struct nt_listener *l, struct nt_ns *n);
void nt_rearm(struct nt_super *s, struct nt_src *src);
void nt_watch(struct nt_super *s, struct nt_src *src);
void nt_watch_exit(struct nt_super *s, struct nt_src *src);
/* Handle every process exit the kernel has reported. */
void nt_drain_exits(struct nt_worker *wk);
void nt_unwatch(struct nt_super *s, struct nt_src *src);
/* The namespace of an IPC namespace inode, created on first use (tid lives in it). */
struct nt_ns *nt_ns_for_inode(struct nt_super *s, uint64_t inode, pid_t tid);
/* Take the IPC namespace's current limits and sem_next_id (before the calls that use them). */
void nt_ns_sync(struct nt_ns *n);
/* A sem_next_id we handed to the engine was used: reset it as the kernel does. */
void nt_ns_next_id_used(struct nt_ns *n);
struct nt_ns *nt_ns_named(struct nt_super *s, const char *name);
struct nt_userns *nt_userns_get(struct nt_super *s, uint64_t inode, pid_t via_tid);
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

/* ---- ident.c ---- */
#define NT_MEM_UNOPENED (-1)
#define NT_MEM_NONE	(-2)
/* The process's /proc/TGID/mem (struct nt_process), opened if need be; -1 when not usable. */
int nt_process_mem_fd(struct nt_process *p);
/* The record of tid, created (reading /proc) if needed; reference taken. NULL + *err. */
struct nt_thread *nt_thread_get(struct nt_super *s, int32_t tid, int *err);
struct nt_thread *nt_thread_find(struct nt_super *s, int32_t tid);
void nt_thread_put(struct nt_thread *thr);
/* Re-read credentials and namespaces. Caller holds thr->lock. 0 or -errno. */
int nt_thread_refresh(struct nt_super *s, struct nt_thread *thr);
/* The thread is exiting/exec'ing/changing creds: forget what we know. */
void nt_thread_invalidate(struct nt_thread *thr);
void nt_process_invalidate_all(struct nt_process *p, bool volatile_creds);
void nt_process_put(struct nt_process *p);
/*
 * The engine process for thr's current namespace, with a reference. If the process changed
 * namespace, its old undo list is applied and what that completes goes to wq.
 * Caller holds thr->lock.
 */
struct sv_proc *nt_process_svp(struct nt_thread *thr, struct sv_wakeq *wq);
/* GETPID translation: pid (supervisor view) as thread thr sees it; 0 if invisible. */
int32_t nt_pid_for(struct nt_super *s, const struct nt_thread *thr, int32_t pid);
void nt_thread_exited(struct nt_super *s, struct nt_thread *thr);
void nt_process_exited(struct nt_super *s, struct nt_worker *wk, struct nt_process *p);

/* ---- serve.c ---- */
void nt_serve(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n);
void nt_deliver(struct nt_worker *wk, struct sv_wakeq *wq);
void nt_timers_expire(struct nt_worker *wk);
void nt_sweep(struct nt_worker *wk);
/* A parked call whose notification is dead: cancel it. Caller holds thr->lock. */
void nt_drop_parked(struct nt_worker *wk, struct nt_thread *thr, bool remember);
void nt_req_put(struct nt_req *r);
void nt_listener_gone(struct nt_worker *wk, struct nt_listener *l);

#endif
