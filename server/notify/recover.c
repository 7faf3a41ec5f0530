/* SPDX-License-Identifier: MIT */
/*
 * Crash safety: what the next process finds after a kill -9 at any instant (notify.h).
 *
 * Three things live in the memfd (durable.h), each consistent at every instant:
 *  - a checkpoint: the whole state as nt_super_save() writes it, taken when journaling starts;
 *  - the journal of every change since, in the order the changes were seen (engine/journal.c),
 *    with this layer's own records of the namespaces met since (below);
 *  - the calls received and not yet answered, each in its slot from before NOTIF_RECV returned
 *    until its answer went out, with its journal id.
 * Recovery applies the checkpoint (without its parked calls: the slots have them all), replays
 * the journal, then goes through the slots. A call the kernel no longer holds was answered, or
 * its caller went. A call the journal names as done got its change made: it is answered with
 * the result the change gave. Any other call made no change anybody saw, and is served again
 * from the start (a semop that waited parks again, its timeout counted from its first entry).
 *
 * Names in the journal. A namespace is named by nsreg_jkey(): its kernel id, which no other
 * namespace takes while the machine runs. One met after the checkpoint is found again through
 * the record written when it was first listed (its id, inode and handle, as persist.c finds a
 * saved one); one that cannot be found has ended, and its records are skipped, its sets gone
 * with it. A process is named by its pidfd's inode (pidfs numbers are never reused): its undo
 * entries are bound to it again if it still runs, else applied, as its exit would have.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock/xpthread.h"
#include "notify/durable.h"
#include "notify/listener.h"
#include "notify/parked.h"
#include "notify/records.h"
#include "notify/recover.h"
#include "notify/serve.h"
#include "notify/stats.h"
#include "notify/super.h"

#define NREC_MAGIC 0x314e5653u /* "SVN1": a record of this layer's own, next to the engine's */

/* ---- records of namespaces ---- */

/* A namespace met: written when it is listed, before any call is served in it. */
struct intro {
	uint32_t len, magic;
	uint8_t tag; /* 'I' */
	uint8_t named;
	uint16_t zero;
	uint32_t has_handle;
	uint64_t jkey;
	uint64_t id, ino;
	uint32_t handle_bytes;
	int32_t handle_type;
	unsigned char handle[32];
	char name[64];
	struct nt_pod pod;
} __attribute__((aligned(8)));

static void intro(void *ctx, const struct nt_ns *n)
{
	struct nt_super *s = ctx;
	struct intro r;

	memset(&r, 0, sizeof(r));
	r.len = sizeof(r);
	r.magic = NREC_MAGIC;
	r.tag = 'I';
	r.named = n->kid.ino == 0;
	r.jkey = nsreg_jkey(n);
	r.id = n->kid.id;
	r.ino = n->kid.ino;
	r.has_handle = n->kid.has_handle;
	r.handle_bytes = n->kid.handle.bytes;
	r.handle_type = n->kid.handle.type;
	memcpy(r.handle, n->kid.handle.f, sizeof(r.handle));
	memcpy(r.name, n->name, sizeof(r.name));
	r.pod = n->pod;
	if (!n->refused)
		dur_append(s->dur, &r, sizeof(r));
}

/* ---- journaling ---- */

int nt_super_journal_open(struct nt_super *s, int fd, bool after_crash)
{
	int err;

	if (s->dur)
		return -EBUSY;
	if (s->workers[0].notif_size > DUR_NOTIF_MAX)
		return -ENOTSUP; /* a kernel whose notifications outgrew a slot */
	if ((err = dur_open(fd, &s->dur)))
		return err;
	/* calls in it from before are wanted only by a recovery: else every slot is free now */
	if (!after_crash && !dur_fresh(s->dur))
		dur_calls_done(s->dur);
	return 0;
}

int nt_super_journal_fd(const struct nt_super *s)
{
	return s->dur ? dur_fd(s->dur) : -1;
}

