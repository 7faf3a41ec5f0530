/* SPDX-License-Identifier: MIT */
/*
 * The engine's side of the fast path: the supervisor's steps of server/engine/model/fastpath.pml
 * (take, give, copy, SETVAL, exit, freeze and revoke), applied to a set's values.
 *
 * A set gets fast storage on the first sv_fast_map() for it. From then on the engine and
 * programs share each semaphore's value through its word, and the engine keeps to one rule:
 * it reads or changes sem->semval only while it holds the word (sv_sem_val() takes it the first
 * time a locked section touches the semaphore, adopting the value a fast operation may have
 * left there). When the section ends (sv_sem_unlock()), each word it held goes back to the
 * fast path, with what a reader must see published first, unless a parked operation names the
 * semaphore or a fast operation the take doomed is unresolved: then the engine keeps it, and
 * every operation on that semaphore comes to the engine, which does the wake-ups.
 *
 * Revocation drops the storage whole (IPC_RMID, and any IPC_SET, which may take alter
 * permission away from a process mapping it): the set lives on with its values in semval, and a
 * process still allowed to alter it maps new storage. Moving rather than patching is what the
 * model checks; any IPC_SET rather than only a narrowing one keeps the permission test in one
 * place, sv_fast_file(), at the cost of one new mapping per process after a rare call.
 *
 * Locking: a semaphore's fast state (struct sv_fast_sem, its bit in held) is under the lock
 * covering that semaphore, as its value is. Everything that names pages, and making or
 * dropping the storage, is under the set lock in complex mode, which excludes every holder of
 * a semaphore's lock (sem.c). So a section in simple mode sees pages that cannot change under
 * it.
 *
 * What a program writes is untrusted (fastword.h's decoders clamp and check it): an owner
 * naming no page of the set is ignored, a value is clamped to SEMVMX, a page's entries count
 * only for its own process, and never outside the semadj's range.
 *
 * Known inexactness, left for later: when a thread of a process is doomed on a semaphore and
 * another thread of the same process makes a trapped SEM_UNDO call on that semaphore before
 * the first one's own call, the page's entry cannot be moved into the undo list (the doomed
 * thread may still restore it), so that call's ERANGE check sees the list's part only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/fastmem.h"

#define S_IWUGO_ 0222

struct sv_fast_sem {
	uint32_t gen;	 /* SETVAL generation (fw_pub_sem's 24 bits) */
	uint32_t tag;	 /* fw_tag() of the page of sempid's process; 0: none */
	uint32_t parked; /* sops of parked operations that name this semaphore */
	uint32_t doomed; /* owner of a fast operation the take doomed, unresolved; 0: none */
};

struct sv_fast_page {
	struct sv_undo *un; /* of the process the page belongs to */
	uint32_t idx;
	struct sv_fastpage mem;
};

struct sv_fast {
	uint64_t serial; /* unique to this storage (sv_fast_map.serial) */
	struct sv_fastmem mem;
	struct sv_fast_sem *sem;
	/*
	 * Bit i: the engine holds word i. Changed under the lock covering semaphore i, atomically
	 * since neighbours in simple mode share a word of the bitmap.
	 */
	_Atomic uint64_t *held;
	struct sv_fast_page **pages; /* by index, NULL where free (complex mode) */
	uint32_t npages;	     /* entries in pages */
	uint32_t refresh;	     /* the page fw_refresh() visits next */
	_Atomic uint64_t ops;	     /* fast operations counted at takes (fw_count) */
};

/* ---- finding the storage ---- */

static atomic_uint_fast64_t next_serial = 1;
static atomic_uint_fast64_t ops_total; /* sv_fast_ops_total() */

static struct sv_fast *_Atomic *fast_slot(struct sv_ns *ns, int idx, bool make)
{
	struct sv_fast *_Atomic *chunk;

