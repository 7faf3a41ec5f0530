/* SPDX-License-Identifier: MIT */
/*
 * amutex: an adaptive mutex on a cancelable MCS queue.
 *
 * What users see
 * --------------
 * A mutex of 8 bytes (struct amutex in amutex.h) for the engine's per-semaphore and per-set
 * locks: lock, trylock, unlock. Taking a free lock costs one compare-and-swap, releasing a lock
 * nobody sleeps on costs one exchange. A contended lock() first spins, as long as spinning has
 * recently paid off, and sleeps on a futex when it does not; lock() says which of the three
 * happened so the engine can count contention. The mutex is not fair: a running thread may take
 * the lock ahead of a sleeper that was just woken (which then sleeps again). Starvation is
 * possible in principle, as with glibc's default mutex.
 *
 * The algorithm
 * -------------
 * Two words per mutex. @state is the mutex itself, a classic three-state futex mutex:
 *
 *	0 unlocked
 *	1 locked, nobody sleeps
 *	2 locked, there may be sleepers (set by every thread about to sleep)
 *
 *	lock fast path:   CAS 0 -> 1
 *	spinning waiter:  when it sees 0, CAS 0 -> 1
 *	sleeping waiter:  CAS 0 -> 1 once more, then
 *	                  c = XCHG(2); while (c != 0) { futex_wait(2); c = XCHG(2); }
 *	unlock:           if (XCHG(0) == 2) futex_wake(1)
 *
 * Only these atomic operations grant or release the mutex, so mutual exclusion rests on @state
 * alone. A waiter that takes the lock with XCHG(2) cannot know whether other sleepers remain, so
 * it keeps 2 and its unlock wakes one thread, which either finds the lock free or sets 2 again
 * before sleeping. No wake-up is lost: a sleeper only sleeps while @state is 2 (the futex checks
 * that atomically), and whoever changes 2 into 0 calls futex_wake afterwards. A spinner that
 * takes a lock with CAS 0 -> 1 while sleepers exist is harmless for the same reason: the woken
 * sleeper finds 1, writes 2 and sleeps again, and the spinner's unlock then sees 2 and wakes.
 *
 * @tail is an MCS queue of the spinning waiters, so that only one of them (the head) spins on
 * @state and the others each spin on a flag in their own queue node, in their own cache line.
 * The queue only decides who may spin; it never grants the mutex. A waiter that finds the queue
 * empty first watches @state for PRESPIN rounds, as the head would, and takes a mutex freed
 * meanwhile without queueing (with short critical sections most contended acquisitions end
 * there). Then it:
 *
 *	1. enqueues its node: prev = XCHG(tail, me); if prev, prev->next = me and spin on
 *	   me->locked, which the node ahead sets when it leaves the head position;
 *	2. as head, spins on @state until it takes the mutex with CAS 0 -> 1;
 *	3. leaves the queue as soon as it owns the mutex, handing the head position to the next
 *	   node (queue_release()), so its node is free for the next lock it takes (nesting);
 *	4. when its spin budget is spent, leaves the queue without the mutex: the head simply hands
 *	   the head position on; a node in the middle unqueues (queue_unqueue(), below) and then
 *	   sleeps as in the sleeping waiter line above.
 *
 * Unqueueing from the middle of an MCS queue, without a lock and with neighbours that may be
 * unqueueing at the same moment, takes three steps:
 *
 *	A. stabilise prev: CAS(prev->next, me -> 0). Once it succeeds prev cannot hand us the head
 *	   position any more, and prev (in its step B or in queue_release) waits for a new
 *	   prev->next or for @tail to move back to it. If the CAS fails, either prev is handing
 *	   us the head position (we will see me->locked = 1) or prev is unqueueing itself and its
 *	   step C will give us a new me->prev: re-read both and retry.
 *	B. stabilise next: wait until either @tail is us, then CAS(tail, me -> prev) and we are
 *	   done, or me->next is set, then take it with XCHG(me->next, 0).
 *	C. unlink: next->prev = prev; prev->next = next.
 *
 * Three races are known in this scheme (they are in the seed thread and the model
 * server/lock/model/amutex.pml reaches all three and checks that they are handled):
 *
 *	R1, order 3A,4A,3B,4B (node 4 queued behind node 3, both unqueue): 4's step B moves @tail
 *	    back to 3 after 3 started waiting for 3->next. Handled: step B waits for either
 *	    condition (tail == me or next != 0), never for next alone.
 *	R2, order 2A,2B,3A,2C,3B,3C (2 and 3 adjacent, both unqueue): if 2's step B only read
 *	    2->next, 3's step A could still succeed on 2->next and both unlinks "succeed", leaving
 *	    1 -> 3 and 2 -> 4. Handled: step B takes next with XCHG(me->next, 0), so 3's step A
 *	    cannot succeed on 2 until 2's step C hands it the new prev.
 *	R3, unlock/unqueue: if queue_release() read me->next and then set next->locked, next
 *	    could complete step A in between and leave, and the head position would go to a node
 *	    no longer queued. Handled: queue_release() takes next with XCHG too.
 *
 * Queue nodes and their lifetime
 * ------------------------------
 * @tail and node->next/prev hold 1 + a node's index in a global table (0 = none), the way the
 * kernel's spin queues encode CPU numbers, so the mutex stays 8 bytes. Each thread owns one node
 * from its first amutex call until it exits. A thread is in at most one queue at a time (it
 * queues only inside amutex_lock() and leaves before returning), which is why one node per
 * thread suffices even when locks nest. A thread that cannot get a node (table full, no memory)
 * still locks correctly; it just never spins.
 *
 * Rules:
 *  - The table is never freed and never moves (chunks are only added), because a neighbour may
 *    still touch a node after its owner left the queue: step A's CAS on a stale prev, the
 *    re-read of a stale me->prev. Such stale accesses are harmless: a CAS on a stale prev->next
 *    expecting "me" cannot succeed, since prev->next can only name me while prev is ahead of me
 *    in my current queue, and a node that left can only re-enter behind me.
 *  - A node is recycled only after its thread has exited (pthread key destructor), for the
 *    same reason the re-entry above is safe: the new owner queues behind everyone.
 *  - node->next: written by the node's successor (enqueue), by a successor's step A (to 0), by
 *    a canceller's step C (new successor), and taken with XCHG by the node itself (step B,
 *    queue_release). node->prev: written by the node itself (enqueue) and by a canceller's step
 *    C; read by the node itself. node->locked: set to 0 by the node itself before it enqueues,
 *    to 1 by the predecessor that hands over the head position, exactly once per queueing.
 *  - The second cache line of a node (spin average, counters, free-list link) is private to the
 *    owning thread; counters are atomics only so amutex_stats_read() may read them.
 *
 * The spin budget
 * ---------------
 * Per thread, an exponentially weighted average (weight 1/8) of how long its contended lock()
 * calls waited: the time to the lock when spinning won, the total time when the thread slept
 * but the lock came within SPIN_CAP_NS anyway (spinning a little longer would have won), and 0
 * when it slept longer than that (spinning was hopeless). The budget is twice the average,
 * clamped to [SPIN_MIN_NS, SPIN_CAP_NS]. The cap is far below a scheduler slice (milliseconds),
 * so with more runnable threads than cores a waiter soon gives its CPU back, and the floor keeps
 * probing whether spinning pays again. Time is read from CLOCK_MONOTONIC (vDSO) every few
 * iterations only.
 *
 * Depth rule: with C CPUs, at most C - 1 waiters can spin while the holder runs. A waiter that
 * queues behind C - 1 others (each node records how deep it queued) would only spin while
 * keeping the holder or an earlier spinner off a CPU, so it leaves the queue at once and sleeps;
 * with one CPU nobody spins. This is what the kernel gets from need_resched(), which user space
 * cannot see. On a 2-CPU machine only the head spins.
 *
 * amutex_set_spin_limit() and amutex_set_thread_spin_limit() fix the budget instead (tests,
 * benchmarks); a fixed budget ignores the depth rule, so tests can build deep queues.
 *
 * Waits that cannot be abandoned (step A's retry, step B, the head handing over) last only as
 * long as a neighbour needs to finish a few instructions; the kernel's version runs them with
 * preemption disabled, but here that neighbour may have been preempted, so after WAIT_SPINS
 * rounds the waiter yields its CPU instead of spinning through the neighbour's time slice.
 *
 * Memory ordering
 * ---------------
 * [M1] state: every RMW that takes the mutex is acquire; the unlock XCHG is release. This is
 *      the mutex's guarantee to its users. futex_wait/wake order nothing by themselves.
 * [M2] tail: every RMW on @tail is acq_rel. A node's own initialisation (next = 0, locked = 0),
 *      and a canceller's step A clearing prev->next, happen before its XCHG/CAS on @tail; the
 *      successor that reads that tail value and then writes node->next is therefore ordered
 *      after them (its write cannot be overwritten by the older 0).
 * [M3] next: every store or RMW writing X->next = Y is release, every XCHG taking it acquire.
 *      So what Y wrote before it was linked (locked = 0, its prev) happens before anything the
 *      node that took Y from X->next writes into Y: the hand-over's locked = 1, a step C's new
 *      Y->prev. Neither can be overwritten by Y's older initialisation.
 * [M4] locked: the hand-over store is release, the spinner's load acquire (pairs nothing else
 *      today; it keeps the queue fields the new head reads ordered after the hand-over).
 * The queue's own correctness needs nothing more: all its waits re-read and retry. No store-load
 * (Dekker) ordering is needed anywhere; the classic MCS race on prev->next is closed by making
 * both sides RMWs on the same word (R2, R3), which are totally ordered.
 *
 * Debug build (-DAMUTEX_DEBUG): the mutex records its owner; unlock by another thread, or
 * lock of a mutex the caller already holds, aborts; amutex_held() and amutex_assert_held() let
 * callers check their own locking rules; the queue paths yield the CPU at random
 * (amutex_debug_set_yield()) to widen every race window.
 */
