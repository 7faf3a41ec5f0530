/* SPDX-License-Identifier: MIT */
/*
 * The agent socket: where container runtimes (runc's linux.seccomp.listenerPath) and
 * `semvisor-run --daemon` hand over their seccomp listener, one connection per process tree.
 *
 * Each accepted connection is received on its own short-lived thread, bounded by
 * AGENT_TIMEOUT_MS, so a client that says something malformed costs a thread for a moment and
 * never stalls the others. Connections are always accepted at once, never left in the backlog
 * behind silent ones: each peer uid (SO_PEERCRED) may have AGENT_PER_UID connections being
 * received (root: any number), all non-root uids together AGENT_INFLIGHT - AGENT_ROOT_RESERVE,
 * and everyone AGENT_INFLIGHT. A connection over its uid's share makes room by dropping that
 * uid's oldest one (shutdown(), which ends its receive at once); over the common share, the
 * oldest of the uid with the most. A well-behaved client sends its message as soon as it
 * connects, so it is received long before it could become the oldest: silent connections,
 * however many, delay nobody, and cost one uid only its own silent ones. What a client may ask
 * for in its metadata (listenerMetadata, read by handoff/meta.h, which lists what else it may
 * hold):
 *  - "ns-traps": its filter traps unshare and setns (filter.h), so the namespaces of its
 *    threads may be kept between calls. Honoured from anyone: nobody can check what a
 *    filter traps, and a false claim costs the claimant correctness, never anyone privilege
 *    (ident.h: credentials are read on every call, capabilities with a fresh user namespace);
 *  - "ns=NAME": serve it from a named namespace shared with other clients naming it.
 *    Honoured from root only (SO_PEERCRED): from anyone else it could join another tenant's
 *    semaphores. A malformed or ambiguous one refuses the client (the listener is closed, so
 *    its semaphore calls fail with ENOSYS): serving it elsewhere than it asked would silently
 *    split its semaphores from those of the clients it meant to meet.
 *  - "ptrace": trace the connecting process (semvisor-run --daemon where notification cannot be
 *    had, its --backend=ptrace): its fd is no listener, and its filter will return
 *    SECCOMP_RET_TRACE. Honoured from anyone, since only the process that asks is traced
 *    (trace_peer()): asking is consent, as PTRACE_TRACEME is. It needs ptrace access to the
 *    client (CAP_SYS_PTRACE, or the client's PR_SET_PTRACER naming us).
 * A client is named for people by its Kubernetes names when the runtime's annotations carry
 * them (msg.h), its container id then kept in the log line that starts serving it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "handoff/meta.h"
#include "handoff/xfer.h"
#include "lock/xpthread.h"
#include "notify/ptrace.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

#define AGENT_INFLIGHT	   64
#define AGENT_PER_UID	   8
#define AGENT_ROOT_RESERVE 8
/* Dropped connections end within moments; until they have, their threads count here. */
#define AGENT_THREADS	 (2 * AGENT_INFLIGHT)
#define AGENT_TIMEOUT_MS 5000

struct conn {
	struct daemon *d;
	int fd;
	struct ucred peer;
	uint64_t seq; /* order of acceptance: the lowest is the oldest */
	bool dropped; /* made room for a newer one (under conns_lock) */
};

/* Connections being received, in their threads; under conns_lock. */
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn *conns[AGENT_THREADS];
static uint64_t conns_seq;

/* A free slot in conns, or -1 when every thread is taken. Caller holds conns_lock. */
static int free_slot(void)
{
	for (int i = 0; i < AGENT_THREADS; i++)
		if (!conns[i])
			return i;
	return -1;
}

/* Connections of uid being received, not dropped. Caller holds conns_lock. */
static int live_of(uid_t uid)
{
	int n = 0;

	for (int i = 0; i < AGENT_THREADS; i++)
		n += conns[i] && !conns[i]->dropped && conns[i]->peer.uid == uid;
	return n;
}

/* The non-root uid with the most connections being received. Caller holds conns_lock. */
static uid_t greediest(void)
{
	uid_t greedy = 0;
	int most = 0;

	for (int i = 0; i < AGENT_THREADS; i++) {
		struct conn *c = conns[i];
		int n;

		if (c && !c->dropped && c->peer.uid != 0 && (n = live_of(c->peer.uid)) > most) {
			most = n;
			greedy = c->peer.uid;
		}
	}
	return greedy;
}

/* Make room for a connection of uid, dropping another if a share is full. Caller holds
   conns_lock, and has found a free slot. */
