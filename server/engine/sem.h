/* SPDX-License-Identifier: MIT */
/*
 * The semaphore engine: System V semaphores with the semantics of Linux's ipc/sem.c, as a library.
 *
 * The engine knows nothing of seccomp. A caller describes itself with a struct sv_caller (the
 * namespace it lives in, its credentials, its process, and how to reach its memory) and calls
 * sv_semget(), sv_semtimedop() or sv_semctl() with the raw system-call arguments. Each returns what
 * the system call would return: a value >= 0, or a negative errno. An operation that has to wait
 * is not slept on: sv_semtimedop() returns SV_PARKED and hands back a waiter (a ticket). Any later
 * call that lets parked operations proceed completes them and appends them to the caller's wake
 * queue; the caller delivers those results once it has returned from the engine (so no engine lock
 * is held while answers go out).
 *
 * Errors returned are exactly the kernel's for the same call, in the kernel's order of checks.
 *
 * Threads: every thread that calls into the engine must be registered with sv_thread_register()
 * (the engine reads its tables under userspace RCU).
 */
#ifndef SV_SEM_H
#define SV_SEM_H

#include <stdbool.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Compile-time constants of Linux (include/uapi/linux/sem.h). */
#define SV_SEMVMX  32767      /* largest semaphore value */
#define SV_SEMAEM  32767      /* largest adjust-on-exit value */
#define SV_IPCMNI  32768      /* ids per namespace: id = seq * SV_IPCMNI + index */
#define SV_SEMMNS  1024000000 /* seminfo.semmnu and .semmap report this */
#define SV_SEMUME  500
#define SV_SEMUSZ  20
#define SV_SEQ_MAX (0x7fffffff / SV_IPCMNI)

/* Commands and flags, with the values of the x86_64 ABI. */
#define SV_IPC_CREAT	00001000
#define SV_IPC_EXCL	00002000
#define SV_IPC_NOWAIT	00004000
#define SV_SEM_UNDO	0x1000
#define SV_IPC_PRIVATE	0
#define SV_IPC_RMID	0
#define SV_IPC_SET	1
#define SV_IPC_STAT	2
#define SV_IPC_INFO	3
#define SV_GETPID	11
#define SV_GETVAL	12
#define SV_GETALL	13
#define SV_GETNCNT	14
#define SV_GETZCNT	15
#define SV_SETVAL	16
#define SV_SETALL	17
#define SV_SEM_STAT	18
#define SV_SEM_INFO	19
#define SV_SEM_STAT_ANY 20
#define SV_IPC_64	0x100 /* i386: the semid64_ds layout (ipc(2)'s version flag) */

/* sv_semtimedop() returns this when the operation waits; the ticket is in park->waiter. */
#define SV_PARKED 1

struct sv_budget;
struct sv_ns;
struct sv_proc;
struct sv_waiter;

/* The four per-namespace limits of /proc/sys/kernel/sem, in that file's order. */
struct sv_limits {
	int semmsl; /* semaphores per set */
	int semmns; /* semaphores in the namespace */
	int semopm; /* operations per semop call */
	int semmni; /* sets in the namespace, at most SV_IPCMNI */
};

/* struct sembuf as the ABI lays it out (6 bytes). */
struct sv_sembuf {
	uint16_t sem_num;
	int16_t sem_op;
	int16_t sem_flg;
};

/*
 * Who is calling, as the supervisor sees it. uids and gids are in the supervisor's user namespace;
 * the group test uses fsgid and the supplementary groups, as the kernel's in_group_p() does.
 *
 * The supplementary groups and the capabilities may be left out (missing): the engine then asks
 * for them through sv_caller_ops.cred_fill when, and only when, a decision depends on them, since
 * for a confined program reading them costs more than the rest of the call.
 */
#define SV_CRED_GROUPS 1u
#define SV_CRED_CAPS   2u

