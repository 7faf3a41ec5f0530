/* SPDX-License-Identifier: MIT */
/*
 * Serving one trapped call: decode it, find out who is calling (ident.h), run the call in the
 * engine, answer it or park it (parked.h). Serving a semaphore call goes in four phases, each
 * a function below: the caller's record and identity (begin_call), a restart of an interrupted
 * call (restart_or_retry), the engine (call_*), and the answer or the parking.
 *
 * The cheap path, a semop by a thread whose credentials are cached, costs four system calls:
 * the receive (receiver.c), one process_vm_readv of the timeout and sops together, one
 * PIDFD_GET_INFO (so nothing read is used if the caller vanished and its tid was reused), the
 * answer.
 *
 * A thread has at most one system call in flight, so a new call from a thread whose parked
 * call is still registered proves that call dead (parked.h). If the new call repeats the dead
 * one exactly, it is the kernel's restart and is answered EINTR; otherwise it is served. The
 * residue: a handler without SA_RESTART followed by an immediate retry of the very same call
 * gets one extra EINTR.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <sys/syscall.h> /* __X32_SYSCALL_BIT */
#include <unistd.h>

#include "engine/fastword.h"
#include "lock/xpthread.h"
#include "notify/exits.h"
#include "notify/fastabi.h"
#include "notify/ident.h"
#include "notify/listener.h"
#include "notify/parked.h"
#include "notify/procview.h"
#include "notify/recover.h"
#include "notify/serve.h"
#include "notify/stats.h"
#include "notify/super.h"
#include "util/debug.h"
#include "util/fault.h"
#include "util/killpoint.h"

#define NR_OPEN	      2 /* x86_64 and x32 */
#define NR_OPENAT     257
#define NR_OPENAT2    437
#define NR_UNSHARE    272
#define NR_SETNS      308
#define NR32_UNSHARE  310 /* i386 */
#define NR32_SETNS    346
#define PREFETCH_SOPS 64

/* ---- restart or retry ---- */

#define FRAME_SCAN (32 * 1024) /* below the red zone: frame, siginfo, xsave area (AMX ~11 KiB) */

/*
 * A thread whose parked call died makes the very same call again. Is it the kernel restarting
 * the interrupted call (SA_RESTART handler, or stop/continue), or the program retrying after it
 * got EINTR? Natively the first returns EINTR and the second is a new call.
 *
 * The handler ran on the thread's stack, and its signal frame is still there below the stack
 * pointer: the saved registers say what the kernel decided. With SA_RESTART it rewound rip to
 * the syscall instruction and restored rax to the call's number; without, rax is -EINTR and rip
 * is past the instruction. Both are at the same stack pointer as this call. No frame at all
 * means no handler ran: a stop and continue, which restarts. Only called in this ambiguous
 * case, so the common path pays nothing.
 */
static bool kernel_restarted(const struct nt_listener *l, pid_t tid, int raw_nr)
{
	enum {
		RAX = 13,
		RSP = 15,
		RIP = 16
	}; /* struct sigcontext (x86_64), in words */
	uint64_t sp, pc, top, *w;
	size_t len = FRAME_SCAN;
	bool restart = true;

	if (tgt_read_syscall_regs(tid, &sp, &pc))
		return true;
	top = sp - 128; /* the red zone is left alone */
	w = malloc(len);
	if (!w)
		return true;
	while (len >= 4096 && nt_read(l, tid, top - len, w, len))
		len /= 2; /* the stack's mapping may end sooner */
	for (size_t i = len / 8 - RIP - 1; len >= 4096 && i-- > 0;) {
		if (w[i + RSP] != sp)
			continue;
		if (w[i + RIP] == pc - 2 && w[i + RAX] == (uint64_t)raw_nr)
			break; /* rewound: the kernel's restart */
		if (w[i + RIP] == pc && w[i + RAX] == (uint64_t)-EINTR) {
			restart = false; /* it returned EINTR: this is the program's retry */
			break;
		}
	}
	free(w);
	return restart;
}

/* ---- the caller's side, as the engine sees it ---- */

struct call_ctx {
	struct sv_caller c;
	struct nt_ident id;
	struct nt_super *s;
	struct nt_listener *l;
	struct nt_thread *thr;
	uint64_t notif_id;
	struct {
		uint64_t addr;
		size_t len;
		int err;
		const void *data;
	} pre[2];
	int npre;
	size_t moved; /* bytes of the caller's memory read and written: the call's weight */
	int fd;	      /* a file to answer with (a fast path request), when has_fd */
	bool has_fd;
	struct timespec ts;
	struct sv_sembuf sops[PREFETCH_SOPS];
};

