/* SPDX-License-Identifier: MIT */
/*
 * Thread and process records (records.h): the two tables, lookups and references.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock/xpthread.h"
#include "notify/nsreg.h"
#include "notify/records.h"
#include "notify/super.h"
#include "util/fault.h"

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

static void process_free_rcu(struct rcu_head *head)
{
	struct nt_process *p = caa_container_of(head, struct nt_process, rcu);

	xmutex_destroy(&p->lock);
	free(p);
}

void nt_process_put(struct nt_process *p)
{
	if (atomic_fetch_sub_explicit(&p->refcount, 1, memory_order_acq_rel) != 1)
		return;
	if (p->svp)
		sv_proc_put(p->svp); /* its exit ran (or it was never seen to exit) */
	if (p->svp_ns)
		nt_ns_put(p->svp_ns);
	if (p->src.fd >= 0)
		close(p->src.fd);
	call_rcu(&p->rcu, process_free_rcu);
}

/*
 * The pid namespaces of a thread group, from its own down to ours, for GETPID: its numbers
 * from /proc/TGID/status (by number), the namespaces through its pidfd. Proven below.
 */
static void process_pid_chain(struct nt_super *s, struct nt_process *p)
{
	struct tgt_status st;
	int fd;

	if (tgt_read_status(p->tgid, &st))
		return;
	fd = tgt_ns_open(p->src.fd, p->tgid, TGT_NS_PID, s->feat.pidfd_ns);
	if (fd < 0)
		return;
	if (tgt_pidns_chain(fd, s->feat.ns_id, st.nspid_levels, p->pids.pidns) == 0) {
		p->pids.levels = st.nspid_levels;
		memcpy(p->pids.nspid, st.nspid, sizeof(p->pids.nspid));
	}
	close(fd);
}

struct nt_process *nt_process_find(struct nt_super *s, int32_t tgid)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;
	struct nt_process *p = NULL;

	rcu_read_lock();
	cds_lfht_lookup(s->procs, hash_id(tgid), match_proc, &tgid, &iter);
	node = cds_lfht_iter_get_node(&iter);
	if (node) {
		p = caa_container_of(node, struct nt_process, node);
		if (!nt_ref_get_not_zero(&p->refcount))
			p = NULL;
	}
	rcu_read_unlock();
	return p;
}

struct nt_process *nt_process_get(struct nt_super *s, int32_t tgid, int *err)
{
	struct nt_process *p = nt_process_find(s, tgid), *other;
	struct cds_lfht_node *node;

	if (p) {
		/*
		 * A record whose process has been reaped, its exit event not handled yet: the
		 * number now names another process. The caller handles the exit, then asks again.
		 */
		if (tgt_alive(p->src.fd) == 0)
			return p;
		nt_process_put(p);
		*err = -ESTALE;
		return NULL;
	}
	p = sv_fault(SV_FAULT_ALLOC) ? NULL : calloc(1, sizeof(*p));
	if (!p) {
		*err = -ENOMEM;
		return NULL;
	}
	p->super = s;
	p->tgid = tgid;
	p->refcount = 2; /* the table's and the caller's */
	CDS_INIT_LIST_HEAD(&p->threads);
	cds_lfht_node_init(&p->node);
	xmutex_init(&p->lock);
	/* A thread-group pidfd turns readable only once the whole group has exited. */
	p->src = (struct nt_src){ SRC_PROCESS, tgt_pidfd_open(tgid, false) };
	if (p->src.fd >= 0) {
		struct stat st;

		p->ino = fstat(p->src.fd, &st) ? 0 : (uint64_t)st.st_ino;
	}
	if (p->src.fd < 0) {
		*err = p->src.fd;
		xmutex_destroy(&p->lock);
		free(p);
		return NULL;
	}
	process_pid_chain(s, p);
	/* What was read by number is this process's only if its pidfd still names it. */
	if (tgt_alive(p->src.fd)) {
		*err = -ESRCH;
		close(p->src.fd);
		xmutex_destroy(&p->lock);
		free(p);
		return NULL;
	}

	xlock(&s->tables_lock);
	rcu_read_lock();
	node = cds_lfht_add_unique(s->procs, hash_id(tgid), match_proc, &tgid, &p->node);
	rcu_read_unlock();
	if (node != &p->node) {
		/* another worker was quicker */
		other = caa_container_of(node, struct nt_process, node);
		if (!nt_ref_get_not_zero(&other->refcount))
			other = NULL;
		xunlock(&s->tables_lock);
		close(p->src.fd);
		xmutex_destroy(&p->lock);
		free(p);
		if (!other)
			*err = -ESRCH;
		return other;
	}
	xunlock(&s->tables_lock);
	/* Watched only once listed: an exit event always finds its record in the table. */
	*err = nt_watch_exit(s, &p->src);
	if (*err) {
		nt_process_unlist(s, p);
		nt_process_put(p);
		return NULL;
	}
	return p;
}

static void thread_free_rcu(struct rcu_head *head)
{
	struct nt_thread *t = caa_container_of(head, struct nt_thread, rcu);

	xmutex_destroy(&t->lock);
	free(t);
}

void nt_thread_put(struct nt_thread *thr)
{
	if (atomic_fetch_sub_explicit(&thr->refcount, 1, memory_order_acq_rel) != 1)
		return;
	if (thr->src.fd >= 0)
		close(thr->src.fd);
	if (thr->ns)
		nt_ns_put(thr->ns);
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
		if (!nt_ref_get_not_zero(&t->refcount))
			t = NULL;
	}
	rcu_read_unlock();
	return t;
}

void nt_process_unlist(struct nt_super *s, struct nt_process *p)
{
	bool removed;

	xlock(&s->tables_lock);
	rcu_read_lock();
	removed = cds_lfht_del(s->procs, &p->node) == 0;
	rcu_read_unlock();
	xunlock(&s->tables_lock);
	if (removed)
		nt_process_put(p); /* the table's */
}

struct nt_thread *nt_thread_add(struct nt_super *s, struct nt_thread *t, int *err)
{
	struct nt_process *p = t->proc;
	struct cds_lfht_node *node;
	struct nt_thread *other;

	xlock(&s->tables_lock);
	rcu_read_lock();
	node = cds_lfht_add_unique(s->threads, hash_id(t->tid), match_thread, &t->tid, &t->node);
	rcu_read_unlock();
	if (node != &t->node) {
		other = caa_container_of(node, struct nt_thread, node);
		if (!nt_ref_get_not_zero(&other->refcount))
			other = NULL;
		xunlock(&s->tables_lock);
		t->src.fd = -1; /* the caller's */
		nt_thread_put(t);
		nt_thread_put(t);
		if (!other)
			*err = -ESRCH;
		return other;
	}
	xlock(&p->lock);
	cds_list_add_tail(&t->proc_node, &p->threads);
	xunlock(&p->lock);
	xunlock(&s->tables_lock);
	return t;
}
