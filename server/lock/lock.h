/* SPDX-License-Identifier: MIT */
/*
 * The lock the engine uses for semaphore sets and single semaphores.
 *
 * The engine only ever calls the five functions below and the debug build's assertions, so the
 * lock underneath can change without touching it. The default is the adaptive mutex of amutex.h
 * (spin in a cancelable MCS queue while spinning pays, then sleep on a futex). Building with
 * LOCK=pthread (-DSV_LOCK_PTHREAD) puts a plain pthread_mutex underneath instead, for comparison
 * in bench/, through the checked wrappers of xpthread.h.
 *
 * sv_lock() reports how the lock was obtained so the engine can count contention per set and per
 * semaphore without a second look at the lock.
 */
#ifndef SV_LOCK_H
#define SV_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "util/debug.h"

enum sv_lock_how {
	SV_LOCK_FAST = 0, /* free at the first attempt */
	SV_LOCK_SPUN,	  /* obtained after spinning */
	SV_LOCK_SLEPT,	  /* obtained after sleeping at least once */
};

/*
 * What sv_lock_stats_read() tells the control plane, so that it never has to know which lock is
 * underneath: the lock's name, and its contention counters summed over every thread since the
 * process started (each only grows). Only the adaptive mutex keeps counters; for any other lock
 * they are all 0, and the name is how a reader tells the two apart.
 */
struct sv_lock_stats {
	const char *name; /* SV_LOCK_NAME */
	uint64_t acquired, fast, spun, slept, sleeps, wakes, unqueues, head_quits, trylock_failed;
	uint64_t spin_ns;
	uint32_t threads;
};

#ifdef SV_LOCK_PTHREAD
#include "lock/xpthread.h"

typedef struct {
	pthread_mutex_t m;
} sv_lock_t;

#define SV_LOCK_NAME "pthread_mutex"

static inline void sv_lock_init(sv_lock_t *l)
{
	xmutex_init(&l->m);
}

static inline enum sv_lock_how sv_lock(sv_lock_t *l)
{
	if (xtrylock(&l->m))
		return SV_LOCK_FAST;
	xlock(&l->m);
	return SV_LOCK_SLEPT;
}

static inline bool sv_trylock(sv_lock_t *l)
{
	return xtrylock(&l->m);
}

static inline void sv_unlock(sv_lock_t *l)
{
	xunlock(&l->m);
}

static inline void sv_lock_destroy(sv_lock_t *l)
{
	xmutex_destroy(&l->m);
}

/* pthread_mutex counts nothing: contention is counted per set and per semaphore only. */
static inline void sv_lock_stats_read(struct sv_lock_stats *out)
{
	*out = (struct sv_lock_stats){ .name = SV_LOCK_NAME };
}

/* Debug builds: does the calling thread hold @l? For assertions only (see xmutex_held()). */
#define sv_lock_held(l) xmutex_held(&(l)->m)

#else
#include "lock/amutex.h"

#if defined(SV_DEBUG) && !defined(AMUTEX_DEBUG)
#error "SV_DEBUG checks amutex owners: build with AMUTEX_DEBUG too (make DEBUG=1 sets both)"
#endif

typedef struct amutex sv_lock_t;

#define SV_LOCK_NAME	"amutex"

static inline void sv_lock_init(sv_lock_t *l)
{
	amutex_init(l);
}

static inline enum sv_lock_how sv_lock(sv_lock_t *l)
{
	return (enum sv_lock_how)amutex_lock(l);
}

static inline bool sv_trylock(sv_lock_t *l)
{
	return amutex_trylock(l);
}

static inline void sv_unlock(sv_lock_t *l)
{
	amutex_unlock(l);
}

static inline void sv_lock_destroy(sv_lock_t *l)
{
	amutex_assert_not_held(l);
}

static inline void sv_lock_stats_read(struct sv_lock_stats *out)
{
	struct amutex_stats st;

	amutex_stats_read(&st);
	*out = (struct sv_lock_stats){
		.name = SV_LOCK_NAME,
		.acquired = st.acquired,
		.fast = st.fast,
		.spun = st.spun,
		.slept = st.slept,
		.sleeps = st.sleeps,
		.wakes = st.wakes,
		.unqueues = st.unqueues,
		.head_quits = st.head_quits,
		.trylock_failed = st.trylock_failed,
		.spin_ns = st.spin_ns,
		.threads = st.threads,
	};
}

/* Debug builds: does the calling thread hold @l? For assertions only (see amutex_held()). */
#define sv_lock_held(l) amutex_held(l)
#endif

/*
 * "Caller holds l" / "caller does not hold l", checked in debug builds (make DEBUG=1), where
 * both lock kinds record their owner; nothing, not even the argument's evaluation, otherwise.
 */
#define sv_lock_assert_held(l)	   SV_ASSERT(sv_lock_held(l))
#define sv_lock_assert_not_held(l) SV_ASSERT(!sv_lock_held(l))

#endif /* SV_LOCK_H */