	chunk = atomic_load_explicit(&ns->fast[idx / SV_SLOT_CHUNK], memory_order_acquire);
	if (!chunk && make) {
		struct sv_fast *_Atomic *fresh = calloc(SV_SLOT_CHUNK, sizeof(*fresh));

		if (!fresh)
			return NULL;
		/* Two sets of one chunk may race to make it: the loser's goes. */
		if (atomic_compare_exchange_strong_explicit(&ns->fast[idx / SV_SLOT_CHUNK], &chunk,
							    fresh, memory_order_acq_rel,
							    memory_order_acquire))
			chunk = fresh;
		else
			free(fresh);
	}
	return chunk ? &chunk[idx % SV_SLOT_CHUNK] : NULL;
}

struct sv_fast *sv_fast_of(const struct sv_set *set)
{
	struct sv_fast *_Atomic *slot;

	if (!SV_RELAXED(&set->fast_on))
		return NULL;
	slot = fast_slot(set->ns, set->id % SV_IPCMNI, false);
	return slot ? atomic_load_explicit(slot, memory_order_acquire) : NULL;
}

/* ---- take and give ---- */

static bool held(const struct sv_fast *f, int num)
{
	return (SV_RELAXED(&f->held[num / 64]) >> (num % 64)) & 1;
}

bool sv_fast_held(const struct sv_set *set, int num)
{
	struct sv_fast *f = sv_fast_of(set);

	return !f || held(f, num);
}

/*
 * The page an owner read from a word names, if it is one of this set's. Caller holds a lock
 * covering any semaphore of the set.
 */
static struct sv_fast_page *owner_page(const struct sv_fast *f, uint32_t own, unsigned *slot)
{
	uint32_t idx;

	if (!fw_owner_of(own, f->npages, &idx, slot))
		return NULL;
	return f->pages[idx];
}

void sv_fast_hold(struct sv_set *set, struct sv_fast *f, int num)
{
	struct fw_taken t;
	unsigned slot;

	if (held(f, num))
		return;
	t = fw_take(fw_word_at(f->mem.words, (unsigned)num));
	/* A word the engine did not hold has the value, even one a program marked SLOW. */
	sv_sems(set)[num].semval = (int)t.val;
	if (t.count) {
		struct sv_sem *sem = &sv_sems(set)[num];

		SV_SET_RELAXED(&sem->nops, SV_RELAXED(&sem->nops) + t.count);
		atomic_fetch_add_explicit(&f->ops, t.count, memory_order_relaxed);
		atomic_fetch_add_explicit(&ops_total, t.count, memory_order_relaxed);
	}
	if (t.own && owner_page(f, t.own, &slot))
		f->sem[num].doomed = t.own;
	atomic_fetch_or_explicit(&f->held[num / 64], UINT64_C(1) << (num % 64),
				 memory_order_relaxed);
}

/* Caller holds the set lock (global). */
static void hold_all(struct sv_set *set, struct sv_fast *f)
{
	for (int i = 0; i < set->nsems; i++)
		sv_fast_hold(set, f, i);
}

/* Caller holds the lock covering num, and its word. */
static void give(struct sv_set *set, struct sv_fast *f, int num)
{
	struct sv_fast_sem *fs = &f->sem[num];

	if (fs->parked || fs->doomed)
		return; /* every operation on it goes to the engine meanwhile */
	fw_publish(f->mem.pub, (unsigned)num, fs->gen, fs->tag);
	atomic_fetch_and_explicit(&f->held[num / 64], ~(UINT64_C(1) << (num % 64)),
				  memory_order_relaxed);
	fw_give(fw_word_at(f->mem.words, (unsigned)num), (unsigned)sv_sems(set)[num].semval);
}

void sv_fast_release(struct sv_set *set, int locknum)
{
	struct sv_fast *f;

	if (set->deleted || !(f = sv_fast_of(set)))
		return;
	/* otime only moves forward: publishing it before the gives lets no operation past it */
	fw_publish_otime(f->mem.pub, SV_RELAXED(&set->otime));
	if (locknum != SV_LOCK_GLOBAL) {
		if (held(f, locknum))
			give(set, f, locknum);
		return;
	}
	for (int w = 0; w < (set->nsems + 63) / 64; w++) {
		uint64_t bits = SV_RELAXED(&f->held[w]);

		while (bits) {
			int num = w * 64 + __builtin_ctzll(bits);

			bits &= bits - 1;
			give(set, f, num);
		}
	}
}

