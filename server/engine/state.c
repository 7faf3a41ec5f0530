/* SPDX-License-Identifier: MIT */
/*
 * State that outlives the process: a namespace's sets and a process's SEM_UNDO entries as byte
 * strings, so that a supervisor that stops (a restart, an upgrade) hands them to the next one,
 * which may be a newer build. Parked waiters are not written: the notify layer serves their
 * calls again, and a call that waits parks again.
 *
 * Format
 * ------
 * Every integer has a fixed width and the writer's byte order (the reader runs on the same
 * machine); nothing is aligned, and there are no pointers. Each blob opens with a header:
 *
 *   magic[4]   "SVNS" (a namespace) or "SVPR" (a process)
 *   u32        version, 1 here
 *   u64        length of the whole blob, header included
 *
 * A namespace, version 1 (after the header):
 *
 *   i32 semmsl, semmns, semopm, semmni      the limits (sv_ns_set_limits())
 *   i32 seq                                 sequence number for new ids, < SV_SEQ_MAX
 *   i32 last_idx                            index given out last, -1..SV_IPCMNI-1
 *   u32 idr_next                            where the cyclic index search starts, <= SV_IPCMNI
 *   i32 next_id                             sem_next_id, -1 if unset
 *   u32 nsets
 *   nsets times, in index order:
 *     i32 index, id, key                    id = seq * SV_IPCMNI + index, index < SV_IPCMNI
 *     u32 uid, gid, cuid, cgid, mode        mode within 0777
 *     i64 ctime, otime
 *     i32 nsems                             >= 1
 *     u32 lock_spun, lock_slept             the set lock's statistics
 *     nsems times:
 *       i32 semval                          0..SV_SEMVMX
 *       i32 sempid
 *       u32 nops, nwaits, lock_spun, lock_slept
 *
 * Sets come in strictly increasing index order (so no index twice), and non-private keys are
 * unique. in_use, used_sems and max_idx are not written: they follow from the sets. A blob this
 * reader takes is one the writer would write for the namespace it makes, byte for byte.
 *
 * A process, version 1 (after the header):
 *
 *   u32 nentries
 *   nentries times:
 *     i32 semid                             >= 0
 *     i32 nsems                             >= 1
 *     u32 budget_uid                        whom the entry is charged to
 *     nsems times: i32 semadj               -(SV_SEMAEM + 1)..SV_SEMAEM, a short's range
 *
 * Versions. A reader takes every version up to its own and refuses a newer one with
 * -EPROTONOSUPPORT (the caller can say that the old process is newer than this one). A format
 * change bumps the version; the reader keeps decoding each older version (new fields take the
 * value a fresh namespace has), so a newer build always reads version 1.
 *
 * Trust. A blob is outside input: a broken or hostile writer could have made it. Every length,
 * count and value is checked before anything is made, nothing is read past the length given,
 * and a blob that fails any check changes nothing (-EINVAL). The bound on nsems is not the
 * current SEMMSL, since the limits may have been lowered since the set was made: a set may have
 * up to INT_MAX semaphores (an int counts them, as semget's argument does) and a namespace
 * INT_MAX in all (ns->used_sems is an int too). What that costs is bounded by the blob itself:
 * every semaphore takes 24 bytes of it, so a blob cannot make the reader allocate much more
 * than a few times its own length.
 *
 * Locking: the import takes ids_lock, and the export takes ids_lock and each set's lock, as
 * creation and inspection do, although the caller guarantees that no call is served meanwhile
 * (the debug build's assertions hold all the same).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "engine/engine.h"
#include "util/fault.h"

#define STATE_VERSION 1
#define HDR_SIZE      16 /* magic, version, length */
#define NS_FIXED      36 /* limits, seq, last_idx, idr_next, next_id, nsets */
#define SET_FIXED     60
#define SEM_SIZE      24
#define PROC_FIXED    4 /* nentries */
#define UNDO_FIXED    12
#define SEMADJ_SIZE   4

/* The export sums sizes of at most INT_MAX semaphores in all: no overflow with a 64-bit size_t. */
_Static_assert(sizeof(size_t) >= 8, "blob sizes need a 64-bit size_t");

/*
 * Every allocation here may fail on demand in the fault-injection build (util/fault.h): the
 * tests fail each in turn and check that nothing was left made or charged.
 */
