/* SPDX-License-Identifier: MIT */
/*
 * The journal: every change to the engine's state as a record, so that a process that takes
 * over after a crash finds the state the calls answered so far saw.
 *
 * Why it is crash-consistent
 * --------------------------
 * A change becomes visible to others (another call reads it, an answer reports it) only after
 * the lock under which it was made is released. Each locked section that changes something
 * notes its changes as it makes them (sv_jnl_*()) and hands them to the sink as one record
 * right before that lock goes (sv_sem_unlock(), or the end of newary()). So:
 *  - a record is whole or absent: the sink writes its header last (sv_journal in sem.h), and a
 *    process killed in between leaves no header, so the reader stops there;
 *  - records that touch the same semaphore are in the order of their sections, since the lock
 *    that orders the sections is held while each record goes out; records of sections that
 *    touch nothing in common may come in either order, and applying them in either order gives
 *    the same state;
 *  - nothing anybody saw is missing: a state read by a call was made by sections whose records
 *    were out before it could be read; a section killed before its record went out had made
 *    changes nobody saw, and its call, never answered, is served again.
 * Records say what things became (a value, a semadj, a set's permissions), not what a call
 * asked, so a replay needs no permission check, clock or wake-up: it applies them in order.
 * A record also names the calls its section completed (sv_jnl_done()), so that a call done
 * before a crash but not yet answered gets its answer instead of being made twice.
 *
 * Format
 * ------
 * Records follow each other, each 8-byte aligned: a header (u32 length of the whole record,
 * u32 JNL_MAGIC), then items, each a one-byte tag and its fields (the writer's byte order,
 * unaligned), then zeros up to the length. A zero header ends the journal. Items:
 *
 *   'S' u64 ns key, i32 set id       the set the items after it are about (the first item)
 *   'N' u64 ns key                   the namespace, for 'l'
 *   'n' i32 key, nsems; u32 uid, gid, cuid, cgid, mode; i64 ctime;
 *       i32 seq, last_idx, next_id; u32 idr_next     the set was made; the namespace's id state
 *   'r'                              the set was removed (and its undo entries with it)
 *   'v' i32 num, semval, sempid
 *   'a' u64 proc key, i32 pid, u32 budget uid, i32 num, i32 semadj   (entry made if need be)
 *   'c' i32 num                      every entry's semadj[num] is 0 (-1: every semadj)
 *   'g' u64 proc key, i32 pid        the process's entry was applied at its exit
 *   'p' u32 uid, gid, mode
 *   't' i64 otime, ctime             the set's times as the section left them (the last item,
 *                                    absent when the set was removed)
 *   'd' u64 jid, i64 result          a call was done (SV_JNL_UNDONE: taken back)
 *   'l' i32 semmsl, semmns, semopm, semmni, next_id
 *
 * The journal lives as long as its sink keeps it; the version is the magic's last byte. What
 * the counters of sv_sem_info say (statistics) is not journaled.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define JNL_MAGIC 0x314a5653u /* "SVJ1" */
#define HDR_SIZE  8u
#define FAST_SIZE 1024u

const struct sv_journal *_Atomic sv_jnl_sink;

void sv_journal_attach(const struct sv_journal *j)
{
	atomic_store_explicit(&sv_jnl_sink, j, memory_order_seq_cst);
}

void sv_ns_set_jkey(struct sv_ns *ns, uint64_t key)
{
	ns->jkey = key;
}

void sv_proc_set_jkey(struct sv_proc *p, uint64_t key)
{
	p->jkey = key;
}

/* ---- writing ---- */

/*
 * The record of the locked section this thread is in. A thread is in at most one section that
 * changes state at a time (the engine never changes two sets under one lock), so one will do.
 */
struct txn {
	struct sv_set *set; /* what 'S' named, NULL: 'N' or nothing */
	unsigned char *buf;
	size_t len, cap;
	unsigned char fast[FAST_SIZE];
};

static __thread struct txn tx;

