/* SPDX-License-Identifier: MIT */
/* The debug build's rule checks and random yields (debug.h). Empty in other builds. */
#include "util/debug.h"

#ifdef SV_DEBUG
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic unsigned yield_one_in = 16;
static _Atomic uint64_t seed_next = 1;
static __thread uint64_t rng;

void sv_debug_fail(const char *expr, const char *file, int line, const char *func)
{
	fprintf(stderr, "%s:%d: %s: rule broken: %s\n", file, line, func, expr);
	abort();
}

void sv_debug_set_yield(unsigned one_in)
{
	atomic_store_explicit(&yield_one_in, one_in, memory_order_relaxed);
}

void sv_debug_yield(void)
{
	unsigned one_in = atomic_load_explicit(&yield_one_in, memory_order_relaxed);

	if (!one_in)
		return;
	if (!rng) {
		struct timespec ts;

		/* Threads started in the same nanosecond must still draw different points. */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		rng = ((uint64_t)ts.tv_nsec ^ 0x9e3779b97f4a7c15u) +
		      (atomic_fetch_add_explicit(&seed_next, 1, memory_order_relaxed) << 32);
		if (!rng)
			rng = 1;
	}
	/* xorshift64 */
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	if (rng % one_in == 0)
		(void)sched_yield();
}
#else
/* ISO C wants something in every translation unit. */
typedef int sv_debug_unused;
#endif
