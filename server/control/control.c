/* SPDX-License-Identifier: MIT */
/*
 * The control socket server (control.h says what it guarantees; this says how).
 *
 * One thread, one poll() loop over: an eventfd that stops it, the listening socket, and every
 * connection. Each connection has an input buffer that holds at most one request frame's worth
 * (max_frame + header) and an output buffer of at most max_output bytes. Requests are read and
 * answered in order, one after another, but only while the replies not yet sent stay under
 * OUT_LOW: a client that sends faster than it reads stops being read (its requests wait in the
 * kernel's socket buffer) instead of making the server queue replies without bound. A Watch adds
 * a snapshot only when the previous ones are (nearly) gone, so a slow watcher misses snapshots.
 * Nothing here ever blocks: sockets are non-blocking, replies are built from the supervisor's
 * counters and the engine's RCU-side inspection calls (ctl_answer.c).
 *
 * Time limits (opts->idle_ms, CTL_IDLE_MS by default): a frame begun must be complete within
 * it, pending output must make progress within it, and a connection that is doing nothing (no
 * byte of a request in, no reply unsent, no Watch running) is closed once it has done nothing
 * for that long. So a stuck, silent or hostile peer cannot hold its connection slot (one of
 * max_conns_per_uid), or the memory behind it, for ever. A Watch is never idle: it has a
 * snapshot due, and a watcher that stops reading them is caught by the output limit.
 *
 * Who may read what is decided per request in ctl_answer.c, from the peer's credentials taken
 * here at accept(): SO_PEERCRED, and SO_PEERGROUPS for the supplementary groups.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/control.h"
#include "control/ctl_int.h"
#include "util/usock.h"

#define OUT_LOW		(64 * 1024) /* answer more requests only below this much pending */
#define IN_MIN		4096
#define BACKLOG		64
#define ACCEPT_BURST	32
#define ACCEPT_PAUSE_MS 1000 /* out of fds and no reserve left: stop accepting for a while */
#define MS		1000000LL

struct ctl_conn {
	int fd;
	struct ctl_peer peer;
	uint8_t *in;
	size_t in_len, in_cap;
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	bool eof;	       /* the peer sends no more */
	bool closing;	       /* close once the output is flushed */
	bool dead;	       /* close now */
	int64_t partial_since; /* part of a frame is here, since; 0: none */
	int64_t stall_since;   /* output pending without progress since; 0: none pending */
	int64_t active_at;     /* last accepted, read from, or sent all its replies */
	/* a Watch in progress */
	bool watching;
	bool watch_clients;
	bool watch_forever;
	uint32_t watch_left;
	uint64_t watch_id;
	int64_t watch_every, watch_next;
};

struct ctl_server {
	struct ctl_ctx cx;
	struct ctl_opts o;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct usock sock; /* bound here (else its fd is -1 and lfd came from systemd) */
	int lfd, stopfd, reserve;
	int64_t idle_ns;
	uid_t owner;
	pthread_t thread;
	struct ctl_conn **conns;
	int nconns, max_total;
	struct pollfd *pfd;
	int64_t accept_paused_until;
};

