/* SPDX-License-Identifier: MIT */
/*
 * Restart without loss: the state one supervisor process hands the next (notify.h,
 * nt_super_save() and nt_super_restore()).
 *
 * What the kernel keeps. A listener's notifications are the kernel's: while any process holds
 * an fd to the listener (systemd's fd store, a keeper), a call that was received and not
 * answered stays pending, and the next supervisor can answer it by its id. So what must cross
 * over is ours alone: the engine's sets (engine/state.c), the SEM_UNDO entries of processes
 * still alive, which calls are parked and what they wait to do, the listeners' names, the
 * counters. Thread records, credentials and namespace facts are not: they are caches, and the
 * next process reads them again from the callers, with the same rules (ident.h).
 *
 * Parked calls are served again (nt_serve_again()) in the order they parked, with the sops and
 * timeout read at their entry and the time they were made, so a timeout still counts from the
 * call's entry and each waits in the same queue position. Their permission check is not made
 * again, as natively a waiting semop is not checked twice. A call whose caller went meanwhile
 * (a signal, an exit) is found so by its identity check and dropped.
 *
 * Who is still there. Namespaces are found again by their kernel id: through the handle that
 * opens one while it lives (and fails once it has ended), else through a saved process that
 * is in it, whose namespace is checked to carry the saved id; one that cannot be found has
 * ended and its sets go with it, as they would have. A process's SEM_UNDO entries are bound to
 * it by its pidfd's inode number (pidfs gives every process its own, never reused while the
 * system runs): if the number now names another process, or none, the process exited while no
 * supervisor ran, and its adjustments are applied at once, as its exit would have.
 *
 * Format, version 1. All integers in the machine's byte order (the state never leaves the
 * machine):
 *   header  "SVSTATE\0", u32 version, u32 number of sections, u64 body length, u64 FNV-1a
 *           hash of the body
 *   body    sections, each u32 type, u32 zero, u64 length, then that many bytes, padded to 8
 * A reader skips section types it does not know; a newer writer that changes a section's
 * meaning gives it a new type, and one that cannot be read by an older reader raises the
 * version. A state is read whole and checked before any of it is applied.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock/xpthread.h"
#include "notify/listener.h"
#include "notify/notify.h"
#include "notify/parked.h"
#include "notify/records.h"
#include "notify/recover.h"
#include "notify/serve.h"
#include "notify/stats.h"
#include "notify/super.h"

#define ST_MAGIC   "SVSTATE"
#define ST_VERSION 1
#define ST_HDR	   32

enum {
	ST_STATS = 1,
	ST_NS = 2,
	ST_LISTENER = 3,
	ST_PROC = 4,
	ST_PARKED = 5,
	ST_SINCE = 6,
};

#define ST_NS_KERNEL 0
#define ST_NS_NAMED  1

/* ---- writing ---- */

struct wbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct wbuf *b, const void *v, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		if (!(p = realloc(b->p, cap))) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, v, n);
	b->len += n;
}

static void put_u32(struct wbuf *b, uint32_t v)
{
	put(b, &v, sizeof(v));
}

static void put_u64(struct wbuf *b, uint64_t v)
{
	put(b, &v, sizeof(v));
}

/* A section begins: its header, with the length filled in by end_section(). */
static size_t begin_section(struct wbuf *b, uint32_t type)
{
	size_t at = b->len;

	put_u32(b, type);
	put_u32(b, 0);
	put_u64(b, 0);
	return at;
}

static void end_section(struct wbuf *b, size_t at, uint32_t *nsections)
{
	static const char zero[8];
	uint64_t len = b->len - at - 16;

	if (b->oom)
		return;
	memcpy(b->p + at + 8, &len, sizeof(len));
	put(b, zero, (8 - len % 8) % 8);
	(*nsections)++;
}

static uint64_t fnv1a(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ULL;
	return h;
}

/* ---- reading: every read is bounded by the section it is in ---- */

struct rbuf {
	const char *p;
	size_t len, off;
	bool bad;
};

