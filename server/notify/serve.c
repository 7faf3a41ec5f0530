/* SPDX-License-Identifier: MIT */
/*
 * Serving one notification: decode it, find out who is calling, run the call in the engine,
 * answer it or park it; and everything that ends a parked call (completion by another call,
 * timeout, signal, death).
 *
 * The cheap path, a semop by a thread whose credentials are cached, costs four system calls:
 * NOTIF_RECV (super.c), one process_vm_readv of the timeout and sops together, NOTIF_ID_VALID
 * (so nothing read is used if the caller vanished and its tid was reused), NOTIF_SEND.
 *
 * Signals. A caller parked here sleeps interruptibly in the kernel. A caught signal cancels its
 * notification: without SA_RESTART it returns EINTR at once; with SA_RESTART (or after
 * SIGSTOP/SIGCONT) the kernel silently restarts the system call as a new notification with the
 * same arguments. Natively semop never restarts: a wait interrupted by a signal always returns
 * EINTR. So: a thread has at most one system call in flight, and a new notification from a thread
 * whose parked call is still registered proves that call dead. If the new call repeats the dead
 * one exactly, it is the kernel's restart and is answered EINTR; otherwise it is served. A sweep
 * (every 100 ms) finds parked calls whose caller vanished without calling again, and remembers
 * them so that a later restart is still answered EINTR. The residue: a handler without SA_RESTART
 * followed by an immediate retry of the very same call gets one extra EINTR.
 *
 * Completions that cannot be delivered (NOTIF_SEND says ENOENT: the caller was interrupted or
 * died between our decision and our answer) are rolled back in the engine, so no value is lost.
 * If the caller restarted the call in between, the restart takes the completed result instead.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <linux/audit.h>
#include <unistd.h>

#include "notify/notify_int.h"
#include "util/fault.h"

#define X32_BIT	      0x40000000
#define NR_SEMGET     64
#define NR_SEMOP      65
#define NR_SEMCTL     66
#define NR_SEMTIMEDOP 220
#define NR_UNSHARE    272 /* x86_64 and x32 */
#define NR_SETNS      308
#define NR32_UNSHARE  310 /* i386 */
#define NR32_SETNS    346
#define PREFETCH_SOPS 64
#define OVERFLOW_ID   65534 /* /proc/sys/kernel/overflowuid, as the kernel munges */
#define SWEEP_BATCH   512   /* parked callers checked per sweep tick, at most */
/*
 * The kernel keeps a listener's pending notifications in one list that NOTIF_ID_VALID walks
 * under the notifier's mutex, so one check costs about as much as there are parked calls, and
 * every caller's RECV and SEND wait on that mutex too. A sweep tick may spend about this many
 * list steps: with 10,000 parked callers it checks 25 of them per tick.
 */
#define SWEEP_STEPS (256 * 1024)
#define SWEEP_MIN   8

/*
 * NOTIF_ID_VALID and NOTIF_SEND take the notifier's mutex interruptibly: a signal (the receiver's
 * kick, super.c) makes them fail with EINTR having done nothing, so they are retried.
 */
bool nt_id_valid(const struct nt_listener *l, uint64_t id)
{
	int rc;

	while ((rc = ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id)) && errno == EINTR)
		;
	return rc == 0;
}

/* Answer a notification: a value, -errno, or (flags) CONTINUE. 0, or -errno from the kernel. */
static int reply(const struct nt_listener *l, uint64_t id, long val, uint32_t flags)
{
	size_t size = l->super->resp_size;
	union {
		struct seccomp_notif_resp r;
		char raw[256];
	} u;

	memset(&u, 0, size < sizeof(u) ? size : sizeof(u));
	u.r.id = id;
	u.r.flags = flags;
	if (val < 0)
		u.r.error = (int32_t)val; /* must be negative, or it reads as success */
	else
		u.r.val = val;
	while (ioctl(l->src.fd, SECCOMP_IOCTL_NOTIF_SEND, &u.r))
		if (errno != EINTR)
			return -errno;
	return 0;
}