static void logf_(struct ctl_server *srv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void logf_(struct ctl_server *srv, const char *fmt, ...)
{
	va_list ap;

	if (!srv->o.log)
		return;
	va_start(ap, fmt);
	fputs("semvisor: control: ", srv->o.log);
	vfprintf(srv->o.log, fmt, ap);
	fputc('\n', srv->o.log);
	va_end(ap);
	fflush(srv->o.log);
}

static size_t pending(const struct ctl_conn *c)
{
	return c->out_len - c->out_off;
}

/* ---- output ---- */

static void conn_write(struct ctl_server *srv, struct ctl_conn *c)
{
	while (pending(c) && !c->dead) {
		ssize_t n =
		    send(c->fd, c->out + c->out_off, pending(c), MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			c->out_off += (size_t)n;
			c->stall_since = ctl_now_ns();
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return;
		} else {
			c->dead = true; /* EPIPE, ECONNRESET: nobody reads any more */
		}
	}
	if (c->dead)
		return;
	c->out_off = c->out_len = 0;
	c->stall_since = 0;
	c->active_at = ctl_now_ns();
	/* a big reply's buffer is not kept for the connection's whole life */
	if (c->out_cap > OUT_LOW) {
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	if (c->closing)
		c->dead = true;
	(void)srv;
}

/* Queue one reply frame. Drops the client if its pending output would exceed max_output. */
static void queue_reply(struct ctl_server *srv, struct ctl_conn *c, Semvisor__Reply *reply)
{
	size_t n = ctl_frame_size(&reply->base);
	size_t have = pending(c);
	Semvisor__Reply small;
	struct ctl_arena a = { 0 };

	if (c->dead)
		return;
	if (n > srv->o.max_output) {
		char why[160];

		snprintf(why, sizeof(why),
			 "the reply would take %zu bytes, over the server's limit of %zu", n,
			 srv->o.max_output);
		semvisor__reply__init(&small);
		small.version = reply->version;
		small.id = reply->id;
		ctl_reply_error(&small, &a, SEMVISOR__STATUS__REPLY_TOO_LARGE, why);
		reply = &small;
		n = ctl_frame_size(&reply->base);
	}
	if (have + n > srv->o.max_output) {
		logf_(srv, "dropping uid %u pid %d: %zu reply bytes unread", (unsigned)c->peer.uid,
		      (int)c->peer.pid, have);
		c->dead = true;
		goto out;
	}
	if (c->out_cap - c->out_len < n && c->out_off) {
		memmove(c->out, c->out + c->out_off, have);
		c->out_off = 0;
		c->out_len = have;
	}
	if (c->out_cap - c->out_len < n) {
		size_t cap = c->out_len + n;
		uint8_t *p;

		if (cap < 4096)
			cap = 4096;
		p = realloc(c->out, cap);
		if (!p) {
			c->dead = true;
			goto out;
		}
		c->out = p;
		c->out_cap = cap;
	}
	c->out_len += ctl_frame_pack(&reply->base, c->out + c->out_len);
	if (!have)
		c->stall_since = ctl_now_ns();
	/* most replies fit the socket buffer: send now rather than after another poll */
	conn_write(srv, c);
out:
	ctl_arena_free(&a);
}

/* ---- requests ---- */

static void watch_snapshot(struct ctl_server *srv, struct ctl_conn *c)
{
	Semvisor__Reply reply = SEMVISOR__REPLY__INIT;
	struct ctl_arena a = { 0 };

	reply.version = CTL_PROTO_VERSION;
	reply.id = c->watch_id;
	reply.body_case = SEMVISOR__REPLY__BODY_STATS;
	reply.stats = ctl_stats_build(&srv->cx, &a, c->watch_clients);
	queue_reply(srv, c, &reply);
	ctl_arena_free(&a);
	if (!c->watch_forever && --c->watch_left == 0)
		c->watching = false;
}

static void handle_frame(struct ctl_server *srv, struct ctl_conn *c, const uint8_t *p, size_t len)
{
	Semvisor__Reply reply = SEMVISOR__REPLY__INIT;
	Semvisor__Request *req;
	struct ctl_arena a = { 0 };
	char why[256];
	int st;

	st = ctl_request_decode(p, len, &req, why, sizeof(why));
	/* any request ends a Watch (control.h): the client has moved on */
	c->watching = false;
	if (st == SEMVISOR__STATUS__OK && ctl_request_privileged(req) && !c->peer.privileged) {
		st = SEMVISOR__STATUS__PERMISSION_DENIED;
		snprintf(why, sizeof(why), "%s is only for root and uid %u (the socket's owner)",
			 ctl_request_name(req), (unsigned)srv->owner);
		logf_(srv, "refused %s to uid %u pid %d", ctl_request_name(req),
		      (unsigned)c->peer.uid, (int)c->peer.pid);
	}
	reply.version = CTL_PROTO_VERSION;
	reply.id = req ? req->id : 0;
	if (st != SEMVISOR__STATUS__OK) {
		ctl_reply_error(&reply, &a, st, why);
		if (ctl_status_closes(st))
			c->closing = true;
	} else {
		ctl_answer(&srv->cx, &c->peer, req, &reply, &a);
	}
	queue_reply(srv, c, &reply);
	if (st == SEMVISOR__STATUS__OK && req->body_case == SEMVISOR__REQUEST__BODY_WATCH &&
	    reply.status == SEMVISOR__STATUS__OK && req->watch->count != 1) {
		/* ctl_answer() gave the first snapshot */
		c->watching = true;
		c->watch_id = req->id;
		c->watch_clients = req->watch->with_clients;
		c->watch_forever = req->watch->count == 0;
		c->watch_left = req->watch->count ? req->watch->count - 1 : 0;
		c->watch_every = (int64_t)req->watch->interval_ms * MS;
		c->watch_next = ctl_now_ns() + c->watch_every;
	}
	ctl_arena_free(&a);
	ctl_request_free(req);
}

/* Answer the whole frames that are in, as far as the output allows. */
static void conn_process(struct ctl_server *srv, struct ctl_conn *c)
{
	size_t plen, whole;
	int r;

	while (!c->dead && !c->closing && pending(c) < OUT_LOW) {
		r = ctl_frame_peek(c->in, c->in_len, srv->o.max_frame, &plen);
		if (r < 0) {
			Semvisor__Reply reply = SEMVISOR__REPLY__INIT;
			struct ctl_arena a = { 0 };
			char why[128];

			/* no way to find the next frame: say why, then hang up */
			snprintf(why, sizeof(why), "a frame of %zu bytes is over the limit of %zu",
				 plen, srv->o.max_frame);
			reply.version = CTL_PROTO_VERSION;
			ctl_reply_error(&reply, &a, SEMVISOR__STATUS__FRAME_TOO_LARGE, why);
			c->closing = true;
			c->watching = false;
			queue_reply(srv, c, &reply);
			ctl_arena_free(&a);
			return;
		}
		if (r == 0) {
			/* make room for the whole frame now that its length is known */
			whole = CTL_FRAME_HEADER + plen;
			if (c->in_len >= CTL_FRAME_HEADER && whole > c->in_cap) {
				uint8_t *p = realloc(c->in, whole);

				if (!p) {
					c->dead = true;
					return;
				}
				c->in = p;
				c->in_cap = whole;
			}
			if (c->in_len && !c->partial_since)
				c->partial_since = ctl_now_ns();
			break;
		}
		whole = CTL_FRAME_HEADER + plen;
		handle_frame(srv, c, c->in + CTL_FRAME_HEADER, plen);
		memmove(c->in, c->in + whole, c->in_len - whole);
		c->in_len -= whole;
		c->partial_since = 0;
	}
	if (c->eof && !c->dead && !c->closing) {
		c->watching = false;
		if (!c->in_len) {
			c->closing = true;
			if (!pending(c))
				c->dead = true;
		} else if (ctl_frame_peek(c->in, c->in_len, srv->o.max_frame, &plen) == 0) {
			/* gone in the middle of a frame: nothing to answer */
			c->dead = true;
		}
		/* else whole frames wait for the output to drain */
	}
}

static bool can_read(const struct ctl_server *srv, const struct ctl_conn *c)
{
	(void)srv;
	return !c->eof && !c->closing && !c->dead && c->in_len < c->in_cap;
}

static void conn_read(struct ctl_server *srv, struct ctl_conn *c)
{
	while (can_read(srv, c)) {
		ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);

		if (n > 0) {
			c->in_len += (size_t)n;
			c->active_at = ctl_now_ns();
		} else if (n == 0) {
			c->eof = true;
		} else if (errno == EINTR) {
			continue;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			return;
		} else {
			c->dead = true;
		}
		/* room for the rest of a frame whose length is known comes from conn_process() */
		if (c->in_len == c->in_cap)
			return;
	}
}

static void conn_io(struct ctl_server *srv, struct ctl_conn *c, short revents)
{
	/* POLLHUP on a stream socket: the peer closed both ways, nobody will read a reply */
	if (revents & (POLLHUP | POLLERR)) {
		c->dead = true;
		return;
	}
	if (revents & POLLIN)
		conn_read(srv, c);
	if (revents & POLLOUT)
		conn_write(srv, c);
	conn_process(srv, c);
	/* processing may have freed room in the input buffer: read on at the next poll */
}

/* Nothing in, nothing out, nothing due: what the idle limit closes. */
static bool conn_idle(const struct ctl_conn *c)
{
	return !c->in_len && !pending(c) && !c->watching;
}

static int64_t conn_deadline(const struct ctl_server *srv, const struct ctl_conn *c)
{
	int64_t d = INT64_MAX;

	if (c->partial_since)
		d = c->partial_since + srv->idle_ns;
	if (c->stall_since && c->stall_since + srv->idle_ns < d)
		d = c->stall_since + srv->idle_ns;
	if (conn_idle(c) && c->active_at + srv->idle_ns < d)
		d = c->active_at + srv->idle_ns;
	if (c->watching && c->watch_next < d)
		d = c->watch_next;
	return d;
}

static void conn_timers(struct ctl_server *srv, struct ctl_conn *c, int64_t now)
{
	if (c->dead)
		return;
	if (conn_idle(c) && now - c->active_at >= srv->idle_ns) {
		logf_(srv, "closing uid %u pid %d: idle for %lld ms", (unsigned)c->peer.uid,
		      (int)c->peer.pid, (long long)((now - c->active_at) / MS));
		c->dead = true;
		return;
	}
	if (c->partial_since && now - c->partial_since >= srv->idle_ns) {
		logf_(srv, "dropping uid %u pid %d: a frame left half sent", (unsigned)c->peer.uid,
		      (int)c->peer.pid);
		c->dead = true;
		return;
	}
	if (c->stall_since && pending(c) && now - c->stall_since >= srv->idle_ns) {
		logf_(srv, "dropping uid %u pid %d: replies left unread", (unsigned)c->peer.uid,
		      (int)c->peer.pid);
		c->dead = true;
		return;
	}
	if (c->watching && now >= c->watch_next) {
		/* a watcher that has not taken the last snapshot skips this one */
		if (pending(c) < OUT_LOW)
			watch_snapshot(srv, c);
		c->watch_next += c->watch_every;
		if (c->watch_next <= now)
			c->watch_next = now + c->watch_every;
	}
}

static void conn_free(struct ctl_conn *c)
{
	close(c->fd);
	free(c->peer.groups);
	free(c->in);
	free(c->out);
	free(c);
}

/* ---- accepting ---- */

/* Tell a peer we will not serve it, as far as the socket buffer takes it, and hang up. */
static void refuse(int fd, int status, const char *why)
{
	Semvisor__Reply reply = SEMVISOR__REPLY__INIT;
	struct ctl_arena a = { 0 };
	uint8_t buf[512];

	reply.version = CTL_PROTO_VERSION;
	ctl_reply_error(&reply, &a, status, why);
	if (ctl_frame_size(&reply.base) <= sizeof(buf)) {
		size_t n = ctl_frame_pack(&reply.base, buf);

		if (send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* it is being refused anyway */
		}
	}
	ctl_arena_free(&a);
	close(fd);
}

/*
 * The peer's supplementary groups as they were at connect() (SO_PEERGROUPS). None when the
 * kernel cannot tell or memory is short: that can only make fewer sets readable to the peer.
 */
static gid_t *peer_groups(int fd, int *n)
{
	socklen_t len = 32 * sizeof(gid_t);
	gid_t *g = NULL;

	*n = 0;
	/* ERANGE tells the size needed; the groups are fixed since connect(), so twice will do */
	for (int tries = 0; tries < 2; tries++) {
		gid_t *p = realloc(g, len ? len : sizeof(gid_t));

		if (!p)
			break;
		g = p;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0) {
			*n = (int)(len / sizeof(gid_t));
			return g;
		}
		if (errno != ERANGE)
			break;
	}
	free(g);
	return NULL;
}

