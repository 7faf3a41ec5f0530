/* SPDX-License-Identifier: MIT */
/*
 * libsemvisor-fast.so, preloaded by `semvisor-run --fast`: semop(2) and semtimedop(2) done in
 * user space when they can complete at once, with the program's side of the fast path
 * (server/engine/fastword.h, server/engine/model/fastpath.pml) on memory the supervisor hands
 * over (server/notify/fastabi.h). Every other call, and every one the fast path declines, is
 * the trapped system call, as without the library: one sop that changes a value is all the
 * fast path takes; waits, wake-ups, wait-for-zero, several sops and everything of semctl go to
 * the supervisor.
 *
 * Per process: a table of the sets it has mapped, by semid; per thread: one of the page's
 * FW_PENDING pending slots (threads beyond that many use the trapped call). A set is mapped on
 * its first fast operation in this image. A process not served by semvisor (the kernel answers
 * EINVAL to the request for a set that exists) turns the library off for good, at the cost of
 * that one call.
 *
 * Memory of a set whose storage was revoked (IPC_SET, IPC_RMID) stays mapped until no thread
 * can be using it: each thread in a fast operation publishes the retire generation it started
 * in (active[]), and retired mappings older than every published one are unmapped by the next
 * mapping.
 *
 * A call that would wait first waits here, for a few tens of microseconds (wait_here()), and
 * parks in the supervisor only if the value does not come back meanwhile.
 *
 * Mappings are not inherited (MADV_DONTFORK): a child has no undo list of its own yet, and
 * maps with its own page; the fork handler forgets the parent's table in the child. A signal
 * handler's semop inside a fast operation of its thread takes the trapped call, without the
 * slot, since the interrupted operation holds the slot's pending record. A handler that jumps
 * out of a fast operation (siglongjmp) leaves its thread busy for good, so every later call of
 * the thread is a trapped one without the slot: the operation it left may hold a word and a
 * valid pending record, which only the process's exit settles (as for a thread killed there),
 * and a call with the slot would tell the supervisor that operation was over.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine/fastword.h"
#include "engine/sem.h"
#include "notify/fastabi.h"

#define EXPORT __attribute__((visibility("default")))

#define FL_SETS 256 /* sets mapped at once; a set beyond that many takes the trapped call */

enum fl_state {
	FL_EMPTY,   /* never used: ends a probe */
	FL_MAPPED,  /* the set's storage is mapped */
	FL_NONE,    /* the set has no fast path for this process (no alter permission, ...) */
	FL_RETIRED, /* its storage was revoked: unmapped once no thread can be in it */
};

struct fl_set {
	_Atomic int state;
	_Atomic int semid;
	uint64_t retired_gen; /* retire_gen when it was retired */
	struct sv_fast_map m;
	_Atomic uint64_t *words;
	struct fw_pub *pub;
	struct fw_page *page;
	size_t words_len, pub_len, page_len;
};

struct fl_thread {
	int slot; /* -1: none yet, -2: none to be had */
	bool busy;
	uint32_t seq; /* the thread's trapped calls, numbered */
};

static struct fl_set sets[FL_SETS];
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool off;		    /* not served by semvisor, or the supervisor refuses */
static _Atomic uint64_t slots_used; /* bit k: pending slot k has a thread */
static _Atomic uint64_t retire_gen = 1;
/*
 * retire_gen at the start of slot k's operation, 0 outside one: each on a cache line of its
 * own, since every fast operation writes its slot's twice.
 */
static struct {
	_Alignas(64) _Atomic uint64_t gen;
} active[FW_PENDING];
static __thread struct fl_thread self = { .slot = -1 };
static pthread_key_t slot_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* ---- the trapped calls ---- */

/*
 * fastabi.h: the slot for the thread's doomed operation, and a number new to each call; mark
 * SV_FAST_MARK, or SV_FAST_PROBE for wait_here()'s tries.
 */
static long trapped_semop(int semid, struct sembuf *sops, size_t nsops,
			  const struct timespec *timeout, int slot, uint64_t mark)
{
	uint64_t tag = (uint64_t)++self.seq << 8 | (uint64_t)(slot + 1);

	return syscall(SYS_semtimedop, semid, sops, nsops, timeout, tag, mark);
}

