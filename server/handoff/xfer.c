/* SPDX-License-Identifier: MIT */
/*
 * Moving the agent message (msg.c) and the listener fd it names over a unix stream socket: the
 * sender's one sendmsg, the receiver's bounded reads, and the bookkeeping that keeps a hostile
 * sender from leaving an fd behind or holding the receiver past its deadline.
 *
 * The transfer
 *   ho_send writes the message with one sendmsg, the fd in SCM_RIGHTS; if the socket takes only
 *   part of it, the rest follows without control data (the kernel attaches the fds to the first
 *   segment, which is where a receiver looks for them). On a non-blocking socket it waits for
 *   room rather than leave half a message behind.
 *   ho_recv reads until a brace-counting scan says the top-level object has closed (or EOF),
 *   then parses what it read. The scan is incremental, so a sender dribbling one byte at a time
 *   costs linear work; the parse then runs once. Bytes after the object in the same read must be
 *   whitespace; later ones are not read. A first read that brings no fd is refused at once, as
 *   are fds in any later read, more than HO_MAX_FDS fds, and truncated control data. Every fd that
 *   arrives is ours to close until the listener is handed to the caller: on any error all of
 *   them are closed, and so is every fd but the listener on success. A pidfd that SO_PASSPIDFD
 *   adds to each read is closed too, and room is left for it and SO_PASSCRED's credentials so
 *   that a receiving socket with those options on still works.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include "handoff/meta.h"
#include "handoff/xfer.h"

/* Linux 6.5 (SO_PASSPIDFD): if the owner of the socket turned it on, every read brings a pidfd. */
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

/* readlink of a listener fd; the name kernel/seccomp.c gives its anonymous inode. */
#define HO_LISTENER_LINK "anon_inode:seccomp notify"

/* ---- sending ------------------------------------------------------------------------------ */

int ho_connect(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "agent socket path too long: %s", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		snprintf(err, errlen, "cannot reach semvisord at %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int ho_send(int sock, int listener_fd, const struct ho_info *info)
{
	char msg[HO_BUILD_MAX];
	size_t len;
	int rc = ho_build(info, msg, sizeof(msg), &len);

	return rc ? rc : ho_send_msg(sock, listener_fd, msg, len);
}

int ho_send_msg(int sock, int listener_fd, const char *msg, size_t len)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	size_t off = 0;

	if (listener_fd < 0)
		return -EBADF;
	while (off < len) {
		struct iovec iov = { (char *)msg + off, len - off }; /* sendmsg only reads it */
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		struct pollfd pfd = { .fd = sock, .events = POLLOUT };
		ssize_t n;

		if (off == 0) {
			/* Until the first byte is out the fd has not gone either: attach it again. */
			struct cmsghdr *c;

			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.buf;
			mh.msg_controllen = sizeof(ctl.buf);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &listener_fd, sizeof(int));
		}
		/* MSG_NOSIGNAL: a receiver that hung up is an error to report, not a SIGPIPE. */
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		/* A non-blocking socket: wait for room rather than leave half a message. */
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

/* ---- receiving ---------------------------------------------------------------------------- */

/*
 * Where the top-level object ends, found without parsing: depth of brackets outside strings. It
 * errs only towards "done" or "bad" on input the parser then refuses with a precise message.
 */
struct scan {
	int depth;
	bool started, in_str, esc;
};

enum {
	SCAN_MORE,
	SCAN_DONE,
	SCAN_BAD
};

static int scan_feed(struct scan *sc, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (sc->in_str) {
			if (sc->esc)
				sc->esc = false;
			else if (c == '\\')
				sc->esc = true;
			else if (c == '"')
				sc->in_str = false;
			continue;
		}
		if (!sc->started) {
			if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
				continue;
			if (c != '{')
				return SCAN_BAD;
			sc->started = true;
		}
		switch (c) {
		case '"':
			sc->in_str = true;
			break;
		case '{':
		case '[':
			/* The parser would refuse this depth: no need to read on. */
			if (++sc->depth > HO_MAX_DEPTH)
				return SCAN_BAD;
			break;
		case '}':
		case ']':
			if (--sc->depth == 0)
				return SCAN_DONE;
			break;
		}
	}
	return SCAN_MORE;
}

struct ho_fds {
	int fd[HO_MAX_FDS];
	int n;
	bool overflow; /* more SCM_RIGHTS fds than fd[] holds (closed) */
	bool late;     /* fds after the first read (closed) */
};

static void ho_close_all(struct ho_fds *f)
{
	for (int i = 0; i < f->n; i++)
		if (f->fd[i] >= 0)
			close(f->fd[i]);
	f->n = 0;
}

/* Take the fds out of the control data: they are ours now, kept in f or closed here. */
static void ho_take_fds(struct msghdr *mh, struct ho_fds *f, bool first)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		const unsigned char *data = CMSG_DATA(c);
		size_t nfd;

		if (c->cmsg_level != SOL_SOCKET ||
		    (c->cmsg_type != SCM_RIGHTS && c->cmsg_type != SCM_PIDFD) ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, data + i * sizeof(int), sizeof(int));
			if (fd < 0)
				continue;
			if (c->cmsg_type == SCM_PIDFD) {
				close(fd); /* the sender's pidfd, which we did not ask for */
			} else if (!first) {
				f->late = true;
				close(fd);
			} else if (f->n == HO_MAX_FDS) {
				f->overflow = true;
				close(fd);
			} else {
				f->fd[f->n++] = fd;
			}
		}
	}
}

/*
 * A client to be traced (listenerMetadata "ptrace", meta.h) sends a pidfd of its own where the
 * listener would be: it has none. what is the fd as ho_is_listener() found it.
 */
