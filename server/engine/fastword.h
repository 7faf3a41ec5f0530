/* SPDX-License-Identifier: MIT */
/*
 * The fast path's shared memory, and the steps of its protocol on both sides. The protocol is
 * written down, and model-checked, in server/engine/model/fastpath.pml. The step names here
 * (A1..A6, E1, E2, take, give, freeze) are that file's.
 *
 * Header-only, and calling nothing else in semvisor. The program's side (fw_try, fw_done,
 * fw_finish, fw_abandon) runs in the preloaded library, which links none of the engine. The
 * supervisor's side (fw_take, fw_give, fw_publish, fw_mirror, fw_settled_entry,
 * fw_frozen_entry) runs under the set's lock.
 *
 * Three kinds of memory: the set's words, which every process with fast access maps writable;
 * what the supervisor publishes (struct fw_pub), which they map read-only; and each process's
 * private page (struct fw_page). The supervisor reads only the words and the private pages, and
 * a program can write anything into both. So every field the supervisor decodes is clamped or
 * range-checked by the function that decodes it, or by its caller where it says so. No
 * function waits for a word to change, and every loop is bounded. All atomics are
 * sequentially consistent: the model assumes it, and each step is one atomic access.
 */
#ifndef SV_ENGINE_FASTWORD_H
#define SV_ENGINE_FASTWORD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define FW_SEMVMX 32767 /* the kernel's SEMVMX */
/* A semadj stays in [-SEMAEM - 1, SEMAEM], as the kernel checks it: exactly an int16_t. */
#define FW_ADJ_MIN (-32768)
#define FW_ADJ_MAX 32767

/*
 * A semaphore's word in the set's storage:
 *   bits  0-15  the value, while SLOW is clear
 *   bit   16    SLOW: the supervisor holds the word
 *   bits 17-39  the owner of a fast operation holding the word, 0 for none (fw_owner)
 *   bits 40-63  fast operations since the supervisor last gave the word (fw_count). A5 adds
 *               one in the exchange that applies the value, so the count is exact whatever
 *               is killed when, and costs no store of its own; the supervisor takes it into
 *               the semaphore's statistics at each take, and gives the word back with 0. A
 *               full count sends the operation to the trapped call, whose take empties it.
 *               Statistics only: a program may write any count there.
 */
#define FW_VAL_MASK  UINT64_C(0xffff)
#define FW_SLOW	     (UINT64_C(1) << 16)
#define FW_OWN_SHIFT 17
#define FW_OWN_MAX   ((UINT32_C(1) << 23) - 1)
#define FW_OWN_MASK  ((uint64_t)FW_OWN_MAX << FW_OWN_SHIFT)
#define FW_CNT_SHIFT 40
#define FW_CNT_MAX   ((UINT32_C(1) << 24) - 1)
#define FW_CNT_ONE   (UINT64_C(1) << FW_CNT_SHIFT)
#define FW_GEN_MASK  ((UINT32_C(1) << 24) - 1)
#define FW_TAG_MASK  ((UINT32_C(1) << 24) - 1)

/*
 * The words of a set are a cache line apart, as the engine's semaphores are (engine.h's struct
 * sv_sem): threads working on neighbouring semaphores never write the same line.
 */
#define FW_WORD_STRIDE 8 /* uint64_t per word */

static inline _Atomic uint64_t *fw_word_at(_Atomic uint64_t *words, unsigned num)
{
	return &words[(size_t)num * FW_WORD_STRIDE];
}

static inline unsigned fw_val(uint64_t w)
{
	return (unsigned)(w & FW_VAL_MASK);
}

static inline bool fw_slow(uint64_t w)
{
	return (w & FW_SLOW) != 0;
}

static inline uint32_t fw_own(uint64_t w)
{
	return (uint32_t)(w >> FW_OWN_SHIFT) & FW_OWN_MAX;
}

static inline uint32_t fw_count(uint64_t w)
{
	return (uint32_t)(w >> FW_CNT_SHIFT);
}

