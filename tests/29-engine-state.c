/* SPDX-License-Identifier: MIT */
/*
 * State that outlives the process (state.c): a namespace and a process's SEM_UNDO entries
 * exported, imported elsewhere, and then every call behaving as it would have in the original:
 * the same sets field by field, the same id for the next set, the same SEM_STAT walk, the same
 * values after an exit applies the adjustments. And the blob as hostile input: truncated, with
 * any byte changed, hand-made with one inconsistency each; it must be refused whole (or, when a
 * changed byte still makes a valid blob, give a consistent namespace), never crash.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/fixture.h"

#define KEY 0x5ee0
#define U   1000 /* a tenant */

static struct sv_budget *b_old, *b_new;
static struct sv_ns *old_ns, *new_ns;
static struct fx_caller *root_old, *root_new, *user_old;

static struct sv_ns *ns_with(struct sv_budget *b)
{
	struct sv_limits def;
	struct sv_ns *ns;

	sv_limits_default(&def);
	ns = sv_ns_new_budget(&def, b);
	cr_assert_not_null(ns);
	return ns;
}

static void setup(void)
{
	/* tight maxima: what the old process held must come back all the same */
	struct sv_budget_limits lim = { .sems = 1, .sets = 1, .undos = 1 };

	sv_thread_register();
	b_old = sv_budget_new(&(struct sv_budget_limits){ 0 });
	b_new = sv_budget_new(&lim);
	cr_assert(b_old && b_new);
	old_ns = ns_with(b_old);
	new_ns = ns_with(b_new);
	root_old = fx_caller_new(old_ns, 100, 0, 0);
	root_new = fx_caller_new(new_ns, 100, 0, 0);
	user_old = fx_caller_new(old_ns, 200, U, U);
}

static void teardown(void)
{
	fx_caller_exit(root_old, NULL);
	fx_caller_exit(root_new, NULL);
	fx_caller_exit(user_old, NULL);
	sv_ns_put(old_ns);
	sv_ns_put(new_ns);
	sv_budget_put(b_old);
	sv_budget_put(b_new);
	sv_thread_unregister();
}

TestSuite(engine_state, .init = setup, .fini = teardown, .timeout = 120);

static int mkset(struct fx_caller *fc, int32_t key, int nsems, int flg)
{
	long id = sv_semget(&fc->c, key, nsems, flg);

	cr_assert_geq(id, 0, "semget: %ld", id);
	return (int)id;
}

static void rmid(struct fx_caller *fc, int id)
{
	cr_assert_eq(fx_semctl(fc, id, 0, SV_IPC_RMID, 0, NULL), 0);
}

static void setval(struct fx_caller *fc, int id, int semnum, int val)
{
	cr_assert_eq(fx_semctl(fc, id, semnum, SV_SETVAL, (uint64_t)val, NULL), 0);
}

/*
 * A namespace with a history: ids wrapped past their first cycle (seq > 0), holes in the
 * indexes, keyed and private sets of several owners and modes, values, pids and times, custom
 * limits and a pending sem_next_id. Returns how many sets live.
 */
static int populate(void)
{
	struct sv_limits lim = { 250, 64000, 100, 128 };
	int ids[12], n = 0;

	for (int i = 0; i < 70; i++)
		rmid(root_old, mkset(root_old, SV_IPC_PRIVATE, 1, 0600));
	for (int i = 0; i < 12; i++) {
		struct fx_caller *fc = i % 3 ? root_old : user_old;
		int32_t key = i % 2 ? KEY + i : SV_IPC_PRIVATE;
		int mode = (const int[]){ 0600, 0644, 0666, 0400 }[i % 4];

		ids[i] = mkset(fc, key, 1 + (i * 7) % 40, SV_IPC_CREAT | mode);
	}
	for (int i = 0; i < 12; i += 4)
		rmid(root_old, ids[i]); /* holes */
	for (int i = 1; i < 12; i++) {
		if (i % 4 == 0)
			continue;
		setval(root_old, ids[i], 0, 3 * i);
		cr_assert_eq(fx_semop(root_old, ids[i], NULL, NULL, SOPS({ 0, -1, 0 })), 0);
		n++;
	}
	/* an owner changed by IPC_SET: uid moves, cuid (the budget's charge) stays */
	{
		uint32_t ds[26] = { 0 };

		cr_assert_eq(
		    fx_semctl(root_old, ids[5], 0, SV_IPC_STAT, (uint64_t)(uintptr_t)ds, NULL), 0);
		ds[1] = 4242; /* uid, at 4 in struct ipc64_perm */
		ds[5] = 0640; /* mode, at 20 (16 bits, then padding) */
		cr_assert_eq(
		    fx_semctl(root_old, ids[5], 0, SV_IPC_SET, (uint64_t)(uintptr_t)ds, NULL), 0);
	}
	cr_assert_eq(sv_ns_set_limits(old_ns, &lim), 0);
	sv_ns_set_next_id(old_ns, 5 * SV_IPCMNI + 17);
	return n;
}

