/* SPDX-License-Identifier: MIT */
/*
 * Checked pthread mutex calls. A mutex call that fails is a broken invariant (a lock not held,
 * a destroyed mutex), never a condition to handle: abort at once, where it happened.
 */
#ifndef SV_XPTHREAD_H
#define SV_XPTHREAD_H

#include <pthread.h>
#include <stdlib.h>

static inline void xmutex_init(pthread_mutex_t *m)
{
	if (pthread_mutex_init(m, NULL))
		abort();
}

static inline void xmutex_destroy(pthread_mutex_t *m)
{
	if (pthread_mutex_destroy(m))
		abort();
}

static inline void xlock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m))
		abort();
}

static inline void xunlock(pthread_mutex_t *m)
{
	if (pthread_mutex_unlock(m))
		abort();
}

#endif