static void *state_calloc(size_t n, size_t size)
{
	return sv_fault(SV_FAULT_ALLOC) ? NULL : calloc(n, size);
}

/* ---- writing: into a buffer sized beforehand ---- */

struct wr {
	unsigned char *p;
};

static void put(struct wr *w, const void *v, size_t n)
{
	memcpy(w->p, v, n);
	w->p += n;
}

static void put_u32(struct wr *w, uint32_t v)
{
	put(w, &v, sizeof(v));
}

static void put_i32(struct wr *w, int32_t v)
{
	put(w, &v, sizeof(v));
}

static void put_i64(struct wr *w, int64_t v)
{
	put(w, &v, sizeof(v));
}

static void put_hdr(struct wr *w, const char *magic, uint64_t len)
{
	put(w, magic, 4);
	put_u32(w, STATE_VERSION);
	put(w, &len, sizeof(len));
}

/* ---- reading: never past the end; a short read marks the reader bad and gives 0 ---- */

struct rd {
	const unsigned char *p;
	size_t left;
	bool bad;
};

static void get(struct rd *r, void *v, size_t n)
{
	if (r->bad || r->left < n) {
		r->bad = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p, n);
	r->p += n;
	r->left -= n;
}

static uint32_t get_u32(struct rd *r)
{
	uint32_t v;

	get(r, &v, sizeof(v));
	return v;
}

static int32_t get_i32(struct rd *r)
{
	int32_t v;

	get(r, &v, sizeof(v));
	return v;
}

static int64_t get_i64(struct rd *r)
{
	int64_t v;

	get(r, &v, sizeof(v));
	return v;
}

/* Can count records of at least size bytes each still be there? (No overflow: a division.) */
static bool fits(const struct rd *r, uint64_t count, size_t size)
{
	return !r->bad && count <= r->left / size;
}

/*
 * The header: 0 with the reader past it, -EINVAL (not this magic, a length other than len, too
 * short) or -EPROTONOSUPPORT (a newer version than this build reads).
 */