static void *export_ns(struct sv_ns *ns, size_t *len)
{
	void *buf = NULL;

	cr_assert_eq(sv_ns_export(ns, &buf, len), 0);
	cr_assert_not_null(buf);
	return buf;
}

/* ---- comparing two namespaces ---- */

struct sets {
	int n;
	struct sv_set_info info[64];
};

static int collect(const struct sv_set_info *info, void *arg)
{
	struct sets *s = arg;

	cr_assert_lt(s->n, 64);
	s->info[s->n++] = *info;
	return 0;
}

static void same_set_info(const struct sv_set_info *a, const struct sv_set_info *b)
{
	cr_assert_eq(a->id, b->id);
	cr_assert_eq(a->key, b->key);
	cr_assert_eq(a->uid, b->uid);
	cr_assert_eq(a->gid, b->gid);
	cr_assert_eq(a->cuid, b->cuid);
	cr_assert_eq(a->cgid, b->cgid);
	cr_assert_eq(a->mode, b->mode);
	cr_assert_eq(a->nsems, b->nsems);
	cr_assert_eq(a->otime, b->otime);
	cr_assert_eq(a->ctime, b->ctime);
	cr_assert_eq(a->lock_spun, b->lock_spun);
	cr_assert_eq(a->lock_slept, b->lock_slept);
}

static void same_ns(struct sv_ns *a, struct sv_ns *b)
{
	static struct sets sa, sb;
	struct sv_ns_info ia, ib;

	sa.n = sb.n = 0;
	sv_ns_for_each_set_ordered(a, collect, &sa);
	sv_ns_for_each_set_ordered(b, collect, &sb);
	cr_assert_eq(sa.n, sb.n);
	for (int i = 0; i < sa.n; i++) {
		struct sv_set_info xa, xb;
		struct sv_sem_info ma[64], mb[64];
		int na, nb;

		same_set_info(&sa.info[i], &sb.info[i]);
		na = sv_ns_show_set(a, sa.info[i].id, &xa, ma, 64);
		nb = sv_ns_show_set(b, sa.info[i].id, &xb, mb, 64);
		cr_assert_eq(na, nb);
		cr_assert_geq(na, 1);
		for (int k = 0; k < na && k < 64; k++) {
			cr_assert_eq(ma[k].semval, mb[k].semval);
			cr_assert_eq(ma[k].sempid, mb[k].sempid);
			cr_assert_eq(ma[k].nops, mb[k].nops);
			cr_assert_eq(ma[k].nwaits, mb[k].nwaits);
			cr_assert_eq(ma[k].lock_spun, mb[k].lock_spun);
			cr_assert_eq(ma[k].lock_slept, mb[k].lock_slept);
			cr_assert_eq(ma[k].ncnt, 0);
			cr_assert_eq(mb[k].ncnt, 0);
		}
	}
	sv_ns_info(a, &ia);
	sv_ns_info(b, &ib);
	cr_assert_eq(memcmp(&ia.limits, &ib.limits, sizeof(ia.limits)), 0);
	cr_assert_eq(ia.nsets, ib.nsets);
	cr_assert_eq(ia.nsems, ib.nsems);
	cr_assert_eq(sv_ns_next_id(a), sv_ns_next_id(b));
}