static void conn_new(struct ctl_server *srv, int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct ctl_conn *c;
	bool priv;
	int same_uid = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || len != sizeof(cr)) {
		close(fd);
		return;
	}
	priv = cr.uid == 0 || cr.uid == srv->owner;
	for (int i = 0; i < srv->nconns; i++)
		same_uid += srv->conns[i]->peer.uid == cr.uid;
	if (srv->nconns >= srv->max_total ||
	    (!priv && (srv->nconns >= srv->o.max_conns || same_uid >= srv->o.max_conns_per_uid))) {
		logf_(srv, "refused uid %u pid %d: too many connections (%d, %d of this uid)",
		      (unsigned)cr.uid, (int)cr.pid, srv->nconns, same_uid);
		refuse(fd, SEMVISOR__STATUS__BUSY, "too many connections to the control socket");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->in = malloc(IN_MIN);
	if (!c || !c->in) {
		free(c);
		close(fd);
		return;
	}
	c->fd = fd;
	c->in_cap = IN_MIN;
	c->active_at = ctl_now_ns();
	c->peer =
	    (struct ctl_peer){ .uid = cr.uid, .gid = cr.gid, .pid = cr.pid, .privileged = priv };
	/* a privileged peer reads everything: its groups do not matter */
	if (!priv)
		c->peer.groups = peer_groups(fd, &c->peer.ngroups);
	srv->conns[srv->nconns++] = c;
}

