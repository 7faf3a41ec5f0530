/* SPDX-License-Identifier: MIT */
/*
 * JSON output (--json): each command's output built as a jansson tree and printed compact, one
 * document a line. Strings are checked for UTF-8 first: bytes that are not (names are whatever a
 * container runtime was given) become U+FFFD, since jansson refuses such a string whole.
 * jansson holds integers as int64: an unsigned counter past INT64_MAX (centuries of
 * nanoseconds) would be written as a real rather than wrap to a negative number.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* s as a JSON string, each byte that is not part of valid UTF-8 replaced by U+FFFD; NULL is
   "". NULL when out of memory (json_pack then fails, and json_print says so). */
static json_t *jstr(const char *s)
{
	static const char fffd[] = "\xef\xbf\xbd";
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t len = strlen((const char *)u), n = 0;
	json_t *v;
	char *buf;

	/* nothing to replace: the common case */
	for (size_t i = 0; i < len; i += (size_t)utf8_len(u + i))
		if (!utf8_len(u + i))
			goto replace;
	return json_stringn((const char *)u, len);
replace:
	buf = malloc(len * 3 + 1); /* each byte becomes at most three */
	if (!buf)
		return NULL;
	for (size_t i = 0; i < len;) {
		int k = utf8_len(u + i);

		if (k) {
			memcpy(buf + n, u + i, (size_t)k);
			n += (size_t)k;
			i += (size_t)k;
		} else {
			memcpy(buf + n, fffd, 3);
			n += 3;
			i++;
		}
	}
	v = json_stringn(buf, n);
	free(buf);
	return v;
}

