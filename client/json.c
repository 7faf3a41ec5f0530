/* SPDX-License-Identifier: MIT */
/*
 * JSON output (--json): a small streaming writer and the shapes of each command's output. The
 * writer always produces valid JSON: strings are escaped, and bytes that are not UTF-8 (names
 * are whatever a container runtime was given) become U+FFFD.
 */
#include <string.h>

#include "ctl.h"

void jw_init(struct jw *w, FILE *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
}

int utf8_len(const unsigned char *s)
{
	int n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

static void put_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");

	fputc('"', f);
	while (*s) {
		int n;

		switch (*s) {
		case '"':
			fputs("\\\"", f);
			s++;
			continue;
		case '\\':
			fputs("\\\\", f);
			s++;
			continue;
		case '\n':
			fputs("\\n", f);
			s++;
			continue;
		case '\r':
			fputs("\\r", f);
			s++;
			continue;
		case '\t':
			fputs("\\t", f);
			s++;
			continue;
		}
		if (*s < 0x20 || *s == 0x7f) {
			fprintf(f, "\\u%04x", *s);
			s++;
			continue;
		}
		n = utf8_len(s);
		if (!n) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		fwrite(s, 1, (size_t)n, f);
		s += n;
	}
	fputc('"', f);
}

static void sep(struct jw *w, const char *key)
{
	if (w->need_comma[w->depth])
		fputc(',', w->f);
	w->need_comma[w->depth] = true;
	if (key) {
		put_string(w->f, key);
		fputc(':', w->f);
	}
}

void jw_begin(struct jw *w, const char *key)
{
	sep(w, key);
	fputc('{', w->f);
	if (w->depth < 31)
		w->depth++;
	w->need_comma[w->depth] = false;
}

void jw_end(struct jw *w)
{
	fputc('}', w->f);
	if (w->depth > 0)
		w->depth--;
}

void jw_abegin(struct jw *w, const char *key)
{
	sep(w, key);
	fputc('[', w->f);
	if (w->depth < 31)
		w->depth++;
	w->need_comma[w->depth] = false;
}

void jw_aend(struct jw *w)
{
	fputc(']', w->f);
	if (w->depth > 0)
		w->depth--;
}

void jw_str(struct jw *w, const char *key, const char *v)
{
	sep(w, key);
	put_string(w->f, v);
}

void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	sep(w, key);
	fprintf(w->f, "%llu", (unsigned long long)v);
}

void jw_i64(struct jw *w, const char *key, int64_t v)
{
	sep(w, key);
	fprintf(w->f, "%lld", (long long)v);
}

void jw_bool(struct jw *w, const char *key, bool v)
{
	sep(w, key);
	fputs(v ? "true" : "false", w->f);
}

void jw_null(struct jw *w, const char *key)
{
	sep(w, key);
	fputs("null", w->f);
}

void jw_finish(struct jw *w)
{
	fputc('\n', w->f);
}

/* ---- shapes ---- */

/* A bucket bound in ns, null for the open-ended last bucket. */
static void jw_bound(struct jw *w, const char *key, uint64_t ns)
{
	if (ns == UINT64_MAX)
		jw_null(w, key);
	else
		jw_u64(w, key, ns);
}

static void json_hist(struct jw *w, const char *key, const Semvisor__Histogram *h)
{
	size_t n = h ? (h->n_count < h->n_bound_ns ? h->n_count : h->n_bound_ns) : 0;

	jw_begin(w, key);
	jw_u64(w, "count", h ? h->total : 0);
	/* quantiles are bucket upper bounds in ns; null when nothing was counted */
	if (h && h->total) {
		jw_bound(w, "median_le_ns", hist_quantile(h->count, h->bound_ns, n, 0.5));
		jw_bound(w, "p99_le_ns", hist_quantile(h->count, h->bound_ns, n, 0.99));
	} else {
		jw_null(w, "median_le_ns");
		jw_null(w, "p99_le_ns");
	}
	jw_abegin(w, "buckets");
	for (size_t i = 0; i < n; i++) {
		jw_begin(w, NULL);
		jw_bound(w, "le_ns", h->bound_ns[i]);
		jw_u64(w, "count", h->count[i]);
		jw_end(w);
	}
	jw_aend(w);
	jw_end(w);
}

