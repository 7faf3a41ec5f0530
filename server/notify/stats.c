/* SPDX-License-Identifier: MIT */
/*
 * Telling what was served: --trace lines and the --stats summary.
 */
#include <stdio.h>
#include <string.h>

#include "notify/serve.h"
#include "notify/stats.h"
#include "notify/super.h"

void nt_stats_add(struct nt_stats *to, const struct nt_stats *from)
{
	const uint64_t *f = (const uint64_t *)from;
	uint64_t *t = (uint64_t *)to;

	for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		__atomic_fetch_add(&t[i], __atomic_load_n(&f[i], __ATOMIC_RELAXED),
				   __ATOMIC_RELAXED);
}

static const char *call_name(int nr)
{
	switch (nr) {
	case NR_SEMGET:
		return "semget";
	case NR_SEMOP:
		return "semop";
	case NR_SEMTIMEDOP:
		return "semtimedop";
	case NR_SEMCTL:
		return "semctl";
	}
	return "?";
}

/* semctl's command as strace names it, or its number (x86_64 has no IPC_64 flag to strip). */
static const char *cmd_name(int cmd, char *buf, size_t len)
{
	const char *name = sv_semctl_cmd_name(cmd);

	if (name)
		return name;
	snprintf(buf, len, "%#x /* SEM_??? */", (unsigned int)cmd);
	return buf;
}

/* semget's flags as strace writes them: "IPC_CREAT|IPC_EXCL|0600". */
static const char *flags_name(unsigned int flags, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%#o", flags & SV_IPC_CREAT ? "IPC_CREAT|" : "",
		 flags & SV_IPC_EXCL ? "IPC_EXCL|" : "", flags & SV_IPC_NOWAIT ? "IPC_NOWAIT|" : "",
		 flags & ~(unsigned int)(SV_IPC_CREAT | SV_IPC_EXCL | SV_IPC_NOWAIT));
	return buf;
}

void nt_trace(struct nt_super *s, int32_t tid, int nr, const uint64_t *a, long val, const char *how)
{
	char res[64], x[48], y[48];

	if (!s->cfg.trace)
		return;
	if (val < 0)
		snprintf(res, sizeof(res), "-1 %s (%s)", strerrorname_np((int)-val) ?: "E?",
			 strerror((int)-val));
	else
		snprintf(res, sizeof(res), "%ld", val);
	if (nr == NR_SEMGET) {
		if ((int32_t)a[0] == SV_IPC_PRIVATE)
			snprintf(x, sizeof(x), "IPC_PRIVATE");
		else
			snprintf(x, sizeof(x), "%#x", (unsigned int)a[0]);
		fprintf(s->cfg.trace, "semvisor: [%d] semget(%s, %d, %s) = %s%s\n", tid, x,
			(int)a[1], flags_name((unsigned int)a[2], y, sizeof(y)), res, how);
	} else if (nr == NR_SEMCTL) {
		fprintf(s->cfg.trace, "semvisor: [%d] semctl(%d, %d, %s, %#llx) = %s%s\n", tid,
			(int)a[0], (int)a[1], cmd_name((int)a[2], x, sizeof(x)),
			(unsigned long long)a[3], res, how);
	} else {
		fprintf(s->cfg.trace, "semvisor: [%d] %s(%d, %#llx, %u%s) = %s%s\n", tid,
			call_name(nr), (int)a[0], (unsigned long long)a[1], (unsigned int)a[2],
			nr != NR_SEMTIMEDOP ? ""
			: a[3]		    ? ", timeout"
					    : ", NULL",
			res, how);
	}
}

static const char *const call_names[NT_NCALLS] = {
	"semget", "semop", "semtimedop", "semctl", "namespace changes", "other"
};

void nt_stats_print(const struct nt_stats *st, FILE *f)
{
	uint64_t total = 0, served = 0;

	for (int i = 0; i < NT_NCALLS; i++)
		total += st->calls[i];
	for (int b = 0; b < NT_NBUCKET; b++)
		served += st->service_ns[b];
	fprintf(f, "semvisor: %llu calls served:", (unsigned long long)total);
	for (int i = 0; i < NT_NCALLS; i++)
		if (st->calls[i])
			fprintf(f, " %s %llu", call_names[i], (unsigned long long)st->calls[i]);
	if (st->fast_ops)
		fprintf(f, "\nsemvisor: %llu semops done in the programs themselves (--fast)",
			(unsigned long long)st->fast_ops);
	if (st->busy_probes)
		fprintf(f,
			"\nsemvisor: %llu of the semtimedop calls were busy probes (--fast: waits "
			"that tried before parking, answered EAGAIN)",
			(unsigned long long)st->busy_probes);
	fprintf(f,
		"\nsemvisor: waits %llu (woken %llu, timed out %llu, interrupted %llu), "
		"rolled back %llu, kept %llu, callers gone %llu\n",
		(unsigned long long)st->parked, (unsigned long long)st->woken,
		(unsigned long long)st->timeouts, (unsigned long long)st->interrupted,
		(unsigned long long)st->rolled_back, (unsigned long long)st->kept,
		(unsigned long long)st->stale);
	fprintf(f, "semvisor: errors:");
	bool any = false;
	for (int e = 1; e < NT_NERRNO; e++) {
		if (st->errors[e]) {
			fprintf(f, " %s %llu", strerrorname_np(e) ? strerrorname_np(e) : "?",
				(unsigned long long)st->errors[e]);
			any = true;
		}
	}
	fprintf(f, "%s\n", any ? "" : " none");
	if (served) {
		/* median service time from the log2 histogram: the bucket's upper bound */
		uint64_t half = (served + 1) / 2, acc = 0;
		int b = 0;

		for (; b < NT_NBUCKET && acc + st->service_ns[b] < half; b++)
			acc += st->service_ns[b];
		fprintf(f, "semvisor: median service time < %llu ns\n", 1ull << (b + 1));
	}
	if (st->budget_refused) {
		const uint64_t *k = st->budget_refused_kind;

		fprintf(
		    f,
		    "semvisor: %llu calls refused by the memory budget: semaphores %llu, sets "
		    "%llu, undo entries %llu, waiters %llu, namespaces %llu\n",
		    (unsigned long long)st->budget_refused, (unsigned long long)k[SV_BUDGET_SEMS],
		    (unsigned long long)k[SV_BUDGET_SETS], (unsigned long long)k[SV_BUDGET_UNDOS],
		    (unsigned long long)k[SV_BUDGET_WAITERS],
		    (unsigned long long)k[SV_BUDGET_NAMESPACES]);
	}
	if (st->received)
		fprintf(f, "semvisor: %llu calls taken by the receiver, %llu hand-overs\n",
			(unsigned long long)st->received, (unsigned long long)st->handovers);
}
