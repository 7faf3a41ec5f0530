/* SPDX-License-Identifier: MIT */
/*
 * The helpers that check locking rules (make DEBUG=1): xassert_held() on the checked pthread
 * mutexes of xpthread.h, sv_lock_assert_held() on the engine's lock (lock.h), and
 * sv_rcu_assert_reader() (rcu.h). In the debug build a broken rule aborts; in every other build
 * the same calls do nothing at all, not even evaluate their argument. Each test that breaks a
 * rule expects SIGABRT in the debug build and a normal exit otherwise (BROKEN below).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>

#include "lock/lock.h"
#include "lock/rcu.h"
#include "lock/xpthread.h"
#include "util/debug.h"

#ifdef SV_DEBUG
#define BROKEN .signal = SIGABRT
#else
#define BROKEN .signal = 0
#endif

Test(lock_rules, kept_rules_pass)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
	sv_lock_t l;

	xlock(&a);
	xassert_held(&a);
	xassert_not_held(&b);
	cr_assert(xtrylock(&b));
	xassert_held(&b);
	cr_assert_not(xtrylock(&b) && (xunlock(&b), true)); /* busy: not taken twice */
	xunlock(&a);
	xassert_not_held(&a);
	xassert_held(&b);
	xunlock(&b);

	sv_lock_init(&l);
	sv_lock_assert_not_held(&l);
	sv_lock(&l);
	sv_lock_assert_held(&l);
	sv_unlock(&l);
	sv_lock_assert_not_held(&l);
	cr_assert(sv_trylock(&l));
	sv_lock_assert_held(&l);
	sv_unlock(&l);
	sv_lock_destroy(&l);
}

#ifdef SV_DEBUG
Test(lock_rules, held_is_exact_per_thread)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	cr_expect_not(xmutex_held(&m));
	xlock(&m);
	cr_expect(xmutex_held(&m));
	xunlock(&m);
	cr_expect_not(xmutex_held(&m));
}
#else
Test(lock_rules, release_build_evaluates_nothing)
{
	int n = 0;

	SV_ASSERT(++n == 1);
	xassert_held((n++, (pthread_mutex_t *)NULL));
	cr_expect_eq(n, 0, "a release build evaluated an assertion");
}
#endif

Test(lock_rules, xassert_held_on_a_free_mutex, BROKEN)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	xassert_held(&m);
}

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;

static void *assert_shared_held(void *arg)
{
	(void)arg;
	xassert_held(&shared);
	return NULL;
}

Test(lock_rules, xassert_held_by_another_thread, BROKEN)
{
	pthread_t t;

	xlock(&shared);
	cr_assert_eq(pthread_create(&t, NULL, assert_shared_held, NULL), 0);
	pthread_join(t, NULL);
	xunlock(&shared);
}

Test(lock_rules, xunlock_of_a_mutex_not_held, BROKEN)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	cr_assert(xtrylock(&m));
	xunlock(&m);
#ifdef SV_DEBUG
	/* glibc's default mutex would let this pass, unlocking it for whoever holds it then */
	xunlock(&m);
#endif
}

Test(lock_rules, xlock_of_a_mutex_held, BROKEN, .timeout = 5)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	xlock(&m);
#ifdef SV_DEBUG
	xlock(&m); /* aborts instead of deadlocking */
#endif
}

Test(lock_rules, sv_lock_assert_held_on_a_free_lock, BROKEN)
{
	sv_lock_t l;

	sv_lock_init(&l);
	sv_lock_assert_held(&l);
}

Test(lock_rules, sv_lock_assert_not_held_by_the_holder, BROKEN)
{
	sv_lock_t l;

	sv_lock_init(&l);
	sv_lock(&l);
	sv_lock_assert_not_held(&l);
}

Test(lock_rules, rcu_reader_is_exact)
{
	rcu_register_thread();
	cr_expect_not(sv_rcu_reader());
	rcu_read_lock();
	cr_expect(sv_rcu_reader());
	sv_rcu_assert_reader();
	rcu_read_lock();
	rcu_read_unlock();
	cr_expect(sv_rcu_reader(), "still inside the outer section");
	rcu_read_unlock();
	cr_expect_not(sv_rcu_reader());
	rcu_unregister_thread();
}

Test(lock_rules, rcu_assert_reader_outside_a_section, BROKEN)
{
	rcu_register_thread();
	sv_rcu_assert_reader();
	rcu_unregister_thread();
}