static inline int hist_bucket(int64_t ns)
{
	int b = 0;

	while (ns > 1 && b < NT_NBUCKET - 1) {
		ns >>= 1;
		b++;
	}
	return b;
}

static void count_answer(struct nt_stats *st, long val)
{
	if (val < 0 && -val < NT_NERRNO)
		NT_ADD(st, errors[-val], 1);
}

static bool same_call(const struct nt_callsig *sig, int nr, const uint64_t *args)
{
	return sig->valid && sig->nr == nr && !memcmp(sig->args, args, sizeof(sig->args));
}

static void record(struct nt_callsig *sig, int nr, const uint64_t *args, long result)
{
	sig->valid = true;
	sig->nr = nr;
	memcpy(sig->args, args, sizeof(sig->args));
	sig->result = result;
}

static const char *call_name(int nr)
{
	switch (nr) {
	case NR_SEMGET:
		return "semget";
	case NR_SEMOP:
		return "semop";
	case NR_SEMTIMEDOP:
		return "semtimedop";
	case NR_SEMCTL:
		return "semctl";
	}
	return "?";
}

static void trace(struct nt_super *s, int32_t tid, int nr, const uint64_t *a, long val,
		  const char *how)
{
	char res[64];

	if (!s->cfg.trace)
		return;
	if (val < 0)
		snprintf(res, sizeof(res), "-1 %s", strerrorname_np((int)-val) ?: "E?");
	else
		snprintf(res, sizeof(res), "%ld", val);
	if (nr == NR_SEMGET)
		fprintf(s->cfg.trace, "semvisor: [%d] semget(%#x, %d, %#o) = %s%s\n", tid,
			(unsigned int)a[0], (int)a[1], (unsigned int)a[2], res, how);
	else if (nr == NR_SEMCTL)
		fprintf(s->cfg.trace, "semvisor: [%d] semctl(%d, %d, %d, %#llx) = %s%s\n", tid,
			(int)a[0], (int)a[1], (int)a[2], (unsigned long long)a[3], res, how);
	else
		fprintf(s->cfg.trace, "semvisor: [%d] %s(%d, %#llx, %u%s) = %s%s\n", tid,
			call_name(nr), (int)a[0], (unsigned long long)a[1], (unsigned int)a[2],
			nr == NR_SEMTIMEDOP && a[3] ? ", timeout" : "", res, how);
}

/* ---- requests ---- */

void nt_req_put(struct nt_req *r)
{
	if (atomic_fetch_sub_explicit(&r->refcount, 1, memory_order_acq_rel) != 1)
		return;
	ident_thread_put(r->thr);
	nt_listener_put(r->l);
	if (r->ns)
		nt_ns_put(r->ns);
	free(r);
}

/* ---- timers (a min-heap of deadlines behind one timerfd) ---- */

static void heap_swap(struct nt_super *s, int i, int j)
{
	struct nt_req *t = s->timers[i];

	s->timers[i] = s->timers[j];
	s->timers[j] = t;
	s->timers[i]->heap_idx = i;
	s->timers[j]->heap_idx = j;
}