struct sv_cred {
	uint32_t euid;
	uint32_t egid;
	uint32_t fsgid;
	unsigned int missing; /* SV_CRED_*: not filled in yet */
	int ngroups;
	const uint32_t *groups;
	bool cap_ipc_owner; /* CAP_IPC_OWNER in the user namespace owning the IPC namespace */
	bool cap_sys_admin; /* CAP_SYS_ADMIN there: IPC_SET/IPC_RMID on others' sets */
};

/*
 * What an engine call returns when the caller's ops said the caller no longer waits for it
 * (cred_fill, committing): nothing was done, and no answer can reach it.
 */
#define SV_EGONE ESRCH

struct sv_caller;

/*
 * How to reach the caller's memory and how it sees ids. Any member may be NULL: memory is then
 * this process's own (addresses are plain pointers) and ids are shown unchanged.
 */
struct sv_caller_ops {
	/* Copy len bytes from/to the caller's address addr: 0, or -EFAULT. */
	int (*read)(const struct sv_caller *c, uint64_t addr, void *buf, size_t len);
	int (*write)(const struct sv_caller *c, uint64_t addr, const void *buf, size_t len);
	/* A pid as the caller's pid namespace shows it; 0 if it cannot see it. */
	int32_t (*pid_out)(const struct sv_caller *c, int32_t pid);
	/* uid/gid as the caller's user namespace shows them (overflow id if unmapped). */
	uint32_t (*uid_out)(const struct sv_caller *c, uint32_t uid);
	uint32_t (*gid_out)(const struct sv_caller *c, uint32_t gid);
	/* uid/gid given by the caller, in the supervisor's view: false if unmappable. */
	bool (*uid_in)(const struct sv_caller *c, uint32_t uid, uint32_t *out);
	bool (*gid_in)(const struct sv_caller *c, uint32_t gid, uint32_t *out);
	/*
	 * Fill in the credentials cred->missing names (at least those in what): 0, -SV_EGONE (the
	 * call is abandoned), or another -errno, which the call then returns (ENOMEM, say: the
	 * caller waits for an answer, so it must get one). Called under the RCU read lock, and for
	 * semget, IPC_SET and IPC_RMID with the namespace's ids_lock held too; never under a set
	 * or semaphore lock.
	 */
	int (*cred_fill)(const struct sv_caller *c, unsigned int what);
	/*
	 * Does the caller still wait for this call? Asked with the set's locks held, right before
	 * a change that no later failure can undo: a new set, IPC_RMID, IPC_SET, SETVAL, SETALL.
	 * 0, or -SV_EGONE (the change is not made). A caller that cannot be interrupted while it
	 * waits leaves it NULL.
	 */
	int (*committing)(const struct sv_caller *c);
};

struct sv_caller {
	struct sv_ns *ns;
	const struct sv_cred *cred;
	struct sv_proc *proc; /* the calling thread group: owns SEM_UNDO state, gives sempid */
	const struct sv_caller_ops *ops;
	void *priv;   /* for ops */
	uint64_t jid; /* names the call in the journal's records of what it did; 0: not named */
	/*
	 * 1 + the fast path's pending slot of the calling thread in its process's page of the
	 * set (sv_fast_map()), 0 when unknown: a trapped call by the thread whose fast operation
	 * the engine doomed ends that operation, and lets its semaphore go back to the fast path.
	 */
	unsigned int fast_slot;
};

/* Parking: what sv_semtimedop() hands back with SV_PARKED. */
struct sv_park {
	void *cookie;		  /* in: kept in the waiter for the caller */
	uint64_t jid;		  /* in: the call's journal id (sv_caller.jid) */
	struct sv_waiter *waiter; /* out: the ticket */
	bool timed;		  /* out: semtimedop gave a timeout ... */
	struct timespec timeout;  /* ... of this length, counted from now */
};

/*
 * A wake queue: waiters that a call completed. Delivered by the caller after the call returns.
 * Pop each waiter, read sv_waiter_result() and sv_waiter_cookie(), deliver, then either
 * sv_waiter_free() it or, when delivery failed because the waiting thread is gone,
 * sv_waiter_rollback() it.
 */