int nt_super_journal_start(struct nt_super *s)
{
	void *blob;
	size_t len;
	int err;

	if (!s->dur)
		return -EINVAL;
	if ((err = nt_super_save(s, &blob, &len)))
		return err;
	err = dur_checkpoint(s->dur, blob, len);
	free(blob);
	if (err)
		return err;
	xlock(&s->reg.lock);
	s->reg.listed_ctx = s;
	s->reg.listed = intro;
	xunlock(&s->reg.lock);
	sv_journal_attach(dur_sink(s->dur));
	s->journaling = true;
	return 0;
}

size_t nt_super_journal_size(const struct nt_super *s)
{
	return s->journaling ? dur_log_size(s->dur) : 0;
}

int nt_super_checkpoint(struct nt_super *s)
{
	uint64_t ticks;
	void *blob;
	size_t len;
	int err, start_err;

	if (!s->journaling)
		return 0;
	/* everything that changes state stops: the workers, and this thread's own callers */
	s->pausing = true;
	nt_super_stop(s);
	nt_super_wait(s);
	if (read(s->stop.fd, &ticks, sizeof(ticks)) < 0) {
		/* nothing to take: the stop was seen already */
	}
	atomic_store(&s->stopping, false);
	s->pausing = false;
	err = nt_super_save(s, &blob, &len);
	if (!err) {
		err = dur_checkpoint(s->dur, blob, len);
		free(blob);
	}
	start_err = nt_super_start(s);
	return start_err ? start_err : err;
}

void nt_super_journal_stop(struct nt_super *s)
{
	if (!s->journaling)
		return;
	sv_journal_attach(NULL);
	xlock(&s->reg.lock);
	s->reg.listed = NULL;
	xunlock(&s->reg.lock);
	s->journaling = false;
}

/* ---- recovery ---- */

/* A call found in a slot. */
struct rcall {
	struct dur_call c;
	bool done;  /* the journal names it done, with result */
	bool again; /* it waits still, not done: served again */
	int64_t result;
};

struct rns {
	uint64_t jkey;
	struct nt_ns *n; /* a reference */
};

struct rproc {
	uint64_t key;
	struct sv_proc *svp; /* a reference */
	bool alive;	     /* bound to its running process; else applied at the end */
};

struct rctx {
	struct persist_gone gone; /* first: persist.c hands us the processes gone */
	struct nt_super *s;
	struct rcall *calls; /* sorted by jid */
	size_t ncalls;
	struct rns *ns;
	size_t nns;
	struct rproc *procs;
	size_t nprocs;
	bool oom;
};

/* arr, of n elements, with room for one more: capacities 8, 16, 32... NULL: out of memory. */
static void *grow(void *arr, size_t n, size_t size)
{
	if (n == 0)
		return realloc(arr, 8 * size);
	return n >= 8 && (n & (n - 1)) == 0 ? realloc(arr, 2 * n * size) : arr;
}

static int add_ns(struct rctx *rc, uint64_t jkey, struct nt_ns *n)
{
	struct rns *more = grow(rc->ns, rc->nns, sizeof(*rc->ns));

	if (!more)
		return -ENOMEM;
	rc->ns = more;
	nt_ns_get(n);
	rc->ns[rc->nns++] = (struct rns){ jkey, n };
	return 0;
}

static int known_ns(struct nt_ns *n, void *arg)
{
	struct rctx *rc = arg;

	return n->refused ? 0 : add_ns(rc, nsreg_jkey(n), n);
}

static struct nt_ns *ns_by_jkey(struct rctx *rc, uint64_t jkey)
{
	for (size_t i = 0; i < rc->nns; i++)
		if (rc->ns[i].jkey == jkey)
			return rc->ns[i].n;
	return NULL;
}

static struct sv_ns *r_ns(void *ctx, uint64_t jkey)
{
	struct nt_ns *n = ns_by_jkey(ctx, jkey);