/* The semctl views of set id: IPC_STAT, GETALL, GETPID of each semaphore. */
static void same_semctl(int id)
{
	struct fx_stat sa, sb;
	uint16_t va[64], vb[64];
	long na = fx_ipc_stat(root_old, id, &sa), nb = fx_ipc_stat(root_new, id, &sb);

	cr_assert_eq(na, 0);
	cr_assert_eq(nb, 0);
	cr_assert_eq(sa.key, sb.key);
	cr_assert_eq(sa.uid, sb.uid);
	cr_assert_eq(sa.cuid, sb.cuid);
	cr_assert_eq(sa.mode, sb.mode);
	cr_assert_eq(sa.seq, sb.seq);
	cr_assert_eq(sa.otime, sb.otime);
	cr_assert_eq(sa.ctime, sb.ctime);
	cr_assert_eq(sa.nsems, sb.nsems);
	cr_assert_eq(fx_semctl(root_old, id, 0, SV_GETALL, (uint64_t)(uintptr_t)va, NULL), 0);
	cr_assert_eq(fx_semctl(root_new, id, 0, SV_GETALL, (uint64_t)(uintptr_t)vb, NULL), 0);
	cr_assert_eq(memcmp(va, vb, sa.nsems * sizeof(va[0])), 0);
	for (int k = 0; k < (int)sa.nsems; k++)
		cr_assert_eq(fx_getpid(root_old, id, k), fx_getpid(root_new, id, k));
}

Test(engine_state, namespace_round_trip)
{
	struct sv_budget_info bo, bn;
	static struct sets s;
	size_t len;
	void *buf;
	int n = populate();

	buf = export_ns(old_ns, &len);
	cr_assert_eq(sv_ns_import(new_ns, buf, len), 0);
	{
		size_t len2;
		void *again = export_ns(new_ns, &len2);

		cr_assert(len2 == len && !memcmp(again, buf, len), "exported again: the same blob");
		free(again);
	}
	same_ns(old_ns, new_ns);

	s.n = 0;
	sv_ns_for_each_set_ordered(new_ns, collect, &s);
	cr_assert_eq(s.n, n);
	for (int i = 0; i < s.n; i++) {
		cr_assert_geq(s.info[i].id, SV_IPCMNI, "the history made seq move");
		same_semctl(s.info[i].id);
	}
	cr_assert_eq(s.info[3].uid, 4242, "IPC_SET's owner came back");
	cr_assert_eq(s.info[3].cuid, 0);

	/* SEM_STAT walks indexes: the same answer for each, holes included */
	for (int idx = 0; idx < 70; idx++) {
		uint32_t da[26], db[26];

		long ra = fx_semctl(root_old, idx, 0, SV_SEM_STAT, (uint64_t)(uintptr_t)da, NULL);
		long rb = fx_semctl(root_new, idx, 0, SV_SEM_STAT, (uint64_t)(uintptr_t)db, NULL);

		cr_assert_eq(ra, rb, "index %d", idx);
		if (ra >= 0)
			cr_assert_eq(memcmp(da, db, sizeof(da)), 0, "index %d", idx);
	}

	/* charged to the same creators, past the new budget's maxima */
	sv_budget_info(b_old, &bo);
	sv_budget_info(b_new, &bn);
	cr_assert_eq(bn.used[SV_BUDGET_SETS], bo.used[SV_BUDGET_SETS]);
	cr_assert_eq(bn.used[SV_BUDGET_SEMS], bo.used[SV_BUDGET_SEMS]);
	cr_assert_eq(sv_budget_uid_sems(b_new, U), sv_budget_uid_sems(b_old, U));
	cr_assert_eq(sv_budget_uid_sems(b_new, 0), sv_budget_uid_sems(b_old, 0));

	/* keys are found, IPC_EXCL still says they are taken */
	for (int i = 0; i < s.n; i++) {
		int32_t key = s.info[i].key;

		if (key == SV_IPC_PRIVATE)
			continue;
		cr_assert_eq(sv_semget(&root_new->c, key, 0, 0), s.info[i].id);
		cr_assert_eq(sv_semget(&root_new->c, key, 1, SV_IPC_CREAT | SV_IPC_EXCL | 0600),
			     -EEXIST);
	}
	/* the budget's maxima apply to new sets again */
	cr_assert_eq(sv_semget(&root_new->c, SV_IPC_PRIVATE, 1, 0600), -ENOSPC);
	{
		struct sv_budget_limits none = { 0 };

		sv_budget_set_limits(b_new, &none);
	}
	/* the next sets get the ids the old namespace gives: sem_next_id, then the cycle */
	for (int i = 0; i < 80; i++) {
		long a = sv_semget(&root_old->c, i % 5 ? SV_IPC_PRIVATE : KEY + 100 + i, 2,
				   SV_IPC_CREAT | 0600);
		long b = sv_semget(&root_new->c, i % 5 ? SV_IPC_PRIVATE : KEY + 100 + i, 2,
				   SV_IPC_CREAT | 0600);

		cr_assert_eq(a, b, "set %d: %ld in the old namespace, %ld in the new", i, a, b);
		if (a >= 0 && i % 3 == 0) {
			rmid(root_old, (int)a);
			rmid(root_new, (int)b);
		}
	}
	same_ns(old_ns, new_ns);
	free(buf);
}