static inline uint64_t fw_word(unsigned val, bool slow, uint32_t own)
{
	return ((uint64_t)val & FW_VAL_MASK) | (slow ? FW_SLOW : 0) |
	       ((uint64_t)(own & FW_OWN_MAX) << FW_OWN_SHIFT);
}

/*
 * What the supervisor publishes about a set, in a sealed memfd (F_SEAL_FUTURE_WRITE) that
 * programs map read-only, so that no program can forge it. A fast operation goes ahead only if
 * it would change none of it: it changes the value and the caller's semadj, and nothing a
 * reader sees besides.
 *   otime    the set's sem_otime (seconds). It only moves forward (the engine keeps the
 *            maximum), so an operation at a time `now` <= otime leaves it as it is.
 *   sem[i]   bits 0-23: semaphore i's SETVAL generation; bits 24-47: the tag of its sempid,
 *            the private page index + 1 of the process that is sempid, 0 for one without a
 *            page. An operation by that process leaves sempid as it is.
 * sem[i] is written only while the supervisor holds word i, so it is stable while a fast
 * operation holds the word.
 */
struct fw_pub {
	_Atomic int64_t otime;
	_Atomic uint64_t sem[];
};

static inline uint64_t fw_pub_sem(uint32_t gen, uint32_t tag)
{
	return (uint64_t)(gen & FW_GEN_MASK) | ((uint64_t)(tag & FW_TAG_MASK) << 24);
}

static inline uint32_t fw_pub_gen(uint64_t p)
{
	return (uint32_t)p & FW_GEN_MASK;
}

static inline uint32_t fw_pub_tag(uint64_t p)
{
	return (uint32_t)(p >> 24) & FW_TAG_MASK;
}

/* The tag of private page `page`: what fw_pub_sem() publishes as its process's sempid. */
static inline uint32_t fw_tag(uint32_t page)
{
	return page + 1;
}

/*
 * Owners: each private page of a set has an index (given by the supervisor, below FW_PAGES),
 * each thread in a fast operation a pending slot of that page (below FW_PENDING). An index is
 * given again only after no published tag names it (fw_tag).
 */
#define FW_PENDING 64
#define FW_PAGES   ((FW_OWN_MAX + 1) / FW_PENDING - 1)

static inline uint32_t fw_owner(uint32_t page, unsigned slot)
{
	return page * FW_PENDING + slot + 1;
}

/* Decodes an owner read from a word; false for 0 or a number no page of `npages` has. */
static inline bool fw_owner_of(uint32_t own, uint32_t npages, uint32_t *page, unsigned *slot)
{
	if (own == 0 || (own - 1) / FW_PENDING >= npages)
		return false;
	*page = (own - 1) / FW_PENDING;
	*slot = (own - 1) % FW_PENDING;
	return true;
}

/*
 * A semadj entry in a private page: bits 0-15 the adjustment (two's complement), bits 16-39
 * the semaphore's generation when it was written. An entry of another generation counts as 0:
 * SETVAL clears every process's entries for the semaphore by bumping its generation.
 */
static inline uint64_t fw_entry(int adj, uint32_t gen)
{
	return ((uint64_t)(uint16_t)(int16_t)adj) | ((uint64_t)(gen & FW_GEN_MASK) << 16);
}

static inline int fw_entry_raw(uint64_t e)
{
	return (int16_t)(uint16_t)(e & 0xffff);
}

static inline uint32_t fw_entry_gen(uint64_t e)
{
	return (uint32_t)(e >> 16) & FW_GEN_MASK;
}

/* The semadj an entry stands for under generation `gen`: in [FW_ADJ_MIN, FW_ADJ_MAX]. */
static inline int fw_entry_adj(uint64_t e, uint32_t gen)
{
	return fw_entry_gen(e) == (gen & FW_GEN_MASK) ? fw_entry_raw(e) : 0;
}

static inline bool fw_adj_ok(int adj)
{
	return adj >= FW_ADJ_MIN && adj <= FW_ADJ_MAX;
}

