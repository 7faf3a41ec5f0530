/* SPDX-License-Identifier: MIT */
/*
 * Who is calling: each call's credentials, namespaces and pids, and the records they rest on.
 *
 * The rule. Every fact kept about a caller past one call is keyed by something the kernel does
 * not reuse while it is kept, and goes when the kernel's object does:
 *  - a thread record is bound to a pidfd of its thread, opened when the record is made; its
 *    number only finds the record. The kernel gives the number to no other thread while the
 *    pidfd names a live one, and the pidfd's exit event removes the record;
 *  - a process record likewise, to a pidfd of its thread group, whose exit applies SEM_UNDO;
 *  - namespaces by their 64-bit ids (nsreg.h).
 * Credentials are not kept at all.
 *
 * Proof. A fact read by number (process_vm_readv, /proc/TID/..., capget) is about whichever
 * thread has that number when it is read. It is our caller's only if, afterwards, the record's
 * pidfd still names a live thread (PIDFD_GET_INFO succeeds): a live thread keeps its number.
 * A fact kept for later calls must also have been read while the thread was blocked in a
 * notification still pending afterwards (NOTIF_ID_VALID), because a thread that runs can
 * change it.
 *
 * Credentials change through calls the filter does not trap: a trapped call is interruptible
 * while the supervisor holds it, and setgid or setgroups would then fail with EINTR, which
 * they never do natively. So every call reads them afresh. The uids and gids come from the
 * record's pidfd (PIDFD_GET_INFO: one ioctl, which also proves every read by number made
 * before it); the supplementary groups and the capabilities only when a decision needs them
 * (the engine asks through sv_caller_ops.cred_fill), each such read followed by another
 * PIDFD_GET_INFO that must show the same credentials. A call is thus decided with credentials
 * its caller held at one moment after making it. And a change that cannot be undone is made
 * only while the caller still waits (sv_caller_ops.committing: NOTIF_ID_VALID under the set's
 * locks), so it is ordered before whatever the caller does next, before a credential change
 * on another of its threads completes, say. An exec from any thread needs nothing more: the
 * leader's record's pidfd names whichever thread holds the leader's number.
 *
 * Namespaces. A thread's IPC namespace changes only through unshare and setns (a new thread
 * has a new record). Where the filter traps those (the listener's ns_traps) the record keeps
 * it, read while the thread waited, and drops it when the thread makes one. A process in
 * which a thread other than the leader changed IPC namespace keeps none (mixed_ns): that
 * thread's exec would hand the leader's record to it. Elsewhere (an OCI runtime's filter) the
 * IPC namespace is read through the pidfd on every call (~1.8 us). The user namespace is never
 * kept: the calls that need it (capabilities, and ids shown or taken by IPC_STAT, SEM_STAT and
 * IPC_SET) read it through the pidfd, and only its maps are kept, by id. So what a stale kept
 * namespace costs is correctness, never privilege: a thread is served in a namespace it was
 * in, with credentials it has.
 *
 * Without PIDFD_GET_INFO, PIDFD_THREAD or PIDFD_GET_*_NAMESPACE (before Linux 6.13) nothing is
 * kept: every call reads credentials and namespaces from /proc by number and proves them with
 * NOTIF_ID_VALID, at ~10 us a call more.
 *
 * Locking: thr->lock (held by whoever serves or ends the thread's call) nests outside
 * proc->lock and the registry's lock (super.h has the whole order).
 */
#ifndef SV_NOTIFY_IDENT_H
#define SV_NOTIFY_IDENT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/sem.h"
#include "notify/nsreg.h"
#include "notify/records.h"
#include "notify/target.h"

struct nt_super;
struct nt_listener;

/*
 * One call's identity, what the engine gets as struct sv_cred, and how to complete it.
 * Lives on the serving worker's stack from ident_begin() to ident_end().
 */
struct nt_ident {
	struct sv_cred cred;
	struct tgt_creds kc; /* as read at the start: later reads must agree */
	uint32_t *groups;    /* cred_fill's */
	struct nt_super *s;
	struct nt_listener *l;
	struct nt_thread *thr;
	uint64_t notif_id;
	struct nt_ns *ns;	  /* where this call is served (a reference) */
	struct nt_userns *userns; /* for this call's ids (a reference, or NULL: ours) */
	bool userns_ready;
};

/*
 * The record of tid, found or made (opening its pidfd); a reference. NULL with *err: -ESRCH
 * (gone), -ENOMEM, -EACCES (not visible to us), -ESTALE (its process's record is of a process
 * that has been reaped: handle the pending exits, nt_drain_exits(), and ask again).
 */
struct nt_thread *ident_thread(struct nt_super *s, int32_t tid, int *err);

/*
 * Is thr's record still its thread's, or has the thread gone and its number been given to
 * another? 0 or -ESRCH. Without a thread pidfd this reads by number: the caller proves it (the
 * notification of thr's call still pending). Caller holds thr->lock.
 */
int ident_current(struct nt_thread *thr);

/*
 * Start a call of thr (received as notification notif_id on l): prove what was read by number
 * since the notification was received, read the caller's credentials, and decide the IPC
 * namespace the call is served in (a namespace the thread left may end: what that completes
 * goes to wq). 0, -ESRCH (the thread is gone: if the record is stale, the caller drops it and
 * tries once more with a fresh one), or -ENOMEM. Caller holds thr->lock, and calls
 * ident_end() whatever this returns.
 */
int ident_begin(struct nt_ident *id, struct nt_super *s, struct nt_listener *l,
		struct nt_thread *thr, uint64_t notif_id, struct sv_wakeq *wq);
void ident_end(struct nt_ident *id);
/* Prove a read by number made since ident_begin() (the stack, say). 0 or -ESRCH. */
int ident_prove(struct nt_ident *id);
/* Have the user namespace's maps ready, for a call that shows or takes uids and gids (the
   engine maps them under its locks, where nothing may be read). 0 or -errno. */
int ident_userns(struct nt_ident *id);
/* sv_caller_ops.cred_fill and .committing, for the call id. */
int ident_cred_fill(struct nt_ident *id, unsigned int what);
int ident_committing(struct nt_ident *id);
/* uid/gid translation through the call's user namespace (ident_userns() first). */
uint32_t ident_uid_out(const struct nt_ident *id, uint32_t uid);
uint32_t ident_gid_out(const struct nt_ident *id, uint32_t gid);
bool ident_uid_in(const struct nt_ident *id, uint32_t uid, uint32_t *out);
bool ident_gid_in(const struct nt_ident *id, uint32_t gid, uint32_t *out);

/*
 * The engine process for the call's namespace, with a reference. If the process changed
 * namespace, its old undo list is applied and what that completes goes to wq. Caller holds
 * thr->lock.
 */
struct sv_proc *ident_svp(struct nt_ident *id, struct sv_wakeq *wq);

/*
 * p's undo list is detached (a trapped unshare or setns ran): its adjustments are applied, to
 * wq, and its next SEM_UNDO starts a new list.
 */
void ident_detach_undo(struct nt_process *p, struct sv_wakeq *wq);

/*
 * thr is about to change namespace (a trapped unshare or setns): forget what is kept. Caller
 * holds thr->lock.
 */
void ident_forget_ns(struct nt_thread *thr);

/* GETPID translation: pid (supervisor view) as thread thr sees it; 0 if invisible. */
int32_t ident_pid_for(struct nt_super *s, const struct nt_thread *thr, int32_t pid);

#endif