/* ---- threads ---- */

static void slot_free(void *arg)
{
	atomic_fetch_and(&slots_used, ~(UINT64_C(1) << ((uintptr_t)arg - 1)));
}

static void forget_in_child(void);

static void spin_read(void);

static void init_once(void)
{
	spin_read();
	pthread_key_create(&slot_key, slot_free);
	pthread_atfork(NULL, NULL, forget_in_child);
}

/* The calling thread's pending slot, or -1 when all are taken. */
static int my_slot(void)
{
	uint64_t used;
	int k;

	if (self.slot != -1)
		return self.slot >= 0 ? self.slot : -1;
	pthread_once(&once, init_once);
	used = atomic_load(&slots_used);
	do {
		if (~used == 0) {
			self.slot = -2;
			return -1;
		}
		k = __builtin_ctzll(~used);
	} while (!atomic_compare_exchange_weak(&slots_used, &used, used | (UINT64_C(1) << k)));
	self.slot = k;
	pthread_setspecific(slot_key, (void *)(uintptr_t)(k + 1)); /* freed at the thread's exit */
	return k;
}

/* The child of fork: none of the parent's mappings came along, nor its other threads. */
static void forget_in_child(void)
{
	memset(sets, 0, sizeof(sets));
	for (int k = 0; k < FW_PENDING; k++)
		atomic_store(&active[k].gen, 0);
	atomic_store(&slots_used, self.slot >= 0 ? UINT64_C(1) << self.slot : 0);
	pthread_mutex_init(&map_lock, NULL);
}

/* ---- the table ---- */

static unsigned hash(int semid)
{
	return ((unsigned)semid * 2654435761u) % FL_SETS;
}

/* The entry of semid (mapped or none), or NULL. Any thread, no lock. */
static struct fl_set *lookup(int semid)
{
	for (unsigned i = 0, h = hash(semid); i < FL_SETS; i++) {
		struct fl_set *e = &sets[(h + i) % FL_SETS];
		int st = atomic_load_explicit(&e->state, memory_order_acquire);

		if (st == FL_EMPTY)
			return NULL;
		if ((st == FL_MAPPED || st == FL_NONE) && atomic_load(&e->semid) == semid)
			return e;
	}
	return NULL;
}

static bool mapped(int semid)
{
	struct fl_set *e = lookup(semid);

	return e && atomic_load(&e->state) == FL_MAPPED;
}

static void unmap(struct fl_set *e)
{
	munmap((void *)e->words, e->words_len);
	munmap(e->pub, e->pub_len);
	munmap(e->page, e->page_len);
}

/* Retired entries no operation can still be in are unmapped and usable. Caller holds map_lock. */
static void reclaim(void)
{
	uint64_t oldest = UINT64_MAX;

	for (int k = 0; k < FW_PENDING; k++) {
		uint64_t a = atomic_load(&active[k].gen);

		if (a && a < oldest)
			oldest = a;
	}
	for (int i = 0; i < FL_SETS; i++) {
		struct fl_set *e = &sets[i];

		if (atomic_load(&e->state) == FL_RETIRED && e->words && e->retired_gen < oldest) {
			unmap(e);
			e->words = NULL;
		}
	}
}

/* A free entry for semid, keeping probes of the others whole. Caller holds map_lock. */
static struct fl_set *slot_for(int semid)
{
	reclaim();
	for (unsigned i = 0, h = hash(semid); i < FL_SETS; i++) {
		struct fl_set *e = &sets[(h + i) % FL_SETS];
		int st = atomic_load(&e->state);

		if (st == FL_EMPTY || (st == FL_RETIRED && !e->words))
			return e;
	}
	return NULL;
}

static void *map_fd(int fd, int prot, size_t *len)
{
	struct stat st;
	void *p = MAP_FAILED;

	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		*len = (size_t)st.st_size;
		p = mmap(NULL, *len, prot, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED)
			madvise(p, *len, MADV_DONTFORK);
	}
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/* Asks the supervisor for semid's files and maps them: the entry, or NULL. */
static struct fl_set *map_set(int semid)
{
	struct fl_set *e;
	struct sv_fast_map m = { 0 };
	int fd[SV_FAST_FILES], err = 0;

