/* SPDX-License-Identifier: MIT */
#include "util/fault.h"

#ifdef SV_FAULT_INJECT
#include <stdatomic.h>
#include <time.h>

static struct {
	atomic_int skip, count, hits;
} sites[SV_FAULT_NSITES];

bool sv_fault(enum sv_fault_site site)
{
	if (atomic_load(&sites[site].count) <= 0)
		return false;
	if (atomic_fetch_sub(&sites[site].skip, 1) > 0)
		return false;
	if (atomic_fetch_sub(&sites[site].count, 1) <= 0)
		return false;
	atomic_fetch_add(&sites[site].hits, 1);
	return true;
}

void sv_fault_pause(enum sv_fault_site site, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	if (sv_fault(site))
		nanosleep(&ts, NULL);
}

void sv_fault_arm(enum sv_fault_site site, int skip, int count)
{
	atomic_store(&sites[site].count, 0);
	atomic_store(&sites[site].skip, skip);
	atomic_store(&sites[site].count, count);
}

int sv_fault_hits(enum sv_fault_site site)
{
	return atomic_load(&sites[site].hits);
}
#else
/* Nothing here outside the fault-injection build: an empty translation unit is not ISO C. */
typedef int sv_fault_unused;
#endif
