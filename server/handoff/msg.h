/* SPDX-License-Identifier: MIT */
/*
 * The agent message: the JSON "container process state" that names a seccomp listener fd handed
 * to a supervisor, in the shape of the OCI runtime-spec seccomp agent protocol (runtime-spec
 * config-linux.md, "listenerPath"). runc sends exactly this, semvisor-run the same, so one
 * reader serves both; the fds it names travel beside it (xfer.h), fds[i] naming SCM_RIGHTS
 * slot i.
 *
 *   {"ociVersion":"1.0.2","fds":["seccompFd"],"pid":1234,"metadata":"...",
 *    "state":{"ociVersion":"1.0.2","id":"...","status":"creating","pid":1234,
 *             "bundle":"...","annotations":{...}}}
 */
#ifndef SV_HANDOFF_MSG_H
#define SV_HANDOFF_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HO_MAX_MESSAGE (64 * 1024) /* larger messages are refused */
#define HO_MAX_DEPTH   32	   /* objects and arrays nest at most this deep */
/* SCM_RIGHTS slots a message may name or carry; runc sends one. More is a protocol error. */
#define HO_MAX_FDS 16

struct ho_info {
	int32_t pid;	    /* "pid": the container process, as the sender sees it */
	char id[128];	    /* "state.id": the container id ("" if absent) */
	char metadata[512]; /* "metadata": listenerMetadata ("" if absent) */
	char bundle[256];   /* "state.bundle" ("" if absent) */
	/*
	 * Kubernetes' names for the container, from "state.annotations" (msg.c says which keys):
	 * each "" if absent or not a name. Only for people to read (the client's name in
	 * `semvisorctl clients`, metrics and logs): nothing is decided by them.
	 */
	char pod_ns[64];     /* a namespace is a DNS label: at most 63 bytes */
	char pod[254];	     /* a pod name is a DNS subdomain: at most 253 */
	char container[64];  /* a DNS label */
	char name_note[192]; /* which annotation was ignored and why, for the log ("" if none) */
};

/* Large enough for every name ho_client_name writes. */
#define HO_CLIENT_NAME_MAX 384

/* Large enough for every message ho_build writes: each byte escapes to at most six ("\u001f"). */
#define HO_BUILD_MAX                                                                               \
	(256 + 6 * (sizeof(((struct ho_info *)0)->id) + sizeof(((struct ho_info *)0)->metadata) +  \
		    sizeof(((struct ho_info *)0)->bundle)))

/* Parse a message already in memory: 0, or -EPROTO (-ENOMEM if the decoder ran out of memory)
   with a sentence in err. *fd_index gets the SCM_RIGHTS slot named "seccompFd". */
int ho_parse(const char *json, size_t len, struct ho_info *info, int *fd_index, char *err,
	     size_t errlen);

/* The message runc would send for info, into buf (not NUL-terminated): 0 and *len, or -EINVAL
   for a pid that is no pid or a string that is unterminated or not UTF-8, -ENOMEM, or
   -EOVERFLOW if cap is short (HO_BUILD_MAX never is). */
int ho_build(const struct ho_info *info, char *buf, size_t cap, size_t *len);

/*
 * A client's name for people: "NAMESPACE/POD/CONTAINER" (the parts present, '/'-joined) when the
 * annotations name it, else "ID (pid N)", else "pid N". Cut to cap, never overrun.
 */
void ho_client_name(const struct ho_info *info, char *buf, size_t cap);

/* The sentence for the caller's err buffer (none if err is NULL or errlen 0). */
void ho_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