/*
 * A pending record: bits 0-7 a sequence number, odd while the record is valid; bits 8-23 the
 * semaphore; bits 24-63 its entry before the operation in flight.
 */
static inline uint64_t fw_pending(unsigned seq, unsigned semnum, uint64_t entry)
{
	return (uint64_t)(seq & 0xff) | ((uint64_t)(semnum & 0xffff) << 8) |
	       ((entry & ((UINT64_C(1) << 40) - 1)) << 24);
}

static inline bool fw_pending_valid(uint64_t p)
{
	return (p & 1) != 0;
}

static inline unsigned fw_pending_semnum(uint64_t p)
{
	return (unsigned)(p >> 8) & 0xffff;
}

static inline uint64_t fw_pending_entry(uint64_t p)
{
	return p >> 24;
}

/* Is p a valid record of an operation on semaphore semnum? */
static inline bool fw_pending_names(uint64_t p, unsigned semnum)
{
	return fw_pending_valid(p) && fw_pending_semnum(p) == semnum;
}

/* The same record with the next sequence number: valid becomes ended, ended valid. */
static inline uint64_t fw_pending_next(uint64_t p)
{
	return (p & ~UINT64_C(0xff)) | ((p + 1) & 0xff);
}

/*
 * A process's semadj of one semaphore is the supervisor's undo list's plus the fast entry.
 * `slow` is a copy of the first, for the fast operation's range check only: the supervisor
 * writes it (while it holds the word) each time it changes its list, and never reads it back.
 * As the whole stays in range, the list's part can reach +-65535: the copy has 32 bits for it
 * (bits 0-31) and the generation in bits 32-55.
 */
struct fw_adj {
	_Atomic uint64_t fast; /* an entry; written only by the holder of the word */
	_Atomic uint64_t slow; /* a copy; written only by the supervisor */
};

static inline uint64_t fw_copy(int adj, uint32_t gen)
{
	return (uint64_t)(uint32_t)adj | ((uint64_t)(gen & FW_GEN_MASK) << 32);
}

/* The copy's semadj under generation `gen`; a program that wrote it only misleads itself. */
static inline int fw_copy_adj(uint64_t c, uint32_t gen)
{
	return ((uint32_t)(c >> 32) & FW_GEN_MASK) == (gen & FW_GEN_MASK) ? (int32_t)(uint32_t)c
									  : 0;
}

/*
 * A private page: one per (process, set), shared only by the process's threads and the
 * supervisor. A process that shares its undo list with another process (CLONE_SYSVSEM
 * without CLONE_THREAD) gets none, so that a page, its tag and a sempid name one process.
 */
/* A pending slot's part of a page: written by its thread alone, on a cache line of its own. */
struct fw_slot {
	_Alignas(64) _Atomic uint64_t pending; /* fw_pending() */
};

struct fw_page {
	_Atomic uint64_t epoch; /* bumped by the supervisor when it moves the set's storage */
	struct fw_slot slot[FW_PENDING];
	struct fw_adj adj[]; /* one per semaphore of the set */
};

/* ---- the program's side ----------------------------------------------------------------- */

/* The steps, for a test hook that stops an operation before one of them, as a kill would. */
enum fw_step {
	FW_AT_A1 = 1,
	FW_AT_E1,
	FW_AT_A2,
	FW_AT_A3,
	FW_AT_A4,
	FW_AT_A5,
	FW_AT_E2,
	FW_AT_A6,
	FW_AT_RESTORE, /* between the entry's restore and the record's end */
	FW_STEPS
};

enum fw_result {
	FW_DONE,    /* applied: the call returns 0 */
	FW_CALL,    /* nothing applied: make the trapped call */
	FW_ASK,	    /* A5 succeeded but the storage moved: ask whether it counted, then
		       fw_done() or fw_abandon() */
	FW_STOPPED, /* the hook stopped it */
};

