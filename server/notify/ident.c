/* SPDX-License-Identifier: MIT */
/*
 * Who is calling: thread and process records.
 *
 * Reading /proc/TID/status costs ~12 us on this kind of machine, longer than serving the call,
 * so credentials and namespaces are cached per thread. A stale credential is a security bug, so
 * the cache is dropped whenever they can change:
 *  - set*id, setgroups, capset, unshare, setns: the filter traps them (filter.h) and serve.c
 *    invalidates the calling thread before letting the call run;
 *  - execve: every thread of the process is invalidated; after an exec by a non-leader thread
 *    (which takes over the leader's tid) the process's credentials are never cached again;
 *  - thread exit, and so tid reuse: a PIDFD_THREAD pidfd per thread reports the exit and the
 *    record goes (a new thread with the same tid then gets a new record). The residue: a thread
 *    that exits and whose tid a new thread receives before a worker has handled the exit event
 *    (the pid space must wrap in between) would be served with the old record for that call.
 *  - listeners whose filter does not trap credential changes (an OCI runtime's filter) are
 *    served with credentials re-read on every call.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "notify/notify_int.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

#define CAP_SYS_ADMIN_BIT 21
#define CAP_IPC_OWNER_BIT 15
#define GHOSTS		  4096

/*
 * Exited processes' pid numbers, for GETPID of semaphores they changed last: the kernel keeps a
 * reference on the struct pid and still reports the number. A ring of the latest exits.
 */
static struct ghost {
	int32_t tgid;
	int levels;
	int32_t nspid[TGT_MAX_LEVELS];
	uint64_t pidns[TGT_MAX_LEVELS];
} ghosts[GHOSTS];
static unsigned int ghost_next;
static pthread_mutex_t ghost_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned long hash_id(int32_t id)
{
	uint64_t h = (uint32_t)id * 0x9e3779b97f4a7c15ull;

	return (unsigned long)(h ^ (h >> 31));
}

static int match_thread(struct cds_lfht_node *node, const void *key)
{
	return caa_container_of(node, struct nt_thread, node)->tid == *(const int32_t *)key;
}

static int match_proc(struct cds_lfht_node *node, const void *key)
{
	return caa_container_of(node, struct nt_process, node)->tgid == *(const int32_t *)key;
}

static bool ref_get_not_zero(atomic_int *ref)
{
	int v = atomic_load_explicit(ref, memory_order_relaxed);

	while (v > 0)
		if (atomic_compare_exchange_weak(ref, &v, v + 1))
			return true;
	return false;
}

/* ---- processes ---- */

static void process_free_rcu(struct rcu_head *head)
{
	struct nt_process *p = caa_container_of(head, struct nt_process, rcu);

	pthread_mutex_destroy(&p->lock);
	if (p->mem_fd >= 0)
		close(p->mem_fd);
	free(p);
}

void nt_process_put(struct nt_process *p)
{
	if (atomic_fetch_sub_explicit(&p->refcount, 1, memory_order_acq_rel) != 1)
		return;
	if (p->svp) {
		/* exit already ran (or the process was never seen to exit: apply now) */
		sv_proc_put(p->svp);
	}
	if (p->src.fd >= 0)
		close(p->src.fd);
	call_rcu(&p->rcu, process_free_rcu);
}

/* The pid namespaces of a thread group, from its own down to ours, for GETPID translation. */
static void process_pid_chain(struct nt_process *p)
{
	struct tgt_status st;
	char path[64];
	int fd;

	if (tgt_read_status(p->tgid, &st) || st.nspid_levels < 1)
		return;
	p->levels = st.nspid_levels;
	memcpy(p->nspid, st.nspid, sizeof(p->nspid));
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)p->tgid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	for (int level = p->levels - 1; level >= 0 && fd >= 0; level--) {
		struct stat sb;
		int up;

		if (fstat(fd, &sb) == 0)
			p->pidns[level] = (uint64_t)sb.st_ino;
		up = level > 0 ? ioctl(fd, NS_GET_PARENT) : -1;
		close(fd);
		fd = up;
	}
	if (fd >= 0)
		close(fd);
}

static struct nt_process *process_find(struct nt_super *s, int32_t tgid)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;
	struct nt_process *p = NULL;

	rcu_read_lock();
	cds_lfht_lookup(s->procs, hash_id(tgid), match_proc, &tgid, &iter);
	node = cds_lfht_iter_get_node(&iter);
	if (node) {
		p = caa_container_of(node, struct nt_process, node);
		if (!ref_get_not_zero(&p->refcount))
			p = NULL;
	}
	rcu_read_unlock();
	return p;
}