static void make_room(uid_t uid)
{
	struct conn *victim = NULL;
	int live = 0, nonroot = 0;
	uid_t from;

	for (int i = 0; i < AGENT_THREADS; i++) {
		if (conns[i] && !conns[i]->dropped) {
			live++;
			nonroot += conns[i]->peer.uid != 0;
		}
	}
	if (uid != 0 && live_of(uid) >= AGENT_PER_UID)
		from = uid; /* over its own share: its oldest goes */
	else if (live < AGENT_INFLIGHT &&
		 (uid == 0 || nonroot < AGENT_INFLIGHT - AGENT_ROOT_RESERVE))
		return;
	else
		/* the greediest uid's oldest; if all are root's, one of its own uid, if any */
		from = nonroot ? greediest() : uid;
	for (int i = 0; i < AGENT_THREADS; i++) {
		struct conn *c = conns[i];

		if (c && !c->dropped && c->peer.uid == from && (!victim || c->seq < victim->seq))
			victim = c;
	}
	if (victim) {
		victim->dropped = true;
		shutdown(victim->fd, SHUT_RDWR); /* its receive ends now */
	}
}

static void conn_end(struct conn *c)
{
	bool was_full;

	xlock(&conns_lock);
	was_full = free_slot() < 0;
	for (int i = 0; i < AGENT_THREADS; i++)
		if (conns[i] == c)
			conns[i] = NULL;
	xunlock(&conns_lock);
	close(c->fd);
	if (was_full)
		agent_resume(c->d); /* the socket was left alone while every thread was taken */
	free(c);
}

/*
 * Seize the process that connected (c), which asked for it. Its number (SO_PEERCRED) is
 * checked against its pidfd (SO_PEERPIDFD, both taken as it connected) once it is seized, so
 * a process that has since died and whose number went to another never brings that other
 * under our trace. The listener's fd, with lo's transport set; or -errno with a sentence.
 */
static int trace_peer(const struct conn *c, struct nt_listener_opts *lo, char *err, size_t errlen)
{
	struct pt_tracer *t;
	socklen_t len = sizeof(int);
	int pidfd, fd;

	if (c->peer.pid <= 0) {
		snprintf(err, errlen, "it is in a pid namespace we do not see into");
		return -ESRCH;
	}
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len)) {
		fd = -errno;
		snprintf(err, errlen, "no pidfd for it (SO_PEERPIDFD, Linux 6.5): %s",
			 strerror(-fd));
		return fd;
	}
	fd = pt_tracer_start(c->peer.pid, pidfd, &t, err, errlen);
	close(pidfd);
	if (fd >= 0) {
		lo->tp = &nt_ptrace_transport;
		lo->tp_ctx = t;
	}
	return fd;
}

