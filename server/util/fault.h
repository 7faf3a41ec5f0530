/* SPDX-License-Identifier: MIT */
/*
 * Fault injection for tests. On the data path a resource failure (no memory, no room in an
 * epoll set) must become an errno for the one call that met it, never a crash: a build with
 * SV_FAULT_INJECT (the test library, $(O)/libsemvisor-faults.a) lets a test make chosen
 * failures happen on demand and check exactly that. In every other build sv_fault() is a
 * constant false and costs nothing. A site may also be a delay (sv_fault_pause()), to widen a
 * window between two steps that a test wants to meet with something else.
 */
#ifndef SV_FAULT_H
#define SV_FAULT_H

#include <stdbool.h>

enum sv_fault_site {
	SV_FAULT_ALLOC,	      /* malloc/calloc/realloc on the data path */
	SV_FAULT_EPOLL,	      /* epoll_ctl adding a pidfd (exit tracking) */
	SV_FAULT_SLOW_COMMIT, /* not a failure: a change is committed 200 ms late (ordering) */
	SV_FAULT_SLOW_CHANGE, /* not a failure: a change shows 200 ms after it was committed */
	SV_FAULT_SLOW_UNDO,   /* not a failure: a lost wake-up answer is undone 200 ms late */
	SV_FAULT_NSITES
};

#ifdef SV_FAULT_INJECT
/* Should this call at site fail? Counts the call. */
bool sv_fault(enum sv_fault_site site);
/* As sv_fault(), but sleep ms instead of failing. */
void sv_fault_pause(enum sv_fault_site site, int ms);
/* From now on: let skip calls at site pass, then fail the next count of them. */
void sv_fault_arm(enum sv_fault_site site, int skip, int count);
/* Calls at site failed on purpose so far. */
int sv_fault_hits(enum sv_fault_site site);
#else
static inline bool sv_fault(enum sv_fault_site site)
{
	(void)site;
	return false;
}

static inline void sv_fault_pause(enum sv_fault_site site, int ms)
{
	(void)site;
	(void)ms;
}
#endif

#endif
