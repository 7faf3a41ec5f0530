/* SPDX-License-Identifier: MIT */
/*
 * Checked pthread mutex (and condition variable) calls. A call that fails is a broken invariant (a lock not held,
 * a destroyed mutex), never a condition to handle: abort at once, where it happened.
 *
 * Debug builds (SV_DEBUG, make DEBUG=1) also keep, per thread, the list of mutexes it took
 * through xlock()/xtrylock(), so that a rule such as "caller holds p->lock" can be checked where
 * it is written: xassert_held(&p->lock). They abort on a lock of a mutex the thread already
 * holds (instead of deadlocking), on an unlock of one it does not hold (undefined behaviour for
 * a default mutex, which glibc lets pass), and on destroying one it holds. A mutex taken with
 * pthread_mutex_lock() directly is not on the list: code that asserts on a mutex takes it
 * through these wrappers only. Release builds keep nothing: the mutex, its size and every call
 * are exactly pthread's.
 *
 * Calling context: any thread; not async-signal-safe (neither are pthread mutexes).
 */
#ifndef SV_XPTHREAD_H
#define SV_XPTHREAD_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/debug.h"

/*
 * Does the calling thread hold @m (taken with xlock() or xtrylock())? Defined in debug builds
 * only, for assertions (other builds record nothing and cannot tell): a call outside
 * xassert_held()/SV_ASSERT() fails to link there.
 */
bool xmutex_held(const pthread_mutex_t *m);

#define xassert_held(m)	    SV_ASSERT(xmutex_held(m))
#define xassert_not_held(m) SV_ASSERT(!xmutex_held(m))

#ifdef SV_DEBUG
/* The per-thread list (xpthread.c): record @m as taken; drop it, aborting if it is not there. */
void xpthread_debug_locking(const pthread_mutex_t *m);
void xpthread_debug_locked(const pthread_mutex_t *m);
void xpthread_debug_unlocking(const pthread_mutex_t *m);
#else
static inline void xpthread_debug_locking(const pthread_mutex_t *m)
{
	(void)m;
}
static inline void xpthread_debug_locked(const pthread_mutex_t *m)
{
	(void)m;
}
static inline void xpthread_debug_unlocking(const pthread_mutex_t *m)
{
	(void)m;
}
#endif

static inline void xmutex_init(pthread_mutex_t *m)
{
	if (pthread_mutex_init(m, NULL))
		abort();
}

static inline void xmutex_destroy(pthread_mutex_t *m)
{
	xassert_not_held(m);
	if (pthread_mutex_destroy(m))
		abort();
}

static inline void xlock(pthread_mutex_t *m)
{
	xpthread_debug_locking(m);
	if (pthread_mutex_lock(m))
		abort();
	xpthread_debug_locked(m);
}

/* Take @m if it is free right now. True when taken; any failure but EBUSY aborts. */
static inline bool xtrylock(pthread_mutex_t *m)
{
	int rc = pthread_mutex_trylock(m);

	if (rc == 0) {
		xpthread_debug_locked(m);
		return true;
	}
	if (rc != EBUSY)
		abort();
	return false;
}

static inline void xunlock(pthread_mutex_t *m)
{
	xpthread_debug_unlocking(m);
	if (pthread_mutex_unlock(m))
		abort();
}

static inline void xcond_init(pthread_cond_t *c)
{
	if (pthread_cond_init(c, NULL))
		abort();
}

/* Wait on @c, letting @m go meanwhile. Caller holds @m (xlock()). */
static inline void xcond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	xpthread_debug_unlocking(m);
	if (pthread_cond_wait(c, m))
		abort();
	xpthread_debug_locked(m);
}

static inline void xcond_signal(pthread_cond_t *c)
{
	if (pthread_cond_signal(c))
		abort();
}

#endif