static json_t *ju64(uint64_t v)
{
	return v <= INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

static void oom(void) __attribute__((noreturn));
static void oom(void)
{
	fprintf(stderr, "semvisorctl: out of memory for the JSON output\n");
	exit(EXIT_FAILURE);
}

/* Append v (consumed) to the array a, or exit: an element must not go missing unsaid. */
static void jappend(json_t *a, json_t *v)
{
	if (!v || !a || json_array_append_new(a, v))
		oom();
}

void json_print(FILE *f, json_t *doc)
{
	if (!doc)
		oom();
	json_dumpf(doc, f, JSON_COMPACT);
	fputc('\n', f);
	json_decref(doc);
}

/* ---- shapes ---- */

/* A bucket bound in ns, null for the open-ended last bucket. */
static json_t *jbound(uint64_t ns)
{
	return ns == UINT64_MAX ? json_null() : ju64(ns);
}

static json_t *json_hist(const Semvisor__Histogram *h)
{
	size_t n = h ? (h->n_count < h->n_bound_ns ? h->n_count : h->n_bound_ns) : 0;
	json_t *buckets = json_array();
	bool any = h && h->total;

	for (size_t i = 0; i < n; i++)
		jappend(buckets, json_pack("{s:o, s:o}", "le_ns", jbound(h->bound_ns[i]), "count",
					   ju64(h->count[i])));
	/* quantiles are bucket upper bounds in ns; null when nothing was counted */
	return json_pack(
	    "{s:o, s:o, s:o, s:o}", "count", ju64(h ? h->total : 0), "median_le_ns",
	    any ? jbound(text_hist_quantile(h->count, h->bound_ns, n, 0.5)) : json_null(),
	    "p99_le_ns",
	    any ? jbound(text_hist_quantile(h->count, h->bound_ns, n, 0.99)) : json_null(),
	    "buckets", buckets);
}

static json_t *json_ns_limits(const Semvisor__Limits *l)
{
	if (!l)
		return json_null();
	return json_pack("{s:I, s:I, s:I, s:I}", "semmsl", (json_int_t)l->semmsl, "semmns",
			 (json_int_t)l->semmns, "semopm", (json_int_t)l->semopm, "semmni",
			 (json_int_t)l->semmni);
}

/* The reply to a limits request: the namespace's name, then its limits. */
void json_limits(FILE *f, const Semvisor__Limits *l)
{
	json_print(f, json_pack("{s:o, s:I, s:I, s:I, s:I}", "namespace", jstr(l->ns), "semmsl",
				(json_int_t)l->semmsl, "semmns", (json_int_t)l->semmns, "semopm",
				(json_int_t)l->semopm, "semmni", (json_int_t)l->semmni));
}

static json_t *json_client(const Semvisor__Client *c)
{
	return json_pack("{s:o, s:o, s:b, s:o, s:o, s:o, s:o, s:o}", "name", jstr(c->name),
			 "namespace", jstr(c->ns), "ns_traps", (int)c->ns_traps, "calls",
			 ju64(c->calls), "parked", ju64(c->parked), "pod_namespace",
			 jstr(c->pod_namespace), "pod", jstr(c->pod), "container",
			 jstr(c->container));
}

static json_t *json_lock(const Semvisor__LockStats *l)
{
	if (!l)
		return json_null();
	return json_pack(
	    "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "kind",
	    jstr(l->kind), "acquired", ju64(l->acquired), "fast", ju64(l->fast), "spun",
	    ju64(l->spun), "slept", ju64(l->slept), "sleeps", ju64(l->sleeps), "wakes",
	    ju64(l->wakes), "cancels", ju64(l->unqueues + l->head_quits), "unqueues",
	    ju64(l->unqueues), "head_quits", ju64(l->head_quits), "trylock_failed",
	    ju64(l->trylock_failed), "spin_ns", ju64(l->spin_ns), "threads", ju64(l->threads));
}

static json_t *json_stats_doc(const Semvisor__Stats *s)
{
	static const Semvisor__CallCounts none = SEMVISOR__CALL_COUNTS__INIT;
	const Semvisor__CallCounts *c = s->calls ? s->calls : &none;
	json_t *cmds = json_array(), *errors = json_array(), *nss = json_array(), *doc;

	for (size_t i = 0; i < s->n_semctl_commands; i++)
		jappend(cmds,
			json_pack("{s:I, s:o, s:o}", "cmd", (json_int_t)s->semctl_commands[i]->cmd,
				  "name", jstr(s->semctl_commands[i]->name), "count",
				  ju64(s->semctl_commands[i]->count)));
	for (size_t i = 0; i < s->n_errors; i++)
		jappend(errors,
			json_pack("{s:o, s:o, s:o}", "errno", ju64(s->errors[i]->code), "name",
				  jstr(s->errors[i]->name), "count", ju64(s->errors[i]->count)));
	for (size_t i = 0; i < s->n_namespaces; i++) {
		const Semvisor__Namespace *n = s->namespaces[i];

		jappend(nss,
			json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "name",
				  jstr(n->name), "sets", ju64(n->nsets), "semaphores",
				  ju64(n->nsems), "waiters", ju64(n->nwaiters), "set_lock_spun",
				  ju64(n->set_lock_spun), "set_lock_slept", ju64(n->set_lock_slept),
				  "limits", json_ns_limits(n->limits), "pod_namespace",
				  jstr(n->pod_namespace), "pod", jstr(n->pod)));
	}

	doc = json_pack(
	    "{s:{s:o, s:o, s:o, s:I, s:o},"
	    " s:{s:o, s:o, s:o, s:o, s:o, s:o, s:o},"
	    " s:o, s:o,"
	    " s:{s:o, s:o, s:o, s:o, s:o, s:o, s:o},"
	    " s:o, s:o,"
	    " s:{s:o, s:o, s:o}, s:o, s:o, s:o,"
	    " s:o, s:o}",
	    "server", "pid", ju64(s->server_pid), "uptime_ms", ju64(s->uptime_ms), "since_reset_ms",
	    ju64(s->since_reset_ms), "unix_ms", (json_int_t)s->unix_ms, "mono_ns", ju64(s->mono_ns),
	    "calls", "total",
	    ju64(c->semget + c->semop + c->semtimedop + c->semctl + c->ns_changes + c->other),
	    "semget", ju64(c->semget), "semop", ju64(c->semop), "semtimedop", ju64(c->semtimedop),
	    "semctl", ju64(c->semctl), "ns_changes", ju64(c->ns_changes), "other", ju64(c->other),
	    "semctl_commands", cmds, "errors", errors, "waits", "parked", ju64(s->parked), "woken",
	    ju64(s->woken), "timeouts", ju64(s->timeouts), "interrupted", ju64(s->interrupted),
	    "rolled_back", ju64(s->rolled_back), "kept", ju64(s->kept), "stale", ju64(s->stale),
	    "service_time", json_hist(s->service), "wait_time", json_hist(s->wait), "listeners",
	    "now", ju64(s->listeners), "added", ju64(s->listeners_added), "gone",
	    ju64(s->listeners_gone), "processes_exited", ju64(s->processes_exited),
	    "namespaces_ended", ju64(s->namespaces_ended), "budget_refused",
	    ju64(s->budget_refused), "lock", json_lock(s->lock), "namespaces", nss);
	if (doc &&
	    json_object_set_new(
		doc, "budget_refused_kind",
		json_pack("{s:o, s:o, s:o, s:o, s:o}", "semaphores", ju64(s->budget_refused_sems),
			  "sets", ju64(s->budget_refused_sets), "undos",
			  ju64(s->budget_refused_undos), "waiters", ju64(s->budget_refused_waiters),
			  "namespaces", ju64(s->budget_refused_namespaces))))
		oom();
	if (doc && json_object_set_new(doc, "bulk_calls", ju64(s->bulk_calls)))
		oom();
	if (doc && json_object_set_new(doc, "fast_ops", ju64(s->fast_ops)))
		oom();
	if (doc && json_object_set_new(doc, "busy_probes", ju64(s->busy_probes)))
		oom();
	if (doc && s->n_clients) {
		json_t *clients = json_array();

		for (size_t i = 0; i < s->n_clients; i++)
			jappend(clients, json_client(s->clients[i]));
		if (json_object_set_new(doc, "clients", clients))
			oom();
	}
	return doc;
}

