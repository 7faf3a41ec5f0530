/* SPDX-License-Identifier: MIT */
/*
 * The namespace registry: see nsreg.h for identity and lifetime.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "notify/nsreg.h"
#include "lock/xpthread.h"

/*
 * User namespace maps kept at most (about 8 KiB each): ids are never reused, so an old entry is
 * never wrong, only memory, and a program making namespaces by the million must not make ours
 * grow without bound.
 */
#define USERNS_CACHE 64

static uint64_t key_of(const struct tgt_nsid *kid)
{
	return kid->id ? kid->id : kid->ino;
}

static struct nt_ns *ns_new(struct nsreg *r, const struct tgt_nsid *kid, const char *name, int nsfd,
			    int *err);

/*
 * The stand-in for IPC namespaces the budget refuses (nsreg.h): empty, and with no room
 * (SEMMNI and SEMMNS 0), so that semget fails with ENOSPC as natively the unshare would have.
 * No capability counts in it. Never listed: no reload changes its limits, no probe ends it.
 */
static int full_new(struct nsreg *r)
{
	struct sv_limits lim = r->limits;
	int err;

	r->full = ns_new(r, NULL, "(over max_namespaces)", -1, &err);
	if (!r->full)
		return err;
	r->full->refused = true;
	r->full->nowners = 0;
	lim.semmns = 0;
	lim.semmni = 0;
	return sv_ns_set_limits(r->full->ns, &lim);
}

int nsreg_init(struct nsreg *r, const struct tgt_features *feat, const struct sv_limits *lim,
	       struct sv_budget *budget)
{
	struct tgt_nsid kid;
	int fd;

	memset(r, 0, sizeof(*r));
	xmutex_init(&r->lock);
	CDS_INIT_LIST_HEAD(&r->namespaces);
	CDS_INIT_LIST_HEAD(&r->usernss);
	r->feat = feat;
	if (lim)
		r->limits = *lim;
	else
		sv_limits_host(&r->limits);
	r->sync_limits = !lim;
	if (budget) {
		sv_budget_get(budget);
		r->budget = budget;
	}
	r->my_ipc_fd = open("/proc/self/ns/ipc", O_RDONLY | O_CLOEXEC);
	if (r->my_ipc_fd < 0 || tgt_ns_ident(r->my_ipc_fd, feat->ns_id, &kid))
		return -errno;
	r->my_ipc_key = key_of(&kid);
	r->my_nowners = tgt_userns_chain(r->my_ipc_fd, feat->ns_id, r->my_owners, TGT_MAX_USERNS);
	if (r->my_nowners < 0)
		r->my_nowners = 0;
	fd = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (tgt_ns_ident(fd, feat->ns_id, &kid) == 0)
		r->my_user_key = key_of(&kid);
	close(fd);
	return budget ? full_new(r) : 0;
}

/* ---- IPC namespaces ---- */

void nt_ns_get(struct nt_ns *n)
{
	atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

void nt_ns_put(struct nt_ns *n)
{
	if (atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) != 1)
		return;
	if (n->pin >= 0)
		close(n->pin);
	if (n->sem_fd >= 0)
		close(n->sem_fd);
	if (n->next_id_fd >= 0)
		close(n->next_id_fd);
	if (n->ns)
		sv_ns_put(n->ns);
	/* its memory is gone now, not at its end: a record may hold an ended one a while */
	if (n->budget) {
		sv_budget_credit_ns(n->budget, n->budget_uid);
		sv_budget_put(n->budget);
	}
	free(n);
}

/*
 * Open an IPC namespace's semaphore sysctls from inside it: setns() applies to this thread
 * only, and the files keep serving that namespace after we come back. Entering needs
 * CAP_SYS_ADMIN over the namespace; without it the namespace keeps the limits it started with.
 */
