/* SPDX-License-Identifier: MIT */
/* The debug build's per-thread list of mutexes held (xpthread.h). Empty in other builds. */
#include "lock/xpthread.h"

#ifdef SV_DEBUG
#include <stdio.h>

/*
 * Deeper nesting than this is a bug in itself: the engine nests at most four locks (engine.h),
 * the notify layer two.
 */
#define HELD_MAX 32

static __thread const pthread_mutex_t *held[HELD_MAX];
static __thread unsigned int nheld;

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "xpthread: %s\n", what);
	abort();
}

bool xmutex_held(const pthread_mutex_t *m)
{
	for (unsigned int i = 0; i < nheld; i++)
		if (held[i] == m)
			return true;
	return false;
}

void xpthread_debug_locking(const pthread_mutex_t *m)
{
	if (xmutex_held(m))
		die("lock of a mutex this thread already holds");
}

void xpthread_debug_locked(const pthread_mutex_t *m)
{
	if (nheld == HELD_MAX)
		die("too many mutexes held at once");
	held[nheld++] = m;
}

void xpthread_debug_unlocking(const pthread_mutex_t *m)
{
	for (unsigned int i = nheld; i-- > 0;) {
		if (held[i] == m) {
			held[i] = held[--nheld];
			return;
		}
	}
	die("unlock of a mutex this thread does not hold");
}
#else
/* ISO C wants something in every translation unit. */
typedef int xpthread_unused;
#endif
