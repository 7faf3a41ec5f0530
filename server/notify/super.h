/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's state, shared by the files of this folder, and the order its locks nest in.
 *
 * Files, each calling only those listed after it:
 *   super.c      the workers' loop, the lanes, the supervisor's life (new, start, stop, free)
 *   recover.c    crash safety: the journal's checkpoints, recovery after a crash
 *   persist.c    the state one supervisor process hands the next (restarts)
 *   admin.c      control-plane questions and orders (notify.h)
 *   receiver.c   the receiver thread beside a lone worker
 *   serve.c      serving one call
 *   ident.c      who is calling: credentials, namespaces and pids of one call
 *   exits.c      how thread and process records end
 *   parked.c     the life of a parked call
 *   records.c    thread and process records
 *   listener.c   listeners and their registry
 *   transport.c  receiving and answering calls, and the callers' memory
 *   events.c     the epoll sets
 *   stats.c      counters and --trace
 *   durable.c    the memfd a crash leaves behind: calls' slots, checkpoint, journal
 *   nsreg.c, target.c, filter.c   namespaces, facts read about a thread, the filter
 *   threads.c    the supervisor's threads: their names and how the scheduler treats them
 *
 * Locks, outermost first; a lock is only ever taken inside those to its left:
 *   s->exits_lock > thr->lock > proc->lock
 *                 > thr->lock > reg->lock (nsreg.h) > engine locks (engine.h)
 *                                                     > s->timers_lock, s->parked_lock
 *   s->tables_lock (records.h): inside s->exits_lock at most, never with a thread lock, with
 *                  proc->lock inside it.
 *   s->lock (listeners), the ghost lock (exits.c), s->timers_lock, s->parked_lock,
 *                  s->bulk_lock: nothing inside them.
 *   The durable memfd's locks (durable.c) are leaves, taken under any of the above: the
 *   journal's append runs under engine locks, a slot's release under a thread's lock.
 * Workers hold no lock while they wait, except a thread's own lock while one of its calls is
 * decided and answered (its notification is pending, so nobody else needs the lock but a
 * deliverer, canceller or timer of that thread's parked call, and its own next call, which
 * must find the answer's fate settled), and reads of its memory or /proc made for that call.
 * The engine may ask for the caller's groups and capabilities (ident_cred_fill()) under
 * ns->ids_lock, as the kernel checks permissions under its ids rwsem: /proc/TID/status,
 * capget() and the namespace files never wait for the target, so no caller can stall others.
 */
#ifndef SV_NOTIFY_SUPER_H
#define SV_NOTIFY_SUPER_H

#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urcu/list.h>
#include <urcu/rculfhash.h>

#include "notify/events.h"
#include "notify/notify.h"
#include "notify/nsreg.h"
#include "notify/target.h"

struct dur;
struct nt_req;
struct nt_receiver;

/* Per worker: its counters (folded on read) and reusable buffers. */
struct nt_worker {
	struct nt_super *super;
	pthread_t thread;
	struct nt_stats stats;
	struct seccomp_notif *notif; /* where calls are received without a slot */
	size_t notif_size;
	int slot;	      /* its slot in s->dur for the next call, -1: none yet (durable.h) */
	uint64_t jid;	      /* the journal id of the call being served; 0: none */
	struct nt_req *spare; /* for the next semop: only a call that waits keeps one */
	struct cds_list_head guest_node; /* s->guests, for a guest worker (nt_guest_new()) */
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
	 * The bulk lane (super.c): its worker (NULL: no lane) and the heavy listeners whose
	 * events it owns, in the order they came (nt_listener.bulk_node).
	 */
	struct nt_worker *bulk;
	pthread_mutex_t bulk_lock;
	pthread_cond_t bulk_cond;
	struct cds_list_head bulk_queue;
	bool bulk_running;
	size_t resp_size;
	atomic_bool stopping;

	pthread_mutex_t lock; /* listeners, guests */
	struct cds_list_head listeners;
	int nlisteners;
	struct cds_list_head guests; /* guest workers (nt_guest_new()) */

	struct dur *dur; /* crash safety (recover.c); NULL: none */
	bool journaling; /* the engine's journal goes to dur */
	bool pausing;	 /* the workers stop to start again (a checkpoint): nothing is dropped */

	struct tgt_features feat; /* what this kernel offers (ident.h) */
	struct nsreg reg;	  /* namespaces */
	int probe_ticks;	  /* sweeps until the next namespace probe */

	pthread_mutex_t tables_lock; /* creation and removal in threads/procs (records.h) */
	struct cds_lfht *threads;
	struct cds_lfht *procs;

	pthread_mutex_t timers_lock;
	struct nt_req **timers; /* min-heap on deadline_ns */
	int ntimers, timers_cap;

	pthread_mutex_t parked_lock;
	struct cds_list_head parked;

	struct nt_stats events; /* counted outside workers (atomic adds) */
	/* CLOCK_MONOTONIC when the counters started: at the first start (carried over by a
	   restart, persist.c) or their last reset */
	_Atomic int64_t counting_ns;
};

/*
 * A worker for a thread that is not one of ours: a transport's (the ptrace tracer, ptrace.h)
 * serving calls itself with nt_receive(). Its counters count with the workers'; the thread
 * registers with RCU itself. NULL without memory. nt_guest_free() keeps its counters.
 */
struct nt_worker *nt_guest_new(struct nt_super *s);
void nt_guest_free(struct nt_worker *wk);

#endif