static void json_limits(struct jw *w, const char *key, const Semvisor__Limits *l)
{
	if (!l) {
		jw_null(w, key);
		return;
	}
	jw_begin(w, key);
	jw_i64(w, "semmsl", l->semmsl);
	jw_i64(w, "semmns", l->semmns);
	jw_i64(w, "semopm", l->semopm);
	jw_i64(w, "semmni", l->semmni);
	jw_end(w);
}

static void json_client(struct jw *w, const Semvisor__Client *c)
{
	jw_begin(w, NULL);
	jw_str(w, "name", c->name);
	jw_str(w, "namespace", c->ns);
	jw_bool(w, "ns_traps", c->ns_traps);
	jw_u64(w, "calls", c->calls);
	jw_u64(w, "parked", c->parked);
	jw_end(w);
}

static void json_stats_body(struct jw *w, const Semvisor__Stats *s)
{
	static const Semvisor__CallCounts none = SEMVISOR__CALL_COUNTS__INIT;
	const Semvisor__CallCounts *c = s->calls ? s->calls : &none;
	const Semvisor__LockStats *l = s->lock;

	jw_begin(w, "server");
	jw_u64(w, "pid", s->server_pid);
	jw_u64(w, "uptime_ms", s->uptime_ms);
	jw_u64(w, "since_reset_ms", s->since_reset_ms);
	jw_i64(w, "unix_ms", s->unix_ms);
	jw_u64(w, "mono_ns", s->mono_ns);
	jw_end(w);

	jw_begin(w, "calls");
	jw_u64(w, "total",
	       c->semget + c->semop + c->semtimedop + c->semctl + c->ns_changes + c->other);
	jw_u64(w, "semget", c->semget);
	jw_u64(w, "semop", c->semop);
	jw_u64(w, "semtimedop", c->semtimedop);
	jw_u64(w, "semctl", c->semctl);
	jw_u64(w, "ns_changes", c->ns_changes);
	jw_u64(w, "other", c->other);
	jw_end(w);

	jw_abegin(w, "semctl_commands");
	for (size_t i = 0; i < s->n_semctl_commands; i++) {
		jw_begin(w, NULL);
		jw_i64(w, "cmd", s->semctl_commands[i]->cmd);
		jw_str(w, "name", s->semctl_commands[i]->name);
		jw_u64(w, "count", s->semctl_commands[i]->count);
		jw_end(w);
	}
	jw_aend(w);

	jw_abegin(w, "errors");
	for (size_t i = 0; i < s->n_errors; i++) {
		jw_begin(w, NULL);
		jw_u64(w, "errno", s->errors[i]->code);
		jw_str(w, "name", s->errors[i]->name);
		jw_u64(w, "count", s->errors[i]->count);
		jw_end(w);
	}
	jw_aend(w);

	jw_begin(w, "waits");
	jw_u64(w, "parked", s->parked);
	jw_u64(w, "woken", s->woken);
	jw_u64(w, "timeouts", s->timeouts);
	jw_u64(w, "interrupted", s->interrupted);
	jw_u64(w, "rolled_back", s->rolled_back);
	jw_u64(w, "kept", s->kept);
	jw_u64(w, "stale", s->stale);
	jw_end(w);

	json_hist(w, "service_time", s->service);
	json_hist(w, "wait_time", s->wait);

	jw_begin(w, "listeners");
	jw_u64(w, "now", s->listeners);
	jw_u64(w, "added", s->listeners_added);
	jw_u64(w, "gone", s->listeners_gone);
	jw_end(w);
	jw_u64(w, "processes_exited", s->processes_exited);
	jw_u64(w, "namespaces_ended", s->namespaces_ended);

	if (l) {
		jw_begin(w, "lock");
		jw_str(w, "kind", l->kind);
		jw_u64(w, "acquired", l->acquired);
		jw_u64(w, "fast", l->fast);
		jw_u64(w, "spun", l->spun);
		jw_u64(w, "slept", l->slept);
		jw_u64(w, "sleeps", l->sleeps);
		jw_u64(w, "wakes", l->wakes);
		jw_u64(w, "cancels", l->unqueues + l->head_quits);
		jw_u64(w, "unqueues", l->unqueues);
		jw_u64(w, "head_quits", l->head_quits);
		jw_u64(w, "trylock_failed", l->trylock_failed);
		jw_u64(w, "spin_ns", l->spin_ns);
		jw_u64(w, "threads", l->threads);
		jw_end(w);
	} else {
		jw_null(w, "lock");
	}

	jw_abegin(w, "namespaces");
	for (size_t i = 0; i < s->n_namespaces; i++) {
		const Semvisor__Namespace *n = s->namespaces[i];

		jw_begin(w, NULL);
		jw_str(w, "name", n->name);
		jw_u64(w, "sets", n->nsets);
		jw_u64(w, "semaphores", n->nsems);
		jw_u64(w, "waiters", n->nwaiters);
		jw_u64(w, "set_lock_spun", n->set_lock_spun);
		jw_u64(w, "set_lock_slept", n->set_lock_slept);
		json_limits(w, "limits", n->limits);
		jw_end(w);
	}
	jw_aend(w);

	if (s->n_clients) {
		jw_abegin(w, "clients");
		for (size_t i = 0; i < s->n_clients; i++)
			json_client(w, s->clients[i]);
		jw_aend(w);
	}
}

