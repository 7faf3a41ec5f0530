/* SPDX-License-Identifier: MIT */
/*
 * Engine internals shared by the engine's files (ns.c, sem.c, semctl.c, undo.c, budget.c,
 * state.c). Nothing outside server/engine/ includes this; the public interface is sem.h.
 *
 * Lock nesting, outermost first:
 *   ns->ids_lock  >  set->lock  >  sem->lock  >  proc->lock
 * and a budget's lock (budget.c), a leaf: taken under ids_lock (semget), ids_lock and a set
 * lock (removal), a set or semaphore lock (parking), a set lock and proc->lock (undo entries),
 * or under none (sv_waiter_free).
 * RCU read-side sections may enclose any of them. No engine lock is held when an engine call
 * returns, and none is held while a caller's memory is read or written.
 *
 * Each function with a calling rule writes it in its comment ("caller holds the set lock in
 * complex mode", "call under rcu_read_lock") and checks it on entry with SV_ASSERT() and the
 * helpers of lock.h, xpthread.h and rcu.h; the checks exist in the debug build only (make
 * DEBUG=1), which also yields the CPU at random at the SV_DEBUG_YIELD() points.
 */
#ifndef SV_ENGINE_H
#define SV_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <urcu.h> /* first: the other urcu headers need its flavour (see lock/rcu.h) */
#include <urcu/list.h>
#include <urcu/rculfhash.h>
#include <urcu/rculist.h>

#include "engine/sem.h"
#include "lock/lock.h"
#include "lock/rcu.h"
#include "lock/xpthread.h"
#include "util/debug.h"

#define SV_RELAXED(p)	     atomic_load_explicit((p), memory_order_relaxed)
#define SV_SET_RELAXED(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
/* A counter only ever written under one lock: a plain add, but readable without that lock. */
#ifndef SV_NO_COUNTERS
#define SV_COUNT(p) SV_SET_RELAXED((p), SV_RELAXED(p) + 1)
#else
#define SV_COUNT(p) ((void)(p)) /* COUNTERS=off: for bench/ to measure what counting costs */
#endif

/* sem_lock() returns a semaphore number, or this when it took the whole set. */
#define SV_LOCK_GLOBAL (-1)
/* For assertions: the caller holds the set lock and the set is in complex mode (sem.c). */
#define sv_set_locked_global(set)                                                                  \
	(sv_lock_held(&(set)->lock) && SV_RELAXED(&(set)->use_global_lock) != 0)
/* Simple ops stay on the set lock for this many global-lock sections after complex mode ends. */
#define SV_GLOBAL_LOCK_HYSTERESIS 10

/*
 * One semaphore. In simple mode (set->use_global_lock == 0) its lock protects all of it; in
 * complex mode the set lock does. Padded to whole cache lines (64 bytes with the adaptive
 * mutex; 128 with a pthread mutex, or with the debug build's amutex, which records its owner),
 * so that threads working on neighbouring semaphores never write the same line.
 */
#if defined(SV_LOCK_PTHREAD) || defined(AMUTEX_DEBUG)
#define SV_SEM_SIZE 128
#else
#define SV_SEM_SIZE 64
#endif
struct sv_sem {
	union {
		struct {
			sv_lock_t lock;
			int semval;
			int32_t sempid; /* tgid of the last operation, supervisor's view */
			struct cds_list_head pending_alter; /* simple decrements waiting */
			struct cds_list_head pending_const; /* simple wait-for-zero operations */
			/* statistics (struct sv_sem_info): written under the lock, read anywhere */
			_Atomic uint32_t nops;
			_Atomic uint32_t nwaits;
			_Atomic uint32_t lock_spun;
			_Atomic uint32_t lock_slept;
		};
		char line[SV_SEM_SIZE];
	};
};

/*
 * A semaphore set.
 *
 * Found through ns->by_id and ns->by_key under RCU; freed through call_rcu() when the last
 * reference goes (the id table holds one, every parked waiter holds one).
 *
 * Protected by set->lock (plus complex mode, see sem.c): pending_alter, pending_const,
 * complex_count, undos, deleted, perm changes, ctime.
 * Read without a lock (under RCU): id, key, nsems, ns, the perm fields (for permission checks, as
 * the kernel does; IPC_SET races benignly), otime.
 */
