/* SPDX-License-Identifier: MIT */
/*
 * Who is calling: each call's credentials, namespaces and pids, and the records they rest on.
 * The rule every fact here follows, and why credentials are read on every call, are in
 * ident.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lock/xpthread.h"
#include "notify/exits.h"
#include "notify/ident.h"
#include "notify/listener.h"
#include "notify/super.h"
#include "util/debug.h"
#include "util/fault.h"

#define CAP_SYS_ADMIN_BIT 21
#define CAP_IPC_OWNER_BIT 15
#define OVERFLOW_ID	  65534 /* /proc/sys/kernel/overflowuid: what an unmapped id shows */

/* Features (tgt_probe) in use: every thread fact may be kept (ident.h) when all are there. */
static bool ident_keeps(const struct nt_super *s)
{
	return s->feat.pidfd_info && s->feat.pidfd_thread && s->feat.pidfd_ns;
}

static bool same_creds(const struct tgt_creds *a, const struct tgt_creds *b)
{
	return !memcmp(a->uid, b->uid, sizeof(a->uid)) && !memcmp(a->gid, b->gid, sizeof(a->gid));
}

/* A process's undo list, taken from it, ends: its adjustments are applied (to wq). */
static void svp_end(struct sv_proc *svp, struct nt_ns *ns, struct sv_wakeq *wq)
{
	if (svp) {
		sv_proc_exit(svp, wq);
		sv_proc_put(svp);
	}
	if (ns)
		nt_ns_put(ns);
}

void ident_detach_undo(struct nt_process *p, struct sv_wakeq *wq)
{
	struct sv_proc *svp;
	struct nt_ns *ns;

	xlock(&p->lock);
	svp = p->svp;
	ns = p->svp_ns;
	p->svp = NULL;
	p->svp_ns = NULL;
	xunlock(&p->lock);
	svp_end(svp, ns, wq);
}

struct sv_proc *ident_svp(struct nt_ident *id, struct sv_wakeq *wq)
{
	struct nt_process *p = id->thr->proc;
	struct sv_proc *svp, *old = NULL;
	struct nt_ns *old_ns = NULL;

	xassert_held(&id->thr->lock);

	xlock(&p->lock);
	if (!p->svp || p->svp_ns != id->ns) {
		/*
		 * The process moved to another IPC namespace (unshare, setns): as in the kernel,
		 * its undo list is applied and it starts a new one.
		 */
		old = p->svp;
		old_ns = p->svp_ns;
		p->svp = sv_proc_new(id->ns->ns, p->tgid);
		p->svp_ns = p->svp ? id->ns : NULL;
		if (p->svp) {
			sv_proc_set_jkey(p->svp, p->ino);
			nt_ns_get(id->ns);
		}
	}
	svp = p->svp;
	if (svp)
		sv_proc_get(svp);
	xunlock(&p->lock);
	svp_end(old, old_ns, wq);
	return svp;
}

struct nt_thread *ident_thread(struct nt_super *s, int32_t tid, int *err)
{
	struct nt_thread *t = nt_thread_find(s, tid), *other;
	struct tgt_creds kc;
	struct nt_process *p;
	int fd = -1;

