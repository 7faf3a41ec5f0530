/* SPDX-License-Identifier: MIT */
/*
 * Namespaces and identifiers: what ipc/util.c and ipc/namespace.c do for semaphores.
 *
 * A namespace owns two RCU hash tables (sets by id, sets by key), the four limits, and the index
 * allocator. Ids are formed as Linux forms them, seq * 32768 + index, with indexes handed out
 * cyclically inside [0, max(in_use * 3/2, 64)) so that a removed id does not come back at once,
 * and seq bumped whenever the allocation wraps. Creation and removal are serialised by
 * ns->ids_lock (the kernel's ids->rwsem taken for writing); lookups take no lock at all.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

#define IPC_MIN_CYCLE 64 /* the kernel's RADIX_TREE_MAP_SIZE */

void sv_thread_register(void)
{
	rcu_register_thread();
}

void sv_thread_unregister(void)
{
	rcu_unregister_thread();
}

/* ktime_get_real_seconds(): time() reads the same clock through the vDSO. */
int64_t sv_now(void)
{
	return (int64_t)time(NULL);
}

void sv_limits_default(struct sv_limits *out)
{
	*out = (struct sv_limits){
		.semmsl = 32000, .semmns = SV_SEMMNS, .semopm = 500, .semmni = 32000
	};
}

void sv_limits_host(struct sv_limits *out)
{
	struct sv_limits l;
	FILE *f = fopen("/proc/sys/kernel/sem", "re");

	sv_limits_default(out);
	if (!f)
		return;
	if (fscanf(f, "%d %d %d %d", &l.semmsl, &l.semmns, &l.semopm, &l.semmni) == 4 &&
	    l.semmni >= 0 && l.semmni <= SV_IPCMNI)
		*out = l;
	fclose(f);
}

int sv_limits_parse(const char *s, struct sv_limits *out)
{
	struct sv_limits l;
	char extra;

	if (sscanf(s, "%d,%d,%d,%d%c", &l.semmsl, &l.semmns, &l.semopm, &l.semmni, &extra) != 4)
		return -1;
	if (l.semmsl < 1 || l.semmns < 1 || l.semopm < 1 || l.semmni < 0 || l.semmni > SV_IPCMNI)
		return -1;
	*out = l;
	return 0;
}

static unsigned long hash_u32(uint32_t x)
{
	uint64_t h = (uint64_t)x * 0x9e3779b97f4a7c15ull;

	return (unsigned long)(h ^ (h >> 29));
}

static int match_id(struct cds_lfht_node *node, const void *key)
{
	return caa_container_of(node, struct sv_set, id_node)->id == *(const int32_t *)key;
}

static int match_key(struct cds_lfht_node *node, const void *key)
{
	return caa_container_of(node, struct sv_set, key_node)->key == *(const int32_t *)key;
}

struct sv_ns *sv_ns_new(const struct sv_limits *lim)
{
	return sv_ns_new_budget(lim, NULL);
}

struct sv_ns *sv_ns_new_budget(const struct sv_limits *lim, struct sv_budget *budget)
{
	struct sv_limits host;
	struct sv_ns *ns = calloc(1, sizeof(*ns));
	const int flags = CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING;

	if (!ns)
		return NULL;
	if (!lim) {
		sv_limits_host(&host);
		lim = &host;
	}
	ns->by_id = cds_lfht_new(64, 64, 0, flags, NULL);
	ns->by_key = cds_lfht_new(64, 64, 0, flags, NULL);
	if (!ns->by_id || !ns->by_key) {
		if (ns->by_id)
			cds_lfht_destroy(ns->by_id, NULL);
		if (ns->by_key)
			cds_lfht_destroy(ns->by_key, NULL);
		free(ns);
		return NULL;
	}
	xmutex_init(&ns->ids_lock);
	ns->semmsl = lim->semmsl;
	ns->semmns = lim->semmns;
	ns->semopm = lim->semopm;
	ns->semmni = lim->semmni < 0 || lim->semmni > SV_IPCMNI ? SV_IPCMNI : lim->semmni;
	ns->max_idx = -1;
	ns->last_idx = -1;
	ns->next_id = -1;
	ns->refcount = 1;
	if (budget) {
		sv_budget_get(budget);
		ns->budget = budget;
	}
	return ns;
}