/*
 * One fast operation: sem_op `d` (nonzero) on semaphore `semnum`, whose word is `word`, by the
 * thread owning pending slot `slot` of `page`.
 */
struct fw_op {
	_Atomic uint64_t *word;
	struct fw_pub *pub; /* the set's, mapped read-only */
	struct fw_page *page;
	uint64_t map_epoch; /* the page's epoch when this storage was mapped */
	uint32_t owner;	    /* fw_owner(page index, slot) */
	uint32_t tag;	    /* fw_tag(page index) */
	unsigned slot;
	unsigned semnum;
	int d;
	bool undo;
	/* tests only: nonzero from hook(hook_arg, step) stops the operation before that step */
	int (*hook)(void *arg, enum fw_step step);
	void *hook_arg;
	/* tests only: the clock, in place of fw_now()'s */
	int64_t (*clock)(void);
	/* kept between fw_try() and fw_done()/fw_abandon() */
	uint64_t old_entry;
};

/* A1 on a word another fast operation holds: its owner is a few stores from A5. */
#define FW_RETRIES 64

static inline bool fw_stop(struct fw_op *op, enum fw_step step)
{
	return op->hook != NULL && op->hook(op->hook_arg, step) != 0;
}

/*
 * The time sem_otime would record, in seconds: the kernel stamps it from the same clock as
 * CLOCK_REALTIME_COARSE (no system call: the vDSO answers).
 */
static inline int64_t fw_now(const struct fw_op *op)
{
	struct timespec ts;

	if (op->clock != NULL)
		return op->clock();
	if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0)
		return INT64_MAX; /* no time: the trapped call stamps it */
	return ts.tv_sec;
}

/* A6: the operation is over (and did not happen, when fw_abandon() calls it). */
static inline void fw_finish(struct fw_op *op)
{
	if (op->undo) {
		_Atomic uint64_t *p = &op->page->slot[op->slot].pending;

		atomic_store(p, fw_pending_next(atomic_load(p)));
	}
}

/* A6 for an operation that happened (A5 counted it in the word). */
static inline void fw_done(struct fw_op *op)
{
	fw_finish(op);
}

/* The operation did not happen: its entry goes back, then its record ends. */
static inline enum fw_result fw_abandon(struct fw_op *op)
{
	if (op->undo) {
		atomic_store(&op->page->adj[op->semnum].fast, op->old_entry);
		if (fw_stop(op, FW_AT_RESTORE))
			return FW_STOPPED;
	}
	fw_finish(op);
	return FW_CALL;
}

/*
 * Gives back a word this operation holds and has not changed: the trapped call answers. If
 * the supervisor took it meanwhile, the operation is doomed, and that call resolves it.
 */
static inline enum fw_result fw_release(struct fw_op *op, uint64_t held)
{
	uint64_t w = held;

	atomic_compare_exchange_strong(op->word, &w, held & ~FW_OWN_MASK);
	return FW_CALL;
}