void json_stats(FILE *f, const Semvisor__Stats *s)
{
	struct jw w;

	jw_init(&w, f);
	jw_begin(&w, NULL);
	json_stats_body(&w, s);
	jw_end(&w);
	jw_finish(&w);
}

void json_set_info(struct jw *w, const char *key, const Semvisor__SetInfo *si)
{
	char buf[64], perms[8];

	jw_begin(w, key);
	jw_str(w, "namespace", si->ns);
	jw_i64(w, "id", si->id);
	jw_i64(w, "key", si->key);
	snprintf(buf, sizeof(buf), "0x%08x", (uint32_t)si->key);
	jw_str(w, "key_hex", buf);
	jw_u64(w, "uid", si->uid);
	jw_str(w, "owner", user_name(si->uid, buf, sizeof(buf)));
	jw_u64(w, "gid", si->gid);
	jw_str(w, "group", group_name(si->gid, buf, sizeof(buf)));
	jw_u64(w, "cuid", si->cuid);
	jw_u64(w, "cgid", si->cgid);
	jw_u64(w, "mode", si->mode);
	snprintf(perms, sizeof(perms), "%03o", si->mode & 0777);
	jw_str(w, "perms", perms);
	jw_u64(w, "nsems", si->nsems);
	jw_i64(w, "otime", si->otime);
	jw_i64(w, "ctime", si->ctime);
	jw_u64(w, "lock_spun", si->lock_spun);
	jw_u64(w, "lock_slept", si->lock_slept);
	jw_end(w);
}

void json_sets(FILE *f, const Semvisor__SetList *l)
{
	struct jw w;

	jw_init(&w, f);
	jw_begin(&w, NULL);
	jw_abegin(&w, "sets");
	for (size_t i = 0; i < l->n_sets; i++)
		json_set_info(&w, NULL, l->sets[i]);
	jw_aend(&w);
	jw_end(&w);
	jw_finish(&w);
}

void json_set(FILE *f, const Semvisor__SetDetail *d)
{
	struct jw w;

	jw_init(&w, f);
	jw_begin(&w, NULL);
	if (d->set)
		json_set_info(&w, "set", d->set);
	else
		jw_null(&w, "set");
	jw_abegin(&w, "semaphores");
	for (size_t i = 0; i < d->n_sems; i++) {
		const Semvisor__Semaphore *m = d->sems[i];

		jw_begin(&w, NULL);
		jw_u64(&w, "num", m->num);
		jw_i64(&w, "value", m->value);
		jw_i64(&w, "pid", m->pid);
		jw_u64(&w, "ncnt", m->ncnt);
		jw_u64(&w, "zcnt", m->zcnt);
		jw_u64(&w, "ops", m->nops);
		jw_u64(&w, "waits", m->nwaits);
		jw_u64(&w, "lock_spun", m->lock_spun);
		jw_u64(&w, "lock_slept", m->lock_slept);
		jw_end(&w);
	}
	jw_aend(&w);
	jw_end(&w);
	jw_finish(&w);
}

void json_clients(FILE *f, Semvisor__Client *const *c, size_t n)
{
	struct jw w;

	jw_init(&w, f);
	jw_begin(&w, NULL);
	jw_abegin(&w, "clients");
	for (size_t i = 0; i < n; i++)
		json_client(&w, c[i]);
	jw_aend(&w);
	jw_end(&w);
	jw_finish(&w);
}