void sv_ns_get(struct sv_ns *ns)
{
	atomic_fetch_add_explicit(&ns->refcount, 1, memory_order_relaxed);
}

void sv_ns_shutdown(struct sv_ns *ns, struct sv_wakeq *wq)
{
	struct cds_lfht_iter iter;
	struct sv_set *set;

	/*
	 * One pass under ids_lock. Removing the node under the iterator is allowed: RCU keeps it
	 * and its successor pointer readable until we leave the read side, and the id table's
	 * reference dropped here frees the set only after that. (Restarting from the first node
	 * after every removal would walk the emptied buckets again each time: quadratic.)
	 */
	xlock(&ns->ids_lock);
	rcu_read_lock();
	cds_lfht_for_each_entry(ns->by_id, &iter, set, id_node) {
		sv_sem_lock(set, NULL, 0);
		sv_freeary(ns, set, wq);
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
		sv_set_put(set);
	}
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
}

static void ns_free(struct sv_ns *ns)
{
	for (int i = 0; i < SV_SLOT_CHUNKS; i++) {
		free(ns->slots[i]);
		free(ns->fast[i]); /* empty: every set's storage went with the set */
	}
	/* Tables must be empty; destroying them may not happen inside a read-side section. */
	if (cds_lfht_destroy(ns->by_id, NULL) || cds_lfht_destroy(ns->by_key, NULL))
		abort();
	xmutex_destroy(&ns->ids_lock);
	sv_budget_put(ns->budget); /* every set was credited when it was unlinked */
	free(ns);
}

void sv_ns_put(struct sv_ns *ns)
{
	struct sv_wakeq wq;

	if (atomic_fetch_sub_explicit(&ns->refcount, 1, memory_order_acq_rel) != 1)
		return;
	/*
	 * Nobody can call into this namespace any more, so no waiter can still be parked in it
	 * (every caller cancels its waiters before dropping its namespace): the wake queue stays
	 * empty and there is nothing to deliver.
	 */
	sv_wakeq_init(&wq);
	sv_ns_shutdown(ns, &wq);
	while (!sv_wakeq_empty(&wq))
		sv_waiter_free(sv_wakeq_pop(&wq));
	/* Sets are freed through call_rcu(); wait for them before the tables go. */
	rcu_barrier();
	ns_free(ns);
}

void sv_ns_limits(const struct sv_ns *ns, struct sv_limits *out)
{
	out->semmsl = SV_RELAXED(&ns->semmsl);
	out->semmns = SV_RELAXED(&ns->semmns);
	out->semopm = SV_RELAXED(&ns->semopm);
	out->semmni = SV_RELAXED(&ns->semmni);
}

/*
 * As a write to /proc/sys/kernel/sem: the three other values are taken as they come (the kernel
 * does not range-check them either); semmni outside [0, 32768] is refused and left as it was.
 */
int sv_ns_set_limits(struct sv_ns *ns, const struct sv_limits *lim)
{
	/*
	 * Under ids_lock, as newary() reads them: a new set's record and the record of a change
	 * of limits are then in the order the two saw each other (journal.c checks the one
	 * against the other). The supervisor follows a namespace's sysctl at every semget:
	 * mostly nothing changes, and then nothing is locked or journaled.
	 */
	struct sv_limits cur;
	int err;

	sv_ns_limits(ns, &cur);
	if (lim->semmni >= 0 && lim->semmni <= SV_IPCMNI && !memcmp(&cur, lim, sizeof(cur)))
		return 0;
	xlock(&ns->ids_lock);
	err = sv_ns_store_limits(ns, lim);
	sv_jnl_limits(ns);
	xunlock(&ns->ids_lock);
	return err;
}

int sv_ns_store_limits(struct sv_ns *ns, const struct sv_limits *lim)
{
	xassert_held(&ns->ids_lock);
	SV_SET_RELAXED(&ns->semmsl, lim->semmsl);
	SV_SET_RELAXED(&ns->semmns, lim->semmns);
	SV_SET_RELAXED(&ns->semopm, lim->semopm);
	if (lim->semmni < 0 || lim->semmni > SV_IPCMNI)
		return -ERANGE;
	SV_SET_RELAXED(&ns->semmni, lim->semmni);
	return 0;
}