#include "lock/amutex.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lock/xpthread.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

enum {
	ST_UNLOCKED = 0,
	ST_LOCKED = 1,
	ST_SLEEPERS = 2,
};

/* Spin budget bounds (amutex.h) and start value, in ns (see "The spin budget" above). */
#define SPIN_MIN_NS   AMUTEX_SPIN_MIN_NS
#define SPIN_CAP_NS   AMUTEX_SPIN_CAP_NS
#define SPIN_START_NS 4000
/* Read the clock once per this many spin iterations. */
#define SPIN_CLOCK_EVERY 8
/* Mandatory waits on a neighbour (steps A, B, hand-over) spin this long, then yield. */
#define WAIT_SPINS 256
/* Rounds a waiter watches the lock word before it queues (lock_slow()). */
#define PRESPIN 32

#define DEPTH_UNKNOWN UINT32_MAX

/* Node table: NODE_MAX_CHUNKS chunks of NODE_CHUNK nodes, allocated on demand. */
#define NODE_CHUNK_SHIFT 8
#define NODE_CHUNK	 (1u << NODE_CHUNK_SHIFT)
#define NODE_MAX_CHUNKS	 4096u

struct node_counters {
	_Atomic uint64_t fast, spun, slept, try_ok, try_failed;
	_Atomic uint64_t sleeps, wakes, unqueues, head_quits, spin_ns;
};