Test(engine_state, empty_namespace_and_busy)
{
	size_t len;
	void *buf = export_ns(old_ns, &len);

	cr_assert_eq(sv_ns_import(new_ns, buf, len), 0);
	same_ns(old_ns, new_ns);
	free(buf);

	populate();
	buf = export_ns(old_ns, &len);
	mkset(root_new, SV_IPC_PRIVATE, 1, 0600);
	cr_assert_eq(sv_ns_import(new_ns, buf, len), -EBUSY);
	free(buf);
}

/* ---- SEM_UNDO ---- */

static void *export_proc(struct sv_proc *p, size_t *len)
{
	void *buf = NULL;

	cr_assert_eq(sv_proc_export(p, &buf, len), 0);
	return buf;
}

Test(engine_state, undo_round_trip)
{
	struct fx_caller *p_old = fx_caller_new(old_ns, 500, U, U), *p_new;
	struct sv_budget_info bo, bn;
	int a = mkset(root_old, SV_IPC_PRIVATE, 3, 0666);
	int b = mkset(root_old, KEY, 40, SV_IPC_CREAT | 0666);
	int c = mkset(root_old, SV_IPC_PRIVATE, 2, 0666);
	void *nsbuf, *pbuf;
	size_t nslen, plen;
	long before = sv_undo_entries();

	setval(root_old, a, 0, 10);
	setval(root_old, b, 39, 10);
	cr_assert_eq(
	    fx_semop(p_old, a, NULL, NULL, SOPS({ 0, -3, SV_SEM_UNDO }, { 2, 4, SV_SEM_UNDO })), 0);
	cr_assert_eq(
	    fx_semop(p_old, b, NULL, NULL, SOPS({ 39, -2, SV_SEM_UNDO }, { 1, 7, SV_SEM_UNDO })),
	    0);
	cr_assert_eq(fx_semop(p_old, c, NULL, NULL, SOPS({ 1, 1, SV_SEM_UNDO })), 0);

	nsbuf = export_ns(old_ns, &nslen);
	pbuf = export_proc(p_old->c.proc, &plen);
	cr_assert_eq(sv_ns_import(new_ns, nsbuf, nslen), 0);
	/* a set gone by the time the process comes back: its entry is skipped */
	rmid(root_new, c);
	rmid(root_old, c);

	p_new = fx_caller_new(new_ns, 500, U, U);
	cr_assert_eq(sv_proc_import(p_new->c.proc, pbuf, plen), 0);
	cr_assert_eq(sv_undo_entries(), before + 4); /* a, b twice over; c gone */
	cr_assert_eq(sv_proc_import(p_new->c.proc, pbuf, plen), -EBUSY);
	sv_budget_info(b_old, &bo);
	sv_budget_info(b_new, &bn);
	cr_assert_eq(bn.used[SV_BUDGET_UNDOS], bo.used[SV_BUDGET_UNDOS]);
	cr_assert_eq(sv_budget_uid_count(b_new, U, SV_BUDGET_UNDOS),
		     sv_budget_uid_count(b_old, U, SV_BUDGET_UNDOS));

	fx_caller_exit(p_old, NULL);
	fx_caller_exit(p_new, NULL);
	cr_assert_eq(sv_undo_entries(), before);
	cr_assert_eq(fx_getval(root_new, a, 0), 10);
	cr_assert_eq(fx_getval(root_new, a, 2), 0);
	cr_assert_eq(fx_getval(root_new, b, 39), 10);
	cr_assert_eq(fx_getpid(root_new, b, 1), 500);
	same_ns(old_ns, new_ns);
	sv_budget_info(b_new, &bn);
	cr_assert_eq(bn.used[SV_BUDGET_UNDOS], 0);
	free(nsbuf);
	free(pbuf);
}

