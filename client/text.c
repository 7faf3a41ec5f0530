/* SPDX-License-Identifier: MIT */
/*
 * semvisorctl's output for people: stats, ipcs, show, clients. Names that come from the server
 * (namespaces, client names: container ids chosen by whoever started the container) are printed
 * through text_safe(), so nobody can put terminal escape sequences on an administrator's screen.
 */
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

const char *text_safe(const char *s, char *buf, size_t len)
{
	size_t i = 0;

	if (!len)
		return "";
	for (; s && *s && i + 1 < len; s++)
		buf[i++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
	buf[i] = '\0';
	return buf;
}

const char *text_ns_name(const char *name, const char *pod_ns, const char *pod, char *buf,
			 size_t len)
{
	char full[512];

	if (!pod || !*pod)
		return text_safe(name, buf, len);
	snprintf(full, sizeof(full), "%s%s%s", pod_ns ? pod_ns : "", pod_ns && *pod_ns ? "/" : "",
		 pod);
	return text_safe(full, buf, len);
}

const char *text_fmt_ns(uint64_t ns, char *buf, size_t len)
{
	if (ns == UINT64_MAX)
		snprintf(buf, len, "inf");
	else if (ns < 1000)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
	return buf;
}

static const char *fmt_dur_ms(uint64_t ms, char *buf, size_t len)
{
	uint64_t s = ms / 1000;

	if (s < 60)
		snprintf(buf, len, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s / 60 % 60));
	else
		snprintf(buf, len, "%llud%02lluh", (unsigned long long)(s / 86400),
			 (unsigned long long)(s / 3600 % 24));
	return buf;
}

uint64_t text_hist_quantile(const uint64_t *count, const uint64_t *bound, size_t n, double q)
{
	uint64_t total = 0, acc = 0, want;

	for (size_t i = 0; i < n; i++)
		total += count[i];
	if (!total)
		return 0;
	want = (uint64_t)((double)total * q);
	if (want < 1)
		want = 1;
	if (want > total)
		want = total;
	for (size_t i = 0; i < n; i++) {
		acc += count[i];
		if (acc >= want)
			return bound[i];
	}
	return n ? bound[n - 1] : 0;
}

const char *text_user_name(uint32_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	char tmp[64];

	if (pw)
		snprintf(buf, len, "%s", text_safe(pw->pw_name, tmp, sizeof(tmp)));
	else
		snprintf(buf, len, "%u", uid);
	return buf;
}

const char *text_group_name(uint32_t gid, char *buf, size_t len)
{
	struct group *gr = getgrgid(gid);
	char tmp[64];

	if (gr)
		snprintf(buf, len, "%s", text_safe(gr->gr_name, tmp, sizeof(tmp)));
	else
		snprintf(buf, len, "%u", gid);
	return buf;
}

const char *text_fmt_time(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t == 0 || !localtime_r(&tt, &tm))
		snprintf(buf, len, "never");
	else
		strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	return buf;
}

static void hist_line(FILE *f, const char *what, const Semvisor__Histogram *h)
{
	char a[32], b[32], c[32], d[32];
	size_t n;

	if (!h || !h->total) {
		fprintf(f, "%-13s none\n", what);
		return;
	}
	n = h->n_count < h->n_bound_ns ? h->n_count : h->n_bound_ns;
	/* the log2 buckets give upper bounds, hence "<=" */
	fprintf(f, "%-13s %llu: median <= %s, p90 <= %s, p99 <= %s, max <= %s\n", what,
		(unsigned long long)h->total,
		text_fmt_ns(text_hist_quantile(h->count, h->bound_ns, n, 0.5), a, sizeof(a)),
		text_fmt_ns(text_hist_quantile(h->count, h->bound_ns, n, 0.9), b, sizeof(b)),
		text_fmt_ns(text_hist_quantile(h->count, h->bound_ns, n, 0.99), c, sizeof(c)),
		text_fmt_ns(text_hist_quantile(h->count, h->bound_ns, n, 1.0), d, sizeof(d)));
}

static uint64_t calls_total(const Semvisor__CallCounts *c)
{
	return c ? c->semget + c->semop + c->semtimedop + c->semctl + c->ns_changes + c->other : 0;
}

