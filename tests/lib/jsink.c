/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/jsink.h"

static void append(void *ctx, const void *rec, size_t len)
{
	struct js_sink *s = ctx;

	pthread_mutex_lock(&s->lock);
	if (s->len + len + 8 > s->cap) {
		size_t cap = s->cap ? s->cap : 1 << 16;

		while (s->len + len + 8 > cap)
			cap *= 2;
		s->buf = realloc(s->buf, cap);
		if (!s->buf)
			abort();
		memset(s->buf + s->cap, 0, cap - s->cap);
		s->cap = cap;
	}
	/*
	 * Readers take s->lock, so order does not matter here; the body still
	 * goes first and the header last, as a sink in shared memory must.
	 */
	memcpy(s->buf + s->len + 8, (const unsigned char *)rec + 8, len - 8);
	memcpy(s->buf + s->len, rec, 8);
	s->len += len;
	s->nrec++;
	pthread_mutex_unlock(&s->lock);
}

struct js_sink *js_start(void)
{
	struct js_sink *s = calloc(1, sizeof(*s));

	if (!s)
		abort();
	pthread_mutex_init(&s->lock, NULL);
	s->j.append = append;
	s->j.ctx = s;
	sv_journal_attach(&s->j);
	return s;
}

void js_stop(struct js_sink *s)
{
	(void)s;
	sv_journal_attach(NULL);
}

void js_free(struct js_sink *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->buf);
	free(s);
}

static struct sv_ns *t_ns(void *ctx, uint64_t key)
{
	struct js_target *t = ctx;

	for (int i = 0; i < t->nns; i++)
		if (t->nskey[i] == key)
			return t->ns[i];
	return NULL;
}

static struct sv_proc *t_proc(void *ctx, struct sv_ns *ns, uint64_t key, int32_t pid)
{
	struct js_target *t = ctx;

	for (int i = 0; i < t->nprocs; i++)
		if (t->pkey[i] == key)
			return t->procs[i];
	if (t->nprocs == JS_MAX_PROCS)
		return NULL;
	t->procs[t->nprocs] = sv_proc_new(ns, pid);
	if (!t->procs[t->nprocs])
		return NULL;
	sv_proc_set_jkey(t->procs[t->nprocs], key);
	t->pkey[t->nprocs] = key;
	return t->procs[t->nprocs++];
}

static void t_call(void *ctx, uint64_t jid, int64_t result)
{
	struct js_target *t = ctx;

	if (t->calls.n == t->calls.cap) {
		t->calls.cap = t->calls.cap ? 2 * t->calls.cap : 256;
		t->calls.jid = realloc(t->calls.jid, t->calls.cap * sizeof(*t->calls.jid));
		t->calls.result = realloc(t->calls.result, t->calls.cap * sizeof(*t->calls.result));
		if (!t->calls.jid || !t->calls.result)
			abort();
	}
	t->calls.jid[t->calls.n] = jid;
	t->calls.result[t->calls.n++] = result;
}

void js_target_init(struct js_target *t, int nns, const uint64_t *keys)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < nns && i < JS_MAX_NS; i++) {
		t->nskey[i] = keys[i];
		t->ns[i] = sv_ns_new(NULL);
		if (!t->ns[i])
			abort();
		sv_ns_set_jkey(t->ns[i], keys[i]);
		t->nns++;
	}
	t->r = (struct sv_replay){ .ns = t_ns, .proc = t_proc, .call = t_call, .ctx = t };
}

struct sv_proc *js_target_proc(struct js_target *t, uint64_t key)
{
	for (int i = 0; i < t->nprocs; i++)
		if (t->pkey[i] == key)
			return t->procs[i];
	return NULL;
}

void js_target_fini(struct js_target *t)
{
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	for (int i = 0; i < t->nprocs; i++) {
		sv_proc_exit(t->procs[i], &wq);
		sv_proc_put(t->procs[i]);
	}
	while (!sv_wakeq_empty(&wq))
		sv_waiter_free(sv_wakeq_pop(&wq));
	for (int i = 0; i < t->nns; i++)
		sv_ns_put(t->ns[i]);
	free(t->calls.jid);
	free(t->calls.result);
	memset(t, 0, sizeof(*t));
}