	return n ? n->ns : NULL;
}

/* A namespace met after the checkpoint, if it is still there (persist.c's rules). */
static int replay_intro(struct rctx *rc, const struct intro *r)
{
	struct nt_super *s = rc->s;
	struct tgt_nsid kid = { .id = r->id, .ino = r->ino, .has_handle = r->has_handle != 0 };
	struct nt_ns *n = NULL;
	char name[sizeof(r->name)];
	int fd;

	if (r->handle_bytes > sizeof(kid.handle.f))
		return -EINVAL;
	if (ns_by_jkey(rc, r->jkey))
		return 0;
	kid.handle.bytes = r->handle_bytes;
	kid.handle.type = r->handle_type;
	memcpy(kid.handle.f, r->handle, sizeof(kid.handle.f));
	if (r->named) {
		memcpy(name, r->name, sizeof(name));
		name[sizeof(name) - 1] = '\0';
		n = nsreg_named(&s->reg, name);
	} else {
		if (nsreg_is_own(&s->reg, &kid))
			fd = fcntl(s->reg.my_ipc_fd, F_DUPFD_CLOEXEC, 3);
		else
			fd = tgt_ns_reopen(&kid);
		if (fd < 0)
			return 0; /* it ended: its records are skipped, its sets gone with it */
		n = nsreg_adopt(&s->reg, fd, &r->pod);
		close(fd);
		if (n == s->reg.full) {
			nt_ns_put(n);
			return 0;
		}
	}
	if (!n)
		return -ENOMEM;
	/* without ids an inode could name another namespace now: only what proves itself */
	if (nsreg_jkey(n) != r->jkey) {
		nt_ns_put(n);
		return 0;
	}
	fd = add_ns(rc, r->jkey, n);
	nt_ns_put(n);
	return fd;
}

static struct nt_ns *ns_of(struct rctx *rc, const struct sv_ns *ns)
{
	for (size_t i = 0; i < rc->nns; i++)
		if (rc->ns[i].n->ns == ns)
			return rc->ns[i].n;
	return NULL;
}

/*
 * The process key names in ns: bound to its record if it still runs there (a pidfd of pid
 * with the same inode), else one of our own whose entries are applied once the replay is over.
 */
static struct sv_proc *r_proc(void *ctx, struct sv_ns *ns, uint64_t key, int32_t pid)
{
	struct rctx *rc = ctx;
	struct nt_process *p;
	struct sv_proc *svp = NULL;
	struct rproc *more;
	bool alive = false;
	int err;

	for (size_t i = 0; i < rc->nprocs; i++)
		if (rc->procs[i].key == key && sv_proc_ns(rc->procs[i].svp) == ns)
			return rc->procs[i].svp;
	if (!(more = grow(rc->procs, rc->nprocs, sizeof(*rc->procs))))
		return NULL;
	rc->procs = more;
	p = pid > 0 ? nt_process_get(rc->s, pid, &err) : NULL;
	if (p && p->ino == key) {
		struct nt_ns *n = ns_of(rc, ns);

		xlock(&p->lock);
		if (!p->svp && n && (p->svp = sv_proc_new(ns, pid))) {
			sv_proc_set_jkey(p->svp, key);
			p->svp_ns = n;
			nt_ns_get(n);
		}
		if (p->svp && sv_proc_ns(p->svp) == ns) {
			svp = p->svp;
			sv_proc_get(svp);
			alive = true;
		}
		xunlock(&p->lock);
	}
	if (p)
		nt_process_put(p);
	if (!svp && (svp = sv_proc_new(ns, pid)))
		sv_proc_set_jkey(svp, key);
	if (!svp)
		return NULL;
	rc->procs[rc->nprocs++] = (struct rproc){ key, svp, alive };
	return svp;
}

/*
 * A process that exited while no supervisor ran, as the checkpoint has it: its entries are
 * applied once the journal has had its say on them (the journal may change them first).
 */