struct sv_set {
	struct cds_lfht_node id_node;
	struct cds_lfht_node key_node;
	struct sv_ns *ns;
	sv_lock_t lock;
	int32_t id;
	int32_t key;
	int nsems;
	atomic_int refcount;
	atomic_int use_global_lock; /* > 0: complex mode; release/acquire pair in sem.c */
	int complex_count;	    /* parked operations on more than one semaphore */
	/*
	 * Parked operations of any kind, changed under the lock of the list they join or leave
	 * (a semaphore's lock in simple mode: hence atomic). Under the set lock it is exact, and
	 * zero lets a whole-set change skip the walk over every semaphore's lists.
	 */
	atomic_int nwaiters;
	/*
	 * The permission bits, 16 bits wide as the kernel's (umode_t): beside deleted, in what
	 * would be padding, they keep a set of one semaphore within the allocator's 240-byte
	 * chunk, so that 32000 such sets fit in 8 MiB.
	 */
	_Atomic uint16_t mode;
	bool deleted;
	/*
	 * The set has fast storage (fast.c): its values live in words that programs change too.
	 * In the last byte of the header's padding; the storage itself is found by index in
	 * ns->fast, so that a set without it stays as small as it was.
	 */
	_Atomic uint8_t fast_on;
	_Atomic uint32_t uid, gid, cuid, cgid;
	_Atomic int64_t ctime;
	_Atomic int64_t otime;		    /* the latest of the kernel's per-semaphore otimes */
	struct cds_list_head pending_alter; /* complex waiters that alter, and merged simple ones */
	struct cds_list_head undos;	    /* struct sv_undo.set_node */
	/*
	 * call_rcu() writes rcu once the last reference is gone; by then no reader looks at the
	 * waiter lists (every path checks deleted under the lock first), so they share memory.
	 */
	union {
		struct cds_list_head pending_const; /* complex wait-for-zero waiters */
		struct rcu_head rcu;
	};
	_Atomic uint32_t lock_spun; /* statistics for the set lock */
	_Atomic uint32_t lock_slept;
	/* the semaphores follow the header: see sv_sems() */
};

/*
 * A set's semaphores start right after its header; in sets of more than one semaphore at the
 * next cache line, so that per-semaphore locks never share a line (set_alloc() in ns.c).
 */
#define SV_SET_HDR(nsems)                                                                          \
	((nsems) > 1 ? (sizeof(struct sv_set) + 63) & ~(size_t)63 : sizeof(struct sv_set))

static inline struct sv_sem *sv_sems(const struct sv_set *set)
{
	return (struct sv_sem *)((char *)set + SV_SET_HDR(set->nsems));
}

enum sv_waiter_state {
	SV_W_PARKED,	/* on a pending list */
	SV_W_DONE,	/* completed by a wake pass: on a wake queue, status is final */
	SV_W_CANCELLED, /* taken off by sv_waiter_cancel() */
};

/*
 * A parked operation. state, node and status change only under the lock of the list the
 * waiter is on (the semaphore's or the set's); once DONE or CANCELLED the waiter belongs to a
 * single owner and needs no lock.
 */
struct sv_waiter {
	struct cds_list_head node;
	struct sv_waiter *wq_next;
	struct sv_set *set;   /* reference held */
	struct sv_proc *proc; /* reference held */
	struct sv_undo *un;   /* proc's undo entry for set when a sop has SEM_UNDO */
	void *cookie;
	uint64_t jid;		  /* the call's journal id (sv_park.jid); 0: none */
	struct sv_budget *budget; /* charged for this waiter (reference held); NULL: none */
	uint32_t budget_uid;	  /* ... to this uid */
	int status;
	uint8_t state;
	bool alter;
	bool applied;	   /* completed with status 0: the operation changed values */
	uint16_t blocking; /* index of the sop that made it wait (for GETNCNT/GETZCNT) */
	unsigned int nsops;
	int32_t *oldpid; /* sempid of each sop's semaphore before it was applied */
	struct sv_sembuf sops[];
};

/*
 * A process's adjust-on-exit values for one set.
 * proc_node: in proc->undos, an RCU list changed under proc->lock.
 * set_node: in set->undos, under the set lock (complex mode).
 * semid: -1 once the set was removed (then the entry is freed after a grace period) or the
 * entry was applied at exit (then it stays until the proc is freed, because completed waiters
 * may still look at it). Written under both the set lock and proc->lock.
 * semadj[i]: under the lock that protects semaphore i.
 */
struct sv_undo {
	struct cds_list_head proc_node;
	struct cds_list_head set_node;
	struct rcu_head rcu;
	struct sv_proc *proc;
	int semid;
	int nsems;
	uint32_t budget_uid; /* charged to this uid in its set's namespace's budget (budget.c) */
	/*
	 * The process's private page in the set's fast storage, or NULL. Written under the set
	 * lock in complex mode, read under the lock covering any semaphore of the set.
	 */
	struct sv_fast_page *fpage;
	/*
	 * The storage last revoked while the process had a page in it, and the pending slots of
	 * its operations that revocation doomed: what sv_fast_ask() answers. Under the set lock.
	 */
	uint64_t fast_gone;
	uint64_t fast_doomed;
	int16_t semadj[];
};