/* ---- hostile blobs ---- */

/*
 * Import into a namespace of its own: the result, and a namespace consistent with it, which
 * exports as exactly the blob it came from.
 */
static int try_ns(const void *buf, size_t len)
{
	struct sv_ns *ns = ns_with(NULL);
	static struct sets s;
	struct sv_ns_info info;
	int err = sv_ns_import(ns, buf, len);

	if (!err) {
		size_t len2;
		void *again = export_ns(ns, &len2);

		cr_assert(len2 == len && !memcmp(again, buf, len), "not the same blob again");
		free(again);
	}

	s.n = 0;
	sv_ns_for_each_set_ordered(ns, collect, &s);
	sv_ns_info(ns, &info);
	cr_assert_eq(info.nsets, s.n);
	if (err)
		cr_assert_eq(s.n, 0, "refused, yet %d sets were made", s.n);
	for (int i = 0; i < s.n; i++) {
		struct sv_set_info x;
		struct sv_sem_info m[4];

		cr_assert_eq(sv_ns_show_set(ns, s.info[i].id, &x, m, 4), s.info[i].nsems);
	}
	sv_ns_put(ns);
	return err;
}

static void *small_ns(size_t *len)
{
	int a = mkset(root_old, KEY, 2, SV_IPC_CREAT | 0600);

	mkset(root_old, SV_IPC_PRIVATE, 1, 0600);
	mkset(root_old, KEY + 1, 3, SV_IPC_CREAT | 0644);
	setval(root_old, a, 1, 7);
	return export_ns(old_ns, len);
}

Test(engine_state, truncated)
{
	size_t len;
	unsigned char *buf = small_ns(&len), *cut = malloc(len);

	for (size_t n = 0; n < len; n++) {
		uint64_t l = n;

		memcpy(cut, buf, n);
		cr_assert_eq(try_ns(cut, n), -EINVAL, "cut at %zu", n);
		/* and with a header that agrees with the cut */
		if (n >= 16) {
			memcpy(cut + 8, &l, sizeof(l));
			cr_assert_eq(try_ns(cut, n), -EINVAL, "cut at %zu, length agreeing", n);
		}
	}
	cr_assert_eq(try_ns(buf, len), 0);
	free(cut);
	free(buf);
}

Test(engine_state, byte_flipped)
{
	size_t len;
	unsigned char *buf = small_ns(&len);
	const unsigned char flips[] = { 0x01, 0x80, 0xff };

	for (size_t i = 0; i < len; i++) {
		for (size_t f = 0; f < sizeof(flips); f++) {
			int err;

			buf[i] ^= flips[f];
			err = try_ns(buf, len);
			cr_assert(err == 0 || err == -EINVAL || err == -EPROTONOSUPPORT,
				  "offset %zu: %d", i, err);
			buf[i] ^= flips[f];
		}
	}
	free(buf);
}