static void open_sysctls(struct nsreg *r, struct nt_ns *n, int nsfd)
{
	if (r->my_ipc_fd < 0 || setns(nsfd, CLONE_NEWIPC))
		return;
	n->sem_fd = open("/proc/sys/kernel/sem", O_RDWR | O_CLOEXEC);
	n->next_id_fd = open("/proc/sys/kernel/sem_next_id", O_RDWR | O_CLOEXEC);
	if (setns(r->my_ipc_fd, CLONE_NEWIPC))
		abort(); /* a worker left in another namespace would be wrong for good */
}

/*
 * A new namespace, not listed yet; nsfd < 0 for a named one. No lock held: it does I/O. NULL
 * with *err: -ENOMEM, or -ENOSPC when the budget refuses it (nsreg.h).
 */
static struct nt_ns *ns_new(struct nsreg *r, const struct tgt_nsid *kid, const char *name, int nsfd,
			    int *err)
{
	struct nt_ns *n = calloc(1, sizeof(*n));

	*err = -ENOMEM;
	if (!n)
		return NULL;
	n->pin = n->sem_fd = n->next_id_fd = -1;
	n->refcount = 1;
	if (name) {
		/* served as if it were ours: capabilities count where they do in ours */
		snprintf(n->name, sizeof(n->name), "%s", name);
		n->persistent = true;
		n->nowners = r->my_nowners;
		memcpy(n->owners, r->my_owners, sizeof(n->owners));
	} else {
		n->kid = *kid;
		snprintf(n->name, sizeof(n->name), "ipc:[%llu]", (unsigned long long)kid->ino);
		n->persistent = nsreg_is_own(r, kid);
		n->nowners = tgt_userns_chain(nsfd, r->feat->ns_id, n->owners, TGT_MAX_USERNS);
		if (n->nowners < 0)
			n->nowners = 0; /* no capability will count here */
	}
	/*
	 * Charged before anything costly is made, so a refused namespace costs its calls a few
	 * ioctls, not a namespace's memory: to the owner of its user namespace, as the kernel
	 * charges max_ipc_namespaces (root's when we cannot tell). Our own and named ones are
	 * the administrator's, and not charged.
	 */
	if (!n->persistent && r->budget) {
		n->budget_uid = n->nowners ? n->owners[0].owner : 0;
		if ((*err = sv_budget_charge_ns(r->budget, n->budget_uid))) {
			free(n);
			return NULL;
		}
		sv_budget_get(r->budget);
		n->budget = r->budget;
	}
	n->ns = sv_ns_new_budget(&r->limits, r->budget);
	if (!n->ns) {
		*err = -ENOMEM;
		nt_ns_put(n);
		return NULL;
	}
	sv_ns_set_jkey(n->ns, nsreg_jkey(n));
	if (name)
		return n;
	/*
	 * nsfd holds the namespace now, so a handle that does not open it tells that we may not
	 * open it (open_by_handle_at says ESTALE for EPERM too): then, as without ids, we hold
	 * it ourselves, and it ends with its last confined thread (nsreg.h).
	 */
	n->probed = r->feat->ns_id && kid->has_handle && tgt_ns_alive(kid) == 1;
	if (!n->probed && (n->pin = fcntl(nsfd, F_DUPFD_CLOEXEC, 3)) < 0) {
		*err = -ENOMEM;
		nt_ns_put(n);
		return NULL;
	}
	if (r->sync_limits) {
		open_sysctls(r, n, nsfd);
		nt_ns_sync(n);
	}
	return n;
}

/* caller holds r->lock */
static struct nt_ns *find_key(struct nsreg *r, uint64_t key)
{
	struct nt_ns *n;

	xassert_held(&r->lock);
	cds_list_for_each_entry(n, &r->namespaces, node)
		if (n->kid.ino && key_of(&n->kid) == key)
			return n;
	return NULL;
}

/*
 * List n, or take the one another worker listed first; a reference for the caller, and a
 * confined thread counted in when enter. caller holds r->lock
 */
