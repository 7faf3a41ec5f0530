/* SPDX-License-Identifier: MIT */
/*
 * Handing a seccomp listener fd to a supervisor over an AF_UNIX SOCK_STREAM connection, as the
 * OCI seccomp agent protocol does: one sendmsg carrying the agent message (msg.h) and, as
 * SCM_RIGHTS, the fds it names. Used by semvisor-run (both ends), semvisord's agent socket and
 * the tests.
 */
#ifndef SV_HANDOFF_XFER_H
#define SV_HANDOFF_XFER_H

#include <stdbool.h>
#include <stddef.h>

#include "handoff/msg.h"

/* A connection to the agent socket at path: the fd, or -1 with a sentence in err. */
int ho_connect(const char *path, char *err, size_t errlen);

/* Is fd a seccomp listener? what gets what it was found to be (readlink of the fd, say). */
bool ho_is_listener(int fd, char *what, size_t whatlen);

/* Send info and listener_fd in one sendmsg. 0 or -errno. */
int ho_send(int sock, int listener_fd, const struct ho_info *info);
/*
 * The same with the message built beforehand (ho_build()): for a sender whose own filter
 * already traps what building does (jansson reads /dev/urandom for its first object) and that
 * nobody serves until the message is out.
 */
int ho_send_msg(int sock, int listener_fd, const char *msg, size_t len);

/*
 * Receive one message: read until the JSON object is complete (or EOF), take the fd named
 * "seccompFd" (a listener; a pidfd from a client asking to be traced, meta.h) and close every
 * other fd that came along. 0 with *listener_fd set, or -errno with
 * a sentence in err: -EPROTO for malformed JSON or a message without "seccompFd" or without its
 * fd, -EMSGSIZE for a message over HO_MAX_MESSAGE, -ENOTSOCK... as the socket says.
 * timeout_ms bounds the whole receive (-1: none); -ETIMEDOUT when it passes.
 */
int ho_recv(int sock, int *listener_fd, struct ho_info *info, int timeout_ms, char *err,
	    size_t errlen);

#endif