static int op_read(const struct sv_caller *c, uint64_t addr, void *buf, size_t len)
{
	struct call_ctx *cx = c->priv;

	for (int i = 0; i < cx->npre; i++) {
		if (cx->pre[i].addr == addr && cx->pre[i].len == len) {
			if (cx->pre[i].err)
				return -EFAULT;
			memcpy(buf, cx->pre[i].data, len);
			return 0;
		}
	}
	cx->moved += len;
	if (nt_read(cx->l, cx->thr->tid, addr, buf, len))
		return -EFAULT;
	/* Read by number: ours only if the caller still waits (ident.h). */
	if (!nt_waits(cx->l, cx->notif_id))
		return -EFAULT;
	return 0;
}

static int op_write(const struct sv_caller *c, uint64_t addr, const void *buf, size_t len)
{
	struct call_ctx *cx = c->priv;

	/* Never write into a process that is not our caller any more. */
	if (!nt_waits(cx->l, cx->notif_id))
		return -EFAULT;
	cx->moved += len;
	return nt_write(cx->l, cx->thr->tid, addr, buf, len) ? -EFAULT : 0;
}

static int32_t op_pid_out(const struct sv_caller *c, int32_t pid)
{
	struct call_ctx *cx = c->priv;

	return ident_pid_for(cx->s, cx->thr, pid);
}

static uint32_t op_uid_out(const struct sv_caller *c, uint32_t uid)
{
	return ident_uid_out(&((struct call_ctx *)c->priv)->id, uid);
}

static uint32_t op_gid_out(const struct sv_caller *c, uint32_t gid)
{
	return ident_gid_out(&((struct call_ctx *)c->priv)->id, gid);
}

static bool op_uid_in(const struct sv_caller *c, uint32_t uid, uint32_t *out)
{
	return ident_uid_in(&((struct call_ctx *)c->priv)->id, uid, out);
}

static bool op_gid_in(const struct sv_caller *c, uint32_t gid, uint32_t *out)
{
	return ident_gid_in(&((struct call_ctx *)c->priv)->id, gid, out);
}

static int op_cred_fill(const struct sv_caller *c, unsigned int what)
{
	return ident_cred_fill(&((struct call_ctx *)c->priv)->id, what);
}

static int op_committing(const struct sv_caller *c)
{
	return ident_committing(&((struct call_ctx *)c->priv)->id);
}

static const struct sv_caller_ops caller_ops = {
	.read = op_read,
	.write = op_write,
	.pid_out = op_pid_out,
	.uid_out = op_uid_out,
	.gid_out = op_gid_out,
	.uid_in = op_uid_in,
	.gid_in = op_gid_in,
	.cred_fill = op_cred_fill,
	.committing = op_committing,
};

/*
 * semop/semtimedop read the timeout and the sops: read them both now, in one system call, before
 * ident_begin(), whose PIDFD_GET_INFO then proves them ours (ident.h). The engine then takes them from here, in its own order of
 * checks (a bad timeout pointer still fails first, too many sops still fail before any read).
 */
static bool prefetch(struct call_ctx *cx, int nr, const uint64_t *args)
{
	unsigned int nsops = (unsigned int)args[2];
	uint64_t tsaddr = nr == NR_SEMTIMEDOP ? args[3] : 0;
	size_t sops_len = nsops >= 1 && nsops <= PREFETCH_SOPS ? nsops * sizeof(cx->sops[0]) : 0;
	struct nt_span sp[2];
	int n = 0;

	if (!sops_len && !tsaddr)
		return false;
	if (tsaddr) /* semtimedop: both regions in one read */
		sp[n++] = (struct nt_span){ tsaddr, &cx->ts, sizeof(cx->ts), 0 };
	if (sops_len)
		sp[n++] = (struct nt_span){ args[1], cx->sops, sops_len, 0 };
	cx->l->tp->read(cx->l, cx->thr->tid, sp, n);
	for (int i = 0; i < n; i++)
		cx->pre[cx->npre++] =
		    (typeof(cx->pre[0])){ sp[i].addr, sp[i].len, sp[i].err, sp[i].buf };
	return true;
}

/*
 * A call served again (nt_serve_again()): its sops and timeout as the first supervisor read them
 * at its entry, as the kernel copies them once. Its memory is not read again: what another of
 * its threads wrote there since must not change a call already made.
 */
static void recall(struct call_ctx *cx, int nr, const uint64_t *args, const struct nt_again *a)
{
	if (nr == NR_SEMTIMEDOP && args[3]) {
		cx->ts = a->timeout;
		cx->pre[cx->npre++] = (typeof(cx->pre[0])){ args[3], sizeof(cx->ts), 0, &cx->ts };
	}
	cx->pre[cx->npre++] =
	    (typeof(cx->pre[0])){ args[1], a->nsops * sizeof(a->sops[0]), 0, a->sops };
}

/*
 * The caller was interrupted between our decision and our answer (NOTIF_SEND said ENOENT): it
 * returns EINTR, or the kernel restarts the call. A semop that changed values is undone, so a
 * restart runs it afresh and a caller that got EINTR finds nothing done; if later calls already
 * used what it produced, or for any other call, the result is kept for a restart to take.
 * Caller holds the thread's lock.
 */