static struct nt_process *process_get(struct nt_super *s, int32_t tgid, int *err)
{
	struct nt_process *p = process_find(s, tgid), *other;
	struct cds_lfht_node *node;

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p) {
		*err = -ENOMEM;
		return NULL;
	}
	p->super = s;
	p->tgid = tgid;
	p->refcount = 2; /* the table's and the caller's */
	p->mem_fd = NT_MEM_UNOPENED;
	CDS_INIT_LIST_HEAD(&p->threads);
	cds_lfht_node_init(&p->node);
	if (pthread_mutex_init(&p->lock, NULL))
		abort();
	/* A leader pidfd turns readable only once the whole thread group has exited. */
	p->src = (struct nt_src){ SRC_PROCESS, (int)syscall(SYS_pidfd_open, tgid, 0) };
	if (p->src.fd < 0) {
		*err = errno == EINVAL ? -ESRCH : -errno;
		pthread_mutex_destroy(&p->lock);
		free(p);
		return NULL;
	}
	process_pid_chain(p);

	xlock(&s->tables_lock);
	rcu_read_lock();
	node = cds_lfht_add_unique(s->procs, hash_id(tgid), match_proc, &tgid, &p->node);
	rcu_read_unlock();
	if (node != &p->node) {
		/* another worker was quicker */
		other = caa_container_of(node, struct nt_process, node);
		if (!ref_get_not_zero(&other->refcount))
			other = NULL;
		xunlock(&s->tables_lock);
		close(p->src.fd);
		pthread_mutex_destroy(&p->lock);
		free(p);
		if (!other)
			*err = -ESRCH;
		return other;
	}
	xunlock(&s->tables_lock);
	nt_watch_exit(s, &p->src);
	return p;
}

struct sv_proc *nt_process_svp(struct nt_thread *thr, struct sv_wakeq *wq)
{
	struct nt_process *p = thr->proc;
	struct sv_proc *svp, *old = NULL;

	xlock(&p->lock);
	if (!p->svp || p->svp_ns != thr->ns) {
		/*
		 * The process moved to another IPC namespace (unshare, setns): as in the kernel,
		 * its undo list is applied and it starts a new one.
		 */
		old = p->svp;
		p->svp = sv_proc_new(thr->ns->ns, p->tgid);
		p->svp_ns = thr->ns;
	}
	svp = p->svp;
	if (svp)
		sv_proc_get(svp);
	xunlock(&p->lock);
	if (old) {
		sv_proc_exit(old, wq);
		sv_proc_put(old);
	}
	return svp;
}

void nt_process_invalidate_all(struct nt_process *p, bool volatile_creds)
{
	struct nt_thread *t;

	/* The new image gets a new address space: /proc/TGID/mem would read the old one. */
	atomic_store(&p->mem_retired, true);
	xlock(&p->lock);
	if (volatile_creds)
		p->volatile_creds = true;
	cds_list_for_each_entry(t, &p->threads, proc_node)
		atomic_store_explicit(&t->valid, false, memory_order_relaxed);
	xunlock(&p->lock);
}

int nt_process_mem_fd(struct nt_process *p)
{
	int fd = atomic_load_explicit(&p->mem_fd, memory_order_acquire);

	if (atomic_load_explicit(&p->mem_retired, memory_order_acquire))
		return -1;
	if (fd == NT_MEM_UNOPENED) {
		int mine = tgt_mem_open(p->tgid);

		if (mine >= p->super->mem_fd_limit) {
			close(mine);
			mine = NT_MEM_NONE;
		} else if (mine < 0) {
			mine = NT_MEM_NONE;
		}
		/* Two readers may race to open it: one file wins, the other is closed unseen. */
		if (!atomic_compare_exchange_strong(&p->mem_fd, &fd, mine)) {
			if (mine >= 0)
				close(mine);
		} else {
			fd = mine;
		}
	}
	return fd >= 0 ? fd : -1;
}

/* ---- threads ---- */

static void thread_free_rcu(struct rcu_head *head)
{
	struct nt_thread *t = caa_container_of(head, struct nt_thread, rcu);

	pthread_mutex_destroy(&t->lock);
	free(t);
}

void nt_thread_put(struct nt_thread *thr)
{
	if (atomic_fetch_sub_explicit(&thr->refcount, 1, memory_order_acq_rel) != 1)
		return;
	if (thr->src.fd >= 0)
		close(thr->src.fd);
	nt_process_put(thr->proc);
	call_rcu(&thr->rcu, thread_free_rcu);
}

struct nt_thread *nt_thread_find(struct nt_super *s, int32_t tid)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;
	struct nt_thread *t = NULL;

	rcu_read_lock();
	cds_lfht_lookup(s->threads, hash_id(tid), match_thread, &tid, &iter);
	node = cds_lfht_iter_get_node(&iter);
	if (node) {
		t = caa_container_of(node, struct nt_thread, node);
		if (!ref_get_not_zero(&t->refcount))
			t = NULL;
	}
	rcu_read_unlock();
	return t;
}