static inline enum fw_result fw_try(struct fw_op *op)
{
	uint64_t w, held, applied, pub;
	uint32_t gen;
	int v;

	/* A1 */
	for (int tries = 0;; tries++) {
		if (fw_stop(op, FW_AT_A1))
			return FW_STOPPED;
		w = atomic_load(op->word);
		v = (int)fw_val(w);
		if (fw_slow(w) || v + op->d < 0 || v + op->d > FW_SEMVMX ||
		    fw_count(w) == FW_CNT_MAX)
			return FW_CALL;
		if (fw_own(w) == 0) {
			held = (w & ~FW_OWN_MASK) | ((uint64_t)op->owner << FW_OWN_SHIFT);
			if (atomic_compare_exchange_strong(op->word, &w, held))
				break;
		}
		if (tries == FW_RETRIES)
			return FW_CALL;
	}
	/* E1: storage that has moved is never read again, so the word needs no release. */
	if (fw_stop(op, FW_AT_E1))
		return FW_STOPPED;
	if (atomic_load(&op->page->epoch) != op->map_epoch)
		return FW_CALL;
	/*
	 * A2: what the operation must leave as it is, and its semadj. All of it is stable while
	 * the word is held, but otime, which only moves forward.
	 */
	if (fw_stop(op, FW_AT_A2))
		return FW_STOPPED;
	pub = atomic_load(&op->pub->sem[op->semnum]);
	gen = fw_pub_gen(pub);
	if (fw_pub_tag(pub) != op->tag || fw_now(op) > atomic_load(&op->pub->otime))
		return fw_release(op, held); /* sempid or otime changes: the supervisor's */
	if (op->undo) {
		_Atomic uint64_t *p = &op->page->slot[op->slot].pending;
		struct fw_adj *a = &op->page->adj[op->semnum];
		int fast, slow;
		uint64_t seq;

		op->old_entry = atomic_load(&a->fast);
		fast = fw_entry_adj(op->old_entry, gen) - op->d;
		slow = fw_copy_adj(atomic_load(&a->slow), gen);
		/* a copy no undo list can have: the program wrote it */
		if (slow < FW_ADJ_MIN - FW_ADJ_MAX || slow > FW_ADJ_MAX - FW_ADJ_MIN)
			return fw_release(op, held);
		/*
		 * The kernel's ERANGE is about the whole semadj. An entry that would leave its 16 bits
		 * while the whole stays in range is the trapped call's to apply, to the slow list.
		 */
		if (!fw_adj_ok(fast) || !fw_adj_ok(fast + slow))
			return fw_release(op, held);
		/* A3 */
		if (fw_stop(op, FW_AT_A3))
			return FW_STOPPED;
		seq = atomic_load(p);
		seq = fw_pending_valid(seq) ? seq + 2 : seq + 1; /* odd, and a new number */
		atomic_store(p, fw_pending((unsigned)seq, op->semnum, op->old_entry));
		/* A4 */
		if (fw_stop(op, FW_AT_A4))
			return FW_STOPPED;
		atomic_store(&a->fast, fw_entry(fast, gen));
	}
	/* A5: the linearization point */
	if (fw_stop(op, FW_AT_A5))
		return FW_STOPPED;
	/* held's count is below FW_CNT_MAX (A1), and a word that changed since fails the exchange */
	applied = ((held & ~(FW_OWN_MASK | FW_VAL_MASK)) + FW_CNT_ONE) | (uint64_t)(v + op->d);
	w = held;
	if (!atomic_compare_exchange_strong(op->word, &w, applied))
		return fw_abandon(op); /* taken: doomed */
	/* E2 */
	if (fw_stop(op, FW_AT_E2))
		return FW_STOPPED;
	if (atomic_load(&op->page->epoch) != op->map_epoch)
		return FW_ASK;
	if (fw_stop(op, FW_AT_A6))
		return FW_STOPPED;
	fw_done(op);
	return FW_DONE;
}

/* ---- the supervisor's side (caller holds the set's lock) ------------------------------------- */

struct fw_taken {
	unsigned val; /* clamped to SEMVMX */
	/*
	 * A doomed operation's owner, or 0. The caller ignores an owner that names no live
	 * process's slot (fw_owner_of() and its own table): a program can write any owner.
	 */
	uint32_t own;
	uint32_t count; /* fast operations since the give (fw_count), for statistics only */
	bool was_slow;	/* SLOW was already set: the caller held the word, or a program wrote it */
};

/* take: from now on no fast operation changes the word, and one holding it is doomed. */
static inline struct fw_taken fw_take(_Atomic uint64_t *word)
{
	uint64_t w = atomic_fetch_or(word, FW_SLOW);
	struct fw_taken t = {
		.val = fw_val(w) > FW_SEMVMX ? FW_SEMVMX : fw_val(w),
		.own = fw_own(w),
		.count = fw_count(w),
		.was_slow = fw_slow(w),
	};
	return t;
}

/*
 * give: only with nobody parked on the semaphore and no doomed operation unresolved, and
 * after fw_publish() of what the operations since the take changed.
 */