static void *receive(void *arg)
{
	struct conn *c = arg;
	struct daemon *d = c->d;
	struct ho_info info;
	struct nt_listener_opts lo = { 0 };
	struct nt_pod pod;
	struct ho_meta meta;
	char err[256], name[HO_CLIENT_NAME_MAX];
	int listener, rc;
	char ok = 1;

	pthread_setname_np(pthread_self(), "sv-agent");
	rc = ho_recv(c->fd, &listener, &info, AGENT_TIMEOUT_MS, err, sizeof(err));
	if (rc) {
		bool dropped;

		xlock(&conns_lock);
		dropped = c->dropped;
		xunlock(&conns_lock);
		dlog(d, "agent: dropped a connection from pid %d (uid %d): %s", (int)c->peer.pid,
		     (int)c->peer.uid,
		     dropped ? "it sent nothing while newer ones of its uid came" : err);
		goto out;
	}
	ho_client_name(&info, name, sizeof(name));
	if (info.name_note[0])
		dlog(d, "agent: %s: %s", name, info.name_note);
	ho_meta_parse(info.metadata, &meta);
	if (meta.note[0])
		dlog(d, "agent: %s: listenerMetadata: %s", name, meta.note);
	lo.name = name;
	snprintf(pod.ns, sizeof(pod.ns), "%s", info.pod_ns);
	snprintf(pod.pod, sizeof(pod.pod), "%s", info.pod);
	snprintf(pod.container, sizeof(pod.container), "%s", info.container);
	lo.pod = &pod;
	lo.ns_traps = meta.ns_traps;
	if (c->peer.uid == 0 && meta.ns_bad) {
		dlog(d, "agent: %s refused: its ns= entry is malformed", name);
		close(listener);
		goto out;
	} else if (c->peer.uid == 0 && meta.ns[0]) {
		lo.ns_name = meta.ns;
	} else if (meta.ns_given) {
		dlog(d, "agent: %s: ns= from uid %d ignored (only root may choose a namespace)",
		     name, (int)c->peer.uid);
	}
	if (!lo.ns_name && d->cfg.ns_policy == CFG_NS_SHARED)
		lo.ns_name = "shared";

	if (nt_super_nlisteners(d->super) >= d->cfg.max_clients) {
		dlog(d, "agent: %s refused: %d clients already (max_clients)", name,
		     d->cfg.max_clients);
		close(listener);
		goto out;
	}
	if (meta.ptrace) {
		/* its fd is its own pidfd, say: nothing of ours */
		close(listener);
		listener = trace_peer(c, &lo, err, sizeof(err));
		if (listener < 0) {
			dlog(d, "agent: %s (uid %d) refused: %s", name, (int)c->peer.uid, err);
			goto out;
		}
		/*
		 * Not in the fd store: a new daemon could not trace it on, and it dies with
		 * this one (PTRACE_O_EXITKILL), rather than sleep in a call nobody answers.
		 */
		rc = nt_super_add_listener(d->super, listener, &lo);
		if (rc) {
			dlog(d, "agent: %s: cannot serve it: %s", name, strerror(-rc));
			goto out;
		}
		dlog(d, "agent: serving %s through ptrace%s%s", name,
		     lo.ns_name ? " in namespace " : "", lo.ns_name ? lo.ns_name : "");
		send(c->fd, &ok, 1, MSG_NOSIGNAL);
		goto out;
	}
	/* its handover cut short by a crash: the store gave it back to us already */
	if (nt_super_has_listener(d->super, listener)) {
		dlog(d, "agent: %s: handed over again; served already", name);
		close(listener);
		send(c->fd, &ok, 1, MSG_NOSIGNAL);
		goto out;
	}
	/* in the fd store before it is served: from then on no stop of ours can cut it off */
	lo.key = atomic_fetch_add(&d->next_key, 1) + 1;
	fdstore_listener(d, listener, &lo);
	rc = nt_super_add_listener(d->super, listener, &lo);
	if (rc) {
		dlog(d, "agent: %s: cannot serve it: %s", name, strerror(-rc));
		fdstore_forget(d, &lo);
		goto out;
	}
	/* the id too when the name is Kubernetes': the log is where a runtime's id is looked up */
	if (info.id[0] && strncmp(name, info.id, strlen(info.id)))
		dlog(d, "agent: serving %s (container %s, pid %d)%s%s%s", name, info.id,
		     (int)info.pid, lo.ns_name ? " in namespace " : "",
		     lo.ns_name ? lo.ns_name : "",
		     lo.ns_traps ? " (namespace changes trapped)" : "");
	else
		dlog(d, "agent: serving %s%s%s%s", name, lo.ns_name ? " in namespace " : "",
		     lo.ns_name ? lo.ns_name : "",
		     lo.ns_traps ? " (namespace changes trapped)" : "");
	/* runc does not wait for this; semvisor-run --daemon does, before it execs */
	send(c->fd, &ok, 1, MSG_NOSIGNAL);
out:
	conn_end(c);
	return NULL;
}

void agent_drain(struct daemon *d)
{
	/* each receive ends within its timeout */
	for (int waited = 0; waited < AGENT_TIMEOUT_MS + 1000; waited += 10) {
		bool busy;

		xlock(&conns_lock);
		busy = false;
		for (int i = 0; i < AGENT_THREADS; i++)
			busy |= conns[i] != NULL;
		xunlock(&conns_lock);
		if (!busy)
			return;
		usleep(10000);
	}
	dlog(d, "agent: clients still being received at the stop");
}

bool agent_accept(struct daemon *d, int lfd)
{
	for (;;) {
		socklen_t len = sizeof(struct ucred);
		struct conn *c;
		pthread_t t;
		int fd, slot;

		/*
		 * Every thread taken (dropped connections still ending): leave the backlog alone.
		 * Only this thread adds, so a slot free now is still free below.
		 */
		xlock(&conns_lock);
		slot = free_slot();
		xunlock(&conns_lock);
		if (slot < 0)
			return false;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				dlog(d, "agent: accept: %s", strerror(errno));
			return true;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->d = d;
		c->fd = fd;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->peer, &len)) {
			c->peer.uid = (uid_t)-1;
			c->peer.pid = 0;
		}
		xlock(&conns_lock);
		make_room(c->peer.uid);
		c->seq = ++conns_seq;
		conns[slot] = c;
		xunlock(&conns_lock);
		if (pthread_create(&t, NULL, receive, c)) {
			conn_end(c);
			continue;
		}
		pthread_detach(t);
	}
}