static void answer_lost(struct nt_worker *wk, struct call_ctx *cx, int nr, const uint64_t *args,
			long val, struct sv_wakeq *wq)
{
	unsigned int nsops = (unsigned int)args[2];

	xassert_held(&cx->thr->lock);
	if ((nr == NR_SEMOP || nr == NR_SEMTIMEDOP) && val == 0 && nsops >= 1 &&
	    nsops <= PREFETCH_SOPS &&
	    sv_semop_revert(&cx->c, (int)args[0], cx->sops, nsops, wq) == 0) {
		NT_ADD(&wk->stats, rolled_back, 1);
		return;
	}
	nt_callsig_set(&cx->thr->kept, nr, args, val);
	NT_ADD(&wk->stats, kept, 1);
}

/* ---- namespace changes ---- */

/*
 * unshare(CLONE_SYSVSEM), unshare(CLONE_NEWIPC) and setns() into another IPC namespace apply a
 * process's undo list at once when it is the list's only holder (exit_sem() in the kernel), and
 * it starts afresh. Decided before the call runs, by reads the caller proves: not when it is
 * sure to fail (CLONE_NEWIPC without CLONE_NEWUSER needs CAP_SYS_ADMIN). A multi-threaded
 * process shares its list with the other threads natively, so nothing is applied then.
 * Caller holds thr->lock.
 */
static bool undo_applies(const struct nt_thread *thr, bool unshare, uint64_t flags, int fd)
{
	struct tgt_status st;

	xassert_held(&thr->lock);
	if (unshare) {
		if (!(flags & (CLONE_SYSVSEM | CLONE_NEWIPC)))
			return false;
	} else if (!(flags == 0 || flags == CLONE_NEWIPC) || !thr->ns ||
		   !tgt_fd_is_other_ipc_ns(thr->tid, fd, thr->ns->kid.ino)) {
		return false;
	}
	if (tgt_read_status(thr->tid, &st) || st.threads != 1)
		return false;
	return !(unshare && (flags & CLONE_NEWIPC) && !(flags & CLONE_NEWUSER) &&
		 !(st.cap_eff & (1ull << 21))); /* else EPERM: nothing changes */
}

/*
 * A trapped unshare or setns (filter.h): the thread's kept namespaces go (ident.h), then the
 * call runs as it would without us (CONTINUE is no security decision here), then the undo list
 * is applied if the call detaches it. The thread's lock is held throughout, so its next call,
 * which may come as soon as the call has run, finds all of this done. A record whose thread is
 * gone (its number now another's) is dropped, not acted on.
 */
static void serve_ns_change(struct nt_worker *wk, struct nt_listener *l,
			    const struct seccomp_notif *n, bool unshare, bool i386)
{
	struct nt_thread *thr = nt_thread_find(wk->super, (int32_t)n->pid);
	uint64_t mask = i386 ? 0xffffffffull : ~0ull;
	uint64_t flags = (unshare ? n->data.args[0] : n->data.args[1] & 0xffffffffull) & mask;
	bool applies = false;
	struct sv_wakeq wq;
	int rc;

	NT_ADD(&wk->stats, calls[NT_NS_CHANGE], 1);
	sv_wakeq_init(&wq);
	if (thr) {
		bool gone, waits;

		SV_DEBUG_YIELD(); /* its exit, or a stale removal, may come first */
		xlock(&thr->lock);
		gone = ident_current(thr) != 0;
		applies =
		    !gone && undo_applies(thr, unshare, flags, (int)(n->data.args[0] & 0xffffffff));
		/* one proof that all read by number above was our caller's */
		waits = nt_waits(l, n->id);
		if (gone || !waits) {
			xunlock(&thr->lock);
			if (gone && waits)
				nt_thread_stale(wk->super, thr);
			nt_thread_put(thr);
			thr = NULL;
		}
	}
	if (thr) {
		ident_forget_ns(thr);
		/* a non-leader in a namespace of its own: its exec would take the leader's record */
		if (thr->tid != thr->proc->tgid && (flags == 0 || (flags & CLONE_NEWIPC)))
			atomic_store(&thr->proc->mixed_ns, true);
	}
	rc = nt_answer(l, n->id, 0, NT_CONTINUE);
	if (thr) {
		if (rc == 0 && applies)
			ident_detach_undo(thr->proc, &wq);
		xunlock(&thr->lock);
		nt_thread_put(thr);
	}
	nt_deliver(wk, &wq);
}

/* ---- semaphore calls ---- */

/*
 * Phase 1: the caller's record, with what it read by number proven and its identity for this
 * call (ident_begin()). A record found stale (its thread, or its whole process, died and our
 * caller got its number before we handled the exit) is replaced: the pending exits are handled
 * and a fresh record made. On success thr->lock is held; else the error (-ESRCH: the caller is
 * gone; -EAGAIN: still stale after that, which a new pid cycle in between would take).
 */