static struct nt_ns *list_or_take(struct nsreg *r, struct nt_ns *n, struct nt_ns *found, bool enter,
				  struct nt_ns **drop)
{
	xassert_held(&r->lock);
	*drop = NULL;
	if (found) {
		nt_ns_get(found);
		found->nthreads += enter;
		*drop = n;
		return found;
	}
	nt_ns_get(n); /* the registry's */
	n->nthreads += enter;
	n->listed = true;
	cds_list_add_tail(&n->node, &r->namespaces);
	if (r->listed)
		r->listed(r->listed_ctx, n);
	return n;
}

struct nt_ns *nsreg_ipc(struct nsreg *r, int nsfd, struct nt_ns *hint)
{
	struct tgt_nsid kid;
	struct nt_ns *n, *drop;
	uint64_t key;
	int err;

	if (tgt_ns_key(nsfd, r->feat->ns_id, &key))
		return NULL;
	xlock(&r->lock);
	n = hint && hint->listed && hint->kid.ino && key_of(&hint->kid) == key ? hint
									       : find_key(r, key);
	if (n) {
		nt_ns_get(n);
		n->nthreads++;
	}
	xunlock(&r->lock);
	if (n)
		return n;
	if (tgt_ns_ident(nsfd, r->feat->ns_id, &kid))
		return NULL;
	n = ns_new(r, &kid, NULL, nsfd, &err);
	if (!n && err == -ENOSPC && r->full) {
		/* over the budget: served as a full, empty namespace (nsreg.h) */
		xlock(&r->lock);
		nt_ns_get(r->full);
		r->full->nthreads++;
		xunlock(&r->lock);
		return r->full;
	}
	if (!n)
		return NULL;
	xlock(&r->lock);
	n = list_or_take(r, n, find_key(r, key_of(&kid)), true, &drop);
	xunlock(&r->lock);
	if (drop)
		nt_ns_put(drop);
	return n;
}