void sv_fast_parked(struct sv_set *set, const struct sv_sembuf *sops, unsigned int nsops, int delta)
{
	struct sv_fast *f = sv_fast_of(set);

	if (!f)
		return;
	for (unsigned int i = 0; i < nsops; i++) {
		SV_ASSERT(delta > 0 || f->sem[sops[i].sem_num].parked > 0);
		f->sem[sops[i].sem_num].parked += (uint32_t)delta;
	}
}

/* ---- undo entries, tags, generations ---- */

uint32_t sv_fast_tag(const struct sv_undo *un)
{
	return un && un->fpage ? fw_tag(un->fpage->idx) : 0;
}

void sv_fast_set_tag(struct sv_set *set, int num, uint32_t tag)
{
	struct sv_fast *f = sv_fast_of(set);

	if (f)
		f->sem[num].tag = tag;
}

void sv_fast_mirror(struct sv_set *set, const struct sv_undo *un, int num)
{
	struct sv_fast *f;

	if (!un || !un->fpage || !(f = sv_fast_of(set)))
		return;
	fw_mirror(un->fpage->mem.page, (unsigned)num, un->semadj[num], f->sem[num].gen);
}

static int clamp_adj(int adj)
{
	return adj < FW_ADJ_MIN ? FW_ADJ_MIN : adj > FW_ADJ_MAX ? FW_ADJ_MAX : adj;
}

/*
 * Moves the page's entry for num into un->semadj. Caller holds the lock covering num, and
 * word num; no operation of the page is doomed on num, so no thread writes the entry.
 */
static void fold(struct sv_set *set, struct sv_fast *f, struct sv_undo *un, int num)
{
	struct fw_adj *a = &un->fpage->mem.page->adj[num];
	uint32_t gen = f->sem[num].gen;
	int adj = fw_entry_adj(atomic_load(&a->fast), gen);

	if (!adj)
		return;
	/* In range unless the program wrote its entry: then it only misleads itself. */
	un->semadj[num] = (int16_t)clamp_adj(un->semadj[num] + adj);
	atomic_store(&a->fast, fw_entry(0, gen));
	fw_mirror(un->fpage->mem.page, (unsigned)num, un->semadj[num], gen);
	if (sv_jnl_on())
		sv_jnl_adj(set, un, num);
}

void sv_fast_enter(struct sv_set *set, struct sv_undo *un, unsigned slot1,
		   const struct sv_sembuf *sops, unsigned int nsops)
{
	struct sv_fast *f = sv_fast_of(set);
	struct sv_fast_page *pg;

	if (!f)
		return;
	pg = un && un->semid == set->id ? un->fpage : NULL;
	for (unsigned int i = 0; i < nsops; i++) {
		int num = sops[i].sem_num;
		struct sv_fast_sem *fs = &f->sem[num];

		sv_fast_hold(set, f, num);
		if (!pg)
			continue;
		/* The doomed thread's own call: its operation is over, restored or never begun. */
		if (fs->doomed && slot1 && fs->doomed == fw_owner(pg->idx, slot1 - 1))
			fs->doomed = 0;
		if (fs->doomed && (fs->doomed - 1) / FW_PENDING == pg->idx)
			continue; /* another thread of the process is doomed on it: see the top */
		fold(set, f, un, num);
	}
}

void sv_fast_bump(struct sv_set *set, int num)
{
	struct sv_fast *f = sv_fast_of(set);

	if (!f)
		return;
	SV_ASSERT(sv_set_locked_global(set));
	sv_fast_hold(set, f, num);
	f->sem[num].gen = (f->sem[num].gen + 1) & FW_GEN_MASK;
	/* fw_refresh() says why one page per bump keeps the generation from wrapping onto one */
	for (uint32_t n = 0; n < f->npages; n++) {
		struct sv_fast_page *pg = f->pages[f->refresh++ % f->npages];

		if (pg) {
			fw_refresh(pg->mem.page, (unsigned)num, f->sem[num].gen);
			break;
		}
	}
}