static int begin_call(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n,
		      int nr, const struct nt_again *again, struct call_ctx *cx,
		      struct sv_wakeq *wq)
{
	const uint64_t *args = (const uint64_t *)n->data.args;
	struct nt_super *s = wk->super;
	int err = -EAGAIN;

	for (int attempt = 0; attempt < 3; attempt++) {
		struct nt_thread *thr = ident_thread(s, (int32_t)n->pid, &err);

		if (!thr && err == -ESTALE) {
			nt_drain_exits(wk);
			err = -EAGAIN;
			continue;
		}
		if (!thr)
			return err;
		SV_DEBUG_YIELD(); /* a deliverer or canceller of its parked call may come first */
		xlock(&thr->lock);
		memset(cx, 0, offsetof(struct call_ctx, ts));
		cx->s = s;
		cx->l = l;
		cx->thr = thr;
		cx->notif_id = n->id;
		if (again)
			recall(cx, nr, args, again);
		else if (nr == NR_SEMOP || nr == NR_SEMTIMEDOP)
			prefetch(cx, nr, args);
		err = ident_begin(&cx->id, s, l, thr, n->id, wq);
		if (!err)
			return 0;
		ident_end(&cx->id);
		xunlock(&thr->lock);
		/* our caller waits, yet the record's thread is gone: the record is stale */
		if (err != -ESRCH || !nt_waits(l, n->id)) {
			nt_thread_put(thr);
			return err;
		}
		nt_thread_stale(s, thr);
		nt_thread_put(thr);
		nt_drain_exits(wk);
		err = -EAGAIN;
	}
	return err;
}

/*
 * Phase 2: one system call at a time per thread, so a parked call of this thread is dead. A
 * new call that repeats it is the kernel restarting it (answered EINTR, as a wait interrupted
 * natively is) or takes a result it produced whose answer was lost. true with *val set when
 * the call is answered so. Caller holds thr->lock.
 */
static bool restart_or_retry(struct nt_worker *wk, struct call_ctx *cx,
			     const struct seccomp_notif *n, int nr, long *val)
{
	const uint64_t *args = (const uint64_t *)n->data.args;
	struct nt_thread *thr = cx->thr;
	bool early = false;

	xassert_held(&thr->lock);
	if (thr->parked) {
		struct nt_req *old = thr->parked;
		bool restart = old->nr == nr && !memcmp(old->args, args, sizeof(old->args)) &&
			       kernel_restarted(cx->l, thr->tid, n->data.nr) &&
			       ident_prove(&cx->id) == 0;

		if (nt_drop_parked(wk, thr, false)) {
			if (restart) {
				/* the kernel restarted an interrupted wait: natively that is EINTR */
				*val = -EINTR;
				early = true;
			}
		} else if (restart) {
			/*
			 * It completed before its answer could go: the restart takes the result.
			 * Its deliverer, which holds it, waits for thr->lock.
			 */
			old->adopted = true;
			*val = sv_waiter_result(old->w);
			early = true;
		}
		/* else it completed and its answer will fail: the deliverer rolls it back */
	} else if (nt_callsig_is(&thr->interrupted, nr, args) &&
		   kernel_restarted(cx->l, thr->tid, n->data.nr) && ident_prove(&cx->id) == 0) {
		*val = -EINTR;
		early = true;
	} else if (nt_callsig_is(&thr->kept, nr, args)) {
		*val = thr->kept.result;
		early = true;
	}
	thr->interrupted.valid = thr->kept.valid = false;
	return early;
}

static long call_semget(struct call_ctx *cx, const uint64_t *args)
{
	struct nt_ns *ns = cx->id.ns;
	long val;

	/* the IPC namespace's limits and sem_next_id, as the kernel reads them now */
	nt_ns_sync(ns);
	val = sv_semget(&cx->c, (int32_t)args[0], (int)args[1], (int)args[2]);
	if (val >= 0 && ns->next_id_fd >= 0 && sv_ns_next_id(ns->ns) < 0)
		nt_ns_next_id_used(ns);
	return val;
}