static void heap_up(struct nt_super *s, int i)
{
	while (i > 0 && s->timers[(i - 1) / 2]->deadline_ns > s->timers[i]->deadline_ns) {
		heap_swap(s, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(struct nt_super *s, int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;

		if (l < s->ntimers && s->timers[l]->deadline_ns < s->timers[m]->deadline_ns)
			m = l;
		if (r < s->ntimers && s->timers[r]->deadline_ns < s->timers[m]->deadline_ns)
			m = r;
		if (m == i)
			return;
		heap_swap(s, i, m);
		i = m;
	}
}

/* caller holds timers_lock */
static void timerfd_arm(struct nt_super *s)
{
	struct itimerspec its = { 0 };

	if (s->ntimers) {
		int64_t d = s->timers[0]->deadline_ns;

		its.it_value.tv_sec = d / 1000000000;
		its.it_value.tv_nsec = d % 1000000000;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	if (timerfd_settime(s->timer.fd, TFD_TIMER_ABSTIME, &its, NULL))
		abort();
}

static int timer_add(struct nt_super *s, struct nt_req *r)
{
	xlock(&s->timers_lock);
	if (s->ntimers == s->timers_cap) {
		int cap = s->timers_cap ? s->timers_cap * 2 : 64;
		struct nt_req **t =
		    sv_fault(SV_FAULT_ALLOC) ? NULL : realloc(s->timers, (size_t)cap * sizeof(*t));

		if (!t) {
			xunlock(&s->timers_lock);
			return -ENOMEM;
		}
		s->timers = t;
		s->timers_cap = cap;
	}
	atomic_fetch_add_explicit(&r->refcount, 1, memory_order_relaxed); /* the heap's */
	r->heap_idx = s->ntimers;
	s->timers[s->ntimers++] = r;
	heap_up(s, r->heap_idx);
	if (r->heap_idx == 0)
		timerfd_arm(s);
	xunlock(&s->timers_lock);
	return 0;
}

/* Remove r from the heap if it is there. Returns whether it was (the heap's reference moved to
   the caller). caller holds timers_lock */
static bool heap_remove(struct nt_super *s, struct nt_req *r)
{
	int i = r->heap_idx;

	if (i < 0)
		return false;
	r->heap_idx = -1;
	if (i != --s->ntimers) {
		s->timers[i] = s->timers[s->ntimers];
		s->timers[i]->heap_idx = i;
		heap_down(s, i);
		heap_up(s, i);
	}
	return true;
}

/* A parked call is finished: out of the timer heap and the sweep list. */
static void req_detach(struct nt_super *s, struct nt_req *r)
{
	bool had_timer;

	xlock(&s->timers_lock);
	had_timer = heap_remove(s, r);
	xunlock(&s->timers_lock);
	if (had_timer)
		nt_req_put(r);
	xlock(&s->parked_lock);
	if (!cds_list_empty(&r->parked_node)) {
		cds_list_del_init(&r->parked_node);
		atomic_fetch_sub_explicit(&r->l->parked, 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&s->nparked, 1, memory_order_relaxed);
	}
	xunlock(&s->parked_lock);
}

void nt_timers_expire(struct nt_worker *wk)
{
	struct nt_super *s = wk->super;
	struct nt_req *due[64];
	int n = 0;
	uint64_t ticks;
	int64_t now = nt_now_ns();

	if (read(s->timer.fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		abort();
	xlock(&s->timers_lock);
	while (s->ntimers && s->timers[0]->deadline_ns <= now && n < 64) {
		due[n] = s->timers[0];
		heap_remove(s, due[n]); /* its reference is ours now */
		n++;
	}
	timerfd_arm(s);
	xunlock(&s->timers_lock);
	nt_rearm(s, &s->timer);

	for (int i = 0; i < n; i++) {
		struct nt_req *r = due[i];
		struct nt_thread *thr = r->thr;
		bool mine = false;

		xlock(&thr->lock);
		if (thr->parked == r && sv_waiter_cancel(r->w) == 0) {
			thr->parked = NULL;
			mine = true;
		}
		xunlock(&thr->lock);
		if (mine) {
			long val = -EAGAIN;

			req_detach(s, r);
			if (reply(r->l, r->id, val, 0) == 0) {
				NT_ADD(&wk->stats, timeouts, 1);
				count_answer(&wk->stats, val);
			} else {
				NT_ADD(&wk->stats, stale, 1);
			}
			trace(s, thr->tid, r->nr, r->args, val, " (timed out)");
			sv_waiter_free(r->w);
			nt_req_put(r); /* the parked call's */
		}
		nt_req_put(r); /* the heap's */
	}
}

/* ---- ends of parked calls ---- */

void nt_drop_parked(struct nt_worker *wk, struct nt_thread *thr, bool remember)
{
	struct nt_req *r = thr->parked;
	struct nt_super *s = r->l->super;

	thr->parked = NULL;
	if (remember)
		record(&thr->interrupted, r->nr, r->args, -EINTR);
	NT_ADD(NT_STATS(s, wk), interrupted, 1);
	if (sv_waiter_cancel(r->w) == 0) {
		req_detach(s, r);
		sv_waiter_free(r->w);
		nt_req_put(r);
	}
	/* else it was completed and sits on a wake queue: its answer will fail and roll back */
}

void nt_deliver(struct nt_worker *wk, struct sv_wakeq *wq)
{
	struct sv_waiter *w;

	while ((w = sv_wakeq_pop(wq))) {
		struct nt_req *r = sv_waiter_cookie(w);
		struct nt_thread *thr = r->thr;
		struct nt_super *s = r->l->super;
		struct nt_stats *st = NT_STATS(s, wk);
		int status = sv_waiter_result(w);
		bool adopted;

		/*
		 * The answer goes, and a lost one is undone and recorded, under the thread's
		 * lock: its next call (a restart) waits for all of that, so it can neither run
		 * the call a second time nor consume what is being undone.
		 */
		xlock(&thr->lock);
		if (thr->parked == r)
			thr->parked = NULL;
		adopted = r->adopted;
		req_detach(s, r);

		if (adopted) {
			/* the caller's restart took this result (serve_sem) */
		} else if (reply(r->l, r->id, status, 0) == 0) {
			NT_ADD(st, woken, 1);
			NT_ADD(st, wait_ns[hist_bucket(nt_now_ns() - r->parked_ns)], 1);
			count_answer(st, status);
			trace(s, thr->tid, r->nr, r->args, status, " (after waiting)");
		} else {
			/*
			 * The caller was interrupted (or died) while it waited. Undo what completing
			 * it applied; a restart of the call is then the kernel's restart of an
			 * interrupted wait, which natively returns EINTR. If later calls used what
			 * it produced it stays done, and a restart gets its result.
			 */
			bool kept;

			sv_fault_pause(SV_FAULT_SLOW_UNDO, 200);
			kept = sv_waiter_rollback(w, wq) == -ERANGE;
			if (kept)
				record(&thr->kept, r->nr, r->args, status);
			else
				record(&thr->interrupted, r->nr, r->args, -EINTR);
			if (kept)
				NT_ADD(st, kept, 1);
			else if (status == 0)
				NT_ADD(st, rolled_back, 1);
			else
				NT_ADD(st, stale, 1);
		}
		xunlock(&thr->lock);
		sv_waiter_free(w);
		nt_req_put(r);
	}
}

void nt_sweep(struct nt_worker *wk)
{
	struct nt_super *s = wk->super;
	struct nt_req *batch[SWEEP_BATCH];
	struct nt_req *r, *tmp;
	int n = 0, parked = atomic_load_explicit(&s->nparked, memory_order_relaxed);
	int budget = parked > 0 ? SWEEP_STEPS / parked : SWEEP_BATCH;

	if (budget > SWEEP_BATCH)
		budget = SWEEP_BATCH;
	if (budget < SWEEP_MIN)
		budget = SWEEP_MIN;
	/* Check a batch from the front, and move it to the back for next time. */
	xlock(&s->parked_lock);
	cds_list_for_each_entry_safe(r, tmp, &s->parked, parked_node) {
		if (n == budget)
			break;
		atomic_fetch_add_explicit(&r->refcount, 1, memory_order_relaxed);
		batch[n++] = r;
	}
	for (int i = 0; i < n; i++) {
		cds_list_del(&batch[i]->parked_node);
		cds_list_add_tail(&batch[i]->parked_node, &s->parked);
	}
	xunlock(&s->parked_lock);

	for (int i = 0; i < n; i++) {
		r = batch[i];
		if (!nt_id_valid(r->l, r->id)) {
			struct nt_thread *thr = r->thr;

			xlock(&thr->lock);
			if (thr->parked == r)
				nt_drop_parked(wk, thr, true);
			xunlock(&thr->lock);
		}
		nt_req_put(r);
	}
}

void nt_listener_gone(struct nt_worker *wk, struct nt_listener *l)
{
	struct nt_super *s = wk->super;
	struct nt_req *r;

	/* No task uses the filter: every call parked through it is dead. */
	for (;;) {
		struct nt_req *found = NULL;

		xlock(&s->parked_lock);
		cds_list_for_each_entry(r, &s->parked, parked_node) {
			if (r->l == l) {
				atomic_fetch_add_explicit(&r->refcount, 1, memory_order_relaxed);
				found = r;
				break;
			}
		}
		xunlock(&s->parked_lock);
		if (!found)
			return;
		xlock(&found->thr->lock);
		if (found->thr->parked == found)
			nt_drop_parked(wk, found->thr, false);
		xunlock(&found->thr->lock);
		/* whatever happened, it is no longer on the list once detached */
		req_detach(s, found);
		nt_req_put(found);
	}
}

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
static bool kernel_restarted(pid_t tid, int raw_nr)
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
	while (len >= 4096 && tgt_read(tid, top - len, w, len))
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
	if (tgt_read(cx->thr->tid, addr, buf, len))
		return -EFAULT;
	/* Read by number: ours only if the caller still waits (ident.h). */
	if (!nt_id_valid(cx->l, cx->notif_id))
		return -EFAULT;
	return 0;
}

static int op_write(const struct sv_caller *c, uint64_t addr, const void *buf, size_t len)
{
	struct call_ctx *cx = c->priv;

	/* Never write into a process that is not our caller any more. */
	if (!nt_id_valid(cx->l, cx->notif_id))
		return -EFAULT;
	return tgt_write(cx->thr->tid, addr, buf, len) ? -EFAULT : 0;
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
	int r1, r2;

	if (!sops_len && !tsaddr)
		return false;
	if (!tsaddr) { /* semop, and glibc's semop(): one region */
		r1 = 0;
		r2 = tgt_read(cx->thr->tid, args[1], cx->sops, sops_len);
	} else {
		tgt_read2(cx->thr->tid, tsaddr, &cx->ts, sizeof(cx->ts), &r1, args[1], cx->sops,
			  sops_len, &r2);
	}
	if (tsaddr)
		cx->pre[cx->npre++] = (typeof(cx->pre[0])){ tsaddr, sizeof(cx->ts), r1, &cx->ts };
	if (sops_len)
		cx->pre[cx->npre++] = (typeof(cx->pre[0])){ args[1], sops_len, r2, cx->sops };
	return true;
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

	if ((nr == NR_SEMOP || nr == NR_SEMTIMEDOP) && val == 0 && nsops >= 1 &&
	    nsops <= PREFETCH_SOPS &&
	    sv_semop_revert(&cx->c, (int)args[0], cx->sops, nsops, wq) == 0) {
		NT_ADD(&wk->stats, rolled_back, 1);
		return;
	}
	record(&cx->thr->kept, nr, args, val);
	NT_ADD(&wk->stats, kept, 1);
}

/*
 * GETNCNT and GETZCNT count waiters, and a caller interrupted in its wait is, natively, no
 * longer one by the time anybody can ask. Drop the parked calls that could count for this
 * semaphore and whose caller has vanished (the sweep would find them within 100 ms): one
 * NOTIF_ID_VALID each, so only those. Caller holds no thread lock.
 */
static void drop_vanished_waiters(struct nt_worker *wk, struct nt_ns *ns, int semid, int semnum)
{
	struct nt_super *s = wk->super;
	struct nt_req *r, **found = NULL;
	int n = 0, cap = 0;

	xlock(&s->parked_lock);
	cds_list_for_each_entry(r, &s->parked, parked_node) {
		/* only waiters that can count for semnum: one-sop calls on it, and complex ones */
		if (r->ns != ns || (int)r->args[0] != semid ||
		    (r->semnum >= 0 && r->semnum != semnum))
			continue;
		if (n == cap) {
			struct nt_req **more;

			cap = cap ? 2 * cap : 16;
			more = sv_fault(SV_FAULT_ALLOC)
				   ? NULL
				   : realloc(found, (size_t)cap * sizeof(*more));
			if (!more)
				break; /* the sweep finds the rest within 100 ms */
			found = more;
		}
		atomic_fetch_add_explicit(&r->refcount, 1, memory_order_relaxed);
		found[n++] = r;
	}
	xunlock(&s->parked_lock);
	for (int i = 0; i < n; i++) {
		r = found[i];
		if (!nt_id_valid(r->l, r->id)) {
			xlock(&r->thr->lock);
			if (r->thr->parked == r)
				nt_drop_parked(wk, r->thr, true);
			xunlock(&r->thr->lock);
		}
		nt_req_put(r);
	}
	free(found);
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
	struct nt_thread *thr = ident_thread_find(wk->super, (int32_t)n->pid);
	uint64_t mask = i386 ? 0xffffffffull : ~0ull;
	uint64_t flags = (unshare ? n->data.args[0] : n->data.args[1] & 0xffffffffull) & mask;
	bool applies = false;
	struct sv_wakeq wq;
	int rc;

	NT_ADD(&wk->stats, calls[NT_NS_CHANGE], 1);
	sv_wakeq_init(&wq);
	if (thr) {
		bool gone, waits;

		xlock(&thr->lock);
		gone = ident_current(thr) != 0;
		applies =
		    !gone && undo_applies(thr, unshare, flags, (int)(n->data.args[0] & 0xffffffff));
		/* one proof that all read by number above was our caller's */
		waits = nt_id_valid(l, n->id);
		if (gone || !waits) {
			xunlock(&thr->lock);
			if (gone && waits)
				ident_thread_stale(wk->super, thr);
			ident_thread_put(thr);
			thr = NULL;
		}
	}
	if (thr) {
		ident_forget_ns(thr);
		/* a non-leader in a namespace of its own: its exec would take the leader's record */
		if (thr->tid != thr->proc->tgid && (flags == 0 || (flags & CLONE_NEWIPC)))
			atomic_store(&thr->proc->mixed_ns, true);
	}
	rc = reply(l, n->id, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
	if (thr) {
		if (rc == 0 && applies)
			ident_detach_undo(thr->proc, &wq);
		xunlock(&thr->lock);
		ident_thread_put(thr);
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
		      int nr, struct call_ctx *cx, struct sv_wakeq *wq)
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
		xlock(&thr->lock);
		memset(cx, 0, offsetof(struct call_ctx, ts));
		cx->s = s;
		cx->l = l;
		cx->thr = thr;
		cx->notif_id = n->id;
		if (nr == NR_SEMOP || nr == NR_SEMTIMEDOP)
			prefetch(cx, nr, args);
		err = ident_begin(&cx->id, s, l, thr, n->id, wq);
		if (!err)
			return 0;
		ident_end(&cx->id);
		xunlock(&thr->lock);
		/* our caller waits, yet the record's thread is gone: the record is stale */
		if (err != -ESRCH || !nt_id_valid(l, n->id)) {
			ident_thread_put(thr);
			return err;
		}
		ident_thread_stale(s, thr);
		ident_thread_put(thr);
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

	if (thr->parked) {
		struct nt_req *old = thr->parked;
		bool restart = old->nr == nr && !memcmp(old->args, args, sizeof(old->args)) &&
			       kernel_restarted(thr->tid, n->data.nr) && ident_prove(&cx->id) == 0;

		thr->parked = NULL;
		NT_ADD(&wk->stats, interrupted, 1);
		if (sv_waiter_cancel(old->w) == 0) {
			req_detach(wk->super, old);
			sv_waiter_free(old->w);
			nt_req_put(old);
			if (restart) {
				/* the kernel restarted an interrupted wait: natively that is EINTR */
				*val = -EINTR;
				early = true;
			}
		} else if (restart) {
			/* It completed before its answer could go: the restart takes the result. */
			old->adopted = true;
			*val = sv_waiter_result(old->w);
			early = true;
		}
		/* else it completed and its answer will fail: the deliverer rolls it back */
	} else if (same_call(&thr->interrupted, nr, args) &&
		   kernel_restarted(thr->tid, n->data.nr) && ident_prove(&cx->id) == 0) {
		*val = -EINTR;
		early = true;
	} else if (same_call(&thr->kept, nr, args)) {
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
	CDS_INIT_LIST_HEAD(&req->parked_node);
	park->cookie = req;
	/* more sops than we knew allowed: maybe the namespace's SEMOPM changed */
	sv_ns_limits(cx->id.ns->ns, &lim);
	if ((unsigned int)args[2] > (unsigned int)lim.semopm)
		nt_ns_sync(cx->id.ns);
	return sv_semtimedop(&cx->c, (int)args[0], args[1], (unsigned int)args[2],
			     nr == NR_SEMTIMEDOP ? args[3] : 0, park, wq);
}

static long call_semctl(struct nt_worker *wk, struct call_ctx *cx, const uint64_t *args,
			struct sv_wakeq *wq)
{
	int cmd = (int)args[2];
	long rc;

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
		drop_vanished_waiters(wk, cx->id.ns, (int)args[0], (int)args[1]);
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
	struct nt_super *s = wk->super;
	struct nt_req *req = wk->spare;
	struct nt_thread *thr = cx->thr;
	struct nt_listener *l = cx->l;

	wk->spare = NULL; /* the parked call owns it now */
	atomic_store_explicit(&req->refcount, 1, memory_order_relaxed); /* whoever ends it */
	atomic_fetch_add_explicit(&l->refcount, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&thr->refcount, 1, memory_order_relaxed);
	req->w = park->waiter;
	req->ns = cx->id.ns;
	nt_ns_get(req->ns);
	req->semnum = (unsigned int)n->data.args[2] == 1 ? cx->sops[0].sem_num : -1;
	req->parked_ns = nt_now_ns();
	thr->parked = req;
	xlock(&s->parked_lock);
	cds_list_add_tail(&req->parked_node, &s->parked);
	atomic_fetch_add_explicit(&l->parked, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->nparked, 1, memory_order_relaxed);
	xunlock(&s->parked_lock);
	if (park->timed) {
		/* the kernel counts the timeout from the call's entry */
		req->deadline_ns = t0 + park->timeout.tv_sec * 1000000000LL + park->timeout.tv_nsec;
		if (timer_add(s, req) && sv_waiter_cancel(req->w) == 0) {
			/* no memory for the timer: take the call back and say so */
			thr->parked = NULL;
			req_detach(s, req);
			sv_waiter_free(req->w);
			nt_req_put(req);
			*val = -ENOMEM;
			return false;
		}
		/* (if it completed meanwhile, its deliverer answers it) */
	}
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
		if (!nt_id_valid(cx->l, n->id)) {
			NT_ADD(&wk->stats, stale, 1);
			return;
		}
		/* it waits after all: it must hear something, and nothing was done */
		val = -ENOMEM;
	}
	rc = reply(cx->l, n->id, val, 0);
	if (rc == 0) {
		count_answer(&wk->stats, val);
		NT_ADD(&wk->stats, service_ns[hist_bucket(nt_now_ns() - t0)], 1);
	} else {
		NT_ADD(&wk->stats, stale, 1);
		if (rc == -ENOENT)
			answer_lost(wk, cx, nr, (const uint64_t *)n->data.args, val, wq);
	}
}

static void serve_sem(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n,
		      int nr, int64_t t0)
{
	struct nt_super *s = wk->super;
	const uint64_t *args = (const uint64_t *)n->data.args;
	struct call_ctx cx;
	struct sv_park park = { 0 };
	struct sv_wakeq wq;
	struct nt_thread *thr;
	bool parked = false;
	long val = 0;
	int err;

	sv_wakeq_init(&wq);
	/* Exits the kernel has reported must be applied before anything can observe them. */
	if (sv_undo_entries() > 0 || atomic_load_explicit(&s->nparked, memory_order_relaxed) > 0)
		nt_drain_exits(wk);

	err = begin_call(wk, l, n, nr, &cx, &wq);
	if (err) {
		/*
		 * Gone already: nobody to answer. Otherwise say why we cannot serve: out of
		 * memory (or what we could not read about it), or a caller we cannot see at all
		 * (outside our pid namespace). A caller that waits always hears something.
		 */
		if (err == -ESRCH && !nt_id_valid(l, n->id))
			NT_ADD(&wk->stats, stale, 1);
		else if (reply(l, n->id,
			       err == -EACCES	? -ENOSYS
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
		if (reply(l, n->id, val, 0) == 0)
			count_answer(&wk->stats, val);
		else
			record(val == -EINTR ? &thr->interrupted : &thr->kept, nr, args, val);
		xunlock(&thr->lock);
		trace(s, thr->tid, nr, args, val, " (restart of an interrupted call)");
		goto out;
	}

	/* Phase 3: the engine. */
	cx.c.ns = cx.id.ns->ns;
	cx.c.cred = &cx.id.cred;
	cx.c.ops = &caller_ops;
	cx.c.priv = &cx;
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
	xunlock(&thr->lock);
	if (!parked)
		trace(s, thr->tid, nr, args, val, val == -SV_EGONE ? " (caller gone)" : "");
	if (cx.c.proc)
		sv_proc_put(cx.c.proc);
out:
	ident_end(&cx.id);
	nt_deliver(wk, &wq);
	ident_thread_put(thr);
}

void nt_serve(struct nt_worker *wk, struct nt_listener *l, const struct seccomp_notif *n)
{
	int64_t t0 = nt_now_ns();
	int nr = n->data.nr;

	if (n->data.arch == AUDIT_ARCH_X86_64) {
		nr &= ~X32_BIT; /* x32 uses the same calls and layouts with this bit set */
		switch (nr) {
		case NR_SEMGET:
			NT_ADD(&wk->stats, calls[NT_SEMGET], 1);
			serve_sem(wk, l, n, nr, t0);
			return;
		case NR_SEMOP:
			NT_ADD(&wk->stats, calls[NT_SEMOP], 1);
			serve_sem(wk, l, n, nr, t0);
			return;
		case NR_SEMTIMEDOP:
			NT_ADD(&wk->stats, calls[NT_SEMTIMEDOP], 1);
			serve_sem(wk, l, n, nr, t0);
			return;
		case NR_SEMCTL:
			NT_ADD(&wk->stats, calls[NT_SEMCTL], 1);
			serve_sem(wk, l, n, nr, t0);
			return;
		case NR_UNSHARE:
		case NR_SETNS:
			serve_ns_change(wk, l, n, nr == NR_UNSHARE, false);
			return;
		}
	} else if (n->data.arch == AUDIT_ARCH_I386 && (nr == NR32_UNSHARE || nr == NR32_SETNS)) {
		serve_ns_change(wk, l, n, nr == NR32_UNSHARE, true);
		return;
	}
	/* Not a call we serve (another filter's rules, another ABI): as if it did not exist. */
	NT_ADD(&wk->stats, calls[NT_OTHER], 1);
	reply(l, n->id, -ENOSYS, 0);
}
