/* SPDX-License-Identifier: MIT */
/*
 * One Stats snapshot in the Prometheus text exposition format (0.0.4), for `semvisorctl
 * metrics` (a node_exporter textfile collector) and semvisord's HTTP endpoint. Every family has # HELP and
 * # TYPE; counters end in _total; durations are in seconds; the supervisor's log2 histograms
 * become cumulative _bucket{le} series with _sum and _count.
 *
 * The supervisor adds the durations up, so _sum is exact; from a server that does not
 * (Histogram.sum_ns 0) it is estimated from the buckets, each value taken at its bucket's
 * middle and the open-ended last one at its lower bound. Quantiles from the buckets are as
 * good as the buckets: log2, from 1 ns to 2^39 ns (9 minutes).
 *
 * Labels follow Kubernetes' conventions, so that a scrape's own target labels do not clash:
 * an IPC namespace is ipc_namespace="ipc:[INODE]" (or the name semvisord was given), and
 * namespace, pod and container are Kubernetes' names, present where the container's runtime
 * gave them (the CRI annotations).
 */
#include <stdlib.h>
#include <string.h>

#include "control/ctl_frame.h"
#include "control/ctl_metrics.h"
#include "util/utf8.h"

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: UTF-8, with backslash, double quote and newline escaped. */
static void label_value(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	while (*p) {
		int n;

		if (*p == '\\' || *p == '"') {
			fputc('\\', f);
			fputc(*p++, f);
			continue;
		}
		if (*p == '\n') {
			fputs("\\n", f);
			p++;
			continue;
		}
		n = utf8_len(p);
		if (!n || *p < 0x20 || *p == 0x7f) {
			fputc('?', f);
			p++;
			continue;
		}
		fwrite(p, 1, (size_t)n, f);
		p += n;
	}
	fputc('"', f);
}

/* ,KEY="VALUE" for a Kubernetes name that is there. */
static void opt_label(FILE *f, const char *key, const char *value)
{
	if (!value || !*value)
		return;
	fprintf(f, ",%s=", key);
	label_value(f, value);
}

/* {ipc_namespace="...",namespace="...",pod="..." and extra (",limit=\"semmsl\"")} */
static void ns_labels(FILE *f, const Semvisor__Namespace *n, const char *extra)
{
	fputs("{ipc_namespace=", f);
	label_value(f, n->name);
	opt_label(f, "namespace", n->pod_namespace);
	opt_label(f, "pod", n->pod);
	fprintf(f, "%s}", extra ? extra : "");
}

static void client_labels(FILE *f, const Semvisor__Client *c)
{
	fputs("{client=", f);
	label_value(f, c->name);
	fputs(",ipc_namespace=", f);
	label_value(f, c->ns);
	opt_label(f, "namespace", c->pod_namespace);
	opt_label(f, "pod", c->pod);
	opt_label(f, "container", c->container);
	fputc('}', f);
}

static void sample1(FILE *f, const char *name, const char *label, const char *value, uint64_t v)
{
	fputs(name, f);
	if (label) {
		fprintf(f, "{%s=", label);
		label_value(f, value);
		fputc('}', f);
	}
	fprintf(f, " %llu\n", (unsigned long long)v);
}

static void counter(FILE *f, const char *name, const char *help, uint64_t v)
{
	family(f, name, "counter", help);
	sample1(f, name, NULL, NULL, v);
}

static void histogram(FILE *f, const char *name, const char *help, const Semvisor__Histogram *h)
{
	size_t n = h ? (h->n_count < h->n_bound_ns ? h->n_count : h->n_bound_ns) : 0;
	uint64_t acc = 0;
	double sum = 0;

	family(f, name, "histogram", help);
	for (size_t i = 0; i < n; i++) {
		uint64_t lo = i ? h->bound_ns[i - 1] + 1 : 0;

		acc += h->count[i];
		if (h->bound_ns[i] == UINT64_MAX) {
			sum += (double)h->count[i] * (double)lo;
			continue; /* the +Inf bucket below */
		}
		sum += (double)h->count[i] * ((double)lo + (double)h->bound_ns[i]) / 2;
		fprintf(f, "%s_bucket{le=\"%.10g\"} %llu\n", name, (double)h->bound_ns[i] / 1e9,
			(unsigned long long)acc);
	}
	fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)acc);
	/* exact from servers that add durations up; else estimated from the buckets' middles */
	if (h && h->sum_ns)
		sum = (double)h->sum_ns;
	fprintf(f, "%s_sum %.9g\n", name, sum / 1e9);
	fprintf(f, "%s_count %llu\n", name, (unsigned long long)acc);
}