void sv_ns_set_next_id(struct sv_ns *ns, int id)
{
	xlock(&ns->ids_lock);
	if (ns->next_id != (id < 0 ? -1 : id)) {
		ns->next_id = id < 0 ? -1 : id;
		sv_jnl_limits(ns);
	}
	xunlock(&ns->ids_lock);
}

int sv_ns_next_id(struct sv_ns *ns)
{
	int id;

	xlock(&ns->ids_lock);
	id = ns->next_id;
	xunlock(&ns->ids_lock);
	return id;
}

/* ---- lookups: call under rcu_read_lock() ---- */

struct sv_set *sv_set_lookup(struct sv_ns *ns, int id)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	sv_rcu_assert_reader();
	cds_lfht_lookup(ns->by_id, hash_u32((uint32_t)id), match_id, &id, &iter);
	node = cds_lfht_iter_get_node(&iter);
	return node ? caa_container_of(node, struct sv_set, id_node) : NULL;
}

static struct sv_set *set_lookup_key(struct sv_ns *ns, int32_t key)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	sv_rcu_assert_reader();
	cds_lfht_lookup(ns->by_key, hash_u32((uint32_t)key), match_key, &key, &iter);
	node = cds_lfht_iter_get_node(&iter);
	return node ? caa_container_of(node, struct sv_set, key_node) : NULL;
}

bool sv_ns_key_taken(struct sv_ns *ns, int32_t key)
{
	xassert_held(&ns->ids_lock);
	return set_lookup_key(ns, key) != NULL;
}

/* SEM_STAT's lookup: by index alone (the kernel takes the id modulo 32768 and ignores seq). */

static struct sv_set *set_lookup_index(struct sv_ns *ns, int idx)
{
	struct sv_set *_Atomic *chunk;

	sv_rcu_assert_reader();
	/* acquire pairs with the release in slot_publish(): a chunk or set is seen whole */
	idx %= SV_IPCMNI;
	chunk = atomic_load_explicit(&ns->slots[idx / SV_SLOT_CHUNK], memory_order_acquire);
	return chunk ? atomic_load_explicit(&chunk[idx % SV_SLOT_CHUNK], memory_order_acquire)
		     : NULL;
}

struct sv_set *sv_set_lookup_index(struct sv_ns *ns, int idx)
{
	return set_lookup_index(ns, idx);
}

/* ---- references ---- */

void sv_set_get(struct sv_set *set)
{
	atomic_fetch_add_explicit(&set->refcount, 1, memory_order_relaxed);
}

/*
 * Freed sets go back to malloc's free lists, where big ones stay (glibc raises its mmap
 * threshold to the size of a freed mmapped block, so later sets of that size come from the
 * heap): a tenant that created and left hundreds of MB would leave them in the daemon for good.
 * A trim queued behind the sets' frees (call_rcu runs callbacks in the order queued, after a
 * grace period) gives the pages back; one is pending at a time, and it trims whatever was
 * freed until it runs.
 */
static atomic_bool trim_pending;
static struct rcu_head trim_head;

static void trim_rcu(struct rcu_head *head)
{
	(void)head;
	atomic_store_explicit(&trim_pending, false, memory_order_relaxed);
	malloc_trim(0);
}

void sv_release_memory(void)
{
	if (!atomic_exchange_explicit(&trim_pending, true, memory_order_relaxed))
		call_rcu(&trim_head, trim_rcu);
}

static void set_free_rcu(struct rcu_head *head)
{
	struct sv_set *set = caa_container_of(head, struct sv_set, rcu);

	for (int i = 0; i < set->nsems; i++)
		sv_lock_destroy(&sv_sems(set)[i].lock);
	sv_lock_destroy(&set->lock);
	free(set);
}

void sv_set_put(struct sv_set *set)
{
	if (atomic_fetch_sub_explicit(&set->refcount, 1, memory_order_acq_rel) == 1)
		call_rcu(&set->rcu, set_free_rcu);
}

/* ---- the index allocator (ids) ---- */

static bool idx_used(const struct sv_ns *ns, unsigned int idx)
{
	return ns->used[idx / 64] & (1ull << (idx % 64));
}

/* Lowest free index in [from, last], or -1. */
static int idx_find_free(const struct sv_ns *ns, unsigned int from, unsigned int last)
{
	unsigned int i = from;

	while (i <= last) {
		uint64_t free_bits = ~ns->used[i / 64] & (~0ull << (i % 64));

		if (free_bits) {
			unsigned int idx = (i & ~63u) + (unsigned int)__builtin_ctzll(free_bits);

			return idx <= last ? (int)idx : -1;
		}
		i = (i & ~63u) + 64;
	}
	return -1;
}

