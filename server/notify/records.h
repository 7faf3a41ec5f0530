/* SPDX-License-Identifier: MIT */
/*
 * Thread and process records: what the supervisor knows of a confined thread and its thread
 * group, found by number in two RCU hash tables (s->threads, s->procs) and counted by
 * references. Why a record can be trusted to be its thread's is in ident.h; records are made
 * there (ident_thread()) and end in exits.c.
 *
 * Locking: s->tables_lock serialises additions to and removals from the tables (lookups are
 * RCU reads); it is never held with a thread lock, and takes only proc->lock inside it.
 */
#ifndef SV_NOTIFY_RECORDS_H
#define SV_NOTIFY_RECORDS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <urcu.h>
#include <urcu/list.h>
#include <urcu/rculfhash.h>

#include "engine/sem.h"
#include "notify/events.h"
#include "notify/target.h"

struct nt_super;
struct nt_ns;
struct nt_req;

/* A thread group's pid namespaces, for GETPID: nspid[i] is its pid at level i (0: the
   supervisor's), in pid namespace pidns[i] (an id, or an inode without ids). */
struct nt_pids {
	int levels; /* 0: not known */
	int32_t nspid[TGT_MAX_LEVELS];
	uint64_t pidns[TGT_MAX_LEVELS];
};

/*
 * A confined thread group. Found by tgid in s->procs (RCU). Holds the engine's view of the
 * process (its SEM_UNDO owner) for the namespace it currently uses.
 */
struct nt_process {
	struct cds_lfht_node node;
	struct rcu_head rcu;
	struct nt_src src; /* thread-group pidfd: readable when the whole group has exited */
	struct nt_super *super;
	atomic_int refcount; /* the table's, one per thread record, one per user */
	int32_t tgid;
	uint64_t ino;	      /* its pidfd's inode: names it in the journal (pidfs: never reused) */
	pthread_mutex_t lock; /* svp, svp_ns, threads, exited */
	struct sv_proc *svp;
	struct nt_ns *svp_ns;	      /* a reference while svp is set */
	struct cds_list_head threads; /* struct nt_thread.proc_node */
	atomic_bool mixed_ns;	      /* a non-leader changed IPC namespace: keep none */
	bool exited;
	struct nt_pids pids;
};

/* A call a thread made, to recognise a restart of an interrupted one (serve.c). */
struct nt_callsig {
	bool valid;
	int nr;
	uint64_t args[6];
	long result; /* for kept completions */
};

/* A confined thread. Found by tid in s->threads (RCU). Everything below is under thr->lock. */
struct nt_thread {
	struct cds_lfht_node node;
	struct rcu_head rcu;
	struct nt_src src; /* its pidfd (PIDFD_THREAD), or -1 where the kernel has none */
	atomic_int refcount;
	/* Its pidfd's exit event drops the table's reference (else whoever takes the record out
	   of the table does). Turns false only under s->tables_lock, if it cannot be watched. */
	atomic_bool watched;
	int32_t tid;
	struct nt_process *proc;	/* reference */
	struct cds_list_head proc_node; /* proc->threads, under proc->lock */
	pthread_mutex_t lock;
	bool dead;
	/* Kept facts (ident.h): */
	bool ns_kept;	  /* ns is current: read while it waited, no unshare/setns since */
	struct nt_ns *ns; /* where it was last seen (a reference, entered in the registry) */
	/* Its calls (serve.c, parked.c): */
	struct nt_req *parked;	       /* its waiting call */
	struct nt_callsig interrupted; /* its last call died while parked */
	struct nt_callsig kept;	       /* its last call completed, answer lost, not undone */
};

static inline bool nt_callsig_is(const struct nt_callsig *sig, int nr, const uint64_t *args)
{
	return sig->valid && sig->nr == nr && !__builtin_memcmp(sig->args, args, sizeof(sig->args));
}

static inline void nt_callsig_set(struct nt_callsig *sig, int nr, const uint64_t *args, long result)
{
	sig->valid = true;
	sig->nr = nr;
	__builtin_memcpy(sig->args, args, sizeof(sig->args));
	sig->result = result;
}

/* A reference to an object found under RCU, unless its last one is already gone. */
static inline bool nt_ref_get_not_zero(atomic_int *ref)
{
	int v = atomic_load_explicit(ref, memory_order_relaxed);

	while (v > 0)
		if (atomic_compare_exchange_weak(ref, &v, v + 1))
			return true;
	return false;
}

/* The record of tid or tgid if there is one, with a reference; NULL if not. */
struct nt_thread *nt_thread_find(struct nt_super *s, int32_t tid);
struct nt_process *nt_process_find(struct nt_super *s, int32_t tgid);
void nt_thread_put(struct nt_thread *thr);
void nt_process_put(struct nt_process *p);

/*
 * The record of thread group tgid, found or made (opening its pidfd, watched for its exit);
 * a reference. NULL with *err: -ESRCH (gone), -ENOMEM, -ESTALE (the record found is of a
 * process that has been reaped: handle the pending exits, nt_drain_exits(), and ask again).
 */
struct nt_process *nt_process_get(struct nt_super *s, int32_t tgid, int *err);
/* Take p out of the table, dropping the table's reference if this call is what took it out. */
void nt_process_unlist(struct nt_super *s, struct nt_process *p);

/*
 * Put t, whole, in the table: t, or (another worker was quicker) the record already there
 * with a reference, t then freed; NULL if that one is ending (*err -ESRCH). On success t
 * has two references, the table's and the caller's, and is on its process's list.
 */
struct nt_thread *nt_thread_add(struct nt_super *s, struct nt_thread *t, int *err);

#endif