/* ---- statistics ---- */

uint64_t sv_fast_collect(struct sv_set *set)
{
	struct sv_fast *f = sv_fast_of(set);

	if (!f)
		return 0;
	SV_ASSERT(sv_set_locked_global(set));
	hold_all(set, f); /* each take counts its word's operations; the unlock gives them back */
	return atomic_load_explicit(&f->ops, memory_order_relaxed);
}

uint64_t sv_fast_ops_total(void)
{
	return atomic_load_explicit(&ops_total, memory_order_relaxed);
}

/* ---- pages ---- */

/* Caller holds the set lock (global). Every word is held, the page is not in use. */
static void page_free(struct sv_fast *f, struct sv_fast_page *pg)
{
	uint32_t tag = fw_tag(pg->idx);

	for (unsigned i = 0; i < f->mem.nsems; i++) {
		/* An index is given again only once no published tag names it (fw_tag()). */
		if (f->sem[i].tag == tag)
			f->sem[i].tag = 0;
		if (f->sem[i].doomed && (f->sem[i].doomed - 1) / FW_PENDING == pg->idx)
			f->sem[i].doomed = 0;
	}
	f->pages[pg->idx] = NULL;
	pg->un->fpage = NULL;
	sv_fastpage_destroy(&pg->mem);
	free(pg);
}

/* The pending slot of pg's operation the take doomed on num, or -1. */
static int doomed_slot(const struct sv_fast *f, const struct sv_fast_page *pg, int num)
{
	uint32_t page;
	unsigned slot;

	if (f->sem[num].doomed && fw_owner_of(f->sem[num].doomed, f->npages, &page, &slot) &&
	    page == pg->idx)
		return (int)slot;
	return -1;
}

void sv_fast_exit(struct sv_set *set, struct sv_undo *un)
{
	struct sv_fast *f = sv_fast_of(set);
	struct sv_fast_page *pg = un->fpage;

	if (!f || !pg)
		return;
	SV_ASSERT(sv_set_locked_global(set));
	hold_all(set, f); /* dooms whatever operation of the page is still holding a word */
	for (int i = 0; i < set->nsems && i < un->nsems; i++) {
		/* a doomed operation never happened: its entry is the one before it */
		int adj =
		    fw_entry_adj(fw_settled_entry(pg->mem.page, (unsigned)i, doomed_slot(f, pg, i)),
				 f->sem[i].gen);

		un->semadj[i] = (int16_t)clamp_adj(un->semadj[i] + adj);
	}
	page_free(f, pg);
}

/*
 * revoke (fastpath.pml): no mapping of the storage counts from here on. Every page's epoch moves
 * first, so that a fast operation past its E1 sees it at E2; then every word is taken, which
 * dooms any operation still holding one. With `freeze`, each page's entries join its process's
 * undo list, read once as they settle (fw_frozen_entry()), and what the take doomed is kept for
 * the process's question (sv_fast_ask()). The storage then goes; the set lives on without it,
 * its values in semval, until the next sv_fast_file(). Caller holds the set lock (global).
 */