struct sv_proc {
	pthread_mutex_t lock;	    /* proc->undos changes, dead */
	struct cds_list_head undos; /* entries; those applied at exit stay (semid -1) until freed */
	struct rcu_head rcu;
	struct sv_ns *ns;
	int32_t pid;
	atomic_int refcount;
	atomic_bool dead; /* exit has begun: no new entries, parked waiters are dropped */
	uint64_t jkey;	  /* names it in the journal (sv_proc_set_jkey()); pid by default */
};

#define SV_SLOT_CHUNK  512
#define SV_SLOT_CHUNKS (SV_IPCMNI / SV_SLOT_CHUNK)

struct sv_ns {
	struct cds_lfht *by_id;
	struct cds_lfht *by_key;
	pthread_mutex_t ids_lock; /* creation, removal, and the fields marked (ids) */
	_Atomic int semmsl, semmns, semopm, semmni;
	/* index -> set for SEM_STAT; chunks published with rcu_assign_pointer */
	struct sv_set *_Atomic *_Atomic slots[SV_SLOT_CHUNKS];
	/* index -> a set's fast storage (fast.c), chunks made as slots' are */
	struct sv_fast *_Atomic *_Atomic fast[SV_SLOT_CHUNKS];
	uint64_t used[SV_IPCMNI / 64]; /* (ids) allocated indexes */
	int in_use;		       /* (ids) number of sets */
	int used_sems;		       /* (ids) semaphores in all sets */
	int max_idx;		       /* (ids) highest index in use, -1 if none */
	int last_idx;		       /* (ids) index given out last */
	int seq;		       /* (ids) sequence number for new ids */
	int next_id;		       /* (ids) sem_next_id, -1 if unset */
	unsigned int idr_next;	       /* (ids) where the cyclic index search starts */
	atomic_int refcount;
	atomic_int nwaiters;	  /* statistics */
	struct sv_budget *budget; /* where its sets are charged (reference held); NULL: nowhere */
	uint64_t jkey;		  /* names it in the journal (sv_ns_set_jkey()); 0 by default */
};

/* ---- ns.c ---- */
/* call under rcu_read_lock */
struct sv_set *sv_set_lookup(struct sv_ns *ns, int id);
struct sv_set *sv_set_lookup_index(struct sv_ns *ns, int idx);
void sv_set_get(struct sv_set *set);
void sv_set_put(struct sv_set *set);
/* caller holds ns->ids_lock and the set lock in complex mode */
void sv_set_unlink(struct sv_ns *ns, struct sv_set *set);
/*
 * A set of nsems semaphores with key, initialised but in no table yet, its one reference the
 * tables' (set_alloc()'s rules for nsems); NULL when out of memory. Any lock or none.
 */
struct sv_set *sv_set_new(struct sv_ns *ns, int32_t key, int nsems);
/* sv_ns_set_limits() without its record: caller holds ids_lock. 0 or -ERANGE (semmni kept). */
int sv_ns_store_limits(struct sv_ns *ns, const struct sv_limits *lim);
/* Is key a set's key in ns? Caller holds ids_lock and is in RCU. */
bool sv_ns_key_taken(struct sv_ns *ns, int32_t key);
/* Free a set that never went into the tables. */
void sv_set_discard(struct sv_set *set);
/* For a restore (state.c): make sure index idx has its slot. 0 or -ENOMEM. Caller holds ids_lock. */
int sv_ids_reserve(struct sv_ns *ns, int idx);
/*
 * For a restore: enter set under the id it already has (its index free and reserved), counting
 * it in in_use, used_sems and max_idx. Caller holds ids_lock and is in RCU.
 */
void sv_ids_insert(struct sv_ns *ns, struct sv_set *set);
int64_t sv_now(void);

/* ---- budget.c ---- */
/* Charge a new set to uid: 0, -ENOSPC or -ENOMEM. Caller holds the namespace's ids_lock. */
int sv_budget_charge(struct sv_budget *b, uint32_t uid, int nsems);
/* Credit what a charge for uid and nsems took. Caller holds ids_lock (and may hold set->lock). */
void sv_budget_credit(struct sv_budget *b, uint32_t uid, int nsems);
/* An undo entry for a set of nsems semaphores: 0, -ENOMEM (a bound, or no memory). Any lock. */
int sv_budget_charge_undo(struct sv_budget *b, uint32_t uid, int nsems);
void sv_budget_credit_undo(struct sv_budget *b, uint32_t uid, int nsems);
/*
 * The same two charges for what a restore brings back (state.c): the maxima are not applied,
 * since what existed must come back even if they shrank. 0, or -ENOMEM (no memory).
 */