struct sv_wakeq {
	struct sv_waiter *head;
	struct sv_waiter **tail;
};

/* ---- threads ---- */
void sv_thread_register(void);
void sv_thread_unregister(void);

/* ---- namespaces ---- */

/* A new namespace. lim NULL: the host's /proc/sys/kernel/sem (Linux's defaults if unreadable). */
struct sv_ns *sv_ns_new(const struct sv_limits *lim);
/*
 * The same, its sets charged to budget (NULL: none, as sv_ns_new()). The namespace holds a
 * reference to the budget until it is freed.
 */
struct sv_ns *sv_ns_new_budget(const struct sv_limits *lim, struct sv_budget *budget);
void sv_ns_get(struct sv_ns *ns);
/*
 * Remove every set, as when the namespace dies: parked waiters complete with EIDRM through wq.
 * The namespace itself stays usable (empty).
 */
void sv_ns_shutdown(struct sv_ns *ns, struct sv_wakeq *wq);
/*
 * Drop a reference; the last one frees the namespace and its sets. Callers cancel their parked
 * waiters (or shut the namespace down and deliver) before they drop their last reference.
 */
void sv_ns_put(struct sv_ns *ns);
void sv_ns_limits(const struct sv_ns *ns, struct sv_limits *out);
/* Change the limits as writing /proc/sys/kernel/sem would: -ERANGE if semmni is out of range. */
int sv_ns_set_limits(struct sv_ns *ns, const struct sv_limits *lim);
/* /proc/sys/kernel/sem_next_id: the id the next new set gets (-1: choose as usual). */
void sv_ns_set_next_id(struct sv_ns *ns, int id);
/* The id still waiting to be used (-1 when none: the last one was used). */
int sv_ns_next_id(struct sv_ns *ns);
/*
 * Parse "SEMMSL,SEMMNS,SEMOPM,SEMMNI" (the order of /proc/sys/kernel/sem), as the command
 * line and configuration file give limits: 0, or -1 if malformed or out of range.
 */
int sv_limits_parse(const char *s, struct sv_limits *out);
/* The host's current limits (or Linux's defaults). */
void sv_limits_host(struct sv_limits *out);
void sv_limits_default(struct sv_limits *out);

/* ---- budgets (budget.c) ---- */

/*
 * What may exist at once in all the namespaces sharing a budget, in all and per uid; 0: no
 * bound. Charged to (budget.c says why):
 *  - semaphores and sets: the set's creator (cuid). A semget that would pass a bound: ENOSPC.
 *  - undo entries: the euid whose semop with SEM_UNDO made the entry; an entry counts once per
 *    SV_BUDGET_UNDO_SEMS semaphores of its set (rounded up). Past a bound: that semop, ENOMEM.
 *  - waiters (parked semops): the euid of the call. Past a bound the semop that would wait
 *    fails with ENOMEM.
 *  - namespaces: the owner of the IPC namespace's user namespace (charged by the caller of
 *    sv_budget_charge_ns(), the notify layer's registry). Past a bound: ENOSPC.
 * Each is given back when its object goes; new maxima apply to new charges only.
 */
enum sv_budget_kind {
	SV_BUDGET_SEMS,
	SV_BUDGET_SETS,
	SV_BUDGET_UNDOS,
	SV_BUDGET_WAITERS,
	SV_BUDGET_NAMESPACES,
	SV_BUDGET_KINDS
};

#define SV_BUDGET_UNDO_SEMS 32

struct sv_budget_limits {
	long sems, sems_per_uid;
	long sets, sets_per_uid;
	long undos, undos_per_uid;
	long waiters, waiters_per_uid;
	long namespaces, namespaces_per_uid;
};

struct sv_budget_info {
	struct sv_budget_limits limits;
	long sems, sets;			/* charged now (as used[SEMS], used[SETS]) */
	long used[SV_BUDGET_KINDS];		/* charged now, by kind */
	uint64_t refused;			/* every refusal, of any kind */
	uint64_t refused_kind[SV_BUDGET_KINDS]; /* refusals by the bound that said no */
};