uint64_t nsreg_jkey(const struct nt_ns *n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	if (n->kid.ino)
		return key_of(&n->kid) & ~(1ULL << 63);
	for (const char *c = n->name; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
	return h | 1ULL << 63;
}

bool nsreg_is_own(const struct nsreg *r, const struct tgt_nsid *kid)
{
	/* an id is compared with an id, an inode with an inode, never one with the other */
	return key_of(kid) == r->my_ipc_key && (kid->id || !r->feat->ns_id);
}

struct nt_ns *nsreg_adopt(struct nsreg *r, int nsfd, const struct nt_pod *pod)
{
	struct nt_ns *n = nsreg_ipc(r, nsfd, NULL);

	if (!n || n == r->full)
		return n;
	nsreg_label(r, n, pod);
	xlock(&r->lock);
	n->nthreads--;
	/* held by our pin only, it would end now: it ends with the supervisor instead */
	if (!n->probed)
		n->persistent = true;
	xunlock(&r->lock);
	return n;
}

/* caller holds r->lock */
static struct nt_ns *find_named(struct nsreg *r, const char *name)
{
	struct nt_ns *n;

	xassert_held(&r->lock);
	cds_list_for_each_entry(n, &r->namespaces, node)
		if (!n->kid.ino && !strcmp(n->name, name))
			return n;
	return NULL;
}

void nsreg_label(struct nsreg *r, struct nt_ns *n, const struct nt_pod *pod)
{
	xlock(&r->lock);
	if (n->kid.ino && !n->persistent && n != r->full && !n->pod.pod[0] && pod->pod[0]) {
		snprintf(n->pod.ns, sizeof(n->pod.ns), "%s", pod->ns);
		snprintf(n->pod.pod, sizeof(n->pod.pod), "%s", pod->pod);
	}
	xunlock(&r->lock);
}

/* caller holds r->lock */
static bool pod_is(const struct nt_ns *n, const char *name)
{
	size_t len = strlen(n->pod.ns);

	return n->pod.pod[0] && !strncmp(name, n->pod.ns, len) && name[len] == '/' &&
	       !strcmp(name + len + 1, n->pod.pod);
}

struct nt_ns *nsreg_named(struct nsreg *r, const char *name)
{
	struct nt_ns *n, *drop;
	int err;

	xlock(&r->lock);
	n = find_named(r, name);
	if (n)
		nt_ns_get(n);
	xunlock(&r->lock);
	if (n)
		return n;
	n = ns_new(r, NULL, name, -1, &err);
	if (!n)
		return NULL;
	xlock(&r->lock);
	n = list_or_take(r, n, find_named(r, name), false, &drop);
	xunlock(&r->lock);
	if (drop)
		nt_ns_put(drop);
	return n;
}

/*
 * Is n still alive in the kernel? One we cannot ask about we hold, so it ends with its last
 * confined thread (nsreg.h). An answer we cannot get (an unexpected error) keeps it.
 */
static bool ns_dead(struct nsreg *r, struct nt_ns *n)
{
	(void)r;
	if (!n->probed)
		return true;
	return tgt_ns_alive(&n->kid) == 0;
}

/* n is gone from the kernel: its sets go, and it leaves the list. */
static void ns_end(struct nsreg *r, struct nt_ns *n, struct sv_wakeq *wq)
{
	xlock(&r->lock);
	/* a thread that entered meanwhile proves it alive (only possible without handles) */
	if (!n->listed || n->nthreads) {
		xunlock(&r->lock);
		return;
	}
	n->listed = false;
	cds_list_del(&n->node);
	xunlock(&r->lock);
	sv_ns_shutdown(n->ns, wq);
	/* a tenant that leaves takes its memory with it, as its own kernel memory would go */
	sv_release_memory();
	if (n->pin >= 0) {
		close(n->pin); /* without ids: let the kernel's namespace go now */
		n->pin = -1;
	}
	atomic_fetch_add_explicit(&r->ended, 1, memory_order_relaxed);
	nt_ns_put(n); /* the registry's */
}

void nsreg_leave(struct nsreg *r, struct nt_ns *n, struct sv_wakeq *wq)
{
	bool last;

	xlock(&r->lock);
	last = --n->nthreads == 0 && n->listed && !n->persistent;
	xunlock(&r->lock);
	if (last && ns_dead(r, n))
		ns_end(r, n, wq);
}

void nsreg_probe(struct nsreg *r, struct sv_wakeq *wq)
{
	struct nt_ns *n, *batch[64];
	int count = 0;

	xlock(&r->lock);
	cds_list_for_each_entry(n, &r->namespaces, node) {
		if (n->persistent || n->nthreads)
			continue;
		if (count == (int)(sizeof(batch) / sizeof(batch[0])))
			break; /* the rest next time */
		nt_ns_get(n);
		batch[count++] = n;
	}
	/* probed ones go to the back, so a long list is walked in turn */
	for (int i = 0; i < count; i++) {
		cds_list_del(&batch[i]->node);
		cds_list_add_tail(&batch[i]->node, &r->namespaces);
	}
	xunlock(&r->lock);
	for (int i = 0; i < count; i++) {
		if (ns_dead(r, batch[i]))
			ns_end(r, batch[i], wq);
		nt_ns_put(batch[i]);
	}
}

void nt_ns_sync(struct nt_ns *n)
{
	struct sv_limits lim;
	char buf[128];
	ssize_t len;
	int id;

	if (n->sem_fd < 0)
		return;
	len = pread(n->sem_fd, buf, sizeof(buf) - 1, 0);
	if (len > 0) {
		buf[len] = '\0';
		if (sscanf(buf, "%d %d %d %d", &lim.semmsl, &lim.semmns, &lim.semopm,
			   &lim.semmni) == 4)
			sv_ns_set_limits(n->ns, &lim);
	}
	if (n->next_id_fd >= 0) {
		len = pread(n->next_id_fd, buf, sizeof(buf) - 1, 0);
		if (len > 0) {
			buf[len] = '\0';
			if (sscanf(buf, "%d", &id) == 1)
				sv_ns_set_next_id(n->ns, id);
		}
	}
}

void nt_ns_next_id_used(struct nt_ns *n)
{
	if (n->next_id_fd >= 0 && pwrite(n->next_id_fd, "-1\n", 3, 0) < 0) {
		/* the namespace is gone */
	}
}

/* ---- user namespaces ---- */

struct nt_userns *nsreg_userns_find(struct nsreg *r, uint64_t key)
{
	struct nt_userns *u, *found = NULL;

	if (!key || !r->feat->ns_id)
		return NULL;
	xlock(&r->lock);
	cds_list_for_each_entry(u, &r->usernss, node) {
		if (u->key == key) {
			atomic_fetch_add_explicit(&u->refcount, 1, memory_order_relaxed);
			/* the least recently used goes first when the cache is full */
			cds_list_del(&u->node);
			cds_list_add_tail(&u->node, &r->usernss);
			found = u;
			break;
		}
	}
	xunlock(&r->lock);
	return found;
}

struct nt_userns *nsreg_userns_add(struct nsreg *r, uint64_t key, const struct tgt_idmap *uid,
				   const struct tgt_idmap *gid)
{
	struct nt_userns *u = malloc(sizeof(*u)), *other, *evict = NULL;

	if (!u)
		return NULL;
	u->key = key;
	u->refcount = 1;
	u->uid = *uid;
	u->gid = *gid;
	if (!key || !r->feat->ns_id)
		return u; /* keyed by a reusable inode, or not written yet: the caller's alone */
	other = nsreg_userns_find(r, key);
	if (other) {
		free(u);
		return other;
	}
	atomic_fetch_add_explicit(&u->refcount, 1, memory_order_relaxed); /* the cache's */
	xlock(&r->lock);
	cds_list_add_tail(&u->node, &r->usernss);
	if (++r->nusernss > USERNS_CACHE) {
		evict = cds_list_first_entry(&r->usernss, struct nt_userns, node);
		cds_list_del(&evict->node);
		r->nusernss--;
	}
	xunlock(&r->lock);
	nt_userns_put(evict);
	return u;
}

void nt_userns_put(struct nt_userns *u)
{
	if (u && atomic_fetch_sub_explicit(&u->refcount, 1, memory_order_acq_rel) == 1)
		free(u);
}

/* ---- control plane ---- */

int nsreg_for_each(struct nsreg *r, int (*fn)(struct nt_ns *n, void *arg), void *arg)
{
	struct nt_ns *n;
	int ret = 0;

	xlock(&r->lock);
	cds_list_for_each_entry(n, &r->namespaces, node) {
		ret = fn(n, arg);
		if (ret)
			break;
	}
	xunlock(&r->lock);
	return ret;
}

struct nt_ns *nsreg_find(struct nsreg *r, const char *name)
{
	struct nt_ns *n, *found = NULL;

	xlock(&r->lock);
	cds_list_for_each_entry(n, &r->namespaces, node)
		if (!strcmp(n->name, name) || pod_is(n, name))
			found = n; /* the newest wins: an older one of that name is about to end */
	if (found)
		nt_ns_get(found);
	xunlock(&r->lock);
	return found;
}

void nsreg_set_limits(struct nsreg *r, const struct sv_limits *lim)
{
	struct nt_ns *n;

	xlock(&r->lock);
	r->limits = *lim;
	cds_list_for_each_entry(n, &r->namespaces, node)
		sv_ns_set_limits(n->ns, lim);
	xunlock(&r->lock);
}

void nsreg_fini(struct nsreg *r)
{
	struct nt_ns *n, *tn;
	struct nt_userns *u, *tu;

	cds_list_for_each_entry_safe(n, tn, &r->namespaces, node) {
		cds_list_del(&n->node);
		nt_ns_put(n);
	}
	cds_list_for_each_entry_safe(u, tu, &r->usernss, node) {
		cds_list_del(&u->node);
		nt_userns_put(u);
	}
	if (r->full)
		nt_ns_put(r->full);
	if (r->my_ipc_fd >= 0)
		close(r->my_ipc_fd);
	sv_budget_put(r->budget);
	xmutex_destroy(&r->lock);
}
