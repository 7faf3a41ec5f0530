/* SPDX-License-Identifier: MIT */
/*
 * Handing a seccomp listener fd to a supervisor, in the shape of the OCI runtime-spec seccomp
 * agent protocol (runtime-spec config-linux.md, "listenerPath"): over an AF_UNIX SOCK_STREAM
 * connection, one sendmsg carrying a JSON "container process state" and, as SCM_RIGHTS, the fds
 * it names ("fds": ["seccompFd"], fds[i] naming SCM_RIGHTS slot i). runc sends exactly this;
 * semvisor-run sends the same, so one receiver serves both.
 *
 *   {"ociVersion":"1.0.2","fds":["seccompFd"],"pid":1234,"metadata":"...",
 *    "state":{"ociVersion":"1.0.2","id":"...","status":"creating","pid":1234,
 *             "bundle":"...","annotations":{...}}}
 */
#ifndef SV_HANDOFF_H
#define SV_HANDOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HO_MAX_MESSAGE (64 * 1024) /* larger messages are refused */

struct ho_info {
	int32_t pid;	    /* "pid": the container process, as the sender sees it */
	char id[128];	    /* "state.id": the container id ("" if absent) */
	char metadata[512]; /* "metadata": listenerMetadata ("" if absent) */
	char bundle[256];   /* "state.bundle" ("" if absent) */
};

/* Send info and listener_fd in one sendmsg. 0 or -errno. */
int ho_send(int sock, int listener_fd, const struct ho_info *info);

/*
 * Receive one message: read until the JSON object is complete (or EOF), take the fd named
 * "seccompFd" and close every other fd that came along. 0 with *listener_fd set, or -errno with
 * a sentence in err: -EPROTO for malformed JSON or a message without "seccompFd" or without its
 * fd, -EMSGSIZE for a message over HO_MAX_MESSAGE, -ENOTSOCK... as the socket says.
 * timeout_ms bounds the whole receive (-1: none); -ETIMEDOUT when it passes.
 */
int ho_recv(int sock, int *listener_fd, struct ho_info *info, int timeout_ms, char *err,
	    size_t errlen);

/* Parse a message already in memory (exposed for tests and the fuzzer): 0 or -EPROTO.
   *fd_index gets the SCM_RIGHTS slot named "seccompFd". */
int ho_parse(const char *json, size_t len, struct ho_info *info, int *fd_index, char *err,
	     size_t errlen);

#endif