static const void *get(struct rbuf *r, size_t n)
{
	const void *v;

	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		return NULL;
	}
	v = r->p + r->off;
	r->off += n;
	return v;
}

static uint32_t get_u32(struct rbuf *r)
{
	const void *v = get(r, 4);
	uint32_t x = 0;

	if (v)
		memcpy(&x, v, 4);
	return x;
}

static uint64_t get_u64(struct rbuf *r)
{
	const void *v = get(r, 8);
	uint64_t x = 0;

	if (v)
		memcpy(&x, v, 8);
	return x;
}

/* A fixed-size text field: must hold its terminating NUL. */
static const char *get_str(struct rbuf *r, size_t n)
{
	const char *v = get(r, n);

	if (v && !memchr(v, '\0', n))
		r->bad = true;
	return r->bad ? NULL : v;
}

static void put_pod(struct wbuf *b, const struct nt_pod *pod)
{
	put(b, pod->ns, sizeof(pod->ns));
	put(b, pod->pod, sizeof(pod->pod));
	put(b, pod->container, sizeof(pod->container));
}

static void get_pod(struct rbuf *r, struct nt_pod *pod)
{
	const char *ns = get_str(r, sizeof(pod->ns)), *name = get_str(r, sizeof(pod->pod)),
		   *ct = get_str(r, sizeof(pod->container));

	memset(pod, 0, sizeof(*pod));
	if (ns && name && ct) {
		strcpy(pod->ns, ns);
		strcpy(pod->pod, name);
		strcpy(pod->container, ct);
	}
}

/* ---- saving ---- */

struct save {
	struct wbuf b;
	uint32_t nsections;
	int nns;
	struct nt_ns **ns; /* the namespaces saved, by index */
	int err;
};

static int save_ns(struct nt_ns *n, void *arg)
{
	struct save *sv = arg;
	struct nt_ns **more;
	void *blob;
	size_t len, at;

	if (n->refused)
		return 0;
	if ((sv->err = sv_ns_export(n->ns, &blob, &len)))
		return 1;
	if (!(more = realloc(sv->ns, (sv->nns + 1) * sizeof(*more)))) {
		free(blob);
		sv->err = -ENOMEM;
		return 1;
	}
	sv->ns = more;
	sv->ns[sv->nns] = n;
	at = begin_section(&sv->b, ST_NS);
	put_u32(&sv->b, (uint32_t)sv->nns++);
	put_u32(&sv->b, n->kid.ino ? ST_NS_KERNEL : ST_NS_NAMED);
	put_u64(&sv->b, n->kid.id);
	put_u64(&sv->b, n->kid.ino);
	put_u32(&sv->b, n->kid.has_handle);
	put_u32(&sv->b, n->kid.handle.bytes);
	put_u32(&sv->b, (uint32_t)n->kid.handle.type);
	put(&sv->b, n->kid.handle.f, sizeof(n->kid.handle.f));
	put(&sv->b, n->name, sizeof(n->name));
	put_pod(&sv->b, &n->pod);
	put_u64(&sv->b, len);
	put(&sv->b, blob, len);
	end_section(&sv->b, at, &sv->nsections);
	free(blob);
	return 0;
}

static int ns_index(const struct save *sv, const struct nt_ns *n)
{
	for (int i = 0; i < sv->nns; i++)
		if (sv->ns[i] == n)
			return i;
	return -1;
}

static void save_listeners(struct nt_super *s, struct save *sv)
{
	struct nt_listener *l;

	xlock(&s->lock);
	cds_list_for_each_entry(l, &s->listeners, node) {
		size_t at;

		if (!l->key || l->gone)
			continue;
		at = begin_section(&sv->b, ST_LISTENER);
		put_u64(&sv->b, l->key);
		put(&sv->b, l->name, sizeof(l->name));
		put_pod(&sv->b, &l->pod);
		put_u64(&sv->b, atomic_load(&l->calls));
		end_section(&sv->b, at, &sv->nsections);
	}
	xunlock(&s->lock);
}