static bool keep_gone(struct persist_gone *g, struct sv_proc *svp, uint64_t key)
{
	struct rctx *rc = (struct rctx *)g;
	struct rproc *more = grow(rc->procs, rc->nprocs, sizeof(*rc->procs));

	if (!more)
		return false; /* applied at once: the best left without memory */
	rc->procs = more;
	sv_proc_get(svp);
	rc->procs[rc->nprocs++] = (struct rproc){ key, svp, false };
	return true;
}

static int by_jid(const void *a, const void *b)
{
	const struct rcall *x = a, *y = b;

	return (x->c.jid > y->c.jid) - (x->c.jid < y->c.jid);
}

static void r_call(void *ctx, uint64_t jid, int64_t result)
{
	struct rctx *rc = ctx;
	struct rcall key = { .c.jid = jid }, *c;

	/* (no calls: no array at all, which bsearch may not be given) */
	c = rc->ncalls ? bsearch(&key, rc->calls, rc->ncalls, sizeof(*c), by_jid) : NULL;
	if (!c)
		return; /* answered already */
	c->done = result != SV_JNL_UNDONE;
	c->result = result;
}

static int collect(const struct dur_call *c, void *arg)
{
	struct rctx *rc = arg;
	struct rcall *more = grow(rc->calls, rc->ncalls, sizeof(*rc->calls));

	if (!more)
		return -ENOMEM;
	rc->calls = more;
	rc->calls[rc->ncalls++] = (struct rcall){ .c = *c };
	return 0;
}

static int replay(struct rctx *rc, const unsigned char *p, size_t len, char *err, size_t errlen)
{
	const struct sv_replay rp = { r_ns, r_proc, r_call, rc };
	size_t off = 0;

	while (len - off >= 8) {
		uint32_t hdr[2];
		long used;

		memcpy(hdr, p + off, sizeof(hdr));
		if (!hdr[0])
			break;
		if (hdr[0] % 8 || hdr[0] > len - off) {
			snprintf(err, errlen, "damaged journal at byte %zu", off);
			return -EINVAL;
		}
		if (hdr[1] == NREC_MAGIC) {
			const struct intro *r = (const void *)(p + off);

			used =
			    hdr[0] == sizeof(*r) && r->tag == 'I' ? replay_intro(rc, r) : -EINVAL;
			if (!used)
				used = hdr[0];
		} else {
			used = sv_journal_replay(p + off, hdr[0], &rp);
		}
		if (used != (long)hdr[0]) {
			snprintf(err, errlen, "journal record at byte %zu: %s", off,
				 used < 0 ? strerror((int)-used) : "not whole");
			return used < 0 ? (int)used : -EINVAL;
		}
		off += hdr[0];
	}
	return 0;
}

static int by_arrival(const void *a, const void *b)
{
	const struct rcall *x = a, *y = b;

	return (x->c.received_ns > y->c.received_ns) - (x->c.received_ns < y->c.received_ns);
}

/*
 * First the calls the journal names as done: answered, before the checkpoint that starts the
 * next journal (which no longer names them: a crash after it would make them again). Those
 * answered before the crash or whose caller went are let go; the rest are kept, marked to be
 * served again. Their slots are kept, every other slot is free from here on.
 */
static void answer_done(struct nt_super *s, struct rctx *rc)
{
	for (size_t i = 0; i < rc->ncalls; i++)
		dur_slot_keep(s->dur, rc->calls[i].c.slot);
	dur_calls_done(s->dur);
	for (size_t i = 0; i < rc->ncalls; i++) {
		struct rcall *c = &rc->calls[i];
		struct nt_listener *l = persist_listener(s, c->c.key);

		c->again = l && nt_waits(l, c->c.n->id) && !c->done;
		if (l && c->done)
			nt_answer(l, c->c.n->id, (long)c->result, 0);
		if (!c->again)
			dur_slot_put(s->dur, c->c.slot);
		if (l)
			nt_listener_put(l);
	}
}