long js_replay(const struct js_sink *s, struct js_target *t,
	       void (*each)(struct js_target *t, size_t rec, void *arg), void *arg)
{
	size_t off = 0, rec = 0;

	while (off < s->len) {
		uint32_t len;
		long r;

		memcpy(&len, s->buf + off, 4);
		/* one record at a time: what a crash right after it would leave */
		r = sv_journal_replay(s->buf + off, len, &t->r);
		if (r != (long)len)
			return r < 0 ? r : -1;
		off += len;
		if (each)
			each(t, rec, arg);
		rec++;
	}
	return (long)off;
}

int js_call(const struct js_calls *c, uint64_t jid, int64_t *result)
{
	int found = -1;

	for (size_t i = 0; i < c->n; i++) {
		if (c->jid[i] == jid) {
			*result = c->result[i];
			found = 0;
		}
	}
	return found;
}

struct infos {
	struct sv_set_info *v;
	size_t n, cap;
};

static int collect(const struct sv_set_info *info, void *arg)
{
	struct infos *s = arg;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			abort();
	}
	s->v[s->n++] = *info;
	return 0;
}

static int diff_sems(struct sv_ns *a, struct sv_ns *b, const struct sv_set_info *si, char *why,
		     size_t n)
{
	struct sv_sem_info *sa = calloc((size_t)si->nsems, sizeof(*sa));
	struct sv_sem_info *sb = calloc((size_t)si->nsems, sizeof(*sb));
	struct sv_set_info ia, ib;
	int ret = 0;

	if (!sa || !sb)
		abort();
	if (sv_ns_show_set(a, si->id, &ia, sa, si->nsems) != si->nsems ||
	    sv_ns_show_set(b, si->id, &ib, sb, si->nsems) != si->nsems) {
		snprintf(why, n, "set %d: cannot be shown", si->id);
		ret = 1;
	}
	for (int i = 0; !ret && i < si->nsems; i++) {
		if (sa[i].semval != sb[i].semval || sa[i].sempid != sb[i].sempid ||
		    sa[i].ncnt != sb[i].ncnt || sa[i].zcnt != sb[i].zcnt) {
			snprintf(why, n, "set %d sem %d: val %d/%d pid %d/%d", si->id, i,
				 sa[i].semval, sb[i].semval, sa[i].sempid, sb[i].sempid);
			ret = 1;
		}
	}
	free(sa);
	free(sb);
	return ret;
}

int js_diff(struct sv_ns *a, struct sv_ns *b, char *why, size_t n)
{
	struct infos ia = { 0 }, ib = { 0 };
	struct sv_limits la, lb;
	int ret = 0;

	sv_ns_limits(a, &la);
	sv_ns_limits(b, &lb);
	if (memcmp(&la, &lb, sizeof(la)) || sv_ns_next_id(a) != sv_ns_next_id(b)) {
		snprintf(why, n, "limits or sem_next_id differ");
		return 1;
	}
	sv_ns_for_each_set_ordered(a, collect, &ia);
	sv_ns_for_each_set_ordered(b, collect, &ib);
	if (ia.n != ib.n) {
		snprintf(why, n, "%zu sets / %zu sets", ia.n, ib.n);
		ret = 1;
	}
	for (size_t i = 0; !ret && i < ia.n; i++) {
		const struct sv_set_info *x = &ia.v[i], *y = &ib.v[i];

		if (x->id != y->id || x->key != y->key || x->uid != y->uid || x->gid != y->gid ||
		    x->cuid != y->cuid || x->cgid != y->cgid || x->mode != y->mode ||
		    x->nsems != y->nsems || x->otime != y->otime || x->ctime != y->ctime) {
			snprintf(why, n,
				 "set %d/%d: key %d/%d uid %u/%u mode %o/%o times %ld/%ld %ld/%ld",
				 x->id, y->id, x->key, y->key, x->uid, y->uid, x->mode, y->mode,
				 (long)x->otime, (long)y->otime, (long)x->ctime, (long)y->ctime);
			ret = 1;
		} else {
			ret = diff_sems(a, b, x, why, n);
		}
	}
	free(ia.v);
	free(ib.v);
	return ret;
}