/* Out of fds: take the connection off the queue with the reserve fd, so poll() stops firing. */
static void out_of_fds(struct ctl_server *srv)
{
	int fd;

	if (srv->reserve < 0) {
		srv->accept_paused_until = ctl_now_ns() + ACCEPT_PAUSE_MS * MS;
		return;
	}
	close(srv->reserve);
	srv->reserve = -1;
	fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0) {
		logf_(srv, "refused a connection: out of file descriptors");
		refuse(fd, SEMVISOR__STATUS__BUSY, "the server is out of file descriptors");
	}
	srv->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void accept_some(struct ctl_server *srv)
{
	for (int k = 0; k < ACCEPT_BURST; k++) {
		int fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			conn_new(srv, fd);
			continue;
		}
		switch (errno) {
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
			continue;
		case EAGAIN:
			return;
		case EMFILE:
		case ENFILE:
			out_of_fds(srv);
			return;
		default:
			/* ENOBUFS, ENOMEM: let the machine breathe rather than spin */
			logf_(srv, "accept: %s", strerror(errno));
			srv->accept_paused_until = ctl_now_ns() + ACCEPT_PAUSE_MS * MS;
			return;
		}
	}
}

/* ---- the loop ---- */

static void *ctl_main(void *arg)
{
	struct ctl_server *srv = arg;

	pthread_setname_np(pthread_self(), "sv-control");
	sv_thread_register();
	for (;;) {
		int64_t now = ctl_now_ns(), next = INT64_MAX;
		int n = 0, polled, timeout = -1;

		srv->pfd[n++] = (struct pollfd){ .fd = srv->stopfd, .events = POLLIN };
		srv->pfd[n++] = (struct pollfd){ .fd = srv->lfd, .events = POLLIN };
		if (srv->accept_paused_until > now) {
			srv->pfd[1].fd = -1;
			next = srv->accept_paused_until;
		}
		for (int i = 0; i < srv->nconns; i++) {
			struct ctl_conn *c = srv->conns[i];
			int64_t d = conn_deadline(srv, c);
			short ev = 0;

			if (can_read(srv, c))
				ev |= POLLIN;
			if (pending(c))
				ev |= POLLOUT;
			srv->pfd[n++] = (struct pollfd){ .fd = c->fd, .events = ev };
			if (d < next)
				next = d;
		}
		polled = srv->nconns;
		if (next != INT64_MAX)
			timeout = next <= now ? 0 : (int)((next - now + MS - 1) / MS);
		if (poll(srv->pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			abort(); /* EFAULT/EINVAL: a bug here */
		}
		if (srv->pfd[0].revents)
			break;
		if (srv->pfd[1].revents)
			accept_some(srv);
		for (int i = 0; i < polled; i++)
			if (srv->pfd[2 + i].revents)
				conn_io(srv, srv->conns[i], srv->pfd[2 + i].revents);
		now = ctl_now_ns();
		for (int i = 0; i < srv->nconns; i++)
			conn_timers(srv, srv->conns[i], now);
		/* reap, keeping the order (older connections first) */
		n = 0;
		for (int i = 0; i < srv->nconns; i++) {
			if (srv->conns[i]->dead)
				conn_free(srv->conns[i]);
			else
				srv->conns[n++] = srv->conns[i];
		}
		srv->nconns = n;
		if (srv->reserve < 0)
			srv->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	sv_thread_unregister();
	return NULL;
}

/* ---- setting up ---- */

static int bind_path(struct ctl_server *srv, char *err, size_t errlen)
{
	int rc = usock_listen(&srv->sock, srv->o.path, srv->o.mode, srv->o.group, BACKLOG,
			      "control socket", err, errlen);

	if (rc)
		return rc;
	srv->lfd = srv->sock.fd;
	srv->owner = srv->sock.owner;
	snprintf(srv->path, sizeof(srv->path), "%s", srv->sock.path);
	return 0;
}

/* A socket handed over (systemd): it must be a listening AF_UNIX stream socket. */
static int adopt_fd(struct ctl_server *srv, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(int);
	int fd = srv->lfd, v = 0, flags;
	struct stat sb;

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) || v != AF_UNIX ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) || v != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) || v != 1) {
		snprintf(err, errlen, "fd %d is not a listening unix stream socket", fd);
		return -ENOTSOCK;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) || fcntl(fd, F_SETFD, FD_CLOEXEC)) {
		snprintf(err, errlen, "fd %d: %s", fd, strerror(errno));
		return -errno;
	}
	srv->owner = geteuid();
	len = sizeof(sa);
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sun_path[0]) {
		snprintf(srv->path, sizeof(srv->path), "%s", sa.sun_path);
		/* systemd made it: whoever owns the file is the socket's owner */
		if (stat(sa.sun_path, &sb) == 0)
			srv->owner = sb.st_uid;
	} else {
		snprintf(srv->path, sizeof(srv->path), "%s", srv->o.path ? srv->o.path : "(fd)");
	}
	return 0;
}