static long call_semop(struct nt_worker *wk, struct call_ctx *cx, const struct seccomp_notif *n,
		       int nr, int64_t t0, struct sv_park *park, struct sv_wakeq *wq)
{
	const uint64_t *args = (const uint64_t *)n->data.args;
	struct nt_req *req;
	struct sv_limits lim;

	if (!wk->spare)
		wk->spare = sv_fault(SV_FAULT_ALLOC) ? NULL : malloc(sizeof(*wk->spare));
	req = wk->spare;
	if (!req)
		return -ENOMEM;
	/*
	 * The request must be whole before the engine may publish it: another worker that
	 * completes the call reads r->thr and r->l at once, then waits for thr->lock, which we
	 * hold until the parking (references included) is done.
	 */
	memset(req, 0, sizeof(*req));
	req->l = cx->l;
	req->thr = cx->thr;
	req->id = n->id;
	req->nr = nr;
	memcpy(req->args, args, sizeof(req->args));
	req->received_ns = t0;
	req->heap_idx = -1;
	req->slot = -1;
	CDS_INIT_LIST_HEAD(&req->parked_node);
	park->cookie = req;
	park->jid = wk->jid;
	/* more sops than we knew allowed: maybe the namespace's SEMOPM changed */
	sv_ns_limits(cx->id.ns->ns, &lim);
	if ((unsigned int)args[2] > (unsigned int)lim.semopm)
		nt_ns_sync(cx->id.ns);
	if (nr == NR_SEMTIMEDOP && (args[5] == SV_FAST_MARK || args[5] == SV_FAST_PROBE) &&
	    (args[4] & 0xff) >= 1 && (args[4] & 0xff) <= FW_PENDING)
		cx->c.fast_slot = (unsigned int)(args[4] & 0xff);
	return sv_semtimedop(&cx->c, (int)args[0], args[1], (unsigned int)args[2],
			     nr == NR_SEMTIMEDOP ? args[3] : 0, park, wq);
}

/*
 * The fast path's request for one of a set's files (fastabi.h): 0 with cx->fd to answer with,
 * or -errno.
 */
static long call_fast_file(struct call_ctx *cx, const uint64_t *args)
{
	enum sv_fast_file which = (enum sv_fast_file)(int)args[1];
	struct sv_fast_map map = { 0 };
	int fd;

	if (which != SV_FAST_PAGE && op_read(&cx->c, args[3], &map, sizeof(map)))
		return -EFAULT;
	fd = sv_fast_file(&cx->c, (int)args[0], which, &map);
	if (fd < 0)
		return fd;
	if (which == SV_FAST_PAGE && op_write(&cx->c, args[3], &map, sizeof(map))) {
		close(fd); /* the page stays the process's until it exits */
		return -EFAULT;
	}
	cx->fd = fd;
	cx->has_fd = true;
	return 0;
}

static long call_semctl(struct nt_worker *wk, struct call_ctx *cx, const uint64_t *args,
			struct sv_wakeq *wq)
{
	int cmd = (int)args[2];
	long rc;

	if ((cmd == SV_FAST_CMD || cmd == SV_FAST_ASK) && cx->s->cfg.no_fast_path)
		return -EINVAL; /* as the kernel: the library takes it for "not served" */
	if (cmd == SV_FAST_CMD)
		return call_fast_file(cx, args);
	if (cmd == SV_FAST_ASK) {
		struct sv_fast_map map;

		if (op_read(&cx->c, args[3], &map, sizeof(map)))
			return -EFAULT;
		return sv_fast_ask(&cx->c, (int)args[0], (unsigned int)args[1], map.serial);
	}

	NT_ADD(&wk->stats, semctl_cmds[(unsigned int)cmd < NT_NCMDS ? cmd : NT_NCMDS], 1);
	switch (cmd) {
	case SV_IPC_INFO:
	case SV_SEM_INFO:
		nt_ns_sync(cx->id.ns);
		break;
	case SV_IPC_STAT:
	case SV_SEM_STAT:
	case SV_SEM_STAT_ANY:
	case SV_IPC_SET:
		/* ids go through the caller's user namespace, under engine locks: read it now */
		if ((rc = ident_userns(&cx->id)))
			return rc == -ESRCH ? -SV_EGONE : -ENOMEM;
		break;
	case SV_GETNCNT:
	case SV_GETZCNT:
		xunlock(&cx->thr->lock);
		nt_drop_vanished(wk, cx->id.ns, (int)args[0], (int)args[1]);
		xlock(&cx->thr->lock);
		break;
	}
	return sv_semctl(&cx->c, (int)args[0], (int)args[1], cmd, args[3], wq);
}

/*
 * Phase 4, for a call that waits: it becomes the thread's parked call, on the sweep's list and,
 * with a timeout, the timer heap. false if it could not (no memory for the timer): *val is
 * then its answer. Caller holds thr->lock.
 */
static bool park_call(struct nt_worker *wk, struct call_ctx *cx, const struct seccomp_notif *n,
		      int64_t t0, const struct sv_park *park, long *val)
{
	struct nt_req *req = wk->spare;

	xassert_held(&cx->thr->lock);
	wk->spare = NULL; /* the parked call owns it now */
	atomic_store_explicit(&req->refcount, 1, memory_order_relaxed); /* whoever ends it */
	nt_listener_get(cx->l);
	atomic_fetch_add_explicit(&cx->thr->refcount, 1, memory_order_relaxed);
	req->w = park->waiter;
	req->ns = cx->id.ns;
	nt_ns_get(req->ns);
	req->semnum = (unsigned int)n->data.args[2] == 1 ? cx->sops[0].sem_num : -1;
	/* the kernel counts the timeout from the call's entry */
	if (park->timed)
		req->deadline_ns = t0 + park->timeout.tv_sec * 1000000000LL + park->timeout.tv_nsec;
	if (nt_park(wk->super, req)) {
		*val = -ENOMEM; /* no memory for the timer: the call was taken back */
		return false;
	}
	/*
	 * Its notification stays in its slot, where a crash cannot lose it, until it is
	 * answered. Nobody ends the call before we let go of thr->lock.
	 */
	req->slot = wk->slot;
	wk->slot = -1;
	NT_ADD(&wk->stats, parked, 1);
	return true;
}