	if (t)
		return t;
	if (tid <= 0) {
		*err = -EACCES; /* a caller outside our pid namespace: nobody we can read */
		return NULL;
	}
	/* Bind the record to the thread first; everything read by number is proven against it. */
	if (s->feat.pidfd_thread) {
		fd = tgt_pidfd_open(tid, true);
		if (fd < 0) {
			*err = fd;
			return NULL;
		}
	}
	if (fd >= 0 && s->feat.pidfd_info) {
		*err = tgt_creds(fd, &kc);
	} else {
		struct tgt_status st;

		*err = tgt_read_status(tid, &st);
		kc = st.creds;
	}
	if (*err)
		goto fail_fd;
	p = nt_process_get(s, kc.tgid, err);
	if (!p)
		goto fail_fd;
	t = sv_fault(SV_FAULT_ALLOC) ? NULL : calloc(1, sizeof(*t));
	if (!t) {
		nt_process_put(p);
		*err = -ENOMEM;
		goto fail_fd;
	}
	t->tid = tid;
	t->proc = p;	 /* takes process_get()'s reference */
	t->refcount = 2; /* the table's and the caller's */
	t->src = (struct nt_src){ SRC_THREAD, fd };
	/*
	 * A non-leader's record goes with its own exit; the leader's with its process, since a
	 * non-leader's exec hands the leader's number, and so this record, to that thread.
	 */
	t->watched = fd >= 0 && tid != p->tgid;
	cds_lfht_node_init(&t->node);
	xmutex_init(&t->lock);
	other = nt_thread_add(s, t, err);
	if (other != t)
		goto fail_fd_other;
	SV_DEBUG_YIELD(); /* listed, not yet watched: a stale removal may find it so */
	/* Watched only once listed: its exit event always finds it in the table (or gone from it). */
	if (t->watched && (*err = nt_watch(s, &t->src))) {
		bool orphan;

		/*
		 * Never watched, so no event will drop the table's reference. The record is
		 * listed and may be in use: its pidfd stays open till the last reference. If a
		 * stale removal took it out while it still looked watched, it left that reference
		 * to the event, which is now ours to drop.
		 */
		xlock(&s->tables_lock);
		atomic_store(&t->watched, false);
		orphan = cds_lfht_is_node_deleted(&t->node);
		xunlock(&s->tables_lock);
		nt_thread_stale(s, t);
		if (orphan)
			nt_thread_put(t);
		nt_thread_put(t);
		return NULL;
	}
	return t;

fail_fd_other:
	if (fd >= 0)
		close(fd);
	return other;
fail_fd:
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* ---- one call ---- */

/*
 * For a record not bound to its thread by a pidfd: is st, read by number, still of thr? Not if
 * the number is in another process now, or in one that has been reaped.
 */
static bool status_of(const struct nt_thread *thr, const struct tgt_status *st)
{
	return st->creds.tgid == thr->proc->tgid && !tgt_alive(thr->proc->src.fd);
}

int ident_current(struct nt_thread *thr)
{
	struct tgt_status st;

	xassert_held(&thr->lock);

	if (thr->dead)
		return -ESRCH;
	if (thr->src.fd >= 0)
		return tgt_alive(thr->src.fd) ? -ESRCH : 0;
	return !tgt_read_status(thr->tid, &st) && status_of(thr, &st) ? 0 : -ESRCH;
}

/* Prove what was read by number since the last proof: the pidfd, or the notification. */
static int prove(struct nt_ident *id, bool and_same_creds)
{
	struct tgt_creds now;

	if (!ident_keeps(id->s))
		return nt_waits(id->l, id->notif_id) ? 0 : -ESRCH;
	if (tgt_creds(id->thr->src.fd, &now))
		return -ESRCH;
	return and_same_creds && !same_creds(&now, &id->kc) ? -ESRCH : 0;
}

int ident_prove(struct nt_ident *id)
{
	return prove(id, true);
}

/*
 * The record is in the namespace this call found it in (id->ns, counted in by nsreg_ipc()).
 * Caller holds thr->lock.
 */
static void thread_enters(struct nt_ident *id, struct sv_wakeq *wq)
{
	struct nt_thread *thr = id->thr;
	struct nt_ns *old = thr->ns, *n = id->ns;

	xassert_held(&thr->lock);

	if (old == n) {
		/* counted in already, by this record: the lookup's count goes back */
		nsreg_leave(&id->s->reg, n, wq);
		return;
	}
	nt_ns_get(n); /* the record's; it takes the lookup's count */
	thr->ns = n;
	/* a new thread record or a namespace change: rare, so the names are noted here */
	if (n->kid.ino)
		atomic_store_explicit(&id->l->ipc_ino, n->kid.ino, memory_order_relaxed);
	if (id->l->pod.pod[0])
		nsreg_label(&id->s->reg, n, &id->l->pod);
	if (old) {
		nsreg_leave(&id->s->reg, old, wq);
		nt_ns_put(old);
	}
}

int ident_begin(struct nt_ident *id, struct nt_super *s, struct nt_listener *l,
		struct nt_thread *thr, uint64_t notif_id, struct sv_wakeq *wq)
{
	bool keep = false, proven = false, entered = false;
	int rc;

	xassert_held(&thr->lock);

	memset(id, 0, sizeof(*id));
	id->s = s;
	id->l = l;
	id->thr = thr;
	id->notif_id = notif_id;
	if (thr->dead)
		return -ESRCH;

	/* Credentials, which also prove every read by number made so far (ident.h). */
	if (ident_keeps(s)) {
		rc = tgt_creds(thr->src.fd, &id->kc);
		proven = rc == 0;
	} else {
		struct tgt_status st;

		rc = tgt_read_status(thr->tid, &st);
		id->kc = st.creds;
		if (!rc && !status_of(thr, &st))
			rc = -ESRCH; /* the caller replaces the record */
	}
	if (rc)
		return rc;
	id->cred.euid = id->kc.uid[1];
	id->cred.egid = id->kc.gid[1];
	id->cred.fsgid = id->kc.gid[3];
	id->cred.missing = SV_CRED_GROUPS | SV_CRED_CAPS;