	pthread_mutex_lock(&map_lock);
	e = lookup(semid);
	if (e || atomic_load(&off))
		goto out;
	e = slot_for(semid);
	if (!e)
		goto out; /* the table is full: this set takes the trapped call */
	for (int i = 0; i < SV_FAST_FILES; i++) {
		fd[i] = (int)syscall(SYS_semctl, semid, i, SV_FAST_CMD, &m);
		if (fd[i] < 0) {
			err = errno;
			while (i-- > 0)
				close(fd[i]);
			break;
		}
	}
	if (err == EINVAL && syscall(SYS_semctl, semid, 0, GETVAL) >= 0) {
		/* the set exists, yet the request is unknown: the kernel's own semaphores */
		atomic_store(&off, true);
		e = NULL;
		goto out;
	}
	if (err == EOPNOTSUPP) {
		atomic_store(&off, true); /* this supervisor has no fast path (a journal) */
		e = NULL;
		goto out;
	}
	if (!err) {
		e->page = map_fd(fd[SV_FAST_PAGE], PROT_READ | PROT_WRITE, &e->page_len);
		e->words = map_fd(fd[SV_FAST_WORDS], PROT_READ | PROT_WRITE, &e->words_len);
		e->pub = map_fd(fd[SV_FAST_PUB], PROT_READ, &e->pub_len);
		if (!e->page || !e->words || !e->pub) {
			if (e->page)
				munmap(e->page, e->page_len);
			if (e->words)
				munmap((void *)e->words, e->words_len);
			if (e->pub)
				munmap(e->pub, e->pub_len);
			err = ENOMEM;
		}
	}
	e->words = err ? NULL : e->words;
	e->m = m;
	atomic_store(&e->semid, semid);
	/* no fast path for it (no permission, no memory, ...) until the set is made again */
	atomic_store_explicit(&e->state, err ? FL_NONE : FL_MAPPED, memory_order_release);
out:
	pthread_mutex_unlock(&map_lock);
	return e;
}

/* The storage was revoked: the next operation maps again. */
static void retire(struct fl_set *e)
{
	pthread_mutex_lock(&map_lock);
	if (atomic_load(&e->state) == FL_MAPPED) {
		e->retired_gen = atomic_fetch_add(&retire_gen, 1);
		atomic_store(&e->state, FL_RETIRED);
	}
	pthread_mutex_unlock(&map_lock);
}

/* ---- the fast path ---- */

/*
 * A test hook: SEMVISOR_FASTLIB_KILL=STEP:N[:SIGNAL] sends the calling thread SIGNAL (a
 * number; SIGKILL if left out) before step STEP (enum fw_step) of the process's Nth fast
 * operation, as kill -9 or a signal at that instant would: a handler runs there, and may jump
 * out of the operation or make calls of its own. Read at the process's first fast operation.
 * Besides it, the library reads only SEMVISOR_FAST_SPIN_US (wait_here()).
 */
static struct {
	pthread_once_t once;
	int step, sig;
	atomic_long left; /* operations before the one that is hit */
} kill_at = { .once = PTHREAD_ONCE_INIT };

static void kill_at_read(void)
{
	const char *v = getenv("SEMVISOR_FASTLIB_KILL");
	int got = 0;
	long n;

	kill_at.sig = SIGKILL;
	if (v)
		got = sscanf(v, "%d:%ld:%d", &kill_at.step, &n, &kill_at.sig);
	if (got >= 2 && kill_at.step > 0 && kill_at.step < FW_STEPS && n > 0 && kill_at.sig > 0 &&
	    kill_at.sig < NSIG)
		atomic_store(&kill_at.left, n);
	else
		kill_at.step = 0;
}

/* The operation that is hit (its hook is this one alone). */
static int kill_hook(void *arg, enum fw_step step)
{
	(void)arg;
	if ((int)step == kill_at.step)
		raise(kill_at.sig);
	return 0;
}

