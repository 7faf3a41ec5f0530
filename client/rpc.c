/* SPDX-License-Identifier: MIT */
/*
 * semvisorctl's side of the control socket: connect (and say clearly why not), send a request
 * frame, read reply frames. Every failure maps to one documented exit status (ctl.h).
 */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Why connecting was not allowed, in terms of the socket file people can act on. */
static void explain_denied(const char *path)
{
	char u[64], g[64];
	struct stat sb;

	if (stat(path, &sb)) {
		fprintf(stderr,
			"semvisorctl: permission denied: cannot reach %s (a directory on the "
			"way is closed to you)\n",
			path);
		return;
	}
	fprintf(stderr,
		"semvisorctl: permission denied connecting to %s (owner %s, group %s, mode %04o):\n"
		"  you need write permission on it: be its owner, root, or in group %s\n",
		path, text_user_name(sb.st_uid, u, sizeof(u)),
		text_group_name(sb.st_gid, g, sizeof(g)), (unsigned)(sb.st_mode & 07777), g);
}

int rpc_connect(struct rpc *r, const char *path, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	*r = (struct rpc){ .fd = -1, .path = path, .next_id = 1, .timeout_ms = timeout_ms };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "semvisorctl: socket path too long (at most %zu bytes): %s\n",
			sizeof(sa.sun_path) - 1, path);
		return EX_USAGE;
	}
	strcpy(sa.sun_path, path);
	r->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (r->fd < 0) {
		fprintf(stderr, "semvisorctl: socket: %s\n", strerror(errno));
		return EX_CONNECT;
	}
	if (connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 0;
	switch (errno) {
	case ENOENT:
		fprintf(
		    stderr,
		    "semvisorctl: no control socket at %s: is semvisord running (or semvisor-run "
		    "--control)? Use --socket or SEMVISOR_CONTROL for another path.\n",
		    path);
		break;
	case ECONNREFUSED:
		fprintf(stderr,
			"semvisorctl: nothing listens on %s: the server that made it is gone\n",
			path);
		break;
	case EACCES:
	case EPERM:
		explain_denied(path);
		rpc_close(r);
		return EX_DENIED;
	case ENOTSOCK:
	case ENOTDIR:
		fprintf(stderr, "semvisorctl: %s is not a socket\n", path);
		break;
	default:
		fprintf(stderr, "semvisorctl: cannot connect to %s: %s\n", path, strerror(errno));
		break;
	}
	rpc_close(r);
	return EX_CONNECT;
}

void rpc_close(struct rpc *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	free(r->buf);
	r->buf = NULL;
	r->len = r->cap = 0;
}

int rpc_send(struct rpc *r, Semvisor__Request *req)
{
	size_t n, off = 0;
	uint8_t *buf;

	req->version = CTL_PROTO_VERSION;
	req->id = r->next_id++;
	n = ctl_frame_size(&req->base);
	buf = malloc(n);
	if (!buf) {
		fprintf(stderr, "semvisorctl: out of memory\n");
		return EX_REFUSED;
	}
	ctl_frame_pack(&req->base, buf);
	while (off < n) {
		ssize_t k = send(r->fd, buf + off, n - off, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			fprintf(stderr, "semvisorctl: sending to %s: %s\n", r->path,
				strerror(errno));
			free(buf);
			return EX_CONNECT;
		}
		off += (size_t)k;
	}
	free(buf);
	return 0;
}