/* idr_alloc_cyclic(): search from where the last search ended, then wrap once to start. */
static int idx_alloc_cyclic(struct sv_ns *ns, int end)
{
	unsigned int from = ns->idr_next;
	int idx = -1;

	if (from <= (unsigned int)end - 1)
		idx = idx_find_free(ns, from, (unsigned int)end - 1);
	if (idx < 0 && from > 0)
		idx = idx_find_free(ns, 0, (unsigned int)end - 1);
	if (idx >= 0)
		ns->idr_next = (unsigned int)idx + 1;
	return idx;
}

/* The chunk holding idx's slot, made (and published empty) if there is none: NULL if no memory. */
static struct sv_set *_Atomic *slot_chunk(struct sv_ns *ns, int idx)
{
	struct sv_set *_Atomic *chunk = ns->slots[idx / SV_SLOT_CHUNK];

	if (!chunk) {
		chunk = calloc(SV_SLOT_CHUNK, sizeof(*chunk));
		if (!chunk)
			return NULL;
		atomic_store_explicit(&ns->slots[idx / SV_SLOT_CHUNK], chunk, memory_order_release);
	}
	return chunk;
}

static int slot_publish(struct sv_ns *ns, int idx, struct sv_set *set)
{
	struct sv_set *_Atomic *chunk = ns->slots[idx / SV_SLOT_CHUNK];

	if (!chunk) {
		if (!set)
			return 0;
		chunk = slot_chunk(ns, idx);
		if (!chunk)
			return -ENOMEM;
	}
	atomic_store_explicit(&chunk[idx % SV_SLOT_CHUNK], set, memory_order_release);
	return 0;
}

/* Enter set, whose slot is published, under its id and key. Caller holds ids_lock, is in RCU. */
static void ids_link(struct sv_ns *ns, struct sv_set *set)
{
	int idx = set->id % SV_IPCMNI;

	ns->used[idx / 64] |= 1ull << (idx % 64);
	cds_lfht_add(ns->by_id, hash_u32((uint32_t)set->id), &set->id_node);
	if (set->key != SV_IPC_PRIVATE)
		cds_lfht_add(ns->by_key, hash_u32((uint32_t)set->key), &set->key_node);
	ns->in_use++;
	if (idx > ns->max_idx)
		ns->max_idx = idx;
}

/*
 * ipc_addid(): give set an id and make it visible; the journal's record of it names the call jid
 * as done. Caller holds ids_lock and is in RCU.
 */
static int ids_add(struct sv_ns *ns, struct sv_set *set, uint64_t jid)
{
	int limit = SV_RELAXED(&ns->semmni);
	int idx, seq;

	xassert_held(&ns->ids_lock);
	sv_rcu_assert_reader();
	if (limit > SV_IPCMNI)
		limit = SV_IPCMNI;
	if (ns->in_use >= limit)
		return -ENOSPC;

	if (ns->next_id < 0) {
		int max_idx = ns->in_use * 3 / 2;

		if (max_idx < IPC_MIN_CYCLE)
			max_idx = IPC_MIN_CYCLE;
		if (max_idx > SV_IPCMNI)
			max_idx = SV_IPCMNI;
		idx = idx_alloc_cyclic(ns, max_idx);
		if (idx < 0)
			return -ENOSPC;
		if (idx <= ns->last_idx && ++ns->seq >= SV_SEQ_MAX)
			ns->seq = 0;
		ns->last_idx = idx;
		seq = ns->seq;
	} else {
		/* sem_next_id: that index if free (else the next free one), its seq; used once */
		int next = ns->next_id;

		ns->next_id = -1;
		seq = next / SV_IPCMNI;
		idx = idx_find_free(ns, (unsigned int)(next % SV_IPCMNI), SV_IPCMNI - 1);
		if (idx < 0)
			return -ENOSPC;
	}

	if (!slot_chunk(ns, idx))
		return -ENOMEM;
	set->id = seq * SV_IPCMNI + idx;
	/* into the journal before anyone can find it: by index (SEM_STAT), id or key */
	sv_jnl_new(set);
	sv_jnl_done(set, jid, set->id);
	sv_jnl_flush();
	if (slot_publish(ns, idx, set))
		abort(); /* the chunk is there: cannot fail */
	ids_link(ns, set);
	return 0;
}