static bool asks_ptrace(const struct ho_info *info, const char *what)
{
	struct ho_meta m;

	ho_meta_parse(info->metadata, &m);
	return m.ptrace && !strcmp(what, "anon_inode:[pidfd]");
}

/*
 * /proc names the anonymous inode; without /proc, ask the fd: an ID_VALID for an id never
 * issued fails ENOENT on a listener only. The ioctl is sent only to anonymous inodes (no file
 * type bits), so no device sees it.
 */
bool ho_is_listener(int fd, char *what, size_t whatlen)
{
	char path[64];
	struct stat st;
	uint64_t id = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, what, whatlen - 1);
	if (n >= 0) {
		what[n] = '\0';
		return !strcmp(what, HO_LISTENER_LINK);
	}
	snprintf(what, whatlen, "unknown: no /proc");
	if (fstat(fd, &st) || (st.st_mode & S_IFMT))
		return false;
	return !ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) || errno == ENOENT;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 0 when sock is readable, -ETIMEDOUT past the deadline (-1: none), or -errno. */
static int ho_wait(int sock, int64_t deadline)
{
	struct pollfd pfd = { .fd = sock, .events = POLLIN };

	for (;;) {
		int64_t left = -1;
		int rc;

		if (deadline >= 0) {
			left = deadline - now_ms();
			left = left < 0 ? 0 : left > INT_MAX ? INT_MAX : left;
		}
		/* Even with no time left, look once: timeout 0 means "only what is there". */
		rc = poll(&pfd, 1, (int)left);
		if (rc > 0)
			return 0;
		if (rc == 0 && deadline >= 0 && now_ms() >= deadline)
			return -ETIMEDOUT;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

int ho_recv(int sock, int *listener_fd, struct ho_info *info, int timeout_ms, char *err,
	    size_t errlen)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(HO_MAX_FDS * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred)) +
			 CMSG_SPACE(sizeof(int))];
	} ctl;
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	struct ho_fds f = { .n = 0 };
	struct scan sc = { 0 };
	int state = SCAN_MORE, rc, idx;
	size_t used = 0;
	char what[64];
	char *buf;

	*listener_fd = -1;
	memset(info, 0, sizeof(*info));
	ho_err(err, errlen, "%s", "");
	buf = malloc(HO_MAX_MESSAGE);
	if (!buf) {
		ho_err(err, errlen, "out of memory for an agent message");
		return -ENOMEM;
	}
	for (bool first = true; state == SCAN_MORE;) {
		struct iovec iov = { buf + used, HO_MAX_MESSAGE - used };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;

		if (used == HO_MAX_MESSAGE) {
			ho_err(err, errlen, "the agent message is longer than %d bytes",
			       HO_MAX_MESSAGE);
			rc = -EMSGSIZE;
			goto fail;
		}
		rc = ho_wait(sock, deadline);
		if (rc == -ETIMEDOUT) {
			ho_err(err, errlen,
			       "no complete agent message within %d ms (%zu bytes came)",
			       timeout_ms, used);
			goto fail;
		} else if (rc) {
			ho_err(err, errlen, "waiting for the agent message: %s", strerror(-rc));
			goto fail;
		}
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		/* Non-blocking: poll said readable, but a spurious wake-up must not outlive the
		   deadline. CLOEXEC: the fds must not leak into anything we spawn meanwhile. */
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
				continue;
			rc = -errno;
			ho_err(err, errlen, "reading the agent message: %s", strerror(errno));
			goto fail;
		}
		ho_take_fds(&mh, &f, first);
		rc = -EPROTO;
		if (mh.msg_flags & MSG_TRUNC) {
			/* only a datagram socket cuts; the stream the protocol uses never does */
			ho_err(err, errlen, "the agent message is longer than %d bytes",
			       HO_MAX_MESSAGE);
			rc = -EMSGSIZE;
			goto fail;
		}
		if (mh.msg_flags & MSG_CTRUNC) {
			ho_err(err, errlen,
			       "the agent message carried more control data than expected (more "
			       "than %d file descriptors?); all of it was dropped",
			       HO_MAX_FDS);
			goto fail;
		}
		if (f.overflow) {
			ho_err(err, errlen,
			       "the agent message carried more than %d file descriptors",
			       HO_MAX_FDS);
			goto fail;
		}
		if (f.late) {
			ho_err(err, errlen,
			       "file descriptors came after the first bytes of the agent message "
			       "(they must all come with the first)");
			goto fail;
		}
		if (n == 0) {
			if (used == 0) {
				ho_err(err, errlen,
				       "the connection closed before any agent message");
				goto fail;
			}
			break; /* the parser says what is missing */
		}
		if (first && f.n == 0) {
			ho_err(err, errlen, "no file descriptor came with the agent message");
			goto fail;
		}
		first = false;
		state = scan_feed(&sc, buf + used, (size_t)n);
		used += (size_t)n;
	}

	rc = ho_parse(buf, used, info, &idx, err, errlen);
	if (rc)
		goto fail;
	rc = -EPROTO;
	if (idx >= f.n) {
		ho_err(err, errlen,
		       "\"seccompFd\" names SCM_RIGHTS slot %d but only %d file descriptor%s came",
		       idx, f.n, f.n == 1 ? "" : "s");
		goto fail;
	}
	if (!ho_is_listener(f.fd[idx], what, sizeof(what)) && !asks_ptrace(info, what)) {
		ho_err(err, errlen, "the fd is not a seccomp listener (it is %s)", what);
		goto fail;
	}
	*listener_fd = f.fd[idx];
	f.fd[idx] = -1; /* handed over */
	ho_close_all(&f);
	free(buf);
	return 0;
fail:
	ho_close_all(&f);
	memset(info, 0, sizeof(*info));
	free(buf);
	return rc;
}