/* Processes with SEM_UNDO entries: bound to their pidfd's inode (see the top). */
static void save_procs(struct nt_super *s, struct save *sv)
{
	struct cds_lfht_iter it;
	struct nt_process *p;

	rcu_read_lock();
	cds_lfht_for_each_entry(s->procs, &it, p, node) {
		struct stat st;
		void *blob;
		size_t len, at;
		int idx;

		xlock(&p->lock);
		idx = p->svp && !p->exited ? ns_index(sv, p->svp_ns) : -1;
		if (idx < 0 || fstat(p->src.fd, &st) || sv_proc_export(p->svp, &blob, &len)) {
			xunlock(&p->lock);
			continue;
		}
		xunlock(&p->lock);
		at = begin_section(&sv->b, ST_PROC);
		put_u32(&sv->b, (uint32_t)p->tgid);
		put_u32(&sv->b, (uint32_t)idx);
		put_u64(&sv->b, (uint64_t)st.st_ino);
		put_u64(&sv->b, len);
		put(&sv->b, blob, len);
		end_section(&sv->b, at, &sv->nsections);
		free(blob);
	}
	rcu_read_unlock();
}

static int by_parked_time(const void *a, const void *b)
{
	const struct nt_req *x = *(struct nt_req *const *)a, *y = *(struct nt_req *const *)b;

	return (x->parked_ns > y->parked_ns) - (x->parked_ns < y->parked_ns);
}

static void save_parked(struct nt_super *s, struct save *sv)
{
	struct nt_req *r, **all = NULL;
	size_t n = 0, cap = 0;

	xlock(&s->parked_lock);
	cds_list_for_each_entry(r, &s->parked, parked_node) {
		if (n == cap) {
			struct nt_req **more =
			    realloc(all, (cap = cap ? cap * 2 : 64) * sizeof(*all));

			if (!more) {
				sv->b.oom = true;
				break;
			}
			all = more;
		}
		all[n++] = r;
	}
	xunlock(&s->parked_lock);
	/* in the order they parked: each then waits where it waited (see the top) */
	if (n)
		qsort(all, n, sizeof(*all), by_parked_time);
	for (size_t i = 0; i < n; i++) {
		unsigned int nsops;
		const struct sv_sembuf *sops;
		size_t at;

		r = all[i];
		if (!r->l->key)
			continue;
		sops = sv_waiter_sops(r->w, &nsops);
		at = begin_section(&sv->b, ST_PARKED);
		put_u64(&sv->b, r->l->key);
		put_u64(&sv->b, r->id);
		put_u32(&sv->b, (uint32_t)r->thr->tid);
		put_u32(&sv->b, (uint32_t)r->nr);
		for (int a = 0; a < 6; a++)
			put_u64(&sv->b, r->args[a]);
		put_u64(&sv->b, (uint64_t)r->received_ns);
		put_u64(&sv->b, (uint64_t)r->deadline_ns);
		put_u32(&sv->b, nsops);
		put(&sv->b, sops, nsops * sizeof(*sops));
		end_section(&sv->b, at, &sv->nsections);
	}
	free(all);
}

int nt_super_save(struct nt_super *s, void **buf, size_t *len)
{
	struct save sv = { 0 };
	struct nt_stats st;
	uint64_t hdr[ST_HDR / 8] = { 0 };
	size_t at;

	put(&sv.b, hdr, sizeof(hdr)); /* filled in at the end */

	nt_super_stats(s, &st);
	at = begin_section(&sv.b, ST_STATS);
	put_u32(&sv.b, sizeof(st) / 8);
	put_u32(&sv.b, 0);
	put(&sv.b, &st, sizeof(st));
	end_section(&sv.b, at, &sv.nsections);
	at = begin_section(&sv.b, ST_SINCE);
	put_u64(&sv.b, (uint64_t)s->counting_ns);
	end_section(&sv.b, at, &sv.nsections);

	nsreg_for_each(&s->reg, save_ns, &sv);
	if (!sv.err) {
		save_listeners(s, &sv);
		save_procs(s, &sv);
		save_parked(s, &sv);
	}
	free(sv.ns);
	if (sv.err || sv.b.oom) {
		free(sv.b.p);
		return sv.err ? sv.err : -ENOMEM;
	}
	memcpy(sv.b.p, ST_MAGIC, 8);
	hdr[1] = ST_VERSION | (uint64_t)sv.nsections << 32;
	hdr[2] = sv.b.len - ST_HDR;
	hdr[3] = fnv1a(sv.b.p + ST_HDR, sv.b.len - ST_HDR);
	memcpy(sv.b.p + 8, &hdr[1], 24);
	*buf = sv.b.p;
	*len = sv.b.len;
	return 0;
}