/* A budget with one reference (the caller's), or NULL when out of memory. */
struct sv_budget *sv_budget_new(const struct sv_budget_limits *lim);
void sv_budget_get(struct sv_budget *b);
void sv_budget_put(struct sv_budget *b); /* NULL is fine */
/* New maxima (a configuration reload): for charges from now on; any thread. */
void sv_budget_set_limits(struct sv_budget *b, const struct sv_budget_limits *lim);
void sv_budget_info(struct sv_budget *b, struct sv_budget_info *out);
/* What is charged to uid now, of one kind; the semaphores. */
long sv_budget_uid_count(struct sv_budget *b, uint32_t uid, enum sv_budget_kind kind);
long sv_budget_uid_sems(struct sv_budget *b, uint32_t uid);
/*
 * One IPC namespace more for uid (the owner of its user namespace): 0, -ENOSPC (a bound would
 * be passed; counted as a refusal) or -ENOMEM. Credit it when the namespace ends. Any thread,
 * any lock held or none (the budget's lock is a leaf).
 */
int sv_budget_charge_ns(struct sv_budget *b, uint32_t uid);
void sv_budget_credit_ns(struct sv_budget *b, uint32_t uid);

/*
 * Hand memory freed by removed sets back to the system (malloc_trim), once the sets freed so
 * far have gone through their RCU grace period: after a namespace ended, say, not after every
 * removal (trimming walks the whole heap). Returns at once; calls made while one is pending
 * share it. Any registered thread, outside RCU read-side sections or inside.
 */
void sv_release_memory(void);

/* ---- processes ---- */

/* A thread group in ns. pid (its tgid as the supervisor sees it) is what sempid records. */
struct sv_proc *sv_proc_new(struct sv_ns *ns, int32_t pid);
void sv_proc_get(struct sv_proc *p);
struct sv_ns *sv_proc_ns(const struct sv_proc *p);
void sv_proc_put(struct sv_proc *p);
/*
 * The process has exited (or left the namespace): apply its semadj values as the kernel's
 * exit_sem() does. Waiters this lets proceed go to wq. Idempotent.
 */
void sv_proc_exit(struct sv_proc *p, struct sv_wakeq *wq);

/* ---- the system calls ---- */
long sv_semget(const struct sv_caller *c, int32_t key, int nsems, int semflg);
/*
 * semop/semtimedop. sops and timeout are addresses in the caller's memory (timeout 0: none).
 * Returns 0, a negative errno, or SV_PARKED with park->waiter set.
 */
long sv_semtimedop(const struct sv_caller *c, int semid, uint64_t sops, unsigned int nsops,
		   uint64_t timeout, struct sv_park *park, struct sv_wakeq *wq);
/*
 * The same from an i386 caller: time32, the timeout is a struct old_timespec32 (ipc(2)
 * SEMTIMEDOP); else a struct __kernel_timespec whose tv_nsec counts only its low 32 bits, as
 * the kernel reads it for a compat task (semtimedop_time64). sembuf is the same on both ABIs.
 */
long sv_semtimedop_compat(const struct sv_caller *c, int semid, uint64_t sops, unsigned int nsops,
			  uint64_t timeout, bool time32, struct sv_park *park, struct sv_wakeq *wq);
/* semctl; arg is the fourth argument's register value (a value for SETVAL, else an address). */
long sv_semctl(const struct sv_caller *c, int semid, int semnum, int cmd, uint64_t arg,
	       struct sv_wakeq *wq);
/*
 * semctl from an i386 caller (int $0x80), as the kernel's compat layer serves it: the 32-bit
 * structures, arg a 32-bit value or address. old: through ipc(2) SEMCTL, whose command carries
 * the layout (IPC_64 set: semid64_ds; clear: the old semid_ds with 16-bit ids); else the
 * direct semctl system call, always semid64_ds.
 */
long sv_semctl_compat(const struct sv_caller *c, int semid, int semnum, int cmd, uint32_t arg,
		      bool old, struct sv_wakeq *wq);
