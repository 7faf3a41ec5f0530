/* SPDX-License-Identifier: MIT */
/*
 * The fast path's shared memory, and the steps of its protocol on both sides. The protocol is
 * written down, and model-checked, in server/engine/model/fastpath.pml. The step names here
 * (A1..A6, E1, E2, take, give, freeze) are that file's.
 *
 * Header-only, and calling nothing else in semvisor. The program's side (fw_try, fw_finish,
 * fw_abandon) runs in the preloaded library, which links none of the engine. The supervisor's
 * side (fw_take, fw_give, fw_settled_entry, fw_frozen_entry) runs under the set's lock.
 *
 * Every word here is in memory a program can write. So every field the supervisor decodes is
 * clamped or range-checked by the function that decodes it, or by its caller where it says
 * so. No function waits for a word to change, and every loop is bounded. All atomics are
 * sequentially consistent: the model assumes it, and each step is one atomic access.
 */
#ifndef SV_ENGINE_FASTWORD_H
#define SV_ENGINE_FASTWORD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define FW_SEMVMX 32767 /* the kernel's SEMVMX and SEMAEM */
#define FW_SEMAEM 32767

/*
 * A semaphore's word in the set's storage:
 *   bits  0-15  the value, while SLOW is clear
 *   bit   16    SLOW: the supervisor holds the word
 *   bits 17-39  the owner of a fast operation holding the word, 0 for none (fw_owner)
 *   bits 40-63  the SETVAL generation
 */
#define FW_VAL_MASK  UINT64_C(0xffff)
#define FW_SLOW	     (UINT64_C(1) << 16)
#define FW_OWN_SHIFT 17
#define FW_OWN_MAX   ((UINT32_C(1) << 23) - 1)
#define FW_OWN_MASK  ((uint64_t)FW_OWN_MAX << FW_OWN_SHIFT)
#define FW_GEN_SHIFT 40
#define FW_GEN_MASK  ((UINT32_C(1) << 24) - 1)

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

static inline uint32_t fw_gen(uint64_t w)
{
	return (uint32_t)(w >> FW_GEN_SHIFT) & FW_GEN_MASK;
}

static inline uint64_t fw_word(unsigned val, bool slow, uint32_t own, uint32_t gen)
{
	return ((uint64_t)val & FW_VAL_MASK) | (slow ? FW_SLOW : 0) |
	       ((uint64_t)(own & FW_OWN_MAX) << FW_OWN_SHIFT) |
	       ((uint64_t)(gen & FW_GEN_MASK) << FW_GEN_SHIFT);
}

