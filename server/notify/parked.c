/* SPDX-License-Identifier: MIT */
/*
 * The life of a parked call (parked.h): the timer heap, the sweep, delivery and rollback.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "lock/xpthread.h"
#include "notify/durable.h"
#include "notify/listener.h"
#include "notify/parked.h"
#include "notify/records.h"
#include "notify/stats.h"
#include "notify/super.h"
#include "util/debug.h"
#include "util/fault.h"
#include "util/killpoint.h"

#define SWEEP_BATCH 512 /* parked callers checked per sweep tick, at most */
/*
 * The kernel keeps a listener's pending notifications in one list that NOTIF_ID_VALID walks
 * under the notifier's mutex, so one check costs about as much as there are parked calls, and
 * every caller's RECV and SEND wait on that mutex too. A sweep tick may spend about this many
 * list steps: with 10,000 parked callers it checks 25 of them per tick.
 */
#define SWEEP_STEPS (256 * 1024)
#define SWEEP_MIN   8

static void nt_req_put(struct nt_req *r)
{
	if (atomic_fetch_sub_explicit(&r->refcount, 1, memory_order_acq_rel) != 1)
		return;
	if (r->slot >= 0)
		dur_slot_put(r->l->super->dur, r->slot); /* answered, or its caller gone */
	nt_thread_put(r->thr);
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

	xassert_held(&s->timers_lock);
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

	xassert_held(&s->timers_lock);
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

int nt_park(struct nt_super *s, struct nt_req *r)
{
	struct nt_thread *thr = r->thr;

	xassert_held(&thr->lock);
	r->parked_ns = nt_now_ns();
	thr->parked = r;
	xlock(&s->parked_lock);
	cds_list_add_tail(&r->parked_node, &s->parked);
	atomic_fetch_add_explicit(&r->l->parked, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->nparked, 1, memory_order_relaxed);
	xunlock(&s->parked_lock);
	if (r->deadline_ns && timer_add(s, r) && sv_waiter_cancel(r->w) == 0) {
		/* no memory for the timer: take the call back */
		thr->parked = NULL;
		req_detach(s, r);
		sv_waiter_free(r->w);
		nt_req_put(r);
		return -ENOMEM;
	}
	/* (if it completed meanwhile, its deliverer answers it) */
	if (r->l->tp->parked)
		r->l->tp->parked(r->l, r->id);
	return 0;
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

		SV_DEBUG_YIELD(); /* off the heap: a completion may come first */
		xlock(&thr->lock);
		if (thr->parked == r && sv_waiter_cancel(r->w) == 0) {
			thr->parked = NULL;
			mine = true;
		}
		xunlock(&thr->lock);
		if (mine) {
			long val = -EAGAIN;

			req_detach(s, r);
			if (nt_answer(r->l, r->id, val, 0) == 0) {
				NT_ADD(&wk->stats, timeouts, 1);
				nt_count_answer(&wk->stats, val);
			} else {
				NT_ADD(&wk->stats, stale, 1);
			}
			nt_trace(s, thr->tid, r->nr, r->args, val, " (timed out)");
			sv_waiter_free(r->w);
			nt_req_put(r); /* the parked call's */
		}
		nt_req_put(r); /* the heap's */
	}
}

/* ---- ends of parked calls ---- */

bool nt_drop_parked(struct nt_worker *wk, struct nt_thread *thr, bool remember)
{
	struct nt_req *r = thr->parked;
	struct nt_super *s = r->l->super;

	xassert_held(&thr->lock);
	thr->parked = NULL;
	if (remember)
		nt_callsig_set(&thr->interrupted, r->nr, r->args, -EINTR);
	NT_ADD(NT_STATS(s, wk), interrupted, 1);
	if (sv_waiter_cancel(r->w) != 0)
		return false; /* completed, on a wake queue: its answer will fail and roll back */
	req_detach(s, r);
	sv_waiter_free(r->w);
	nt_req_put(r);
	return true;
}

/* Listeners a bulk delivery answers without SYNC_WAKE_UP; more answer with it, only slower. */
#define UNSYNCED_MAX 8

unsigned int nt_deliver(struct nt_worker *wk, struct sv_wakeq *wq)
{
	struct nt_listener *unsynced[UNSYNCED_MAX];
	struct sv_waiter *w;
	unsigned int n = 0, nun = 0;
	bool bulk = sv_wakeq_many(wq);

	for (; (w = sv_wakeq_pop(wq)); n++) {
		struct nt_req *r = sv_waiter_cookie(w);
		struct nt_thread *thr = r->thr;
		struct nt_super *s = r->l->super;
		struct nt_stats *st = NT_STATS(s, wk);
		int status = sv_waiter_result(w);
		bool adopted;

		if (bulk && nun < UNSYNCED_MAX) {
			unsigned int i = 0;

			while (i < nun && unsynced[i] != r->l)
				i++;
			if (i == nun) {
				nt_listener_get(r->l); /* past the request's reference, put below */
				nt_listener_unsync(r->l);
				unsynced[nun++] = r->l;
			}
		}

		/*
		 * The answer goes, and a lost one is undone and recorded, under the thread's
		 * lock: its next call (a restart) waits for all of that, so it can neither run
		 * the call a second time nor consume what is being undone.
		 */
		SV_DEBUG_YIELD(); /* a restart of the call may take the thread's lock first */
		xlock(&thr->lock);
		if (thr->parked == r)
			thr->parked = NULL;
		adopted = r->adopted;
		req_detach(s, r);
		sv_kp(SV_KP_COMMITTED);

		if (adopted) {
			/* the caller's restart took this result (serve.c) */
		} else if (nt_answer(r->l, r->id, status, 0) == 0) {
			NT_ADD(st, woken, 1);
			int64_t waited = nt_now_ns() - r->parked_ns;

			NT_ADD(st, wait_ns[nt_hist_bucket(waited)], 1);
			NT_ADD(st, wait_ns_sum, waited);
			nt_count_answer(st, status);
			nt_trace(s, thr->tid, r->nr, r->args, status, " (after waiting)");
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
				nt_callsig_set(&thr->kept, r->nr, r->args, status);
			else
				nt_callsig_set(&thr->interrupted, r->nr, r->args, -EINTR);
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
	for (unsigned int i = 0; i < nun; i++) {
		nt_listener_resync(unsynced[i]);
		nt_listener_put(unsynced[i]);
	}
	return n;
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
		SV_DEBUG_YIELD(); /* its caller may call again before the check */
		if (!nt_waits(r->l, r->id)) {
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

void nt_drop_vanished(struct nt_worker *wk, struct nt_ns *ns, int semid, int semnum)
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
		if (!nt_waits(r->l, r->id)) {
			xlock(&r->thr->lock);
			if (r->thr->parked == r)
				nt_drop_parked(wk, r->thr, true);
			xunlock(&r->thr->lock);
		}
		nt_req_put(r);
	}
	free(found);
}