/*
 * A chunk published before its set is harmless (lookups there find NULL, as before), so a restore
 * takes every chunk it needs first and then cannot fail half-way.
 */
int sv_ids_reserve(struct sv_ns *ns, int idx)
{
	xassert_held(&ns->ids_lock);
	SV_ASSERT(idx >= 0 && idx < SV_IPCMNI);
	return slot_chunk(ns, idx) ? 0 : -ENOMEM;
}

/* Caller holds ids_lock and is in RCU; idx is free and reserved (sv_ids_reserve()). */
void sv_ids_insert(struct sv_ns *ns, struct sv_set *set)
{
	int idx = set->id % SV_IPCMNI;

	xassert_held(&ns->ids_lock);
	sv_rcu_assert_reader();
	SV_ASSERT(set->id >= 0 && !idx_used(ns, (unsigned int)idx));
	if (slot_publish(ns, idx, set))
		abort(); /* reserved: cannot fail */
	ids_link(ns, set);
	ns->used_sems += set->nsems;
}

/* ipc_rmid(). Caller holds ids_lock and the set lock in complex mode, and is in RCU. */
void sv_set_unlink(struct sv_ns *ns, struct sv_set *set)
{
	int idx = set->id % SV_IPCMNI;

	xassert_held(&ns->ids_lock);
	SV_ASSERT(sv_set_locked_global(set));
	sv_rcu_assert_reader();
	if (cds_lfht_del(ns->by_id, &set->id_node))
		abort();
	if (set->key != SV_IPC_PRIVATE && cds_lfht_del(ns->by_key, &set->key_node))
		abort();
	slot_publish(ns, idx, NULL);
	ns->used[idx / 64] &= ~(1ull << (idx % 64));
	ns->in_use--;
	ns->used_sems -= set->nsems;
	if (ns->budget)
		sv_budget_credit(ns->budget, SV_RELAXED(&set->cuid), set->nsems);
	if (idx == ns->max_idx) {
		while (--idx >= 0 && !idx_used(ns, (unsigned int)idx))
			;
		ns->max_idx = idx;
	}
	set->deleted = true;
}

/* ---- semget ---- */

_Static_assert(sizeof(struct sv_sem) == SV_SEM_SIZE, "a semaphore fills whole cache lines");

/*
 * Sets of more than one semaphore put each semaphore on its own cache line, so that per-semaphore
 * locks do not share lines; a set of one semaphore keeps it next to the header, to stay small.
 */
static struct sv_set *set_alloc(int nsems)
{
	size_t hdr = SV_SET_HDR(nsems), size = hdr + (size_t)nsems * sizeof(struct sv_sem);
	struct sv_set *set;

	if (nsems > 1) {
		set = aligned_alloc(64, (size + 63) & ~(size_t)63);
		if (set)
			memset(set, 0, size);
	} else {
		set = calloc(1, size);
	}
	if (set)
		set->nsems = nsems;
	return set;
}

struct sv_set *sv_set_new(struct sv_ns *ns, int32_t key, int nsems)
{
	struct sv_set *set = set_alloc(nsems);

	if (!set)
		return NULL;
	set->ns = ns;
	set->key = key;
	set->refcount = 1; /* the tables' */
	sv_lock_init(&set->lock);
	CDS_INIT_LIST_HEAD(&set->pending_alter);
	CDS_INIT_LIST_HEAD(&set->pending_const);
	CDS_INIT_LIST_HEAD(&set->undos);
	cds_lfht_node_init(&set->id_node);
	cds_lfht_node_init(&set->key_node);
	for (int i = 0; i < nsems; i++) {
		sv_lock_init(&sv_sems(set)[i].lock);
		CDS_INIT_LIST_HEAD(&sv_sems(set)[i].pending_alter);
		CDS_INIT_LIST_HEAD(&sv_sems(set)[i].pending_const);
	}
	return set;
}

/* Nobody ever saw it: no grace period to wait for. */
void sv_set_discard(struct sv_set *set)
{
	set_free_rcu(&set->rcu);
}