/*
 * Enters entry e of semid for semaphore num: publishes the thread in active[slot], so that
 * reclaim() leaves the mapping alone, then reads the entry again. e if it is still semid's
 * mapped storage and has semaphore num, else NULL; leave() after, either way. Caller is busy
 * (self.busy): a signal handler's semop meanwhile would leave() for it.
 */
static struct fl_set *enter(int slot, struct fl_set *e, int semid, unsigned num)
{
	atomic_store(&active[slot].gen, atomic_load(&retire_gen));
	if (atomic_load_explicit(&e->state, memory_order_acquire) != FL_MAPPED ||
	    atomic_load(&e->semid) != semid || num >= e->m.nsems)
		return NULL;
	return e;
}

static void leave(int slot)
{
	atomic_store(&active[slot].gen, 0);
}

/* One sop on a set: true if done here (the call returns 0), false for the trapped call. */
static bool fast(int slot, int semid, const struct sembuf *sop)
{
	struct fl_set *e;
	struct fw_op op;
	enum fw_result r;
	bool done = false;

	e = lookup(semid);
	if (!e)
		e = map_set(semid);
	if (!e)
		return false;
	if (!enter(slot, e, semid, sop->sem_num))
		goto out;
	op = (struct fw_op){
		.word = fw_word_at(e->words, sop->sem_num),
		.pub = e->pub,
		.page = e->page,
		.map_epoch = e->m.epoch,
		.owner = fw_owner(e->m.page, (unsigned)slot),
		.tag = fw_tag(e->m.page),
		.slot = (unsigned)slot,
		.semnum = sop->sem_num,
		.d = sop->sem_op,
		.undo = (sop->sem_flg & SEM_UNDO) != 0,
	};
	pthread_once(&kill_at.once, kill_at_read);
	if (kill_at.step && atomic_fetch_sub(&kill_at.left, 1) == 1)
		op.hook = kill_hook;
	r = fw_try(&op);
	if (r == FW_ASK) {
		/* revoked after its A5: counted unless the revocation doomed it */
		if (syscall(SYS_semctl, semid, slot, SV_FAST_ASK, &e->m) == 1) {
			fw_done(&op);
			r = FW_DONE;
		} else {
			r = fw_abandon(&op);
		}
	}
	done = r == FW_DONE;
	if (!done && atomic_load(&e->page->epoch) != e->m.epoch)
		retire(e);
out:
	leave(slot);
	return done;
}

/* ---- waiting here first ---- */

/*
 * A call that cannot complete yet would park in the supervisor: a trapped call, and its answer
 * when another call wakes it. While it is parked, every operation on the semaphore is a
 * trapped call too (the word is the supervisor's until nobody waits), the releasing one
 * included. Where a semaphore guards a short critical section, as a mutex, the wait is far
 * shorter than that, and once one process has parked the others follow: every operation
 * becomes a trapped call. So a call that would wait first waits here, for up to spin_ns,
 * yielding the CPU while the value is short, and parks only if it does not come back.
 *
 * Nothing is relaxed by it. While the call waits here it has not reached the supervisor: for
 * every other process it is a call not yet made, as a thread the kernel preempts before its
 * system call's entry is; it holds nothing, is not counted as waiting (GETNCNT), and takes
 * nothing from a process parked before it (their wake-ups are the supervisor's, on a word it
 * holds). It ends in one of three ways:
 *  - a fast operation succeeds: the call's completion;
 *  - the word shows a value the operation can take, but the fast path may not take it (the
 *    operation changes sempid, the supervisor holds the word): a probe, the same operation
 *    with IPC_NOWAIT as a trapped call, marked SV_FAST_PROBE. It completes the operation as
 *    the call would have at that instant, or fails with EAGAIN having changed nothing, and
 *    then the wait goes on. Its other errors are the call's: the checks that make them come
 *    before any wait;
 *  - spin_ns is over: the call is made as it came, and parks.
 * A signal handler that runs meanwhile runs as before the call (a blocking semop's EINTR
 * comes from a handler run while it is parked), so the call goes on after it. Only a call of
 * one decrement without IPC_NOWAIT and without a timeout waits here: reading the timeout would
 * be reading the program's memory, which only the trapped call may do (EFAULT). What the word
 * says is only a hint: a program can write anything there, and a wrong one costs only the
 * wait, which is bounded. server/engine/model/fastpath.pml checks the protocol with it
 * (WAITING FIRST; make verify's waits checks): kills at any step, revocation, sempid, and
 * that a lock is never held twice.
 *
 * spin_ns: SEMVISOR_FAST_SPIN_US microseconds (semvisor-run --fast-spin), 50 by default: a
 * park and its wake-up take about that much here (bench/floor: two round trips of 17-25 us),
 * so a wait that long costs no more spun than parked. 0: a call that would wait parks at once.
 */
