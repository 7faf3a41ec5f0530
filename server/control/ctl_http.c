/* SPDX-License-Identifier: MIT */
/*
 * The metrics over HTTP (control.h: ctl_http_start): GET /metrics answers one Stats snapshot
 * in the Prometheus text format, the same text `semvisorctl metrics` prints (ctl_metrics.c).
 *
 * Read-only by construction: a snapshot is all that is ever served, and a snapshot carries
 * counters and names but no set's key, values or permissions (ctl_answer.c's rule for Stats).
 * Whoever reaches the port learns what `semvisorctl stats` tells any local user, nothing more,
 * and changes nothing. The port is still a network peer's, so:
 *   - one thread, one poll() loop, non-blocking sockets: a peer never blocks the server, and
 *     the server never blocks the supervisor's workers (a snapshot reads counters and the
 *     engine's RCU-side inspection calls);
 *   - at most HTTP_MAX_CONNS connections; one more evicts the oldest, so that peers that
 *     connect and say nothing cannot lock the scraper out;
 *   - a request's head must fit HTTP_MAX_HEAD bytes, and the whole exchange, request in and
 *     answer out, must be done within timeout_ms of the accept;
 *   - one request per connection (Connection: close); a body is never read.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/control.h"
#include "control/ctl_int.h"
#include "control/ctl_metrics.h"

#define HTTP_MAX_CONNS	16
#define HTTP_MAX_HEAD	8192
#define HTTP_TIMEOUT_MS 10000
#define MS		1000000LL

struct http_conn {
	int fd;
	int64_t deadline;
	size_t in_len;
	char *out; /* the whole answer, once the request is in */
	size_t out_off, out_len;
	char in[HTTP_MAX_HEAD];
};

struct ctl_http {
	struct ctl_ctx cx;
	int lfd, stopfd;
	int64_t timeout_ns;
	char where[128];
	pthread_t thread;
	struct http_conn *conns[HTTP_MAX_CONNS];
	int nconns;
};

static void conn_close(struct ctl_http *h, int i)
{
	struct http_conn *c = h->conns[i];

	close(c->fd);
	free(c->out);
	free(c);
	/* keep the order: the oldest connection first, the one an accept evicts */
	memmove(&h->conns[i], &h->conns[i + 1], (size_t)(h->nconns - i - 1) * sizeof(c));
	h->nconns--;
}

/* ---- answering ---- */

/* The answer's head and body in one buffer: status, the fixed headers, then body (may be NULL). */
static void answer(struct http_conn *c, const char *status, const char *type, const char *extra,
		   const char *body, size_t len, bool head_only)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return;
	fprintf(f,
		"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		"Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
		status, type, len, extra ? extra : "");
	if (!head_only && len)
		fwrite(body, 1, len, f);
	if (fclose(f)) {
		free(buf);
		return;
	}
	c->out = buf;
	c->out_len = size;
}

static void answer_text(struct http_conn *c, const char *status, const char *extra, bool head_only)
{
	char body[128];
	int n = snprintf(body, sizeof(body), "%s\n", status + 4); /* the reason phrase */

	answer(c, status, "text/plain; charset=utf-8", extra, body, (size_t)n, head_only);
}

static void answer_metrics(struct ctl_http *h, struct http_conn *c, bool head_only)
{
	struct ctl_arena a = { 0 };
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);

	if (f) {
		ctl_metrics_print(f, ctl_stats_build(&h->cx, &a, true));
		if (fclose(f)) {
			free(body);
			body = NULL;
		}
	}
	ctl_arena_free(&a);
	if (body)
		answer(c, "200 OK", CTL_METRICS_CONTENT_TYPE, NULL, body, len, head_only);
	else
		answer_text(c, "500 Internal Server Error", NULL, head_only);
	free(body);
}

/*
 * The request's head is in (NUL-terminated at its end): answer it. Only the request line
 * matters; headers are not looked at (Accept may ask for OpenMetrics: the text format is what
 * every Prometheus takes).
 */