/* ---- restoring ---- */

/* A section, checked, not yet applied: its fields point into the state. */
struct r_ns {
	uint32_t kind;
	struct tgt_nsid kid;
	const char *name;
	struct nt_pod pod;
	const void *blob;
	size_t bloblen;
	struct nt_ns *n; /* once found again; NULL: it ended */
};

struct r_listener {
	uint64_t key;
	const char *name;
	struct nt_pod pod;
	uint64_t calls;
};

struct r_proc {
	int32_t tgid;
	uint32_t ns;
	uint64_t ino;
	const void *blob;
	size_t bloblen;
};

struct r_parked {
	uint64_t key;
	struct nt_again a;
};

struct restore {
	struct nt_stats stats;
	bool have_stats;
	int64_t since; /* counting_ns, 0: not given */
	struct r_ns *ns;
	struct r_listener *ls;
	struct r_proc *procs;
	struct r_parked *parked;
	int nns, nls, nprocs, nparked;
};

static bool parse_ns(struct rbuf *r, struct r_ns *o, uint32_t want_index)
{
	const void *f;

	if (get_u32(r) != want_index)
		return false;
	o->kind = get_u32(r);
	o->kid.id = get_u64(r);
	o->kid.ino = get_u64(r);
	o->kid.has_handle = get_u32(r) != 0;
	o->kid.handle.bytes = get_u32(r);
	o->kid.handle.type = (int)get_u32(r);
	f = get(r, sizeof(o->kid.handle.f));
	if (f)
		memcpy(o->kid.handle.f, f, sizeof(o->kid.handle.f));
	o->name = get_str(r, sizeof(((struct nt_ns *)0)->name));
	get_pod(r, &o->pod);
	o->bloblen = get_u64(r);
	o->blob = get(r, o->bloblen);
	return !r->bad && o->kid.handle.bytes <= sizeof(o->kid.handle.f) &&
	       (o->kind == ST_NS_NAMED ? o->name[0] != '\0'
				       : o->kind == ST_NS_KERNEL && o->kid.ino != 0);
}

static bool parse_parked(struct rbuf *r, struct r_parked *o)
{
	int64_t deadline;

	o->key = get_u64(r);
	o->a.id = get_u64(r);
	o->a.tid = (int32_t)get_u32(r);
	o->a.nr = (int)get_u32(r);
	for (int i = 0; i < 6; i++)
		o->a.args[i] = get_u64(r);
	o->a.received_ns = (int64_t)get_u64(r);
	deadline = (int64_t)get_u64(r);
	o->a.nsops = get_u32(r);
	/* a sops array as the engine kept it: at most SEMOPM's bound */
	if (r->bad || o->a.nsops == 0 || o->a.nsops > SV_IPCMNI || o->a.nsops != o->a.args[2])
		return false;
	o->a.sops = get(r, o->a.nsops * sizeof(*o->a.sops));
	if (r->bad || o->a.tid <= 0 || (o->a.nr != NR_SEMOP && o->a.nr != NR_SEMTIMEDOP) ||
	    o->a.received_ns <= 0 || deadline < 0 || (deadline && deadline < o->a.received_ns))
		return false;
	/* a timeout only where the call had one: what the engine will read again */
	if ((deadline != 0) != (o->a.nr == NR_SEMTIMEDOP && o->a.args[3] != 0))
		return false;
	o->a.timeout.tv_sec = deadline ? (deadline - o->a.received_ns) / 1000000000LL : 0;
	o->a.timeout.tv_nsec = deadline ? (deadline - o->a.received_ns) % 1000000000LL : 0;
	return true;
}