void json_stats(FILE *f, const Semvisor__Stats *s)
{
	json_print(f, json_stats_doc(s));
}

static json_t *json_set_info(const Semvisor__SetInfo *si)
{
	char hex[16], perms[8], owner[64], group[64];

	snprintf(hex, sizeof(hex), "0x%08x", (uint32_t)si->key);
	snprintf(perms, sizeof(perms), "%03o", si->mode & 0777);
	return json_pack("{s:o, s:I, s:I, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:I, "
			 "s:I, s:o, s:o, s:o, s:o}",
			 "namespace", jstr(si->ns), "id", (json_int_t)si->id, "key",
			 (json_int_t)si->key, "key_hex", hex, "uid", ju64(si->uid), "owner",
			 jstr(text_user_name(si->uid, owner, sizeof(owner))), "gid", ju64(si->gid),
			 "group", jstr(text_group_name(si->gid, group, sizeof(group))), "cuid",
			 ju64(si->cuid), "cgid", ju64(si->cgid), "mode", ju64(si->mode), "perms",
			 perms, "nsems", ju64(si->nsems), "otime", (json_int_t)si->otime, "ctime",
			 (json_int_t)si->ctime, "lock_spun",
			 si->withheld ? json_null() : ju64(si->lock_spun), "lock_slept",
			 si->withheld ? json_null() : ju64(si->lock_slept), "pod_namespace",
			 jstr(si->pod_namespace), "pod", jstr(si->pod));
}

void json_sets(FILE *f, const Semvisor__SetList *l)
{
	json_t *sets = json_array();

	for (size_t i = 0; i < l->n_sets; i++)
		jappend(sets, json_set_info(l->sets[i]));
	json_print(f, json_pack("{s:o}", "sets", sets));
}

void json_set(FILE *f, const Semvisor__SetDetail *d)
{
	json_t *sems = json_array(), *set;

	for (size_t i = 0; i < d->n_sems; i++) {
		const Semvisor__Semaphore *m = d->sems[i];

		jappend(sems,
			json_pack("{s:o, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "num",
				  ju64(m->num), "value", (json_int_t)m->value, "pid",
				  (json_int_t)m->pid, "ncnt", ju64(m->ncnt), "zcnt", ju64(m->zcnt),
				  "ops", ju64(m->nops), "waits", ju64(m->nwaits), "lock_spun",
				  ju64(m->lock_spun), "lock_slept", ju64(m->lock_slept)));
	}
	set = d->set ? json_set_info(d->set) : json_null();
	if (d->set && json_object_set_new(set, "fast_ops", ju64(d->set->fast_ops)))
		oom();
	json_print(f, json_pack("{s:o, s:o}", "set", set, "semaphores", sems));
}

void json_clients(FILE *f, Semvisor__Client *const *c, size_t n)
{
	json_t *clients = json_array();

	for (size_t i = 0; i < n; i++)
		jappend(clients, json_client(c[i]));
	json_print(f, json_pack("{s:o}", "clients", clients));
}