Test(engine_state, proc_blob_hostile)
{
	struct fx_caller *p = fx_caller_new(old_ns, 500, U, U);
	int a = mkset(root_old, SV_IPC_PRIVATE, 3, 0666);
	size_t nslen, plen;
	void *nsbuf;
	unsigned char *pbuf;

	setval(root_old, a, 0, 5);
	cr_assert_eq(
	    fx_semop(p, a, NULL, NULL, SOPS({ 0, -2, SV_SEM_UNDO }, { 1, 9, SV_SEM_UNDO })), 0);
	nsbuf = export_ns(old_ns, &nslen);
	pbuf = export_proc(p->c.proc, &plen);
	cr_assert_eq(sv_ns_import(new_ns, nsbuf, nslen), 0);

	for (size_t n = 0; n < plen; n++) {
		struct fx_caller *q = fx_caller_new(new_ns, 600, U, U);

		cr_assert_eq(sv_proc_import(q->c.proc, pbuf, n), -EINVAL, "cut at %zu", n);
		fx_caller_exit(q, NULL);
	}
	for (size_t i = 0; i < plen; i++) {
		for (int f = 0; f < 3; f++) {
			struct fx_caller *q = fx_caller_new(new_ns, 600, U, U);
			int err;

			pbuf[i] ^= (const unsigned char[]){ 0x01, 0x80, 0xff }[f];
			err = sv_proc_import(q->c.proc, pbuf, plen);
			cr_assert(err == 0 || err == -EINVAL || err == -EPROTONOSUPPORT,
				  "offset %zu: %d", i, err);
			pbuf[i] ^= (const unsigned char[]){ 0x01, 0x80, 0xff }[f];
			fx_caller_exit(q, NULL);
			/* whatever it applied kept the values in range; put them back */
			for (int k = 0; k < 3; k++) {
				int v = fx_getval(root_new, a, k);

				cr_assert(v >= 0 && v <= SV_SEMVMX);
			}
			cr_assert_eq(fx_semctl(root_new, a, 0, SV_SETALL,
					       (uint64_t)(uintptr_t)(uint16_t[]){ 3, 9, 0 }, NULL),
				     0);
		}
	}
	/* semadj out of a short's range */
	{
		struct fx_caller *q = fx_caller_new(new_ns, 600, U, U);
		int32_t adj = 40000;

		memcpy(pbuf + plen - 3 * sizeof(adj), &adj, sizeof(adj));
		cr_assert_eq(sv_proc_import(q->c.proc, pbuf, plen), -EINVAL);
		fx_caller_exit(q, NULL);
	}
	fx_caller_exit(p, NULL);
	free(nsbuf);
	free(pbuf);
}

/* ---- hand-made blobs, one inconsistency each ---- */

struct blob {
	unsigned char b[4096];
	size_t n;
};

static void put(struct blob *bl, const void *v, size_t n)
{
	cr_assert_leq(bl->n + n, sizeof(bl->b));
	memcpy(bl->b + bl->n, v, n);
	bl->n += n;
}

static void put32(struct blob *bl, uint32_t v)
{
	put(bl, &v, 4);
}

static void put64(struct blob *bl, uint64_t v)
{
	put(bl, &v, 8);
}

static void hdr(struct blob *bl, const char *magic, uint32_t version)
{
	bl->n = 0;
	put(bl, magic, 4);
	put32(bl, version);
	put64(bl, 0); /* length: end() */
}

static void ns_fixed(struct blob *bl, uint32_t nsets)
{
	put32(bl, 250), put32(bl, 32000), put32(bl, 32), put32(bl, 128); /* limits */
	put32(bl, 3);							 /* seq */
	put32(bl, 2);							 /* last_idx */
	put32(bl, 3);							 /* idr_next */
	put32(bl, (uint32_t)-1);					 /* next_id */
	put32(bl, nsets);
}

static void set(struct blob *bl, int32_t idx, int32_t id, int32_t key, int32_t nsems,
		int32_t semval)
{
	put32(bl, (uint32_t)idx), put32(bl, (uint32_t)id), put32(bl, (uint32_t)key);
	for (int i = 0; i < 4; i++)
		put32(bl, 0); /* uid, gid, cuid, cgid */
	put32(bl, 0600);
	put64(bl, 1), put64(bl, 2); /* ctime, otime */
	put32(bl, (uint32_t)nsems);
	put32(bl, 0), put32(bl, 0);
	for (int i = 0; i < nsems; i++) {
		put32(bl, (uint32_t)semval), put32(bl, 77);
		for (int k = 0; k < 4; k++)
			put32(bl, 0);
	}
}

static int end(struct blob *bl)
{
	uint64_t n = bl->n;

	memcpy(bl->b + 8, &n, 8);
	return try_ns(bl->b, bl->n);
}

