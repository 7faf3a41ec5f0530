/* SPDX-License-Identifier: MIT */
/*
 * The agent socket: where container runtimes (runc's linux.seccomp.listenerPath) and
 * `semvisor-run --daemon` hand over their seccomp listener, one connection per process tree.
 *
 * Each accepted connection is received on its own short-lived thread (at most AGENT_INFLIGHT at
 * once, each bounded by AGENT_TIMEOUT_MS), so a client that connects and says nothing, or says
 * something malformed, costs a thread for a few seconds and never stalls the others. What a
 * client may ask for in its metadata:
 *  - "ns-traps": its filter traps unshare and setns (filter.h), so the namespaces of its
 *    threads may be kept between calls. Honoured from anyone: nobody can check what a
 *    filter traps, and a false claim costs the claimant correctness, never anyone privilege
 *    (ident.h: credentials are read on every call, capabilities with a fresh user namespace);
 *  - "ns=NAME": serve it from a named namespace shared with other clients naming it.
 *    Honoured from root only (SO_PEERCRED): from anyone else it could join another tenant's
 *    semaphores.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "handoff/xfer.h"

#define AGENT_INFLIGHT	 64
#define AGENT_TIMEOUT_MS 5000

static atomic_int inflight;

struct conn {
	struct daemon *d;
	int fd;
	struct ucred peer;
};

/* Find "word" or "word=value" in space/comma separated metadata. */
static bool meta_get(const char *meta, const char *word, char *value, size_t vlen)
{
	size_t wl = strlen(word);
	const char *p = meta;

	while (*p) {
		size_t len = strcspn(p, " ,;");

		if (len >= wl && !strncmp(p, word, wl) && (len == wl || p[wl] == '=')) {
			if (value) {
				size_t vl = len > wl ? len - wl - 1 : 0;

				if (vl >= vlen)
					return false;
				memcpy(value, p + wl + 1, vl);
				value[vl] = '\0';
			}
			return true;
		}
		p += len;
		p += strspn(p, " ,;");
	}
	return false;
}

static void *receive(void *arg)
{
	struct conn *c = arg;
	struct daemon *d = c->d;
	struct ho_info info;
	struct nt_listener_opts lo = { 0 };
	char err[256], name[160], nsname[64];
	int listener, rc;
	char ok = 1;

	rc = ho_recv(c->fd, &listener, &info, AGENT_TIMEOUT_MS, err, sizeof(err));
	if (rc) {
		dlog(d, "agent: dropped a connection from pid %d (uid %d): %s", (int)c->peer.pid,
		     (int)c->peer.uid, err);
		goto out;
	}
	if (info.id[0])
		snprintf(name, sizeof(name), "%s (pid %d)", info.id, (int)info.pid);
	else
		snprintf(name, sizeof(name), "pid %d", (int)info.pid);
	lo.name = name;
	lo.ns_traps = meta_get(info.metadata, "ns-traps", NULL, 0);
	if (c->peer.uid == 0) {
		if (meta_get(info.metadata, "ns", nsname, sizeof(nsname)) && nsname[0])
			lo.ns_name = nsname;
	} else if (meta_get(info.metadata, "ns", NULL, 0)) {
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
	rc = nt_super_add_listener(d->super, listener, &lo);
	if (rc) {
		dlog(d, "agent: %s: cannot serve it: %s", name, strerror(-rc));
		goto out;
	}
	dlog(d, "agent: serving %s%s%s%s", name, lo.ns_name ? " in namespace " : "",
	     lo.ns_name ? lo.ns_name : "", lo.ns_traps ? " (namespace changes trapped)" : "");
	/* runc does not wait for this; semvisor-run --daemon does, before it execs */
	send(c->fd, &ok, 1, MSG_NOSIGNAL);
out:
	close(c->fd);
	free(c);
	if (atomic_fetch_sub(&inflight, 1) == AGENT_INFLIGHT)
		agent_resume(d); /* the socket was left alone while we were full */
	return NULL;
}

bool agent_accept(struct daemon *d, int lfd)
{
	for (;;) {
		socklen_t len = sizeof(struct ucred);
		struct conn *c;
		pthread_t t;
		int fd;

		/*
		 * Full: leave further connections in the backlog rather than accept and drop
		 * them, so a burst of silent clients delays the others instead of shutting them
		 * out; each silent one costs at most AGENT_TIMEOUT_MS.
		 */
		if (atomic_fetch_add(&inflight, 1) >= AGENT_INFLIGHT) {
			if (atomic_fetch_sub(&inflight, 1) > AGENT_INFLIGHT)
				return false;
			continue; /* a slot freed between the two */
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			atomic_fetch_sub(&inflight, 1);
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				dlog(d, "agent: accept: %s", strerror(errno));
			return true;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			atomic_fetch_sub(&inflight, 1);
			close(fd);
			continue;
		}
		c->d = d;
		c->fd = fd;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->peer, &len)) {
			c->peer.uid = (uid_t)-1;
			c->peer.pid = 0;
		}
		if (pthread_create(&t, NULL, receive, c)) {
			atomic_fetch_sub(&inflight, 1);
			close(fd);
			free(c);
			continue;
		}
		pthread_detach(t);
	}
}