static int get_hdr(struct rd *r, const void *buf, size_t len, const char *magic)
{
	char m[4];
	uint32_t version;
	uint64_t total;

	*r = (struct rd){ .p = buf, .left = buf ? len : 0 };
	get(r, m, sizeof(m));
	version = get_u32(r);
	get(r, &total, sizeof(total));
	if (r->bad || memcmp(m, magic, sizeof(m)) || total != len || version == 0)
		return -EINVAL;
	if (version > STATE_VERSION)
		return -EPROTONOSUPPORT;
	return 0;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Does sorted v[0..n) hold a value twice? */
static bool has_duplicate(const int32_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (v[i] == v[i - 1])
			return true;
	return false;
}

/* ---- a namespace ---- */

/* What a set takes in a blob. */
static size_t set_bytes(const struct sv_set *set)
{
	return SET_FIXED + (size_t)set->nsems * SEM_SIZE;
}

/* Caller holds ids_lock and is in RCU; set is in the tables. */
static void put_set(struct wr *w, struct sv_set *set)
{
	sv_sem_lock(set, NULL, 0);
	put_i32(w, set->id % SV_IPCMNI);
	put_i32(w, set->id);
	put_i32(w, set->key);
	put_u32(w, SV_RELAXED(&set->uid));
	put_u32(w, SV_RELAXED(&set->gid));
	put_u32(w, SV_RELAXED(&set->cuid));
	put_u32(w, SV_RELAXED(&set->cgid));
	put_u32(w, SV_RELAXED(&set->mode));
	put_i64(w, SV_RELAXED(&set->ctime));
	put_i64(w, SV_RELAXED(&set->otime));
	put_i32(w, set->nsems);
	put_u32(w, SV_RELAXED(&set->lock_spun));
	put_u32(w, SV_RELAXED(&set->lock_slept));
	for (int i = 0; i < set->nsems; i++) {
		const struct sv_sem *sem = sv_sem_val(set, i);

		put_i32(w, sem->semval);
		put_i32(w, sem->sempid);
		put_u32(w, SV_RELAXED(&sem->nops));
		put_u32(w, SV_RELAXED(&sem->nwaits));
		put_u32(w, SV_RELAXED(&sem->lock_spun));
		put_u32(w, SV_RELAXED(&sem->lock_slept));
	}
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
}

int sv_ns_export(struct sv_ns *ns, void **buf, size_t *len)
{
	size_t size = HDR_SIZE + NS_FIXED;
	struct sv_limits lim;
	struct wr w;
	int nsets = 0;

	/* ids_lock: the sets and the allocator stay as they are between sizing and writing */
	xlock(&ns->ids_lock);
	rcu_read_lock();
	for (int idx = 0; idx <= ns->max_idx; idx++) {
		struct sv_set *set = sv_set_lookup_index(ns, idx);

		if (set)
			size += set_bytes(set); /* at most INT_MAX semaphores: no overflow */
	}
	*buf = sv_fault(SV_FAULT_ALLOC) ? NULL : malloc(size);
	if (!*buf) {
		rcu_read_unlock();
		xunlock(&ns->ids_lock);
		return -ENOMEM;
	}
	w.p = *buf;
	sv_ns_limits(ns, &lim);
	put_hdr(&w, "SVNS", size);
	put_i32(&w, lim.semmsl);
	put_i32(&w, lim.semmns);
	put_i32(&w, lim.semopm);
	put_i32(&w, lim.semmni);
	put_i32(&w, ns->seq);
	put_i32(&w, ns->last_idx);
	put_u32(&w, ns->idr_next);
	put_i32(&w, ns->next_id);
	put_u32(&w, (uint32_t)ns->in_use);
	for (int idx = 0; idx <= ns->max_idx; idx++) {
		struct sv_set *set = sv_set_lookup_index(ns, idx);

		if (set) {
			put_set(&w, set);
			nsets++;
		}
	}
	SV_ASSERT(nsets == ns->in_use && w.p == (unsigned char *)*buf + size);
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
	*len = size;
	return 0;
}

/* One set as read from a blob (its semaphores stay there, at sems). */
struct set_rec {
	int32_t id, key;
	uint32_t uid, gid, cuid, cgid, mode;
	int64_t ctime, otime;
	int32_t nsems;
	uint32_t lock_spun, lock_slept;
	const unsigned char *sems;
};

struct ns_rec {
	struct sv_limits lim;
	int32_t seq, last_idx, next_id;
	uint32_t idr_next;
	uint32_t nsets;
	struct set_rec *sets; /* malloc'd */
};

/* One set: 0 with r past it, or -EINVAL. *last is the index of the set before (-1: none). */
static int get_set(struct rd *r, struct set_rec *s, int32_t *last)
{
	int32_t idx = get_i32(r);

	s->id = get_i32(r);
	s->key = get_i32(r);
	s->uid = get_u32(r);
	s->gid = get_u32(r);
	s->cuid = get_u32(r);
	s->cgid = get_u32(r);
	s->mode = get_u32(r);
	s->ctime = get_i64(r);
	s->otime = get_i64(r);
	s->nsems = get_i32(r);
	s->lock_spun = get_u32(r);
	s->lock_slept = get_u32(r);
	/* a non-negative int32 id has seq <= SV_SEQ_MAX by construction */
	if (r->bad || idx < 0 || idx >= SV_IPCMNI || s->id < 0 || s->id % SV_IPCMNI != idx)
		return -EINVAL;
	/* in index order, as written: no index twice, and a valid blob reads back byte for byte */
	if (idx <= *last)
		return -EINVAL;
	*last = idx;
	if (s->mode & ~0777u || s->nsems < 1 || !fits(r, (uint64_t)s->nsems, SEM_SIZE))
		return -EINVAL;
	s->sems = r->p;
	for (int i = 0; i < s->nsems; i++) {
		int32_t semval = get_i32(r);

		get_i32(r); /* sempid: any pid */
		for (int k = 0; k < 4; k++)
			get_u32(r); /* statistics: any count */
		if (semval < 0 || semval > SV_SEMVMX)
			return -EINVAL;
	}
	return r->bad ? -EINVAL : 0;
}

/* The whole blob, checked: 0 (rec->sets to free), -EINVAL, -EPROTONOSUPPORT or -ENOMEM. */
static int get_ns(const void *buf, size_t len, struct ns_rec *rec)
{
	int64_t total_sems = 0;
	int32_t last = -1;
	int32_t *keys;
	size_t nkeys = 0;
	struct rd r;
	int err;

	memset(rec, 0, sizeof(*rec));
	err = get_hdr(&r, buf, len, "SVNS");
	if (err)
		return err;
	rec->lim.semmsl = get_i32(&r);
	rec->lim.semmns = get_i32(&r);
	rec->lim.semopm = get_i32(&r);
	rec->lim.semmni = get_i32(&r);
	rec->seq = get_i32(&r);
	rec->last_idx = get_i32(&r);
	rec->idr_next = get_u32(&r);
	rec->next_id = get_i32(&r);
	rec->nsets = get_u32(&r);
	if (r.bad || rec->lim.semmni < 0 || rec->lim.semmni > SV_IPCMNI || rec->seq < 0 ||
	    rec->seq >= SV_SEQ_MAX || rec->last_idx < -1 || rec->last_idx >= SV_IPCMNI ||
	    rec->idr_next > SV_IPCMNI || rec->next_id < -1 || rec->nsets > SV_IPCMNI ||
	    !fits(&r, rec->nsets, SET_FIXED))
		return -EINVAL;
	if (!rec->nsets)
		return r.left ? -EINVAL : 0;

	rec->sets = state_calloc(rec->nsets, sizeof(*rec->sets));
	keys = state_calloc(rec->nsets, sizeof(*keys));
	if (!rec->sets || !keys) {
		err = -ENOMEM;
		goto fail;
	}
	err = -EINVAL;
	for (uint32_t i = 0; i < rec->nsets; i++) {
		struct set_rec *s = &rec->sets[i];

		if (get_set(&r, s, &last))
			goto fail;
		total_sems += s->nsems;
		if (total_sems > INT_MAX)
			goto fail;
		if (s->key != SV_IPC_PRIVATE)
			keys[nkeys++] = s->key;
	}
	if (r.left)
		goto fail; /* bytes after the last set: not a blob this build wrote */
	qsort(keys, nkeys, sizeof(*keys), cmp_i32);
	if (has_duplicate(keys, nkeys))
		goto fail;
	free(keys);
	return 0;
fail:
	free(keys);
	free(rec->sets);
	rec->sets = NULL;
	return err;
}

/* A set from its record: not in the tables yet. NULL when out of memory. */
static struct sv_set *make_set(struct sv_ns *ns, const struct set_rec *s)
{
	struct sv_set *set = sv_fault(SV_FAULT_ALLOC) ? NULL : sv_set_new(ns, s->key, s->nsems);
	struct rd r = { .p = s->sems, .left = (size_t)s->nsems * SEM_SIZE };

	if (!set)
		return NULL;
	set->id = s->id;
	set->uid = s->uid;
	set->gid = s->gid;
	set->cuid = s->cuid;
	set->cgid = s->cgid;
	set->mode = s->mode;
	set->ctime = s->ctime;
	set->otime = s->otime;
	set->lock_spun = s->lock_spun;
	set->lock_slept = s->lock_slept;
	for (int i = 0; i < s->nsems; i++) {
		struct sv_sem *sem = &sv_sems(set)[i];

		sem->semval = get_i32(&r);
		sem->sempid = get_i32(&r);
		sem->nops = get_u32(&r);
		sem->nwaits = get_u32(&r);
		sem->lock_spun = get_u32(&r);
		sem->lock_slept = get_u32(&r);
	}
	return set;
}

/*
 * Make every set and charge it, entering none: 0, -EBUSY or -ENOMEM, and then nothing is
 * left made or charged. Caller holds ids_lock.
 */
static int make_sets(struct sv_ns *ns, const struct ns_rec *rec, struct sv_set **sets)
{
	uint32_t i;
	int err = 0;

	xassert_held(&ns->ids_lock);
	if (ns->in_use)
		return -EBUSY;
	for (i = 0; i < rec->nsets; i++) {
		const struct set_rec *s = &rec->sets[i];

		err = sv_ids_reserve(ns, s->id % SV_IPCMNI);
		if (err)
			break;
		sets[i] = make_set(ns, s);
		if (!sets[i]) {
			err = -ENOMEM;
			break;
		}
		if (ns->budget && (err = sv_budget_charge_restore(ns->budget, s->cuid, s->nsems))) {
			sv_set_discard(sets[i]);
			break;
		}
	}
	if (!err)
		return 0;
	while (i-- > 0) {
		if (ns->budget)
			sv_budget_credit(ns->budget, rec->sets[i].cuid, rec->sets[i].nsems);
		sv_set_discard(sets[i]);
	}
	return err;
}

int sv_ns_import(struct sv_ns *ns, const void *buf, size_t len)
{
	struct sv_set **sets = NULL;
	struct ns_rec rec;
	int err;

	err = get_ns(buf, len, &rec);
	if (err)
		return err;
	if (rec.nsets && !(sets = state_calloc(rec.nsets, sizeof(*sets)))) {
		free(rec.sets);
		return -ENOMEM;
	}

	xlock(&ns->ids_lock);
	rcu_read_lock();
	err = make_sets(ns, &rec, sets);
	if (!err) {
		/* nothing can fail from here on */
		for (uint32_t i = 0; i < rec.nsets; i++)
			sv_ids_insert(ns, sets[i]);
		ns->seq = rec.seq;
		ns->last_idx = rec.last_idx;
		ns->idr_next = rec.idr_next;
		ns->next_id = rec.next_id;
		if (sv_ns_store_limits(ns, &rec.lim))
			abort(); /* semmni was checked */
	}
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
	free(sets);
	free(rec.sets);
	return err;
}

/* ---- a process ---- */

int sv_proc_export(struct sv_proc *p, void **buf, size_t *len)
{
	size_t size = HDR_SIZE + PROC_FIXED;
	unsigned char *count_at;
	struct sv_undo *un;
	uint32_t n = 0;
	struct wr w;

	rcu_read_lock();
	xlock(&p->lock);
	cds_list_for_each_entry(un, &p->undos, proc_node) {
		if (un->semid != -1)
			size += UNDO_FIXED + (size_t)un->nsems * SEMADJ_SIZE;
	}
	xunlock(&p->lock);
	*buf = sv_fault(SV_FAULT_ALLOC) ? NULL : malloc(size);
	if (!*buf) {
		rcu_read_unlock();
		return -ENOMEM;
	}
	w.p = *buf;
	put_hdr(&w, "SVPR", size);
	count_at = w.p;
	put_u32(&w, 0);
	/*
	 * semadj[] is read under its set's lock (global) and the entry under p->lock, which nests
	 * inside the set lock: the RCU list is walked without p->lock, as sv_proc_exit() does.
	 */
	cds_list_for_each_entry_rcu(un, &p->undos, proc_node)
	{
		int semid = un->semid;
		struct sv_set *set = semid == -1 ? NULL : sv_set_lookup(p->ns, semid);

		if (!set)
			continue;
		sv_sem_lock(set, NULL, 0);
		xlock(&p->lock);
		/* sized before: a caller that broke the rule may have added entries since */
		if (!set->deleted && un->semid == semid &&
		    (size_t)(w.p - (unsigned char *)*buf) + UNDO_FIXED +
			    (size_t)un->nsems * SEMADJ_SIZE <=
			size) {
			put_i32(&w, un->semid);
			put_i32(&w, un->nsems);
			put_u32(&w, un->budget_uid);
			for (int i = 0; i < un->nsems; i++)
				put_i32(&w, un->semadj[i]);
			n++;
		}
		xunlock(&p->lock);
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
	}
	rcu_read_unlock();
	memcpy(count_at, &n, sizeof(n));
	size = (size_t)(w.p - (unsigned char *)*buf);
	memcpy((unsigned char *)*buf + 8, &(uint64_t){ size }, sizeof(uint64_t));
	*len = size;
	return 0;
}

/* One entry as read from a blob (its semadj[] stays there). */
struct undo_rec {
	int32_t semid, nsems;
	uint32_t budget_uid;
	const unsigned char *semadj;
};

/* The whole blob, checked: 0 (*out to free), -EINVAL, -EPROTONOSUPPORT or -ENOMEM. */
static int get_proc(const void *buf, size_t len, struct undo_rec **out, uint32_t *count)
{
	struct undo_rec *recs;
	int32_t *semids;
	uint32_t n;
	struct rd r;
	int err;

	*out = NULL;
	*count = 0;
	err = get_hdr(&r, buf, len, "SVPR");
	if (err)
		return err;
	n = get_u32(&r);
	if (!fits(&r, n, UNDO_FIXED))
		return -EINVAL;
	if (!n)
		return r.left ? -EINVAL : 0;
	recs = state_calloc(n, sizeof(*recs));
	semids = state_calloc(n, sizeof(*semids));
	if (!recs || !semids) {
		free(recs);
		free(semids);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n && !err; i++) {
		struct undo_rec *u = &recs[i];

		u->semid = semids[i] = get_i32(&r);
		u->nsems = get_i32(&r);
		u->budget_uid = get_u32(&r);
		if (r.bad || u->semid < 0 || u->nsems < 1 ||
		    !fits(&r, (uint64_t)u->nsems, SEMADJ_SIZE)) {
			err = -EINVAL;
			break;
		}
		u->semadj = r.p;
		for (int k = 0; k < u->nsems; k++) {
			int32_t adj = get_i32(&r);

			if (adj < -SV_SEMAEM - 1 || adj > SV_SEMAEM)
				err = -EINVAL;
		}
	}
	if (!err && r.left)
		err = -EINVAL;
	if (!err) {
		qsort(semids, n, sizeof(*semids), cmp_i32);
		if (has_duplicate(semids, n))
			err = -EINVAL;
	}
	free(semids);
	if (err) {
		free(recs);
		return err;
	}
	*out = recs;
	*count = n;
	return 0;
}

/*
 * An entry for each record whose set is there with that many semaphores (else NULL), charged:
 * 0 or -ENOMEM, and then nothing is left made or charged. Caller is in RCU.
 */
static int make_undos(struct sv_proc *p, const struct undo_rec *recs, uint32_t n,
		      struct sv_set **sets, struct sv_undo **uns)
{
	struct sv_budget *b = p->ns->budget;
	uint32_t i;
	int err = 0;

	sv_rcu_assert_reader();
	for (i = 0; i < n && !err; i++) {
		const struct undo_rec *u = &recs[i];
		struct rd r = { .p = u->semadj, .left = (size_t)u->nsems * SEMADJ_SIZE };
		struct sv_set *set = sv_set_lookup(p->ns, u->semid);

		sets[i] = NULL;
		uns[i] = NULL;
		if (!set || set->nsems != u->nsems)
			continue; /* removed, or another set took the id: nothing to adjust */
		uns[i] =
		    state_calloc(1, sizeof(*uns[i]) + (size_t)u->nsems * sizeof(uns[i]->semadj[0]));
		if (!uns[i]) {
			err = -ENOMEM;
			break;
		}
		if (b && (err = sv_budget_charge_undo_restore(b, u->budget_uid, u->nsems))) {
			free(uns[i]);
			uns[i] = NULL;
			break;
		}
		sets[i] = set;
		uns[i]->semid = u->semid;
		uns[i]->nsems = u->nsems;
		uns[i]->budget_uid = u->budget_uid;
		for (int k = 0; k < u->nsems; k++)
			uns[i]->semadj[k] = (int16_t)get_i32(&r);
	}
	if (!err)
		return 0;
	while (i-- > 0) {
		if (uns[i] && b)
			sv_budget_credit_undo(b, uns[i]->budget_uid, uns[i]->nsems);
		free(uns[i]);
	}
	return err;
}

int sv_proc_import(struct sv_proc *p, const void *buf, size_t len)
{
	struct sv_set **sets = NULL;
	struct sv_undo **uns = NULL;
	struct undo_rec *recs;
	uint32_t n;
	bool busy;
	int err;

	err = get_proc(buf, len, &recs, &n);
	if (err)
		return err;
	xlock(&p->lock);
	busy = !cds_list_empty(&p->undos) || atomic_load_explicit(&p->dead, memory_order_relaxed);
	xunlock(&p->lock);
	if (busy) {
		free(recs);
		return -EBUSY;
	}
	if (n &&
	    (!(sets = state_calloc(n, sizeof(*sets))) || !(uns = state_calloc(n, sizeof(*uns))))) {
		free(sets);
		free(recs);
		return -ENOMEM;
	}

	rcu_read_lock();
	err = make_undos(p, recs, n, sets, uns);
	/* last first: each joins the head of p->undos, so the list comes back in its old order */
	for (uint32_t i = n; !err && i-- > 0;) {
		if (!uns[i])
			continue;
		sv_sem_lock(sets[i], NULL, 0);
		if (sets[i]->deleted) {
			/* only a caller breaking the rule could have removed it meanwhile */
			if (p->ns->budget)
				sv_budget_credit_undo(p->ns->budget, uns[i]->budget_uid,
						      uns[i]->nsems);
			free(uns[i]);
		} else {
			sv_undo_link(p, sets[i], uns[i]);
		}
		sv_sem_unlock(sets[i], SV_LOCK_GLOBAL);
	}
	rcu_read_unlock();
	free(uns);
	free(sets);
	free(recs);
	return err;
}
