/* SPDX-License-Identifier: MIT */
/*
 * The lock the engine uses for semaphore sets and single semaphores.
 *
 * The engine only ever calls the five functions below, so the lock underneath can change without
 * touching it. The default is the adaptive mutex of amutex.h (spin in a cancelable MCS queue while
 * spinning pays, then sleep on a futex). Building with LOCK=pthread (-DSV_LOCK_PTHREAD) puts a
 * plain pthread_mutex underneath instead, for comparison in bench/.
 *
 * sv_lock() reports how the lock was obtained so the engine can count contention per set and per
 * semaphore without a second look at the lock.
 */
#ifndef SV_LOCK_H
#define SV_LOCK_H

#include <stdbool.h>
#include <stdint.h>

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
#include <pthread.h>
#include <stdlib.h>

typedef struct {
	pthread_mutex_t m;
} sv_lock_t;

#define SV_LOCK_NAME "pthread_mutex"

static inline void sv_lock_init(sv_lock_t *l)
{
	if (pthread_mutex_init(&l->m, NULL))
		abort();
}

static inline enum sv_lock_how sv_lock(sv_lock_t *l)
{
	if (pthread_mutex_trylock(&l->m) == 0)
		return SV_LOCK_FAST;
	if (pthread_mutex_lock(&l->m))
		abort();
	return SV_LOCK_SLEPT;
}

static inline bool sv_trylock(sv_lock_t *l)
{
	return pthread_mutex_trylock(&l->m) == 0;
}

static inline void sv_unlock(sv_lock_t *l)
{
	if (pthread_mutex_unlock(&l->m))
		abort();
}

static inline void sv_lock_destroy(sv_lock_t *l)
{
	pthread_mutex_destroy(&l->m);
}

/* pthread_mutex counts nothing: contention is counted per set and per semaphore only. */
static inline void sv_lock_stats_read(struct sv_lock_stats *out)
{
	*out = (struct sv_lock_stats){ .name = SV_LOCK_NAME };
}

#else
#include "lock/amutex.h"

typedef struct amutex sv_lock_t;

#define SV_LOCK_NAME "amutex"

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
	(void)l;
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
#endif

#endif /* SV_LOCK_H */