/* Room for n more bytes: false when out of memory (the note is lost: see put()). */
static bool reserve(size_t n)
{
	size_t cap;
	unsigned char *nb;

	if (!tx.buf) {
		tx.buf = tx.fast;
		tx.cap = sizeof(tx.fast);
	}
	if (tx.len + n <= tx.cap)
		return true;
	for (cap = tx.cap * 2; cap < tx.len + n; cap *= 2)
		;
	nb = tx.buf == tx.fast ? malloc(cap) : realloc(tx.buf, cap);
	if (!nb)
		return false;
	if (tx.buf == tx.fast)
		memcpy(nb, tx.fast, tx.len);
	tx.buf = nb;
	tx.cap = cap;
	return true;
}

/*
 * Without memory for a note the change cannot be journaled, and a journal that misses a change
 * replays to a state nobody saw. Stopping is the honest way out: the next process takes over
 * from the journal as it stands, which no caller saw beyond.
 */
static void put(const void *p, size_t n)
{
	if (!reserve(n))
		abort();
	memcpy(tx.buf + tx.len, p, n);
	tx.len += n;
}

static void put_u8(unsigned char v)
{
	put(&v, 1);
}
static void put_u32(uint32_t v)
{
	put(&v, 4);
}
static void put_i32(int32_t v)
{
	put(&v, 4);
}
static void put_u64(uint64_t v)
{
	put(&v, 8);
}
static void put_i64(int64_t v)
{
	put(&v, 8);
}

/* Open a record: room for the header, written by sv_jnl_flush(). */
static void open_record(void)
{
	tx.len = 0;
	if (!reserve(HDR_SIZE))
		abort();
	memset(tx.buf, 0, HDR_SIZE);
	tx.len = HDR_SIZE;
}

/* The items that follow are about set. */
static void about(struct sv_set *set)
{
	if (tx.len && tx.set == set)
		return;
	sv_jnl_flush();
	open_record();
	tx.set = set;
	put_u8('S');
	put_u64(set->ns->jkey);
	put_i32(set->id);
}

void sv_jnl_flush(void)
{
	const struct sv_journal *j = atomic_load_explicit(&sv_jnl_sink, memory_order_relaxed);
	uint32_t hdr[2];

	if (!tx.len)
		return;
	if (tx.set && !tx.set->deleted) {
		put_u8('t');
		put_i64(SV_RELAXED(&tx.set->otime));
		put_i64(SV_RELAXED(&tx.set->ctime));
	}
	while (tx.len % 8)
		put_u8(0);
	hdr[0] = (uint32_t)tx.len;
	hdr[1] = JNL_MAGIC;
	memcpy(tx.buf, hdr, sizeof(hdr));
	if (j)
		j->append(j->ctx, tx.buf, tx.len);
	tx.len = 0;
	tx.set = NULL;
	if (tx.buf != tx.fast && tx.cap > 64 * FAST_SIZE) {
		/* a SETALL of a huge set: do not keep its buffer for ever */
		free(tx.buf);
		tx.buf = NULL;
	}
}

void sv_jnl_sem(struct sv_set *set, int num)
{
	const struct sv_sem *sem = &sv_sems(set)[num];

	if (!sv_jnl_on())
		return;
	about(set);
	put_u8('v');
	put_i32(num);
	put_i32(sem->semval);
	put_i32(sem->sempid);
}

void sv_jnl_adj(struct sv_set *set, const struct sv_undo *un, int num)
{
	if (!sv_jnl_on() || un->semid == -1)
		return;
	about(set);
	put_u8('a');
	put_u64(un->proc->jkey);
	put_i32(un->proc->pid);
	put_u32(un->budget_uid);
	put_i32(num);
	put_i32(un->semadj[num]);
}

void sv_jnl_clear_adj(struct sv_set *set, int num)
{
	if (!sv_jnl_on())
		return;
	about(set);
	put_u8('c');
	put_i32(num);
}

void sv_jnl_perm(struct sv_set *set)
{
	if (!sv_jnl_on())
		return;
	about(set);
	put_u8('p');
	put_u32(SV_RELAXED(&set->uid));
	put_u32(SV_RELAXED(&set->gid));
	put_u32(SV_RELAXED(&set->mode));
}