static int by_name_ns(const void *x, const void *y)
{
	const Semvisor__Client *a = *(Semvisor__Client *const *)x;
	const Semvisor__Client *b = *(Semvisor__Client *const *)y;
	int c = strcmp(a->name, b->name);

	return c ? c : strcmp(a->ns, b->ns);
}

/* Clients by (name, namespace); two listeners may share a name, a series may not. */
static void clients(FILE *f, const Semvisor__Stats *s)
{
	Semvisor__Client **v;
	size_t n = s->n_clients;

	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return;
	if (n) { /* a server with no client sends no array: s->clients is NULL */
		memcpy(v, s->clients, n * sizeof(*v));
		qsort(v, n, sizeof(*v), by_name_ns);
	}
	family(f, "semvisor_client_calls_total", "counter",
	       "Calls received from each client (confined program tree or container).");
	for (size_t i = 0; i < n;) {
		uint64_t calls = 0;
		size_t j = i;

		for (; j < n && !by_name_ns(&v[i], &v[j]); j++)
			calls += v[j]->calls;
		fputs("semvisor_client_calls_total", f);
		client_labels(f, v[i]);
		fprintf(f, " %llu\n", (unsigned long long)calls);
		i = j;
	}
	family(f, "semvisor_client_parked", "gauge", "Calls of each client waiting now.");
	for (size_t i = 0; i < n;) {
		uint64_t parked = 0;
		size_t j = i;

		for (; j < n && !by_name_ns(&v[i], &v[j]); j++)
			parked += v[j]->parked;
		fputs("semvisor_client_parked", f);
		client_labels(f, v[i]);
		fprintf(f, " %llu\n", (unsigned long long)parked);
		i = j;
	}
	free(v);
}

enum ns_field {
	NS_SETS,
	NS_SEMS,
	NS_WAITERS,
	NS_SPUN,
	NS_SLEPT
};

static uint64_t ns_value(const Semvisor__Namespace *n, enum ns_field which)
{
	switch (which) {
	case NS_SETS:
		return n->nsets;
	case NS_SEMS:
		return n->nsems;
	case NS_WAITERS:
		return n->nwaiters;
	case NS_SPUN:
		return n->set_lock_spun;
	case NS_SLEPT:
		return n->set_lock_slept;
	}
	return 0;
}

static void ns_family(FILE *f, const Semvisor__Stats *s, const char *name, const char *type,
		      const char *help, enum ns_field which)
{
	family(f, name, type, help);
	for (size_t i = 0; i < s->n_namespaces; i++) {
		fputs(name, f);
		ns_labels(f, s->namespaces[i], NULL);
		fprintf(f, " %llu\n", (unsigned long long)ns_value(s->namespaces[i], which));
	}
}