void nt_thread_invalidate(struct nt_thread *thr)
{
	atomic_store_explicit(&thr->valid, false, memory_order_relaxed);
}

static bool covers_ipc(pid_t tid, const struct tgt_ns *ns)
{
	/* A capability counts in the user namespace owning the IPC namespace, or above it. */
	return ns->user == ns->ipc_owner || tgt_userns_covers(tid, ns->user);
}

int nt_thread_refresh(struct nt_super *s, struct nt_thread *thr)
{
	struct tgt_status st;
	struct tgt_ns ns;
	int err;

	if ((err = tgt_read_status(thr->tid, &st)) || (err = tgt_read_ns(thr->tid, &ns)))
		return err;
	thr->cred.euid = st.uid[1];
	thr->cred.egid = st.gid[1];
	thr->cred.fsgid = st.gid[3];
	thr->cred.ngroups = st.ngroups;
	memcpy(thr->groups, st.groups, (size_t)st.ngroups * sizeof(st.groups[0]));
	thr->cred.groups = thr->groups;
	if (st.cap_eff & ((1ull << CAP_IPC_OWNER_BIT) | (1ull << CAP_SYS_ADMIN_BIT))) {
		bool covers = covers_ipc(thr->tid, &ns);

		thr->cred.cap_ipc_owner = covers && (st.cap_eff >> CAP_IPC_OWNER_BIT & 1);
		thr->cred.cap_sys_admin = covers && (st.cap_eff >> CAP_SYS_ADMIN_BIT & 1);
	} else {
		thr->cred.cap_ipc_owner = thr->cred.cap_sys_admin = false;
	}
	thr->pid_level = st.nspid_levels > 0 ? st.nspid_levels - 1 : 0;
	thr->pidns = ns.pid;
	thr->userns = ns.user == s->my_userns ? NULL : nt_userns_get(s, ns.user, thr->tid);
	if (!thr->ns || thr->ns->ipc_inode != ns.ipc) {
		/* a listener's fixed namespace is set at creation and never changes */
		thr->ns = nt_ns_for_inode(s, ns.ipc, thr->tid);
		if (!thr->ns)
			return -ENOMEM;
	}
	atomic_store_explicit(&thr->valid, true, memory_order_relaxed);
	return 0;
}

struct nt_thread *nt_thread_get(struct nt_super *s, int32_t tid, int *err)
{
	struct nt_thread *t = nt_thread_find(s, tid), *other;
	struct nt_process *p;
	struct tgt_status st;
	struct cds_lfht_node *node;

	if (t)
		return t;
	if ((*err = tgt_read_status(tid, &st)))
		return NULL;
	p = process_get(s, st.tgid, err);
	if (!p)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t) {
		nt_process_put(p);
		*err = -ENOMEM;
		return NULL;
	}
	t->tid = tid;
	t->proc = p;	 /* takes process_get()'s reference */
	t->refcount = 2; /* the table's and the caller's */
	t->src = (struct nt_src){ SRC_THREAD, -1 };
	cds_lfht_node_init(&t->node);
	if (pthread_mutex_init(&t->lock, NULL))
		abort();
	/* Non-leaders report their own exit; the leader's record goes with the process. */
	if (tid != st.tgid)
		t->src.fd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);

	xlock(&s->tables_lock);
	rcu_read_lock();
	node = cds_lfht_add_unique(s->threads, hash_id(tid), match_thread, &tid, &t->node);
	rcu_read_unlock();
	if (node != &t->node) {
		other = caa_container_of(node, struct nt_thread, node);
		if (!ref_get_not_zero(&other->refcount))
			other = NULL;
		xunlock(&s->tables_lock);
		if (t->src.fd >= 0)
			close(t->src.fd);
		pthread_mutex_destroy(&t->lock);
		free(t);
		nt_process_put(p);
		if (!other)
			*err = -ESRCH;
		return other;
	}
	xlock(&p->lock);
	cds_list_add_tail(&t->proc_node, &p->threads);
	xunlock(&p->lock);
	xunlock(&s->tables_lock);
	if (t->src.fd >= 0)
		nt_watch(s, &t->src);
	return t;
}

/* Take thr out of the tables. Its parked call, if any, is dropped. */
static void thread_remove(struct nt_super *s, struct nt_thread *thr)
{
	xlock(&thr->lock);
	thr->dead = true;
	atomic_store_explicit(&thr->valid, false, memory_order_relaxed);
	if (thr->parked)
		nt_drop_parked(NULL, thr, false);
	xunlock(&thr->lock);

	xlock(&s->tables_lock);
	rcu_read_lock();
	if (cds_lfht_del(s->threads, &thr->node) == 0) {
		rcu_read_unlock();
		xlock(&thr->proc->lock);
		cds_list_del(&thr->proc_node);
		xunlock(&thr->proc->lock);
		xunlock(&s->tables_lock);
		nt_thread_put(thr); /* the table's */
		return;
	}
	rcu_read_unlock();
	xunlock(&s->tables_lock);
}