#define SPIN_US_DEFAULT 50
#define SPIN_US_MAX	1000000

static int64_t spin_ns;

static void spin_read(void)
{
	const char *v = getenv("SEMVISOR_FAST_SPIN_US");
	char *end;
	long us = SPIN_US_DEFAULT;

	if (v && *v) {
		us = strtol(v, &end, 10);
		if (*end || us < 0 || us > SPIN_US_MAX)
			us = SPIN_US_DEFAULT; /* semvisor-run checks what it sets */
	}
	spin_ns = (int64_t)us * 1000;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Whether sop could take the value its word shows: 1 or 0, or -1 for no word to read (the set
 * is not mapped here, or was revoked). Busy, as fast() is, so that its enter() holds.
 */
static int word_allows(int slot, int semid, const struct sembuf *sop)
{
	struct fl_set *e = lookup(semid);
	int could = -1;

	if (!e)
		return -1;
	self.busy = true;
	if (enter(slot, e, semid, sop->sem_num)) {
		uint64_t w = atomic_load(fw_word_at(e->words, sop->sem_num));

		could = (int)fw_val(w) + sop->sem_op >= 0;
	}
	leave(slot);
	self.busy = false;
	return could;
}

/*
 * sop, one decrement that may wait, found no value on the fast path: waits here, as above.
 * 0 when the operation was done, -1 with errno for the call's error, 1 to make the call.
 */
static int wait_here(int slot, int semid, struct sembuf *sop)
{
	int saved = errno, could;
	int64_t end = now_ns() + spin_ns;
	bool done;

	while ((could = word_allows(slot, semid, sop)) >= 0) {
		if (could) {
			struct sembuf probe = *sop;

			probe.sem_flg |= IPC_NOWAIT;
			if (trapped_semop(semid, &probe, 1, NULL, slot, SV_FAST_PROBE) == 0) {
				errno = saved;
				return 0;
			}
			if (errno != EAGAIN)
				return -1;
		} else {
			sched_yield();
		}
		if (now_ns() >= end)
			break;
		self.busy = true;
		done = fast(slot, semid, sop);
		self.busy = false;
		if (done) {
			errno = saved;
			return 0;
		}
	}
	errno = saved;
	return 1;
}

EXPORT int semtimedop(int semid, struct sembuf *sops, size_t nsops, const struct timespec *timeout)
{
	int slot = -1;

	if (!self.busy && !atomic_load_explicit(&off, memory_order_relaxed)) {
		slot = my_slot();
		if (slot >= 0 && nsops == 1 && sops[0].sem_op != 0) {
			bool done;

			self.busy = true;
			done = fast(slot, semid, &sops[0]);
			self.busy = false;
			if (done)
				return 0;
			if (sops[0].sem_op < 0 && !(sops[0].sem_flg & IPC_NOWAIT) && !timeout &&
			    spin_ns > 0) {
				int r = wait_here(slot, semid, &sops[0]);

				if (r <= 0)
					return r;
			}
		}
		/* the slot resolves this thread's doomed operation only on a set mapped here */
		if (slot >= 0 && !mapped(semid))
			slot = -1;
	}
	return (int)trapped_semop(semid, sops, nsops, timeout, slot, SV_FAST_MARK);
}

EXPORT int semop(int semid, struct sembuf *sops, size_t nsops)
{
	return semtimedop(semid, sops, nsops, NULL);
}