void sv_jnl_new(struct sv_set *set)
{
	struct sv_ns *ns = set->ns;

	if (!sv_jnl_on())
		return;
	xassert_held(&ns->ids_lock);
	about(set);
	put_u8('n');
	put_i32(set->key);
	put_i32(set->nsems);
	put_u32(set->uid);
	put_u32(set->gid);
	put_u32(set->cuid);
	put_u32(set->cgid);
	put_u32(set->mode);
	put_i64(set->ctime);
	put_i32(ns->seq);
	put_i32(ns->last_idx);
	put_i32(ns->next_id);
	put_u32(ns->idr_next);
}

void sv_jnl_rm(struct sv_set *set)
{
	if (!sv_jnl_on())
		return;
	about(set);
	put_u8('r');
}

void sv_jnl_undo_gone(struct sv_set *set, const struct sv_undo *un)
{
	if (!sv_jnl_on())
		return;
	about(set);
	put_u8('g');
	put_u64(un->proc->jkey);
	put_i32(un->proc->pid);
}

void sv_jnl_done(struct sv_set *set, uint64_t jid, int64_t result)
{
	if (!sv_jnl_on() || !jid)
		return;
	about(set);
	put_u8('d');
	put_u64(jid);
	put_i64(result);
}

/* For sv_ns_set_limits() and sv_ns_set_next_id(): a record of its own. Caller holds ids_lock. */
void sv_jnl_limits(struct sv_ns *ns)
{
	if (!sv_jnl_on())
		return;
	sv_jnl_flush();
	open_record();
	put_u8('N');
	put_u64(ns->jkey);
	put_u8('l');
	put_i32(SV_RELAXED(&ns->semmsl));
	put_i32(SV_RELAXED(&ns->semmns));
	put_i32(SV_RELAXED(&ns->semopm));
	put_i32(SV_RELAXED(&ns->semmni));
	put_i32(ns->next_id);
	sv_jnl_flush();
}

/* ---- replaying ---- */

struct rd {
	const unsigned char *p;
	size_t left;
	bool bad;
};

static void get(struct rd *r, void *v, size_t n)
{
	if (r->left < n) {
		r->bad = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p, n);
	r->p += n;
	r->left -= n;
}

static uint8_t get_u8(struct rd *r)
{
	uint8_t v;

	get(r, &v, 1);
	return v;
}
static uint32_t get_u32(struct rd *r)
{
	uint32_t v;

	get(r, &v, 4);
	return v;
}
static int32_t get_i32(struct rd *r)
{
	int32_t v;

	get(r, &v, 4);
	return v;
}
static uint64_t get_u64(struct rd *r)
{
	uint64_t v;

	get(r, &v, 8);
	return v;
}
static int64_t get_i64(struct rd *r)
{
	int64_t v;

	get(r, &v, 8);
	return v;
}

/* Where the items of a record apply. */
struct at {
	const struct sv_replay *r;
	struct sv_ns *ns;   /* NULL: a namespace no longer kept, its items are skipped */
	struct sv_set *set; /* NULL until looked up, or when 'S' names no set yet ('n' follows) */
	int32_t id;
};

/* 'n': make the set under the id it had. Its index must be free. */
static int replay_new(struct at *a, struct rd *r)
{
	struct sv_ns *ns = a->ns;
	int32_t key = get_i32(r), nsems = get_i32(r);
	uint32_t uid = get_u32(r), gid = get_u32(r), cuid = get_u32(r), cgid = get_u32(r);
	uint32_t mode = get_u32(r);
	int64_t ctime = get_i64(r);
	int32_t seq = get_i32(r), last_idx = get_i32(r), next_id = get_i32(r);
	uint32_t idr_next = get_u32(r);
	struct sv_set *set;
	int err = 0;

	if (r->bad || !ns)
		return r->bad ? -EINVAL : 0;
	if (a->set || a->id < 0 || nsems < 1 || mode > 0777 || seq < 0 || seq >= SV_SEQ_MAX ||
	    last_idx < -1 || last_idx >= SV_IPCMNI || idr_next > SV_IPCMNI || next_id < -1)
		return -EINVAL;
	xlock(&ns->ids_lock);
	rcu_read_lock();
	/* newary()'s own checks held when the set was made, with the limits the replay has */
	if (nsems > SV_RELAXED(&ns->semmsl) ||
	    (long long)ns->used_sems + nsems > SV_RELAXED(&ns->semmns) ||
	    sv_set_lookup_index(ns, a->id % SV_IPCMNI) ||
	    (key != SV_IPC_PRIVATE && sv_ns_key_taken(ns, key))) {
		err = -EINVAL;
		goto out;
	}
	if ((err = sv_ids_reserve(ns, a->id % SV_IPCMNI)))
		goto out;
	if (!(set = sv_set_new(ns, key, nsems))) {
		err = -ENOMEM;
		goto out;
	}
	if (ns->budget && (err = sv_budget_charge_restore(ns->budget, cuid, nsems))) {
		sv_set_discard(set);
		goto out;
	}
	set->id = a->id;
	set->uid = uid;
	set->gid = gid;
	set->cuid = cuid;
	set->cgid = cgid;
	set->mode = mode;
	set->ctime = ctime;
	sv_ids_insert(ns, set);
	ns->seq = seq;
	ns->last_idx = last_idx;
	ns->next_id = next_id;
	ns->idr_next = idr_next;
	a->set = set;
out:
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
	return err;
}