static void drop_storage(struct sv_set *set, struct sv_fast *f, bool freeze)
{
	SV_ASSERT(sv_set_locked_global(set));
	for (uint32_t i = 0; i < f->npages; i++)
		if (f->pages[i])
			atomic_fetch_add(&f->pages[i]->mem.page->epoch, 1);
	hold_all(set, f);
	for (uint32_t p = 0; p < f->npages; p++) {
		struct sv_fast_page *pg = f->pages[p];

		if (!pg)
			continue;
		if (freeze) {
			struct sv_undo *un = pg->un;

			un->fast_gone = f->serial;
			un->fast_doomed = 0;
			for (int i = 0; i < set->nsems; i++) {
				int slot = doomed_slot(f, pg, i), adj;

				if (slot >= 0)
					un->fast_doomed |= UINT64_C(1) << slot;
				adj = fw_entry_adj(fw_frozen_entry(pg->mem.page, (unsigned)i, slot),
						   f->sem[i].gen);
				if (adj)
					un->semadj[i] = (int16_t)clamp_adj(un->semadj[i] + adj);
				if (adj && sv_jnl_on())
					sv_jnl_adj(set, un, i);
			}
		}
		page_free(f, pg);
	}
	/*
	 * Every section that could have found f held a lock of the set: none is left, and no new
	 * one finds it. Programs keep their mappings of the files, which the engine no longer reads.
	 */
	SV_SET_RELAXED(&set->fast_on, 0);
	atomic_store_explicit(fast_slot(set->ns, set->id % SV_IPCMNI, false), NULL,
			      memory_order_release);
	sv_fastmem_destroy(&f->mem);
	free(f->pages);
	free(f->held);
	free(f->sem);
	free(f);
}

void sv_fast_remove(struct sv_set *set)
{
	struct sv_fast *f = sv_fast_of(set);

	if (f)
		drop_storage(set, f, false); /* the undo lists go with the set */
}

void sv_fast_revoke(struct sv_set *set)
{
	struct sv_fast *f = sv_fast_of(set);

	if (f)
		drop_storage(set, f, true);
}

int sv_fast_ask(const struct sv_caller *c, int semid, unsigned slot, uint64_t serial)
{
	struct sv_undo *un;
	struct sv_set *set;
	int counted = 1;

	if (slot >= FW_PENDING)
		return -EINVAL;
	rcu_read_lock();
	set = sv_set_lookup(c->ns, semid);
	un = set ? sv_undo_lookup(c, semid) : NULL;
	if (un) {
		sv_sem_lock(set, NULL, 0);
		if (!set->deleted && un->semid == semid && un->fast_gone == serial)
			counted = !((un->fast_doomed >> slot) & 1);
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
	}
	rcu_read_unlock();
	return counted;
}

/* Operations parked before the set had storage name their semaphores too. Complex mode. */
static void count_parked(struct sv_set *set)
{
	struct sv_waiter *w;

	cds_list_for_each_entry(w, &set->pending_alter, node)
		sv_fast_parked(set, w->sops, w->nsops, 1);
	cds_list_for_each_entry(w, &set->pending_const, node)
		sv_fast_parked(set, w->sops, w->nsops, 1);
	for (int i = 0; i < set->nsems; i++) {
		cds_list_for_each_entry(w, &sv_sems(set)[i].pending_alter, node)
			sv_fast_parked(set, w->sops, w->nsops, 1);
		cds_list_for_each_entry(w, &sv_sems(set)[i].pending_const, node)
			sv_fast_parked(set, w->sops, w->nsops, 1);
	}
}

/* The set's storage, made if it has none. Caller holds the set lock (global): NULL, -errno. */
static struct sv_fast *fast_get(struct sv_set *set, int *err)
{
	struct sv_fast *_Atomic *slot;
	struct sv_fast *f = sv_fast_of(set);

	if (f)
		return f;
	slot = fast_slot(set->ns, set->id % SV_IPCMNI, true);
	f = calloc(1, sizeof(*f));
	if (!slot || !f)
		goto nomem;
	f->sem = calloc((size_t)set->nsems, sizeof(*f->sem));
	f->held = calloc((size_t)(set->nsems + 63) / 64, sizeof(*f->held));
	if (!f->sem || !f->held)
		goto nomem;
	*err = sv_fastmem_create(&f->mem, (unsigned)set->nsems);
	if (*err)
		goto fail;
	f->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
	/* The words start SLOW: the engine holds them all, and this section's end gives them. */
	for (int i = 0; i < set->nsems; i++)
		f->held[i / 64] |= UINT64_C(1) << (i % 64);
	atomic_store_explicit(slot, f, memory_order_release);
	SV_SET_RELAXED(&set->fast_on, 1);
	count_parked(set);
	return f;
nomem:
	*err = -ENOMEM;
fail:
	if (f) {
		free(f->held);
		free(f->sem);
	}
	free(f);
	return NULL;
}