void ctl_metrics_print(FILE *f, const Semvisor__Stats *s)
{
	static const Semvisor__CallCounts none = SEMVISOR__CALL_COUNTS__INIT;
	const Semvisor__CallCounts *c = s->calls ? s->calls : &none;
	const Semvisor__LockStats *l = s->lock;
	static const char *const limit_names[] = { "semmsl", "semmns", "semopm", "semmni" };

	family(f, "semvisor_info", "gauge",
	       "Always 1; the labels name the engine's lock and the control protocol version.");
	fputs("semvisor_info{lock=", f);
	label_value(f, l ? l->kind : "");
	fprintf(f, ",protocol=\"%d\"} 1\n", CTL_PROTO_VERSION);
	family(f, "semvisor_build_info", "gauge", "Always 1; the label is the server's release.");
	fputs("semvisor_build_info{version=", f);
	label_value(f, s->server_version && *s->server_version ? s->server_version : "unknown");
	fputs("} 1\n", f);
	/* a start time, not an uptime: it changes only at a restart, as Prometheus expects */
	family(f, "semvisor_start_time_seconds", "gauge",
	       "When the server started, in seconds since the epoch.");
	fprintf(f, "semvisor_start_time_seconds %.3f\n",
		(double)(s->unix_ms - (int64_t)s->uptime_ms) / 1e3);

	family(f, "semvisor_calls_total", "counter", "System calls served, by system call.");
	sample1(f, "semvisor_calls_total", "syscall", "semget", c->semget);
	sample1(f, "semvisor_calls_total", "syscall", "semop", c->semop);
	sample1(f, "semvisor_calls_total", "syscall", "semtimedop", c->semtimedop);
	sample1(f, "semvisor_calls_total", "syscall", "semctl", c->semctl);
	sample1(f, "semvisor_calls_total", "syscall", "ns_change", c->ns_changes);
	sample1(f, "semvisor_calls_total", "syscall", "other", c->other);

	family(f, "semvisor_semctl_commands_total", "counter", "semctl calls, by command.");
	for (size_t i = 0; i < s->n_semctl_commands; i++)
		sample1(f, "semvisor_semctl_commands_total", "command", s->semctl_commands[i]->name,
			s->semctl_commands[i]->count);

	family(f, "semvisor_errors_total", "counter", "Calls answered with an error, by errno.");
	for (size_t i = 0; i < s->n_errors; i++)
		sample1(f, "semvisor_errors_total", "errno", s->errors[i]->name,
			s->errors[i]->count);

	counter(f, "semvisor_waits_total", "Operations that had to wait (parked).", s->parked);
	counter(f, "semvisor_wakeups_total", "Waiting operations completed by another call.",
		s->woken);
	counter(f, "semvisor_timeouts_total", "semtimedop waits that timed out.", s->timeouts);
	counter(f, "semvisor_interrupted_total",
		"Waits ended by a signal or by the waiter's death.", s->interrupted);
	counter(f, "semvisor_rolled_back_total",
		"Completions undone because the answer could not be delivered.", s->rolled_back);
	counter(f, "semvisor_kept_total",
		"Completions that could not be delivered nor undone, and were kept.", s->kept);
	counter(f, "semvisor_stale_total", "Notifications whose caller was gone before the answer.",
		s->stale);

	histogram(f, "semvisor_service_seconds",
		  "Notification received to answered, for calls that did not wait.", s->service);
	histogram(f, "semvisor_wait_seconds", "Parked to answered, for calls that waited.",
		  s->wait);

	family(f, "semvisor_clients", "gauge", "Clients (listeners) served now.");
	fprintf(f, "semvisor_clients %u\n", s->listeners);
	counter(f, "semvisor_clients_added_total", "Clients that arrived.", s->listeners_added);
	counter(f, "semvisor_clients_gone_total", "Clients that went away.", s->listeners_gone);
	counter(f, "semvisor_processes_exited_total",
		"Confined processes whose exit was handled (SEM_UNDO).", s->processes_exited);
	counter(f, "semvisor_namespaces_ended_total",
		"IPC namespaces found gone in the kernel, their sets with them.",
		s->namespaces_ended);
	counter(f, "semvisor_budget_refused_total",
		"Calls refused by the memory budget (every kind).", s->budget_refused);
	family(f, "semvisor_budget_refused_kind_total", "counter",
	       "Calls refused by the memory budget, by the bound that refused: semget ENOSPC "
	       "(semaphores, sets), semop ENOMEM (undos, waiters), calls from an IPC namespace "
	       "past max_namespaces (namespaces).");
	sample1(f, "semvisor_budget_refused_kind_total", "kind", "semaphores",
		s->budget_refused_sems);
	sample1(f, "semvisor_budget_refused_kind_total", "kind", "sets", s->budget_refused_sets);
	sample1(f, "semvisor_budget_refused_kind_total", "kind", "undos", s->budget_refused_undos);
	sample1(f, "semvisor_budget_refused_kind_total", "kind", "waiters",
		s->budget_refused_waiters);
	sample1(f, "semvisor_budget_refused_kind_total", "kind", "namespaces",
		s->budget_refused_namespaces);
	counter(f, "semvisor_bulk_calls_total",
		"Calls of heavy clients (large whole-set operations), served by the bulk lane.",
		s->bulk_calls);
	counter(f, "semvisor_fast_operations_total",
		"Semops programs did in their own memory (--fast), counted as their pages went.",
		s->fast_ops);
	counter(f, "semvisor_busy_probes_total",
		"Tries of --fast semops waiting before they park that found the semaphore short "
		"(also in the semtimedop calls and EAGAIN answers).",
		s->busy_probes);

	/* only the adaptive mutex keeps these: with another lock they would be zeros that lie */
	if (l && !strcmp(l->kind, "amutex")) {
		counter(f, "semvisor_lock_acquired_total", "Engine lock acquisitions.",
			l->acquired);
		counter(f, "semvisor_lock_fast_total", "Engine locks free at the first attempt.",
			l->fast);
		counter(f, "semvisor_lock_spun_total", "Engine locks obtained by spinning.",
			l->spun);
		counter(f, "semvisor_lock_slept_total", "Engine locks obtained after sleeping.",
			l->slept);
		counter(f, "semvisor_lock_sleeps_total", "Futex waits that blocked.", l->sleeps);
		counter(f, "semvisor_lock_wakes_total", "Futex wake calls.", l->wakes);
		family(f, "semvisor_lock_cancels_total", "counter",
		       "Spinners that gave up: left the middle of the queue, or quit as its head.");
		sample1(f, "semvisor_lock_cancels_total", "how", "unqueue", l->unqueues);
		sample1(f, "semvisor_lock_cancels_total", "how", "head_quit", l->head_quits);
		family(f, "semvisor_lock_spin_seconds_total", "counter",
		       "Time spent spinning for engine locks.");
		fprintf(f, "semvisor_lock_spin_seconds_total %.9g\n", (double)l->spin_ns / 1e9);
	}

	ns_family(f, s, "semvisor_namespace_sets", "gauge", "Semaphore sets in each namespace.",
		  NS_SETS);
	ns_family(f, s, "semvisor_namespace_semaphores", "gauge", "Semaphores in each namespace.",
		  NS_SEMS);
	ns_family(f, s, "semvisor_namespace_waiters", "gauge",
		  "Operations waiting now in each namespace.", NS_WAITERS);
	ns_family(f, s, "semvisor_namespace_set_lock_spun_total", "counter",
		  "Whole-set lock acquisitions that spun, summed over each namespace's sets.",
		  NS_SPUN);
	ns_family(f, s, "semvisor_namespace_set_lock_slept_total", "counter",
		  "Whole-set lock acquisitions that slept, summed over each namespace's sets.",
		  NS_SLEPT);
	family(f, "semvisor_namespace_limit", "gauge",
	       "The namespace's limits, as in /proc/sys/kernel/sem.");
	for (size_t i = 0; i < s->n_namespaces; i++) {
		const Semvisor__Namespace *n = s->namespaces[i];
		int32_t v[4];

		if (!n->limits)
			continue;
		v[0] = n->limits->semmsl;
		v[1] = n->limits->semmns;
		v[2] = n->limits->semopm;
		v[3] = n->limits->semmni;
		for (int k = 0; k < 4; k++) {
			char extra[32];

			snprintf(extra, sizeof(extra), ",limit=\"%s\"", limit_names[k]);
			fputs("semvisor_namespace_limit", f);
			ns_labels(f, n, extra);
			fprintf(f, " %d\n", v[k]);
		}
	}
	clients(f, s);
}
