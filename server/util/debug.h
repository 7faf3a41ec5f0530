/* SPDX-License-Identifier: MIT */
/*
 * Checks for the debug build (make DEBUG=1, which defines SV_DEBUG and AMUTEX_DEBUG).
 *
 * A function with a calling rule ("caller holds the set lock", "call under rcu read lock")
 * states it in its comment and checks it with SV_ASSERT() on entry; the lock helpers that answer
 * such questions are amutex_assert_held() and sv_lock_assert_held() (lock/lock.h),
 * xassert_held() (lock/xpthread.h) and sv_rcu_reader() (lock/rcu.h).
 *
 * SV_DEBUG_YIELD() marks a point where a preemption would expose a race: between taking a lock
 * and looking at what it protects, after a lockless lookup and before the lock that confirms
 * it, before completions are handed out. The debug build yields the CPU at one in
 * sv_debug_set_yield() such points, chosen at random, as amutex.c does on its queue paths.
 *
 * In any other build both macros are empty: SV_ASSERT() does not evaluate its argument (it only
 * type-checks it), so a check may call helpers that exist for assertions alone.
 */
#ifndef SV_DEBUG_H
#define SV_DEBUG_H

#ifdef SV_DEBUG
/* Report "file:line: function: rule broken: expr" on stderr and abort. */
_Noreturn void sv_debug_fail(const char *expr, const char *file, int line, const char *func);
/* Yield the CPU at random (see sv_debug_set_yield()). */
void sv_debug_yield(void);
/* Yield at one in @one_in marked points (0 turns yielding off; the default is 16). */
void sv_debug_set_yield(unsigned one_in);

#define SV_ASSERT(cond)	 ((cond) ? (void)0 : sv_debug_fail(#cond, __FILE__, __LINE__, __func__))
#define SV_DEBUG_YIELD() sv_debug_yield()
#else
#define SV_ASSERT(cond)	 ((void)sizeof(!(cond)))
#define SV_DEBUG_YIELD() ((void)0)
static inline void sv_debug_set_yield(unsigned one_in)
{
	(void)one_in;
}
#endif

#endif /* SV_DEBUG_H */
