/* SPDX-License-Identifier: MIT */
/*
 * How thread and process records end (exits.h).
 */
#include <errno.h>
#include <sys/epoll.h>

#include "lock/xpthread.h"
#include "notify/exits.h"
#include "notify/nsreg.h"
#include "notify/parked.h"
#include "notify/stats.h"
#include "notify/super.h"
#include "util/debug.h"

#define GHOSTS 4096

/*
 * Exited processes' pid numbers, for GETPID of semaphores they changed last: the kernel keeps a
 * reference on the struct pid and still reports the number. A ring of the latest exits, with
 * their pid namespaces by id, which no later namespace takes.
 */
static struct ghost {
	int32_t tgid;
	struct nt_pids pids;
} ghosts[GHOSTS];
static unsigned int ghost_next;
static pthread_mutex_t ghost_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Take thr out of the tables: its parked call is dropped, it leaves its namespace (which may
 * end it: what that completes goes to wq). The table's reference is dropped by the exit event
 * (exit_event) for a watched record, by whoever takes an unwatched one out of the table.
 */
static void thread_remove(struct nt_super *s, struct nt_thread *thr, bool exit_event,
			  struct sv_wakeq *wq)
{
	bool drop;
	struct nt_ns *ns;
	bool removed;

	xlock(&thr->lock);
	thr->dead = true;
	thr->ns_kept = false;
	if (thr->parked)
		nt_drop_parked(NULL, thr, false);
	ns = thr->ns;
	thr->ns = NULL;
	xunlock(&thr->lock);
	if (ns) {
		nsreg_leave(&s->reg, ns, wq);
		nt_ns_put(ns);
	}

	xlock(&s->tables_lock);
	rcu_read_lock();
	removed = cds_lfht_del(s->threads, &thr->node) == 0;
	rcu_read_unlock();
	if (removed) {
		xlock(&thr->proc->lock);
		cds_list_del(&thr->proc_node);
		xunlock(&thr->proc->lock);
	}
	drop = exit_event || (removed && !atomic_load(&thr->watched));
	xunlock(&s->tables_lock);
	if (drop)
		nt_thread_put(thr); /* the table's */
}

void nt_thread_stale(struct nt_super *s, struct nt_thread *thr)
{
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	thread_remove(s, thr, false, &wq);
	nt_deliver(NULL, &wq);
}

void nt_thread_exited(struct nt_super *s, struct nt_thread *thr)
{
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	nt_unwatch(s, &thr->src);
	thread_remove(s, thr, true, &wq);
	nt_deliver(NULL, &wq);
}

static void process_exited(struct nt_super *s, struct nt_process *p, struct sv_wakeq *wq)
{
	CDS_LIST_HEAD(todo);
	struct nt_thread *t;
	struct sv_proc *svp;

	/* This event holds the table's reference; it is dropped at the end. */
	epoll_ctl(s->exits.fd, EPOLL_CTL_DEL, p->src.fd, NULL);
	NT_COUNT_EVENT(s, processes_exited);

	/*
	 * Every thread is gone, so are their parked calls. Threads watched on their own are taken
	 * out of the tables by their own exit event, which is sure to come (and may be on its way
	 * to another worker); the others (the leader) go now. Thread locks nest outside the
	 * process lock: each thread is taken off a private list under the process lock, put back
	 * on the process's (where thread_remove() finds it), then handled without that lock.
	 */
	xlock(&p->lock);
	p->exited = true;
	cds_list_splice(&p->threads, &todo);
	CDS_INIT_LIST_HEAD(&p->threads);
	while (!cds_list_empty(&todo)) {
		t = cds_list_first_entry(&todo, struct nt_thread, proc_node);
		cds_list_del(&t->proc_node);
		cds_list_add_tail(&t->proc_node, &p->threads);
		if (!nt_ref_get_not_zero(&t->refcount))
			continue;
		xunlock(&p->lock);
		SV_DEBUG_YIELD(); /* the thread's own exit event may be handled meanwhile */
		xlock(&t->lock);
		if (t->parked)
			nt_drop_parked(NULL, t, false);
		t->dead = true;
		xunlock(&t->lock);
		if (!atomic_load(&t->watched))
			thread_remove(s, t, false, wq);
		nt_thread_put(t);
		xlock(&p->lock);
	}
	svp = p->svp;
	xunlock(&p->lock);

	/* SEM_UNDO: the whole group has exited, as the kernel's exit_sem() runs then. */
	if (svp)
		sv_proc_exit(svp, wq);

	xlock(&ghost_lock);
	ghosts[ghost_next % GHOSTS] = (struct ghost){ .tgid = p->tgid, .pids = p->pids };
	ghost_next++;
	xunlock(&ghost_lock);

	nt_process_unlist(s, p);
}

void nt_drain_exits(struct nt_worker *wk)
{
	struct nt_super *s = wk->super;
	struct epoll_event ev[16];
	int n;

	xlock(&s->exits_lock);
	do {
		n = epoll_wait(s->exits.fd, ev, 16, 0);
		for (int i = 0; i < n; i++) {
			struct sv_wakeq wq;

			sv_wakeq_init(&wq);
			process_exited(s, caa_container_of(ev[i].data.ptr, struct nt_process, src),
				       &wq);
			nt_deliver(wk, &wq);
		}
	} while (n == 16);
	xunlock(&s->exits_lock);
}

bool nt_exited_pids(int32_t tgid, struct nt_pids *out)
{
	bool found = false;

	xlock(&ghost_lock);
	for (unsigned int i = 0; i < GHOSTS && i < ghost_next; i++) {
		const struct ghost *g = &ghosts[(ghost_next - 1 - i) % GHOSTS];

		if (g->tgid == tgid && g->pids.levels) {
			*out = g->pids;
			found = true;
			break;
		}
	}
	xunlock(&ghost_lock);
	return found;
}
