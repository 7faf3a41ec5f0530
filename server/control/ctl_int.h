/* SPDX-License-Identifier: MIT */
/*
 * Control server internals shared by control.c (sockets, connections, the loop) and ctl_answer.c
 * (answering a request from the supervisor's state). Everything here runs on the control
 * server's thread only.
 */
#ifndef SV_CTL_INT_H
#define SV_CTL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "control/ctl_frame.h"
#include "engine/sem.h"
#include "lock/lock.h"
#include "notify/notify.h"

/*
 * Memory for one reply's messages: bump-allocated in chunks by ctl_answer.c, all freed at once
 * once the reply is packed. Control plane only, so the allocators exit on failure (x prefix), as
 * at start-up.
 */
struct ctl_arena {
	struct ctl_chunk *chunks;
};

void ctl_arena_free(struct ctl_arena *a);

/* What answering needs besides the request. */
struct ctl_ctx {
	struct nt_super *super;
	int64_t started_ns;		/* CLOCK_MONOTONIC at ctl_server_start() */
	struct sv_lock_stats lock_base; /* lock counters at the last Reset: they cannot be zeroed */
	uid_t overflow_uid;		/* what an id unmapped in our user namespace reads as */
	gid_t overflow_gid;
	FILE *log;
};

/*
 * Who sent the request: SO_PEERCRED (effective uid and gid) and SO_PEERGROUPS (supplementary
 * groups) as they were at connect(), in the server's user namespace, the one the engine keeps
 * set owners in.
 */
struct ctl_peer {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool privileged; /* root or the socket's owner: every request, every set */
	int ngroups;
	gid_t *groups;
};

int64_t ctl_now_ns(void);

/* A context for s: counters since now, the overflow ids of our user namespace. */
void ctl_ctx_init(struct ctl_ctx *cx, struct nt_super *s, FILE *log);

/* May peer read the values of the set described by si (ctl_answer.c says why this rule)? */
bool ctl_may_read(const struct ctl_ctx *cx, const struct ctl_peer *peer,
		  const struct sv_set_info *si);

/*
 * Answer one request that ctl_request_decode() accepted (a Watch gets its first snapshot) into
 * reply, whose version and id the caller sets; every message hangs off arena a.
 */
void ctl_answer(struct ctl_ctx *cx, const struct ctl_peer *peer, const Semvisor__Request *req,
		Semvisor__Reply *reply, struct ctl_arena *a);

/* A Stats snapshot (Stats and Watch). */
Semvisor__Stats *ctl_stats_build(struct ctl_ctx *cx, struct ctl_arena *a, bool with_clients);

/* Make reply an error reply: status, and the sentence (copied into a). */
void ctl_reply_error(Semvisor__Reply *reply, struct ctl_arena *a, int status, const char *why);

#endif