/* A semctl command's name as the kernel's headers spell it ("GETALL"), or NULL for none. */
const char *sv_semctl_cmd_name(int cmd);

/*
 * Undo a semop that completed at once (its answer could not be delivered: the caller was
 * interrupted): the inverse of each sop, in reverse order, as sv_waiter_rollback() does for a
 * waiter; sempid is left as it is. 0: undone (or its set is gone); -ERANGE: later calls used
 * what it produced and it stays done. What the restored values let proceed goes to wq.
 */
int sv_semop_revert(const struct sv_caller *c, int semid, const struct sv_sembuf *sops,
		    unsigned int nsops, struct sv_wakeq *wq);
/*
 * The fast path (server/engine/model/fastpath.pml): a set's files for the calling process.
 * Each is asked for alone, the page first, so that each can travel as the answer to one trapped
 * call (SECCOMP_ADDFD_FLAG_SEND carries one file).
 */
enum sv_fast_file {
	SV_FAST_PAGE,  /* the process's private page (struct fw_page): map it shared, writable */
	SV_FAST_WORDS, /* the set's words: shared, writable */
	SV_FAST_PUB,   /* what the engine publishes (struct fw_pub): read-only */
	SV_FAST_FILES
};

/* What the page's answer says; fixed-width, as a program reads it too. */
struct sv_fast_map {
	uint64_t serial; /* names the set's storage: the other files must be of the same */
	uint32_t nsems;
	uint32_t page;	/* the page's index (fw_owner(), fw_tag()) */
	uint64_t epoch; /* the page's epoch for this storage */
};

/*
 * A new fd for one of the files (the caller's to close; each file's size is its length,
 * sv_fastmem_*_len()), or -errno. SV_FAST_PAGE makes the set's storage if need be and a new page
 * for the caller, and fills *map; the others read map->serial. A process asks for the page once
 * per image: asking again ends every fast operation of its old page as its exit would (the
 * threads of an image that exec ended may have been in one), and the old page goes. Errors: -EINVAL (no such set, or no
 * such file), -EACCES (no alter permission: the fast path only alters), -ESTALE (the
 * storage map->serial names is gone: the set was removed), -ENOENT (the caller has no page
 * yet), -EOPNOTSUPP (a journal is attached, whose records a fast operation would bypass; or
 * no process), -ENOSPC (no page index left), -ENOMEM, -EMFILE.
 */
int sv_fast_file(const struct sv_caller *c, int semid, enum sv_fast_file which,
		 struct sv_fast_map *map);
/*
 * A fast operation of the caller's pending slot `slot` on the storage `serial` names saw, after
 * its A5 succeeded, that the storage was revoked (E2): did it count? 1 or 0 (then it did not
 * happen: fw_abandon() and the trapped call), or -EINVAL (no such slot). A set removed since
 * counts it: nothing can be seen of it after.
 */
int sv_fast_ask(const struct sv_caller *c, int semid, unsigned slot, uint64_t serial);

/*
 * Fast operations counted so far, in every namespace: each time the engine takes a word back
 * (a trapped call on the semaphore, a read of its value, `show`, an exit, a revocation), it
 * adds the operations the word counted since it gave it.
 */
uint64_t sv_fast_ops_total(void);

/* Live SEM_UNDO entries in every namespace (adjustments still to apply at some exit). */
long sv_undo_entries(void);

/* ---- waiters ---- */
void sv_wakeq_init(struct sv_wakeq *q);
struct sv_waiter *sv_wakeq_pop(struct sv_wakeq *q);
bool sv_wakeq_empty(const struct sv_wakeq *q);
/* More than one waiter on it. */
bool sv_wakeq_many(const struct sv_wakeq *q);

/*
 * Result of a completed waiter: 0, -EIDRM (set removed), -EAGAIN (IPC_NOWAIT on
 * re-evaluation), -ERANGE, or -EINTR (dropped unapplied: its whole process had exited).
 */