/*
 * Phase 4, for a call answered at once: answered with the thread's lock held, so that if the
 * answer is lost, the thread's next call (a restart, or whatever follows its EINTR) waits until
 * the undo is done and can neither see nor consume what is being undone. A call whose caller
 * went while it was decided (-SV_EGONE) did nothing and gets no answer.
 */
static void answer_call(struct nt_worker *wk, struct call_ctx *cx, const struct seccomp_notif *n,
			int nr, long val, int64_t t0, struct sv_wakeq *wq)
{
	int rc;

	if (val == -SV_EGONE) {
		if (!nt_waits(cx->l, n->id)) {
			NT_ADD(&wk->stats, stale, 1);
			return;
		}
		/* it waits after all: it must hear something, and nothing was done */
		val = -ENOMEM;
	}
	sv_kp(SV_KP_COMMITTED);
	if (cx->has_fd && val == 0) {
		/* the file and the answer in one step: its number is the call's result */
		rc = nt_answer_fd(cx->l, n->id, cx->fd, true);
		val = rc;
		rc = rc < 0 ? rc : 0;
		if (rc == -ENOENT) {
			/* interrupted: it took no file, and a restart must ask again, not take 0 */
			NT_ADD(&wk->stats, stale, 1);
			return;
		}
	} else {
		rc = nt_answer(cx->l, n->id, val, 0);
	}
	if (rc == 0) {
		nt_count_answer(&wk->stats, val);
		if (val == -EAGAIN && nr == NR_SEMTIMEDOP && n->data.args[5] == SV_FAST_PROBE)
			NT_ADD(&wk->stats, busy_probes, 1);
		int64_t took = nt_now_ns() - t0;

		NT_ADD(&wk->stats, service_ns[nt_hist_bucket(took)], 1);
		NT_ADD(&wk->stats, service_ns_sum, took);
	} else {
		NT_ADD(&wk->stats, stale, 1);
		if (rc == -ENOENT)
			answer_lost(wk, cx, nr, (const uint64_t *)n->data.args, val, wq);
	}
}

/*
 * A call served again whose caller no longer waits for it: a signal ended its wait, or it
 * died, while no supervisor ran. Remembered as its parked call would have been (parked.h), so
 * that a restart of it by the kernel (SA_RESTART) is answered EINTR, as a wait interrupted
 * natively is, and not served as a new call.
 */
static void again_interrupted(struct nt_worker *wk, const struct seccomp_notif *n, int nr)
{
	int err;
	struct nt_thread *thr = ident_thread(wk->super, (int32_t)n->pid, &err);

	NT_ADD(&wk->stats, interrupted, 1);
	if (!thr)
		return;
	xlock(&thr->lock);
	nt_callsig_set(&thr->interrupted, nr, (const uint64_t *)n->data.args, -EINTR);
	xunlock(&thr->lock);
	nt_thread_put(thr);
}

