/* SPDX-License-Identifier: MIT */
/*
 * Answering control requests from the supervisor's state: nt_super_* for the counters, clients
 * and administration, the engine's inspection calls (sv_ns_*) for namespaces, sets and
 * semaphores. Runs on the control thread, which is registered with the engine's RCU.
 *
 * Namespaces are taken with a reference while nt_super_for_each_ns() holds the supervisor's
 * lock and looked into after it is dropped, so no engine lock is ever taken under it.
 * Engine errnos stop here: each becomes one of the protocol's Status values.
 *
 * What a peer is told is no more than it could read natively (ctl_may_read() for the rule):
 *   - Stats, Watch, ListClients: counters summed over the supervisor and over each namespace,
 *     and the clients; no set's or semaphore's value in them. Answered for every peer.
 *   - ListSets: every set's metadata, as SEM_STAT_ANY and /proc/sysvipc/sem give it to anyone;
 *     for a set the peer may not read, its lock counters are left out and withheld is set.
 *   - ShowSet: a set the peer may read, whole; another one gets PERMISSION_DENIED. Whether the
 *     set exists (NO_SUCH_SET, AMBIGUOUS) is metadata, told as before.
 *   - Reset, RemoveSet, SetLimits: privileged peers only (control.c refuses them to others).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/ctl_int.h"
#include "lock/lock.h"
#include "util/version.h"

/* ---- memory ---- */

struct ctl_chunk {
	struct ctl_chunk *next;
	size_t used, size;
	max_align_t data[];
};

#define CHUNK_SIZE (64 * 1024)

static void *xmalloc_or_die(size_t size)
{
	void *p = malloc(size);

	if (!p) {
		/* the control plane may exit on OOM (STYLE.md); the data path never does */
		fprintf(stderr, "semvisor: control: out of memory (%zu bytes)\n", size);
		abort();
	}
	return p;
}

/* zeroed */
static void *ctl_xalloc(struct ctl_arena *a, size_t size)
{
	struct ctl_chunk *c = a->chunks;
	size_t need = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	void *p;

	if (!need)
		need = sizeof(max_align_t);
	if (!c || c->size - c->used < need) {
		size_t sz = need > CHUNK_SIZE ? need : CHUNK_SIZE;

		c = xmalloc_or_die(sizeof(*c) + sz);
		c->used = 0;
		c->size = sz;
		/* a big one-off block goes behind the current chunk, which keeps its free room */
		if (sz > CHUNK_SIZE && a->chunks) {
			c->next = a->chunks->next;
			a->chunks->next = c;
		} else {
			c->next = a->chunks;
			a->chunks = c;
		}
	}
	p = (char *)c->data + c->used;
	c->used += need;
	memset(p, 0, size);
	return p;
}

static char *ctl_xstrdup(struct ctl_arena *a, const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(ctl_xalloc(a, n), s, n);
}

void ctl_arena_free(struct ctl_arena *a)
{
	while (a->chunks) {
		struct ctl_chunk *c = a->chunks;

		a->chunks = c->next;
		free(c);
	}
}

/* A growing array of pointers, on the heap while it grows, then moved into the arena. */
struct ptrvec {
	void **v;
	size_t n, cap;
};

static void pv_push(struct ptrvec *pv, void *p)
{
	if (pv->n == pv->cap) {
		size_t cap = pv->cap ? pv->cap * 2 : 16;
		void **v = realloc(pv->v, cap * sizeof(*v));

		if (!v) {
			fprintf(stderr, "semvisor: control: out of memory\n");
			abort();
		}
		pv->v = v;
		pv->cap = cap;
	}
	pv->v[pv->n++] = p;
}

static void *pv_finish(struct ptrvec *pv, struct ctl_arena *a, size_t *n)
{
	void **out = NULL;

	*n = pv->n;
	if (pv->n) {
		out = ctl_xalloc(a, pv->n * sizeof(*out));
		memcpy(out, pv->v, pv->n * sizeof(*out));
	}
	free(pv->v);
	*pv = (struct ptrvec){ 0 };
	return out;
}

int64_t ctl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * What an unmapped uid or gid reads as here: the kernel's setting, 65534 unless changed; or,
 * in the initial user namespace, where every id is mapped and 65534 is a real user (nobody,
 * who reads its own sets natively), an id no one has.
 */