int sv_waiter_result(const struct sv_waiter *w);
void *sv_waiter_cookie(const struct sv_waiter *w);
/* The operations a waiter waits to apply, as its call gave them (nsops of them). */
const struct sv_sembuf *sv_waiter_sops(const struct sv_waiter *w, unsigned int *nsops);
/*
 * Take a parked waiter off its queue (timeout, signal, dead thread). 0: done, the caller owns w
 * and must free it; nothing was applied. -EALREADY: some call completed it first and it is on
 * that call's wake queue; its deliverer owns it.
 */
int sv_waiter_cancel(struct sv_waiter *w);
/*
 * Delivery of a completed waiter failed: undo what completing it applied and let others proceed
 * (wq). 0: rolled back. -ERANGE: undoing would push a value or semadj out of range because later
 * calls used what it produced; the operation stays applied (the caller should treat it as done).
 * Either way the caller still owns w.
 */
int sv_waiter_rollback(struct sv_waiter *w, struct sv_wakeq *wq);
void sv_waiter_free(struct sv_waiter *w);

/* ---- state that outlives the process (state.c) ---- */

/*
 * A namespace's sets as a byte string that sv_ns_import() in another process (a newer build
 * too) reads: limits, id sequence and allocation cursor, sem_next_id, and every set whole:
 * index, id, key, uid/gid/cuid/cgid/mode, ctime/otime, nsems, each semaphore's semval, sempid
 * and counters (nops, nwaits, lock stats), the set's lock stats. Parked waiters are NOT
 * written (their calls are served again by the notify layer). Call only while no call is
 * being served in ns (the caller stopped every worker); RCU-registered thread. 0 or -ENOMEM;
 * *buf is malloc'd.
 */
int sv_ns_export(struct sv_ns *ns, void **buf, size_t *len);
/*
 * Into a namespace that has no sets yet (else -EBUSY): 0, or -EINVAL (malformed or
 * inconsistent: nothing applied, the whole blob is checked before any set is made),
 * -EPROTONOSUPPORT (written by a newer build, in a version this one cannot read), -ENOMEM
 * (nothing applied either). Sets are charged to the namespace's budget (to their cuid) without
 * the bounds: what existed must come back even if maxima shrank. Same calling rule as export.
 */
int sv_ns_import(struct sv_ns *ns, const void *buf, size_t len);
/*
 * A process's SEM_UNDO entries: for each live entry (semid != -1) its semid, nsems,
 * budget_uid and semadj[]. Same calling rule; 0 or -ENOMEM, *buf malloc'd.
 */
int sv_proc_export(struct sv_proc *p, void **buf, size_t *len);
/*
 * Into a process without entries that has not exited (else -EBUSY); p->ns must already hold
 * the imported sets: entries for semids no longer in p->ns (or whose nsems differs) are
 * skipped. Charged to the undo budget as the original were, without the bounds. 0, -EINVAL
 * (malformed: nothing applied), -EPROTONOSUPPORT (newer version), -ENOMEM (nothing applied).
 */
int sv_proc_import(struct sv_proc *p, const void *buf, size_t len);

/* ---- the journal: state that survives a crash (journal.c) ---- */

/*
 * Where records go. append() gets one whole record, len bytes (a multiple of 8), whose first 8
 * bytes are its header: it must make the record's bytes from 8 on durable before the header,
 * so that a reader never finds a header without its record (the commit point). It is called
 * with the locks that order the change held (any engine lock, ids_lock among them): it must
 * not block for long, fail, or call into the engine.
 */
struct sv_journal {
	void (*append)(void *ctx, const void *rec, size_t len);
	void *ctx;
};

/*
 * Start (j) or stop (NULL) describing every change to the engine's state in records. Call
 * while no thread is in the engine: a change is in the journal exactly when it was made with
 * it attached. j must stay valid until it is replaced.
 */
void sv_journal_attach(const struct sv_journal *j);
/* What names a namespace and a process in records: stable across the processes that read it. */
void sv_ns_set_jkey(struct sv_ns *ns, uint64_t key);
void sv_proc_set_jkey(struct sv_proc *p, uint64_t key);