struct amutex_node {
	/* First cache line: the queue links, written by neighbours (rules in the top comment). */
	alignas(64) _Atomic uint32_t next;
	_Atomic uint32_t prev;
	_Atomic uint32_t locked;
	uint32_t idx1; /* 1 + table index; constant; 0 for a thread-local no-queue node */
	/*
	 * Spinners ahead of this node when it queued (an upper bound: some may have left since),
	 * DEPTH_UNKNOWN until known. Written by the node itself, read by its successor.
	 */
	_Atomic uint32_t depth;

	/* Second cache line: private to the owning thread (counters readable by anyone). */
	alignas(64) uint32_t spin_avg_ns;
	uint32_t free_next; /* registry free list, under reg.lock */
	long spin_limit;    /* amutex_set_thread_spin_limit(); < 0: the global setting */
	struct node_counters st;
};

static struct amutex_node *_Atomic node_chunks[NODE_MAX_CHUNKS];

/*
 * The registry hands table nodes to threads. reg.lock protects every field but the two atomics,
 * which are written under it and read without it by amutex_stats_read(). Lock nesting: reg.lock
 * is a leaf; it is taken at a thread's first amutex call and at its exit, never on the data path.
 */
static struct {
	pthread_mutex_t lock;
	uint32_t free_head;	/* 1 + index of the first free node, chained by free_next */
	_Atomic uint32_t nodes; /* nodes created; indices below it are valid */
	_Atomic uint32_t live;	/* nodes owned by a thread */
} reg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static pthread_key_t reg_key;

/*
 * CPUs this process may run on, minus one (the lock holder needs one): more spinners than this
 * cannot all be on a CPU while the holder is, so a waiter queued that deep does not spin. Set
 * once by reg_init(), before any thread's first lock (pthread_once orders it).
 */
static uint32_t max_spinners;

/* This thread's node: NULL until its first amutex call, then a table node (or the fallback). */
static __thread struct amutex_node *tls_node;
/* Used, for counting only, by a thread that could not get a table node; it never queues. */
static __thread struct amutex_node tls_fallback;

/* amutex_set_spin_limit(): < 0 adaptive, else a fixed budget in ns. */
static _Atomic long spin_limit = -1;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* Counters have a single writer (the owning thread), so a plain load+store suffices. */
static inline void count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		abort();
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "amutex: %s\n", what);
	abort();
}

/* ---- debug support ------------------------------------------------------------------------ */

#ifdef AMUTEX_DEBUG
static _Atomic unsigned debug_yield_one_in = 8;
static _Atomic uint32_t debug_next_id = 1;
static __thread uint32_t debug_id;
static __thread uint64_t debug_rng;