void text_stats(FILE *f, const Semvisor__Stats *s)
{
	static const Semvisor__CallCounts none = SEMVISOR__CALL_COUNTS__INIT;
	const Semvisor__CallCounts *c = s->calls ? s->calls : &none;
	const Semvisor__LockStats *l = s->lock;
	char a[32], b[32], name[128];

	fprintf(f, "server pid %u, up %s, counting for %s\n", s->server_pid,
		fmt_dur_ms(s->uptime_ms, a, sizeof(a)),
		fmt_dur_ms(s->since_reset_ms, b, sizeof(b)));
	fprintf(f,
		"%-13s %llu: semget %llu, semop %llu, semtimedop %llu, semctl %llu, "
		"namespace changes %llu, other %llu\n",
		"calls", (unsigned long long)calls_total(c), (unsigned long long)c->semget,
		(unsigned long long)c->semop, (unsigned long long)c->semtimedop,
		(unsigned long long)c->semctl, (unsigned long long)c->ns_changes,
		(unsigned long long)c->other);
	fprintf(f, "%-13s", "semctl");
	for (size_t i = 0; i < s->n_semctl_commands; i++)
		fprintf(f, "%s %s %llu", i ? "," : "",
			text_safe(s->semctl_commands[i]->name, name, sizeof(name)),
			(unsigned long long)s->semctl_commands[i]->count);
	fprintf(f, "%s\n", s->n_semctl_commands ? "" : " none");
	fprintf(f, "%-13s", "errors");
	for (size_t i = 0; i < s->n_errors; i++)
		fprintf(f, "%s %s %llu", i ? "," : "",
			text_safe(s->errors[i]->name, name, sizeof(name)),
			(unsigned long long)s->errors[i]->count);
	fprintf(f, "%s\n", s->n_errors ? "" : " none");
	fprintf(
	    f,
	    "%-13s %llu parked: woken %llu, timed out %llu, interrupted %llu; rolled back %llu, "
	    "kept %llu, callers gone %llu\n",
	    "waits", (unsigned long long)s->parked, (unsigned long long)s->woken,
	    (unsigned long long)s->timeouts, (unsigned long long)s->interrupted,
	    (unsigned long long)s->rolled_back, (unsigned long long)s->kept,
	    (unsigned long long)s->stale);
	hist_line(f, "service time", s->service);
	hist_line(f, "wait time", s->wait);
	fprintf(f,
		"%-13s %u now (%llu added, %llu gone); %llu processes exited; %llu namespaces "
		"ended\n",
		"clients", s->listeners, (unsigned long long)s->listeners_added,
		(unsigned long long)s->listeners_gone, (unsigned long long)s->processes_exited,
		(unsigned long long)s->namespaces_ended);
	fprintf(f,
		"%-13s %llu refused: %llu semaphores, %llu sets (semget ENOSPC); %llu undo "
		"entries, %llu waiters (semop ENOMEM); %llu namespaces\n",
		"budget", (unsigned long long)s->budget_refused,
		(unsigned long long)s->budget_refused_sems,
		(unsigned long long)s->budget_refused_sets,
		(unsigned long long)s->budget_refused_undos,
		(unsigned long long)s->budget_refused_waiters,
		(unsigned long long)s->budget_refused_namespaces);
	fprintf(f, "%-13s %llu calls of heavy clients, served apart\n", "bulk lane",
		(unsigned long long)s->bulk_calls);
	if (s->fast_ops)
		fprintf(f, "%-13s %llu semops done in the programs themselves\n", "fast path",
			(unsigned long long)s->fast_ops);
	if (s->busy_probes)
		fprintf(f,
			"%-13s %llu busy probes (semtimedop calls of waits that tried before "
			"parking)\n",
			"fast path", (unsigned long long)s->busy_probes);
	if (l && !strcmp(l->kind, "amutex"))
		fprintf(f,
			"%-13s %s: %llu acquired (%llu free, %llu spun, %llu slept); %llu sleeps, "
			"%llu wakes, %llu cancels (%llu unqueued, %llu heads quit), spin %s\n",
			"locks", l->kind, (unsigned long long)l->acquired,
			(unsigned long long)l->fast, (unsigned long long)l->spun,
			(unsigned long long)l->slept, (unsigned long long)l->sleeps,
			(unsigned long long)l->wakes,
			(unsigned long long)(l->unqueues + l->head_quits),
			(unsigned long long)l->unqueues, (unsigned long long)l->head_quits,
			text_fmt_ns(l->spin_ns, a, sizeof(a)));
	else if (l)
		/* only the adaptive mutex keeps global counters; sets and semaphores count anyway */
		fprintf(
		    f,
		    "%-13s %s: contention is counted per set and semaphore (show, ipcs --json)\n",
		    "locks", text_safe(l->kind, name, sizeof(name)));
	if (!s->n_namespaces)
		return;
	fprintf(f, "\n%-24s %6s %8s %8s  %-30s %-19s %s\n", "NAMESPACE", "SETS", "SEMS", "WAITERS",
		"LIMITS MSL,MNS,OPM,MNI", "SET-LOCK SPUN/SLEPT", "POD");
	for (size_t i = 0; i < s->n_namespaces; i++) {
		const Semvisor__Namespace *n = s->namespaces[i];
		char lim[64] = "-", locks[48], pod[512];

		if (n->limits)
			snprintf(lim, sizeof(lim), "%d,%d,%d,%d", n->limits->semmsl,
				 n->limits->semmns, n->limits->semopm, n->limits->semmni);
		snprintf(locks, sizeof(locks), "%llu/%llu", (unsigned long long)n->set_lock_spun,
			 (unsigned long long)n->set_lock_slept);
		fprintf(f, "%-24s %6u %8u %8u  %-30s %-19s %s\n",
			text_safe(n->name, name, sizeof(name)), n->nsets, n->nsems, n->nwaiters,
			lim, locks,
			*n->pod ? text_ns_name(n->name, n->pod_namespace, n->pod, pod, sizeof(pod))
				: "-");
	}
}