static void handle(struct ctl_http *h, struct http_conn *c)
{
	char *line = c->in, *eol = strpbrk(line, "\r\n"), *method, *target, *version, *save;
	bool head_only;

	if (eol)
		*eol = '\0';
	method = strtok_r(line, " ", &save);
	target = method ? strtok_r(NULL, " ", &save) : NULL;
	version = target ? strtok_r(NULL, " ", &save) : NULL;
	if (!version || strtok_r(NULL, " ", &save) || strncmp(version, "HTTP/1.", 7)) {
		answer_text(c, "400 Bad Request", NULL, false);
		return;
	}
	head_only = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !head_only) {
		answer_text(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n", false);
		return;
	}
	target[strcspn(target, "?")] = '\0'; /* a scraper's parameters change nothing here */
	if (strcmp(target, "/metrics")) {
		answer_text(c, "404 Not Found", NULL, head_only);
		return;
	}
	answer_metrics(h, c, head_only);
}

/* ---- connections ---- */

/* Where the head of the request ends (a blank line, CRLF or a bare LF), or NULL. */
static char *head_end(char *p, size_t len)
{
	char *e = memmem(p, len, "\r\n\r\n", 4);

	return e ? e : memmem(p, len, "\n\n", 2);
}

static bool conn_read(struct ctl_http *h, struct http_conn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len);
		char *end;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return false; /* gone, or closed before its request was whole */
		c->in_len += (size_t)n;
		c->in[c->in_len] = '\0';
		end = head_end(c->in, c->in_len);
		if (end) {
			*end = '\0';
			handle(h, c);
			return c->out != NULL;
		}
		if (c->in_len == sizeof(c->in) - 1) {
			answer_text(c, "431 Request Header Fields Too Large", NULL, false);
			return c->out != NULL;
		}
	}
}

/* false once the connection is done with (answered, or failed). */
static bool conn_write(struct http_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n < 0)
			return false;
		c->out_off += (size_t)n;
	}
	/* the answer is out: a FIN after it, so that the peer reads it all before the close */
	shutdown(c->fd, SHUT_WR);
	return false;
}

static void conn_io(struct ctl_http *h, int i, short revents)
{
	struct http_conn *c = h->conns[i];
	bool keep;

	if (revents & (POLLERR | POLLNVAL))
		keep = false;
	else if (!c->out)
		keep = (revents & (POLLIN | POLLHUP)) ? conn_read(h, c) : true;
	else
		keep = true;
	if (keep && c->out)
		keep = conn_write(c);
	if (!keep)
		conn_close(h, i);
}

static void accept_some(struct ctl_http *h)
{
	for (int k = 0; k < HTTP_MAX_CONNS; k++) {
		int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct http_conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN; or out of fds or memory: the next poll tries again */
		}
		c = malloc(sizeof(*c));
		if (!c) {
			close(fd);
			return;
		}
		*c = (struct http_conn){ .fd = fd, .deadline = ctl_now_ns() + h->timeout_ns };
		if (h->nconns == HTTP_MAX_CONNS)
			conn_close(h, 0);
		h->conns[h->nconns++] = c;
	}
}

static void *http_main(void *arg)
{
	struct ctl_http *h = arg;
	struct pollfd pfd[HTTP_MAX_CONNS + 2];

	pthread_setname_np(pthread_self(), "sv-metrics");
	sv_thread_register();
	for (;;) {
		int64_t now = ctl_now_ns(), next = INT64_MAX;
		int n = 0, polled, timeout = -1;

		pfd[n++] = (struct pollfd){ .fd = h->stopfd, .events = POLLIN };
		pfd[n++] = (struct pollfd){ .fd = h->lfd, .events = POLLIN };
		for (int i = 0; i < h->nconns; i++) {
			struct http_conn *c = h->conns[i];

			pfd[n++] =
			    (struct pollfd){ .fd = c->fd, .events = c->out ? POLLOUT : POLLIN };
			if (c->deadline < next)
				next = c->deadline;
		}
		polled = h->nconns;
		if (next != INT64_MAX)
			timeout = next <= now ? 0 : (int)((next - now + MS - 1) / MS);
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			abort(); /* EFAULT/EINVAL: a bug here */
		}
		if (pfd[0].revents)
			break;
		/* backwards: closing connection i moves the later ones down */
		for (int i = polled - 1; i >= 0; i--)
			if (pfd[2 + i].revents)
				conn_io(h, i, pfd[2 + i].revents);
		now = ctl_now_ns();
		for (int i = h->nconns - 1; i >= 0; i--)
			if (h->conns[i]->deadline <= now)
				conn_close(h, i);
		if (pfd[1].revents)
			accept_some(h);
	}
	sv_thread_unregister();
	return NULL;
}