static void server_free(struct ctl_server *srv)
{
	for (int i = 0; i < srv->nconns; i++)
		conn_free(srv->conns[i]);
	if (srv->sock.fd >= 0)
		usock_close(&srv->sock); /* (its file only if it is still ours) */
	else if (srv->lfd >= 0)
		close(srv->lfd);
	if (srv->stopfd >= 0)
		close(srv->stopfd);
	if (srv->reserve >= 0)
		close(srv->reserve);
	free(srv->conns);
	free(srv->pfd);
	free(srv);
}

struct ctl_server *ctl_server_start(struct nt_super *s, const struct ctl_opts *opts, char *err,
				    size_t errlen)
{
	struct ctl_server *srv = calloc(1, sizeof(*srv));
	sigset_t all, old;
	int rc;

	if (!srv) {
		if (opts->listen_fd >= 0)
			close(opts->listen_fd);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	srv->o = *opts;
	srv->lfd = opts->listen_fd;
	srv->stopfd = srv->reserve = srv->sock.fd = -1;
	if (!srv->o.mode)
		srv->o.mode = CTL_DEFAULT_MODE;
	if (srv->o.max_conns <= 0)
		srv->o.max_conns = CTL_DEFAULT_MAX_CONNS;
	if (srv->o.max_conns_per_uid <= 0)
		srv->o.max_conns_per_uid = CTL_DEFAULT_MAX_CONNS_UID;
	if (!srv->o.max_frame)
		srv->o.max_frame = CTL_MAX_REQUEST_DEFAULT;
	if (!srv->o.max_output)
		srv->o.max_output = CTL_DEFAULT_MAX_OUTPUT;
	/* a frame's length must fit its 4-byte prefix, and what a client accepts */
	if (srv->o.max_output > CTL_MAX_REPLY)
		srv->o.max_output = CTL_MAX_REPLY;
	if (srv->o.max_frame > CTL_MAX_REPLY)
		srv->o.max_frame = CTL_MAX_REPLY;
	if (srv->o.idle_ms <= 0)
		srv->o.idle_ms = CTL_IDLE_MS;
	srv->idle_ns = (int64_t)srv->o.idle_ms * MS;
	srv->max_total = srv->o.max_conns + CTL_ADMIN_RESERVE;
	ctl_ctx_init(&srv->cx, s, opts->log);

	srv->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	srv->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	srv->conns = calloc((size_t)srv->max_total, sizeof(*srv->conns));
	srv->pfd = calloc((size_t)srv->max_total + 2, sizeof(*srv->pfd));
	if (srv->stopfd < 0 || srv->reserve < 0 || !srv->conns || !srv->pfd) {
		snprintf(err, errlen, "setting up the control server: %s",
			 strerror(errno ? errno : ENOMEM));
		goto fail;
	}
	rc = srv->lfd >= 0 ? adopt_fd(srv, err, errlen) : bind_path(srv, err, errlen);
	if (rc)
		goto fail;

	/* the thread starts with every signal blocked: signals are the main thread's business */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&srv->thread, NULL, ctl_main, srv);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		snprintf(err, errlen, "cannot start the control thread: %s", strerror(rc));
		goto fail;
	}
	return srv;
fail:
	server_free(srv);
	return NULL;
}

void ctl_server_stop(struct ctl_server *srv)
{
	uint64_t one = 1;

	if (!srv)
		return;
	if (write(srv->stopfd, &one, sizeof(one)) != sizeof(one))
		abort(); /* an eventfd write fails only on overflow, which one write cannot cause */
	if (pthread_join(srv->thread, NULL))
		abort();
	server_free(srv);
}