/* 'r' */
static void replay_rm(struct at *a)
{
	struct sv_ns *ns = a->ns;
	struct sv_wakeq wq;

	sv_wakeq_init(&wq);
	xlock(&ns->ids_lock);
	rcu_read_lock();
	sv_sem_lock(a->set, NULL, 0);
	sv_freeary(ns, a->set, &wq);
	sv_sem_unlock(a->set, SV_LOCK_GLOBAL);
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
	SV_ASSERT(sv_wakeq_empty(&wq)); /* nothing parks before the replay is over */
	sv_set_put(a->set);
	a->set = NULL;
}

/* 'a': the entry is made (charged as a restore) if the process has none for the set. */
static int replay_adj(struct at *a, struct rd *r)
{
	uint64_t pkey = get_u64(r);
	int32_t pid = get_i32(r);
	uint32_t buid = get_u32(r);
	int32_t num = get_i32(r), adj = get_i32(r);
	struct sv_proc *p;
	struct sv_undo *un;

	if (r->bad || num < 0 || num >= a->set->nsems || adj < -SV_SEMAEM - 1 || adj > SV_SEMAEM)
		return -EINVAL;
	p = a->r->proc(a->r->ctx, a->ns, pkey, pid);
	if (!p)
		return -ENOMEM;
	un = sv_undo_replay_entry(p, a->set, buid);
	if (!un)
		return -ENOMEM;
	un->semadj[num] = (int16_t)adj;
	return 0;
}

/* One item of a record about a set; a->set is looked up. */
static int replay_set_item(struct at *a, uint8_t tag, struct rd *r)
{
	struct sv_set *set = a->set;
	struct sv_undo *un;
	int32_t num, val, pid;

	switch (tag) {
	case 'v':
		num = get_i32(r);
		val = get_i32(r);
		pid = get_i32(r);
		if (r->bad || num < 0 || num >= set->nsems || val < 0 || val > SV_SEMVMX)
			return -EINVAL;
		sv_sems(set)[num].semval = val;
		sv_sems(set)[num].sempid = pid;
		return 0;
	case 'a':
		return replay_adj(a, r);
	case 'c':
		num = get_i32(r);
		if (r->bad || num < -1 || num >= set->nsems)
			return -EINVAL;
		cds_list_for_each_entry(un, &set->undos, set_node) {
			if (num >= 0)
				un->semadj[num] = 0;
			else
				memset(un->semadj, 0, (size_t)un->nsems * sizeof(un->semadj[0]));
		}
		return 0;
	case 'g': {
		uint64_t pkey = get_u64(r);
		struct sv_proc *p;

		pid = get_i32(r);
		if (r->bad)
			return -EINVAL;
		p = a->r->proc(a->r->ctx, a->ns, pkey, pid);
		if (!p)
			return -ENOMEM;
		sv_undo_replay_retire(p, set);
		return 0;
	}
	case 'p': {
		uint32_t uid = get_u32(r), gid = get_u32(r), mode = get_u32(r);

		if (r->bad || mode > 0777)
			return -EINVAL;
		SV_SET_RELAXED(&set->uid, uid);
		SV_SET_RELAXED(&set->gid, gid);
		SV_SET_RELAXED(&set->mode, mode);
		return 0;
	}
	case 't': {
		int64_t otime = get_i64(r), ctime = get_i64(r);

		if (r->bad)
			return -EINVAL;
		SV_SET_RELAXED(&set->otime, otime);
		SV_SET_RELAXED(&set->ctime, ctime);
		return 0;
	}
	case 'r':
		replay_rm(a);
		return 0;
	}
	return -EINVAL;
}