static uint32_t debug_self(void)
{
	if (!debug_id)
		debug_id = atomic_fetch_add_explicit(&debug_next_id, 1, memory_order_relaxed);
	return debug_id;
}

/* Marks a point on the queue paths where a preemption would be interesting. */
static void debug_yield(void)
{
	unsigned one_in = atomic_load_explicit(&debug_yield_one_in, memory_order_relaxed);

	if (!one_in)
		return;
	if (!debug_rng)
		debug_rng = now_ns() ^ ((uint64_t)debug_self() << 32) ^ 0x9e3779b97f4a7c15u;
	debug_rng ^= debug_rng << 13;
	debug_rng ^= debug_rng >> 7;
	debug_rng ^= debug_rng << 17;
	if (debug_rng % one_in == 0)
		(void)sched_yield();
}

#define DEBUG_YIELD() debug_yield()

static void debug_acquired(struct amutex *m)
{
	atomic_store_explicit(&m->owner, debug_self(), memory_order_relaxed);
}

static void debug_before_lock(struct amutex *m)
{
	if (atomic_load_explicit(&m->owner, memory_order_relaxed) == debug_self())
		die("lock of a mutex this thread already holds");
}

static void debug_before_unlock(struct amutex *m)
{
	if (atomic_load_explicit(&m->owner, memory_order_relaxed) != debug_self())
		die("unlock by a thread that does not hold the mutex");
	atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
}

/*
 * Only the holder writes its own id into @owner, and clears it before it releases: the answer
 * is exact for the calling thread, whatever other threads do with the mutex meanwhile.
 */
bool amutex_held(const struct amutex *m)
{
	return atomic_load_explicit(&m->owner, memory_order_relaxed) == debug_self();
}

void amutex_assert_held(const struct amutex *m)
{
	if (!amutex_held(m))
		die("rule broken: the caller must hold this mutex");
}

void amutex_assert_not_held(const struct amutex *m)
{
	if (amutex_held(m))
		die("rule broken: the caller must not hold this mutex");
}
#else
#define DEBUG_YIELD()                                                                              \
	do {                                                                                       \
	} while (0)
static inline void debug_acquired(struct amutex *m)
{
	(void)m;
}
static inline void debug_before_lock(struct amutex *m)
{
	(void)m;
}
static inline void debug_before_unlock(struct amutex *m)
{
	(void)m;
}
#endif

void amutex_debug_set_yield(unsigned one_in)
{
#ifdef AMUTEX_DEBUG
	atomic_store_explicit(&debug_yield_one_in, one_in, memory_order_relaxed);
#else
	(void)one_in;
#endif
}

/* ---- futex -------------------------------------------------------------------------------- */

/*
 * Sleep while *addr == val. Returns on a wake-up, a changed value, or a signal; true when the
 * thread did block (woken or interrupted), false when the value had already changed.
 */
static bool futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	long r = syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);

	if (r == 0)
		return true;
	if (errno == EAGAIN)
		return false;
	if (errno == EINTR)
		return true;
	die("futex wait failed");
}

static void futex_wake_one(_Atomic uint32_t *addr)
{
	if (syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) == -1)
		die("futex wake failed");
}

/* ---- the node table and registry ---------------------------------------------------------- */

/* Node 1 + i. Call only with an index taken from a queue word or a node link. */
static inline struct amutex_node *node_at(uint32_t idx1)
{
	uint32_t i = idx1 - 1;
	struct amutex_node *chunk;

	/* Acquire pairs with the release in reg_new_node(): the chunk's contents are visible. */
	chunk = atomic_load_explicit(&node_chunks[i >> NODE_CHUNK_SHIFT], memory_order_acquire);
	if (unlikely(!chunk))
		die("queue names a node that does not exist");
	return &chunk[i & (NODE_CHUNK - 1)];
}

/* Thread exit: give the node back. Runs in the exiting thread. */
static void reg_release(void *arg)
{
	struct amutex_node *n = arg;

	/* A later amutex call from another destructor re-registers (pthread repeats destructors). */
	tls_node = NULL;
	xlock(&reg.lock);
	n->free_next = reg.free_head;
	reg.free_head = n->idx1;
	atomic_store_explicit(&reg.live, atomic_load_explicit(&reg.live, memory_order_relaxed) - 1,
			      memory_order_relaxed);
	xunlock(&reg.lock);
}

static void reg_init(void)
{
	cpu_set_t set;
	long n = 0;

	if (pthread_key_create(&reg_key, reg_release))
		die("pthread_key_create failed");
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	max_spinners = n > 1 ? (uint32_t)(n - 1) : 0;
}

