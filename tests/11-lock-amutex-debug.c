/* SPDX-License-Identifier: MIT */
/*
 * The adaptive mutex built with -DAMUTEX_DEBUG: ownership checks, and random sched_yield() at
 * the marked points of the queue paths (a preemption there is what every race in the
 * cancelable queue needs). The library is built without debug, so this test compiles
 * server/lock/amutex.c itself, into this program only; it then runs every test of
 * 10-lock-amutex.c against that build, plus the checks only the debug build makes.
 *
 * The debug copy gets its own symbol names: the test binary is also linked with libsemvisor.a,
 * whose engine code (built without AMUTEX_DEBUG, with the 8-byte struct amutex, except in the
 * debug build, make DEBUG=1) must never reach the copy's functions.
 */
#define AMUTEX_DEBUG		     1
#define amutex_init		     amutex_dbg_init
#define amutex_lock		     amutex_dbg_lock
#define amutex_trylock		     amutex_dbg_trylock
#define amutex_unlock		     amutex_dbg_unlock
#define amutex_held		     amutex_dbg_held
#define amutex_assert_held	     amutex_dbg_assert_held
#define amutex_assert_not_held	     amutex_dbg_assert_not_held
#define amutex_stats_read	     amutex_dbg_stats_read
#define amutex_set_spin_limit	     amutex_dbg_set_spin_limit
#define amutex_set_thread_spin_limit amutex_dbg_set_thread_spin_limit
#define amutex_spin_budget	     amutex_dbg_spin_budget
#define amutex_debug_set_yield	     amutex_dbg_debug_set_yield
#include "lock/amutex.c"

#define AMUTEX_TEST_SUITE amutex_debug
#include "10-lock-amutex.c"

static void *unlock_it(void *m)
{
	amutex_unlock(m);
	return NULL;
}

Test(amutex_debug, unlock_by_non_owner_aborts, .signal = SIGABRT)
{
	static struct amutex m;
	pthread_t t;

	amutex_lock(&m);
	cr_assert_eq(pthread_create(&t, NULL, unlock_it, &m), 0);
	pthread_join(t, NULL);
}

Test(amutex_debug, relock_by_owner_aborts, .signal = SIGABRT)
{
	struct amutex m = { 0 };

	amutex_lock(&m);
	amutex_lock(&m);
}

Test(amutex_debug, owner_recorded)
{
	struct amutex m = { 0 };

	amutex_lock(&m);
	cr_expect_eq(atomic_load(&m.owner), debug_self());
	amutex_unlock(&m);
	cr_expect_eq(atomic_load(&m.owner), 0);
	cr_assert(amutex_trylock(&m));
	cr_expect_eq(atomic_load(&m.owner), debug_self());
	amutex_unlock(&m);
}

/* Yield at every marked point: the widest race windows, with cancels all the time. */
Test(amutex_debug, stress_yield_everywhere, .timeout = 120)
{
	amutex_debug_set_yield(1);
	stress(6, ITERS(100000), 100, 0);
	stress(6, ITERS(100000), -1, 8);
	stress(6, ITERS(50000), STRESS_MIXED, 4);
	amutex_debug_set_yield(8);
}

static void *assert_held_here(void *m)
{
	amutex_assert_held(m);
	return NULL;
}

Test(amutex_debug, held_answers_for_the_calling_thread)
{
	struct amutex m = { 0 };

	cr_expect_not(amutex_held(&m));
	amutex_assert_not_held(&m);
	amutex_lock(&m);
	cr_expect(amutex_held(&m));
	amutex_assert_held(&m);
	amutex_unlock(&m);
	cr_expect_not(amutex_held(&m));
	cr_assert(amutex_trylock(&m));
	amutex_assert_held(&m);
	amutex_unlock(&m);
}

Test(amutex_debug, assert_held_on_a_free_mutex_aborts, .signal = SIGABRT)
{
	struct amutex m = { 0 };

	amutex_assert_held(&m);
}

Test(amutex_debug, assert_held_by_another_thread_aborts, .signal = SIGABRT)
{
	static struct amutex m;
	pthread_t t;

	amutex_lock(&m);
	cr_assert_eq(pthread_create(&t, NULL, assert_held_here, &m), 0);
	pthread_join(t, NULL);
}

Test(amutex_debug, assert_not_held_by_the_holder_aborts, .signal = SIGABRT)
{
	struct amutex m = { 0 };

	amutex_lock(&m);
	amutex_assert_not_held(&m);
}