int sv_budget_charge_restore(struct sv_budget *b, uint32_t uid, int nsems);
int sv_budget_charge_undo_restore(struct sv_budget *b, uint32_t uid, int nsems);
/* A parked call: 0, -ENOMEM (a bound, or no memory). Any lock. */
int sv_budget_charge_waiter(struct sv_budget *b, uint32_t uid);
void sv_budget_credit_waiter(struct sv_budget *b, uint32_t uid);

/* ---- sem.c ---- */
int sv_sem_lock(struct sv_set *set, const struct sv_sembuf *sops, unsigned int nsops);
void sv_sem_unlock(struct sv_set *set, int locknum);
/* Permission checks: 0, -EACCES / -EPERM, or cred_fill's -errno (-SV_EGONE among them). */
int sv_ipcperms(const struct sv_caller *c, const struct sv_set *set, int flag);
int sv_is_owner(const struct sv_caller *c, const struct sv_set *set);
/* Right before an irrevocable change: 0, or -SV_EGONE (do nothing). Caller holds the locks. */
int sv_committing(const struct sv_caller *c);
/*
 * err, found without the set's lock, says the set is there: once any change being committed
 * to it is done, err, or -EINVAL if that change removed it. Caller is in RCU, holds no lock.
 */
int sv_settle(struct sv_set *set, int err);
/* caller holds the lock(s) covering sops: the set lock in complex mode when sops is NULL */
void sv_do_smart_update(struct sv_set *set, const struct sv_sembuf *sops, unsigned int nsops,
			bool otime, struct sv_wakeq *wq);
/* caller holds the set lock in complex mode */
int sv_count_semcnt(struct sv_set *set, int semnum, bool count_zero);
/*
 * Remove a set: waiters get EIDRM through wq. Caller holds ids_lock and the set lock (global),
 * and is in RCU.
 */
void sv_freeary(struct sv_ns *ns, struct sv_set *set, struct sv_wakeq *wq);

/* ---- undo.c ---- */
/* The caller's undo entry for semid, allocated if needed; under RCU read lock. ERR: NULL + *err */
struct sv_undo *sv_undo_find_alloc(const struct sv_caller *c, int semid, int *err);
/* caller holds the set lock (global) and is in RCU */
void sv_undo_unlink_all(struct sv_set *set);
/* The caller's entry for semid if it has one (no allocation); under RCU. */
struct sv_undo *sv_undo_lookup(const struct sv_caller *c, int semid);
/*
 * A restore (state.c): link un, filled in and charged already, to p and set as a new entry would
 * be. Caller holds the set lock (global) and is in RCU; set is not deleted, p has not exited.
 */
void sv_undo_link(struct sv_proc *p, struct sv_set *set, struct sv_undo *un);
/*
 * A replay (journal.c), where nothing else runs: p's entry for set, made and charged as a
 * restore if it has none (NULL: out of memory); and p's entry for set applied at exit, as
 * sv_proc_exit() leaves it (without touching values: the records carry them).
 */
struct sv_undo *sv_undo_replay_entry(struct sv_proc *p, struct sv_set *set, uint32_t budget_uid);
void sv_undo_replay_retire(struct sv_proc *p, struct sv_set *set);

/* ---- fast.c: the engine's side of the fast path (server/engine/model/fastpath.pml) ---- */

struct sv_fast;
/*
 * The set's fast storage, or NULL. Caller holds a lock covering any of its semaphores: the
 * storage comes and goes only under the set lock in complex mode.
 */
struct sv_fast *sv_fast_of(const struct sv_set *set);
/*
 * Caller holds the lock covering semaphore num: from here on the engine holds its word, and
 * sem->semval is the value (a fast operation may have changed it since the last section).
 */
void sv_fast_hold(struct sv_set *set, struct sv_fast *f, int num);

/* Semaphore num, its value the engine's to read and change. Caller holds the lock covering it. */
static inline struct sv_sem *sv_sem_val(struct sv_set *set, int num)
{
	if (SV_RELAXED(&set->fast_on)) {
		struct sv_fast *f = sv_fast_of(set);

		if (f)
			sv_fast_hold(set, f, num);
	}
	return &sv_sems(set)[num];
}

/*
 * Does the engine hold num's value (true for a set without storage)? A semaphore whose word
 * it does not hold has no parked operation naming it. Caller holds the lock covering num.
 */
