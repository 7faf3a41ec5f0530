/* SPDX-License-Identifier: MIT */
/*
 * amutex: an adaptive mutex. A waiter spins while spinning pays, in a cancelable MCS queue so
 * that only one waiter at a time spins on the lock word, and sleeps on a futex when it does not.
 * The design, the states and the memory ordering are described at the top of amutex.c.
 *
 * Size: 8 bytes (16 with -DAMUTEX_DEBUG, which adds the owner). Memory that is all zero is an
 * unlocked amutex, so amutex_init() is optional for zeroed memory. There is nothing to destroy.
 *
 * Calling context, for every function here: an ordinary thread of this process. The lock is
 * process-private (private futex) and must not be placed in shared memory; it is not
 * async-signal-safe (do not take it in a signal handler that may interrupt amutex_lock()); it is
 * not recursive (re-locking a held amutex deadlocks; the debug build aborts instead).
 * A thread may hold several amutexes at once (nesting is the caller's order to keep).
 *
 * Every amutex_*() call made by one build must see the same AMUTEX_DEBUG setting, since it
 * changes the size of struct amutex.
 */
#ifndef SV_AMUTEX_H
#define SV_AMUTEX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct amutex {
	/*
	 * 0 unlocked, 1 locked, 2 locked and there may be sleepers. Changed only by atomic
	 * read-modify-write; the futex word sleepers wait on.
	 */
	_Atomic uint32_t state;
	/*
	 * Tail of the queue of spinning waiters: 1 + the table index of the last queued node, 0
	 * when nobody spins. It only decides who may spin; it never grants the mutex.
	 */
	_Atomic uint32_t tail;
#ifdef AMUTEX_DEBUG
	_Atomic uint32_t owner; /* debug id of the holding thread, 0 when unlocked */
	uint32_t pad;
#endif
};

/*
 * Bounds of the adaptive spin budget, in ns: a contended lock() that gets to spin (see the depth
 * rule in amutex.c) spins at least the minimum, to keep finding out whether spinning pays, and
 * never more than the cap, which is far below a scheduler time slice (milliseconds), so waiters
 * give the CPU back when threads outnumber cores.
 */
#define AMUTEX_SPIN_MIN_NS 1000
#define AMUTEX_SPIN_CAP_NS 40000

/* The values amutex_lock() returns; the same numbers as enum sv_lock_how in lock.h. */
enum {
	AMUTEX_FAST = 0,  /* free at the first attempt */
	AMUTEX_SPUN = 1,  /* contended, obtained without sleeping */
	AMUTEX_SLEPT = 2, /* obtained after sleeping at least once */
};

/* Make @m an unlocked amutex. Same as zeroing it. No concurrent use of @m. */
void amutex_init(struct amutex *m);

/*
 * Take @m, waiting as long as it takes. Returns AMUTEX_FAST, AMUTEX_SPUN or AMUTEX_SLEPT.
 * May block: the caller may hold other amutexes (lock order is the caller's business).
 */
int amutex_lock(struct amutex *m);

/* Take @m if it is free right now; never waits. True when taken. */
bool amutex_trylock(struct amutex *m);

/* Release @m. Caller holds @m (the debug build aborts otherwise). Never blocks. */
void amutex_unlock(struct amutex *m);

/*
 * Does the calling thread hold @m? Defined in debug builds only, for assertions (other builds
 * record no owner and cannot tell): a call outside an assertion fails to link there.
 */
bool amutex_held(const struct amutex *m);

/*
 * Debug builds: abort unless the calling thread holds @m, or unless it does not. They check a
 * rule written as "caller holds m" where it applies. Other builds: nothing at all.
 */
#ifdef AMUTEX_DEBUG
void amutex_assert_held(const struct amutex *m);
void amutex_assert_not_held(const struct amutex *m);
#else
static inline void amutex_assert_held(const struct amutex *m)
{
	(void)m;
}

static inline void amutex_assert_not_held(const struct amutex *m)
{
	(void)m;
}
#endif

/*
 * Contention counters, summed over every thread that ever used an amutex (threads keep their own
 * counters; a thread that exits leaves them to the next thread that reuses its queue node, so
 * nothing is lost). Reading is racy per counter but every counter only grows.
 */
struct amutex_stats {
	uint64_t acquired;   /* lock() and successful trylock() calls */
	uint64_t fast;	     /* ... of which free at the first attempt (lock or trylock) */
	uint64_t spun;	     /* lock() obtained by spinning, without sleeping */
	uint64_t slept;	     /* lock() obtained after sleeping at least once */
	uint64_t sleeps;     /* futex waits that blocked (a lock() may sleep several times) */
	uint64_t wakes;	     /* futex wake calls made by unlock() */
	uint64_t unqueues;   /* spinners that left the middle of the queue (steps A, B, C) */
	uint64_t head_quits; /* queue heads that stopped spinning and went to sleep */
	uint64_t trylock_failed;
	uint64_t spin_ns; /* time spent in the spin phase, successful or not */
	uint32_t threads; /* queue nodes in use (threads alive that used an amutex) */
	uint32_t nodes;	  /* queue nodes ever created (the table never shrinks) */
};

void amutex_stats_read(struct amutex_stats *out);

/*
 * Test and benchmark hook: ns < 0 restores the adaptive spin budget (the default); 0 makes every
 * contended lock() sleep without spinning; ns > 0 fixes the budget at ns nanoseconds (no cap),
 * so that tiny values make spinners leave the queue all the time. Takes effect for the next
 * contended lock() of every thread.
 */
void amutex_set_spin_limit(long ns);

/* The same for the calling thread only, overriding the global setting; ns < 0 undoes it. */
void amutex_set_thread_spin_limit(long ns);

/* The budget a contended lock() by the calling thread would spin for now, in ns. */
long amutex_spin_budget(void);

/*
 * Debug builds only (-DAMUTEX_DEBUG; a no-op otherwise): yield the CPU at one in @one_in of the
 * marked points on the queue paths (0 turns yielding off; the default is 8).
 */
void amutex_debug_set_yield(unsigned one_in);

#endif /* SV_AMUTEX_H */