/* newary(). Caller holds ids_lock and is in RCU. */
static long newary(const struct sv_caller *c, int32_t key, int nsems, int semflg)
{
	struct sv_ns *ns = c->ns;
	struct sv_set *set;
	int err;

	xassert_held(&ns->ids_lock);
	sv_rcu_assert_reader();
	/*
	 * semmsl again, now under the lock that orders changes of it: sv_semget() read it
	 * before, and a change may have come in between (then the call is as if it came after).
	 */
	if (!nsems || nsems > SV_RELAXED(&ns->semmsl))
		return -EINVAL;
	if ((long long)ns->used_sems + nsems > SV_RELAXED(&ns->semmns))
		return -ENOSPC;
	/* before the allocation: a refused set never costs the memory the budget bounds */
	if (ns->budget && (err = sv_budget_charge(ns->budget, c->cred->euid, nsems)))
		return err;

	set = sv_set_new(ns, key, nsems);
	if (!set) {
		if (ns->budget)
			sv_budget_credit(ns->budget, c->cred->euid, nsems);
		return -ENOMEM;
	}
	set->mode = (uint16_t)(semflg & 0777);
	set->uid = set->cuid = c->cred->euid;
	set->gid = set->cgid = c->cred->egid;
	set->ctime = sv_now();

	/* Nobody can see the set before ids_add(): if the caller is gone, it never existed. */
	err = sv_committing(c);
	if (!err)
		err = ids_add(ns, set, c->jid);
	if (err) {
		if (ns->budget)
			sv_budget_credit(ns->budget, c->cred->euid, nsems);
		set_free_rcu(&set->rcu);
		return err;
	}
	ns->used_sems += nsems;
	return set->id;
}

long sv_semget(const struct sv_caller *c, int32_t key, int nsems, int semflg)
{
	struct sv_ns *ns = c->ns;
	struct sv_set *set;
	long ret;

	if (nsems < 0 || nsems > SV_RELAXED(&ns->semmsl))
		return -EINVAL;

	xlock(&ns->ids_lock);
	rcu_read_lock();
	if (key == SV_IPC_PRIVATE) {
		ret = newary(c, key, nsems, semflg);
	} else if (!(set = set_lookup_key(ns, key))) {
		ret = (semflg & SV_IPC_CREAT) ? newary(c, key, nsems, semflg) : -ENOENT;
	} else if ((semflg & SV_IPC_CREAT) && (semflg & SV_IPC_EXCL)) {
		ret = -EEXIST;
	} else if (nsems > set->nsems) {
		ret = -EINVAL;
	} else if ((ret = sv_ipcperms(c, set, semflg))) {
		/* EACCES, or the caller is gone */
	} else {
		ret = set->id;
	}
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
	return ret;
}

/* ---- inspection ---- */

void sv_ns_info(struct sv_ns *ns, struct sv_ns_info *out)
{
	sv_ns_limits(ns, &out->limits);
	xlock(&ns->ids_lock);
	out->nsets = ns->in_use;
	out->nsems = ns->used_sems;
	xunlock(&ns->ids_lock);
	out->nwaiters = SV_RELAXED(&ns->nwaiters);
}

static void set_info(const struct sv_set *set, struct sv_set_info *out)
{
	out->id = set->id;
	out->key = set->key;
	out->uid = SV_RELAXED(&set->uid);
	out->gid = SV_RELAXED(&set->gid);
	out->cuid = SV_RELAXED(&set->cuid);
	out->cgid = SV_RELAXED(&set->cgid);
	out->mode = SV_RELAXED(&set->mode);
	out->nsems = set->nsems;
	out->otime = SV_RELAXED(&set->otime);
	out->ctime = SV_RELAXED(&set->ctime);
	out->lock_spun = SV_RELAXED(&set->lock_spun);
	out->lock_slept = SV_RELAXED(&set->lock_slept);
	out->fast_ops = 0; /* sv_ns_show_set() only: it holds the set lock */
}

int sv_ns_for_each_set(struct sv_ns *ns, int (*fn)(const struct sv_set_info *, void *), void *arg)
{
	struct cds_lfht_iter iter;
	struct sv_set *set;
	struct sv_set_info info;
	int ret = 0;

	rcu_read_lock();
	cds_lfht_for_each_entry(ns->by_id, &iter, set, id_node) {
		set_info(set, &info);
		ret = fn(&info, arg);
		if (ret)
			break;
	}
	rcu_read_unlock();
	return ret;
}

