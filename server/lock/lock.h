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

enum sv_lock_how {
	SV_LOCK_FAST = 0, /* free at the first attempt */
	SV_LOCK_SPUN,	  /* obtained after spinning */
	SV_LOCK_SLEPT,	  /* obtained after sleeping at least once */
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
#endif

#endif /* SV_LOCK_H */