Test(engine_state, hand_made)
{
	static struct blob bl;
	const int32_t id0 = 3 * SV_IPCMNI, id1 = 3 * SV_IPCMNI + 1;

	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 2);
	set(&bl, 0, id0, KEY, 2, 5), set(&bl, 1, id1, SV_IPC_PRIVATE, 1, 0);
	cr_assert_eq(end(&bl), 0, "the builder makes valid blobs");

	hdr(&bl, "SVNX", 1), ns_fixed(&bl, 0);
	cr_assert_eq(end(&bl), -EINVAL, "wrong magic");
	hdr(&bl, "SVPR", 1), ns_fixed(&bl, 0);
	cr_assert_eq(end(&bl), -EINVAL, "a process's magic");
	hdr(&bl, "SVNS", 2), ns_fixed(&bl, 0);
	cr_assert_eq(end(&bl), -EPROTONOSUPPORT, "a newer version");
	hdr(&bl, "SVNS", 0), ns_fixed(&bl, 0);
	cr_assert_eq(end(&bl), -EINVAL, "version 0");

	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 2);
	set(&bl, 1, id1, KEY, 2, 5), set(&bl, 1, id1 + SV_IPCMNI, SV_IPC_PRIVATE, 1, 0);
	cr_assert_eq(end(&bl), -EINVAL, "duplicate index");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 2);
	set(&bl, 1, id1, KEY, 2, 5), set(&bl, 0, id0, SV_IPC_PRIVATE, 1, 0);
	cr_assert_eq(end(&bl), -EINVAL, "out of index order");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 2);
	set(&bl, 0, id0, KEY, 2, 5), set(&bl, 1, id1, KEY, 1, 0);
	cr_assert_eq(end(&bl), -EINVAL, "duplicate key");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 2);
	set(&bl, 0, id0, SV_IPC_PRIVATE, 2, 5), set(&bl, 1, id1, SV_IPC_PRIVATE, 1, 0);
	cr_assert_eq(end(&bl), 0, "private keys may repeat");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 1);
	set(&bl, 0, id0, KEY, 2, SV_SEMVMX + 1);
	cr_assert_eq(end(&bl), -EINVAL, "semval above SEMVMX");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 1);
	set(&bl, 0, id0, KEY, 2, -1);
	cr_assert_eq(end(&bl), -EINVAL, "negative semval");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 1);
	set(&bl, 0, id1, KEY, 2, 0);
	cr_assert_eq(end(&bl), -EINVAL, "id of another index");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 1);
	set(&bl, SV_IPCMNI, SV_IPCMNI, KEY, 2, 0);
	cr_assert_eq(end(&bl), -EINVAL, "index out of range");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 1);
	set(&bl, 0, -SV_IPCMNI, KEY, 2, 0);
	cr_assert_eq(end(&bl), -EINVAL, "negative id");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 1);
	set(&bl, 0, id0, KEY, 0, 0);
	cr_assert_eq(end(&bl), -EINVAL, "no semaphores");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 3);
	set(&bl, 0, id0, KEY, 2, 0);
	cr_assert_eq(end(&bl), -EINVAL, "fewer sets than counted");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 0xffffffff);
	cr_assert_eq(end(&bl), -EINVAL, "a count no blob could hold");
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 1);
	set(&bl, 0, id0, KEY, 2, 0);
	put32(&bl, 0);
	cr_assert_eq(end(&bl), -EINVAL, "bytes after the last set");
	/* nsems far beyond what the blob holds: refused before any allocation */
	hdr(&bl, "SVNS", 1), ns_fixed(&bl, 1);
	set(&bl, 0, id0, KEY, 1, 0);
	memcpy(bl.b + 16 + 36 + 48, &(int32_t){ 0x7fffffff }, 4);
	cr_assert_eq(end(&bl), -EINVAL, "nsems past the end");
}

/* A set of more semaphores than the current SEMMSL allows still comes back. */
Test(engine_state, lowered_limits)
{
	struct sv_limits lim;
	size_t len;
	void *buf;
	int id = mkset(root_old, SV_IPC_PRIVATE, 300, 0600);

	sv_ns_limits(new_ns, &lim);
	lim.semmsl = 10;
	lim.semmni = 0;
	cr_assert_eq(sv_ns_set_limits(new_ns, &lim), 0);
	buf = export_ns(old_ns, &len);
	cr_assert_eq(sv_ns_import(new_ns, buf, len), 0);
	same_ns(old_ns, new_ns);
	cr_assert_eq(fx_getval(root_new, id, 299), 0);
	free(buf);
}