static int ns_width(const Semvisor__SetList *l)
{
	int w = 9; /* "NAMESPACE" */
	char name[512];

	for (size_t i = 0; i < l->n_sets; i++) {
		const Semvisor__SetInfo *s = l->sets[i];
		int n =
		    (int)strlen(text_ns_name(s->ns, s->pod_namespace, s->pod, name, sizeof(name)));

		if (n > w)
			w = n;
	}
	return w > 40 ? 40 : w;
}

void text_sets(FILE *f, const Semvisor__SetList *l)
{
	int w = ns_width(l);
	char name[128], owner[64], ot[32], ct[32];

	fprintf(f, "%-*s  %-10s  %-10s  %-10s  %-5s  %-5s  %-19s  %s\n", w, "NAMESPACE", "KEY",
		"SEMID", "OWNER", "PERMS", "NSEMS", "LAST-SEMOP", "LAST-CHANGE");
	for (size_t i = 0; i < l->n_sets; i++) {
		const Semvisor__SetInfo *s = l->sets[i];

		fprintf(f, "%-*s  0x%08x  %-10d  %-10s  %-5o  %-5u  %-19s  %s\n", w,
			text_ns_name(s->ns, s->pod_namespace, s->pod, name, sizeof(name)),
			(uint32_t)s->key, s->id, text_user_name(s->uid, owner, sizeof(owner)),
			s->mode & 0777, s->nsems, text_fmt_time(s->otime, ot, sizeof(ot)),
			text_fmt_time(s->ctime, ct, sizeof(ct)));
	}
}

void text_set(FILE *f, const Semvisor__SetDetail *d)
{
	const Semvisor__SetInfo *s = d->set;
	char name[128], u[64], g[64], cu[64], cg[64], t[32];

	if (!s)
		return;
	fprintf(f, "set %d in namespace %s", s->id, text_safe(s->ns, name, sizeof(name)));
	if (*s->pod)
		fprintf(f, " (pod %s)",
			text_ns_name(s->ns, s->pod_namespace, s->pod, name, sizeof(name)));
	fputc('\n', f);
	fprintf(f, "  key 0x%08x, %u semaphores, perms %03o\n", (uint32_t)s->key, s->nsems,
		s->mode & 0777);
	fprintf(f, "  owner %s:%s (uid %u, gid %u), creator %s:%s (uid %u, gid %u)\n",
		text_user_name(s->uid, u, sizeof(u)), text_group_name(s->gid, g, sizeof(g)), s->uid,
		s->gid, text_user_name(s->cuid, cu, sizeof(cu)),
		text_group_name(s->cgid, cg, sizeof(cg)), s->cuid, s->cgid);
	fprintf(f, "  last semop %s, ", text_fmt_time(s->otime, t, sizeof(t)));
	fprintf(f, "last change %s\n", text_fmt_time(s->ctime, t, sizeof(t)));
	fprintf(f, "  whole-set lock: spun %llu, slept %llu\n", (unsigned long long)s->lock_spun,
		(unsigned long long)s->lock_slept);
	if (s->fast_ops)
		fprintf(f, "  fast path: %llu semops done in the programs themselves\n",
			(unsigned long long)s->fast_ops);
	fputc('\n', f);
	fprintf(f, "%6s %6s %6s %6s %8s %12s %10s %10s %10s\n", "SEMNUM", "VALUE", "NCNT", "ZCNT",
		"PID", "OPS", "WAITS", "LOCK-SPUN", "LOCK-SLEPT");
	for (size_t i = 0; i < d->n_sems; i++) {
		const Semvisor__Semaphore *m = d->sems[i];

		fprintf(f, "%6u %6d %6u %6u %8d %12llu %10llu %10llu %10llu\n", m->num, m->value,
			m->ncnt, m->zcnt, m->pid, (unsigned long long)m->nops,
			(unsigned long long)m->nwaits, (unsigned long long)m->lock_spun,
			(unsigned long long)m->lock_slept);
	}
}

void text_clients(FILE *f, Semvisor__Client *const *c, size_t n)
{
	char name[512], ns[128]; /* a Kubernetes name is up to 381 bytes (handoff/msg.h) */

	fprintf(f, "%-32s %-24s %12s %7s %s\n", "CLIENT", "NAMESPACE", "CALLS", "PARKED",
		"NS-TRAPS");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%-32s %-24s %12llu %7u %s\n", text_safe(c[i]->name, name, sizeof(name)),
			*c[i]->ns ? text_safe(c[i]->ns, ns, sizeof(ns)) : "(per IPC namespace)",
			(unsigned long long)c[i]->calls, c[i]->parked,
			c[i]->ns_traps ? "yes" : "no");
}
