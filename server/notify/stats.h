/* SPDX-License-Identifier: MIT */
/*
 * Counting and telling: the per-worker counters behind struct nt_stats (notify.h) and the
 * --trace lines.
 *
 * Counters are plain per-worker fields updated with relaxed atomic adds, so a reader on another
 * thread (stats, the control socket) sees whole values without any lock on the hot path; what
 * happens outside a worker goes to s->events. They are folded on read (admin.c).
 */
#ifndef SV_NOTIFY_STATS_H
#define SV_NOTIFY_STATS_H

#include <stdint.h>

#include "notify/notify.h"

#ifndef SV_NO_COUNTERS
#define NT_ADD(st, field, n) __atomic_fetch_add(&(st)->field, (uint64_t)(n), __ATOMIC_RELAXED)
#else
#define NT_ADD(st, field, n) ((void)(st), (void)(n)) /* COUNTERS=off, for bench/ */
#endif
/* A worker's counters, or the supervisor's own for what happens outside one (wk NULL). */
#define NT_STATS(s, wk)		 ((wk) ? &(wk)->stats : &(s)->events)
#define NT_COUNT_EVENT(s, field) NT_ADD(&(s)->events, field, 1)

/*
 * Fold one set of counters into another (every counter is a uint64_t): each read whole, each
 * added atomically, so either side may be counted into meanwhile.
 */
void nt_stats_add(struct nt_stats *to, const struct nt_stats *from);

/* The log2 histogram bucket of a duration. */
static inline int nt_hist_bucket(int64_t ns)
{
	int b = 0;

	while (ns > 1 && b < NT_NBUCKET - 1) {
		ns >>= 1;
		b++;
	}
	return b;
}

/* An answer was delivered: count its errno, if it is one. */
static inline void nt_count_answer(struct nt_stats *st, long val)
{
	if (val < 0 && -val < NT_NERRNO)
		NT_ADD(st, errors[-val], 1);
}

/*
 * One --trace line for a semaphore call of tid (x86_64 numbers, args as received) answered
 * val; how says in what way ("" for an ordinary answer).
 */
void nt_trace(struct nt_super *s, int32_t tid, int nr, const uint64_t *a, long val,
	      const char *how);

#endif