/* Caller holds reg.lock. Returns NULL when the table is full or memory is short. */
static struct amutex_node *reg_new_node(void)
{
	uint32_t i = atomic_load_explicit(&reg.nodes, memory_order_relaxed);
	uint32_t c = i >> NODE_CHUNK_SHIFT;
	struct amutex_node *chunk;

	xassert_held(&reg.lock);
	if (c >= NODE_MAX_CHUNKS)
		return NULL;
	chunk = atomic_load_explicit(&node_chunks[c], memory_order_relaxed);
	if (!chunk) {
		chunk = aligned_alloc(alignof(struct amutex_node),
				      NODE_CHUNK * sizeof(struct amutex_node));
		if (!chunk)
			return NULL;
		memset(chunk, 0, NODE_CHUNK * sizeof(struct amutex_node));
		for (uint32_t k = 0; k < NODE_CHUNK; k++)
			chunk[k].idx1 = (c << NODE_CHUNK_SHIFT) + k + 1;
		/* Never freed: see "Queue nodes and their lifetime". */
		atomic_store_explicit(&node_chunks[c], chunk, memory_order_release);
	}
	/* Release: amutex_stats_read() may read nodes below the published count. */
	atomic_store_explicit(&reg.nodes, i + 1, memory_order_release);
	return &chunk[i & (NODE_CHUNK - 1)];
}

/* First amutex call of this thread. May take reg.lock. */
static struct amutex_node *node_register(void)
{
	struct amutex_node *n = NULL;