/* Skip the fields of an item of a namespace no longer kept. */
static int skip_item(uint8_t tag, struct rd *r)
{
	static const unsigned char size[256] = {
		['n'] = 48, ['r'] = 0,	['v'] = 12, ['a'] = 24, ['c'] = 4,
		['g'] = 12, ['p'] = 12, ['t'] = 16, ['l'] = 20,
	};
	unsigned char skip[64];

	if (!size[tag] && tag != 'r')
		return -EINVAL;
	get(r, skip, size[tag]);
	return r->bad ? -EINVAL : 0;
}

static int replay_record(const struct sv_replay *rp, struct rd *r)
{
	struct at a = { .r = rp, .id = -1 };
	bool named = false;
	int err = 0;

	while (!err && r->left) {
		uint8_t tag = get_u8(r);

		if (tag == 0)
			break; /* the padding */
		switch (tag) {
		case 'S':
		case 'N': {
			uint64_t key = get_u64(r);

			a.id = tag == 'S' ? get_i32(r) : -1;
			if (r->bad || named)
				return -EINVAL; /* one subject per record */
			named = true;
			a.ns = rp->ns(rp->ctx, key);
			if (a.ns && tag == 'S') {
				rcu_read_lock();
				a.set = sv_set_lookup(a.ns, a.id);
				rcu_read_unlock();
			}
			break;
		}
		case 'd': {
			uint64_t jid = get_u64(r);
			int64_t result = get_i64(r);

			if (r->bad)
				return -EINVAL;
			if (rp->call)
				rp->call(rp->ctx, jid, result);
			break;
		}
		case 'n':
			if (!named || a.id < 0)
				return -EINVAL;
			err = replay_new(&a, r);
			break;
		case 'l': {
			struct sv_limits lim;
			int32_t next_id;

			if (!named || a.id >= 0)
				return -EINVAL;
			if (!a.ns) {
				err = skip_item(tag, r);
				break;
			}
			lim.semmsl = get_i32(r);
			lim.semmns = get_i32(r);
			lim.semopm = get_i32(r);
			lim.semmni = get_i32(r);
			next_id = get_i32(r);
			if (r->bad || lim.semmni < 0 || lim.semmni > SV_IPCMNI || next_id < -1)
				return -EINVAL;
			xlock(&a.ns->ids_lock);
			sv_ns_store_limits(a.ns, &lim);
			a.ns->next_id = next_id;
			xunlock(&a.ns->ids_lock);
			break;
		}
		default:
			if (!named || a.id < 0)
				return -EINVAL;
			if (!a.ns)
				err = skip_item(tag, r);
			else if (!a.set)
				err = -EINVAL; /* a set that is not there */
			else
				err = replay_set_item(&a, tag, r);
		}
	}
	return err;
}

long sv_journal_replay(const void *buf, size_t len, const struct sv_replay *rp)
{
	const unsigned char *p = buf;
	size_t off = 0;

	SV_ASSERT(!sv_jnl_on()); /* a replay is not journaled again */
	while (len - off >= HDR_SIZE) {
		uint32_t hdr[2];
		struct rd r;
		int err;

		memcpy(hdr, p + off, sizeof(hdr));
		if (hdr[0] == 0)
			break;
		if (hdr[1] != JNL_MAGIC || hdr[0] < HDR_SIZE || hdr[0] % 8 || hdr[0] > len - off)
			return -EINVAL;
		r = (struct rd){ .p = p + off + HDR_SIZE, .left = hdr[0] - HDR_SIZE };
		err = replay_record(rp, &r);
		if (err)
			return err;
		off += hdr[0];
	}
	return (long)off;
}