/*
 * Only this event removes a thread that has a pidfd, so the table's reference is still there for
 * it to use and drop.
 */
void nt_thread_exited(struct nt_super *s, struct nt_thread *thr)
{
	nt_unwatch(s, &thr->src);
	thread_remove(s, thr);
}

void nt_process_exited(struct nt_super *s, struct nt_worker *wk, struct nt_process *p)
{
	struct sv_wakeq wq;
	struct nt_thread *t;
	struct sv_proc *svp;

	/* This event holds the table's reference; it is dropped at the end. */
	epoll_ctl(s->exits.fd, EPOLL_CTL_DEL, p->src.fd, NULL);
	NT_COUNT_EVENT(s, processes_exited);

	/*
	 * Every thread is gone, so are their parked calls. Threads with their own pidfd are taken
	 * out of the tables by their own exit event, which is sure to come (and may already be
	 * on its way to another worker); the others (the leader) go now. Thread locks are taken
	 * outside the process lock (notify_int.h's order): snapshot the list first.
	 */
	struct nt_thread **snap = NULL;
	int n = 0, cap = 0;

	xlock(&p->lock);
	p->exited = true;
	cds_list_for_each_entry(t, &p->threads, proc_node) {
		if (n == cap) {
			struct nt_thread **bigger;

			cap = cap ? cap * 2 : 16;
			bigger = realloc(snap, (size_t)cap * sizeof(*snap));
			if (!bigger)
				abort();
			snap = bigger;
		}
		if (ref_get_not_zero(&t->refcount))
			snap[n++] = t;
	}
	xunlock(&p->lock);
	for (int i = 0; i < n; i++) {
		t = snap[i];
		xlock(&t->lock);
		if (t->parked)
			nt_drop_parked(wk, t, false);
		t->dead = true;
		xunlock(&t->lock);
		if (t->src.fd < 0)
			thread_remove(s, t);
		nt_thread_put(t);
	}
	free(snap);

	/* SEM_UNDO: the whole group has exited, as the kernel's exit_sem() runs then. */
	xlock(&p->lock);
	svp = p->svp;
	xunlock(&p->lock);
	if (svp) {
		sv_wakeq_init(&wq);
		sv_proc_exit(svp, &wq);
		nt_deliver(wk, &wq);
	}

	xlock(&ghost_lock);
	ghosts[ghost_next % GHOSTS] = (struct ghost){ .tgid = p->tgid, .levels = p->levels };
	memcpy(ghosts[ghost_next % GHOSTS].nspid, p->nspid, sizeof(p->nspid));
	memcpy(ghosts[ghost_next % GHOSTS].pidns, p->pidns, sizeof(p->pidns));
	ghost_next++;
	xunlock(&ghost_lock);

	xlock(&s->tables_lock);
	rcu_read_lock();
	bool removed = cds_lfht_del(s->procs, &p->node) == 0;
	rcu_read_unlock();
	xunlock(&s->tables_lock);
	if (removed)
		nt_process_put(p); /* the table's */
}

/* ---- GETPID across pid namespaces ---- */

static int32_t translate(int levels, const int32_t *nspid, const uint64_t *pidns,
			 const struct nt_thread *thr)
{
	int lc = thr->pid_level;

	if (lc > levels - 1 || pidns[lc] != thr->pidns)
		return 0; /* not visible from the caller's pid namespace */
	return nspid[lc];
}

int32_t nt_pid_for(struct nt_super *s, const struct nt_thread *thr, int32_t pid)
{
	struct nt_process *p;
	int32_t out = thr->pid_level == 0 ? pid : 0;

	if (thr->pid_level == 0 && thr->pidns == s->my_pidns)
		return pid; /* the caller sees pids as we do */
	p = process_find(s, pid);
	if (p) {
		if (p->levels)
			out = translate(p->levels, p->nspid, p->pidns, thr);
		nt_process_put(p);
		return out;
	}
	xlock(&ghost_lock);
	for (unsigned int i = 0; i < GHOSTS && i < ghost_next; i++) {
		const struct ghost *g = &ghosts[(ghost_next - 1 - i) % GHOSTS];

		if (g->tgid == pid && g->levels) {
			out = translate(g->levels, g->nspid, g->pidns, thr);
			break;
		}
	}
	xunlock(&ghost_lock);
	return out;
}