bool sv_fast_held(const struct sv_set *set, int num);
/*
 * Takes every word, which adds the fast operations each counted to its semaphore's nops: the
 * set's fast operations so far, as sv_set_info.fast_ops. Caller holds the set lock (global);
 * its unlock gives the words back.
 */
uint64_t sv_fast_collect(struct sv_set *set);
/* sv_sem_unlock(), before the lock goes: give back the words the section may give. */
void sv_fast_release(struct sv_set *set, int locknum);
/* A waiter with these sops parks (delta 1) or leaves its list (-1). Caller holds their locks. */
void sv_fast_parked(struct sv_set *set, const struct sv_sembuf *sops, unsigned int nsops,
		    int delta);
/*
 * A call by the process owning un (NULL: none), from pending slot slot1 - 1 of its page
 * (slot1 0: unknown), is about to operate on sops: hold their words, resolve the calling
 * thread's doomed operation, and move the page's semadj entries for them into un, so that
 * un->semadj is the whole semadj the kernel's checks see. Caller holds the sops' locks.
 */
void sv_fast_enter(struct sv_set *set, struct sv_undo *un, unsigned slot1,
		   const struct sv_sembuf *sops, unsigned int nsops);
/* The tag a sempid set by un's process gets (0: none, which no fast operation matches). */
uint32_t sv_fast_tag(const struct sv_undo *un);
/* sempid of num changed: record its tag. Caller holds the lock covering num, and its word. */
void sv_fast_set_tag(struct sv_set *set, int num, uint32_t tag);
/*
 * un->semadj[num] changed: copy it to un's page. Caller holds the lock covering num, and its
 * word.
 */
void sv_fast_mirror(struct sv_set *set, const struct sv_undo *un, int num);
/* SETVAL or SETALL cleared num's semadj: a new generation. Caller holds the set lock (global). */
void sv_fast_bump(struct sv_set *set, int num);
/*
 * The process owning un exits: its page's entries join un->semadj (clamped to the semadj's
 * range: a program can write anything there), and the page goes. Caller holds the set lock
 * (global).
 */
void sv_fast_exit(struct sv_set *set, struct sv_undo *un);
/*
 * IPC_SET: every mapping stops counting, and each process's page joins its undo list. A
 * process that may still alter the set maps new storage, with its permission checked again.
 * Caller holds the set lock (global).
 */
void sv_fast_revoke(struct sv_set *set);
/*
 * The set is removed: every mapping stops counting. Caller holds ids_lock and the set lock
 * (global).
 */
void sv_fast_remove(struct sv_set *set);

/* ---- journal.c ---- */
extern const struct sv_journal *_Atomic sv_jnl_sink;
/* Is a journal attached? Lets a hot path skip its notes at the cost of one load. */
static inline bool sv_jnl_on(void)
{
	return atomic_load_explicit(&sv_jnl_sink, memory_order_relaxed) != NULL;
}
/*
 * Notes of one change each, for the record of the locked section they are made in; each takes
 * the values as they are now, so it follows the change. Caller holds the lock(s) covering what
 * it notes: the semaphore's for sv_jnl_sem() and sv_jnl_adj(), the set lock in complex mode
 * for the others, ids_lock as well for sv_jnl_new() and sv_jnl_rm().
 */
void sv_jnl_sem(struct sv_set *set, int num); /* semval and sempid of num */
void sv_jnl_adj(struct sv_set *set, const struct sv_undo *un, int num); /* un->semadj[num] */
void sv_jnl_clear_adj(struct sv_set *set, int num); /* every entry's semadj[num], -1: all, is 0 */
void sv_jnl_perm(struct sv_set *set);		    /* uid, gid, mode */
void sv_jnl_new(struct sv_set *set);		    /* has its id, not yet visible */
void sv_jnl_rm(struct sv_set *set);
void sv_jnl_undo_gone(struct sv_set *set, const struct sv_undo *un); /* applied at exit */
void sv_jnl_done(struct sv_set *set, uint64_t jid, int64_t result);
/* The section's record goes out: right before its lock is released (sv_sem_unlock() does). */
void sv_jnl_flush(void);
/* A record of its own for the namespace's limits and sem_next_id. Caller holds ids_lock. */
void sv_jnl_limits(struct sv_ns *ns);

/* The caller's memory, through its ops (plain memory when it has none): 0 or -EFAULT. */
int sv_copy_in(const struct sv_caller *c, uint64_t addr, void *buf, size_t len);
int sv_copy_out(const struct sv_caller *c, uint64_t addr, const void *buf, size_t len);

#endif /* SV_ENGINE_H */