/* Grow an array by one: its new last element, zeroed; NULL when out of memory. */
static void *grow(void **arr, int *n, size_t size)
{
	char *more = realloc(*arr, (*n + 1) * size);

	if (!more)
		return NULL;
	*arr = more;
	memset(more + *n * size, 0, size);
	return more + (*n)++ * size;
}

static int parse(const void *buf, size_t len, struct restore *rs, char *err, size_t errlen)
{
	struct rbuf hr = { buf, len, 0, false };
	const char *magic = get(&hr, 8);
	uint64_t w1 = get_u64(&hr), body = get_u64(&hr), hash = get_u64(&hr);
	uint32_t version = (uint32_t)w1, nsections = (uint32_t)(w1 >> 32);
	struct rbuf br;

	if (hr.bad || memcmp(magic, ST_MAGIC, 8)) {
		snprintf(err, errlen, "not a semvisor state");
		return -EINVAL;
	}
	if (version > ST_VERSION) {
		snprintf(err, errlen, "state version %u, newer than this build reads (%d)", version,
			 ST_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (version == 0 || body != len - ST_HDR ||
	    fnv1a((const char *)buf + ST_HDR, body) != hash) {
		snprintf(err, errlen, "damaged state (length or checksum)");
		return -EINVAL;
	}
	br = (struct rbuf){ (const char *)buf + ST_HDR, body, 0, false };
	for (uint32_t i = 0; i < nsections; i++) {
		uint32_t type = get_u32(&br), zero = get_u32(&br);
		uint64_t slen = get_u64(&br);
		struct rbuf r = { get(&br, slen), slen, 0, false };
		bool ok = !br.bad && zero == 0;

		get(&br, (8 - slen % 8) % 8);
		if (!ok || br.bad) {
			ok = false;
		} else if (type == ST_STATS) {
			uint32_t n = get_u32(&r);
			const void *v;

			get_u32(&r);
			/*
			 * A state from a build that counted more or fewer things: counters start
			 * over. Its section is as long as its own counters, so it is not read.
			 */
			v = n == sizeof(rs->stats) / 8 ? get(&r, sizeof(rs->stats)) : NULL;
			if (v) {
				memcpy(&rs->stats, v, sizeof(rs->stats));
				rs->have_stats = true;
			}
		} else if (type == ST_SINCE) {
			rs->since = (int64_t)get_u64(&r);
		} else if (type == ST_NS) {
			struct r_ns *o = grow((void **)&rs->ns, &rs->nns, sizeof(*o));

			if (!o)
				return -ENOMEM;
			ok = parse_ns(&r, o, (uint32_t)rs->nns - 1);
		} else if (type == ST_LISTENER) {
			struct r_listener *o = grow((void **)&rs->ls, &rs->nls, sizeof(*o));

			if (!o)
				return -ENOMEM;
			o->key = get_u64(&r);
			o->name = get_str(&r, sizeof(((struct nt_listener *)0)->name));
			get_pod(&r, &o->pod);
			o->calls = get_u64(&r);
			ok = !r.bad && o->key;
		} else if (type == ST_PROC) {
			struct r_proc *o = grow((void **)&rs->procs, &rs->nprocs, sizeof(*o));

			if (!o)
				return -ENOMEM;
			o->tgid = (int32_t)get_u32(&r);
			o->ns = get_u32(&r);
			o->ino = get_u64(&r);
			o->bloblen = get_u64(&r);
			o->blob = get(&r, o->bloblen);
			/* namespaces come first, so the index is checked against those seen */
			ok = !r.bad && o->tgid > 0 && o->ns < (uint32_t)rs->nns;
		} else if (type == ST_PARKED) {
			struct r_parked *o = grow((void **)&rs->parked, &rs->nparked, sizeof(*o));

			if (!o)
				return -ENOMEM;
			ok = parse_parked(&r, o);
		}
		if (!ok || r.bad) {
			snprintf(err, errlen, "damaged state (section %u of type %u)", i, type);
			return -EINVAL;
		}
	}
	if (br.off != br.len) {
		snprintf(err, errlen, "damaged state (bytes after the last section)");
		return -EINVAL;
	}
	return 0;
}

/*
 * An fd of the kernel namespace o names, if it still lives: our own (we are in it, so it
 * lives, and its id, or without ids its inode, cannot name another); else by its handle; else
 * through a saved process in it whose namespace carries the same id. Without ids nothing else
 * proves a namespace the same (a number can be reused once it is gone): its sets are not
 * taken back, which loses them rather than give them to a stranger.
 */
static int find_ns(struct nt_super *s, const struct restore *rs, int idx)
{
	const struct r_ns *o = &rs->ns[idx];
	int fd;

	if (nsreg_is_own(&s->reg, &o->kid))
		return fcntl(s->reg.my_ipc_fd, F_DUPFD_CLOEXEC, 3);
	fd = tgt_ns_reopen(&o->kid);

	if (fd >= 0 || fd == -ESTALE)
		return fd;
	for (int i = 0; i < rs->nprocs; i++) {
		struct tgt_nsid kid;
		int pidfd;

		if (rs->procs[i].ns != (uint32_t)idx)
			continue;
		if ((pidfd = tgt_pidfd_open(rs->procs[i].tgid, false)) < 0)
			continue;
		fd = tgt_ns_open(pidfd, rs->procs[i].tgid, TGT_NS_IPC, s->feat.pidfd_ns);
		close(pidfd);
		if (fd < 0)
			continue;
		/* without ids an inode number proves nothing: only an id does */
		if (s->feat.ns_id && !tgt_ns_ident(fd, true, &kid) && kid.id == o->kid.id)
			return fd;
		close(fd);
	}
	return -ESTALE;
}

static int restore_namespaces(struct nt_super *s, struct restore *rs, char *err, size_t errlen)
{
	for (int i = 0; i < rs->nns; i++) {
		struct r_ns *o = &rs->ns[i];
		int rc, fd;

		if (o->kind == ST_NS_NAMED) {
			o->n = nsreg_named(&s->reg, o->name);
		} else if ((fd = find_ns(s, rs, i)) >= 0) {
			o->n = nsreg_adopt(&s->reg, fd, &o->pod);
			close(fd);
			if (o->n == s->reg.full) {
				nt_ns_put(o->n);
				o->n =
				    NULL; /* over the budget now: as if it had not been taken on */
			}
		} else {
			continue; /* it ended: its sets with it */
		}
		if (!o->n)
			return -ENOMEM;
		rc = sv_ns_import(o->n->ns, o->blob, o->bloblen);
		if (rc) {
			snprintf(err, errlen, "namespace %s: %s", o->name,
				 rc == -EBUSY ? "already has sets" : strerror(-rc));
			return rc == -EBUSY ? -EINVAL : rc;
		}
	}
	return 0;
}

/*
 * caller is RCU-registered. gone (may be NULL) takes the processes that exited meanwhile, with
 * their entries, instead of their exits applying them now (recover.c applies them later).
 */
static void restore_procs(struct nt_super *s, struct restore *rs, struct sv_wakeq *wq,
			  struct persist_gone *gone)
{
	for (int i = 0; i < rs->nprocs; i++) {
		struct r_proc *o = &rs->procs[i];
		struct nt_ns *n = rs->ns[o->ns].n;
		struct nt_process *p;
		struct sv_proc *svp;
		struct stat st;
		int err;

		if (!n)
			continue; /* its namespace ended, and its sets with it */
		/*
		 * The same process if its pidfd has the same inode. Before pidfs (6.9) every
		 * pidfd shares one inode and this proves nothing: a pid given to another process
		 * within the restart would take the entries over. Applying them at once instead
		 * would take them from a process that still runs, which every live one is.
		 */
		p = nt_process_get(s, o->tgid, &err);
		if (p && !fstat(p->src.fd, &st) && (uint64_t)st.st_ino == o->ino) {
			xlock(&p->lock);
			if (!p->svp && (p->svp = sv_proc_new(n->ns, o->tgid))) {
				sv_proc_set_jkey(p->svp, o->ino);
				p->svp_ns = n;
				nt_ns_get(n);
				if (sv_proc_import(p->svp, o->blob, o->bloblen))
					fprintf(stderr,
						"semvisor: pid %d: its undo entries "
						"could not be restored\n",
						o->tgid);
			}
			xunlock(&p->lock);
			nt_process_put(p);
			continue;
		}
		if (p)
			nt_process_put(p);
		/* it exited while no supervisor ran: its exit applies them now */
		if ((svp = sv_proc_new(n->ns, o->tgid))) {
			sv_proc_set_jkey(svp, o->ino);
			if (!sv_proc_import(svp, o->blob, o->bloblen) &&
			    !(gone && gone->fn(gone, svp, o->ino)))
				sv_proc_exit(svp, wq);
			sv_proc_put(svp);
		}
	}
}

struct nt_listener *persist_listener(struct nt_super *s, uint64_t key)
{
	struct nt_listener *l, *found = NULL;

	xlock(&s->lock);
	cds_list_for_each_entry(l, &s->listeners, node) {
		if (l->key == key && !l->gone) {
			nt_listener_get(l);
			found = l;
			break;
		}
	}
	xunlock(&s->lock);
	return found;
}

static void restore_listeners(struct nt_super *s, const struct restore *rs)
{
	for (int i = 0; i < rs->nls; i++) {
		struct nt_listener *l = persist_listener(s, rs->ls[i].key);

		if (!l)
			continue;
		snprintf(l->name, sizeof(l->name), "%s", rs->ls[i].name);
		l->pod = rs->ls[i].pod;
		atomic_fetch_add(&l->calls, rs->ls[i].calls);
		nt_listener_put(l);
	}
}

int nt_super_restore(struct nt_super *s, const void *buf, size_t len, char *err, size_t errlen)
{
	return persist_restore(s, buf, len, true, NULL, err, errlen);
}

int persist_restore(struct nt_super *s, const void *buf, size_t len, bool parked_too,
		    struct persist_gone *gone, char *err, size_t errlen)
{
	struct restore rs;
	struct nt_worker *wk = &s->workers[0];
	struct sv_wakeq wq;
	uint64_t parked;
	int rc;

	memset(&rs, 0, sizeof(rs));
	snprintf(err, errlen, "out of memory");
	rc = parse(buf, len, &rs, err, errlen);
	if (rc)
		goto out;
	sv_wakeq_init(&wq);
	rc = restore_namespaces(s, &rs, err, errlen);
	if (rc) {
		/* nothing half-applied: what was imported goes again */
		for (int i = 0; i < rs.nns; i++)
			if (rs.ns[i].n)
				sv_ns_shutdown(rs.ns[i].n->ns, &wq);
	} else {
		restore_procs(s, &rs, &wq, gone);
		restore_listeners(s, &rs);
		nt_deliver(wk, &wq);
		parked = wk->stats.parked;
		for (int i = 0; parked_too && i < rs.nparked; i++) {
			struct nt_listener *l = persist_listener(s, rs.parked[i].key);

			/* a listener not handed back cannot be answered through anyway */
			if (!l)
				continue;
			nt_serve_again(wk, l, &rs.parked[i].a);
			nt_listener_put(l);
		}
		/* parking them again counted them again: the saved counters have them once */
		wk->stats.parked = parked;
		if (rs.have_stats)
			nt_stats_add(&s->events, &rs.stats);
		/* the same clock for every process while the machine runs */
		if (rs.have_stats && rs.since > 0 && rs.since <= nt_now_ns())
			s->counting_ns = rs.since;
	}
	for (int i = 0; i < rs.nns; i++)
		if (rs.ns[i].n)
			nt_ns_put(rs.ns[i].n);
out:
	free(rs.ns);
	free(rs.ls);
	free(rs.procs);
	free(rs.parked);
	return rc;
}