static unsigned read_overflow_id(const char *path, const char *map)
{
	FILE *f = fopen(map, "re");
	unsigned v = 65534, inside, outside, count;
	int lines = 0;

	if (f) {
		while (fscanf(f, "%u %u %u", &inside, &outside, &count) == 3)
			lines++;
		fclose(f);
		if (lines == 1 && inside == 0 && outside == 0 && count == 4294967295u)
			return (unsigned)-1;
	}
	f = fopen(path, "re");

	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 65534;
		fclose(f);
	}
	return v;
}

void ctl_ctx_init(struct ctl_ctx *cx, struct nt_super *s, FILE *log)
{
	memset(cx, 0, sizeof(*cx));
	cx->super = s;
	cx->log = log;
	cx->started_ns = ctl_now_ns();
	cx->overflow_uid =
	    (uid_t)read_overflow_id("/proc/sys/kernel/overflowuid", "/proc/self/uid_map");
	cx->overflow_gid =
	    (gid_t)read_overflow_id("/proc/sys/kernel/overflowgid", "/proc/self/gid_map");
}

void ctl_reply_error(Semvisor__Reply *reply, struct ctl_arena *a, int status, const char *why)
{
	reply->status = (Semvisor__Status)status;
	reply->message = ctl_xstrdup(a, why && *why ? why : ctl_status_text(status));
	reply->body_case = SEMVISOR__REPLY__BODY__NOT_SET;
}

static void logf_(struct ctl_ctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct ctl_ctx *cx, const char *fmt, ...)
{
	va_list ap;

	if (!cx->log)
		return;
	va_start(ap, fmt);
	fputs("semvisor: control: ", cx->log);
	vfprintf(cx->log, fmt, ap);
	fputc('\n', cx->log);
	va_end(ap);
	fflush(cx->log);
}

/* ---- who may read what ---- */

static bool in_group(const struct ctl_ctx *cx, const struct ctl_peer *peer, gid_t gid)
{
	/* an id our user namespace cannot map reads as the overflow id: it names nobody */
	if (gid == cx->overflow_gid)
		return false;
	if (peer->gid == gid)
		return true;
	for (int i = 0; i < peer->ngroups; i++)
		if (peer->groups[i] == gid)
			return true;
	return false;
}

/*
 * Natively, a set's metadata (id, key, owners, mode, nsems, times) is anyone's: SEM_STAT_ANY
 * and /proc/sysvipc/sem check no permission. Its values and per-semaphore state (GETVAL,
 * GETALL, GETPID, GETNCNT, GETZCNT, and IPC_STAT/SEM_STAT) need ipcperms(S_IRUGO) to pass
 * (kernel ipc/util.c, ipc/sem.c semctl_stat() and semctl_main()): the owner bits of the mode
 * if the caller's effective uid is the set's uid or cuid, else the group bits if the set's gid
 * or cgid is the caller's effective gid or one of its supplementary groups (in_group_p()),
 * else the other bits; read is granted when the chosen bits have 04, or the caller has
 * CAP_IPC_OWNER in the namespace's user namespace.
 *
 * Here the caller is the peer as SO_PEERCRED/SO_PEERGROUPS saw it at connect(): effective
 * ids, as the kernel checks, in the server's user namespace, which is also the one the engine
 * keeps the set's ids in. Capabilities do not cross a socket, so CAP_IPC_OWNER stands for
 * peer->privileged: root and the socket's owner (the server's own user, who can read the
 * server's memory anyway) read every set; a container's root is not uid 0 here and reads what
 * its mapped uid may, which can be less than natively, never more. Where the server runs in a
 * user namespace of its own, an id it cannot map reads as the overflow id (65534 by default):
 * that id matches nothing there, or every unmapped user would be the owner of every other's
 * sets. In the initial user namespace every id is mapped, and 65534 is nobody, who reads its
 * own sets.
 */
bool ctl_may_read(const struct ctl_ctx *cx, const struct ctl_peer *peer,
		  const struct sv_set_info *si)
{
	uint32_t granted = si->mode & 0777;

	if (peer->privileged)
		return true;
	if (peer->uid != cx->overflow_uid && (peer->uid == si->uid || peer->uid == si->cuid))
		granted >>= 6;
	else if (in_group(cx, peer, si->gid) || in_group(cx, peer, si->cgid))
		granted >>= 3;
	return granted & 04;
}

/* ---- namespaces ---- */