static inline void fw_give(_Atomic uint64_t *word, unsigned val)
{
	atomic_store(word, fw_word(val, false, 0));
}

/* Caller holds word `semnum`: its generation and the tag of its sempid, for programs to read. */
static inline void fw_publish(struct fw_pub *pub, unsigned semnum, uint32_t gen, uint32_t tag)
{
	atomic_store(&pub->sem[semnum], fw_pub_sem(gen, tag));
}

/*
 * Any lock on the set: the set's otime, which only moves forward, also where holders of
 * different semaphores' locks publish at once (a maximum, not a store).
 */
static inline void fw_publish_otime(struct fw_pub *pub, int64_t otime)
{
	int64_t cur = atomic_load(&pub->otime);

	while (cur < otime && !atomic_compare_exchange_weak(&pub->otime, &cur, otime))
		;
}

/*
 * Caller holds word `semnum`: the copy of its undo list's semadj for a fast operation's range
 * check, written each time the list's value changes (and once when the page is made).
 */
static inline void fw_mirror(struct fw_page *pg, unsigned semnum, int adj, uint32_t gen)
{
	atomic_store(&pg->adj[semnum].slow, fw_copy(adj, gen));
}

/*
 * Caller holds word `semnum` and has just bumped its generation (SETVAL, SETALL). The
 * generation has 24 bits, so it comes back to an old number, and an entry or copy written
 * under that number would count again. Each bump therefore refreshes one page in turn:
 * entries and copies of another generation, which count as 0, are rewritten as 0 of this one.
 * With fewer than FW_PAGES pages, none holds an entry older than FW_PAGES generations, far
 * from the 2^24 of a wrap. A doomed operation of the page may write its entry meanwhile; it
 * writes an entry it read after an earlier refresh, or the same 0 under this generation.
 */
static inline void fw_refresh(struct fw_page *pg, unsigned semnum, uint32_t gen)
{
	struct fw_adj *a = &pg->adj[semnum];
	uint64_t e = atomic_load(&a->fast);

	if (fw_entry_gen(e) != (gen & FW_GEN_MASK))
		atomic_compare_exchange_strong(&a->fast, &e, fw_entry(0, gen));
	atomic_store(&a->slow, fw_copy(0, gen)); /* the bump cleared every undo list's semadj */
}

/*
 * The entry of semaphore `semnum` in the page of a process that has exited: the entry, or the
 * one before the doomed operation of pending slot `doomed_slot` (-1: none doomed) when its
 * record is valid and names this semaphore. A doomed operation never happened.
 */
static inline uint64_t fw_settled_entry(struct fw_page *pg, unsigned semnum, int doomed_slot)
{
	uint64_t p;

	if (doomed_slot >= 0 && doomed_slot < FW_PENDING) {
		p = atomic_load(&pg->slot[doomed_slot].pending);
		if (fw_pending_names(p, semnum))
			return fw_pending_entry(p);
	}
	return atomic_load(&pg->adj[semnum].fast);
}

/*
 * freeze: the same, read from the page of a live process, whose doomed operation (if any) may
 * still be writing. Read once when it loses access; the page is not read again.
 */
static inline uint64_t fw_frozen_entry(struct fw_page *pg, unsigned semnum, int doomed_slot)
{
	uint64_t s0, s1, e;

	if (doomed_slot < 0 || doomed_slot >= FW_PENDING)
		return atomic_load(&pg->adj[semnum].fast); /* nobody holds the word: stable */
	s0 = atomic_load(&pg->slot[doomed_slot].pending);
	e = atomic_load(&pg->adj[semnum].fast);
	s1 = atomic_load(&pg->slot[doomed_slot].pending);
	if (fw_pending_names(s1, semnum))
		return fw_pending_entry(s1);
	if (s1 == s0)
		return e; /* no record was written meanwhile: nothing was */
	return atomic_load(&pg->adj[semnum].fast); /* the restore is done */
}

#endif /* SV_ENGINE_FASTWORD_H */
