/* SPDX-License-Identifier: MIT */
/*
 * What the control plane asks the supervisor and orders it to do (notify.h): listing clients
 * and namespaces, statistics, removing sets, changing limits.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lock/xpthread.h"
#include "notify/listener.h"
#include "notify/parked.h"
#include "notify/receiver.h"
#include "notify/stats.h"
#include "notify/super.h"

struct ns_walk {
	int (*fn)(const char *name, const struct nt_pod *pod, struct sv_ns *ns, void *arg);
	void *arg;
};

static int ns_visit(struct nt_ns *n, void *arg)
{
	struct ns_walk *w = arg;

	return w->fn(n->name, &n->pod, n->ns, w->arg);
}

int nt_super_for_each_ns(struct nt_super *s,
			 int (*fn)(const char *name, const struct nt_pod *pod, struct sv_ns *ns,
				   void *arg),
			 void *arg)
{
	struct ns_walk w = { fn, arg };

	return nsreg_for_each(&s->reg, ns_visit, &w);
}

int nt_super_for_each_client(struct nt_super *s, int (*fn)(const struct nt_client_info *, void *),
			     void *arg)
{
	struct nt_listener *l;
	int ret = 0;

	xlock(&s->lock);
	cds_list_for_each_entry(l, &s->listeners, node) {
		struct nt_client_info info = {
			.ns_traps = l->ns_traps,
			.calls = atomic_load_explicit(&l->calls, memory_order_relaxed),
			.parked = atomic_load_explicit(&l->parked, memory_order_relaxed),
		};
		uint64_t ino = atomic_load_explicit(&l->ipc_ino, memory_order_relaxed);

		snprintf(info.name, sizeof(info.name), "%s", l->name);
		info.pod = l->pod;
		if (l->fixed_ns)
			snprintf(info.ns, sizeof(info.ns), "%s", l->fixed_ns->name);
		else if (ino)
			snprintf(info.ns, sizeof(info.ns), "ipc:[%llu]", (unsigned long long)ino);
		ret = fn(&info, arg);
		if (ret)
			break;
	}
	xunlock(&s->lock);
	return ret;
}

/* Every counter is a uint64_t, read by other threads while its owner adds to it. */
static void stats_zero(struct nt_stats *st)
{
	uint64_t *c = (uint64_t *)st;

	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		__atomic_store_n(&c[i], 0, __ATOMIC_RELAXED);
}

static int ns_reset_stats(struct nt_ns *n, void *arg)
{
	(void)arg;
	sv_ns_reset_stats(n->ns);
	return 0;
}

static int ns_collect_fast(struct nt_ns *n, void *arg)
{
	(void)arg;
	sv_ns_collect_fast(n->ns);
	return 0;
}

void nt_super_collect_fast(struct nt_super *s)
{
	nsreg_for_each(&s->reg, ns_collect_fast, NULL);
}

void nt_super_reset_stats(struct nt_super *s)
{
	struct nt_worker *wk;

	for (int i = 0; i < s->nworkers; i++)
		stats_zero(&s->workers[i].stats);
	if (s->rcv)
		stats_zero(&s->rcv->wk.stats);
	if (s->bulk)
		stats_zero(&s->bulk->stats);
	xlock(&s->lock);
	cds_list_for_each_entry(wk, &s->guests, guest_node)
		stats_zero(&wk->stats);
	xunlock(&s->lock);
	stats_zero(&s->events);
	nsreg_for_each(&s->reg, ns_reset_stats, NULL);
	s->counting_ns = nt_now_ns();
}

int64_t nt_super_counting_since(struct nt_super *s)
{
	return s->counting_ns;
}

struct sv_ns *nt_super_find_ns(struct nt_super *s, const char *name)
{
	struct nt_ns *n = nsreg_find(&s->reg, name);
	struct sv_ns *ns = NULL;

	if (n) {
		ns = n->ns;
		sv_ns_get(ns);
		nt_ns_put(n);
	}
	return ns;
}

int nt_super_remove_set(struct nt_super *s, const char *ns, int id)
{
	struct sv_ns *sns = nt_super_find_ns(s, ns);
	struct sv_wakeq wq;
	int ret;

	if (!sns)
		return -ENOENT;
	sv_wakeq_init(&wq);
	ret = sv_ns_remove_set(sns, id, &wq);
	sv_ns_put(sns);
	/* the waiters get EIDRM, delivered as any completion is */
	nt_deliver(NULL, &wq);
	return ret;
}

int nt_super_set_limits(struct nt_super *s, const char *ns, const struct sv_limits *lim)
{
	struct nt_ns *n;
	int ret = 0;

	if (lim->semmni < 0 || lim->semmni > SV_IPCMNI)
		return -ERANGE;
	if (!ns) {
		nsreg_set_limits(&s->reg, lim);
		return 0;
	}
	n = nsreg_find(&s->reg, ns);
	if (!n)
		return -ENOENT;
	ret = sv_ns_set_limits(n->ns, lim);
	nt_ns_put(n);
	return ret;
}

void nt_super_stats(struct nt_super *s, struct nt_stats *out)
{
	struct nt_worker *wk;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < s->nworkers; i++)
		nt_stats_add(out, &s->workers[i].stats);
	if (s->rcv)
		nt_stats_add(out, &s->rcv->wk.stats);
	if (s->bulk)
		nt_stats_add(out, &s->bulk->stats);
	xlock(&s->lock);
	cds_list_for_each_entry(wk, &s->guests, guest_node)
		nt_stats_add(out, &wk->stats);
	xunlock(&s->lock);
	nt_stats_add(out, &s->events);
	out->fast_ops += sv_fast_ops_total();
	out->namespaces_ended += atomic_load_explicit(&s->reg.ended, memory_order_relaxed);
	if (s->reg.budget) {
		struct sv_budget_info bi;

		sv_budget_info(s->reg.budget, &bi);
		out->budget_refused = bi.refused;
		memcpy(out->budget_refused_kind, bi.refused_kind, sizeof(bi.refused_kind));
	}
}