/* Then the others, served again from their start in the order they came (journaled). */
static void serve_again(struct nt_super *s, struct rctx *rc)
{
	struct nt_worker *wk = &s->workers[0];
	uint64_t parked = wk->stats.parked;

	if (rc->ncalls)
		qsort(rc->calls, rc->ncalls, sizeof(*rc->calls), by_arrival);
	for (size_t i = 0; i < rc->ncalls; i++) {
		struct rcall *c = &rc->calls[i];
		struct nt_listener *l;
		struct seccomp_notif n;

		if (!c->again)
			continue;
		if (!(l = persist_listener(s, c->c.key))) {
			dur_slot_put(s->dur, c->c.slot);
			continue;
		}
		memcpy(&n, c->c.n, sizeof(n));
		wk->slot = c->c.slot;
		wk->jid = c->c.jid;
		nt_serve_from(wk, l, &n, c->c.received_ns ? c->c.received_ns : nt_now_ns());
		if (wk->slot == c->c.slot) {
			dur_slot_put(s->dur, c->c.slot); /* answered: it did not park */
			wk->slot = -1;
		}
		nt_listener_put(l);
	}
	/* parking them again counted them again: the checkpoint's counters have them */
	wk->stats.parked = parked;
}

int nt_super_recover(struct nt_super *s, char *err, size_t errlen)
{
	struct rctx rc = { .gone = { keep_gone }, .s = s };
	const void *ckpt, *log;
	size_t clen, llen;
	struct sv_wakeq wq;
	int rcode;

	if (!s->dur)
		return -EINVAL;
	dur_current(s->dur, &ckpt, &clen, &log, &llen);
	if (!clen) {
		snprintf(err, errlen, "the journal has no checkpoint");
		dur_calls_done(s->dur);
		return -EINVAL;
	}
	rcode = persist_restore(s, ckpt, clen, false, &rc.gone, err, errlen);
	if (rcode) {
		dur_calls_done(s->dur);
		return rcode;
	}
	snprintf(err, errlen, "out of memory");
	sv_wakeq_init(&wq);
	if ((rcode = dur_for_each_call(s->dur, collect, &rc)) ||
	    (rcode = nsreg_for_each(&s->reg, known_ns, &rc)))
		goto out;
	if (rc.ncalls)
		qsort(rc.calls, rc.ncalls, sizeof(*rc.calls), by_jid);
	rcode = replay(&rc, log, llen, err, errlen);
	/* processes gone meanwhile: their exits now (also after a refused journal: no harm) */
	for (size_t i = 0; i < rc.nprocs; i++)
		if (!rc.procs[i].alive)
			sv_proc_exit(rc.procs[i].svp, &wq);
	nt_deliver(&s->workers[0], &wq);
	if (rcode) {
		/* nothing half-applied: every namespace goes empty, as without a state */
		for (size_t i = 0; i < rc.nns; i++)
			sv_ns_shutdown(rc.ns[i].n->ns, &wq);
		nt_deliver(&s->workers[0], &wq);
		goto out;
	}
	answer_done(s, &rc);
	/* from here on a crash finds this state as the checkpoint */
	if ((rcode = nt_super_journal_start(s))) {
		snprintf(err, errlen, "cannot checkpoint: %s", strerror(-rcode));
		goto out;
	}
	serve_again(s, &rc);
out:
	if (rcode)
		dur_calls_done(s->dur); /* the calls in it are nobody's now: every slot is free */
	for (size_t i = 0; i < rc.nprocs; i++)
		sv_proc_put(rc.procs[i].svp);
	for (size_t i = 0; i < rc.nns; i++)
		nt_ns_put(rc.ns[i].n);
	free(rc.procs);
	free(rc.ns);
	free(rc.calls);
	return rcode;
}