	if (pthread_once(&reg_once, reg_init))
		die("pthread_once failed");
	xlock(&reg.lock);
	if (reg.free_head) {
		n = node_at(reg.free_head);
		reg.free_head = n->free_next;
	} else {
		n = reg_new_node();
	}
	if (n)
		atomic_store_explicit(&reg.live,
				      atomic_load_explicit(&reg.live, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	xunlock(&reg.lock);

	if (n && pthread_setspecific(reg_key, n)) {
		/* Cannot learn of this thread's exit: give the node back at once. */
		reg_release(n);
		n = NULL;
	}
	if (!n) {
		/* Degrade: this thread never spins; it still locks correctly via the futex. */
		n = &tls_fallback;
	}
	/* Counters carry over from the node's previous threads; the estimate starts afresh. */
	n->spin_avg_ns = SPIN_START_NS;
	n->spin_limit = -1;
	tls_node = n;
	return n;
}

static inline struct amutex_node *self_node(void)
{
	struct amutex_node *n = tls_node;

	return likely(n) ? n : node_register();
}

/* ---- the spin queue ----------------------------------------------------------------------- */

/* A wait on a neighbour's progress that must not be abandoned; the neighbour may be preempted. */
static inline void wait_a_bit(unsigned *n)
{
	if (++*n < WAIT_SPINS) {
		cpu_relax();
	} else {
		*n = 0;
		(void)sched_yield();
	}
}

/*
 * Wait until we can leave: either we are the tail, then move the tail back to @prev (0 when we
 * leave as head) and return 0, or a successor has linked itself, then take it (the XCHG is what
 * closes races R2 and R3) and return it. Used by step B and by queue_release().
 */
static uint32_t queue_wait_next(struct amutex *m, struct amutex_node *me, uint32_t prev)
{
	unsigned waits = 0;

	for (;;) {
		uint32_t expect = me->idx1;

		/*
		 * Checking the tail on every round, not only the next link, is the fix of R1: a
		 * successor's step B may have moved the tail back to us after we looked.
		 */
		if (atomic_load_explicit(&m->tail, memory_order_relaxed) == me->idx1 &&
		    atomic_compare_exchange_strong_explicit(&m->tail, &expect, prev,
							    memory_order_acq_rel, /* [M2] */
							    memory_order_relaxed))
			return 0;
		DEBUG_YIELD();
		if (atomic_load_explicit(&me->next, memory_order_relaxed)) {
			uint32_t next =
			    atomic_exchange_explicit(&me->next, 0, memory_order_acq_rel); /* [M3] */
			if (next)
				return next;
		}
		wait_a_bit(&waits);
	}
}

/* The head leaves the queue (with the mutex or without): hand the head position on. */
static void queue_release(struct amutex *m, struct amutex_node *me)
{
	uint32_t expect = me->idx1;
	uint32_t next;

	if (atomic_compare_exchange_strong_explicit(&m->tail, &expect, 0,
						    memory_order_acq_rel, /* [M2] */
						    memory_order_relaxed))
		return;
	DEBUG_YIELD();
	/* Take next with XCHG, not a load (R3): it might be in its step A right now. */
	next = atomic_exchange_explicit(&me->next, 0, memory_order_acq_rel); /* [M3] */
	if (!next)
		next = queue_wait_next(m, me, 0);
	if (next) {
		DEBUG_YIELD();
		atomic_store_explicit(&node_at(next)->locked, 1, memory_order_release); /* [M4] */
	}
}

/*
 * Leave the queue from behind @prev, without having been handed the head position. Returns
 * false when gone; true when the head position arrived meanwhile (we are the head, still
 * queued; the caller must queue_release()).
 */
static bool queue_unqueue(struct amutex *m, struct amutex_node *me, uint32_t prev)
{
	unsigned waits = 0;
	uint32_t next;

	/* Step A: stabilise prev. */
	for (;;) {
		struct amutex_node *p = node_at(prev);
		uint32_t expect = me->idx1;

		if (atomic_load_explicit(&p->next, memory_order_relaxed) == me->idx1 &&
		    atomic_compare_exchange_strong_explicit(
			&p->next, &expect, 0, memory_order_acq_rel, memory_order_relaxed))
			break;
		/* The CAS failed: prev took us from its next link to hand over the head... */
		if (atomic_load_explicit(&me->locked, memory_order_acquire)) /* [M4] */
			return true;
		/* ...or prev is unqueueing and its step C will give us a new prev. */
		DEBUG_YIELD();
		prev = atomic_load_explicit(&me->prev, memory_order_acquire);
		wait_a_bit(&waits);
	}
	/*
	 * prev can no longer reach us (its next link is 0 and only we or a step C on our behalf
	 * may write it), so no hand-over can be in flight to us.
	 */
	DEBUG_YIELD();

	/* Step B: stabilise next. */
	next = queue_wait_next(m, me, prev);
	if (!next)
		return false;

	/*
	 * Step C: unlink. Both neighbours stay put meanwhile: prev waits for its next link (in its
	 * own step B or queue_release()); next can only be handed the head position by us, and
	 * its own step A cannot succeed on us (our next link is 0), so it retries until both
	 * stores have landed, in either order.
	 */
	atomic_store_explicit(&node_at(next)->prev, prev, memory_order_release);
	DEBUG_YIELD();
	atomic_store_explicit(&node_at(prev)->next, next, memory_order_release); /* [M3] */
	return false;
}

/* ---- lock and unlock ---------------------------------------------------------------------- */

/* A budget fixed by amutex_set_[thread_]spin_limit(), or -1 when it adapts. */
static long spin_fixed(const struct amutex_node *me)
{
	return me->spin_limit >= 0 ? me->spin_limit
				   : atomic_load_explicit(&spin_limit, memory_order_relaxed);
}

static long spin_budget(const struct amutex_node *me)
{
	long fixed = spin_fixed(me);
	long b;

	if (fixed >= 0)
		return fixed;
	b = 2 * (long)me->spin_avg_ns;
	if (b < SPIN_MIN_NS)
		b = SPIN_MIN_NS;
	if (b > SPIN_CAP_NS)
		b = SPIN_CAP_NS;
	return b;
}

/* Feed one contended lock()'s outcome into this thread's estimate. */
static void spin_learn(struct amutex_node *me, uint64_t waited_ns, bool spun)
{
	int64_t sample = (int64_t)waited_ns;
	int64_t avg = me->spin_avg_ns;

	if (!spun && waited_ns > SPIN_CAP_NS)
		sample = 0; /* slept long: spinning was hopeless */
	if (sample > SPIN_CAP_NS)
		sample = SPIN_CAP_NS;
	avg += (sample - avg) / 8;
	me->spin_avg_ns = (uint32_t)avg;
}

struct spin_clock {
	uint64_t deadline;
	unsigned n;
};

/* True once the budget is spent; reads the clock every SPIN_CLOCK_EVERY calls. */
static inline bool spin_expired(struct spin_clock *sc)
{
	if (++sc->n < SPIN_CLOCK_EVERY)
		return false;
	sc->n = 0;
	return now_ns() >= sc->deadline;
}

/*
 * Spin for the mutex in the queue. True when the mutex is ours; the queue is left either way.
 * @adaptive: the budget is the adaptive one, so the depth rule applies too (a fixed budget, set
 * by a test, is spun in full wherever the waiter stands).
 */
static bool spin_phase(struct amutex *m, struct amutex_node *me, uint64_t t0, long budget,
		       bool adaptive)
{
	struct spin_clock sc = { .deadline = t0 + (uint64_t)budget, .n = SPIN_CLOCK_EVERY - 1 };
	uint32_t prev;

	atomic_store_explicit(&me->locked, 0, memory_order_relaxed);
	atomic_store_explicit(&me->next, 0, memory_order_relaxed);
	/* A successor that reads this before we know our depth assumes the worst [M2]. */
	atomic_store_explicit(&me->depth, DEPTH_UNKNOWN, memory_order_relaxed);
	prev = atomic_exchange_explicit(&m->tail, me->idx1, memory_order_acq_rel); /* [M2] */
	if (!prev) {
		atomic_store_explicit(&me->depth, 0, memory_order_relaxed);
	} else {
		uint32_t depth = atomic_load_explicit(&node_at(prev)->depth, memory_order_relaxed);

		depth = depth == DEPTH_UNKNOWN ? DEPTH_UNKNOWN : depth + 1;
		atomic_store_explicit(&me->depth, depth, memory_order_relaxed);
		/*
		 * me->prev before prev->next: a cancelling prev rewrites me->prev in its step C only
		 * after taking us from prev->next, so our store cannot overwrite its newer one [M3].
		 */
		atomic_store_explicit(&me->prev, prev, memory_order_relaxed);
		DEBUG_YIELD();
		atomic_store_explicit(&node_at(prev)->next, me->idx1,
				      memory_order_release); /* [M3] */
		/*
		 * Too deep: the head and those ahead already occupy every CPU the holder leaves, so
		 * whatever runs us now is keeping one of them (or the holder) off its CPU. Leave at
		 * the first look at the clock instead of spinning the budget away.
		 */
		if (adaptive && depth >= max_spinners)
			sc.deadline = 0;
		while (!atomic_load_explicit(&me->locked, memory_order_acquire)) { /* [M4] */
			if (spin_expired(&sc)) {
				if (!queue_unqueue(m, me, prev)) {
					count(&me->st.unqueues, 1);
					return false;
				}
				/* The head position came while we left: one look, then go. */
				sc.n = SPIN_CLOCK_EVERY - 1;
				sc.deadline = 0;
				break;
			}
			cpu_relax();
		}
		/* Now the head: those queueing behind us from here on are one deep. */
		atomic_store_explicit(&me->depth, 0, memory_order_relaxed);
	}

	/* Head: spin on the mutex word itself. */
	for (;;) {
		if (atomic_load_explicit(&m->state, memory_order_relaxed) == ST_UNLOCKED) {
			uint32_t expect = ST_UNLOCKED;

			DEBUG_YIELD();
			if (atomic_compare_exchange_weak_explicit(&m->state, &expect, ST_LOCKED,
								  memory_order_acquire, /* [M1] */
								  memory_order_relaxed)) {
				queue_release(m, me);
				return true;
			}
		}
		if (spin_expired(&sc)) {
			count(&me->st.head_quits, 1);
			queue_release(m, me);
			return false;
		}
		cpu_relax();
	}
}

static int __attribute__((noinline)) lock_slow(struct amutex *m, struct amutex_node *me)
{
	long budget = spin_budget(me);
	uint64_t t0, t1;
	bool slept = false;
	uint32_t c;

	/*
	 * A look before the queue: a contended lock is often free again within a short critical
	 * section, and taking it now spares the clock reads and the two RMWs on @tail (the
	 * mutex's own cache line) that queueing costs. Only while nobody queues, so it never
	 * overtakes a queued spinner for long, and only where spinning can pay at all. Taking
	 * the mutex with CAS 0 -> 1 here is the spinning waiter's line of the state table.
	 */
	if (budget > 0 && max_spinners > 0 && spin_fixed(me) < 0 &&
	    !atomic_load_explicit(&m->tail, memory_order_relaxed)) {
		for (int i = 0; i < PRESPIN; i++) {
			cpu_relax();
			c = ST_UNLOCKED;
			if (atomic_load_explicit(&m->state, memory_order_relaxed) == ST_UNLOCKED &&
			    atomic_compare_exchange_strong_explicit(&m->state, &c, ST_LOCKED,
								    memory_order_acquire, /* [M1] */
								    memory_order_relaxed)) {
				count(&me->st.spun, 1);
				return AMUTEX_SPUN;
			}
		}
	}
	t0 = now_ns();
	if (budget > 0 && me->idx1 && (max_spinners > 0 || spin_fixed(me) >= 0)) {
		bool won = spin_phase(m, me, t0, budget, spin_fixed(me) < 0);

		t1 = now_ns();
		count(&me->st.spin_ns, t1 - t0);
		if (won) {
			if (spin_fixed(me) < 0)
				spin_learn(me, t1 - t0, true);
			count(&me->st.spun, 1);
			return AMUTEX_SPUN;
		}
	}

	/*
	 * Sleep phase; see the state table at the top. First one more try as on the fast path: the
	 * lock often comes free while a waiter leaves the queue, and taking it as 1 rather than
	 * through XCHG(2) spares our unlock a futex_wake for sleepers that may not exist (any real
	 * sleeper is covered: it was woken, or will be, and writes 2 again itself).
	 */
	c = ST_UNLOCKED;
	if (atomic_compare_exchange_strong_explicit(&m->state, &c, ST_LOCKED,
						    memory_order_acquire, /* [M1] */
						    memory_order_relaxed))
		goto out;
	c = atomic_exchange_explicit(&m->state, ST_SLEEPERS, memory_order_acquire); /* [M1] */
	while (c != ST_UNLOCKED) {
		if (c != ST_LOCKED && c != ST_SLEEPERS)
			die("corrupt mutex state");
		if (futex_wait(&m->state, ST_SLEEPERS)) {
			slept = true;
			count(&me->st.sleeps, 1);
		}
		c = atomic_exchange_explicit(&m->state, ST_SLEEPERS,
					     memory_order_acquire); /* [M1] */
	}
out:
	if (spin_fixed(me) < 0)
		spin_learn(me, now_ns() - t0, false);
	count(slept ? &me->st.slept : &me->st.spun, 1);
	return slept ? AMUTEX_SLEPT : AMUTEX_SPUN;
}

void amutex_init(struct amutex *m)
{
	memset(m, 0, sizeof(*m));
}

int amutex_lock(struct amutex *m)
{
	struct amutex_node *me = self_node();
	uint32_t expect = ST_UNLOCKED;
	int how;

	debug_before_lock(m);
	if (likely(atomic_compare_exchange_strong_explicit(&m->state, &expect, ST_LOCKED,
							   memory_order_acquire, /* [M1] */
							   memory_order_relaxed))) {
		count(&me->st.fast, 1);
		how = AMUTEX_FAST;
	} else {
		how = lock_slow(m, me);
	}
	debug_acquired(m);
	return how;
}

bool amutex_trylock(struct amutex *m)
{
	struct amutex_node *me = self_node();
	uint32_t expect = ST_UNLOCKED;

	/* Look first: a failing CAS would still take the cache line away from the owner. */
	if (atomic_load_explicit(&m->state, memory_order_relaxed) != ST_UNLOCKED ||
	    !atomic_compare_exchange_strong_explicit(&m->state, &expect, ST_LOCKED,
						     memory_order_acquire, /* [M1] */
						     memory_order_relaxed)) {
		count(&me->st.try_failed, 1);
		return false;
	}
	count(&me->st.try_ok, 1);
	debug_acquired(m);
	return true;
}

void amutex_unlock(struct amutex *m)
{
	uint32_t c;

	debug_before_unlock(m);
	c = atomic_exchange_explicit(&m->state, ST_UNLOCKED, memory_order_release); /* [M1] */
	if (likely(c == ST_LOCKED))
		return;
	if (c != ST_SLEEPERS)
		die("unlock of a mutex that is not locked");
	/* The word may already be reused or freed; a private futex wake never touches memory. */
	futex_wake_one(&m->state);
	count(&self_node()->st.wakes, 1);
}

/* ---- statistics and hooks ----------------------------------------------------------------- */

void amutex_stats_read(struct amutex_stats *out)
{
	uint32_t n = atomic_load_explicit(&reg.nodes, memory_order_acquire);

	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < n; i++) {
		const struct node_counters *s = &node_at(i + 1)->st;
		uint64_t fast = atomic_load_explicit(&s->fast, memory_order_relaxed);
		uint64_t spun = atomic_load_explicit(&s->spun, memory_order_relaxed);
		uint64_t slept = atomic_load_explicit(&s->slept, memory_order_relaxed);
		uint64_t try_ok = atomic_load_explicit(&s->try_ok, memory_order_relaxed);

		out->acquired += fast + spun + slept + try_ok;
		out->fast += fast + try_ok;
		out->spun += spun;
		out->slept += slept;
		out->sleeps += atomic_load_explicit(&s->sleeps, memory_order_relaxed);
		out->wakes += atomic_load_explicit(&s->wakes, memory_order_relaxed);
		out->unqueues += atomic_load_explicit(&s->unqueues, memory_order_relaxed);
		out->head_quits += atomic_load_explicit(&s->head_quits, memory_order_relaxed);
		out->trylock_failed += atomic_load_explicit(&s->try_failed, memory_order_relaxed);
		out->spin_ns += atomic_load_explicit(&s->spin_ns, memory_order_relaxed);
	}
	out->nodes = n;
	out->threads = atomic_load_explicit(&reg.live, memory_order_relaxed);
}

void amutex_set_spin_limit(long ns)
{
	atomic_store_explicit(&spin_limit, ns < 0 ? -1 : ns, memory_order_relaxed);
}

void amutex_set_thread_spin_limit(long ns)
{
	self_node()->spin_limit = ns < 0 ? -1 : ns;
}

long amutex_spin_budget(void)
{
	return spin_budget(self_node());
}