struct ns_ref {
	char name[CTL_NS_NAME_MAX + 1];
	struct nt_pod pod; /* its pod's names, for people ("" where none) */
	struct sv_ns *ns;
};

struct ns_list {
	struct ns_ref *v;
	int n, cap;
};

/* Under the supervisor's lock: take a reference, look inside later. */
static int ns_collect(const char *name, const struct nt_pod *pod, struct sv_ns *ns, void *arg)
{
	struct ns_list *l = arg;

	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 8;
		struct ns_ref *v = realloc(l->v, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	snprintf(l->v[l->n].name, sizeof(l->v[l->n].name), "%s", name);
	l->v[l->n].pod = *pod;
	sv_ns_get(ns);
	l->v[l->n++].ns = ns;
	return 0;
}

static void ns_list_put(struct ns_list *l)
{
	/* a namespace that ended meanwhile goes with our reference */
	for (int i = 0; i < l->n; i++)
		sv_ns_put(l->v[i].ns);
	free(l->v);
	*l = (struct ns_list){ 0 };
}

static void ns_list_get(struct ctl_ctx *cx, struct ns_list *l)
{
	*l = (struct ns_list){ 0 };
	if (nt_super_for_each_ns(cx->super, ns_collect, l)) {
		fprintf(stderr, "semvisor: control: out of memory\n");
		abort();
	}
}

/* A namespace is named by its name or, where a pod's containers live in it, NAMESPACE/POD. */
static bool ns_is(const struct ns_ref *r, const char *name)
{
	size_t len = strlen(r->pod.ns);

	if (!strcmp(r->name, name))
		return true;
	return r->pod.pod[0] && !strncmp(name, r->pod.ns, len) && name[len] == '/' &&
	       !strcmp(name + len + 1, r->pod.pod);
}

static int ns_find(const struct ns_list *l, const char *name)
{
	int found = -1;

	for (int i = 0; i < l->n; i++)
		if (ns_is(&l->v[i], name))
			found = i; /* the newest, as nt_super_find_ns() */
	return found;
}

static Semvisor__Limits *limits_msg(struct ctl_arena *a, const char *ns,
				    const struct sv_limits *lim)
{
	Semvisor__Limits *m = ctl_xalloc(a, sizeof(*m));

	semvisor__limits__init(m);
	m->ns = ctl_xstrdup(a, ns);
	m->semmsl = lim->semmsl;
	m->semmns = lim->semmns;
	m->semopm = lim->semopm;
	m->semmni = lim->semmni;
	return m;
}

/* ---- stats ---- */

/*
 * The supervisor's log2 buckets (serve.c): bucket 0 holds durations of at most 1 ns, bucket
 * b > 0 those of 2^b .. 2^(b+1)-1 ns, the last one everything longer.
 */
static Semvisor__Histogram *histogram_msg(struct ctl_arena *a, const uint64_t *bucket,
					  uint64_t sum_ns)
{
	Semvisor__Histogram *h = ctl_xalloc(a, sizeof(*h));

	semvisor__histogram__init(h);
	h->n_count = h->n_bound_ns = NT_NBUCKET;
	h->count = ctl_xalloc(a, NT_NBUCKET * sizeof(*h->count));
	h->bound_ns = ctl_xalloc(a, NT_NBUCKET * sizeof(*h->bound_ns));
	for (int b = 0; b < NT_NBUCKET; b++) {
		h->count[b] = bucket[b];
		h->total += bucket[b];
		if (b == 0)
			h->bound_ns[b] = 1;
		else if (b == NT_NBUCKET - 1)
			h->bound_ns[b] = UINT64_MAX;
		else
			h->bound_ns[b] = (UINT64_C(1) << (b + 1)) - 1;
	}
	h->sum_ns = sum_ns;
	return h;
}

static Semvisor__LockStats *lock_msg(struct ctl_ctx *cx, struct ctl_arena *a)
{
	Semvisor__LockStats *m = ctl_xalloc(a, sizeof(*m));
	const struct sv_lock_stats *b = &cx->lock_base;
	struct sv_lock_stats now;

	semvisor__lock_stats__init(m);
	sv_lock_stats_read(&now);
	m->kind = ctl_xstrdup(a, now.name);
	/* every counter only grows; what was there at the last Reset is taken off */
	m->acquired = now.acquired - b->acquired;
	m->fast = now.fast - b->fast;
	m->spun = now.spun - b->spun;
	m->slept = now.slept - b->slept;
	m->sleeps = now.sleeps - b->sleeps;
	m->wakes = now.wakes - b->wakes;
	m->unqueues = now.unqueues - b->unqueues;
	m->head_quits = now.head_quits - b->head_quits;
	m->trylock_failed = now.trylock_failed - b->trylock_failed;
	m->spin_ns = now.spin_ns - b->spin_ns;
	m->threads = now.threads;
	return m;
}

static int sum_set_locks(const struct sv_set_info *si, void *arg)
{
	Semvisor__Namespace *m = arg;

	m->set_lock_spun += si->lock_spun;
	m->set_lock_slept += si->lock_slept;
	return 0;
}

static void namespaces_into(struct ctl_ctx *cx, struct ctl_arena *a, Semvisor__Stats *s)
{
	struct ns_list l;

	ns_list_get(cx, &l);
	s->n_namespaces = (size_t)l.n;
	s->namespaces = l.n ? ctl_xalloc(a, (size_t)l.n * sizeof(*s->namespaces)) : NULL;
	for (int i = 0; i < l.n; i++) {
		Semvisor__Namespace *m = ctl_xalloc(a, sizeof(*m));
		struct sv_ns_info info;

		semvisor__namespace__init(m);
		sv_ns_info(l.v[i].ns, &info);
		m->name = ctl_xstrdup(a, l.v[i].name);
		m->pod_namespace = ctl_xstrdup(a, l.v[i].pod.ns);
		m->pod = ctl_xstrdup(a, l.v[i].pod.pod);
		m->limits = limits_msg(a, l.v[i].name, &info.limits);
		m->nsets = (uint32_t)info.nsets;
		m->nsems = (uint32_t)info.nsems;
		m->nwaiters = (uint32_t)info.nwaiters;
		sv_ns_for_each_set(l.v[i].ns, sum_set_locks, m);
		s->namespaces[i] = m;
	}
	ns_list_put(&l);
}

struct clients_ctx {
	struct ctl_arena *a;
	struct ptrvec pv;
};

/* Under the supervisor's lock: copy only. */
static int client_collect(const struct nt_client_info *ci, void *arg)
{
	struct clients_ctx *cc = arg;
	Semvisor__Client *m = ctl_xalloc(cc->a, sizeof(*m));

	semvisor__client__init(m);
	m->name = ctl_xstrdup(cc->a, ci->name);
	m->ns = ctl_xstrdup(cc->a, ci->ns);
	m->ns_traps = ci->ns_traps;
	m->calls = ci->calls;
	m->parked = ci->parked > 0 ? (uint32_t)ci->parked : 0;
	m->pod_namespace = ctl_xstrdup(cc->a, ci->pod.ns);
	m->pod = ctl_xstrdup(cc->a, ci->pod.pod);
	m->container = ctl_xstrdup(cc->a, ci->pod.container);
	pv_push(&cc->pv, m);
	return 0;
}

static Semvisor__Client **clients_list(struct ctl_ctx *cx, struct ctl_arena *a, size_t *n)
{
	struct clients_ctx cc = { .a = a };

	nt_super_for_each_client(cx->super, client_collect, &cc);
	return pv_finish(&cc.pv, a, n);
}

Semvisor__Stats *ctl_stats_build(struct ctl_ctx *cx, struct ctl_arena *a, bool with_clients)
{
	Semvisor__Stats *s = ctl_xalloc(a, sizeof(*s));
	Semvisor__CallCounts *c = ctl_xalloc(a, sizeof(*c));
	struct ptrvec pv = { 0 };
	struct nt_stats st;
	struct timespec wall;
	int64_t now = ctl_now_ns();

	semvisor__stats__init(s);
	semvisor__call_counts__init(c);
	nt_super_collect_fast(cx->super);
	nt_super_stats(cx->super, &st);
	clock_gettime(CLOCK_REALTIME, &wall);
	s->mono_ns = (uint64_t)now;
	s->unix_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
	s->server_pid = (uint32_t)getpid();
	s->uptime_ms = (uint64_t)(now - cx->started_ns) / 1000000;
	s->since_reset_ms = (uint64_t)(now - nt_super_counting_since(cx->super)) / 1000000;

	c->semget = st.calls[NT_SEMGET];
	c->semop = st.calls[NT_SEMOP];
	c->semtimedop = st.calls[NT_SEMTIMEDOP];
	c->semctl = st.calls[NT_SEMCTL];
	c->ns_changes = st.calls[NT_NS_CHANGE];
	c->other = st.calls[NT_OTHER];
	s->calls = c;

	for (int i = 0; i <= NT_NCMDS; i++) {
		Semvisor__CommandCount *m;
		char name[32];

		if (!st.semctl_cmds[i])
			continue;
		m = ctl_xalloc(a, sizeof(*m));
		semvisor__command_count__init(m);
		/* the slot past the last command counts the commands the engine does not know */
		m->cmd = i < NT_NCMDS ? i : -1;
		if (i == NT_NCMDS)
			snprintf(name, sizeof(name), "unknown");
		else if (sv_semctl_cmd_name(i))
			snprintf(name, sizeof(name), "%s", sv_semctl_cmd_name(i));
		else
			snprintf(name, sizeof(name), "cmd%d", i);
		m->name = ctl_xstrdup(a, name);
		m->count = st.semctl_cmds[i];
		pv_push(&pv, m);
	}
	s->semctl_commands = pv_finish(&pv, a, &s->n_semctl_commands);

	for (int e = 0; e < NT_NERRNO; e++) {
		Semvisor__ErrnoCount *m;
		const char *en;
		char name[32];

		if (!st.errors[e])
			continue;
		m = ctl_xalloc(a, sizeof(*m));
		semvisor__errno_count__init(m);
		en = strerrorname_np(e);
		if (en)
			snprintf(name, sizeof(name), "%s", en);
		else
			snprintf(name, sizeof(name), "E%d", e);
		m->code = (uint32_t)e;
		m->name = ctl_xstrdup(a, name);
		m->count = st.errors[e];
		pv_push(&pv, m);
	}
	s->errors = pv_finish(&pv, a, &s->n_errors);

	s->parked = st.parked;
	s->woken = st.woken;
	s->timeouts = st.timeouts;
	s->interrupted = st.interrupted;
	s->rolled_back = st.rolled_back;
	s->kept = st.kept;
	s->stale = st.stale;
	s->service = histogram_msg(a, st.service_ns, st.service_ns_sum);
	s->wait = histogram_msg(a, st.wait_ns, st.wait_ns_sum);
	s->listeners = (uint32_t)nt_super_nlisteners(cx->super);
	s->listeners_added = st.listeners_added;
	s->listeners_gone = st.listeners_gone;
	s->processes_exited = st.processes_exited;
	s->namespaces_ended = st.namespaces_ended;
	s->budget_refused = st.budget_refused;
	s->budget_refused_sems = st.budget_refused_kind[SV_BUDGET_SEMS];
	s->budget_refused_sets = st.budget_refused_kind[SV_BUDGET_SETS];
	s->budget_refused_undos = st.budget_refused_kind[SV_BUDGET_UNDOS];
	s->budget_refused_waiters = st.budget_refused_kind[SV_BUDGET_WAITERS];
	s->budget_refused_namespaces = st.budget_refused_kind[SV_BUDGET_NAMESPACES];
	s->bulk_calls = st.bulk_calls;
	s->fast_ops = st.fast_ops;
	s->busy_probes = st.busy_probes;
	s->server_version = (char *)SEMVISOR_VERSION;
	s->lock = lock_msg(cx, a);
	namespaces_into(cx, a, s);
	if (with_clients)
		s->clients = clients_list(cx, a, &s->n_clients);
	return s;
}

/* ---- sets ---- */

static Semvisor__SetInfo *set_msg(struct ctl_arena *a, const struct ns_ref *ns,
				  const struct sv_set_info *si)
{
	Semvisor__SetInfo *m = ctl_xalloc(a, sizeof(*m));

	semvisor__set_info__init(m);
	m->ns = ctl_xstrdup(a, ns->name);
	m->pod_namespace = ctl_xstrdup(a, ns->pod.ns);
	m->pod = ctl_xstrdup(a, ns->pod.pod);
	m->id = si->id;
	m->key = si->key;
	m->uid = si->uid;
	m->gid = si->gid;
	m->cuid = si->cuid;
	m->cgid = si->cgid;
	m->mode = si->mode;
	m->nsems = si->nsems > 0 ? (uint32_t)si->nsems : 0;
	m->otime = si->otime;
	m->ctime = si->ctime;
	m->lock_spun = si->lock_spun;
	m->lock_slept = si->lock_slept;
	m->fast_ops = si->fast_ops;
	return m;
}

struct sets_ctx {
	struct ctl_arena *a;
	const struct ctl_ctx *cx;
	const struct ctl_peer *peer;
	const struct ns_ref *ns;
	struct ptrvec pv;
};

/* Under RCU: no call back into the engine. */
static int set_collect(const struct sv_set_info *si, void *arg)
{
	struct sets_ctx *sc = arg;
	Semvisor__SetInfo *m = set_msg(sc->a, sc->ns, si);

	/* how busy a set is tells about its use beyond what SEM_STAT_ANY shows */
	if (!ctl_may_read(sc->cx, sc->peer, si)) {
		m->lock_spun = m->lock_slept = 0;
		m->withheld = true;
	}
	pv_push(&sc->pv, m);
	return 0;
}

static int set_by_id(const void *x, const void *y)
{
	const Semvisor__SetInfo *a = *(Semvisor__SetInfo *const *)x;
	const Semvisor__SetInfo *b = *(Semvisor__SetInfo *const *)y;

	return (a->id > b->id) - (a->id < b->id);
}

static void answer_list_sets(struct ctl_ctx *cx, const struct ctl_peer *peer,
			     const Semvisor__ListSetsRequest *rq, Semvisor__Reply *reply,
			     struct ctl_arena *a)
{
	Semvisor__SetList *m = ctl_xalloc(a, sizeof(*m));
	struct sets_ctx sc = { .a = a, .cx = cx, .peer = peer };
	struct ns_list l;
	bool found = !*rq->ns;

	semvisor__set_list__init(m);
	ns_list_get(cx, &l);
	for (int i = 0; i < l.n; i++) {
		size_t from = sc.pv.n;

		if (*rq->ns && !ns_is(&l.v[i], rq->ns))
			continue;
		found = true;
		sc.ns = &l.v[i];
		sv_ns_for_each_set(l.v[i].ns, set_collect, &sc);
		/* hash-table order means nothing to a reader: by id within each namespace */
		qsort(sc.pv.v + from, sc.pv.n - from, sizeof(void *), set_by_id);
	}
	ns_list_put(&l);
	m->sets = pv_finish(&sc.pv, a, &m->n_sets);
	if (!found) {
		char why[128];

		snprintf(why, sizeof(why), "no namespace named '%s'", rq->ns);
		ctl_reply_error(reply, a, SEMVISOR__STATUS__NO_SUCH_NAMESPACE, why);
		return;
	}
	reply->body_case = SEMVISOR__REPLY__BODY_SETS;
	reply->sets = m;
}

/*
 * The namespace that holds set id: the one named, or (ns "") the only one that has such a set.
 * Its index in l, or -1 with the reply made an error.
 */
static int resolve_set(const struct ns_list *l, const char *ns, int id, Semvisor__Reply *reply,
		       struct ctl_arena *a)
{
	struct sv_set_info info;
	char why[256];
	int found = -1, nfound = 0;
	size_t off = 0;

	if (*ns) {
		found = ns_find(l, ns);
		if (found < 0) {
			snprintf(why, sizeof(why), "no namespace named '%s'", ns);
			ctl_reply_error(reply, a, SEMVISOR__STATUS__NO_SUCH_NAMESPACE, why);
			return -1;
		}
		if (sv_ns_show_set(l->v[found].ns, id, &info, NULL, 0) < 0) {
			snprintf(why, sizeof(why), "no set with id %d in namespace '%s'", id, ns);
			ctl_reply_error(reply, a, SEMVISOR__STATUS__NO_SUCH_SET, why);
			return -1;
		}
		return found;
	}
	off = (size_t)snprintf(why, sizeof(why), "set id %d exists in several namespaces (", id);
	for (int i = 0; i < l->n; i++) {
		if (sv_ns_show_set(l->v[i].ns, id, &info, NULL, 0) < 0)
			continue;
		if (off < sizeof(why))
			off += (size_t)snprintf(why + off, sizeof(why) - off, "%s%s",
						nfound ? ", " : "", l->v[i].name);
		found = i;
		nfound++;
	}
	if (nfound == 1)
		return found;
	if (nfound == 0) {
		snprintf(why, sizeof(why), "no set with id %d", id);
		ctl_reply_error(reply, a, SEMVISOR__STATUS__NO_SUCH_SET, why);
	} else {
		if (off < sizeof(why))
			snprintf(why + off, sizeof(why) - off, "): name one");
		ctl_reply_error(reply, a, SEMVISOR__STATUS__AMBIGUOUS, why);
	}
	return -1;
}

static void answer_show_set(struct ctl_ctx *cx, const struct ctl_peer *peer,
			    const Semvisor__ShowSetRequest *rq, Semvisor__Reply *reply,
			    struct ctl_arena *a)
{
	struct sv_sem_info *sems = NULL;
	struct sv_set_info info;
	Semvisor__SetDetail *m;
	struct ns_list l;
	int i, n = 0, cap = 0;

	ns_list_get(cx, &l);
	i = resolve_set(&l, rq->ns, rq->id, reply, a);
	if (i < 0)
		goto out;
	/* nsems is fixed for a set's life, but the id may be reused in between: ask until it fits */
	for (;;) {
		n = sv_ns_show_set(l.v[i].ns, rq->id, &info, sems, cap);
		if (n <= cap)
			break;
		free(sems);
		cap = n;
		sems = xmalloc_or_die((size_t)cap * sizeof(*sems));
	}
	if (n < 0) {
		char why[128];

		snprintf(why, sizeof(why), "set %d was removed", rq->id);
		ctl_reply_error(reply, a, SEMVISOR__STATUS__NO_SUCH_SET, why);
		goto out;
	}
	/* judged on the same snapshot as the values: an IPC_SET in between cannot slip through */
	if (!ctl_may_read(cx, peer, &info)) {
		char why[256];

		snprintf(
		    why, sizeof(why),
		    "set %d of namespace '%s' is not readable by uid %u (owner uid %u, gid %u, "
		    "perms %03o): semctl would refuse it its values too",
		    rq->id, l.v[i].name, (unsigned)peer->uid, (unsigned)info.uid,
		    (unsigned)info.gid, (unsigned)(info.mode & 0777));
		ctl_reply_error(reply, a, SEMVISOR__STATUS__PERMISSION_DENIED, why);
		goto out;
	}
	m = ctl_xalloc(a, sizeof(*m));
	semvisor__set_detail__init(m);
	m->set = set_msg(a, &l.v[i], &info);
	m->n_sems = (size_t)n;
	m->sems = n ? ctl_xalloc(a, (size_t)n * sizeof(*m->sems)) : NULL;
	for (int k = 0; k < n; k++) {
		Semvisor__Semaphore *sm = ctl_xalloc(a, sizeof(*sm));

		semvisor__semaphore__init(sm);
		sm->num = (uint32_t)k;
		sm->value = sems[k].semval;
		sm->pid = sems[k].sempid;
		sm->ncnt = sems[k].ncnt > 0 ? (uint32_t)sems[k].ncnt : 0;
		sm->zcnt = sems[k].zcnt > 0 ? (uint32_t)sems[k].zcnt : 0;
		sm->nops = sems[k].nops;
		sm->nwaits = sems[k].nwaits;
		sm->lock_spun = sems[k].lock_spun;
		sm->lock_slept = sems[k].lock_slept;
		m->sems[k] = sm;
	}
	reply->body_case = SEMVISOR__REPLY__BODY_SET;
	reply->set = m;
out:
	free(sems);
	ns_list_put(&l);
}

/* ---- administration ---- */

static void answer_remove_set(struct ctl_ctx *cx, const struct ctl_peer *peer,
			      const Semvisor__RemoveSetRequest *rq, Semvisor__Reply *reply,
			      struct ctl_arena *a)
{
	char name[CTL_NS_NAME_MAX + 1], why[160];
	struct ns_list l;
	int i, rc;

	ns_list_get(cx, &l);
	i = resolve_set(&l, rq->ns, rq->id, reply, a);
	if (i >= 0)
		snprintf(name, sizeof(name), "%s", l.v[i].name);
	ns_list_put(&l);
	if (i < 0)
		return;
	rc = nt_super_remove_set(cx->super, name, rq->id);
	logf_(cx, "uid %u pid %d removed set %d of namespace %s: %s", (unsigned)peer->uid,
	      (int)peer->pid, rq->id, name, rc ? strerror(-rc) : "done");
	if (rc == -ENOENT) {
		snprintf(why, sizeof(why), "no namespace named '%s'", name);
		ctl_reply_error(reply, a, SEMVISOR__STATUS__NO_SUCH_NAMESPACE, why);
	} else if (rc) {
		/* removed by someone else since we looked */
		snprintf(why, sizeof(why), "no set with id %d in namespace '%s'", rq->id, name);
		ctl_reply_error(reply, a, SEMVISOR__STATUS__NO_SUCH_SET, why);
	}
}

static void answer_set_limits(struct ctl_ctx *cx, const struct ctl_peer *peer,
			      const Semvisor__SetLimitsRequest *rq, Semvisor__Reply *reply,
			      struct ctl_arena *a)
{
	struct sv_limits lim = {
		.semmsl = rq->semmsl,
		.semmns = rq->semmns,
		.semopm = rq->semopm,
		.semmni = rq->semmni,
	};
	char why[160];
	int rc;

	/* ctl_request_decode() checked the ranges, so nothing is half applied below */
	rc = nt_super_set_limits(cx->super, *rq->ns ? rq->ns : NULL, &lim);
	logf_(cx, "uid %u pid %d set limits %d,%d,%d,%d for %s: %s", (unsigned)peer->uid,
	      (int)peer->pid, lim.semmsl, lim.semmns, lim.semopm, lim.semmni,
	      *rq->ns ? rq->ns : "every namespace", rc ? strerror(-rc) : "done");
	if (rc == -ENOENT) {
		snprintf(why, sizeof(why), "no namespace named '%s'", rq->ns);
		ctl_reply_error(reply, a, SEMVISOR__STATUS__NO_SUCH_NAMESPACE, why);
		return;
	}
	if (rc) {
		snprintf(why, sizeof(why), "limits %d,%d,%d,%d refused", lim.semmsl, lim.semmns,
			 lim.semopm, lim.semmni);
		ctl_reply_error(reply, a, SEMVISOR__STATUS__LIMIT_OUT_OF_RANGE, why);
		return;
	}
	if (*rq->ns) {
		struct sv_ns *ns = nt_super_find_ns(cx->super, rq->ns);

		if (ns) {
			sv_ns_limits(ns, &lim);
			sv_ns_put(ns);
		}
	}
	reply->body_case = SEMVISOR__REPLY__BODY_LIMITS;
	reply->limits = limits_msg(a, rq->ns, &lim);
}

static void answer_reset(struct ctl_ctx *cx, const struct ctl_peer *peer)
{
	nt_super_reset_stats(cx->super);
	sv_lock_stats_read(&cx->lock_base);
	logf_(cx, "uid %u pid %d reset the counters", (unsigned)peer->uid, (int)peer->pid);
}

void ctl_answer(struct ctl_ctx *cx, const struct ctl_peer *peer, const Semvisor__Request *req,
		Semvisor__Reply *reply, struct ctl_arena *a)
{
	reply->status = SEMVISOR__STATUS__OK;
	switch (req->body_case) {
	case SEMVISOR__REQUEST__BODY_STATS:
		reply->body_case = SEMVISOR__REPLY__BODY_STATS;
		reply->stats = ctl_stats_build(cx, a, req->stats->with_clients);
		break;
	case SEMVISOR__REQUEST__BODY_WATCH:
		reply->body_case = SEMVISOR__REPLY__BODY_STATS;
		reply->stats = ctl_stats_build(cx, a, req->watch->with_clients);
		break;
	case SEMVISOR__REQUEST__BODY_LIST_SETS:
		answer_list_sets(cx, peer, req->list_sets, reply, a);
		break;
	case SEMVISOR__REQUEST__BODY_SHOW_SET:
		answer_show_set(cx, peer, req->show_set, reply, a);
		break;
	case SEMVISOR__REQUEST__BODY_LIST_CLIENTS: {
		Semvisor__ClientList *m = ctl_xalloc(a, sizeof(*m));

		semvisor__client_list__init(m);
		m->clients = clients_list(cx, a, &m->n_clients);
		reply->body_case = SEMVISOR__REPLY__BODY_CLIENTS;
		reply->clients = m;
		break;
	}
	case SEMVISOR__REQUEST__BODY_RESET:
		answer_reset(cx, peer);
		break;
	case SEMVISOR__REQUEST__BODY_REMOVE_SET:
		answer_remove_set(cx, peer, req->remove_set, reply, a);
		break;
	case SEMVISOR__REQUEST__BODY_SET_LIMITS:
		answer_set_limits(cx, peer, req->set_limits, reply, a);
		break;
	default:
		/* ctl_request_decode() lets no other kind through */
		ctl_reply_error(reply, a, SEMVISOR__STATUS__UNKNOWN_REQUEST, NULL);
		break;
	}
}