int rpc_recv(struct rpc *r, Semvisor__Reply **out, int timeout_ms)
{
	int64_t deadline;
	char why[256];

	*out = NULL;
	if (timeout_ms < 0)
		timeout_ms = r->timeout_ms;
	deadline = now_ms() + timeout_ms;
	for (;;) {
		size_t plen;
		int rc = ctl_frame_peek(r->buf, r->len, CTL_MAX_REPLY, &plen);
		struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
		int64_t left;
		ssize_t k;

		if (rc < 0) {
			fprintf(stderr,
				"semvisorctl: protocol error: the server announced a reply of "
				"%zu bytes\n",
				plen);
			return EX_PROTO;
		}
		if (rc > 0) {
			size_t whole = CTL_FRAME_HEADER + plen;

			if (ctl_reply_decode(r->buf + CTL_FRAME_HEADER, plen, out, why,
					     sizeof(why))) {
				fprintf(stderr, "semvisorctl: protocol error: %s\n", why);
				return EX_PROTO;
			}
			memmove(r->buf, r->buf + whole, r->len - whole);
			r->len -= whole;
			return 0;
		}
		/* room for the whole frame once its length is known, else for a header and more */
		if (r->cap - r->len < 65536 ||
		    (r->len >= CTL_FRAME_HEADER && r->cap < CTL_FRAME_HEADER + plen)) {
			size_t cap = r->len + 65536;
			uint8_t *p;

			if (r->len >= CTL_FRAME_HEADER && cap < CTL_FRAME_HEADER + plen)
				cap = CTL_FRAME_HEADER + plen;
			p = realloc(r->buf, cap);
			if (!p) {
				fprintf(stderr, "semvisorctl: out of memory for a %zu-byte reply\n",
					plen);
				return EX_PROTO;
			}
			r->buf = p;
			r->cap = cap;
		}
		left = deadline - now_ms();
		if (timeout_ms == 0)
			left = 0;
		else if (left <= 0)
			goto timeout;
		rc = poll(&pfd, 1, (int)left);
		if (rc < 0 && errno == EINTR) {
			if (timeout_ms == 0)
				return RPC_AGAIN;
			continue;
		}
		if (rc < 0) {
			fprintf(stderr, "semvisorctl: poll: %s\n", strerror(errno));
			return EX_CONNECT;
		}
		if (rc == 0) {
			if (timeout_ms == 0)
				return RPC_AGAIN;
			goto timeout;
		}
		k = read(r->fd, r->buf + r->len, r->cap - r->len);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k < 0) {
			fprintf(stderr, "semvisorctl: reading from %s: %s\n", r->path,
				strerror(errno));
			return EX_CONNECT;
		}
		if (k == 0) {
			fprintf(stderr,
				"semvisorctl: protocol error: the server closed the connection "
				"%s\n",
				r->len ? "in the middle of a reply" : "without a reply");
			return EX_PROTO;
		}
		r->len += (size_t)k;
	}
timeout:
	fprintf(stderr, "semvisorctl: no reply from %s within %d ms\n", r->path, timeout_ms);
	return EX_CONNECT;
}

int rpc_check(const Semvisor__Reply *reply)
{
	const char *msg = reply->message && *reply->message ? reply->message : NULL;
	char buf[512];

	if (reply->status == SEMVISOR__STATUS__OK)
		return EX_OK;
	/* the server's sentence says more than the status's name; hint at what to do next */
	fprintf(stderr, "semvisorctl: %s%s\n",
		msg ? text_safe(msg, buf, sizeof(buf)) : ctl_status_text(reply->status),
		reply->status == SEMVISOR__STATUS__AMBIGUOUS	       ? " (use --ns NAME)"
		: reply->status == SEMVISOR__STATUS__PERMISSION_DENIED ? " (permission denied)"
								       : "");
	switch (reply->status) {
	case SEMVISOR__STATUS__PERMISSION_DENIED:
		return EX_DENIED;
	case SEMVISOR__STATUS__VERSION_UNSUPPORTED:
	case SEMVISOR__STATUS__MALFORMED:
	case SEMVISOR__STATUS__FRAME_TOO_LARGE:
	case SEMVISOR__STATUS__UNKNOWN_REQUEST:
		return EX_PROTO;
	default:
		return EX_REFUSED;
	}
}

int rpc_call(struct rpc *r, Semvisor__Request *req, Semvisor__Reply **out)
{
	uint64_t id;
	int rc;

	*out = NULL;
	rc = rpc_send(r, req);
	if (rc)
		return rc;
	id = req->id;
	rc = rpc_recv(r, out, -1);
	if (rc)
		return rc;
	rc = rpc_check(*out);
	/* a refusal before the request was read (BUSY) carries id 0 */
	if (!rc && (*out)->id != id) {
		fprintf(stderr, "semvisorctl: protocol error: a reply to request %llu, not %llu\n",
			(unsigned long long)(*out)->id, (unsigned long long)id);
		rc = EX_PROTO;
	}
	if (rc) {
		ctl_reply_free(*out);
		*out = NULL;
	}
	return rc;
}