/*
 * Owners: each private page of a set has an index (given by the supervisor, below FW_PAGES),
 * each thread in a fast operation a pending slot of that page (below FW_PENDING).
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
 * the generation of the word when it was written. An entry of another generation counts as 0:
 * SETVAL clears every process's entry for the semaphore by bumping the word's generation.
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

/* The semadj an entry stands for under generation `gen`, clamped to what SEMAEM allows. */
static inline int fw_entry_adj(uint64_t e, uint32_t gen)
{
	int adj = fw_entry_raw(e);

	if (fw_entry_gen(e) != (gen & FW_GEN_MASK))
		return 0;
	return adj < -FW_SEMAEM ? -FW_SEMAEM : adj;
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

/* A private page: one per (undo list, set), shared by its processes and the supervisor. */
struct fw_page {
	_Atomic uint64_t epoch; /* bumped by the supervisor when it moves the set's storage */
	_Atomic uint64_t pending[FW_PENDING];
	_Atomic uint64_t entry[]; /* one per semaphore of the set */
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
		       fw_finish() or fw_abandon() */
	FW_STOPPED, /* the hook stopped it */
};

/*
 * One fast operation: sem_op `d` (nonzero) on semaphore `semnum`, whose word is `word`, by the
 * thread owning pending slot `slot` of `page`.
 */
struct fw_op {
	_Atomic uint64_t *word;
	struct fw_page *page;
	uint64_t map_epoch; /* the page's epoch when this storage was mapped */
	uint32_t owner;	    /* fw_owner(page index, slot) */
	unsigned slot;
	unsigned semnum;
	int d;
	bool undo;
	/* tests only: nonzero from hook(hook_arg, step) stops the operation before that step */
	int (*hook)(void *arg, enum fw_step step);
	void *hook_arg;
	/* kept between fw_try() and fw_finish()/fw_abandon() */
	uint64_t old_entry;
};

/* A1 on a word another fast operation holds: its owner is a few stores from A5. */
#define FW_RETRIES 64

static inline bool fw_stop(struct fw_op *op, enum fw_step step)
{
	return op->hook != NULL && op->hook(op->hook_arg, step) != 0;
}

/* A6: the operation is over. */
static inline void fw_finish(struct fw_op *op)
{
	if (op->undo) {
		_Atomic uint64_t *p = &op->page->pending[op->slot];

		atomic_store(p, fw_pending_next(atomic_load(p)));
	}
}

/* The operation did not happen: its entry goes back, then its record ends. */
static inline enum fw_result fw_abandon(struct fw_op *op)
{
	if (op->undo) {
		atomic_store(&op->page->entry[op->semnum], op->old_entry);
		if (fw_stop(op, FW_AT_RESTORE))
			return FW_STOPPED;
	}
	fw_finish(op);
	return FW_CALL;
}

static inline enum fw_result fw_try(struct fw_op *op)
{
	uint64_t w, held, applied;
	int v, adj = 0;

	/* A1 */
	for (int tries = 0;; tries++) {
		if (fw_stop(op, FW_AT_A1))
			return FW_STOPPED;
		w = atomic_load(op->word);
		v = (int)fw_val(w);
		if (fw_slow(w) || v + op->d < 0 || v + op->d > FW_SEMVMX)
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
	if (op->undo) {
		_Atomic uint64_t *p = &op->page->pending[op->slot];
		uint64_t seq;

		/* A2: only the holder of the word writes its entry */
		if (fw_stop(op, FW_AT_A2))
			return FW_STOPPED;
		op->old_entry = atomic_load(&op->page->entry[op->semnum]);
		if (fw_entry_gen(op->old_entry) == fw_gen(held))
			adj = fw_entry_raw(op->old_entry);
		if (adj - op->d < -FW_SEMAEM || adj - op->d > FW_SEMAEM) {
			/* ERANGE is the trapped call's to answer: give the word back unchanged */
			w = held;
			atomic_compare_exchange_strong(op->word, &w, held & ~FW_OWN_MASK);
			return FW_CALL;
		}
		/* A3 */
		if (fw_stop(op, FW_AT_A3))
			return FW_STOPPED;
		seq = atomic_load(p);
		seq = fw_pending_valid(seq) ? seq + 2 : seq + 1; /* odd, and a new number */
		atomic_store(p, fw_pending((unsigned)seq, op->semnum, op->old_entry));
		/* A4 */
		if (fw_stop(op, FW_AT_A4))
			return FW_STOPPED;
		atomic_store(&op->page->entry[op->semnum], fw_entry(adj - op->d, fw_gen(held)));
	}
	/* A5: the linearization point */
	if (fw_stop(op, FW_AT_A5))
		return FW_STOPPED;
	applied = (held & ~(FW_OWN_MASK | FW_VAL_MASK)) | (uint64_t)(v + op->d);
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
	fw_finish(op);
	return FW_DONE;
}

/* ---- the supervisor's side (caller holds the set's lock) ------------------------------------- */

struct fw_taken {
	unsigned val; /* clamped to SEMVMX */
	uint32_t gen;
	uint32_t own;  /* a doomed operation's owner, or 0; the caller range-checks it */
	bool was_slow; /* SLOW was already set: the caller held the word, or a program wrote it */
};

/* take: from now on no fast operation changes the word, and one holding it is doomed. */
static inline struct fw_taken fw_take(_Atomic uint64_t *word)
{
	uint64_t w = atomic_fetch_or(word, FW_SLOW);
	struct fw_taken t = {
		.val = fw_val(w) > FW_SEMVMX ? FW_SEMVMX : fw_val(w),
		.gen = fw_gen(w),
		.own = fw_own(w),
		.was_slow = fw_slow(w),
	};
	return t;
}

/* give: only with nobody parked on the semaphore and no doomed operation unresolved. */
static inline void fw_give(_Atomic uint64_t *word, unsigned val, uint32_t gen)
{
	atomic_store(word, fw_word(val, false, 0, gen));
}

/*
 * The entry of semaphore `semnum` in the page of an undo list whose processes have all exited:
 * the entry, or the one before the doomed operation of pending slot `doomed_slot` (-1: none
 * doomed) when its record is valid and names this semaphore. A doomed operation never happened.
 */
static inline uint64_t fw_settled_entry(struct fw_page *pg, unsigned semnum, int doomed_slot)
{
	uint64_t p;

	if (doomed_slot >= 0 && doomed_slot < FW_PENDING) {
		p = atomic_load(&pg->pending[doomed_slot]);
		if (fw_pending_names(p, semnum))
			return fw_pending_entry(p);
	}
	return atomic_load(&pg->entry[semnum]);
}

/*
 * freeze: the same, read from the page of a live process, whose doomed operation (if any) may
 * still be writing. Read once when it loses access; the page is not read again.
 */
static inline uint64_t fw_frozen_entry(struct fw_page *pg, unsigned semnum, int doomed_slot)
{
	uint64_t s0, s1, e;

	if (doomed_slot < 0 || doomed_slot >= FW_PENDING)
		return atomic_load(&pg->entry[semnum]); /* nobody holds the word: stable */
	s0 = atomic_load(&pg->pending[doomed_slot]);
	e = atomic_load(&pg->entry[semnum]);
	s1 = atomic_load(&pg->pending[doomed_slot]);
	if (fw_pending_names(s1, semnum))
		return fw_pending_entry(s1);
	if (s1 == s0)
		return e;			/* no record was written meanwhile: nothing was */
	return atomic_load(&pg->entry[semnum]); /* the restore is done */
}

#endif /* SV_ENGINE_FASTWORD_H */