static void serve_sem(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n,
		      int nr, int64_t t0, const struct nt_again *again)
{
	struct nt_super *s = wk->super;
	const uint64_t *args = (const uint64_t *)n->data.args;
	struct call_ctx cx;
	struct sv_park park = { 0 };
	struct sv_wakeq wq;
	struct nt_thread *thr;
	bool parked = false;
	unsigned int woken;
	long val = 0;
	int err;

	sv_wakeq_init(&wq);
	/* Exits the kernel has reported must be applied before anything can observe them. */
	if (sv_undo_entries() > 0 || atomic_load_explicit(&s->nparked, memory_order_relaxed) > 0)
		nt_drain_exits(wk);

	err = begin_call(wk, l, n, nr, again, &cx, &wq);
	if (err) {
		/*
		 * Gone already: nobody to answer. Otherwise say why we cannot serve: out of
		 * memory (or what we could not read about it), or a caller we cannot see at all
		 * (outside our pid namespace). A caller that waits always hears something.
		 */
		if (err == -ESRCH && !nt_waits(l, n->id) && again)
			again_interrupted(wk, n, nr);
		else if (err == -ESRCH && !nt_waits(l, n->id))
			NT_ADD(&wk->stats, stale, 1);
		else if (nt_answer(l, n->id,
				   err == -EACCES   ? -ENOSYS
				   : err == -EAGAIN ? err
						    : -ENOMEM,
				   0))
			NT_ADD(&wk->stats, stale, 1);
		nt_deliver(wk, &wq);
		return;
	}
	thr = cx.thr;
	if (restart_or_retry(wk, &cx, n, nr, &val)) {
		/* under the lock: if this answer is lost as well, the next restart finds it here */
		if (nt_answer(l, n->id, val, 0) == 0)
			nt_count_answer(&wk->stats, val);
		else
			nt_callsig_set(val == -EINTR ? &thr->interrupted : &thr->kept, nr, args,
				       val);
		xunlock(&thr->lock);
		nt_trace(s, thr->tid, nr, args, val, " (restart of an interrupted call)");
		goto out;
	}

	/*
	 * Phase 3: the engine. A call served again passed its permission check when it was
	 * made, as a waiting semop natively does once: an IPC_SET since then does not stop it.
	 */
	if (again) {
		cx.id.cred.cap_ipc_owner = true;
		cx.id.cred.missing &= ~SV_CRED_CAPS;
	}
	cx.c.ns = cx.id.ns->ns;
	cx.c.cred = &cx.id.cred;
	cx.c.ops = &caller_ops;
	cx.c.priv = &cx;
	cx.c.jid = wk->jid;
	cx.c.proc = ident_svp(&cx.id, &wq);
	switch (nr) {
	case NR_SEMGET:
		val = call_semget(&cx, args);
		break;
	case NR_SEMOP:
	case NR_SEMTIMEDOP:
		val = call_semop(wk, &cx, n, nr, t0, &park, &wq);
		parked = val == SV_PARKED; /* only a semop's 1 means that; GETVAL's is a value */
		break;
	case NR_SEMCTL:
		val = call_semctl(wk, &cx, args, &wq);
		break;
	}

	/* Phase 4: park or answer. */
	if (parked)
		parked = park_call(wk, &cx, n, t0, &park, &val);
	if (!parked)
		answer_call(wk, &cx, n, nr, val, t0, &wq);
	if (cx.has_fd)
		close(cx.fd);
	xunlock(&thr->lock);
	if (!parked)
		nt_trace(s, thr->tid, nr, args, val, val == -SV_EGONE ? " (caller gone)" : "");
	if (cx.c.proc)
		sv_proc_put(cx.c.proc);
out:
	ident_end(&cx.id);
	woken = nt_deliver(wk, &wq);
	if (s->bulk && (woken >= NT_HEAVY_WAKES || cx.moved >= NT_HEAVY_BYTES))
		atomic_store_explicit(&l->heavy_ns, nt_now_ns(), memory_order_relaxed);
	nt_thread_put(thr);
}

/* ---- opens (procview.h) ---- */

/*
 * A NUL-terminated path from the caller's memory, a page at a time so that a string ending
 * before an unmapped page is read whole. false if it is not there or longer than PATH_MAX:
 * the kernel then has its own answer (EFAULT, ENAMETOOLONG).
 */
static bool read_path(const struct nt_listener *l, pid_t tid, uint64_t addr, char *buf)
{
	size_t got = 0;

	while (got < PATH_MAX) {
		size_t chunk = 4096 - ((addr + got) & 4095);

		if (chunk > PATH_MAX - got)
			chunk = PATH_MAX - got;
		if (nt_read(l, tid, addr + got, buf + got, chunk))
			return false;
		if (memchr(buf + got, '\0', chunk))
			return true;
		got += chunk;
	}
	return false;
}

/*
 * open, openat or openat2 (with trap_opens): a read-only open that reaches the kernel's
 * /proc/sysvipc/sem gets the supervisor's view of it; anything else runs as it would without
 * us. The view is of the caller's namespace as a semaphore call would find it (begin_call()),
 * and the caller is proven ours before it is answered. Whatever goes wrong on our side lets
 * the open run (the kernel's own file), except memory for the view itself (ENOMEM).
 */