/* A page for un's process. Caller holds the set lock (global): NULL, -errno. */
static struct sv_fast_page *page_new(struct sv_set *set, struct sv_fast *f, struct sv_undo *un,
				     int *err)
{
	struct sv_fast_page *pg;
	uint32_t idx = 0;

	while (idx < f->npages && f->pages[idx])
		idx++;
	if (idx == f->npages) {
		uint32_t n = f->npages ? f->npages * 2 : 4;
		struct sv_fast_page **more;

		if (f->npages >= FW_PAGES) {
			*err = -ENOSPC;
			return NULL;
		}
		if (n > FW_PAGES)
			n = FW_PAGES;
		more = realloc(f->pages, n * sizeof(*more));
		if (!more) {
			*err = -ENOMEM;
			return NULL;
		}
		memset(more + f->npages, 0, (n - f->npages) * sizeof(*more));
		f->pages = more;
		f->npages = n;
	}
	pg = calloc(1, sizeof(*pg));
	if (!pg) {
		*err = -ENOMEM;
		return NULL;
	}
	*err = sv_fastpage_create(&pg->mem, (unsigned)set->nsems);
	if (*err) {
		free(pg);
		return NULL;
	}
	pg->idx = idx;
	pg->un = un;
	hold_all(set, f);
	for (int i = 0; i < set->nsems; i++)
		fw_mirror(pg->mem.page, (unsigned)i, un->semadj[i], f->sem[i].gen);
	f->pages[idx] = pg;
	un->fpage = pg;
	return pg;
}

int sv_fast_file(const struct sv_caller *c, int semid, enum sv_fast_file which,
		 struct sv_fast_map *map)
{
	struct sv_fast_page *pg;
	struct sv_undo *un;
	struct sv_set *set;
	struct sv_fast *f;
	int err, src;

	if ((unsigned)which >= SV_FAST_FILES)
		return -EINVAL;
	if (!c->proc || sv_jnl_on())
		return -EOPNOTSUPP;
	rcu_read_lock();
	set = sv_set_lookup(c->ns, semid);
	if (!set) {
		err = -EINVAL;
		goto out_rcu;
	}
	if ((err = sv_ipcperms(c, set, S_IWUGO_))) {
		err = sv_settle(set, err);
		goto out_rcu;
	}
	/* The page goes with the process's undo entry for the set: made here if need be. */
	un = which == SV_FAST_PAGE ? sv_undo_find_alloc(c, semid, &err) : sv_undo_lookup(c, semid);
	if (!un) {
		err = which == SV_FAST_PAGE ? err : -ENOENT;
		goto out_rcu;
	}
	sv_sem_lock(set, NULL, 0);
	if (set->deleted || un->semid == -1) {
		err = -EIDRM;
		goto out_unlock;
	}
	if (which == SV_FAST_PAGE) {
		f = fast_get(set, &err);
		/*
		 * A process asks again only from a new image (exec), whose threads of the old one
		 * are gone mid-operation perhaps: those operations end as at an exit.
		 */
		if (f && un->fpage)
			sv_fast_exit(set, un);
		pg = f ? page_new(set, f, un, &err) : NULL;
		if (!pg)
			goto out_unlock;
		*map = (struct sv_fast_map){
			.serial = f->serial,
			.nsems = (uint32_t)set->nsems,
			.page = pg->idx,
			.epoch = atomic_load(&pg->mem.page->epoch),
		};
		src = pg->mem.fd;
	} else {
		f = sv_fast_of(set);
		if (!f || f->serial != map->serial) {
			err = -ESTALE;
			goto out_unlock;
		}
		if (!un->fpage) {
			err = -ENOENT;
			goto out_unlock;
		}
		src = which == SV_FAST_WORDS ? f->mem.words_fd : f->mem.pub_fd;
	}
	err = fcntl(src, F_DUPFD_CLOEXEC, 0);
	if (err < 0)
		err = -errno;
out_unlock:
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
out_rcu:
	rcu_read_unlock();
	return err;
}