/* ---- setting up ---- */

/* "HOST:PORT", "[V6]:PORT" or ":PORT" (every address): a listening TCP socket, or -1 + err. */
static int listen_on(const char *spec, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *res = NULL;
	char host[256];
	const char *port = strrchr(spec, ':');
	size_t hl = port ? (size_t)(port - spec) : 0;
	int fd = -1, one = 1, rc;

	if (!port || !port[1] || hl >= sizeof(host)) {
		snprintf(err, errlen, "'%s' is not HOST:PORT", spec);
		return -1;
	}
	memcpy(host, spec, hl);
	host[hl] = '\0';
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	rc = getaddrinfo(host[0] ? host : NULL, port + 1, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "%s: %s", spec, gai_strerror(rc));
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 64)) {
		snprintf(err, errlen, "%s: %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* An inherited socket (systemd): it must be a listening stream socket; made non-blocking. */
static int adopt(int fd, char *err, size_t errlen)
{
	socklen_t len = sizeof(int);
	int v = 0, flags;

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) || v != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) || v != 1) {
		snprintf(err, errlen, "fd %d is not a listening stream socket", fd);
		return -1;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) || fcntl(fd, F_SETFD, FD_CLOEXEC)) {
		snprintf(err, errlen, "fd %d: %s", fd, strerror(errno));
		return -1;
	}
	return fd;
}

/* The bound address, as people write it: 127.0.0.1:9479, [::1]:9479, or a unix path. */
static void describe(struct ctl_http *h)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	snprintf(h->where, sizeof(h->where), "fd %d", h->lfd);
	if (getsockname(h->lfd, (struct sockaddr *)&sa, &len) ||
	    (sa.ss_family != AF_INET && sa.ss_family != AF_INET6) ||
	    getnameinfo((struct sockaddr *)&sa, len, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV))
		return;
	snprintf(h->where, sizeof(h->where), sa.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host,
		 serv);
}

static void http_free(struct ctl_http *h)
{
	while (h->nconns)
		conn_close(h, h->nconns - 1);
	if (h->lfd >= 0)
		close(h->lfd);
	if (h->stopfd >= 0)
		close(h->stopfd);
	free(h);
}

struct ctl_http *ctl_http_start(struct nt_super *s, const struct ctl_http_opts *o, char *err,
				size_t errlen)
{
	struct ctl_http *h = calloc(1, sizeof(*h));
	sigset_t all, old;
	int rc;

	if (!h) {
		if (o->listen_fd >= 0)
			close(o->listen_fd);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->stopfd = -1;
	h->timeout_ns = (int64_t)(o->timeout_ms > 0 ? o->timeout_ms : HTTP_TIMEOUT_MS) * MS;
	ctl_ctx_init(&h->cx, s, o->log);
	h->lfd = o->listen_fd >= 0 ? adopt(o->listen_fd, err, errlen)
				   : listen_on(o->listen, err, errlen);
	if (h->lfd < 0 && o->listen_fd >= 0)
		close(o->listen_fd);
	h->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->lfd < 0 || h->stopfd < 0) {
		if (h->lfd >= 0)
			snprintf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	describe(h);

	/* the thread starts with every signal blocked: signals are the main thread's business */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&h->thread, NULL, http_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		snprintf(err, errlen, "cannot start the metrics thread: %s", strerror(rc));
		goto fail;
	}
	return h;
fail:
	http_free(h);
	return NULL;
}

const char *ctl_http_where(const struct ctl_http *h)
{
	return h->where;
}

void ctl_http_stop(struct ctl_http *h)
{
	uint64_t one = 1;

	if (!h)
		return;
	if (write(h->stopfd, &one, sizeof(one)) != sizeof(one))
		abort(); /* an eventfd write fails only on overflow, which one write cannot cause */
	if (pthread_join(h->thread, NULL))
		abort();
	http_free(h);
}