/* sv_replay.call's result for a call whose change was taken back (sv_waiter_rollback()). */
#define SV_JNL_UNDONE INT64_MIN

/*
 * Replaying records onto the state they were written against (a checkpoint taken with
 * sv_ns_export() and sv_proc_export() at the journal's start, imported).
 *   ns:   the namespace a key names, or NULL to skip records of a namespace no longer kept.
 *   proc: the process a key names in ns (pid its pid), made if need be: its undo entries are
 *         changed by the records. NULL: out of memory (the replay stops with -ENOMEM).
 *   call: a call with this jid was done with this result (a set id for semget, 0 or -errno
 *         for the others), or SV_JNL_UNDONE. May be NULL.
 */
struct sv_replay {
	struct sv_ns *(*ns)(void *ctx, uint64_t key);
	struct sv_proc *(*proc)(void *ctx, struct sv_ns *ns, uint64_t key, int32_t pid);
	void (*call)(void *ctx, uint64_t jid, int64_t result);
	void *ctx;
};

/*
 * Apply the records in buf[0, len) in order, stopping at the first place with no record (a
 * zero header: where the writer stopped). Returns the bytes used, or -EINVAL (a malformed
 * record or one that does not fit the state: what came before it stays applied), or -ENOMEM.
 * No parked waiter may exist in the namespaces touched. RCU-registered thread, outside RCU.
 */
long sv_journal_replay(const void *buf, size_t len, const struct sv_replay *r);

/* ---- statistics and inspection (for the control socket) ---- */

struct sv_set_info {
	int32_t id;
	int32_t key;
	uint32_t uid, gid, cuid, cgid;
	uint32_t mode;
	int nsems;
	int64_t otime, ctime;
	uint64_t lock_spun, lock_slept; /* on the set lock */
	/*
	 * Operations done by programs on the fast path, as their pages count them (untrusted: a
	 * program with alter permission can write any count): sv_ns_show_set() only, else 0.
	 */
	uint64_t fast_ops;
};

struct sv_sem_info {
	int semval;
	int32_t sempid;
	int ncnt, zcnt;
	uint64_t nops;	 /* completed operations that named it, fast ones (untrusted) included */
	uint64_t nwaits; /* operations that parked with this semaphore as their blocking one */
	uint64_t lock_spun, lock_slept;
};

struct sv_ns_info {
	struct sv_limits limits;
	int nsets;
	int nsems;
	int nwaiters;
};

void sv_ns_info(struct sv_ns *ns, struct sv_ns_info *out);
/* Call fn for every set (under RCU: fn must not call back into the engine). Stops on non-zero. */
int sv_ns_for_each_set(struct sv_ns *ns, int (*fn)(const struct sv_set_info *, void *), void *arg);
/*
 * The same, in index order (the kernel's /proc/sysvipc/sem order), as one consistent state: no
 * set is made or removed while it runs, since it holds the namespace's ids_lock; fn must not
 * call into the namespace.
 */
int sv_ns_for_each_set_ordered(struct sv_ns *ns, int (*fn)(const struct sv_set_info *, void *),
			       void *arg);
/*
 * One set by id: its info and up to cap semaphores' info. Returns the number of semaphores
 * (may exceed cap), or -EINVAL if there is no such set.
 */
int sv_ns_show_set(struct sv_ns *ns, int id, struct sv_set_info *info, struct sv_sem_info *sems,
		   int cap);
/* Remove a set as an administrator (the control socket's rm). */
int sv_ns_remove_set(struct sv_ns *ns, int id, struct sv_wakeq *wq);
/* Zero the per-set and per-semaphore counters. */
void sv_ns_reset_stats(struct sv_ns *ns);
/*
 * Count every fast operation programs have made on the namespace's sets so far (--fast): takes
 * the words of every set with fast storage, which adds what they counted to the semaphores'
 * nops and to sv_fast_ops_total(). The unlocks give the words back. Caller holds no set lock.
 */
void sv_ns_collect_fast(struct sv_ns *ns);

#endif /* SV_SEM_H */