	/* The IPC namespace. A mixed process keeps none: its exec may have moved the leader. */
	if (l->fixed_ns) {
		id->ns = l->fixed_ns;
		nt_ns_get(id->ns);
	} else if (thr->ns_kept && thr->ns && !atomic_load(&thr->proc->mixed_ns)) {
		id->ns = thr->ns;
		nt_ns_get(id->ns);
	} else {
		int fd = tgt_ns_open(thr->src.fd, thr->tid, TGT_NS_IPC, s->feat.pidfd_ns);

		if (fd < 0)
			return fd == -ESRCH || fd == -ENOENT ? -ESRCH : -ENOMEM;
		/* counted in at once, so that it cannot end before this thread enters it */
		id->ns = nsreg_ipc(&s->reg, fd, thr->ns);
		close(fd);
		if (!id->ns)
			return -ENOMEM;
		entered = true;
		/* (read through the pidfd where reads are kept; else by number, proven below) */
		/* a namespace over the budget is asked for again: it is taken on once room is back */
		keep = ident_keeps(s) && l->ns_traps && !atomic_load(&thr->proc->mixed_ns) &&
		       !id->ns->refused;
	}
	/* Kept facts must have been read while it waited: the notification proves that too. */
	if ((!proven || keep) && !nt_waits(l, notif_id)) {
		if (entered)
			nsreg_leave(&s->reg, id->ns, wq);
		return -ESRCH;
	}
	if (entered) {
		thread_enters(id, wq);
		thr->ns_kept = keep;
	}
	return 0;
}

void ident_end(struct nt_ident *id)
{
	free(id->groups);
	if (id->ns)
		nt_ns_put(id->ns);
	nt_userns_put(id->userns);
	id->groups = NULL;
	id->ns = NULL;
	id->userns = NULL;
}

void ident_forget_ns(struct nt_thread *thr)
{
	xassert_held(&thr->lock);
	thr->ns_kept = false;
}

/* The key (id, or inode) of thr's current user namespace, read through its pidfd or number. */
static int userns_key(struct nt_ident *id, uint64_t *key)
{
	struct tgt_nsid kid;
	int fd = tgt_ns_open(id->thr->src.fd, id->thr->tid, TGT_NS_USER, id->s->feat.pidfd_ns);
	int rc;

	if (fd < 0)
		return fd;
	rc = tgt_ns_ident(fd, id->s->feat.ns_id, &kid);
	close(fd);
	if (rc)
		return rc;
	*key = kid.id ? kid.id : kid.ino;
	return 0;
}

int ident_userns(struct nt_ident *id)
{
	struct nt_thread *thr = id->thr;
	struct nt_super *s = id->s;
	struct tgt_idmap *maps;
	uint64_t key;
	int rc;

	if (id->userns_ready)
		return 0;
	if ((rc = userns_key(id, &key)))
		return rc;
	if (key != s->reg.my_user_key) {
		id->userns = nsreg_userns_find(&s->reg, key);
		if (!id->userns) {
			maps = malloc(2 * sizeof(*maps));
			if (!maps)
				return -ENOMEM;
			rc = tgt_read_idmap(thr->tid, "uid_map", &maps[0]);
			if (!rc)
				rc = tgt_read_idmap(thr->tid, "gid_map", &maps[1]);
			/*
			 * Read by number, through the namespace the thread is in when the file is
			 * opened: both are ours only if it waited all along, so its namespace is
			 * still the one keyed. Maps not written yet are not kept.
			 */
			if (!rc && !nt_waits(id->l, id->notif_id))
				rc = -ESRCH;
			if (!rc)
				id->userns = nsreg_userns_add(
				    &s->reg, maps[0].n && maps[1].n ? key : 0, &maps[0], &maps[1]);
			free(maps);
			if (rc)
				return rc;
			if (!id->userns)
				return -ENOMEM;
		}
	}
	id->userns_ready = true;
	return 0;
}

/* An id as the caller's user namespace shows it (map NULL: ours, as it is). */
static uint32_t id_out(const struct tgt_idmap *map, uint32_t xid)
{
	uint32_t in;

	if (!map)
		return xid;
	return tgt_idmap_to_inside(map, xid, &in) ? in : OVERFLOW_ID;
}

/* An id the caller gave, as ours: false if it has none (-1, or unmapped). */
static bool id_in(const struct tgt_idmap *map, uint32_t xid, uint32_t *out)
{
	if (xid == UINT32_MAX)
		return false;
	if (!map) {
		*out = xid;
		return true;
	}
	return tgt_idmap_to_outside(map, xid, out);
}

uint32_t ident_uid_out(const struct nt_ident *id, uint32_t uid)
{
	return id_out(id->userns ? &id->userns->uid : NULL, uid);
}

uint32_t ident_gid_out(const struct nt_ident *id, uint32_t gid)
{
	return id_out(id->userns ? &id->userns->gid : NULL, gid);
}

bool ident_uid_in(const struct nt_ident *id, uint32_t uid, uint32_t *out)
{
	return id_in(id->userns ? &id->userns->uid : NULL, uid, out);
}

bool ident_gid_in(const struct nt_ident *id, uint32_t gid, uint32_t *out)
{
	return id_in(id->userns ? &id->userns->gid : NULL, gid, out);
}

/*
 * The kernel's cap_capable(): does a thread whose user namespace is `user` (key), with
 * effective capabilities eff and euid, have capability bit in the namespace owning the IPC
 * namespace (chain: that user namespace up to the root)? It does in that namespace itself if
 * eff has the bit, and in any namespace below its own that it (its euid) created, whatever eff.
 */
static bool has_cap(const struct nt_ns *n, uint64_t user, uint32_t euid, uint64_t eff, int bit)
{
	for (int i = 0; i < n->nowners; i++) {
		if (n->owners[i].id == user)
			return eff >> bit & 1;
		if (i + 1 < n->nowners && n->owners[i + 1].id == user &&
		    n->owners[i].owner == euid && euid != OVERFLOW_ID)
			return true;
	}
	return false;
}

/*
 * A read for cred_fill failed with err: the caller gone (-ESRCH, nothing to answer) if the
 * proof says so, else why, for the call's answer (a shortage of fds or memory is ENOMEM).
 */
static int fill_failed(struct nt_ident *id, int err)
{
	if (prove(id, false))
		return -ESRCH;
	return err == -EACCES || err == -EPERM ? -EACCES : -ENOMEM;
}

int ident_cred_fill(struct nt_ident *id, unsigned int what)
{
	struct sv_cred *cr = &id->cred;
	struct tgt_creds now;
	uint64_t eff, user;
	int n;

	what &= cr->missing;
	if (what & SV_CRED_GROUPS) {
		uint32_t *groups;

		/* read with the credentials they go with, which must be the call's */
		n = tgt_read_groups(id->thr->tid, &now, &groups);
		if (n < 0)
			return fill_failed(id, n);
		free(id->groups);
		id->groups = groups;
		/* changed since the call began: it ran on, so it no longer waits for this call */
		if (!same_creds(&now, &id->kc))
			return -ESRCH;
		cr->groups = groups;
		cr->ngroups = n;
	}
	if (what & SV_CRED_CAPS) {
		if ((n = tgt_caps(id->thr->tid, &eff)) || (n = userns_key(id, &user)))
			return fill_failed(id, n);
		cr->cap_ipc_owner = has_cap(id->ns, user, cr->euid, eff, CAP_IPC_OWNER_BIT);
		cr->cap_sys_admin = has_cap(id->ns, user, cr->euid, eff, CAP_SYS_ADMIN_BIT);
	}
	/* What was read by number was our caller's, with the credentials of the call. */
	if (what && prove(id, true))
		return -ESRCH;
	cr->missing &= ~what;
	return 0;
}

int ident_committing(struct nt_ident *id)
{
	sv_fault_pause(SV_FAULT_SLOW_COMMIT, 200);
	if (!nt_waits(id->l, id->notif_id))
		return -ESRCH;
	sv_fault_pause(SV_FAULT_SLOW_CHANGE, 200);
	return 0;
}

/* ---- GETPID across pid namespaces ---- */

/* pid at level lc (the caller's) of a process with these pid namespaces: 0 if not visible */
static int32_t translate(const struct nt_pids *pids, int lc, uint64_t caller_pidns)
{
	if (lc > pids->levels - 1 || pids->pidns[lc] != caller_pidns)
		return 0;
	return pids->nspid[lc];
}

int32_t ident_pid_for(struct nt_super *s, const struct nt_thread *thr, int32_t pid)
{
	const struct nt_process *me = thr->proc;
	struct nt_process *p;
	struct nt_pids gone;
	int lc = me->pids.levels - 1;
	uint64_t mine;
	int32_t out = 0;

	if (me->pids.levels < 1)
		return pid; /* its namespaces could not be read: as we see it */
	mine = me->pids.pidns[lc];
	if (lc == 0)
		return pid; /* the caller sees pids as we do */
	p = nt_process_find(s, pid);
	if (p) {
		if (p->pids.levels)
			out = translate(&p->pids, lc, mine);
		nt_process_put(p);
		return out;
	}
	return nt_exited_pids(pid, &gone) ? translate(&gone, lc, mine) : 0;
}