static void serve_open(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n,
		       int nr)
{
	const uint64_t *args = (const uint64_t *)n->data.args;
	int dirfd = nr == NR_OPEN ? AT_FDCWD : (int)args[0];
	uint64_t upath = nr == NR_OPEN ? args[0] : args[1];
	uint64_t flags = nr == NR_OPEN ? args[1] : args[2], resolve = 0;
	enum pv_file what;
	struct sv_wakeq wq;
	struct call_ctx cx;
	char path[PATH_MAX];
	bool follows;
	long val = 0;
	int fd;

	NT_ADD(&wk->stats, calls[NT_OTHER], 1);
	if (nr == NR_OPENAT2) {
		struct open_how how;

		/* a size the kernel refuses, or a struct we cannot read: its error is the kernel's */
		if (args[3] < sizeof(how) || nt_read(l, (pid_t)n->pid, args[2], &how, sizeof(how)))
			goto run_on;
		/* what openat2 refuses (EINVAL) it must refuse itself: unknown bits, a stray mode */
		if (how.flags >> 32 || how.mode)
			goto run_on;
		flags = how.flags;
		resolve = how.resolve;
	}
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_PATH | O_DIRECTORY | O_CREAT)) ||
	    !read_path(l, (pid_t)n->pid, upath, path))
		goto run_on;
	what = pv_classify((pid_t)n->pid, dirfd, path, flags, resolve);
	if (what == PV_OTHER)
		goto run_on;

	sv_wakeq_init(&wq);
	if (begin_call(wk, l, n, nr, NULL, &cx, &wq)) {
		nt_deliver(wk, &wq);
		goto run_on;
	}
	cx.c.ns = cx.id.ns->ns;
	cx.c.cred = &cx.id.cred;
	cx.c.ops = &caller_ops;
	cx.c.priv = &cx;
	/* a sysctl file the namespace's values follow is the kernel's to serve */
	follows = what != PV_SYSVIPC_SEM &&
		  (what == PV_SYSCTL_SEM ? cx.id.ns->sem_fd : cx.id.ns->next_id_fd) >= 0;
	if (follows) {
		nt_answer(l, n->id, 0, NT_CONTINUE);
	} else {
		fd = what == PV_SYSVIPC_SEM ? pv_render(&cx.c) : pv_render_sysctl(cx.c.ns, what);
		if (fd >= 0) {
			val = nt_answer_fd(l, n->id, fd, flags & O_CLOEXEC);
			close(fd);
		} else {
			val = nt_answer(l, n->id, fd, 0) ?: fd;
		}
	}
	xunlock(&cx.thr->lock);
	if (!follows && wk->super->cfg.trace)
		fprintf(wk->super->cfg.trace,
			"semvisor: [%d] open(%s) = %ld (the supervisor's view)\n", (int)cx.thr->tid,
			what == PV_SYSVIPC_SEM	? "/proc/sysvipc/sem"
			: what == PV_SYSCTL_SEM ? "/proc/sys/kernel/sem"
						: "/proc/sys/kernel/sem_next_id",
			val);
	ident_end(&cx.id);
	nt_deliver(wk, &wq);
	nt_thread_put(cx.thr);
	return;
run_on:
	nt_answer(l, n->id, 0, NT_CONTINUE);
}

void nt_serve(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n)
{
	nt_serve_from(wk, l, n, nt_now_ns());
}

void nt_serve_from(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n,
		   int64_t t0)
{
	int nr = n->data.nr;

	if (n->data.arch == AUDIT_ARCH_X86_64) {
		/* x32 uses the same calls and layouts, with this bit set in the number */
		nr &= ~__X32_SYSCALL_BIT;
		switch (nr) {
		case NR_SEMGET:
			NT_ADD(&wk->stats, calls[NT_SEMGET], 1);
			serve_sem(wk, l, n, nr, t0, NULL);
			return;
		case NR_SEMOP:
			NT_ADD(&wk->stats, calls[NT_SEMOP], 1);
			serve_sem(wk, l, n, nr, t0, NULL);
			return;
		case NR_SEMTIMEDOP:
			NT_ADD(&wk->stats, calls[NT_SEMTIMEDOP], 1);
			serve_sem(wk, l, n, nr, t0, NULL);
			return;
		case NR_SEMCTL:
			NT_ADD(&wk->stats, calls[NT_SEMCTL], 1);
			serve_sem(wk, l, n, nr, t0, NULL);
			return;
		case NR_UNSHARE:
		case NR_SETNS:
			serve_ns_change(wk, l, n, nr == NR_UNSHARE, false);
			return;
		case NR_OPEN:
		case NR_OPENAT:
		case NR_OPENAT2:
			serve_open(wk, l, n, nr);
			return;
		}
	} else if (n->data.arch == AUDIT_ARCH_I386 && (nr == NR32_UNSHARE || nr == NR32_SETNS)) {
		serve_ns_change(wk, l, n, nr == NR32_UNSHARE, true);
		return;
	}
	/* Not a call we serve (another filter's rules, another ABI): as if it did not exist. */
	NT_ADD(&wk->stats, calls[NT_OTHER], 1);
	nt_answer(l, n->id, -ENOSYS, 0);
}

void nt_serve_again(struct nt_worker *wk, struct nt_listener *l, const struct nt_again *a)
{
	struct seccomp_notif *n = nt_slot_arm(wk, l), own;

	/* in a slot, as if just received, so that a crash from here on cannot lose it */
	if (n == wk->notif)
		n = &own;
	memset(n, 0, sizeof(*n));
	n->id = a->id;
	n->pid = (uint32_t)a->tid;
	n->data.nr = a->nr;
	n->data.arch = AUDIT_ARCH_X86_64;
	memcpy(n->data.args, a->args, sizeof(n->data.args));
	nt_slot_received(wk, a->received_ns);
	serve_sem(wk, l, n, a->nr, a->received_ns, a);
}