int sv_ns_for_each_set_ordered(struct sv_ns *ns, int (*fn)(const struct sv_set_info *, void *),
			       void *arg)
{
	struct sv_set_info info;
	int ret = 0;

	/* ids_lock: no set comes or goes, and every index below max_idx stays as it is */
	xlock(&ns->ids_lock);
	rcu_read_lock();
	for (int idx = 0; idx <= ns->max_idx && !ret; idx++) {
		struct sv_set *set = set_lookup_index(ns, idx);

		if (!set)
			continue;
		set_info(set, &info);
		ret = fn(&info, arg);
	}
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
	return ret;
}

int sv_ns_show_set(struct sv_ns *ns, int id, struct sv_set_info *info, struct sv_sem_info *sems,
		   int cap)
{
	struct sv_set *set;
	int n;

	rcu_read_lock();
	set = sv_set_lookup(ns, id);
	if (!set) {
		rcu_read_unlock();
		return -EINVAL;
	}
	SV_DEBUG_YIELD(); /* a removal may get there first: the lock must find it deleted */
	sv_sem_lock(set, NULL, 0);
	if (set->deleted) {
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
		rcu_read_unlock();
		return -EINVAL;
	}
	set_info(set, info);
	info->fast_ops = sv_fast_collect(set); /* before the nops below, which it adds to */
	n = set->nsems;
	for (int i = 0; i < n && i < cap; i++) {
		const struct sv_sem *sem = sv_sem_val(set, i);

		sems[i] = (struct sv_sem_info){
			.semval = sem->semval,
			.sempid = sem->sempid,
			.ncnt = sv_count_semcnt(set, i, false),
			.zcnt = sv_count_semcnt(set, i, true),
			.nops = SV_RELAXED(&sem->nops),
			.nwaits = SV_RELAXED(&sem->nwaits),
			.lock_spun = SV_RELAXED(&sem->lock_spun),
			.lock_slept = SV_RELAXED(&sem->lock_slept),
		};
	}
	sv_sem_unlock(set, SV_LOCK_GLOBAL);
	rcu_read_unlock();
	return n;
}

int sv_ns_remove_set(struct sv_ns *ns, int id, struct sv_wakeq *wq)
{
	struct sv_set *set;
	int ret = -EINVAL;

	xlock(&ns->ids_lock);
	rcu_read_lock();
	set = sv_set_lookup(ns, id);
	if (set) {
		sv_sem_lock(set, NULL, 0);
		sv_freeary(ns, set, wq);
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
		ret = 0;
	}
	rcu_read_unlock();
	xunlock(&ns->ids_lock);
	if (set)
		sv_set_put(set);
	return ret;
}

void sv_ns_collect_fast(struct sv_ns *ns)
{
	struct cds_lfht_iter iter;
	struct sv_set *set;

	rcu_read_lock();
	cds_lfht_for_each_entry(ns->by_id, &iter, set, id_node) {
		/*
		 * Storage is made under the set lock before the program that asked for it hears
		 * of it, so a set without storage here has had no fast operation to count yet.
		 */
		if (!SV_RELAXED(&set->fast_on))
			continue;
		sv_sem_lock(set, NULL, 0);
		sv_fast_collect(set);
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
	}
	rcu_read_unlock();
}

void sv_ns_reset_stats(struct sv_ns *ns)
{
	struct cds_lfht_iter iter;
	struct sv_set *set;

	rcu_read_lock();
	cds_lfht_for_each_entry(ns->by_id, &iter, set, id_node) {
		sv_sem_lock(set, NULL, 0);
		sv_fast_collect(set); /* what the words counted so far goes with the rest */
		SV_SET_RELAXED(&set->lock_spun, 0);
		SV_SET_RELAXED(&set->lock_slept, 0);
		for (int i = 0; i < set->nsems; i++) {
			struct sv_sem *sem = &sv_sems(set)[i];

			SV_SET_RELAXED(&sem->nops, 0);
			SV_SET_RELAXED(&sem->nwaits, 0);
			SV_SET_RELAXED(&sem->lock_spun, 0);
			SV_SET_RELAXED(&sem->lock_slept, 0);
		}
		sv_sem_unlock(set, SV_LOCK_GLOBAL);
	}
	rcu_read_unlock();
}
